"""cummax / cummin / logcumsumexp against PyTorch on cpu and emulated cuda: values and indices
(ties, NaN, every dtype family), gradients (gradcheck and PyTorch's on ties, NaN and -inf),
out=, the Tensor methods, 0-d and empty inputs, and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close, assert_same_error

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


def _pair(data, device, dtype="float64", grad=False):
    return (gt.tensor(data, dtype=getattr(gt, dtype), device=device, requires_grad=grad),
            torch.tensor(data, dtype=getattr(torch, dtype), requires_grad=grad))


def _ties_and_nans(shape, seed=0, nans=True):
    """Small integers (many ties) with a few NaNs."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-3, 4, shape).astype(np.float64)
    if nans and data.size > 3:
        data.reshape(-1)[rng.choice(data.size, data.size // 7 + 1, replace=False)] = NAN
    return data




# -- cummax / cummin ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("shape,dim", [((1,), 0), ((2,), 0), ((13,), -1), ((3, 8), 1),
                                       ((3, 8), 0), ((4, 5, 6), -2), ((2, 17, 3), 1)])
def test_extremes_with_ties_and_nan(device, name, shape, dim) -> None:
    data = _ties_and_nans(shape)
    g, t = _pair(data, device, grad=True)
    got, want = getattr(gt, name)(g, dim), getattr(torch, name)(t, dim)
    assert type(got).__name__ == name and got._fields == ("values", "indices")
    assert_close(got.values, want.values)
    assert_close(got.indices, want.indices)
    # the gradient lands on the selected (index) positions, NaN rows included
    w = np.random.default_rng(1).standard_normal(shape)
    (got.values.nan_to_num() * gt.tensor(w, device=device)).sum().backward()
    (want.values.nan_to_num() * torch.tensor(w)).sum().backward()
    assert_close(g.grad, t.grad)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "int32", "uint8",
                                   "int8", "bool"])
def test_extremes_dtypes(device, dtype) -> None:
    data = np.random.default_rng(2).integers(0, 5, (3, 9))
    if dtype.startswith("float") or dtype == "bfloat16":
        data = _ties_and_nans((3, 9), seed=3)
    g, t = _pair(data, device, dtype)
    for name in ("cummax", "cummin"):
        for dim in (0, 1):
            got, want = getattr(gt, name)(g, dim), getattr(torch, name)(t, dim)
            assert_close(got.values, want.values)
            assert_close(got.indices, want.indices)


def test_extremes_signed_zeros_and_infinities(device) -> None:
    data = [0.0, -0.0, 0.0, -INF, INF, INF, -0.0, NAN, INF]
    g, t = _pair(data, device)
    for name in ("cummax", "cummin"):
        got, want = getattr(gt, name)(g, 0), getattr(torch, name)(t, 0)
        assert_close(got.values, want.values)
        assert_close(got.indices, want.indices)


def test_extremes_methods_and_keywords(device) -> None:
    data = _ties_and_nans((4, 6), seed=4)
    g, t = _pair(data, device)
    for name in ("cummax", "cummin"):
        want = getattr(t, name)(dim=-1)
        for got in (getattr(g, name)(-1), getattr(g, name)(dim=-1),
                    getattr(gt, name)(g, axis=-1)):
            assert_close(got.values, want.values)
            assert_close(got.indices, want.indices)
    # strided input: a transposed view
    got, want = gt.cummax(g.t(), 1), torch.cummax(t.t(), 1)
    assert_close(got.values, want.values)
    assert_close(got.indices, want.indices)


def test_extremes_scalar_and_empty(device) -> None:
    for name in ("cummax", "cummin"):
        g, t = _pair(2.5, device, grad=True)
        for dim in (0, -1):
            got, want = getattr(gt, name)(g, dim), getattr(torch, name)(t, dim)
            assert_close(got.values, want.values)
            assert_close(got.indices, want.indices)
        got.values.backward()
        assert_close(g.grad, torch.tensor(1.0, dtype=torch.float64))
        for shape, dim in (((0,), 0), ((0, 3), 0), ((2, 0), 1), ((2, 0), 0)):
            got, want = getattr(gt, name)(gt.zeros(shape, device=device), dim), \
                getattr(torch, name)(torch.zeros(shape), dim)
            assert_close(got.values, want.values)
            assert_close(got.indices, want.indices)


def test_extremes_out(device) -> None:
    data = _ties_and_nans((3, 5), seed=5)
    g, t = _pair(data, device)
    values = gt.empty(0, dtype=gt.float64, device=device)
    indices = gt.empty(0, dtype=gt.int64, device=device)
    got = gt.cummin(g, 1, out=(values, indices))
    want = torch.cummin(t, 1)
    assert got.values is values and got.indices is indices
    assert_close(values, want.values)
    assert_close(indices, want.indices)
    # a non-empty out of the wrong shape is resized with PyTorch's deprecation warning
    values = gt.empty(2, dtype=gt.float64, device=device)
    with pytest.warns(UserWarning, match="was resized"):
        gt.cummax(g, 0, out=(values, gt.empty(15, dtype=gt.int64, device=device)))
    assert_close(values, torch.cummax(t, 0).values)
    # out dtypes must match exactly, as in PyTorch
    for out in ((gt.empty(15, dtype=gt.float32, device=device), indices),
                (gt.empty(15, dtype=gt.float64, device=device),
                 gt.empty(15, dtype=gt.int32, device=device))):
        t_out = tuple(torch.empty(15, dtype=getattr(torch, o.dtype.name)) for o in out)
        assert_same_error(lambda out=out: gt.cummax(g, 0, out=out),
                    lambda t_out=t_out: torch.cummax(t, 0, out=t_out))
    for bad, t_bad in ((values, torch.empty(15, dtype=torch.float64)),
                       ((values,), (torch.empty(15, dtype=torch.float64),))):
        assert_same_error(lambda bad=bad: gt.cummax(g, 0, out=bad),
                    lambda t_bad=t_bad: torch.cummax(t, 0, out=t_bad))
    gr, tr = _pair(data, device, grad=True)
    assert_same_error(lambda: gt.cummax(gr, 0, out=(gt.empty(0, dtype=gt.float64, device=device),
                                               gt.empty(0, dtype=gt.int64, device=device))),
                lambda: torch.cummax(tr, 0, out=(torch.empty(0, dtype=torch.float64),
                                                 torch.empty(0, dtype=torch.int64))))


@pytest.mark.parametrize("name", ["cummax", "cummin", "logcumsumexp"])
@pytest.mark.parametrize("data,dim", [([[1.0, 2.0]], 2), ([[1.0, 2.0]], -3), (1.0, 1),
                                      (1.0, -2)])
def test_dim_errors(device, name, data, dim) -> None:
    x, tx = _pair(data, device)
    assert_same_error(lambda: getattr(gt, name)(x, dim), lambda: getattr(torch, name)(tx, dim))


def test_dtype_errors(device) -> None:
    for name in ("cummax", "cummin"):
        with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
            getattr(gt, name)(gt.tensor([1 + 1j, 2], device=device), 0)
    for dtype in ("int64", "bool"):
        with pytest.raises(NotImplementedError, match="not implemented for"):
            gt.logcumsumexp(gt.tensor([1, 0], dtype=getattr(gt, dtype), device=device), 0)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_extremes_gradcheck(device, name) -> None:
    data = np.random.default_rng(6).permutation(24).reshape(2, 3, 4) * 0.3 - 3
    x = gt.tensor(data, device=device, requires_grad=True)
    for dim in (0, 1, -1):
        assert gradcheck(lambda x, dim=dim: getattr(gt, name)(x, dim).values, (x,))
        assert gradgradcheck(lambda x, dim=dim: getattr(gt, name)(x, dim).values, (x,))


# -- logcumsumexp -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((1,), 0), ((7,), 0), ((3, 8), 1), ((3, 8), -2),
                                       ((2, 33, 3), 1), ((4, 5, 6), -1)])
def test_logcumsumexp(device, shape, dim) -> None:
    data = np.random.default_rng(7).standard_normal(shape) * 4
    g, t = _pair(data, device, grad=True)
    got, want = gt.logcumsumexp(g, dim), torch.logcumsumexp(t, dim)
    assert_close(got, want)
    w = np.random.default_rng(8).standard_normal(shape)
    (got * gt.tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(g.grad, t.grad)
    assert_close(g.logcumsumexp(dim), want)
    assert_close(g.logcumsumexp(dim=dim), want)


def test_logcumsumexp_wide_range_is_stable(device) -> None:
    """Far apart magnitudes: no overflow for large values, no underflow to -inf for small."""
    data = [[-1000.0, -999.0, 0.0, 800.0, 800.0, -2000.0], [1e-300, 700.0, 710.0, 1e4, 1.0, 3]]
    g, t = _pair(data, device, grad=True)
    got, want = gt.logcumsumexp(g, 1), torch.logcumsumexp(t, 1)
    assert_close(got, want)
    got.sum().backward()
    want.sum().backward()
    assert_close(g.grad, t.grad)


@pytest.mark.parametrize("data", [
    [-INF, -INF, 1.0, 2.0],  # leading -inf: PyTorch's gradient is NaN there
    [1.0, -INF, 2.0, -INF],  # -inf after a finite value: gradient 0
    [INF, 1.0, 2.0],
    [1.0, INF, INF, -INF],
    [NAN, 1.0, 2.0],
    [1.0, 2.0, NAN, 3.0],
    [-INF, -INF],
])
def test_logcumsumexp_non_finite(device, data) -> None:
    for seed in (0, 1):
        weights = np.random.default_rng(seed).standard_normal(len(data))
        weights[0] = 0.0 if seed else weights[0]  # a zero upstream gradient too
        g, t = _pair(data, device, grad=True)
        got, want = gt.logcumsumexp(g, 0), torch.logcumsumexp(t, 0)
        assert_close(got, want)
        got.backward(gt.tensor(weights, device=device))
        want.backward(torch.tensor(weights))
        assert_close(g.grad, t.grad)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_logcumsumexp_dtypes(device, dtype) -> None:
    data = np.random.default_rng(9).standard_normal((3, 20)) * 3
    g, t = _pair(data, device, dtype)
    assert_close(gt.logcumsumexp(g, 1), torch.logcumsumexp(t, 1))


def test_logcumsumexp_scalar_empty_and_out(device) -> None:
    g, t = _pair(1.5, device, grad=True)
    got, want = gt.logcumsumexp(g, 0), torch.logcumsumexp(t, -1)
    assert_close(got, want)
    got.backward()
    assert_close(g.grad, torch.tensor(1.0, dtype=torch.float64))
    for shape, dim in (((0,), 0), ((2, 0), 1), ((0, 3), 1)):
        assert_close(gt.logcumsumexp(gt.zeros(shape, device=device), dim),
                     torch.logcumsumexp(torch.zeros(shape), dim))
    x, tx = _pair([[0.5, -1.0, 2.0]], device)
    out = gt.empty(0, dtype=gt.float64, device=device)
    assert gt.logcumsumexp(x, 1, out=out) is out
    assert_close(out, torch.logcumsumexp(tx, 1))
    assert_same_error(lambda: gt.logcumsumexp(x, 1, out=gt.empty(3, device=device)),
                lambda: torch.logcumsumexp(tx, 1, out=torch.empty(3)))
    xr, txr = _pair([1.0, 2.0], device, grad=True)
    assert_same_error(lambda: gt.logcumsumexp(xr, 0, out=gt.empty(0, dtype=gt.float64,
                                                            device=device)),
                lambda: torch.logcumsumexp(txr, 0, out=torch.empty(0, dtype=torch.float64)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gt.logcumsumexp(x, 0, out=gt.empty((1, 3), dtype=gt.float64, device=device))


def test_logcumsumexp_gradcheck(device) -> None:
    rng = np.random.default_rng(10)
    x = gt.tensor(rng.standard_normal((3, 5)), device=device, requires_grad=True)
    for dim in (0, 1):
        assert gradcheck(lambda x, dim=dim: gt.logcumsumexp(x, dim), (x,))
        assert gradgradcheck(lambda x, dim=dim: gt.logcumsumexp(x, dim), (x,))
    # -inf entries after a finite one: their gradient is 0 and the check stays finite
    y = gt.tensor([[0.3, -INF, 1.2, -INF]], device=device, requires_grad=True)
    y.logcumsumexp(1).sum().backward()
    assert bool(y.grad.isfinite().all()) and float(y.grad[0, 1]) == 0.0
