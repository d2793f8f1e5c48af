"""complex64/complex128 in the CUDA backend's reductions, scans, scatters and embedding, against
the CPU backend (and PyTorch where it defines the op): the layouts the shared suites leave out
(permuted and sliced views, column sweeps), sizes that cross the 256-thread blocks and the
scan's 256-element warp steps, reductions long enough to split over blocks (a second kernel
combines the partials), and duplicate scatter targets (two real atomics per complex sum; a
per-element lock for complex prod/amax/amin).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda.ops import reduce as cuda_reduction
from gputensor.kernels.registry import OPS

torch = pytest.importorskip("torch")

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
pytestmark = cuda

COMPLEX = [gt.complex64, gt.complex128]


def _cplx(shape, dtype: gt.dtype, seed: int = 0, integers: bool = False) -> np.ndarray:
    """Random complex values; ``integers``: small Gaussian integers (sums exact in any order)."""
    rng = np.random.default_rng(seed)
    if integers:
        a = rng.integers(-3, 4, size=shape) + 1j * rng.integers(-3, 4, size=shape)
    else:
        a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return a.astype(dtype.np_dtype)


def _tol(dtype: gt.dtype) -> dict:
    return {"rtol": 2e-5, "atol": 1e-5} if dtype is gt.complex64 else {"rtol": 1e-12,
                                                                       "atol": 1e-12}


def _check(fn, a: np.ndarray, dtype: gt.dtype, exact: bool = False) -> None:
    """fn on the CPU backend and on CUDA (same input values and layout) agree."""
    want = fn(gt.tensor(a))
    got = fn(gt.tensor(a, device="cuda"))
    assert got.device.type == "cuda" and got.dtype is want.dtype
    if exact:
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    else:
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), **_tol(dtype))


# -- reductions -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("dim", [0, 1, 2, (0, 2), None])
def test_sum_prod_mean_permuted_and_sliced(dtype: gt.dtype, dim) -> None:
    a = _cplx((6, 5, 7), dtype, integers=True)
    kw = {} if dim is None else {"dim": dim}
    _check(lambda t: t.permute(2, 0, 1).sum(**kw), a, dtype, exact=True)
    _check(lambda t: t[:, 1:, ::2].sum(**kw), a, dtype, exact=True)
    _check(lambda t: t.permute(1, 2, 0).mean(**kw), a, dtype)
    if not isinstance(dim, tuple):   # prod takes one dim, as PyTorch's
        small = _cplx((3, 2, 4), dtype, seed=1) / 2
        _check(lambda t: t.transpose(0, 2).prod(**kw), small, dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_sum_across_blocks_and_split(dtype: gt.dtype) -> None:
    """Rows longer than a block, columns (an output index innermost), and few long rows whose
    reduced index is split over blocks (then combined by the finishing kernel)."""
    rows = _cplx((3, 300), dtype, seed=2, integers=True)
    _check(lambda t: t.sum(1), rows, dtype, exact=True)
    cols = _cplx((513, 3), dtype, seed=3, integers=True)
    _check(lambda t: t.sum(0), cols, dtype, exact=True)
    n = 2 * 2 * cuda_reduction.BLOCK * cuda_reduction.MIN_PER_THREAD + 5
    x = gt.tensor(_cplx((1, n), dtype, seed=4, integers=True), device="cuda")
    assert cuda_reduction.plan(x, (1,)).splits > 1  # the split path is what this exercises
    _check(lambda t: t.sum(1), x.cpu().numpy(), dtype, exact=True)
    _check(lambda t: t.mean(1), x.cpu().numpy(), dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("dim", [0, 1, None])
def test_var_std_mean(dtype: gt.dtype, dim) -> None:
    a = _cplx((40, 9), dtype, seed=5) + (3 - 2j)  # an offset: the mean must be subtracted
    for correction in (0, 1, 2):
        _check(lambda t, c=correction: t.var(dim, correction=c), a, dtype)
        _check(lambda t, c=correction: t.std(dim, correction=c), a, dtype)
    v, m = gt.var_mean(gt.tensor(a, device="cuda").t(), dim)
    tv, tm = torch.var_mean(torch.tensor(a).t(), dim)
    assert v.dtype is dtype.to_real() and m.dtype is dtype
    np.testing.assert_allclose(v.cpu().numpy(), tv.numpy(), **_tol(dtype))
    np.testing.assert_allclose(m.cpu().numpy(), tm.numpy(), **_tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("p", [0, 1, 2, 3, 0.5, math.inf, -math.inf])
def test_norms(dtype: gt.dtype, p) -> None:
    a = _cplx((5, 300), dtype, seed=6)
    a[1, 7] = 0
    a[2, 3] = 2j  # a zero real part still counts for the 0-norm
    for dim in (1, 0):
        got = gt.tensor(a, device="cuda").norm(p, dim=dim)
        want = torch.tensor(a).norm(p, dim=dim)
        assert got.dtype is dtype.to_real()
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_logical_reductions(dtype: gt.dtype) -> None:
    a = np.array([[0, 1j, 0], [0, 0, 0], [2, 1 + 1j, -1j]], dtype.np_dtype)
    for fn in (lambda t: t.all(1), lambda t: t.any(0), lambda t: t.count_nonzero(1),
               lambda t: t.t().any(1), lambda t: t.all()):
        _check(fn, a, dtype, exact=True)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_scans(dtype: gt.dtype) -> None:
    """Lines longer than one warp step (32 lanes x 8 items), column lines (I > 1), strided
    input, and the reverse scan behind cumsum's gradient."""
    a = _cplx((3, 600), dtype, seed=7, integers=True)
    _check(lambda t: t.cumsum(1), a, dtype, exact=True)
    _check(lambda t: t.t().cumsum(0), a, dtype, exact=True)
    _check(lambda t: t[:, ::3].cumsum(1), a, dtype, exact=True)
    _check(lambda t: OPS["_reverse_cumsum"].frontend(t, 1), a, dtype, exact=True)
    b = _cplx((4, 70), dtype, seed=8) / 1.2 + 0.3
    _check(lambda t: t.cumprod(1), b, dtype)
    _check(lambda t: t.t().cumprod(0), b, dtype)


def test_complex_grad_through_sum_and_cumsum() -> None:
    """Autograd through complex reductions on CUDA (the gradient of a real loss)."""
    a = _cplx((4, 5), gt.complex128, seed=9)
    grads = []
    for dev in ("cpu", "cuda"):
        x = gt.tensor(a, device=dev, requires_grad=True)
        (x.cumsum(1).abs().sum() + x.var(0).sum()).backward()
        grads.append(x.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10)


# -- scatter family -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_duplicates(dtype: gt.dtype, reduce: str, include_self: bool) -> None:
    """Many positions (crossing blocks) onto few targets; amax/amin order complex values
    lexicographically, as the CPU backend's NumPy ufuncs do. Values are exact in any order."""
    rng = np.random.default_rng(10)
    n = 700
    src = (rng.choice([1, -1, 1j, -1j], size=(n, 2)) if reduce == "prod"
           else _cplx((n, 2), dtype, seed=11, integers=True)).astype(dtype.np_dtype)
    if reduce in ("amax", "amin"):
        src[5, 0] = complex(np.nan, 1)  # a NaN part propagates
    idx = rng.integers(0, 5, size=(n, 2))
    self_ = _cplx((6, 2), dtype, seed=12, integers=True)
    results = []
    for dev in ("cpu", "cuda"):
        t = gt.tensor(self_, device=dev)
        r = t.scatter_reduce(0, gt.tensor(idx, device=dev), gt.tensor(src, device=dev), reduce,
                             include_self=include_self)
        results.append(r.cpu().numpy())
    np.testing.assert_allclose(results[1], results[0], equal_nan=True, **_tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_scatter_add_index_add_index_put(dtype: gt.dtype) -> None:
    rng = np.random.default_rng(13)
    base = _cplx((5, 4), dtype, seed=14, integers=True)
    src = _cplx((300, 4), dtype, seed=15, integers=True)
    idx = rng.integers(0, 5, size=(300, 4))
    vidx = rng.integers(0, 5, size=300)

    def ops(t, s, i, v):
        return [t.scatter_add(0, i, s), t.t().scatter_add(1, i.t(), s.t()),
                t.index_add(0, v, s, alpha=2 - 1j), t.index_put((v,), s, accumulate=True),
                t.scatter(0, i[:5], s[:5], reduce="multiply")]

    cpu = ops(*(gt.tensor(a) for a in (base, src, idx, vidx)))
    dev = ops(*(gt.tensor(a, device="cuda") for a in (base, src, idx, vidx)))
    for got, want in zip(dev, cpu, strict=True):
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


@pytest.mark.parametrize("dtype", COMPLEX)
def test_assignment_and_masks(dtype: gt.dtype) -> None:
    """Plain writes (last duplicate wins, as on the CPU), complex scalars (two kernel params),
    masked writes through broadcast and non-contiguous operands."""
    base = _cplx((4, 6), dtype, seed=16)
    src = _cplx((4, 6), dtype, seed=17)
    mask = np.random.default_rng(18).random((4, 6)) > 0.5

    def ops(t, s, m):
        i = gt.tensor([[3, 0, 3, 1, 0, 2]], device=t.device).expand(4, 6)
        return [t.scatter(0, i, s), t.scatter(1, i[:, :2], 2.5 - 1j),
                t.index_copy(1, gt.tensor([5, 0], device=t.device), s[:, :2]),
                t.index_fill(0, gt.tensor([-1, 1], device=t.device), 1j),
                t.masked_fill(m, -3 + 4j), t.t().masked_fill(m[0].reshape(6, 1), 7j),
                t.masked_scatter(m, s.t()), t.t()[::2].masked_fill(m.T[::2], 1 + 1j)]

    cpu = ops(gt.tensor(base), gt.tensor(src), gt.tensor(mask))
    dev = ops(*(gt.tensor(a, device="cuda") for a in (base, src, mask)))
    for got, want in zip(dev, cpu, strict=True):
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    y = gt.tensor(base, device="cuda")
    y[gt.tensor([0, 2, 0], device="cuda")] = gt.tensor(src[:3], device="cuda")
    expect = base.copy()
    expect[[0, 2, 0]] = src[:3]
    np.testing.assert_array_equal(y.cpu().numpy(), expect)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_gathers_and_embedding(dtype: gt.dtype) -> None:
    w = _cplx((7, 3), dtype, seed=19)
    idx = np.array([[6, 0, 2], [2, 2, 5]])
    for fn in (lambda t, i: gt.nn.functional.embedding(i, t),
               lambda t, i: t.index_select(0, i.reshape(-1)),
               lambda t, i: t.gather(0, i), lambda t, i: t.t()[:, i[0]],
               lambda t, i: gt.cat([t, t[i[1]]], 0)):
        want = fn(gt.tensor(w), gt.tensor(idx))
        got = fn(gt.tensor(w, device="cuda"), gt.tensor(idx, device="cuda"))
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_backward(dtype: gt.dtype, scale: bool) -> None:
    """Complex weight gradients: duplicates summed, the padding row zero, optional 1/count."""
    w0 = _cplx((5, 3), dtype, seed=20)
    idx = np.array([[1, 4, 1], [0, 1, 2]])
    coef = _cplx((2, 3, 3), dtype, seed=21)
    grads = []
    for dev in ("cpu", "cuda"):
        w = gt.tensor(w0, device=dev, requires_grad=True)
        y = gt.nn.functional.embedding(gt.tensor(idx, device=dev), w, padding_idx=0,
                                       scale_grad_by_freq=scale)
        (y * gt.tensor(coef, device=dev)).abs().sum().backward()
        grads.append(w.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], **_tol(dtype))
    assert not grads[1][0].any()
