"""The CUDA backend's matrix products, einsum, convolutions and pools (kernels/cuda/linalg.cu,
kernels/cuda/conv.cu and kernels/cuda/ops/{linalg,conv}.py) against the CPU backend.

Covers what the shared suites don't: every tiled-GEMM dtype with sizes that cross tile and block
boundaries, integer wraparound, strided/broadcast/aliased operands, the many-small-batches path,
channels-last inputs, 16-bit floats, device-side index errors of the max-pool backward, and an
NVRTC compile of both sources for real GPUs.
"""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")

INT_DTYPES = [gt.uint8, gt.int8, gt.int16, gt.int32, gt.int64]
FLOAT_DTYPES = [gt.float16, gt.bfloat16, gt.float32, gt.float64]
# (atol, rtol) against the CPU backend: products sum in a different order than BLAS.
TOL = {gt.float16: (2e-2, 2e-2), gt.bfloat16: (1e-1, 5e-2), gt.float32: (1e-4, 1e-4),
       gt.float64: (1e-10, 1e-10)}


def _arr(shape, dtype: gt.dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point:
        return rng.standard_normal(shape).astype(np.float32)
    if dtype is gt.bool:
        return rng.integers(0, 2, size=shape).astype(bool)
    lo, hi = (0, 200) if dtype is gt.uint8 else (-100, 100)
    return rng.integers(lo, hi, size=shape)


def _both(fn, *arrays, dtype: gt.dtype = gt.float32):
    """fn on CPU tensors and on CUDA tensors, both results as NumPy arrays."""
    res = []
    for dev in ("cpu", "cuda"):
        out = fn(*[gt.tensor(a, dtype=dtype, device=dev) for a in arrays])
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            assert o.device.type == dev
        res.append([o.cpu().float().numpy() if o.dtype in (gt.float16, gt.bfloat16)
                    else o.cpu().numpy() for o in outs])
    return res


def _close(fn, *arrays, dtype: gt.dtype = gt.float32, tol=None) -> None:
    cpu, dev = _both(fn, *arrays, dtype=dtype)
    atol, rtol = tol or TOL.get(dtype, (0, 0))
    for c, d in zip(cpu, dev, strict=True):
        assert c.shape == d.shape and c.dtype == d.dtype
        if dtype.is_floating_point:
            np.testing.assert_allclose(d, c, atol=atol, rtol=rtol)
        else:
            np.testing.assert_array_equal(d, c)


# -- matrix products ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES, ids=str)
@cuda
def test_matmul_dtypes_across_tiles(dtype: gt.dtype) -> None:
    """70x45 @ 45x75 in 3 batches: partial 64x64 tiles and K chunks; integers wrap exactly."""
    _close(lambda a, b: a @ b, _arr((3, 70, 45), dtype), _arr((45, 75), dtype, 1), dtype=dtype)


@pytest.mark.parametrize("dtype", [gt.int32, gt.float16, gt.float32], ids=str)
@cuda
def test_matmul_strided_and_broadcast(dtype: gt.dtype) -> None:
    x, y = _arr((2, 1, 40, 33), dtype), _arr((3, 50, 40), dtype, 1)
    _close(lambda a, b: a.transpose(-1, -2) @ b.transpose(-1, -2)[..., ::2], x, y, dtype=dtype)
    _close(lambda a, b: a[..., ::3, :].expand(2, 3, 14, 33).transpose(-1, -2) @
           b[:, :14, :5], x, y, dtype=dtype)


@cuda
def test_many_small_batches_single_launch() -> None:
    """More batches than the per-batch BLAS loop takes go through one tiled launch."""
    _close(lambda a, b: gt.bmm(a, b), _arr((40, 3, 4), gt.float32), _arr((40, 4, 5),
                                                                          gt.float32, 1))
    _close(lambda a, b: gt.bmm(a, b), _arr((40, 3, 4), gt.float64), _arr((40, 4, 5),
                                                                          gt.float64, 1),
           dtype=gt.float64)


@pytest.mark.parametrize("dtype", [gt.int16, gt.float32, gt.bfloat16], ids=str)
@cuda
def test_add_products_scalars_and_aliasing(dtype: gt.dtype) -> None:
    beta, alpha = (2, 3) if dtype is gt.int16 else (0.5, -1.5)
    c, m = _arr((20, 20), dtype), _arr((20, 20), dtype, 1)
    _close(lambda c, m: gt.addmm(c, m, m.t(), beta=beta, alpha=alpha), c, m, dtype=dtype)
    _close(lambda c, m: gt.addmm(c[0], m, m, beta=beta, alpha=alpha), c, m, dtype=dtype)

    def inplace(c, m):
        c.addmm_(c, c.t(), beta=beta, alpha=alpha)   # the output aliases both factors
        c[::2].addmm_(m[::2], m, beta=beta)            # a strided output
        return c
    _close(inplace, c, m, dtype=dtype)


@cuda
def test_alpha_zero_and_beta_zero_ignore_inf_and_nan() -> None:
    for dtype in (gt.float32, gt.float16):
        nan = gt.full((33, 34), float("nan"), dtype=dtype, device="cuda")
        inf = gt.full((33, 35), float("inf"), dtype=dtype, device="cuda")
        one = gt.ones(35, 34, dtype=dtype, device="cuda")
        res = gt.addmm(nan, inf, one, beta=0, alpha=0)
        assert (res.cpu().float().numpy() == 0).all()
        res = gt.addmm(one[:33], inf, one, beta=2, alpha=0)
        assert (res.cpu().float().numpy() == 2).all()


@cuda
def test_empty_contraction_and_empty_batch() -> None:
    _close(lambda a, b: a @ b, _arr((3, 0), gt.float32), _arr((0, 4), gt.float32))
    _close(lambda a, b: a @ b, _arr((2, 3, 0), gt.int32), _arr((2, 0, 4), gt.int32),
           dtype=gt.int32)
    _close(lambda c, a, b: gt.addbmm(c, a, b, beta=2), _arr((2, 4), gt.float32),
           _arr((0, 2, 3), gt.float32), _arr((0, 3, 4), gt.float32))


@cuda
def test_linear_bias_and_grads() -> None:
    def fn(x, w, b):
        x.requires_grad_(), w.requires_grad_(), b.requires_grad_()
        y = F.linear(x, w, b)
        (y * y).sum().backward()
        return y.detach(), x.grad, w.grad, b.grad
    _close(fn, _arr((5, 7, 33), gt.float32), _arr((40, 33), gt.float32, 1),
           _arr((40,), gt.float32, 2))


# -- einsum ---------------------------------------------------------------------------------------
EINSUM = [("ij,jk->ik", [(33, 40), (40, 35)]), ("iij->j", [(4, 4, 5)]), ("ij->", [(6, 7)]),
          ("bij,bjk->bik", [(3, 5, 6), (3, 6, 7)]), ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 6)]),
          ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]), ("ij,ij->ij", [(5, 6), (5, 6)]),
          ("abc,c->ba", [(3, 4, 5), (5,)]), ("ij,k->jk", [(3, 4), (5,)])]


@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.int32], ids=str)
@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
@cuda
def test_einsum(eq: str, shapes: list, dtype: gt.dtype) -> None:
    arrays = [_arr(s, dtype, i) % 7 if not dtype.is_floating_point else _arr(s, dtype, i)
              for i, s in enumerate(shapes)]
    _close(lambda *t: gt.einsum(eq, *t), *arrays, dtype=dtype,
           tol=(5e-2, 5e-2) if dtype is gt.float16 else None)


@cuda
def test_einsum_bool_and_noncontiguous() -> None:
    a, b = _arr((4, 5), gt.bool), _arr((4, 5), gt.bool, 1)
    _close(lambda a, b: gt.einsum("ij,ij->ji", a, b), a, b, dtype=gt.bool)
    _close(lambda a: gt.einsum("ij->i", a), a, dtype=gt.bool)
    _close(lambda a, b: gt.einsum("ji,kj->ik", a.t()[:, ::2], b[:, ::2]),
           _arr((5, 4), gt.float32), _arr((3, 8), gt.float32, 1))


# -- convolutions --------------------------------------------------------------------------------
CONV = [({}, (2, 3, 9, 8), (4, 3, 3, 3)),
        ({"stride": 2, "padding": 1, "groups": 2}, (2, 4, 11, 10), (6, 2, 3, 2)),
        ({"dilation": 2, "padding": (2, 1), "groups": 2}, (2, 4, 9, 9), (6, 2, 3, 3)),
        ({"stride": (1, 3), "groups": 4}, (1, 4, 7, 12), (8, 1, 1, 2)),
        ({}, (3, 2, 5, 5), (5, 2, 1, 1))]


def _conv_grads(kw):
    def fn(x, w, b):
        for t in (x, w, b):
            t.requires_grad_()
        y = F.conv2d(x, w, b, **kw)
        (y * y).sum().backward()
        return y.detach(), x.grad, w.grad, b.grad
    return fn


@pytest.mark.parametrize("kw,xs,ws", CONV, ids=[str(c[0]) for c in CONV])
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=str)
@cuda
def test_conv2d_forward_backward(kw: dict, xs: tuple, ws: tuple, dtype: gt.dtype) -> None:
    _close(_conv_grads(kw), _arr(xs, dtype), _arr(ws, dtype, 1), _arr((ws[0],), dtype, 2),
           dtype=dtype, tol=(1e-3, 1e-4) if dtype is gt.float32 else None)


@cuda
def test_conv2d_channels_last_half_and_integer() -> None:
    x, w = _arr((2, 6, 7, 3), gt.float32), _arr((5, 3, 3, 3), gt.float32, 1)
    _close(lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w, padding=1, stride=2), x, w)
    for dt in (gt.float16, gt.bfloat16):
        _close(lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w, padding=1), x, w, dtype=dt,
               tol=(1e-1, 5e-2))
    xi, wi = _arr((2, 3, 6, 6), gt.int64), _arr((4, 3, 2, 2), gt.int64, 1)
    _close(lambda x, w: F.conv2d(x, w, padding=1), xi, wi, dtype=gt.int64)


@cuda
def test_conv_transpose2d_output_padding() -> None:
    _close(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
           _arr((2, 4, 5, 6), gt.float32), _arr((4, 3, 3, 3), gt.float32, 1),
           _arr((3,), gt.float32, 2), tol=(1e-4, 1e-4))


@cuda
def test_conv2d_large_crosses_blocks() -> None:
    """~5e4 output and ~1e5 column elements: grid-stride loops over many blocks."""
    _close(_conv_grads({"padding": 1}), _arr((4, 8, 20, 20), gt.float32),
           _arr((16, 8, 3, 3), gt.float32, 1), _arr((16,), gt.float32, 2), tol=(1e-3, 1e-4))


# -- pooling ---------------------------------------------------------------------------------------
def _pool_grads(fn):
    def run(x):
        x.requires_grad_()
        y = fn(x)
        y = y[0] if isinstance(y, tuple) else y
        (y * y).sum().backward()
        return y.detach(), x.grad
    return run


POOLS = [lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: F.max_pool2d(x, 2, dilation=2),
         lambda x: F.max_pool2d(x, 3, 1, 1, ceil_mode=True),
         lambda x: F.avg_pool2d(x, 3, 2, 1), lambda x: F.avg_pool2d(x, 3, 2, 1, True, False),
         lambda x: F.avg_pool2d(x, (2, 3), 1, divisor_override=4),
         lambda x: F.adaptive_avg_pool2d(x, (3, 4)), lambda x: F.adaptive_max_pool2d(x, (4, 3)),
         lambda x: F.adaptive_avg_pool2d(x, 7)]


@pytest.mark.parametrize("k", range(len(POOLS)))
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.float16], ids=str)
@cuda
def test_pools_forward_backward_channels_last(k: int, dtype: gt.dtype) -> None:
    fn = POOLS[k]
    _close(_pool_grads(lambda x: fn(x.permute(0, 3, 1, 2))), _arr((2, 9, 10, 3), dtype),
           dtype=dtype)


@cuda
def test_pools_large_and_indices() -> None:
    x = _arr((4, 16, 30, 40), gt.float32)     # 7.7e4 elements
    _close(_pool_grads(lambda x: F.max_pool2d(x, 2)), x)
    _close(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)
    _close(lambda x: F.adaptive_max_pool2d(x, (7, 9), return_indices=True), x)


@cuda
def test_pools_integer() -> None:
    x = _arr((2, 3, 7, 6), gt.int32)
    for fn in (lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: F.avg_pool2d(x, 3, 2, 1),
               lambda x: F.adaptive_avg_pool2d(x, (2, 4))):
        _close(fn, x, dtype=gt.int32)


@cuda
def test_max_pool_backward_bad_index_raises() -> None:
    from gputensor._ops._core import kernel

    g = gt.ones(1, 2, 2, 2, device="cuda")
    gi = gt.empty(1, 2, 3, 3, device="cuda")
    for bad in (9, -1):
        idx = gt.tensor([[[[0, 1], [2, bad]], [[4, 5], [6, 7]]]], device="cuda")
        with pytest.raises(RuntimeError, match="outside its input plane"):
            kernel(gi, "_max_pool2d_backward")(gi, g, idx)
            gt.cuda.synchronize()  # where a GPU (deferred errors) raises it


# -- NVRTC -----------------------------------------------------------------------------------------
