"""Convolutions against PyTorch: forward values and input/weight/bias gradients for many
geometries, double backward, argument errors, default init and module reprs.

Modules get their weights from a torch module of the same configuration (state_dict), and both
sides run backward with the same random output gradient.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from gputensor.nn.functional._conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from gputensor.nn.modules.conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional
# torch warns that its 'same' padding with even kernels copies the input; ours never does.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


def _pair(shape, device, dtype=gt.float32, seed=0, requires_grad=True):
    arr = random_array(shape, dtype, seed=seed)
    g = gt.tensor(arr, dtype=dtype, device=device, requires_grad=requires_grad)
    t = torch.tensor(arr, requires_grad=requires_grad)
    return g, t


def _copy_weights(g_mod, t_mod, device, dtype=gt.float32):
    state = {k: gt.tensor(v.detach().numpy(), dtype=dtype, device=device)
             for k, v in t_mod.state_dict().items()}
    res = g_mod.load_state_dict(state)
    assert res.missing_keys == [] and res.unexpected_keys == []


def _check_module(g_mod, t_mod, in_shape, device, atol=1e-5, forward_kw=None):
    """Forward and backward parity of a module pair on one random input."""
    forward_kw = forward_kw or {}
    _copy_weights(g_mod, t_mod, device)
    x, tx = _pair(in_shape, device)
    out, t_out = g_mod(x, **forward_kw), t_mod(tx, **forward_kw)
    assert out.device == gt.device(device)
    assert_close(out, t_out.detach(), atol=atol, rtol=1e-5)
    go, t_go = _pair(tuple(t_out.shape), device, seed=1, requires_grad=False)
    out.backward(go)
    t_out.backward(t_go)
    assert_close(x.grad, tx.grad, atol=atol, rtol=1e-5)
    for (name, p), (_, tp) in zip(g_mod.named_parameters(), t_mod.named_parameters(),
                                  strict=True):
        assert p.grad is not None, name
        # A parameter's gradient sums thousands of float32 products (the bias: 4096 terms of
        # magnitude ~30 here), each library in its own order: ~sqrt(K) * eps * |term| ~ 1e-4.
        assert_close(p.grad, tp.grad, atol=atol * 30, rtol=1e-4)


# -- Conv2d ------------------------------------------------------------------------------------
CONV2D_CASES = [
    # (in_channels, out_channels, kernel, kwargs, input shape)
    (3, 4, 3, {}, (2, 3, 7, 6)),
    (3, 4, 3, {"padding": 1}, (2, 3, 8, 8)),
    (3, 5, (3, 2), {"stride": 2, "padding": (1, 0)}, (2, 3, 9, 7)),
    (4, 6, 3, {"stride": (2, 1), "padding": 2, "dilation": (2, 1), "groups": 2}, (2, 4, 9, 7)),
    (3, 4, (4, 2), {"padding": "same", "bias": False}, (3, 8, 8)),       # unbatched, even k
    (3, 4, 4, {"padding": "same", "dilation": 2}, (2, 3, 8, 9)),
    (3, 4, 3, {"padding": "valid"}, (2, 3, 6, 6)),
    (6, 6, 3, {"groups": 6, "padding": 1}, (2, 6, 5, 5)),                # depthwise
    (3, 4, 1, {}, (2, 3, 5, 5)),                                         # 1x1: no im2col
    (3, 4, 1, {"stride": 2}, (2, 3, 5, 5)),
    (2, 3, (1, 5), {"padding": (0, 2), "stride": (1, 3)}, (1, 2, 4, 11)),
    (4, 8, 3, {"padding": 1, "groups": 4, "bias": False}, (4, 5, 5)),    # unbatched groups
    (2, 3, 3, {"padding": 1, "stride": 2}, (2, 5, 5)),                   # unbatched, bias
    (1, 16, 3, {"padding": 1}, (64, 1, 8, 8)),                           # the demo CNN's
    (16, 32, 3, {"padding": 1}, (8, 16, 4, 4)),
]


@pytest.mark.parametrize("cin,cout,k,kw,shape", CONV2D_CASES)
def test_conv2d_module_parity(device, cin, cout, k, kw, shape):
    g = Conv2d(cin, cout, k, device=device, **kw)
    t = torch.nn.Conv2d(cin, cout, k, **kw)
    _check_module(g, t, shape, device)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (2, 1), "same"])
def test_conv2d_padding_modes(device, mode, padding):
    g = Conv2d(2, 3, (3, 4), padding=padding, padding_mode=mode, device=device)
    t = torch.nn.Conv2d(2, 3, (3, 4), padding=padding, padding_mode=mode)
    _check_module(g, t, (2, 2, 6, 7), device)


def test_conv2d_float64_functional(device):
    x, tx = _pair((2, 4, 6, 5), device, gt.float64)
    w, tw = _pair((6, 2, 3, 3), device, gt.float64, seed=2)
    b, tb = _pair((6,), device, gt.float64, seed=3)
    out = conv2d(x, w, b, stride=(1, 2), padding=1, dilation=(2, 1), groups=2)
    t_out = TF.conv2d(tx, tw, tb, stride=(1, 2), padding=1, dilation=(2, 1), groups=2)
    assert_close(out, t_out.detach())
    out.sum().backward()
    t_out.sum().backward()
    for a, e in ((x, tx), (w, tw), (b, tb)):
        assert_close(a.grad, e.grad)


def _check_float64_conv2d(kw, shape, w_shape):
    """conv2d's forward and its three gradients against PyTorch's, in float64 on the CPU."""
    x, tx = _pair(shape, "cpu", gt.float64)
    w, tw = _pair(w_shape, "cpu", gt.float64, seed=2)
    b, tb = _pair((w_shape[0],), "cpu", gt.float64, seed=3)
    out, t_out = conv2d(x, w, b, **kw), TF.conv2d(tx, tw, tb, **kw)
    assert_close(out, t_out.detach())
    go, t_go = _pair(tuple(t_out.shape), "cpu", gt.float64, seed=4, requires_grad=False)
    out.backward(go)
    t_out.backward(t_go)
    for a, e in ((x, tx), (w, tw), (b, tb)):
        assert_close(a.grad, e.grad)


@pytest.mark.parametrize("kw,shape,w_shape", [
    ({"padding": 1}, (5, 8, 6, 19), (6, 8, 3, 3)),       # rows >= 16: per-tap copies
    ({"stride": (1, 2), "padding": 2, "dilation": 2}, (3, 4, 5, 40), (5, 4, 3, 3)),
    ({"padding": 1}, (5, 8, 6, 7), (6, 8, 3, 3)),         # short rows: a gather table
    ({"stride": 2, "padding": (2, 1), "dilation": (1, 2), "groups": 2}, (5, 4, 9, 8),
     (6, 2, 3, 2)),
    ({"stride": 3}, (5, 3, 10, 11), (4, 3, 2, 2)),        # windows leave input cells unread
    ({}, (5, 6, 4, 4), (4, 6, 1, 1)),                     # 1x1: the input is the columns
])
def test_conv2d_batch_chunks(monkeypatch, kw, shape, w_shape):
    """The CPU kernels build columns a few samples at a time; a tiny budget makes every
    sample its own chunk, and the results (forward, both gradients) must not change."""
    from gputensor.kernels.cpu import conv as cpu_conv
    monkeypatch.setattr(cpu_conv, "COLUMNS_PER_CHUNK", 1)
    _check_float64_conv2d(kw, shape, w_shape)


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("kw,shape,w_shape", [
    ({"padding": 1}, (6, 16, 4, 4), (8, 16, 3, 3)),       # the demo CNN's second conv
    ({}, (3, 4, 8, 8), (5, 4, 3, 3)),                       # no padding: 36 positions
    ({"padding": (2, 0), "dilation": (2, 1)}, (3, 5, 6, 5), (4, 5, 3, 2)),
    ({"padding": 3}, (2, 4, 3, 3), (3, 4, 3, 3)),           # padding past the taps' reach
    ({"stride": 2, "padding": 1}, (3, 8, 7, 6), (6, 8, 3, 3)),   # strided: no adjoint
    ({"stride": (1, 2), "padding": 1}, (2, 6, 5, 8), (3, 6, 2, 3)),
    ({"stride": 2, "padding": 1}, (2, 16, 20, 18), (8, 16, 3, 3)),   # strided, 90 positions
    ({"stride": (2, 3), "dilation": 2}, (2, 17, 23, 25), (5, 17, 3, 2)),
])
def test_conv2d_small_planes_channels_last(monkeypatch, chunked, kw, shape, w_shape):
    """Small planes with a few channels, and strided convolutions of 16+ channels, take the
    channels-last columns (one product per chunk, the input gradient as the adjoint
    convolution where the stride is 1): forward and both gradients as PyTorch's, whole-batch
    and one sample per chunk."""
    from gputensor.kernels.cpu import conv as cpu_conv
    from gputensor.kernels.cpu import conv_small

    def two(v):
        return (v, v) if isinstance(v, int) else tuple(v)
    geometry = [two(kw.get(k, d)) for k, d in (("stride", 1), ("padding", 0), ("dilation", 1))]
    out_hw = TF.conv2d(torch.zeros(shape), torch.zeros(w_shape), **kw).shape[2:]
    assert conv_small.applies(cpu_conv._Geometry(shape, w_shape, tuple(out_hw), *geometry, 1))
    if chunked:
        monkeypatch.setattr(cpu_conv, "COLUMNS_PER_CHUNK", 1)
    _check_float64_conv2d(kw, shape, w_shape)


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("kw,shape,w_shape", [
    ({"padding": 1}, (3, 16, 12, 11), (16, 16, 3, 3)),
    ({"padding": 2, "dilation": 2}, (2, 16, 20, 19), (20, 16, 3, 3)),
    ({}, (2, 16, 12, 12), (24, 16, 3, 3)),                  # no padding
    ({"padding": (1, 0)}, (2, 18, 14, 13), (16, 18, 2, 3)),  # even kernel height
    ({"padding": (0, 2)}, (2, 16, 1, 40), (16, 16, 1, 5)),   # conv1d's unit height
])
def test_conv2d_tap_products(monkeypatch, chunked, kw, shape, w_shape):
    """Unit-stride convolutions of 16+ channels over larger planes run one BLAS product per
    tap over the bordered channels-last input (forward, and the input gradient as the
    adjoint convolution): values and all three gradients as PyTorch's, whole-batch and with
    one sample per chunk and a few rows per block."""
    from gputensor.kernels.cpu import conv as cpu_conv
    from gputensor.kernels.cpu import conv_taps, numpy_blas

    if not numpy_blas.available():
        pytest.skip("NumPy's BLAS has no CBLAS gemm entry points here")

    def two(v):
        return (v, v) if isinstance(v, int) else tuple(v)
    geometry = [two(kw.get(k, d)) for k, d in (("stride", 1), ("padding", 0), ("dilation", 1))]
    out_hw = TF.conv2d(torch.zeros(shape), torch.zeros(w_shape), **kw).shape[2:]
    geo = cpu_conv._Geometry(shape, w_shape, tuple(out_hw), *geometry, 1)
    assert conv_taps.applies(geo) and conv_taps.applies(geo.adjoint())
    if chunked:
        monkeypatch.setattr(conv_taps, "ELEMENTS_PER_CHUNK", 1)
        monkeypatch.setattr(conv_taps, "ROW_BLOCK", 37)
    _check_float64_conv2d(kw, shape, w_shape)
    x, tx = _pair(shape, "cpu")                               # and in float32
    w, tw = _pair(w_shape, "cpu", seed=2)
    out, t_out = conv2d(x, w, **kw), TF.conv2d(tx, tw, **kw)
    assert_close(out, t_out.detach(), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    t_out.sum().backward()
    assert_close(x.grad, tx.grad, atol=1e-4, rtol=1e-5)


def test_conv2d_tap_products_not_taken_where_they_lose():
    """Few channels, a stride, groups, or a border that would be mostly computed and dropped
    keep the columns."""
    from gputensor.kernels.cpu import conv as cpu_conv
    from gputensor.kernels.cpu import conv_taps

    def geo(shape, w_shape, out_hw, stride=(1, 1), padding=(1, 1), groups=1):
        return cpu_conv._Geometry(shape, w_shape, out_hw, stride, padding, (1, 1), groups)
    assert not conv_taps.applies(geo((2, 1, 28, 28), (16, 1, 3, 3), (28, 28)))     # C = 1
    assert not conv_taps.applies(geo((2, 16, 28, 28), (1, 16, 3, 3), (28, 28)))    # C_out = 1
    assert not conv_taps.applies(geo((2, 16, 28, 28), (16, 16, 3, 3), (14, 14), (2, 2)))
    assert not conv_taps.applies(geo((2, 32, 28, 28), (32, 16, 3, 3), (28, 28), groups=2))
    assert not conv_taps.applies(geo((2, 16, 6, 6), (16, 16, 3, 3), (6, 6)))       # 64 / 36


def test_conv2d_is_gt_namespace_op():
    assert gt.conv2d is conv2d and gt.conv1d is conv1d and gt.conv_transpose2d is \
        conv_transpose2d
    assert not hasattr(gt.Tensor, "conv2d")


def test_conv2d_noncontiguous_and_integer(device):
    base = gt.tensor(random_array((2, 5, 8, 3), seed=4), device=device)
    x = base.permute(0, 3, 1, 2)          # channels-last strides
    assert not x.is_contiguous()
    w = gt.tensor(random_array((4, 3, 3, 3), seed=5), device=device)
    tx, tw = torch.from_numpy(x.cpu().numpy().copy()), torch.from_numpy(w.cpu().numpy())
    assert_close(conv2d(x, w[:, :, ::1, :], padding=1), TF.conv2d(tx, tw, padding=1))
    xi = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5) - 70
    wi = np.arange(4 * 3 * 2 * 2).reshape(4, 3, 2, 2) % 5 - 2
    out = conv2d(gt.tensor(xi, device=device), gt.tensor(wi, device=device),
                 gt.arange(4, device=device), padding=1)
    assert out.dtype is gt.int64
    assert_close(out, TF.conv2d(torch.tensor(xi), torch.tensor(wi), torch.arange(4), padding=1))


def test_conv2d_half_precision(device):
    x = gt.tensor(random_array((2, 3, 6, 6), seed=6), device=device)
    w = gt.tensor(random_array((4, 3, 3, 3), seed=7), device=device)
    ref = conv2d(x, w, padding=1)
    for dt in (gt.float16, gt.bfloat16):
        out = conv2d(x.to(dt), w.to(dt), padding=1)
        assert out.dtype is dt
        assert_close(out.float(), ref, atol=0.3, rtol=0.05)


def test_conv2d_empty_batch(device):
    conv = Conv2d(3, 4, 3, padding=1, device=device)
    x = gt.zeros((0, 3, 5, 5), device=device, requires_grad=True)
    out = conv(x)
    assert tuple(out.shape) == (0, 4, 5, 5)
    out.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 5, 5)
    assert_close(conv.weight.grad, np.zeros((4, 3, 3, 3), np.float32))
    assert_close(conv.bias.grad, np.zeros(4, np.float32))


def test_inplace_relu_after_conv_and_pool(device):
    from gputensor.nn.functional._pooling import max_pool2d
    conv = Conv2d(2, 3, 3, padding=1, device=device)
    x = gt.randn(2, 2, 6, 6, device=device, requires_grad=True)
    y = max_pool2d(conv(x).relu_(), 2)   # neither op saved its output for backward
    y.relu_().sum().backward()
    assert x.grad is not None and conv.weight.grad is not None


# -- Conv1d ------------------------------------------------------------------------------------
CONV1D_CASES = [
    (3, 4, 3, {}, (2, 3, 10)),
    (4, 6, 3, {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}, (2, 4, 11)),
    (3, 4, 4, {"padding": "same", "bias": False}, (3, 9)),               # unbatched
    (3, 4, 2, {"padding": 2, "padding_mode": "reflect"}, (2, 3, 7)),
    (3, 4, 3, {"padding": 1, "padding_mode": "circular"}, (2, 3, 7)),
    (3, 4, 3, {"padding": 1, "padding_mode": "replicate"}, (3, 7)),      # unbatched
]


@pytest.mark.parametrize("cin,cout,k,kw,shape", CONV1D_CASES)
def test_conv1d_module_parity(device, cin, cout, k, kw, shape):
    g = Conv1d(cin, cout, k, device=device, **kw)
    t = torch.nn.Conv1d(cin, cout, k, **kw)
    _check_module(g, t, shape, device)


# -- transposed convolutions -------------------------------------------------------------------
CONVT2D_CASES = [
    (3, 4, 3, {}, (2, 3, 5, 5), None),
    (4, 6, (3, 2), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}, (2, 4, 5, 4),
     None),
    (4, 3, (3, 2), {"stride": (2, 3), "padding": (1, 0), "output_padding": (0, 2),
                    "dilation": (1, 2), "bias": False}, (4, 5, 4), None),             # unbatched
    (2, 2, 2, {"dilation": 2, "output_padding": 1}, (1, 2, 3, 3), None),   # opad >= stride
    (3, 4, 3, {"stride": 2, "padding": 1}, (2, 3, 4, 4), (8, 8)),          # output_size
    (3, 4, 3, {"stride": 2}, (2, 3, 4, 4), (2, 4, 10, 9)),
]


@pytest.mark.parametrize("cin,cout,k,kw,shape,output_size", CONVT2D_CASES)
def test_conv_transpose2d_module_parity(device, cin, cout, k, kw, shape, output_size):
    g = ConvTranspose2d(cin, cout, k, device=device, **kw)
    t = torch.nn.ConvTranspose2d(cin, cout, k, **kw)
    fkw = {} if output_size is None else {"output_size": output_size}
    _check_module(g, t, shape, device, forward_kw=fkw)


def test_conv_transpose1d_module_parity(device):
    g = ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                        device=device)
    t = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    _check_module(g, t, (2, 4, 7), device)
    x, tx = _pair((4, 7), device, seed=3)
    assert_close(conv_transpose1d(x, g.weight, None, 2, 1, 1, 2),
                 TF.conv_transpose1d(tx, t.weight, None, 2, 1, 1, 2).detach(), atol=1e-5)


def test_conv_transpose_output_size_errors():
    m = ConvTranspose2d(3, 4, 3, stride=2)
    with pytest.raises(ValueError, match="valid sizes range from"):
        m(gt.randn(1, 3, 4, 4), output_size=(12, 12))
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        ConvTranspose2d(3, 4, 3, padding_mode="reflect")


# -- gradcheck and double backward ------------------------------------------------------------
def _f64(*shape, seed=0):
    return gt.tensor(random_array(shape, gt.float64, seed=seed), requires_grad=True)


def test_conv2d_gradcheck_and_double_backward():
    x, w, b = _f64(2, 4, 5, 5), _f64(6, 2, 3, 2, seed=1), _f64(6, seed=2)

    def fn(x, w, b):
        return conv2d(x, w, b, stride=2, padding=1, groups=2, dilation=(1, 2))
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    xu = _f64(2, 4, 4, seed=3)
    assert gradgradcheck(lambda x, w: conv2d(x, w, padding="same"), (xu, _f64(3, 2, 2, 2)))


def test_conv_transpose2d_and_conv1d_double_backward():
    x, w, b = _f64(2, 4, 3, 3), _f64(4, 3, 3, 2, seed=1), _f64(6, seed=2)

    def fn(x, w, b):
        return conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))
    x1, w1 = _f64(2, 3, 7, seed=4), _f64(2, 3, 3, seed=5)
    assert gradgradcheck(lambda x, w: conv1d(x, w, stride=2, padding=1), (x1, w1))


def test_conv2d_double_backward_matches_torch():
    x, tx = _pair((2, 3, 5, 5), "cpu", gt.float64)
    w, tw = _pair((4, 3, 3, 3), "cpu", gt.float64, seed=1)
    y = conv2d(x, w, padding=1)
    (gx,) = gt.autograd.grad(y.pow(2).sum(), (x,), create_graph=True)
    gx.sum().backward()
    ty = TF.conv2d(tx, tw, padding=1)
    (tgx,) = torch.autograd.grad(ty.pow(2).sum(), (tx,), create_graph=True)
    tgx.sum().backward()
    assert_close(x.grad, tx.grad)
    assert_close(w.grad, tw.grad)


def test_complex_gradients_match_torch():
    rng = np.random.default_rng(0)

    def arr(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex128)

    x, w, wt = arr(2, 4, 5, 5), arr(6, 2, 3, 2), arr(4, 3, 3, 2)
    cases = [(lambda f, a, b: f(a, b, None, 2, 1, 1, 2), conv2d, torch.conv2d, w),
             (lambda f, a, b: f(a, b, None, 2, 1, 1, 2), conv_transpose2d,
              torch.conv_transpose2d, wt)]
    for call, g_fn, t_fn, weight in cases:
        gx, gw = gt.tensor(x, requires_grad=True), gt.tensor(weight, requires_grad=True)
        tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(weight, requires_grad=True)
        (g,) = gt.autograd.grad(call(g_fn, gx, gw).abs().pow(2).sum(), (gx,), create_graph=True)
        g.abs().sum().backward()
        (tg,) = torch.autograd.grad(call(t_fn, tx, tw).abs().pow(2).sum(), (tx,),
                                    create_graph=True)
        tg.abs().sum().backward()
        assert_close(gx.grad, tx.grad)
        assert_close(gw.grad, tw.grad)


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("x_shape,w_shape,kw,match", [
    ((2, 1, 8, 8), (16, 3, 3, 3), {},
     r"weight of size \[16, 3, 3, 3\], expected input\[2, 1, 8, 8\] to have 3 channels, but "
     r"got 1 channels"),
    ((8, 8), (16, 1, 3, 3), {}, r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"),
    ((2, 4, 8, 8), (15, 2, 3, 3), {"groups": 2}, "expected weight to be divisible by 2"),
    ((2, 4, 8, 8), (16, 4, 3), {}, "expected weight to be 4-dimensional"),
    ((2, 4, 2, 2), (16, 4, 3, 3), {}, r"padded input size per channel: \(2 x 2\)"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"stride": 0}, "non-positive stride"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"padding": -1}, "negative padding"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"dilation": 0}, "non-positive dilation"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"groups": 0}, "non-positive groups"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"padding": "same", "stride": 2}, "strided convolutions"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"padding": "full"}, "Invalid padding string: 'full'"),
    ((2, 4, 8, 8), (16, 4, 3, 3), {"stride": (1, 2, 3)}, "a list of 2 values"),
])
def test_conv2d_errors(x_shape, w_shape, kw, match):
    with pytest.raises(RuntimeError, match=match):
        conv2d(gt.zeros(x_shape), gt.zeros(w_shape), **kw)


def test_conv_dtype_bias_and_transpose_errors():
    x, w = gt.zeros((2, 4, 8, 8)), gt.zeros((16, 4, 3, 3))
    with pytest.raises(RuntimeError, match=r"input type \(float32\) and weight type \(float64\)"):
        conv2d(x, w.double())
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 16 elements"):
        conv2d(x, w, gt.zeros(3))
    with pytest.raises(RuntimeError, match="'Bool'"):
        conv2d(x.bool(), w.bool())
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor"):
        conv2d(x, None)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride"):
        conv_transpose2d(x, gt.zeros(4, 4, 3, 3), stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match="transposed=1, weight of size"):
        conv_transpose2d(gt.zeros(2, 3, 8, 8), gt.zeros(4, 4, 3, 3))
    with pytest.raises(RuntimeError, match="input to conv1d"):
        conv1d(gt.zeros(2, 3, 8, 8), gt.zeros(4, 3, 3))


@pytest.mark.parametrize("kw,match", [
    ({"groups": 0}, "groups must be a positive integer"),
    ({"groups": 2, "in_channels": 3}, "in_channels must be divisible by groups"),
    ({"groups": 2, "out_channels": 5}, "out_channels must be divisible by groups"),
    ({"padding": "full"}, "Invalid padding string 'full'"),
    ({"padding": "same", "stride": 2}, "not supported for strided convolutions"),
    ({"padding_mode": "mirror"}, "padding_mode must be one of"),
])
def test_conv_module_errors(kw, match):
    args = {"in_channels": 4, "out_channels": 4, "kernel_size": 3, **kw}
    with pytest.raises(ValueError, match=match):
        Conv2d(**args)


# -- init and repr -----------------------------------------------------------------------------
def test_default_init_bounds(device):
    gt.manual_seed(0)
    m = Conv2d(8, 16, (3, 2), groups=2, device=device)
    bound = 1 / math.sqrt(4 * 3 * 2)      # fan_in = in_channels/groups * kH * kW
    w, b = m.weight.detach().cpu().numpy(), m.bias.detach().cpu().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound and w.std() == pytest.approx(bound / math.sqrt(3), rel=0.2)
    t = ConvTranspose2d(6, 4, 3, groups=2, device=device)
    assert tuple(t.weight.shape) == (6, 2, 3, 3)
    assert np.abs(t.weight.detach().cpu().numpy()).max() <= 1 / math.sqrt(2 * 9)
    assert m.weight.requires_grad and m.weight.device == gt.device(device)


@pytest.mark.parametrize("cls,args,kw", [
    ("Conv1d", (3, 4, 3), {}),
    ("Conv1d", (3, 4, 3), {"padding": "valid"}),
    ("Conv2d", (3, 4, 3), {}),
    ("Conv2d", (4, 8, (3, 2)), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2,
                                "bias": False, "padding_mode": "reflect"}),
    ("Conv2d", (3, 4, 3), {"padding": "same"}),
    ("ConvTranspose1d", (3, 4, 3), {"stride": 2}),
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "output_padding": 1}),
    ("ConvTranspose2d", (4, 4, 3), {"groups": 2, "bias": False, "dilation": 2}),
])
def test_repr_matches_torch(cls, args, kw):
    import gputensor.nn.modules.conv as conv_mod
    g = getattr(conv_mod, cls)(*args, **kw)
    t = getattr(torch.nn, cls)(*args, **kw)
    assert repr(g) == repr(t)
    assert g.kernel_size == t.kernel_size and g.stride == t.stride
    assert g.padding == t.padding and g._reversed_padding_repeated_twice == \
        list(t._reversed_padding_repeated_twice)
