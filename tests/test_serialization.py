"""gt.save / gt.load: round trips, shared storages, map_location, weights_only, corrupt files."""

from __future__ import annotations

import builtins
import collections
import io
import os
import pickle
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import gputensor as gt
from gputensor import serialization
from gputensor.nn.parameter import Parameter
from gputensor.serialization import (
    WeightsOnlyUnpicklingError,
    load,
    register_safe_global,
    save,
)
from gputensor.storage import allocator, copy_table
from gputensor.storage.typed import STORAGE_TYPES
from tests.helpers import ALL_DTYPES, random_array


def roundtrip(obj: object, **load_kwargs: object) -> object:
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    return load(buf, **load_kwargs)


def host(t: gt.Tensor) -> np.ndarray:
    return t.cpu().numpy()


def checkpoint_bytes(obj: object) -> bytes:
    buf = io.BytesIO()
    save(obj, buf)
    return buf.getvalue()


PREFIX = "archive/"  # the top-level folder of PyTorch's layout, which gt.save writes


def records(zf: zipfile.ZipFile) -> list[str]:
    """The archive's record names, without the top-level folder."""
    return [n[len(PREFIX):] if n.startswith(PREFIX) else n for n in zf.namelist()]


def rezip(data: bytes, replace: dict[str, bytes | None]) -> bytes:
    """A copy of a checkpoint with records (named without the top-level folder) replaced, or
    dropped for None."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        if any(n.startswith(PREFIX) for n in src.namelist()):
            replace = {PREFIX + k: v for k, v in replace.items()}
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            new = replace.get(name, src.read(name))
            if new is not None:
                dst.writestr(name, new)
        for name, new in replace.items():
            if name not in src.namelist() and new is not None:
                dst.writestr(name, new)
    return out.getvalue()


class TensorWithTag(gt.Tensor):
    """A tensor subclass defined at module level, so pickle can name it."""

    __slots__ = ()


# -- round trips -----------------------------------------------------------------------------------
def test_round_trip_on_device(device: str, tmp_path: Path) -> None:
    x = gt.tensor(random_array((3, 4), gt.float32), device=device)
    path = tmp_path / "ckpt.pt"
    save({"x": x, "n": 3}, path)
    out = load(path)
    assert out["n"] == 3
    assert out["x"].device == gt.device(device)
    assert out["x"].dtype is gt.float32 and out["x"].shape == (3, 4)
    np.testing.assert_array_equal(host(out["x"]), host(x))
    assert out["x"].is_contiguous() and out["x"].stride() == (4, 1)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=lambda d: d.name)
def test_all_dtypes_bitwise(device: str, dt: gt.dtype) -> None:
    arr = random_array((2, 5), dt, seed=3)
    x = gt.tensor(arr, dtype=dt, device=device)
    y = roundtrip([x, x.storage()])
    assert y[0].dtype is dt and y[0].device == gt.device(device)
    np.testing.assert_array_equal(host(y[0]).view(np.uint8), arr.view(np.uint8))
    assert type(y[1]) is type(x.storage()) and y[1].dtype is dt
    assert y[1].untyped() is y[0].untyped_storage()


def test_shared_views_share_one_storage(device: str) -> None:
    base = gt.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device)
    views = {"base": base, "tail": base[1:], "col": base[:, 1], "t": base.t()}
    buf = io.BytesIO()
    save(views, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        assert sorted(n for n in records(zf) if n.startswith("data/")) == ["data/0"]
    buf.seek(0)
    out = load(buf)
    storage = out["base"].untyped_storage()
    assert all(v.untyped_storage() is storage for v in out.values())
    assert out["col"].stride() == (4,) and out["col"].storage_offset() == 1
    assert out["t"].stride() == (1, 4) and not out["t"].is_contiguous()
    for name, v in views.items():
        np.testing.assert_array_equal(host(out[name]), host(v))
    storage.fill_(0)  # a write through the shared storage shows in every view
    assert all(not host(v).any() for v in out.values())


def test_modifying_one_view_shows_in_the_other() -> None:
    x = gt.arange(6.0)
    a, b = roundtrip((x, x[1:]))
    a.numpy()[:] *= 10  # a write through a's own host view (no kernel compile in this test)
    np.testing.assert_array_equal(b.numpy(), [10, 20, 30, 40, 50])


def test_same_tensor_twice_keeps_identity() -> None:
    x = gt.ones(3)
    out = roundtrip({"a": x, "b": [x, (x,)]})
    assert out["a"] is out["b"][0] is out["b"][1][0]


def test_tensor_with_its_storages() -> None:
    x = gt.arange(4, dtype=gt.int32)
    t, typed = roundtrip([x, x.storage()])
    assert isinstance(typed, gt.IntStorage) and typed.untyped() is t.untyped_storage()
    typed[2] = 40
    assert t.tolist() == [0, 1, 40, 3]
    untyped = roundtrip(x.untyped_storage())
    assert isinstance(untyped, gt.UntypedStorage) and untyped.nbytes() == 16
    # As torch.save: one storage may not be saved as two dtypes (int32 and untyped bytes).
    with pytest.raises(RuntimeError, match="view the same data as different types"):
        save([x, x.untyped_storage()], io.BytesIO())


def test_non_contiguous_view_alone_keeps_its_whole_storage(device: str) -> None:
    base = gt.tensor(np.arange(24, dtype=np.float64).reshape(4, 6), device=device)
    view = base[1:, ::2]
    out = roundtrip(view)
    assert out.shape == (3, 3) and out.stride() == (6, 2) and out.storage_offset() == 6
    assert out.untyped_storage().nbytes() == base.untyped_storage().nbytes()
    np.testing.assert_array_equal(host(out), host(view))


def test_zero_dim_and_empty_tensors(device: str) -> None:
    vals = {"scalar": gt.tensor(3.5, device=device),
            "scalar_view": gt.tensor([1, 2, 3], device=device)[2],
            "empty": gt.zeros(0, 3, device=device),
            "empty_int": gt.empty(0, dtype=gt.int64, device=device)}
    out = roundtrip(vals)
    assert out["scalar"].shape == () and out["scalar"].item() == 3.5
    assert out["scalar_view"].shape == () and out["scalar_view"].item() == 3
    assert out["scalar_view"].storage_offset() == 2
    assert out["empty"].shape == (0, 3) and out["empty"].dtype is gt.float32
    assert out["empty_int"].shape == (0,) and out["empty_int"].dtype is gt.int64


def test_requires_grad_is_preserved_on_leaves() -> None:
    w = gt.randn(2, 2).requires_grad_()
    b = gt.zeros(2)
    w2, b2 = roundtrip([w, b])
    assert w2.requires_grad and w2.is_leaf and not b2.requires_grad
    assert w2.grad is None


def test_nested_containers_and_optimizer_state() -> None:
    p0, p1 = gt.randn(3), gt.randn(2, 2)
    state_dict = collections.OrderedDict([("layer.weight", p1), ("layer.bias", p0)])
    optim = {"state": {0: {"step": 3, "exp_avg": gt.zeros(3), "exp_avg_sq": gt.ones(3)}},
             "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8,
                               "amsgrad": False, "params": [0, 1], "name": None}]}
    extras = {"set": {1, 2}, "frozen": frozenset("ab"), "complex": 1 + 2j, "slice": slice(1, 5, 2),
              "bytes": b"\x00\xff", "size": gt.Size([2, 3]), "device": gt.device("cpu"),
              "dtype": gt.bfloat16, "counts": collections.defaultdict(list, a=[1]),
              "range": range(3), "inf": float("inf")}
    out = roundtrip({"model": state_dict, "optim": optim, "extras": extras, "epoch": 7})
    assert type(out["model"]) is collections.OrderedDict
    assert list(out["model"]) == ["layer.weight", "layer.bias"]
    np.testing.assert_array_equal(out["model"]["layer.weight"].numpy(), p1.numpy())
    st = out["optim"]["state"][0]
    assert st["step"] == 3 and st["exp_avg_sq"].tolist() == [1.0, 1.0, 1.0]
    assert out["optim"]["param_groups"] == optim["param_groups"]
    assert out["extras"] == extras and out["extras"]["dtype"] is gt.bfloat16
    assert type(out["extras"]["size"]) is gt.Size and out["epoch"] == 7


@pytest.mark.parametrize("cls_name", ["FloatStorage", "BFloat16Storage", "ComplexDoubleStorage",
                                      "BoolStorage"])
def test_typed_storage_round_trip(cls_name: str) -> None:
    cls = getattr(gt, cls_name)
    s = cls([1, 0, 1])
    out = roundtrip(s)
    assert type(out) is cls and out.tolist() == s.tolist()


def test_parameter_round_trips_as_parameter() -> None:
    register_safe_global(Parameter)  # what gputensor.nn does on import; idempotent
    p = Parameter(gt.randn(2, 3))
    frozen = Parameter(gt.randn(2), requires_grad=False)
    a, b = roundtrip([p, frozen])
    assert type(a) is Parameter and a.requires_grad and a.is_leaf
    assert type(b) is Parameter and not b.requires_grad
    np.testing.assert_array_equal(a.detach().numpy(), p.detach().numpy())


def test_tensor_subclass_needs_registration_for_weights_only() -> None:
    x = TensorWithTag._make(gt.ones(2)._storage, gt.float32, (2,), (1,), 0)
    data = checkpoint_bytes(x)
    with pytest.raises(WeightsOnlyUnpicklingError, match="TensorWithTag"):
        load(io.BytesIO(data))
    assert type(load(io.BytesIO(data), weights_only=False)) is TensorWithTag
    register_safe_global(TensorWithTag)
    try:
        out = load(io.BytesIO(data))
        assert type(out) is TensorWithTag and out.tolist() == [1.0, 1.0]
    finally:
        serialization._SAFE_GLOBALS.pop((__name__, "TensorWithTag"))


def test_public_python_attributes_survive_private_ones_do_not() -> None:
    x = gt.ones(2)
    x.tag = "hello"
    x._scratch = object()  # private state is never pickled (an object() would fail to load)
    out = roundtrip(x)
    assert type(out) is gt.Tensor and out.tag == "hello" and "_scratch" not in out.__dict__


def test_numpy_ints_in_metadata_pickle_as_plain_ints() -> None:
    x = gt.Tensor._make(gt.arange(4.0)._storage, gt.float32, (np.int64(2),), (np.int64(2),),
                        np.int64(1))
    out = roundtrip(x)
    assert out.tolist() == [1.0, 3.0] and type(out.shape[0]) is int


def test_saving_is_deterministic() -> None:
    obj = {"w": gt.arange(5.0), "k": [1, 2]}
    assert checkpoint_bytes(obj) == checkpoint_bytes(obj)


def test_file_objects_and_streams(tmp_path: Path) -> None:
    x = gt.arange(10, dtype=gt.int16)

    class WriteOnly:  # a pipe-like stream: no seek, no tell
        def __init__(self) -> None:
            self.chunks: list[bytes] = []

        def write(self, b: bytes) -> int:
            self.chunks.append(bytes(b))
            return len(b)

        def flush(self) -> None:
            pass

    class ReadOnly:
        def __init__(self, data: bytes) -> None:
            self.inner = io.BytesIO(data)

        def read(self, n: int = -1) -> bytes:
            return self.inner.read(n)

        def seekable(self) -> bool:
            return False

    sink = WriteOnly()
    save(x, sink)
    assert load(ReadOnly(b"".join(sink.chunks))).tolist() == list(range(10))
    path = tmp_path / "f.pt"
    with open(path, "wb") as f:
        save(x, f)
    with open(path, "rb") as f:
        assert load(f).tolist() == list(range(10))
    with open(path) as f, pytest.raises(TypeError, match="binary"):
        load(f)


def test_big_endian_records_are_swapped() -> None:
    vals = np.array([1.5, -2.0, 3.25], np.float32)
    cvals = np.array([1 + 2j, -3.5j], np.complex128)
    data = checkpoint_bytes([gt.from_numpy(vals), gt.from_numpy(cvals)])
    big = rezip(data, {"byteorder": b"big", "data/0": vals.astype(">f4").tobytes(),
                       "data/1": cvals.astype(">c16").tobytes()})
    a, c = load(io.BytesIO(big))
    np.testing.assert_array_equal(a.numpy(), vals)
    np.testing.assert_array_equal(c.numpy(), cvals)


# -- map_location ----------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["cpu", gt.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"}],
                         ids=["str", "device", "dict", "dict-unused"])
def test_map_location_to_cpu(where: object) -> None:
    x = gt.arange(3.0)
    out = roundtrip([x, x[1:]], map_location=where)
    assert out[0].device == gt.device("cpu") and out[0].tolist() == [0.0, 1.0, 2.0]
    assert out[1].untyped_storage() is out[0].untyped_storage()


def test_map_location_callable() -> None:
    seen = []

    def keep(storage: gt.UntypedStorage, location: str) -> gt.UntypedStorage:
        seen.append((type(storage), storage.nbytes(), location))
        return storage

    out = roundtrip({"a": gt.ones(4), "b": gt.zeros(2, dtype=gt.int64)}, map_location=keep)
    assert out["a"].tolist() == [1.0] * 4 and out["b"].tolist() == [0, 0]
    assert sorted(seen) == [(gt.UntypedStorage, 16, "cpu")] * 2
    assert roundtrip(gt.ones(2), map_location=lambda s, loc: None).tolist() == [1.0, 1.0]
    typed = roundtrip(gt.ones(2), map_location=lambda s, loc: gt.ByteStorage(wrap_storage=s))
    assert typed.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="map_location callable"):
        roundtrip(gt.ones(2), map_location=lambda s, loc: "nope")
    with pytest.raises(TypeError, match="map_location must be"):
        roundtrip(gt.ones(2), map_location=3)


class _FakeCudaDriver(allocator.CPUDriver):
    """Host memory posing as a CUDA device: exercises the device paths on CPU-only machines."""

    device_type = "cuda"

    def to_host(self, buf: np.ndarray, byte_offset: int, nbytes: int) -> np.ndarray:
        return super().to_host(buf, byte_offset, nbytes).copy()  # device memory: always a copy

    def device_count(self) -> int:
        return 1

    def synchronize(self) -> None:
        pass

    def device_name(self, index: int) -> str:
        return "fake"


def _set_cuda_driver(driver: object | None) -> None:
    if driver is None:
        allocator.DRIVERS.pop("cuda", None)
    else:
        allocator.DRIVERS["cuda"] = driver
    copy_table.rebuild(list(STORAGE_TYPES.values()))


@pytest.fixture
def cuda_driver() -> Iterator[object]:
    """The real CUDA driver when there is one, else the fake; restored afterwards."""
    old = allocator.DRIVERS.get("cuda")
    _set_cuda_driver(old or _FakeCudaDriver())
    yield allocator.DRIVERS["cuda"]
    _set_cuda_driver(old)


def test_cuda_storages_restore_to_cuda_or_map_elsewhere(cuda_driver: object) -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = gt.from_numpy(arr).to("cuda")
    data = checkpoint_bytes({"x": x, "row": x[1]})
    out = load(io.BytesIO(data))
    assert out["x"].device == gt.device("cuda:0") and out["row"].device == gt.device("cuda:0")
    assert out["row"].untyped_storage() is out["x"].untyped_storage()
    np.testing.assert_array_equal(host(out["x"]), arr)
    seen = []
    for where in ("cpu", gt.device("cpu"), {"cuda:0": "cpu"},
                  lambda s, loc: seen.append(loc) or s):
        out = load(io.BytesIO(data), map_location=where)
        assert out["x"].device == gt.device("cpu")
        np.testing.assert_array_equal(out["row"].numpy(), arr[1])
    assert seen == ["cuda:0"]
    moved = roundtrip(gt.from_numpy(arr), map_location="cuda")
    assert moved.device == gt.device("cuda:0")
    np.testing.assert_array_equal(host(moved), arr)


def test_cuda_checkpoint_without_cuda_asks_for_map_location(cuda_driver: object,
                                                            tmp_path: Path) -> None:
    path = tmp_path / "gpu.pt"
    save(gt.ones(3).to("cuda"), path)
    _set_cuda_driver(None)
    with pytest.raises(RuntimeError, match=r"CUDA is not available.*map_location='cpu'") as e:
        load(path)
    assert str(path) in str(e.value)
    assert load(path, map_location="cpu").tolist() == [1.0, 1.0, 1.0]
    assert load(path, map_location={"cuda:0": "cpu"}).device == gt.device("cpu")


# -- weights_only ----------------------------------------------------------------------------------
class _Payload:
    def __init__(self, fn: object, arg: str) -> None:
        self.fn, self.arg = fn, arg

    def __reduce__(self) -> tuple:
        return (self.fn, (self.arg,))


@pytest.mark.parametrize("kind", ["system", "exec"])
def test_malicious_pickle_is_refused_and_runs_nothing(kind: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = (_Payload(os.system, f"touch '{marker}'") if kind == "system" else
               _Payload(builtins.exec, f"open({str(marker)!r}, 'w').close()"))
    evil = rezip(checkpoint_bytes(gt.ones(1)),
                 {"data.pkl": pickle.dumps({"w": 1.5, "x": payload}, protocol=4)})
    path = tmp_path / "evil.pt"
    path.write_bytes(evil)
    refused = "posix.system" if kind == "system" else "builtins.exec"
    with pytest.raises(pickle.UnpicklingError, match=refused) as e:
        load(path)
    assert isinstance(e.value, WeightsOnlyUnpicklingError)
    assert "weights_only=False" in str(e.value) and str(path) in str(e.value)
    assert not marker.exists()
    if kind == "exec":  # the payload is real: a trusting load runs it
        load(path, weights_only=False)
        assert marker.exists()


def test_build_opcode_is_refused() -> None:
    # GLOBAL gputensor._dtype.float32, then BUILD (None, {"itemsize": 1}): would mutate the dtype.
    payload = b"\x80\x04cgputensor._dtype\nfloat32\nN}\x8c\x08itemsize\x94K\x01s\x86b."
    evil = rezip(checkpoint_bytes(gt.ones(1)), {"data.pkl": payload})
    with pytest.raises(WeightsOnlyUnpicklingError, match="BUILD"):
        load(io.BytesIO(evil))
    assert gt.float32.itemsize == 4


def test_whole_objects_need_weights_only_false() -> None:
    obj = {"fn": np.float64(2.0)}
    data = checkpoint_bytes(obj)
    with pytest.raises(WeightsOnlyUnpicklingError, match="numpy"):
        load(io.BytesIO(data))
    assert load(io.BytesIO(data), weights_only=False) == obj


# -- corrupt files ---------------------------------------------------------------------------------
def _assert_clear_error(path: object, match: str = "") -> None:
    with pytest.raises(RuntimeError, match=match) as e:
        load(path)
    assert type(e.value) is not WeightsOnlyUnpicklingError
    assert str(path) in str(e.value)


@pytest.fixture
def good_checkpoint() -> bytes:
    return checkpoint_bytes({"w": gt.arange(64.0), "b": gt.ones(3, dtype=gt.int8)})


@pytest.mark.parametrize("cut", [0, 1, 4, 30, 100, 0.5, -22, -1])
def test_truncated_file(good_checkpoint: bytes, cut: float, tmp_path: Path) -> None:
    n = int(len(good_checkpoint) * cut) if isinstance(cut, float) else cut % len(good_checkpoint)
    path = tmp_path / "cut.pt"
    path.write_bytes(good_checkpoint[:n])
    _assert_clear_error(path, "truncated|corrupt")


@pytest.mark.parametrize("case", ["random", "missing-data.pkl", "missing-storage",
                                  "storage-too-short", "storage-too-long", "garbage-pickle",
                                  "newer-version", "bad-byteorder", "flipped-byte"])
def test_corrupt_archives(good_checkpoint: bytes, case: str, tmp_path: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(good_checkpoint)) as zf:
        w_key = "data/0" if zf.getinfo(PREFIX + "data/0").file_size == 256 else "data/1"
    edits = {"missing-data.pkl": ({"data.pkl": None}, "no single data.pkl record"),
             "missing-storage": ({w_key: None}, f"no '{w_key}' record"),
             "storage-too-short": ({w_key: b"\0" * 255}, "has 255 bytes, but"),
             "storage-too-long": ({w_key: b"\0" * 300}, "has 300 bytes, but"),
             "garbage-pickle": ({"data.pkl": b"\x80\x04not a pickle"}, "data.pkl"),
             "newer-version": ({"version": b"99\n"}, "newer"),
             "bad-byteorder": ({"byteorder": b"middle"}, "byteorder")}
    if case == "random":
        data, match = np.random.default_rng(0).bytes(2000), "not a readable zip"
    elif case == "flipped-byte":
        raw = bytearray(good_checkpoint)
        at = raw.find(np.arange(64.0, dtype=np.float32).tobytes())
        raw[at + 17] ^= 0xFF
        data, match = bytes(raw), "CRC"
    else:
        replace, match = edits[case]
        data = rezip(good_checkpoint, replace)
    path = tmp_path / "bad.pt"
    path.write_bytes(data)
    _assert_clear_error(path, match)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    _assert_clear_error(path, "not a readable zip")


def test_tensor_record_overrunning_its_storage(tmp_path: Path) -> None:
    small = gt.ones(2)
    bogus = gt.Tensor._make(small._storage, gt.float32, (100,), (1,), 0)  # metadata only
    path = tmp_path / "overrun.pt"
    save(bogus, path)
    _assert_clear_error(path, "reaches byte 400, but its storage has 8 bytes")


# -- atomic save -----------------------------------------------------------------------------------
def test_failed_save_keeps_the_old_checkpoint(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "model.pt"
    save({"v": gt.tensor([1.0, 2.0])}, path)
    os.chmod(path, 0o640)

    def boom(storage: object) -> None:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(serialization, "_storage_bytes", boom)
    with pytest.raises(OSError, match="disk full"):
        save({"v": gt.tensor([3.0, 4.0])}, path)
    assert os.listdir(tmp_path) == ["model.pt"]
    assert load(path)["v"].tolist() == [1.0, 2.0]
    monkeypatch.undo()
    save({"v": gt.tensor([5.0])}, str(path))
    assert os.listdir(tmp_path) == ["model.pt"]
    assert load(path)["v"].tolist() == [5.0]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_save_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="parent directory"):
        save(gt.ones(1), tmp_path / "missing" / "x.pt")
    with pytest.raises(IsADirectoryError):
        save(gt.ones(1), tmp_path)
    with pytest.raises(ValueError, match="pickle_protocol"):
        save(gt.ones(1), io.BytesIO(), pickle_protocol=1)
    with open(tmp_path / "t.txt", "w") as f, pytest.raises(TypeError, match="binary"):
        save(gt.ones(1), f)
    with pytest.raises((pickle.PicklingError, AttributeError)):  # Python raises either
        save({"f": lambda: 1}, tmp_path / "lam.pt")
    assert os.listdir(tmp_path) == ["t.txt"]
