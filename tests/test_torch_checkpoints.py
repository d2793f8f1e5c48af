"""Checkpoints cross between PyTorch and gputensor both ways (PyTorch is the oracle).

torch.save -> gt.load (weights_only on and off, map_location, mmap) and gt.save ->
torch.load(weights_only=True): state_dicts, optimizer state, every dtype, views that share a
storage, nested containers, parameters, sparse tensors, shapes, dtypes and devices.
"""

from __future__ import annotations

import collections
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

import gputensor as gt
from gputensor import serialization

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8",
          "int16", "int32", "int64", "uint8", "bool"]


def _values(name: str, lib) -> object:
    """A small tensor of dtype ``name`` in ``lib`` (torch or gputensor), the same in both."""
    base = np.array([[0, 1, -2], [3, -4, 5]], np.float64) * 1.5
    if name == "bool":
        arr = base > 0
    elif name.startswith("complex"):
        arr = (base + 1j * base[::-1]).astype(name)
    elif name in ("float16", "bfloat16", "float32", "float64"):
        arr = base
    else:
        arr = np.abs(base).astype(name) if name == "uint8" else base.astype(name)
    if lib is torch:
        t = torch.from_numpy(np.ascontiguousarray(arr))
        return t.to(getattr(torch, name))
    return gt.tensor(arr).to(getattr(gt, name))


def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.detach().cpu().numpy()
    if t.dtype is gt.bfloat16:
        t = t.float()
    return t.detach().cpu().numpy()


def _torch_file(obj: object, tmp_path: Path, name: str = "t.pt") -> Path:
    path = tmp_path / name
    torch.save(obj, path)
    return path


def _gt_file(obj: object, tmp_path: Path, name: str = "g.pt") -> Path:
    path = tmp_path / name
    gt.save(obj, path)
    return path


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3)
        self.bn = torch.nn.BatchNorm2d(3)
        self.fc = torch.nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class GtNet(gt.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = gt.nn.Conv2d(2, 3, 3)
        self.bn = gt.nn.BatchNorm2d(3)
        self.fc = gt.nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(gt.relu(self.bn(self.conv(x))).flatten(1))


# -- torch.save -> gt.load ------------------------------------------------------------------------
@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("mmap", [False, True])
def test_every_dtype_from_torch(tmp_path: Path, weights_only: bool, mmap: bool) -> None:
    path = _torch_file({d: _values(d, torch) for d in DTYPES}, tmp_path)
    out = gt.load(path, weights_only=weights_only, mmap=mmap)
    for d in DTYPES:
        assert out[d].dtype is getattr(gt, d)
        np.testing.assert_array_equal(_np(out[d]), _np(_values(d, torch)))


def test_a_torch_model_state_dict_runs_the_same_model(tmp_path: Path, device: str) -> None:
    torch.manual_seed(0)
    net = Net()
    net.train()
    net(torch.randn(4, 2, 6, 6))  # running statistics and num_batches_tracked move
    net.eval()
    path = _torch_file(net.state_dict(), tmp_path)
    sd = gt.load(path, map_location=device)
    assert list(sd) == list(net.state_dict())
    assert sd["bn.num_batches_tracked"].dtype is gt.int64
    assert all(v.device == gt.device(device) for v in sd.values())
    mine = GtNet().to(device)
    mine.load_state_dict(sd)
    mine.eval()
    x = np.random.default_rng(1).standard_normal((2, 2, 6, 6)).astype(np.float32)
    want = net(torch.from_numpy(x)).detach().numpy()
    got = mine(gt.tensor(x, device=device)).detach().cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_optimizer_state_from_torch_resumes_like_torch(tmp_path: Path) -> None:
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3, 2))
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        (w ** 2).sum().backward()
        opt.step()
    path = _torch_file({"w": w, "opt": opt.state_dict()}, tmp_path)
    ck = gt.load(path)
    assert isinstance(ck["w"], gt.nn.Parameter) and ck["w"].requires_grad
    gw = ck["w"]
    gopt = gt.optim.Adam([gw], lr=0.1)
    gopt.load_state_dict(ck["opt"])
    for _ in range(2):
        opt.zero_grad()
        (w ** 2).sum().backward()
        opt.step()
        gopt.zero_grad()
        (gw ** 2).sum().backward()
        gopt.step()
    np.testing.assert_allclose(gw.detach().numpy(), w.detach().numpy(), rtol=1e-6)


def test_views_from_torch_share_one_storage(tmp_path: Path) -> None:
    base = torch.arange(24.0).reshape(4, 6)
    path = _torch_file({"base": base, "t": base.t(), "tail": base[1:, ::2], "row": base[2]},
                       tmp_path)
    out = gt.load(path)
    assert len({id(v.untyped_storage()) for v in out.values()}) == 1
    for k in ("t", "tail", "row"):
        ref = {"t": base.t(), "tail": base[1:, ::2], "row": base[2]}[k]
        assert out[k].stride() == ref.stride() and out[k].storage_offset() == \
            ref.storage_offset()
        np.testing.assert_array_equal(out[k].numpy(), ref.numpy())
    out["base"][2, 0] = -1.0  # one storage: the row view sees the write
    assert out["row"][0].item() == -1.0


def test_containers_shapes_dtypes_devices_and_sparse_from_torch(tmp_path: Path) -> None:
    obj = {"list": [torch.ones(2), (torch.zeros(1, dtype=torch.int64), 3)],
           "od": collections.OrderedDict(a=torch.tensor(2.5)), "set": {1, 2},
           "size": torch.Size([2, 3]), "dtype": torch.float16, "dev": torch.device("cuda", 1),
           "empty": torch.empty(0, 3), "scalar": torch.tensor(7),
           "sparse": torch.sparse_coo_tensor([[0, 2], [1, 0]], [3.0, 4.0], (3, 2)),
           "bytes": b"\x00\xff", "text": "ok"}
    out = gt.load(_torch_file(obj, tmp_path))
    assert out["list"][0].tolist() == [1.0, 1.0] and out["list"][1][1] == 3
    assert out["od"]["a"].item() == 2.5 and out["set"] == {1, 2}
    assert out["size"] == gt.Size([2, 3]) and isinstance(out["size"], gt.Size)
    assert out["dtype"] is gt.float16 and out["dev"] == gt.device("cuda:1")
    assert tuple(out["empty"].shape) == (0, 3) and out["scalar"].item() == 7
    assert out["sparse"].is_sparse
    np.testing.assert_array_equal(out["sparse"].to_dense().numpy(),
                                  obj["sparse"].to_dense().numpy())
    assert out["bytes"] == b"\x00\xff" and out["text"] == "ok"


def test_mmap_views_the_file_copy_on_write(tmp_path: Path) -> None:
    path = _torch_file({"w": torch.arange(1000.0)}, tmp_path)
    before = path.read_bytes()
    out = gt.load(path, mmap=True)
    w = out["w"]
    assert isinstance(w.untyped_storage()._buf.base, np.memmap)
    w[0] = 123.0
    assert w[0].item() == 123.0 and path.read_bytes() == before
    with pytest.raises(ValueError, match="file path"):
        gt.load(io.BytesIO(before), mmap=True)


# -- gt.save -> torch.load ---------------------------------------------------------------------
def test_every_dtype_to_torch_weights_only(tmp_path: Path, device: str) -> None:
    path = _gt_file({d: _values(d, gt).to(device) for d in DTYPES}, tmp_path)
    out = torch.load(path, weights_only=True, map_location="cpu")
    for d in DTYPES:
        assert out[d].dtype == getattr(torch, d)
        np.testing.assert_array_equal(_np(out[d]), _np(_values(d, gt)))


def test_a_gt_model_state_dict_runs_the_same_model_in_torch(tmp_path: Path) -> None:
    gt.manual_seed(0)
    mine = GtNet()
    mine.train()
    mine(gt.randn(4, 2, 6, 6))
    mine.eval()
    path = _gt_file({"model": mine.state_dict(), "epoch": 3}, tmp_path)
    ck = torch.load(path, weights_only=True)
    net = Net()
    net.load_state_dict(ck["model"])
    net.eval()
    assert ck["epoch"] == 3
    x = np.random.default_rng(1).standard_normal((2, 2, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(net(torch.from_numpy(x)).detach().numpy(),
                               mine(gt.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_views_params_and_metadata_to_torch(tmp_path: Path) -> None:
    base = gt.arange(24.0).reshape(4, 6)
    p = gt.nn.Parameter(gt.ones(2, 2))
    obj = {"base": base, "tail": base[1:, ::2], "p": p, "size": gt.Size([4]),
           "dtype": gt.bfloat16, "dev": gt.device("cuda:1"), "od": collections.OrderedDict(x=1),
           "sparse": gt.sparse_coo_tensor([[0, 2], [1, 0]], [3.0, 4.0], (3, 2)),
           "bytes": b"\x01", "set": {3}}
    out = torch.load(_gt_file(obj, tmp_path), weights_only=True)
    assert out["tail"].untyped_storage().data_ptr() == out["base"].untyped_storage().data_ptr()
    assert out["tail"].stride() == (6, 2) and out["tail"].storage_offset() == 6
    assert isinstance(out["p"], torch.nn.Parameter) and out["p"].requires_grad
    assert out["size"] == torch.Size([4]) and out["dtype"] is torch.bfloat16
    assert out["dev"] == torch.device("cuda", 1) and out["od"] == {"x": 1}
    assert out["sparse"].is_sparse and out["sparse"].to_dense().tolist() == \
        [[0.0, 3.0], [0.0, 0.0], [4.0, 0.0]]
    assert out["bytes"] == b"\x01" and out["set"] == {3}


def test_the_archive_has_torch_s_layout(tmp_path: Path) -> None:
    path = _gt_file({"a": gt.ones(3), "b": gt.zeros(5, dtype=gt.int64)}, tmp_path)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert {n.split("/")[0] for n in names} == {"archive"}
        assert zf.read("archive/version") == b"3\n" and zf.read("archive/byteorder") in (
            b"little", b"big")
        for info in zf.infolist():
            if "/data/" in info.filename:
                start = info.header_offset + 30 + len(info.filename) + len(info.extra)
                assert start % serialization.STORAGE_ALIGNMENT == 0
    with open(path, "rb") as f:  # saving the same object twice gives the same bytes
        first = f.read()
    assert _gt_file({"a": gt.ones(3), "b": gt.zeros(5, dtype=gt.int64)}, tmp_path,
                    "again.pt").read_bytes() == first


# -- allowlisted classes ---------------------------------------------------------------------------
class TrainConfig:
    def __init__(self, lr: float, name: str) -> None:
        self.lr, self.name = lr, name


class WithSetState:
    def __init__(self) -> None:
        self.v = 1

    def __setstate__(self, state: dict) -> None:
        self.v = state["v"] * 10


def test_allowed_classes_load_with_their_state(tmp_path: Path) -> None:
    path = _torch_file({"cfg": TrainConfig(0.1, "run"), "s": WithSetState()}, tmp_path)
    with pytest.raises(serialization.WeightsOnlyUnpicklingError, match="TrainConfig"):
        gt.load(path)
    with serialization.safe_globals([TrainConfig, WithSetState]):
        out = gt.load(path)
    assert (out["cfg"].lr, out["cfg"].name, out["s"].v) == (0.1, "run", 10)
    with pytest.raises(serialization.WeightsOnlyUnpicklingError):  # only inside the block
        gt.load(path)
    serialization.add_safe_globals([TrainConfig, WithSetState])
    try:
        assert gt.load(path)["cfg"].lr == 0.1
    finally:
        serialization.clear_safe_globals()
    with pytest.raises(serialization.WeightsOnlyUnpicklingError):
        gt.load(path)
    assert gt.load(path, weights_only=False)["cfg"].name == "run"


def test_older_gputensor_checkpoints_still_load() -> None:
    """A checkpoint of gputensor's format before PyTorch's layout (records at the root)."""
    here = Path(__file__).parent / "data" / "gputensor_v1_checkpoint.pt"
    out = gt.load(here)
    assert out["w"].tolist() == [[1.0, 2.0], [3.0, 4.0]] and out["step"] == 5
    assert out["view"].tolist() == [2.0, 4.0] and \
        out["view"].untyped_storage() is out["w"].untyped_storage()


# -- PyTorch's format before 1.6 -------------------------------------------------------------------
def _legacy_file(obj: object, tmp_path: Path) -> Path:
    path = tmp_path / "legacy.pt"
    torch.save(obj, path, _use_new_zipfile_serialization=False)
    return path


@pytest.mark.parametrize("weights_only", [True, False])
def test_legacy_torch_files_load(tmp_path: Path, weights_only: bool, device: str) -> None:
    base = torch.arange(12.0).reshape(3, 4)
    obj = {"model": Net().state_dict(), "base": base, "col": base[:, 1],
           **{d: _values(d, torch) for d in DTYPES}}
    out = gt.load(_legacy_file(obj, tmp_path), weights_only=weights_only, map_location=device)
    for d in DTYPES:
        assert out[d].dtype is getattr(gt, d) and out[d].device == gt.device(device)
        np.testing.assert_array_equal(_np(out[d]), _np(_values(d, torch)))
    assert out["col"].untyped_storage() is out["base"].untyped_storage()
    np.testing.assert_array_equal(_np(out["col"]), base[:, 1].numpy())
    assert list(out["model"]) == list(obj["model"])


def test_corrupt_legacy_files_fail_clearly(tmp_path: Path) -> None:
    path = _legacy_file({"w": torch.arange(100.0)}, tmp_path)
    data = path.read_bytes()
    for cut in (len(data) - 10, len(data) - 400):
        path.write_bytes(data[:cut])
        with pytest.raises(RuntimeError, match=r"gputensor\.load\(.*(truncated|corrupt|missing)"):
            gt.load(path)
    path.write_bytes(data)
    with pytest.raises(RuntimeError, match="mmap=True"):
        gt.load(path, mmap=True)
