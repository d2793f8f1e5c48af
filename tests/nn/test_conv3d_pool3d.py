"""3-D convolution and pooling against PyTorch: Conv3d/ConvTranspose3d (strides, padding
strings and modes, dilation, groups, output_padding), max/avg pooling (ceil_mode, indices,
count_include_pad, divisor_override), the adaptive pools, max_unpool3d, lp_pool3d and the lazy
layers; forward values, indices and every gradient, gradcheck and double backward in float64,
unbatched inputs, PyTorch's errors and reprs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional
# torch warns that its 'same' padding with even kernels copies the input.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


def _pair(shape, device, dtype=gt.float32, seed=0, requires_grad=True):
    arr = random_array(shape, dtype, seed=seed)
    return (gt.tensor(arr, dtype=dtype, device=device, requires_grad=requires_grad),
            torch.tensor(arr, requires_grad=requires_grad))


def _check_module(g_mod, t_mod, in_shape, device, forward_kw=None):
    """Forward, input and parameter gradients of a module pair with the same weights."""
    forward_kw = forward_kw or {}
    g_mod.load_state_dict({k: gt.tensor(v.detach().numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    x, tx = _pair(in_shape, device)
    out, t_out = g_mod(x, **forward_kw), t_mod(tx, **forward_kw)
    assert out.device == gt.device(device) and out.is_contiguous()
    assert_close(out, t_out.detach(), atol=1e-5, rtol=1e-5)
    go, t_go = _pair(tuple(t_out.shape), device, seed=1, requires_grad=False)
    out.backward(go)
    t_out.backward(t_go)
    assert_close(x.grad, tx.grad, atol=1e-5, rtol=1e-5)
    for (name, p), (_, tp) in zip(g_mod.named_parameters(), t_mod.named_parameters(),
                                  strict=True):
        assert p.grad is not None, name
        assert_close(p.grad, tp.grad, atol=3e-4, rtol=1e-4)   # long float32 sums


def _check(g_fn, t_fn, shape, device, dtype=gt.float32):
    """Forward (and indices when returned) and input-gradient parity of a pooling function."""
    x, tx = _pair(shape, device, dtype)
    out, t_out = g_fn(x), t_fn(tx)
    if isinstance(t_out, tuple):
        assert out[1].dtype is gt.int64
        assert_close(out[1], t_out[1])
        out, t_out = out[0], t_out[0]
    assert out.device == gt.device(device) and tuple(out.shape) == tuple(t_out.shape)
    assert_close(out, t_out.detach())
    go, t_go = _pair(tuple(t_out.shape), device, dtype, seed=1, requires_grad=False)
    out.backward(go)
    t_out.backward(t_go)
    assert_close(x.grad, tx.grad)


def _modules(name, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the lazy layers' "new feature" warning
        return getattr(gt.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)


# -- convolutions ------------------------------------------------------------------------------
CONV3D_CASES = [
    # (in_channels, out_channels, kernel, kwargs, input shape)
    (3, 4, 3, {}, (2, 3, 5, 6, 5)),
    (3, 5, (3, 2, 1), {"stride": (2, 1, 2), "padding": (1, 0, 1)}, (2, 3, 6, 5, 7)),
    (4, 6, (2, 3, 2), {"stride": (1, 2, 1), "padding": 2, "dilation": (2, 1, 2), "groups": 2},
     (1, 4, 5, 7, 5)),
    (3, 4, (2, 4, 3), {"padding": "same", "bias": False}, (3, 4, 6, 5)),     # unbatched
    (2, 4, 3, {"padding": "same", "dilation": (1, 2, 1)}, (2, 2, 4, 6, 5)),
    (2, 3, 2, {"padding": "valid"}, (2, 3, 4, 4)),                           # unbatched
    (4, 4, 3, {"groups": 4, "padding": 1}, (2, 4, 3, 4, 4)),                 # depthwise
    (3, 4, (1, 3, 3), {"stride": (2, 1, 1), "padding": (0, 1, 1)}, (2, 3, 5, 4, 4)),
]


@pytest.mark.parametrize("cin,cout,k,kw,shape", CONV3D_CASES)
def test_conv3d_module_parity(device, cin, cout, k, kw, shape):
    g, t = gt.nn.Conv3d(cin, cout, k, device=device, **kw), torch.nn.Conv3d(cin, cout, k, **kw)
    _check_module(g, t, shape, device)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [(2, 1, 1), "same"])
def test_conv3d_padding_modes(device, mode, padding):
    g = gt.nn.Conv3d(2, 3, (3, 2, 3), padding=padding, padding_mode=mode, device=device)
    t = torch.nn.Conv3d(2, 3, (3, 2, 3), padding=padding, padding_mode=mode)
    _check_module(g, t, (2, 2, 4, 5, 4), device)


CONVT3D_CASES = [
    (3, 4, 3, {}, (2, 3, 3, 4, 3), None),
    (4, 6, (3, 2, 2), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
     (2, 4, 3, 3, 2), None),
    (4, 3, (2, 3, 2), {"stride": (3, 1, 2), "padding": (1, 1, 0), "output_padding": (2, 0, 1),
                       "dilation": (1, 2, 1), "bias": False}, (4, 3, 4, 3), None),   # unbatched
    (2, 2, 2, {"dilation": 2, "output_padding": 1}, (1, 2, 3, 2, 3), None),   # opad >= stride
    (3, 4, 3, {"stride": 2, "padding": 1}, (2, 3, 2, 3, 2), (4, 6, 3)),       # output_size
]


@pytest.mark.parametrize("cin,cout,k,kw,shape,output_size", CONVT3D_CASES)
def test_conv_transpose3d_module_parity(device, cin, cout, k, kw, shape, output_size):
    g = gt.nn.ConvTranspose3d(cin, cout, k, device=device, **kw)
    t = torch.nn.ConvTranspose3d(cin, cout, k, **kw)
    _check_module(g, t, shape, device,
                  forward_kw=None if output_size is None else {"output_size": output_size})


def test_conv3d_functional_float64_and_namespace(device):
    x, tx = _pair((2, 4, 4, 5, 4), device, gt.float64)
    w, tw = _pair((6, 2, 2, 3, 2), device, gt.float64, seed=2)
    b, tb = _pair((6,), device, gt.float64, seed=3)
    args = ((1, 2, 1), (1, 1, 0), (2, 1, 1), 2)
    out, t_out = F.conv3d(x, w, b, *args), TF.conv3d(tx, tw, tb, *args)
    assert_close(out, t_out.detach())
    out.pow(2).sum().backward()
    t_out.pow(2).sum().backward()
    for a, e in ((x, tx), (w, tw), (b, tb)):
        assert_close(a.grad, e.grad)
    assert gt.conv3d is F.conv3d and gt.conv_transpose3d is F.conv_transpose3d
    assert gt.max_pool3d is F.max_pool3d and not hasattr(gt.Tensor, "conv3d")


def test_conv3d_integer_complex_empty_and_strided_input(device):
    xi = np.arange(2 * 3 * 4 * 4 * 4).reshape(2, 3, 4, 4, 4) % 11 - 5
    wi = np.arange(4 * 3 * 2 * 2 * 2).reshape(4, 3, 2, 2, 2) % 5 - 2
    out = F.conv3d(gt.tensor(xi, device=device), gt.tensor(wi, device=device), stride=2,
                   padding=1)
    assert out.dtype is gt.int64
    assert_close(out, TF.conv3d(torch.tensor(xi), torch.tensor(wi), stride=2, padding=1))
    if device == "cpu":   # CUDA's transposed conv2d kernels take real dtypes only
        rng = np.random.default_rng(0)
        xc = rng.standard_normal((1, 2, 3, 3, 3)) + 1j * rng.standard_normal((1, 2, 3, 3, 3))
        wc = rng.standard_normal((2, 2, 2, 2, 2)) + 1j * rng.standard_normal((2, 2, 2, 2, 2))
        assert_close(F.conv_transpose3d(gt.tensor(xc), gt.tensor(wc)),
                     TF.conv_transpose3d(torch.tensor(xc), torch.tensor(wc)))
    conv = gt.nn.Conv3d(3, 4, 3, padding=1, device=device)
    x = gt.zeros((0, 3, 3, 4, 4), device=device, requires_grad=True)
    y = conv(x)
    assert tuple(y.shape) == (0, 4, 3, 4, 4)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 3, 4, 4)
    # channels_last_3d strides
    base, tbase = _pair((2, 4, 5, 4, 3), device, requires_grad=False)
    x, tx = base.permute(0, 4, 1, 2, 3), tbase.permute(0, 4, 1, 2, 3)
    w, tw = _pair((2, 3, 2, 2, 2), device, seed=4, requires_grad=False)
    assert_close(F.conv3d(x, w, padding=1), TF.conv3d(tx, tw, padding=1), atol=1e-5)
    assert_close(F.max_pool3d(x, 2, return_indices=True)[1],
                 TF.max_pool3d(tx, 2, return_indices=True)[1])
    assert_close(F.avg_pool3d(x, 2, ceil_mode=True), TF.avg_pool3d(tx, 2, ceil_mode=True))


def _f64(device, *shape, seed=0):
    return gt.tensor(random_array(shape, gt.float64, seed=seed), device=device,
                     requires_grad=True)


def test_conv3d_gradcheck_and_double_backward(device):
    x, w, b = _f64(device, 1, 2, 3, 3, 3), _f64(device, 2, 1, 2, 2, 2, seed=1), \
        _f64(device, 2, seed=2)

    def conv(x, w, b):
        return F.conv3d(x, w, b, stride=(1, 2, 1), padding=1, dilation=(1, 1, 2), groups=2)
    assert gradcheck(conv, (x, w, b))
    assert gradgradcheck(conv, (x, w, b))
    xt, wt = _f64(device, 1, 2, 2, 2, 2, seed=3), _f64(device, 2, 1, 2, 2, 2, seed=4)

    def convt(x, w, b):
        return F.conv_transpose3d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)
    assert gradcheck(convt, (xt, wt, b))
    assert gradgradcheck(convt, (xt, wt, b))


def test_inplace_relu_after_conv3d_and_pool3d(device):
    conv = gt.nn.Conv3d(2, 3, 3, padding=1, device=device)
    x = gt.randn(1, 2, 4, 4, 4, device=device, requires_grad=True)
    y = F.max_pool3d(conv(x).relu_(), 2)   # neither saved its output for backward
    y.relu_().sum().backward()
    assert x.grad is not None and conv.weight.grad is not None


# -- max pooling -------------------------------------------------------------------------------
MAX3D_CASES = [
    ((2,), {}, (2, 3, 4, 6, 4)),
    ((3,), {"stride": 2, "padding": 1, "return_indices": True}, (2, 2, 5, 6, 7)),
    (((3, 2, 2),), {"stride": (2, 1, 2), "dilation": (1, 2, 1), "ceil_mode": True,
                    "return_indices": True}, (1, 3, 7, 6, 5)),
    ((2,), {"stride": 1, "padding": 1, "return_indices": True}, (3, 4, 5, 4)),     # unbatched
    (((2, 3, 2),), {"stride": 2, "padding": (1, 1, 0), "ceil_mode": True}, (2, 2, 5, 6, 5)),
]


@pytest.mark.parametrize("args,kw,shape", MAX3D_CASES)
def test_max_pool3d_parity(device, args, kw, shape):
    g, t = _modules("MaxPool3d", *args, **kw)
    _check(g, t, shape, device)
    _check(lambda x: F.max_pool3d(x, *args, **kw), lambda x: TF.max_pool3d(x, *args, **kw),
           shape, device, gt.float64)


def test_max_pool3d_ties_nan_and_inf(device):
    """PyTorch's choices: the first of equal maxima in (d, h, w) order, the last NaN, and the
    first in-bounds position when nothing beats -inf."""
    nan = np.zeros((1, 1, 4, 4, 4))
    nan[0, 0, 1, 0, 1] = nan[0, 0, 1, 1, 0] = nan[0, 0, 0, 1, 1] = np.nan
    cases = [nan, np.zeros((1, 2, 4, 4, 4)), np.full((1, 1, 3, 3, 3), -np.inf),
             np.random.default_rng(0).integers(0, 2, (1, 2, 5, 5, 5)).astype(np.float64)]
    for arr in cases:
        gx, tx = gt.tensor(arr, device=device), torch.tensor(arr)
        for kw in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
                   {"kernel_size": 2, "padding": 1, "ceil_mode": True}):
            out, idx = F.max_pool3d(gx, return_indices=True, **kw)
            t_out, t_idx = TF.max_pool3d(tx, return_indices=True, **kw)
            assert_close(out, t_out)
            assert_close(idx, t_idx)
        assert_close(F.adaptive_max_pool3d(gx, (2, 3, 2), True)[1],
                     TF.adaptive_max_pool3d(tx, (2, 3, 2), True)[1])


def test_max_pool3d_integer_input(device):
    xi = np.random.default_rng(1).integers(-9, 9, (2, 2, 5, 4, 5))
    out, idx = F.max_pool3d(gt.tensor(xi, device=device), 3, 2, 1, return_indices=True)
    t_out, t_idx = TF.max_pool3d(torch.tensor(xi), 3, 2, 1, return_indices=True)
    assert out.dtype is gt.int64
    assert_close(out, t_out)
    assert_close(idx, t_idx)


# -- average pooling ---------------------------------------------------------------------------
AVG3D_CASES = [
    ((2,), {}, (2, 3, 4, 6, 4)),
    ((3,), {"stride": 2, "padding": 1}, (2, 2, 5, 6, 7)),
    ((3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
     (2, 2, 5, 6, 7)),
    (((3, 2, 3),), {"stride": (2, 1, 2), "padding": 1, "ceil_mode": True,
                    "divisor_override": 5}, (1, 2, 6, 5, 7)),
    ((2,), {"stride": 1}, (3, 4, 5, 4)),                                            # unbatched
]


@pytest.mark.parametrize("args,kw,shape", AVG3D_CASES)
def test_avg_pool3d_parity(device, args, kw, shape):
    g, t = _modules("AvgPool3d", *args, **kw)
    _check(g, t, shape, device)
    _check(lambda x: F.avg_pool3d(x, *args, **kw), lambda x: TF.avg_pool3d(x, *args, **kw),
           shape, device, gt.float64)


@pytest.mark.parametrize("args", [(3, 2, 1, True, False), (3, 2, 1, False, True),
                                  (2, 1, 0, True, True, 3), (3, 2, 1, True, True)])
def test_avg_pool3d_integer_means_truncate_once(device, args):
    xi = np.random.default_rng(2).integers(-50, 50, (2, 2, 5, 6, 5))
    out = F.avg_pool3d(gt.tensor(xi, device=device), *args)
    assert out.dtype is gt.int64
    assert_close(out, TF.avg_pool3d(torch.tensor(xi), *args))


def test_avg_pool3d_half_rounds_once(device):
    x = gt.tensor(random_array((1, 2, 4, 4, 4), seed=3), device=device)
    for dt in (gt.float16, gt.bfloat16):
        low = x.to(dt)
        out = F.avg_pool3d(low, 3, 1, 1)
        assert out.dtype is dt
        assert_close(out.float(), F.avg_pool3d(low.float(), 3, 1, 1).to(dt).float())


# -- adaptive pooling --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [2, (3, None, 4), (1, 5, 2), (6, 2, 7)])
def test_adaptive_pool3d_parity(device, size):
    for name in ("AdaptiveAvgPool3d", "AdaptiveMaxPool3d"):
        g, t = _modules(name, size)
        _check(g, t, (2, 2, 4, 5, 6), device)
    g, t = _modules("AdaptiveMaxPool3d", size, return_indices=True)
    _check(g, t, (2, 4, 5, 6), device)                                            # unbatched
    _check(lambda x: F.adaptive_avg_pool3d(x, size), lambda x: TF.adaptive_avg_pool3d(x, size),
           (2, 4, 5, 6), device, gt.float64)


def test_adaptive_pool3d_zero_output_and_with_indices(device):
    x, tx = _pair((2, 2, 4, 5, 3), device)
    for fn, t_fn in ((F.adaptive_avg_pool3d, TF.adaptive_avg_pool3d),
                     (F.adaptive_max_pool3d, TF.adaptive_max_pool3d)):
        assert tuple(fn(x, (0, 2, 2)).shape) == tuple(t_fn(tx, (0, 2, 2)).shape)
    assert_close(F.max_pool3d_with_indices(x, 2)[1], TF.max_pool3d_with_indices(tx, 2)[1])
    assert_close(F.adaptive_max_pool3d_with_indices(x, 2)[1],
                 TF.adaptive_max_pool3d_with_indices(tx, 2)[1])
    g, t = _modules("AdaptiveAvgPool1d", 3)
    _check(g, t, (2, 7), device)


def test_pool3d_gradcheck_and_double_backward(device):
    x = _f64(device, 1, 1, 4, 4, 3, seed=5)
    fns = [lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True),
           lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
           lambda x: F.avg_pool3d(x, 2, divisor_override=3),
           lambda x: F.adaptive_avg_pool3d(x, (3, 2, 3)),
           lambda x: F.adaptive_max_pool3d(x, (2, 3, 2))]
    for fn in fns:
        assert gradcheck(fn, (x,))
        assert gradgradcheck(fn, (x,))


# -- unpooling and power-average pooling -------------------------------------------------------
def test_max_unpool3d_and_lp_pool3d(device):
    x, tx = _pair((2, 2, 4, 5, 4), device)
    pooled, idx = F.max_pool3d(x, 2, return_indices=True)
    t_pooled, t_idx = TF.max_pool3d(tx, 2, return_indices=True)
    got = gt.nn.MaxUnpool3d(2)(pooled, idx, output_size=(4, 5, 4))
    want = torch.nn.MaxUnpool3d(2)(t_pooled, t_idx, output_size=(4, 5, 4))
    assert_close(got, want.detach())
    assert_close(F.max_unpool3d(pooled[0], idx[0], 2, output_size=(4, 5, 4)),
                 TF.max_unpool3d(t_pooled[0], t_idx[0], 2, output_size=(4, 5, 4)))
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: 100 \(output volumes "
                                           r"are of size 2x2x2"):
        F.max_unpool3d(gt.zeros(1, 1, 1, 1, 1, device=device),
                       gt.full((1, 1, 1, 1, 1), 100, device=device), 2)
    for norm_type, kw in ((2, {}), (1.5, {"stride": 1, "ceil_mode": True})):
        xp, txp = _pair((1, 2, 4, 5, 4), device, seed=7)
        xp, txp = xp.detach().abs().requires_grad_(), txp.detach().abs().requires_grad_()
        _check(lambda a, n=norm_type, k=kw: gt.nn.LPPool3d(n, (2, 3, 2), **k)(a),  # noqa: B023
               lambda a, n=norm_type, k=kw: torch.nn.LPPool3d(n, (2, 3, 2), **k)(a),
               (1, 2, 4, 5, 4), device)


# -- lazy layers -------------------------------------------------------------------------------
@pytest.mark.parametrize("name,args", [("LazyConv3d", (4, 3)), ("LazyConvTranspose3d", (4, 3, 2))])
def test_lazy_conv3d_layers(device, name, args):
    gm, tm = _modules(name, *args)
    gm = gm.to(device)
    assert repr(gm) == repr(tm) and gm.has_uninitialized_params()
    x = random_array((2, 2, 3, 4, 3))
    tm(torch.tensor(x))
    gm(gt.tensor(x, device=device))
    assert type(gm).__name__ == type(tm).__name__ and repr(gm) == repr(tm)
    for (tk, tv), (gk, gv) in zip(tm.state_dict().items(), gm.state_dict().items(),
                                  strict=True):
        assert tk == gk and tuple(tv.shape) == tuple(gv.shape)
    fresh = _modules(name, *args)[0].to(device)
    fresh.load_state_dict({k: gt.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    assert type(fresh).__name__ == type(tm).__name__
    assert_close(fresh(gt.tensor(x[0], device=device)), tm(torch.tensor(x[0])).detach(),
                 atol=1e-5)                                                    # unbatched


# -- errors and reprs --------------------------------------------------------------------------
def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (comparing what each library raises)
        return type(e).__name__, str(e).split("\n")[0]
    return None


CONV_ERRORS = [
    ("conv3d", (3, 8, 8), (4, 3, 3, 3, 3), {}),
    ("conv3d", (1, 2, 8, 8, 8), (4, 3, 3, 3, 3), {}),
    ("conv3d", (1, 3, 2, 8, 8), (4, 3, 3, 3, 3), {}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"stride": 0}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"stride": (1, 2)}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"stride": 2, "padding": "same"}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"padding": "full"}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"padding": -1}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"dilation": 0}),
    ("conv3d", (1, 3, 8, 8, 8), (4, 3, 3, 3, 3), {"groups": 0}),
    ("conv_transpose3d", (3, 8, 8), (3, 4, 3, 3, 3), {}),
    ("conv_transpose3d", (1, 2, 4, 4, 4), (3, 4, 3, 3, 3), {}),
    ("conv_transpose3d", (1, 3, 4, 4, 4), (3, 4, 3, 3, 3), {"stride": 2, "output_padding": 2}),
    ("conv_transpose3d", (1, 3, 4, 4, 4), (3, 4, 3, 3, 3), {"padding": "same"}),
    ("conv_transpose3d", (1, 3, 1, 4, 4), (3, 4, 1, 3, 3), {"padding": (1, 0, 0)}),
    ("conv_transpose3d", (1, 3, 4, 4, 4), (3, 4, 3, 3, 3), {"stride": 0}),
    ("conv_transpose3d", (1, 3, 4, 4, 4), (3, 4, 3, 3, 3), {"dilation": 0}),
    ("conv_transpose3d", (1, 3, 4, 4, 4), (3, 4, 3, 3, 3), {"padding": -1}),
    ("conv_transpose3d", (1, 3, 4, 4, 4), (3, 4, 3, 3, 3), {"output_padding": -1}),
]


@pytest.mark.parametrize("name,x_shape,w_shape,kw", CONV_ERRORS)
def test_conv3d_errors_are_torchs(name, x_shape, w_shape, kw):
    got = _raised(lambda: getattr(F, name)(gt.zeros(x_shape), gt.zeros(w_shape), **kw))
    want = _raised(lambda: getattr(TF, name)(torch.zeros(x_shape), torch.zeros(w_shape), **kw))
    assert want is not None and got == want


def test_conv3d_dtype_errors_are_torchs():
    x, w = gt.zeros(1, 3, 4, 4, 4), gt.zeros(2, 3, 2, 2, 2)
    tx, tw = torch.zeros(1, 3, 4, 4, 4), torch.zeros(2, 3, 2, 2, 2)
    pairs = [(lambda: F.conv3d(x, w.double()), lambda: TF.conv3d(tx, tw.double())),
             (lambda: F.conv3d(x, w, gt.zeros(2).double()),
              lambda: TF.conv3d(tx, tw, torch.zeros(2).double())),
             (lambda: F.conv3d(x.bool(), w.bool()), lambda: TF.conv3d(tx.bool(), tw.bool())),
             (lambda: F.conv_transpose3d(x.bool(), w.permute(1, 0, 2, 3, 4).bool()),
              lambda: TF.conv_transpose3d(tx.bool(), tw.permute(1, 0, 2, 3, 4).bool()))]
    for g_fn, t_fn in pairs:
        want = _raised(t_fn)
        assert want is not None and _raised(g_fn) == want
    with pytest.raises(RuntimeError, match="expected weight to be 5-dimensional"):
        F.conv3d(x, gt.zeros(2, 3, 2, 2))
    with pytest.raises(RuntimeError, match="expected weight to be divisible by 2"):
        F.conv3d(gt.zeros(1, 4, 4, 4, 4), gt.zeros(5, 2, 2, 2, 2), groups=2)


POOL_ERRORS = [
    ("max_pool3d", (3, 8, 8), (2,), {}), ("max_pool3d", (1, 1, 3, 8, 8, 8), (2,), {}),
    ("max_pool3d", (1, 3, 8, 8, 8), (3,), {"padding": 2}),
    ("max_pool3d", (1, 3, 2, 8, 8), (3,), {}),
    ("max_pool3d", (1, 3, 8, 8, 8), (3,), {"stride": 0}), ("max_pool3d", (1, 3, 8, 8, 8), (0,), {}),
    ("max_pool3d", (1, 3, 8, 8, 8), (0,), {"stride": 1}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"stride": -1}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"padding": -1}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"dilation": 0}),
    ("max_pool3d", (1, 3, 8, 8, 8), ((2, 2),), {}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"stride": (2, 2)}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"padding": (1, 1)}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"dilation": (1, 1)}),
    ("max_pool3d", (1, 0, 8, 8, 8), (2,), {}), ("max_pool3d", (2, 0, 8, 8), (2,), {}),
    ("max_pool3d", (1, 3, 8, 8, 8), (2,), {"stride": 1, "padding": 2, "dilation": 3}),
    ("avg_pool3d", (3, 8, 8), (2,), {}), ("avg_pool3d", (1, 3, 8, 8, 8), (3,), {"padding": 2}),
    ("avg_pool3d", (1, 3, 2, 8, 8), (3,), {"stride": 1, "padding": 1}),
    ("avg_pool3d", (1, 3, 8, 8, 8), (3,), {"stride": 0}),
    ("avg_pool3d", (1, 3, 8, 8, 8), (2,), {"divisor_override": 0}),
    ("avg_pool3d", (1, 3, 8, 8, 8), ((2, 2),), {}),
    ("avg_pool3d", (1, 3, 8, 8, 8), (2,), {"stride": (1, 1)}),
    ("avg_pool3d", (0, 8, 8, 8), (2,), {}),
    ("adaptive_avg_pool3d", (3, 8, 8), (2,), {}),
    ("adaptive_avg_pool3d", (1, 3, 8, 8, 8), ((2, 2),), {}),
    ("adaptive_avg_pool3d", (1, 3, 0, 8, 8), (2,), {}),
    ("adaptive_max_pool3d", (3, 8, 8), (2,), {}),
    ("adaptive_max_pool3d", (1, 3, 8, 8, 8), ((2, 2),), {}),
    ("adaptive_max_pool3d", (1, 3, 8, 8, 8), ((2, 2, -1),), {}),
    ("adaptive_max_pool3d", (1, 0, 8, 8, 8), (2,), {}),
]


@pytest.mark.parametrize("name,shape,args,kw", POOL_ERRORS)
def test_pool3d_errors_are_torchs(name, shape, args, kw):
    got = _raised(lambda: getattr(F, name)(gt.zeros(shape), *args, **kw))
    want = _raised(lambda: getattr(TF, name)(torch.zeros(shape), *args, **kw))
    assert want is not None and got == want


@pytest.mark.parametrize("name", ["max_pool3d", "avg_pool3d", "adaptive_avg_pool3d",
                                  "adaptive_max_pool3d"])
def test_pool3d_dtype_errors_are_torchs(name):
    for dt in ("bool", "complex64", "int64"):
        want = _raised(lambda d=dt: getattr(TF, name)(torch.zeros(1, 2, 4, 4, 4,  # noqa: B023
                                                                  dtype=getattr(torch, d)), 2))
        got = _raised(lambda d=dt: getattr(F, name)(gt.zeros(1, 2, 4, 4, 4,  # noqa: B023
                                                              dtype=getattr(gt, d)), 2))
        assert got == want


@pytest.mark.parametrize("name,args,kw", [
    ("Conv3d", (3, 4, 3), {}),
    ("Conv3d", (4, 8, (3, 2, 1)), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2,
                                   "bias": False, "padding_mode": "reflect"}),
    ("Conv3d", (3, 4, 3), {"padding": "same"}),
    ("ConvTranspose3d", (3, 4, 3), {"stride": 2, "output_padding": 1}),
    ("MaxPool3d", ((3, 2, 1),), {"stride": 1, "padding": 1, "dilation": 2, "ceil_mode": True}),
    ("AvgPool3d", (3, 2, 1, True, False, 4), {}),
    ("AdaptiveAvgPool3d", ((None, 2, 3),), {}),
    ("AdaptiveMaxPool3d", (2,), {"return_indices": True}),
    ("MaxUnpool3d", ((2, 1, 3),), {"stride": 1}),
    ("LPPool3d", (2, 2), {}),
])
def test_repr_matches_torch(name, args, kw):
    g, t = _modules(name, *args, **kw)
    assert repr(g) == repr(t)
    for attr in ("kernel_size", "stride", "padding", "dilation"):
        assert getattr(g, attr, None) == getattr(t, attr, None), attr
    if name.startswith("Conv"):
        assert g._reversed_padding_repeated_twice == list(t._reversed_padding_repeated_twice)
        assert tuple(g.weight.shape) == tuple(t.weight.shape)
