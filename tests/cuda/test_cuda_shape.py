"""The CUDA backend's shape and gather kernels (kernels/cuda/shape.cu) against the CPU backend:
every dtype the kernels move (by element size), non-contiguous / offset / flipped inputs, sizes
that cross block boundaries, device-side bounds errors (kernels called directly, past the
frontends' own checks), and an NVRTC compile of the source for real GPUs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.registry import CUDA

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")

DTYPES = [gt.bool, gt.uint8, gt.int8, gt.int16, gt.int32, gt.int64, gt.float16, gt.bfloat16,
          gt.float32, gt.float64]


def _arr(shape, dtype: gt.dtype = gt.float32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, size=shape)
    if dtype is gt.bool:
        return a > 0
    if dtype is gt.uint8:
        a = np.abs(a)
    if dtype.is_floating_point:
        return (a / 4).astype(dtype.np_dtype)
    return a.astype(dtype.np_dtype)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype == ml_dtypes.bfloat16:
        a, b = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_array_equal(a, b)


def _both(fn, *arrays) -> None:
    """fn on CPU tensors and on CUDA tensors (NumPy arrays become tensors): identical results."""
    out = []
    for dev in ("cpu", "cuda"):
        ts = [gt.tensor(a, device=dev) if isinstance(a, np.ndarray) else a for a in arrays]
        r = fn(*ts)
        out.append([t.cpu().numpy() for t in r] if isinstance(r, tuple | list)
                   else r.cpu().numpy())
    if isinstance(out[0], list):
        for a, b in zip(*out, strict=True):
            _same(a, b)
    else:
        _same(*out)


def _nc(t: gt.Tensor) -> gt.Tensor:
    """A non-contiguous view with t's values (a transposed copy, transposed back)."""
    if t.dim() < 2:
        return t.repeat(2)[::2] if t.numel() else t
    return t.transpose(0, 1).contiguous().transpose(0, 1)


# -- remap family -------------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_remap_ops_every_dtype(dtype: gt.dtype) -> None:
    a = _arr((3, 5, 4), dtype)
    b = _arr((3, 2, 4), dtype, seed=1)
    _both(lambda x, y: gt.cat([x, _nc(y), x], 1), a, b)
    _both(lambda x: x.flip(0, 2), a)
    _both(lambda x: _nc(x).flip(1), a)
    _both(lambda x: x.roll([1, -7, 2], [0, 1, 1]), a)
    _both(lambda x: x.roll(5), a)
    _both(lambda x: _nc(x).repeat(2, 1, 3, 1), a)
    _both(lambda x: x.tril(1), a)
    _both(lambda x: _nc(x).triu(-1), a)
    _both(lambda x: gt.pad(x, (2, 1, -1, 3), value=1.5), a)


@cuda
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_with_crops(mode: str) -> None:
    a = _arr((2, 3, 6, 5), gt.float32)
    pads = [(2, 1, 3, 0), (1, 2, -1, 2), (0, 0, 2, 2)]
    if mode == "circular":
        pads += [(-2, 3, 1, -1)]
    for p in pads:
        _both(lambda x, p=p: gt.pad(x, p, mode=mode), a)
        _both(lambda x, p=p: gt.pad(_nc(x), p, mode=mode), a)


@cuda
def test_constant_pad_fill_and_full_crop() -> None:
    for dtype in (gt.bool, gt.int8, gt.float16, gt.bfloat16, gt.int64):
        a = _arr((4, 3), dtype)
        _both(lambda x: gt.pad(x, (1, 2, 0, -1), value=3), a)
        _both(lambda x: gt.pad(x, (-3, 1)), a)  # everything cropped away


@cuda
def test_cat_mixed_dtypes_and_empty() -> None:
    a = _arr((2, 3), gt.int32)
    b = _arr((2, 4), gt.float16, seed=2)
    _both(lambda x, y: gt.cat([x, y], 1), a, b)
    _both(lambda x, y: gt.cat([x, y[:, :0], x], 1), a, b.astype(np.int32))


@cuda
def test_tril_triu_in_place_noncontiguous() -> None:
    def fn(x):
        y = x.transpose(0, 1)
        y.tril_(-1)
        x.triu_(2)
        return x
    _both(fn, _arr((4, 7, 7), gt.float64))


@cuda
def test_large_sizes_cross_blocks() -> None:
    a = _arr((301, 333), gt.float32)
    _both(lambda x: x.flip(1), a)
    _both(lambda x: gt.cat([x, x[::3], _nc(x)], 0), a)
    _both(lambda x: x.roll(1000), a)
    _both(lambda x: x.triu(3), a)
    idx = np.random.default_rng(5).integers(-301, 301, size=(7000,))
    _both(lambda x, i: x[i], a, idx)
    _both(lambda x, i: x.take(i), a, idx)
    g = np.random.default_rng(6).integers(0, 301, size=(301, 333))
    _both(lambda x, i: x.gather(0, i), a, g)


@cuda
@pytest.mark.parametrize("dtype", [gt.complex64, gt.complex128])
def test_complex_elements_move_as_words(dtype: gt.dtype) -> None:
    """Complex elements move as one (complex64) or two (complex128) 8-byte words."""
    a = (_arr((3, 4, 5)) + 1j * _arr((3, 4, 5), seed=1)).astype(dtype.np_dtype)
    i = np.array([2, -1, 0])
    _both(lambda x: gt.cat([x, x[:, :, ::2]], 2).flip(1).roll(2, 0), a)
    _both(lambda x: x.transpose(0, 2).repeat(1, 2, 1).tril(1).triu(-2), a)
    _both(lambda x: gt.pad(x, (1, 2, 0, 1)), a)
    _both(lambda x: gt.pad(x, (1, 2, 0, 1), mode="reflect"), a)
    _both(lambda x, i: (x[i, 1:], x.index_select(2, i % 5), x.take(i),
                        x.gather(1, (i % 4).reshape(1, 3, 1).expand(3, 3, 5))), a, i)
    _both(lambda x: x.repeat_interleave(gt.tensor([1, 0, 2], device=x.device), dim=0), a)


# -- gathers ------------------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gathers_every_dtype(dtype: gt.dtype, index_dtype) -> None:
    a = _arr((4, 6, 3), dtype)
    i = np.array([3, 0, 0, 2, 1], index_dtype)
    _both(lambda x, i: x.index_select(1, i), a, i)
    _both(lambda x, i: _nc(x).index_select(0, _nc(i)), a, i)
    g = np.random.default_rng(1).integers(0, 4, size=(3, 6, 2)).astype(index_dtype)
    _both(lambda x, i: x.gather(0, i), a, g)
    _both(lambda x, i: _nc(x).gather(2, _nc(i % 3)[:, :, :1]), a, g)
    _both(lambda x, i: x[i], a, i % 4)
    _both(lambda x, i: x[:, i, 1:], a, -i)


@cuda
def test_take_noncontiguous_and_negative() -> None:
    a = _arr((5, 7), gt.int16)
    i = np.array([[0, -1, 34], [-35, 12, 12]])
    _both(lambda x, i: x.take(i), a, i)
    _both(lambda x, i: _nc(x).take(i.T), a, i)
    _both(lambda x, i: x.flip(0).take(i), a, i)


@cuda
def test_advanced_indexing_layouts() -> None:
    a = _arr((4, 5, 6), gt.float64)
    i = np.array([[0, -1], [2, 3]])
    j = np.array([4, 0])
    _both(lambda x, i, j: x[i, j], a, i, j)  # broadcast, adjacent, separate storages
    _both(lambda x, i, j: x[i, :, j], a, i, j)  # separated: index dims lead
    _both(lambda x, i: x[1:, i, ::2], a, i)  # with sliced (offset, strided) dims
    _both(lambda x, i: x[..., i], a, i)
    _both(lambda x, i: _nc(x)[i], a, i)
    _both(lambda x, i: x[i.to(gt.int8)], a, i)  # widened to int64 on the device
    _both(lambda x, i, j: x[i.to(gt.int32), j], a, i, j)  # mixed dtypes: stacked
    m = _arr((4, 5), gt.bool)
    _both(lambda x, m: x[m], a, m)  # a mask: both columns share nonzero's storage
    _both(lambda x, m: x[:, m[0]], a, m)


# -- repeat_interleave ----------------------------------------------------------------------------
@cuda
@pytest.mark.parametrize("dtype", [gt.bool, gt.int16, gt.bfloat16, gt.float64])
def test_repeat_interleave_by_tensor(dtype: gt.dtype) -> None:
    a = _arr((4, 3), dtype)
    r = np.array([2, 0, 3, 1])
    _both(lambda x, r: x.repeat_interleave(r, dim=0), a, r)
    _both(lambda x, r: _nc(x).repeat_interleave(r[:3].to(gt.int32), dim=1), a, r)
    _both(lambda x, r: x.repeat_interleave(r.repeat(3)), a, r)  # flattened
    big = np.random.default_rng(2).integers(0, 4, size=1000)  # more repeats than threads
    _both(lambda r: gt.repeat_interleave(r), big)
    _both(lambda r: gt.repeat_interleave(_nc(r)), big)
    _both(lambda r: gt.repeat_interleave(r), np.zeros(5, np.int64))


# -- device-side bounds checks (kernels called directly, past the frontends' checks) ------------
def _cuda(a) -> gt.Tensor:
    return gt.tensor(a, device="cuda")


@cuda
def test_gather_kernels_report_bad_indices() -> None:
    x = _cuda(np.arange(12.0).reshape(3, 4))
    out = gt.empty((2, 4), dtype=gt.float64, device="cuda")
    # gather's RuntimeError, as PyTorch's CPU check raises
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 0 with size 3"):
        CUDA.kernel("gather")(out, x, 0, _cuda(np.array([[0, 1, 7, 2], [1, 1, 1, 9]])))
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with "
                                           "size 4"):
        CUDA.kernel("gather")(out, x, 1, _cuda(np.array([[0, 1, 3, 2], [-1, 1, 1, 1]],
                                                         np.int32)))
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    sel = gt.empty((3, 3), dtype=gt.float64, device="cuda")
    with pytest.raises(IndexError, match=r"index_select\(\): index 4 is out of bounds for "
                                         "dimension 1 with size 4"):
        CUDA.kernel("index_select")(sel, x, 1, _cuda(np.array([0, 4, 5])))
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    flat = gt.empty((2,), dtype=gt.float64, device="cuda")
    with pytest.raises(IndexError, match=r"take\(\): \(on the flattened input\) index -13 is "
                                         "out of bounds for dimension 0 with size 12"):
        CUDA.kernel("take")(flat, x, _cuda(np.array([-12, -13])))
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it


@cuda
def test_index_kernel_reports_bad_index_per_dim() -> None:
    x = _cuda(np.arange(24.0).reshape(2, 3, 4))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        CUDA.kernel("_index")(x, [None, _cuda(np.array([0, 3])), _cuda(np.array([1, 1]))])
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 2 with size 4"):
        CUDA.kernel("_index")(x, [_cuda(np.array([1])), None, _cuda(np.array([2, -5]))])
        gt.cuda.synchronize()  # where a GPU (deferred errors) raises it


@cuda
def test_repeat_interleave_kernel_rejects_negative_repeats() -> None:
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        CUDA.kernel("repeat_interleave")(_cuda(np.arange(3.0)), _cuda(np.array([1, -2, 1])), 0)


# -- NVRTC ----------------------------------------------------------------------------------------
