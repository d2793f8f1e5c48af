"""The CUDA backend's scatter / in-place indexing kernels (kernels/cuda/scatter.cu) against the
CPU backend: duplicates (atomics, and the deterministic last-wins of plain assignment),
non-contiguous operands, sizes that cross block and chunk boundaries, 16-bit floats and 1/2-byte
integers (compare-and-swap on the containing word), device-side bounds errors, and an NVRTC
compile of the source for real GPUs.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.registry import CUDA

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")

DTYPES = [gt.float32, gt.float64, gt.float16, gt.bfloat16, gt.int64, gt.int32, gt.int16,
          gt.int8, gt.uint8]


def _arr(shape, dtype: gt.dtype, seed: int = 0, lo: int = -4, hi: int = 5) -> np.ndarray:
    """Small integers (exact in every dtype, so sums in any order agree)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(lo, hi, size=shape)
    if dtype is gt.uint8:
        a = np.abs(a)
    if dtype is gt.bool:
        return a > 0
    return a.astype(dtype.np_dtype)


def _both(fn, *arrays):
    """fn applied to CPU tensors and to CUDA tensors; returns both results as NumPy arrays."""
    out = []
    for dev in ("cpu", "cuda"):
        ts = [gt.tensor(a, device=dev) if isinstance(a, np.ndarray) else a for a in arrays]
        r = fn(*ts)
        out.append(r.cpu().numpy())
    return out


def _same(a: np.ndarray, b: np.ndarray) -> None:
    if a.dtype == ml_dtypes.bfloat16:
        a, b = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_array_equal(a, b)


def _nc(t: gt.Tensor) -> gt.Tensor:
    """A non-contiguous tensor with t's values (a transposed copy, transposed back)."""
    if t.dim() < 2:
        return t.repeat(2)[::2] if t.numel() else t
    return t.transpose(0, 1).contiguous().transpose(0, 1)


# -- scatter family -----------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_duplicates_last_wins_like_cpu(dtype: gt.dtype, dim: int) -> None:
    x = _arr((6, 7), dtype)
    shape = (20, 7) if dim == 0 else (6, 30)
    idx = np.random.default_rng(1).integers(0, x.shape[dim], size=shape)
    src = _arr(shape, dtype, seed=2)
    a, b = _both(lambda x, i, s: x.scatter(dim, i, s), x, idx, src)
    _same(a, b)
    a, b = _both(lambda x, i, s: _nc(x).scatter_(dim, _nc(i), _nc(s)), x, idx, src)
    _same(a, b)


@cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_cpu(dtype: gt.dtype, reduce: str, include_self: bool) -> None:
    if reduce == "prod":
        lo, hi = (0, 2) if dtype is gt.uint8 else (-1, 2)
    else:
        lo, hi = -4, 5
    x = _arr((5, 9), dtype, lo=lo, hi=hi)
    idx = np.random.default_rng(3).integers(0, 5, size=(12, 9))
    src = _arr((12, 9), dtype, seed=4, lo=lo, hi=hi)

    def fn(x, i, s):
        return _nc(x).scatter_reduce(0, i, s, reduce, include_self=include_self)
    a, b = _both(fn, x, idx, src)
    _same(a, b)


@cuda
def test_scatter_reduce_nan_propagates() -> None:
    x = np.zeros(3, np.float32)
    src = np.array([1.0, np.nan, 2.0, -1.0], np.float32)
    idx = np.array([0, 0, 1, 2])
    for reduce in ("amax", "amin"):
        a, b = _both(lambda x, i, s, r=reduce: x.scatter_reduce(0, i, s, r), x, idx, src)
        np.testing.assert_array_equal(a, b)
        assert np.isnan(b[0])


@cuda
def test_scatter_add_large_many_duplicates_exact() -> None:
    n = 70_000
    idx = np.random.default_rng(5).integers(0, 7, size=n)
    src = np.random.default_rng(6).integers(-1000, 1000, size=n)
    a, b = _both(lambda x, i, s: x.scatter_add(0, i, s), np.zeros(7, np.int64), idx, src)
    np.testing.assert_array_equal(a, b)
    a, b = _both(lambda x, i, s: x.scatter_add(0, i, s), np.zeros(7, np.float64), idx,
                 src.astype(np.float64))
    np.testing.assert_array_equal(a, b)  # integer-valued: every order is exact


@cuda
def test_scatter_scalar_and_legacy_reduce() -> None:
    x = _arr((4, 5), gt.float32)
    idx = np.array([[0, 1, 2, 3, 0], [3, 3, 3, 3, 3]])
    for kw in ({}, {"reduce": "add"}, {"reduce": "multiply"}):
        a, b = _both(lambda x, i, kw=kw: x.scatter(0, i, 2.5, **kw), x, idx)
        np.testing.assert_array_equal(a, b)


@cuda
@pytest.mark.parametrize("dtype", DTYPES + [gt.bool])
def test_index_add_matches_cpu(dtype: gt.dtype) -> None:
    x = _arr((8, 6), dtype)
    src = _arr((8, 11), dtype, seed=7)
    idx = np.array([0, 5, 5, 1, 0, 5, 2, 3, 3, 4, 0])
    alpha = True if dtype is gt.bool else 3
    a, b = _both(lambda x, i, s: _nc(x).index_add(1, i, _nc(s), alpha=alpha), x, idx, src)
    _same(a, b)


@cuda
@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.int8, gt.bool])
def test_index_copy_duplicates_last_wins_like_cpu(dtype: gt.dtype) -> None:
    x = _arr((3, 5, 2), dtype)
    src = _arr((3, 7, 2), dtype, seed=8)
    idx = np.array([4, 1, 4, 0, 1, 4, 2])
    a, b = _both(lambda x, i, s: x.index_copy(1, i, s), x, idx, src)
    _same(a, b)
    a, b = _both(lambda x, i, s: _nc(x).index_copy_(0, i, s[:, :5].transpose(0, 1)
                                                       .contiguous()[:3].contiguous()),
                 _arr((5, 3, 2), dtype), np.array([2, 2, 0]), src)
    _same(a, b)


@cuda
@pytest.mark.parametrize("dtype", [gt.float64, gt.bfloat16, gt.int16, gt.bool])
def test_index_fill_negative_and_duplicate_indices(dtype: gt.dtype) -> None:
    x = _arr((4, 300), dtype)
    idx = np.array([-1, 0, -300, 150, 150, 299])
    a, b = _both(lambda x, i: _nc(x).index_fill(1, i, 1), x, idx)
    _same(a, b)


# -- masks --------------------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.bfloat16, gt.int8, gt.bool])
def test_masked_fill_broadcast_and_noncontiguous(dtype: gt.dtype) -> None:
    x = _arr((50, 40), dtype)
    m = np.random.default_rng(9).random((50, 1)) > 0.5
    a, b = _both(lambda x, m: _nc(x).masked_fill_(m, 1), x, m)
    _same(a, b)
    m2 = np.random.default_rng(10).random(40) > 0.5
    a, b = _both(lambda x, m: x.masked_fill(m, -2), x, m2)
    _same(a, b)


@cuda
@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.int64, gt.int16, gt.bool])
def test_masked_scatter_large_crosses_chunks(dtype: gt.dtype) -> None:
    shape = (300, 257)  # > 256 blocks of 256: several tiles per chunk
    x = _arr(shape, dtype)
    m = np.random.default_rng(11).random(shape) > 0.3
    src = _arr((int(m.sum()) + 5,), dtype, seed=12)
    a, b = _both(lambda x, m, s: x.masked_scatter(m, s), x, m, src)
    _same(a, b)
    # Non-contiguous self and source, broadcast mask.
    row = np.random.default_rng(13).random(257) > 0.5
    src2 = _arr((600, 257), dtype, seed=14)
    a, b = _both(lambda x, m, s: _nc(x).masked_scatter_(m, _nc(s)), x, row, src2)
    _same(a, b)


@cuda
def test_masked_scatter_short_source_raises_on_device() -> None:
    x = gt.zeros(10, device="cuda")
    m = gt.ones(10, dtype=gt.bool, device="cuda")
    src = gt.arange(4, dtype=gt.float32, device="cuda")
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        CUDA.kernel("masked_scatter")(x, m, src)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    assert x.tolist()[:4] == [0.0, 1.0, 2.0, 3.0]  # in range: written; beyond: untouched


# -- index_put --------------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.int64, gt.int8, gt.uint8])
def test_index_put_accumulate_duplicates(dtype: gt.dtype) -> None:
    x = _arr((5, 6, 7), dtype, lo=0, hi=3)
    i0 = np.array([[0, 4, 4], [1, 0, 4]])
    i2 = np.array([6, -1, 6])
    v = _arr((2, 3, 6, 7), dtype, seed=15, lo=0, hi=3)
    # One index: the (2, 3) broadcast dims replace dim 0.
    a, b = _both(lambda x, i, v: _nc(x).index_put((i,), v, accumulate=True), x, i0, v)
    _same(a, b)
    # Separated indices (dims 0 and 2): the broadcast dims go first, then dim 1.
    a, b = _both(lambda x, i, j, v: x.index_put_((i, slice(None), j), v[..., 0],
                                                 accumulate=True), x, i0, i2, v)
    _same(a, b)
    # A broadcast value and int32 indices.
    a, b = _both(lambda x, i, j, v: x.index_put_((i.int(), slice(None), j.int()), v[0, 0, :, 0],
                                                 accumulate=True), x, i0, i2, v)
    _same(a, b)


@cuda
@pytest.mark.parametrize("dtype", [gt.float64, gt.bfloat16, gt.int32, gt.bool])
def test_index_put_duplicates_last_wins_like_cpu(dtype: gt.dtype) -> None:
    x = _arr((6, 5), dtype)
    rows = np.array([1, 3, 1, 1, 5, 3, -5])
    v = _arr((7, 5), dtype, seed=16)
    a, b = _both(lambda x, r, v: _nc(x).index_put((r,), v), x, rows, v)
    _same(a, b)
    x3 = _arr((4, 3, 5), dtype)
    r = np.array([[0], [3], [0]])
    c = np.array([4, 4, 1, 4])
    v3 = _arr((3, 4, 3), dtype, seed=17)

    def put(x, r, c, v):
        x[r, :, c] = v
        return x
    a, b = _both(put, x3, r, c, v3)
    _same(a, b)


@cuda
def test_index_put_large_accumulate_crosses_blocks() -> None:
    n = 50_000
    idx = np.random.default_rng(18).integers(-100, 100, size=n)
    v = np.random.default_rng(19).integers(-50, 50, size=n).astype(np.float32)
    a, b = _both(lambda x, i, v: x.index_put((i,), v, accumulate=True),
                 np.zeros(100, np.float32), idx, v)
    np.testing.assert_array_equal(a, b)


@cuda
def test_results_do_not_depend_on_thread_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the emulator, run every block's threads in reverse order: plain assignment with
    duplicates still gives the CPU's last-wins, and the masked_scatter scan still ranks right
    (a missing barrier or a racy write would show)."""
    from gputensor.kernels.cuda.device import runtime
    from gputensor.kernels.cuda.emulator import launch as emu_launch

    if type(runtime()).__name__ != "EmulatorRuntime":
        pytest.skip("thread order is only controllable under the emulator")
    original = emu_launch.Module.launch

    def reversed_launch(self, *args, **kw):
        kw["reverse_threads"] = True
        return original(self, *args, **kw)

    monkeypatch.setattr(emu_launch.Module, "launch", reversed_launch)
    x = _arr((6, 300), gt.float32)
    idx = np.random.default_rng(20).integers(0, 6, size=(40, 300))
    src = _arr((40, 300), gt.float32, seed=21)
    a, b = _both(lambda x, i, s: x.scatter(0, i, s), x, idx, src)
    _same(a, b)
    a, b = _both(lambda x, i, s: x.index_copy(1, i[0, :200] % 300, s[:6, :200]), x, idx, src)
    _same(a, b)
    a, b = _both(lambda x, i, s: x.index_put((i[0] % 6,), s[0][:, None]), x, idx, src)
    _same(a, b)
    m = np.random.default_rng(22).random((6, 300)) > 0.5
    a, b = _both(lambda x, m, s: x.masked_scatter(m, s), x, m, src)
    _same(a, b)


@cuda
def test_index_put_value_shapes_and_cpu_scalars() -> None:
    x = gt.zeros(4, 3, device="cuda")
    i = gt.tensor([1, 3], device="cuda")
    x[i] = gt.full((1, 2, 3), 2.0, device="cuda")  # leading unit dims drop
    x.index_put_((i,), gt.tensor(5.0), accumulate=True)  # a 0-dim CPU value joins as a scalar
    assert x.tolist() == [[0.0] * 3, [7.0] * 3, [0.0] * 3, [7.0] * 3]
    with pytest.raises(RuntimeError, match=re.escape("shape mismatch: value tensor of shape [4] "
                                                     "cannot be broadcast to indexing result of "
                                                     "shape [2, 3]")):
        x[i] = gt.ones(4, device="cuda")
    y = gt.zeros(3, device="cuda")
    y.scatter_(0, gt.tensor(2), gt.tensor([4.0], device="cuda"))  # 0-dim CPU index
    y.index_fill_(0, gt.tensor(0), 1.5)  # 0-dim CPU index
    assert y.tolist() == [1.5, 0.0, 4.0]


# -- bounds errors reported from the device ------------------------------------------------------
@cuda
def test_bad_indices_raise_from_device_without_touching_memory() -> None:
    """The kernels themselves (frontends bypassed) report the first bad index."""
    x = gt.zeros(3, device="cuda")
    src = gt.ones(4, device="cuda")
    bad = gt.tensor([0, 7, 1, -2], device="cuda")
    # scatter's RuntimeError and the index ops' IndexError, as PyTorch's CPU checks raise
    with pytest.raises(RuntimeError, match=re.escape("index 7 is out of bounds for dimension 0 "
                                                     "with size 3")):
        CUDA.kernel("scatter")(x, 0, bad, src, None)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(RuntimeError, match="index 7 is out of bounds"):
        CUDA.kernel("scatter_reduce")(x, 0, bad, src, "sum", True)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(IndexError, match=re.escape("index_add_(): index 7 is out of bounds for "
                                                   "dimension 0 with size 3")):
        CUDA.kernel("index_add")(x, 0, bad, src, 1)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(IndexError, match="index_copy_\\(\\): index 7 is out of bounds"):
        CUDA.kernel("index_copy")(x, 0, bad, src)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        CUDA.kernel("index_fill")(x, 0, gt.tensor([-4], device="cuda"), 5.0)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    m = gt.zeros(3, 4, device="cuda")
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 1 with size 4"):
        CUDA.kernel("_index_put")(m, [gt.tensor([0, 2], device="cuda"),
                                      gt.tensor([1, 9], device="cuda")],
                                  gt.tensor(1.0, device="cuda"), True)
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    # Good positions may have been written; nothing outside the tensors was.
    assert all(v in (0.0, 1.0, 2.0, 5.0) for v in x.tolist())


@cuda
def test_frontend_errors_on_cuda() -> None:
    x = gt.zeros(3, device="cuda")
    # PyTorch raises RuntimeError for scatter/gather indices (IndexError for tensor indexing)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with "
                                           "size 3"):
        x.scatter_(0, gt.tensor([0, 5], device="cuda"), gt.ones(2, device="cuda"))
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(IndexError, match="out of bounds"):
        x[gt.tensor([0, 7], device="cuda")] = 1.0
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it


# -- NVRTC ------------------------------------------------------------------------------------
