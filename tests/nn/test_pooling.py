"""Pooling against PyTorch: max/avg pooling in 1-D and 2-D and the adaptive pools, forward,
indices and input gradients, double backward, NaN handling, argument errors and reprs."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.modules.pooling as pooling
from gputensor.autograd import gradcheck, gradgradcheck
from gputensor.nn.functional import _pooling as P
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(shape, device, dtype=gt.float32, seed=0, requires_grad=True):
    arr = random_array(shape, dtype, seed=seed)
    g = gt.tensor(arr, dtype=dtype, device=device, requires_grad=requires_grad)
    t = torch.tensor(arr, requires_grad=requires_grad)
    return g, t


def _check(g_fn, t_fn, shape, device, dtype=gt.float32):
    """Forward (values and indices when returned) and input-gradient parity."""
    x, tx = _pair(shape, device, dtype)
    out, t_out = g_fn(x), t_fn(tx)
    if isinstance(t_out, tuple):
        assert isinstance(out, tuple) and len(out) == 2
        assert out[1].dtype is gt.int64
        assert_close(out[1], t_out[1])
        out, t_out = out[0], t_out[0]
    assert out.device == gt.device(device)
    assert_close(out, t_out.detach())
    go, t_go = _pair(tuple(t_out.shape), device, dtype, seed=1, requires_grad=False)
    out.backward(go)
    t_out.backward(t_go)
    assert_close(x.grad, tx.grad)


def _module_pair(name, *args, **kw):
    return getattr(pooling, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)


# -- max pooling -------------------------------------------------------------------------------
MAX2D_CASES = [
    ((2,), {}, (2, 3, 8, 8)),
    ((3,), {"stride": 2, "padding": 1}, (2, 3, 7, 8)),
    (((3, 2),), {"stride": (2, 1), "dilation": (1, 2), "ceil_mode": True}, (2, 3, 7, 8)),
    ((3,), {"stride": 2, "ceil_mode": True, "return_indices": True}, (2, 3, 7, 8)),
    ((2,), {"padding": 1, "return_indices": True}, (2, 3, 7, 8)),
    ((3,), {"stride": 1, "padding": 1}, (3, 5, 6)),                     # unbatched, overlap
    ((2,), {"stride": 3, "dilation": 2, "padding": 1}, (1, 2, 9, 9)),
]


@pytest.mark.parametrize("args,kw,shape", MAX2D_CASES)
def test_max_pool2d_parity(device, args, kw, shape):
    g, t = _module_pair("MaxPool2d", *args, **kw)
    _check(g, t, shape, device)
    _check(lambda x: gt.max_pool2d(x, *args, **kw), lambda x: TF.max_pool2d(x, *args, **kw),
           shape, device)


@pytest.mark.parametrize("kw,shape", [
    ({"kernel_size": 3, "stride": 2, "padding": 1, "return_indices": True}, (2, 3, 9)),
    ({"kernel_size": 2, "dilation": 2, "ceil_mode": True}, (3, 9)),            # unbatched
    ({"kernel_size": 4}, (2, 2, 12)),
])
def test_max_pool1d_parity(device, kw, shape):
    g, t = _module_pair("MaxPool1d", **kw)
    _check(g, t, shape, device)


def test_max_pool_nan_and_inf(device):
    a = random_array((1, 1, 4, 4), seed=2)
    a[0, 0, 1, 1] = a[0, 0, 3, 2] = a[0, 0, 2, 3] = np.nan
    out, idx = gt.max_pool2d(gt.tensor(a, device=device), 2, return_indices=True)
    t_out, t_idx = TF.max_pool2d(torch.tensor(a), 2, return_indices=True)
    assert_close(out, t_out)
    assert_close(idx, t_idx)
    neg = np.full((1, 1, 3, 3), -np.inf, np.float32)
    out, idx = gt.max_pool2d(gt.tensor(neg, device=device), 2, padding=1, return_indices=True)
    t_out, t_idx = TF.max_pool2d(torch.tensor(neg), 2, padding=1, return_indices=True)
    assert_close(out, t_out)
    assert_close(idx, t_idx)


def test_pool_integer_and_float64(device):
    xi = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5) - 70
    gx, tx = gt.tensor(xi, device=device), torch.tensor(xi)
    assert_close(gt.max_pool2d(gx, 3, 2, 1), TF.max_pool2d(tx, 3, 2, 1))
    assert_close(gt.avg_pool2d(gx, 3, 2, 1), TF.avg_pool2d(tx, 3, 2, 1))   # truncated means
    _check(lambda x: gt.max_pool2d(x, 3, 2, 1), lambda x: TF.max_pool2d(x, 3, 2, 1),
           (2, 3, 7, 6), device, gt.float64)
    _check(lambda x: gt.avg_pool2d(x, 3, 2), lambda x: TF.avg_pool2d(x, 3, 2),
           (2, 3, 7, 6), device, gt.float64)


def test_pool_noncontiguous_input(device):
    base = gt.tensor(random_array((2, 7, 6, 3), seed=5), device=device)
    x = base.permute(0, 3, 1, 2)                 # channels-last strides
    tx = torch.from_numpy(x.cpu().numpy().copy())
    assert_close(gt.max_pool2d(x, 3, 2, 1, return_indices=True)[1],
                 TF.max_pool2d(tx, 3, 2, 1, return_indices=True)[1])
    assert_close(gt.avg_pool2d(x, 2, ceil_mode=True), TF.avg_pool2d(tx, 2, ceil_mode=True))
    assert_close(gt.adaptive_avg_pool2d(x, (3, 4)), TF.adaptive_avg_pool2d(tx, (3, 4)))


# -- average pooling ---------------------------------------------------------------------------
AVG2D_CASES = [
    ((2,), {}, (2, 3, 8, 8)),
    ((3,), {"stride": 2, "padding": 1}, (2, 3, 7, 8)),
    ((3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 7, 8)),
    ((3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
     (2, 3, 7, 8)),
    (((3, 2),), {"padding": 1, "divisor_override": 5}, (2, 3, 7, 8)),
    ((2,), {"stride": 1}, (3, 5, 4)),                                    # unbatched
]


@pytest.mark.parametrize("args,kw,shape", AVG2D_CASES)
def test_avg_pool2d_parity(device, args, kw, shape):
    g, t = _module_pair("AvgPool2d", *args, **kw)
    _check(g, t, shape, device)


@pytest.mark.parametrize("kw,shape", [
    ({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
      "count_include_pad": False}, (2, 3, 9)),
    ({"kernel_size": 2}, (3, 8)),                                              # unbatched
])
def test_avg_pool1d_parity(device, kw, shape):
    g, t = _module_pair("AvgPool1d", **kw)
    _check(g, t, shape, device)
    _check(lambda x: gt.avg_pool1d(x, **kw), lambda x: TF.avg_pool1d(x, **kw), shape, device)


# -- adaptive pooling --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [3, (4, 5), (None, 2), 1, (7, 8), (10, 3)])
def test_adaptive_pool2d_parity(device, size):
    for name in ("AdaptiveAvgPool2d", "AdaptiveMaxPool2d"):
        g, t = _module_pair(name, size)
        _check(g, t, (2, 3, 7, 8), device)
    g, t = _module_pair("AdaptiveMaxPool2d", size, return_indices=True)
    _check(g, t, (3, 7, 8), device)                                      # unbatched


@pytest.mark.parametrize("size", [3, 1, 10])
def test_adaptive_pool1d_parity(device, size):
    for name in ("AdaptiveAvgPool1d", "AdaptiveMaxPool1d"):
        g, t = _module_pair(name, size)
        _check(g, t, (2, 3, 7), device)
    _check(lambda x: P.adaptive_max_pool1d_with_indices(x, size),
           lambda x: TF.adaptive_max_pool1d_with_indices(x, size), (3, 7), device)


def test_with_indices_functions(device):
    x, tx = _pair((2, 3, 6, 6), device)
    assert_close(P.max_pool2d_with_indices(x, 2)[1], TF.max_pool2d_with_indices(tx, 2)[1])
    assert_close(P.max_pool1d_with_indices(x[0], 3)[1], TF.max_pool1d_with_indices(tx[0], 3)[1])
    assert_close(P.adaptive_max_pool2d_with_indices(x, 4)[1],
                 TF.adaptive_max_pool2d_with_indices(tx, 4)[1])


# -- gradcheck and double backward -------------------------------------------------------------
def test_pool_gradcheck_and_double_backward():
    x = gt.tensor(random_array((2, 2, 5, 6), gt.float64, seed=3), requires_grad=True)
    fns = [lambda x: gt.max_pool2d(x, 3, 2, 1),
           lambda x: gt.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
           lambda x: gt.avg_pool2d(x, 2, divisor_override=3),
           lambda x: gt.adaptive_avg_pool2d(x, (3, 4)),
           lambda x: gt.adaptive_max_pool2d(x, (3, 2)),
           lambda x: gt.max_pool1d(x[0], 2)]
    for fn in fns:
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


def test_max_pool_double_backward_matches_torch():
    x, tx = _pair((1, 2, 6, 6), "cpu", gt.float64)
    (g,) = gt.autograd.grad(gt.max_pool2d(x, 2).pow(2).sum(), (x,), create_graph=True)
    g.pow(2).sum().backward()
    (tg,) = torch.autograd.grad(TF.max_pool2d(tx, 2).pow(2).sum(), (tx,), create_graph=True)
    tg.pow(2).sum().backward()
    assert_close(x.grad, tx.grad)


# -- errors and reprs --------------------------------------------------------------------------
@pytest.mark.parametrize("fn,shape,match", [
    (lambda x: gt.max_pool2d(x, 3, padding=2), (2, 3, 8, 8),
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3"),
    (lambda x: gt.avg_pool2d(x, 3, padding=2), (2, 3, 8, 8), "pad should be at most half"),
    (lambda x: gt.max_pool2d(x, 3), (2, 3, 2, 2),
     r"Given input size: \(3x2x2\). Calculated output size: \(3x0x0\). Output size is too "
     r"small"),
    (lambda x: gt.max_pool2d(x, 3), (8, 8), "non-empty 3D or 4D"),
    (lambda x: gt.max_pool2d(x, 3, stride=0), (2, 3, 8, 8), "stride should be greater than zero"),
    (lambda x: gt.max_pool2d(x, 0), (2, 3, 8, 8), "kernel size should be greater than zero"),
    (lambda x: gt.max_pool2d(x, 2, dilation=0), (2, 3, 8, 8), "dilation should be greater"),
    (lambda x: gt.max_pool2d(x, (1, 2, 3)), (2, 3, 8, 8), "kernel_size must either be"),
    (lambda x: gt.avg_pool2d(x, 3, divisor_override=0), (2, 3, 8, 8),
     "divisor must be not zero"),
    (lambda x: gt.adaptive_avg_pool2d(x, 3), (8, 8), r"Expected 3D or 4D tensor, but got \[8"),
    (lambda x: gt.adaptive_max_pool2d(x, (1, 2, 3)), (2, 8, 8), "output_size must be 2"),
    (lambda x: gt.max_pool1d(x, 2), (2, 3, 8, 8), "Expected 2D or 3D"),
])
def test_pool_errors(fn, shape, match):
    with pytest.raises(RuntimeError, match=match):
        fn(gt.zeros(shape))


@pytest.mark.parametrize("name,args,kw", [
    ("MaxPool2d", (2,), {}),
    ("MaxPool2d", ((3, 2),), {"stride": 1, "padding": 1, "dilation": 2, "ceil_mode": True,
                              "return_indices": True}),
    ("MaxPool1d", (3,), {}),
    ("AvgPool2d", (2,), {}),
    ("AvgPool2d", (3, 2, 1, True, False, 4), {}),
    ("AvgPool1d", (3,), {}),
    ("AvgPool1d", (3, 2, 1, True, False), {}),
    ("AdaptiveAvgPool2d", ((None, 3),), {}),
    ("AdaptiveAvgPool1d", (3,), {}),
    ("AdaptiveMaxPool2d", (2,), {"return_indices": True}),
    ("AdaptiveMaxPool1d", (4,), {}),
])
def test_repr_matches_torch(name, args, kw):
    g, t = _module_pair(name, *args, **kw)
    assert repr(g) == repr(t)
    assert getattr(g, "stride", None) == getattr(t, "stride", None)


@pytest.mark.parametrize("shape, size", [((2, 3, 10), 4), ((3, 7), 3), ((1, 2, 5), (5,)),
                                         ((2, 2, 6), 1)])
def test_adaptive_avg_pool1d_matches_torch(device, shape, size):
    x, tx = _pair(shape, device)
    got, want = gt.adaptive_avg_pool1d(x, size), TF.adaptive_avg_pool1d(tx, size)
    assert_close(got, want)
    g = random_array(tuple(want.shape), seed=3)
    got.backward(gt.tensor(g, device=device))
    want.backward(torch.from_numpy(g))
    assert_close(x.grad, tx.grad)
