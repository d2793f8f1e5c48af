"""Sparse COO construction, inspection, coalescing and conversions, against torch.sparse."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

import gputensor as gt

from ._util import assert_same, coo_parts, np_of, pair, torch

# PyTorch warns once that it skips its (slow) invariant checks; irrelevant here.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")

SHAPES = [((4, 5), 2, 9), ((3, 4, 2), 2, 7), ((3, 4, 2, 3), 1, 5), ((6,), 1, 4)]


@pytest.mark.parametrize("shape,sparse_dim,nnz", SHAPES)
def test_construct_and_inspect(device, shape, sparse_dim, nnz):
    g, t = pair(shape, sparse_dim, nnz, device)
    assert isinstance(g, gt.Tensor) and g.is_sparse and g.layout == gt.sparse_coo
    assert g.sparse_dim() == t.sparse_dim() and g.dense_dim() == t.dense_dim()
    assert g._nnz() == t._nnz() and tuple(g.size()) == tuple(t.size())
    assert g.dtype is gt.float64 and g.device == gt.device(device)
    assert not g.is_coalesced()
    np.testing.assert_array_equal(g._indices().cpu().numpy(), t._indices().numpy())
    assert_same(g, t)


@pytest.mark.parametrize("shape,sparse_dim,nnz", SHAPES + [((4, 5), 2, 0), ((3, 2, 2), 1, 0)])
def test_coalesce_matches_torch(device, shape, sparse_dim, nnz):
    g, t = pair(shape, sparse_dim, nnz, device)
    gc, tc = g.coalesce(), t.coalesce()
    assert gc.is_coalesced() and gc._nnz() == tc._nnz()
    np.testing.assert_array_equal(gc.indices().cpu().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(np_of(gc.values()), tc.values().numpy(), rtol=1e-12)
    assert gc.coalesce() is gc


@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.bfloat16, gt.int64, gt.int32])
def test_coalesce_dtypes(device, dtype):
    idx = gt.tensor([[2, 0, 2, 1, 0], [1, 1, 1, 0, 1]])
    vals = gt.tensor([1, 2, 3, 4, 5]).to(dtype)
    s = gt.sparse_coo_tensor(idx, vals, (3, 2), device=device).coalesce()
    assert s.dtype is dtype
    assert s.indices().tolist() == [[0, 1, 2], [1, 0, 1]]
    assert s.values().cpu().float().tolist() == [7.0, 4.0, 4.0]


@pytest.mark.parametrize("shape,sparse_dim,nnz", SHAPES + [((4, 5), 2, 0)])
def test_to_dense(device, shape, sparse_dim, nnz):
    g, t = pair(shape, sparse_dim, nnz, device)
    d = g.to_dense()
    assert not d.is_sparse and d.device == gt.device(device)
    np.testing.assert_allclose(np_of(d), t.to_dense().numpy(), rtol=1e-12)


@pytest.mark.parametrize("sparse_dim", [None, 1, 2])
def test_to_sparse(device, sparse_dim):
    arr = np.array([[[0.0, 0.0], [1.5, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[2.0, -1.0], [0, 0]]])
    g = gt.tensor(arr, device=device).to_sparse(sparse_dim)
    t = torch.tensor(arr).to_sparse(sparse_dim) if sparse_dim else torch.tensor(arr).to_sparse()
    assert g.is_coalesced() and g.sparse_dim() == t.sparse_dim()
    np.testing.assert_array_equal(g.indices().cpu().numpy(), t.indices().numpy())
    np.testing.assert_array_equal(np_of(g.values()), t.values().numpy())
    assert g.to_sparse() is g
    np.testing.assert_array_equal(np_of(g.to_dense()), arr)


def test_size_inferred(device):
    g = gt.sparse_coo_tensor([[0, 3], [1, 0]], [1.0, 2.0], device=device)
    t = torch.sparse_coo_tensor([[0, 3], [1, 0]], [1.0, 2.0], check_invariants=False)
    assert tuple(g.shape) == tuple(t.shape) == (4, 2)
    h = gt.sparse_coo_tensor([[0, 1]], gt.ones(2, 3), device=device)
    assert tuple(h.shape) == (2, 3) and h.dense_dim() == 1


@pytest.mark.parametrize("indices,values,size,match", [
    ([[0, -1]], [1.0, 2.0], (3,), "negative index -1 for dim 0"),
    ([[0, 3]], [1.0, 2.0], (3,), "for dim 0, size is 3 but found index 3"),
    ([[0, 1], [0, 5]], [1.0, 2.0], (3, 4), "for dim 1, size is 4 but found index 5"),
    ([0, 1], [1.0, 2.0], (3,), "indices must be sparse_dim x nnz"),
    ([[0, 1]], [1.0, 2.0, 3.0], (3,), "same nnz"),
    ([[0, 1]], [1.0, 2.0], (3, 4), r"sparse_dim \(1\) \+ dense_dim \(0\)"),
    ([[0, 1]], [[1.0], [2.0]], (3, 2), "dense sizes"),
    ([[0.0, 1.0]], [1.0, 2.0], (3,), "must be an int64"),
])
def test_bad_input(device, indices, values, size, match):
    with pytest.raises(RuntimeError, match=match):
        gt.sparse_coo_tensor(indices, values, size, device=device)


def test_repr_device_suffix(device):
    g = gt.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,), device=device)
    if device == "cpu":
        assert "device=" not in repr(g)
    else:
        assert repr(g).endswith(f"\n       device='{device}', size=(3,), nnz=2, "
                                "layout=gputensor.sparse_coo)")


def test_repr_matches_torch():
    idx, vals = coo_parts((3, 4), 2, 3, duplicates=False)
    g = gt.sparse_coo_tensor(gt.tensor(idx), gt.tensor(vals, dtype=gt.float32), (3, 4))
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals, dtype=torch.float32),
                                (3, 4), check_invariants=False)
    assert repr(g) == repr(t).replace("torch.", "gputensor.")
    g2 = gt.sparse_coo_tensor(gt.tensor(idx), gt.tensor(vals), (3, 4), requires_grad=True)
    t2 = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), (3, 4), requires_grad=True)
    assert repr(g2) == repr(t2).replace("torch.", "gputensor.")
    i = gt.sparse_coo_tensor(gt.tensor(idx), gt.tensor([1, 2, 3]), (3, 4))
    ti = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor([1, 2, 3]), (3, 4))
    assert repr(i) == repr(ti).replace("torch.", "gputensor.")
    e = gt.sparse_coo_tensor(gt.zeros(2, 0, dtype=gt.int64), gt.zeros(0), (2, 3))
    te = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (2, 3))
    assert repr(e) == repr(te).replace("torch.", "gputensor.")


def test_dense_only_methods_raise(device):
    g, _ = pair((3, 4), 2, 4, device)
    for call in (lambda: g.exp(), lambda: gt.exp(g), lambda: g.view(12), lambda: g.stride(),
                 lambda: g.numpy(), lambda: g.relu(), lambda: g.reshape(12), lambda: g > 0,
                 lambda: g.contiguous(), lambda: g.storage(), lambda: g.max(),
                 lambda: g + 1.0, lambda: gt.sum(g), lambda: gt.cat([g, g])):
        with pytest.raises(RuntimeError, match="sparse"):
            call()


def test_values_and_indices_need_coalesced(device):
    g, _ = pair((3, 4), 2, 4, device)
    with pytest.raises(RuntimeError, match="uncoalesced"):
        g.values()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        g.indices()
    assert g._values()._shape == (4,)


def test_device_and_dtype_moves(device):
    g, t = pair((3, 4), 2, 5, "cpu")
    moved = g.to(device)
    assert moved.device == gt.device(device) and moved.is_sparse
    assert_same(moved.cpu(), t)
    f = moved.float()
    assert f.dtype is gt.float32 and f.is_sparse
    assert_same(f.double(), t, rtol=1e-6, atol=1e-6)
    if device != "cpu":  # cuda(): the current device
        assert g.cuda().device == gt.device(f"cuda:{gt.cuda.current_device()}")


def test_legacy_types(device):
    cls = gt.sparse.FloatTensor if device == "cpu" else gt.cuda.sparse.FloatTensor
    s = cls(gt.tensor([[0, 1], [1, 0]], device=device), gt.tensor([1.0, 2.0], device=device),
            (2, 2))
    assert isinstance(s, cls) and isinstance(s, gt.Tensor)
    assert not isinstance(s, gt.FloatTensor)
    expected = "gputensor.sparse.FloatTensor" if device == "cpu" else \
        "gputensor.cuda.sparse.FloatTensor"
    assert s.type() == expected
    e = cls(2, 3)
    assert e._nnz() == 0 and tuple(e.shape) == (2, 3) and e.sparse_dim() == 2
    assert np_of(e.to_dense()).tolist() == [[0.0] * 3] * 2
    assert gt.sparse.DoubleTensor is not gt.sparse.FloatTensor
    d = s.type(gt.sparse.DoubleTensor if device == "cpu" else gt.cuda.sparse.DoubleTensor)
    assert d.dtype is gt.float64 and d.is_sparse


def test_save_load_round_trip(device, tmp_path):
    g, t = pair((3, 4, 2), 2, 6, device)
    path = tmp_path / "s.pt"
    gt.save({"s": g, "c": g.coalesce()}, path)
    out = gt.load(path)
    assert out["s"].is_sparse and not out["s"].is_coalesced() and out["c"].is_coalesced()
    assert out["s"].device == gt.device(device)
    assert_same(out["s"], t)
    cpu = gt.load(path, map_location="cpu")["s"]
    assert cpu.device == gt.device("cpu")
    assert_same(cpu, t)
    assert_same(pickle.loads(pickle.dumps(g)), t)


def test_load_rejects_bad_sparse_record():
    buf = io.BytesIO()
    bad = gt.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,))
    bad._indices_t = gt.tensor([[0, 7]])   # corrupt it after validation
    gt.save(bad, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="found index 7"):
        gt.load(buf)


def test_clone_detach_zero(device):
    g, t = pair((3, 4), 2, 5, device, requires_grad=True)
    c = g.clone()
    assert c.grad_fn is not None and c.is_sparse
    assert_same(c, t)
    d = g.detach()
    assert not d.requires_grad and d.is_sparse
    z = g.detach().clone().zero_()
    assert z._nnz() == 0 and np.all(np_of(z) == 0)
