"""Reductions, scans and softmax against PyTorch: values, dtypes, shapes, layouts and errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cpu import reduce as cpu_reduction
from tests.helpers import assert_close, helper_test_op, noncontiguous, random_array, torch

pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch (CPU) oracle not installed")

SHAPE = (3, 4, 5)
DIMS = [None, 0, 1, -1, (0, 2), (1, 2), (0, 1), ()]


def pair(arr: np.ndarray, device: str) -> tuple[Any, gt.Tensor]:
    """The same values as a torch tensor and a gputensor tensor."""
    return torch.from_numpy(np.ascontiguousarray(arr)), gt.tensor(arr, device=device)


def dim_kwargs(dim: Any) -> dict:
    return {} if dim is None else {"dim": dim}


# -- sums, means, products ----------------------------------------------------------------------
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_dims(device: str, dim: Any, keepdim: bool) -> None:
    if dim is None and keepdim:
        return
    kw = dim_kwargs(dim) | ({"keepdim": True} if keepdim else {})
    helper_test_op([SHAPE], lambda x: x.sum(**kw), device=device)
    helper_test_op([SHAPE], lambda x: x.mean(**kw), device=device)
    helper_test_op([SHAPE], lambda x: x.sum(**kw), device=device, noncontig=True)


@pytest.mark.parametrize("dtype", [gt.int32, gt.bool, gt.float16, gt.bfloat16, gt.float64,
                                   gt.complex64])
def test_sum_dtypes(device: str, dtype: gt.dtype) -> None:
    helper_test_op([SHAPE], lambda x: x.sum(), device=device, dtype=dtype)
    helper_test_op([SHAPE], lambda x: x.sum(1), device=device, dtype=dtype)
    helper_test_op([SHAPE], lambda x: x.sum(0), device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", [gt.int32, gt.float32, gt.complex64])
def test_prod(device: str, dtype: gt.dtype) -> None:
    helper_test_op([SHAPE], lambda x: x.prod(), device=device, dtype=dtype, low=-1.5, high=1.5)
    helper_test_op([SHAPE], lambda x: x.prod(2, keepdim=True), device=device, dtype=dtype)
    helper_test_op([SHAPE], lambda x: x.prod(0), device=device, dtype=dtype)


def test_nansum(device: str) -> None:
    a = random_array(SHAPE)
    a[0, 1, 2] = a[2, 3, 0] = np.nan
    t, g = pair(a, device)
    for kw in ({}, {"dim": 1}, {"dim": (0, 2), "keepdim": True}):
        assert_close(gt.nansum(g, **kw), torch.nansum(t, **kw))
    assert_close(gt.nansum(gt.tensor([1, 2], device=device)), torch.tensor(3))
    with pytest.raises(RuntimeError, match="complex"):
        gt.nansum(gt.ones(2, dtype=gt.complex64, device=device))


def test_sum_dtype_and_out(device: str) -> None:
    a = random_array(SHAPE, gt.int32)
    t, g = pair(a, device)
    assert_close(g.sum(1, dtype=gt.float64), t.sum(1, dtype=torch.float64))
    assert_close(g.prod(0, dtype=gt.float32), t.prod(0, dtype=torch.float32))
    out = gt.empty(3, 5, dtype=gt.float32, device=device)
    res = gt.sum(g, 1, out=out)
    assert res is out
    assert_close(out, torch.sum(t, 1, out=torch.empty(3, 5)))
    wrong = gt.empty(2, device=device)
    with pytest.warns(UserWarning, match="was resized"):  # PyTorch resizes, with a warning
        gt.sum(g, 1, out=wrong)
    assert_close(wrong, torch.sum(t, 1, out=torch.empty(3, 5)))
    assert_close(gt.mean(g, dtype=gt.float64), torch.mean(t, dtype=torch.float64))


def test_mean_needs_float(device: str) -> None:
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        gt.mean(gt.tensor([1, 2], device=device))
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        gt.tensor([True], device=device).mean()
    helper_test_op([SHAPE], lambda x: x.mean((0, 1)), device=device, dtype=gt.complex64)


def test_accuracy_and_blocks(device: str) -> None:
    """Rows longer than one block and long columns: float32 sums as accurate as NumPy's."""
    rng = np.random.default_rng(1)
    a = rng.random((3, 3 * cpu_reduction.ROW_BLOCK + 7), dtype=np.float32) * 100
    ref = a.astype(np.float64)
    g = gt.tensor(a, device=device)
    for dim in (1, 0):
        got = g.sum(dim).cpu().numpy().astype(np.float64)
        want = ref.sum(dim)
        np_err = np.abs(a.sum(dim).astype(np.float64) - want).max()
        assert np.abs(got - want).max() <= max(np_err, 1e-7 * np.abs(want).max())
    ones = gt.ones(1 << 16, dtype=gt.float16, device=device)
    assert ones.sum().item() == float(1 << 16) or math.isinf(ones.sum().item())  # fp16 overflow
    assert gt.ones(1 << 17, device=device).sum().item() == float(1 << 17)


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (2, 1, 0)])
@pytest.mark.parametrize("dim", [0, 1, 2, (0, 2), (0, 1)])
def test_permuted_layouts(device: str, perm: tuple, dim: Any) -> None:
    """Reductions of permuted (non-contiguous) views, including outputs needing a transpose."""
    helper_test_op([SHAPE], lambda x: x.permute(*perm).sum(dim), device=device)
    helper_test_op([SHAPE], lambda x: x.permute(*perm).amax(dim), device=device,
                   dtype=gt.int32)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.int32, gt.float16])
@pytest.mark.parametrize("name", ["sum", "nansum", "amax", "amin"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_outer_and_inner_dims(device: str, dtype: gt.dtype, name: str, keepdim: bool) -> None:
    """Reducing the dims around a kept block of a contiguous tensor (a conv bias's gradient,
    (N, C, H, W) over (0, 2, 3)): the CPU reduces the outer dims, then the inner ones."""
    a = random_array((5, 3, 4, 6), dtype, low=-3, high=3)
    if dtype in (gt.float32, gt.float64):
        a[1, 2, 3, 0] = np.nan
    t, g = pair(a, device)
    rtol = 2e-3 if dtype == gt.float16 else 1e-5
    atol = 2e-2 if dtype == gt.float16 else 1e-5   # 72 terms of magnitude 3, rounded to half
    for dims in ((0, 2, 3), (0, 3), (0, 1, 3)):
        assert_close(getattr(g, name)(dims, keepdim=keepdim),
                     getattr(t, name)(dims, keepdim=keepdim), rtol=rtol, atol=atol)
    if device == "cpu" and dtype == gt.float32 and name == "sum":
        assert cpu_reduction._split(name, a, (0, 2, 3)) == (5, 3, 24)
        assert cpu_reduction._split(name, a, (0, 1)) is None   # one plan reads it in place


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.int32])
def test_outer_and_inner_dims_of_products(dtype: gt.dtype) -> None:
    """The CPU's prod kernel over several dims (the public prod takes one, as PyTorch's)."""
    a = random_array((5, 3, 4, 6), dtype, low=0.9, high=1.1)
    if dtype == gt.int32:
        a = (a % 3).astype(np.int32)
    for dims in ((0, 2, 3), (0, 3)):
        want = a.astype(np.float64).prod(axis=dims)
        got = gt.empty(want.shape, dtype=gt.int64 if dtype == gt.int32 else dtype)
        cpu_reduction._acc_kernel("prod")(got, gt.tensor(a), dims)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_strided_and_expanded(device: str) -> None:
    a = random_array((6, 8))
    t, g = pair(a, device)
    assert_close(g[::2, 1::3].sum(0), t[::2, 1::3].sum(0))
    assert_close(g[::2, 1::3].sum(1), t[::2, 1::3].sum(1))
    assert_close(g[:, :1].expand(6, 5).sum(0), t[:, :1].expand(6, 5).sum(0))
    assert_close(g[:, :1].expand(6, 5).sum(), t[:, :1].expand(6, 5).sum())
    assert_close(g.t().sum(1), t.t().sum(1))
    assert_close(g[:, :1].expand(6, 5).argmax(0), t[:, :1].expand(6, 5).argmax(0))
    assert_close(g[:, :1].expand(6, 5).max(1), t[:, :1].expand(6, 5).max(1))
    assert_close(g[:1].expand(4, 8).min(0), t[:1].expand(4, 8).min(0))


# -- extrema ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float32, gt.int32, gt.float16])
def test_max_min(device: str, dtype: gt.dtype) -> None:
    for fn in (lambda x: x.max(), lambda x: x.min(), lambda x: x.max(1), lambda x: x.min(0),
               lambda x: x.max(-1, keepdim=True), lambda x: x.min(dim=2, keepdim=True)):
        helper_test_op([SHAPE], fn, device=device, dtype=dtype, low=-3, high=3)
    helper_test_op([SHAPE], lambda x: x.max(1), device=device, dtype=dtype, noncontig=True)


def test_max_namedtuple_and_binary(device: str) -> None:
    a = np.array([[1.0, 5.0, 5.0], [7.0, 7.0, 0.0]], np.float32)
    t, g = pair(a, device)
    r = g.max(1)
    assert_close(r.values, t.max(1).values)
    assert r.indices.tolist() == [1, 0]  # the first of tied maxima
    values, indices = gt.min(g, dim=0)
    assert_close((values, indices), torch.min(t, dim=0))
    assert repr(r).startswith("max(values=")
    b = random_array((2, 3), seed=3)
    tb, gb = pair(b, device)
    assert_close(gt.max(g, gb), torch.max(t, tb))
    assert_close(g.min(gb), t.min(tb))
    out = (gt.empty(2, device=device), gt.empty(2, dtype=gt.int64, device=device))
    res = gt.max(g, 1, out=out)
    assert res.values is out[0] and out[1].tolist() == [1, 0]


def test_nan_propagation(device: str) -> None:
    a = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 1.0, 0.0, -1.0]], np.float32)
    t, g = pair(a, device)
    for name in ("max", "min", "amax", "amin"):
        assert_close(getattr(g, name)(), getattr(t, name)())
    for name in ("max", "min", "argmax", "argmin"):
        assert_close(getattr(g, name)(1), getattr(t, name)(1))
        assert_close(getattr(g, name)(0), getattr(t, name)(0))
    assert_close(g.argmax(), t.argmax())
    assert_close(g.amax(0), t.amax(0))


@pytest.mark.parametrize("dim", [None, 0, (0, 2), (1, 2), -1])
def test_amax_amin(device: str, dim: Any) -> None:
    kw = dim_kwargs(dim)
    helper_test_op([SHAPE], lambda x: x.amax(**kw), device=device)
    helper_test_op([SHAPE], lambda x: x.amin(**kw, keepdim=True), device=device, dtype=gt.int32)
    helper_test_op([SHAPE], lambda x: torch.amax(x, **kw) if isinstance(x, torch.Tensor)
                   else gt.amax(x, **kw), device=device, dtype=gt.bool)


@pytest.mark.parametrize("dtype", [gt.float32, gt.int32])
def test_argmax_argmin(device: str, dtype: gt.dtype) -> None:
    for fn in (lambda x: x.argmax(), lambda x: x.argmin(), lambda x: x.argmax(1),
               lambda x: x.argmin(0, keepdim=True), lambda x: x.argmax(dim=None, keepdim=True),
               lambda x: x.argmin(-1)):
        helper_test_op([SHAPE], fn, device=device, dtype=dtype, low=-3, high=3)
    helper_test_op([SHAPE], lambda x: x.argmax(0), device=device, dtype=dtype, noncontig=True)
    helper_test_op([SHAPE], lambda x: x.argmax(), device=device, dtype=dtype, noncontig=True)


def test_argmax_long_rows_and_columns(device: str) -> None:
    """Ties across block boundaries keep the first index."""
    n = 2 * cpu_reduction.ROW_BLOCK + 5
    a = np.zeros((2, n), np.float32)
    a[0, [10, n - 1]] = 5.0
    a[1, [cpu_reduction.ROW_BLOCK + 1, n - 2]] = 5.0
    t, g = pair(a, device)
    assert_close(g.argmax(1), t.argmax(1))
    assert_close(g.t().contiguous().argmax(0), t.t().contiguous().argmax(0))
    assert_close(g.argmax(), t.argmax())


def test_aminmax(device: str) -> None:
    a = random_array(SHAPE)
    t, g = pair(a, device)
    r = gt.aminmax(g)
    assert_close((r.min, r.max), tuple(torch.aminmax(t)))
    assert_close(tuple(g.aminmax(dim=1, keepdim=True)), tuple(t.aminmax(dim=1, keepdim=True)))
    with pytest.raises(RuntimeError, match="empty"):
        gt.aminmax(gt.zeros(0, device=device))


def test_extrema_errors(device: str) -> None:
    empty = gt.zeros(0, 3, device=device)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        gt.max(empty)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        gt.amax(empty)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        gt.max(empty, 0)
    with pytest.raises(IndexError, match="non-zero size"):
        gt.amin(empty, 0)
    with pytest.raises(IndexError, match="Expected reduction dim to be specified"):
        gt.argmax(empty)
    assert gt.amax(empty, 1).shape == (0,)
    assert gt.max(empty, 1).indices.shape == (0,)
    with pytest.raises(NotImplementedError, match="\"max_all\" not implemented for 'ComplexFloat'"):
        gt.ones(2, dtype=gt.complex64, device=device).max()
    with pytest.raises(RuntimeError, match="bool"):
        gt.ones(2, dtype=gt.bool, device=device).argmax()
    with pytest.raises(IndexError, match="out of range"):
        gt.ones(2, 3, device=device).max(2)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        gt.ones(2, 3, device=device).sum((0, -2))
    with pytest.raises(RuntimeError, match="dtype"):
        gt.amax(gt.ones(3, device=device), 0, out=gt.empty((), dtype=gt.float64, device=device))


# -- moments ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [None, 0, (0, 2), -1])
def test_var_std(device: str, dim: Any) -> None:
    kw = dim_kwargs(dim)
    helper_test_op([SHAPE], lambda x: x.var(**kw), device=device)
    helper_test_op([SHAPE], lambda x: x.std(**kw, keepdim=True), device=device)
    helper_test_op([SHAPE], lambda x: x.var(**kw, unbiased=False), device=device, noncontig=True)
    helper_test_op([SHAPE], lambda x: x.std(**kw, correction=2), device=device)
    helper_test_op([SHAPE], lambda x: x.var(**kw), device=device, dtype=gt.complex64)


def test_var_mean_std_mean(device: str) -> None:
    a = random_array(SHAPE, low=100, high=101)  # a large offset: two-pass stays accurate
    t, g = pair(a, device)
    assert_close(gt.var_mean(g, 1), torch.var_mean(t, 1), rtol=1e-4)
    assert_close(gt.std_mean(g, (0, 2), keepdim=True), torch.std_mean(t, (0, 2), keepdim=True),
                 rtol=1e-4)
    assert_close(gt.var(g, 1, True, True), torch.var(t, 1, True, True), rtol=1e-4)
    assert_close(gt.std(g, False), torch.std(t, False), rtol=1e-4)


def test_var_edge_cases(device: str) -> None:
    with pytest.warns(UserWarning, match="degrees of freedom"):
        assert math.isnan(gt.var(gt.ones(1, device=device)).item())
    with pytest.raises(RuntimeError, match="floating point and complex"):
        gt.std(gt.tensor([1, 2], device=device))
    with pytest.raises(TypeError, match="either unbiased or correction"):
        gt.var(gt.ones(3, device=device), 0, unbiased=True, correction=1)


# -- norms, logsumexp ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, math.inf, -math.inf, "fro", 3, 0.5, 0, -1])
def test_norm(device: str, p: Any) -> None:
    helper_test_op([SHAPE], lambda x: x.norm(p), device=device, rtol=1e-4)
    helper_test_op([SHAPE], lambda x: x.norm(p, dim=1, keepdim=True), device=device, rtol=1e-4)


def test_norm_complex_dtype_errors(device: str) -> None:
    helper_test_op([SHAPE], lambda x: x.norm(), device=device, dtype=gt.complex64)
    helper_test_op([SHAPE], lambda x: x.norm(1, dim=0), device=device, dtype=gt.complex64)
    a = random_array(SHAPE)
    t, g = pair(a, device)
    assert_close(gt.norm(g, dtype=gt.float64), torch.norm(t, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="floating point or complex"):
        gt.norm(gt.tensor([1, 2], device=device))
    with pytest.raises(RuntimeError, match="inf norm on an empty tensor"):
        gt.norm(gt.zeros(0, device=device), math.inf)
    assert gt.norm(gt.zeros(0, device=device)).item() == 0.0


@pytest.mark.parametrize("dim", [0, -1, (0, 2), (1, 2)])
def test_logsumexp(device: str, dim: Any) -> None:
    helper_test_op([SHAPE], lambda x: x.logsumexp(dim), device=device)
    helper_test_op([SHAPE], lambda x: x.logsumexp(dim, keepdim=True), device=device,
                   low=500, high=800, rtol=1e-6)  # exp would overflow without the shift


def test_logsumexp_special(device: str) -> None:
    inf = math.inf
    a = np.array([[-inf, -inf], [inf, 1.0], [np.nan, 1.0], [0.0, 1.0]], np.float32)
    t, g = pair(a, device)
    assert_close(g.logsumexp(1), t.logsumexp(1))
    ti, gi = pair(np.array([1, 2, 3]), device)
    assert_close(gi.logsumexp(0), ti.logsumexp(0))
    assert_close(gt.logsumexp(gt.zeros(0, 2, device=device), 0), torch.logsumexp(
        torch.zeros(0, 2), 0))


# -- logical ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.bool, gt.float32])
def test_all_any(device: str, dtype: gt.dtype) -> None:
    for fn in (lambda x: x.all(), lambda x: x.any(), lambda x: x.all(1),
               lambda x: x.any(0, keepdim=True), lambda x: x.all((0, 2))):
        helper_test_op([SHAPE], fn, device=device, dtype=dtype, low=0, high=1)
    helper_test_op([SHAPE], lambda x: x.all(), device=device, dtype=gt.uint8, low=0, high=1)
    assert gt.zeros(0, device=device).all().item() is True
    assert gt.zeros(0, device=device).any().item() is False
    with pytest.raises(RuntimeError, match="bool tensor for result"):
        gt.all(gt.ones(3, device=device), 0, out=gt.empty((), device=device))


@pytest.mark.parametrize("dim", [None, 0, (0, 2), -1])
def test_count_nonzero(device: str, dim: Any) -> None:
    kw = dim_kwargs(dim)
    helper_test_op([SHAPE], lambda x: torch.count_nonzero(x, **kw) if isinstance(x, torch.Tensor)
                   else gt.count_nonzero(x, **kw), device=device, dtype=gt.int32, low=-1, high=1)
    assert gt.ones(2, 3, device=device).count_nonzero(1).tolist() == [3, 3]


# -- scans --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [gt.float32, gt.int32, gt.bool, gt.float16, gt.complex64])
def test_cumsum_cumprod(device: str, dim: int, dtype: gt.dtype) -> None:
    helper_test_op([SHAPE], lambda x: x.cumsum(dim), device=device, dtype=dtype)
    if dtype in (gt.float32, gt.int32):
        helper_test_op([SHAPE], lambda x: x.cumprod(dim), device=device, dtype=dtype,
                       low=-1.2, high=1.2, atol=1e-4)


def test_scan_options(device: str) -> None:
    a = random_array(SHAPE, gt.int32)
    t, g = pair(a, device)
    assert_close(g.cumsum(1, dtype=gt.float64), t.cumsum(1, dtype=torch.float64))
    assert_close(noncontiguous(g).cumsum(2), t.cumsum(2))
    out = gt.empty(SHAPE, dtype=gt.int64, device=device)
    assert gt.cumprod(g, 0, out=out) is out
    assert_close(out, t.cumprod(0))
    assert_close(gt.cumsum(gt.tensor(3.0, device=device), 0), torch.cumsum(torch.tensor(3.0), 0))
    assert gt.cumsum(gt.zeros(0, device=device), 0).shape == (0,)
    with pytest.raises(IndexError, match="out of range"):
        g.cumsum(3)


# -- softmax ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(device: str, dim: int) -> None:
    helper_test_op([SHAPE], lambda x: x.softmax(dim), device=device)
    helper_test_op([SHAPE], lambda x: x.log_softmax(dim), device=device, noncontig=True)
    helper_test_op([SHAPE], lambda x: x.softmax(dim), device=device, low=500,
                   high=900)  # stable: shifted by the max
    helper_test_op([SHAPE], lambda x: x.log_softmax(dim), device=device, dtype=gt.float16)


def test_softmax_options(device: str) -> None:
    a = random_array(SHAPE, gt.int32)
    t, g = pair(a, device)
    assert_close(gt.softmax(g, 1, dtype=gt.float64), torch.softmax(t, 1, dtype=torch.float64))
    assert_close(g.log_softmax(-1, gt.float32), t.log_softmax(-1, torch.float32))
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        gt.softmax(gt.tensor([1, 2], device=device), 0)
    inf = math.inf
    sp = np.array([[-inf, 0.0, 1.0], [-inf, -inf, -inf], [inf, 0.0, 1.0]], np.float32)
    ts, gs = pair(sp, device)
    assert_close(gs.softmax(1), ts.softmax(1))
    assert_close(gs.log_softmax(1), ts.log_softmax(1))


# -- 0-d and empty inputs -----------------------------------------------------------------------
def test_scalar_inputs(device: str) -> None:
    t, g = torch.tensor(3.0), gt.tensor(3.0, device=device)
    for fn in (lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.mean(-1),
               lambda x: x.amax((0,)), lambda x: x.max(0), lambda x: x.argmax(0),
               lambda x: x.softmax(0), lambda x: x.cumprod(0), lambda x: x.norm(),
               lambda x: x.logsumexp(0), lambda x: x.prod(0, keepdim=True)):
        assert_close(fn(g), fn(t))


def test_empty_reductions(device: str) -> None:
    e = gt.zeros(0, 3, device=device)
    te = torch.zeros(0, 3)
    for fn in (lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.prod(0), lambda x: x.sum(1),
               lambda x: x.mean(0), lambda x: x.nansum(), lambda x: x.prod(),
               lambda x: x.norm(dim=0), lambda x: x.all(0), lambda x: x.any(0)):
        assert_close(fn(e), fn(te))


# -- the parallel kernels (inputs above the threshold) ------------------------------------------
def test_parallel_paths(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_reduction, "use_threads", lambda n: True)
    a = random_array((3, 2 * cpu_reduction.ROW_BLOCK + 3), seed=5)
    t, g = pair(a, device)
    assert_close(g.sum(), t.sum(), rtol=1e-5)
    assert_close(g.sum(1), t.sum(1), rtol=1e-5)
    assert_close(g.t().contiguous().sum(0), t.sum(1), rtol=1e-5)  # column blocks along K
    assert_close(g.argmax(1), t.argmax(1))
