"""Fractional max pooling, AdaptiveLogSoftmaxWithLoss, CrossMapLRN2d, Container,
factory_kwargs, conv_tbc, native_channel_shuffle, linear_cross_entropy (reference and chunked
paths) with LinearCrossEntropyLoss/Options, the __torch_function__ helpers and
convert_conv3d_weight_memory_format, against PyTorch on cpu and emulated cuda."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

_DTYPES = {torch.float16: gt.float16, torch.bfloat16: gt.bfloat16, torch.float32: gt.float32,
           torch.float64: gt.float64, torch.int64: gt.int64}


def _gt(t, device, grad=False):
    """The gputensor copy of torch tensor ``t`` (same dtype, exact values)."""
    data = t.detach()
    if data.dtype in (torch.float16, torch.bfloat16):
        out = gt.tensor(data.float().numpy(), device=device).to(_DTYPES[data.dtype])
    else:
        out = gt.tensor(data.numpy(), device=device)
    return out.requires_grad_() if grad else out


def _np(t):
    t = t.detach()
    if hasattr(t, "cpu"):
        t = t.cpu()
    if t.dtype in (torch.float16, torch.bfloat16, gt.float16, gt.bfloat16):
        t = t.float()
    return t.numpy()


def _close(got, want, tol=1e-10):
    np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol)


def _same_error(fn_torch, fn_gt):
    with pytest.raises(Exception) as want:
        fn_torch()
    with pytest.raises(type(want.value)) as got:
        fn_gt()
    # gputensor spells its own types (gputensor.Size) where PyTorch says torch
    assert str(got.value).replace("gputensor.", "torch.") == str(want.value)


def _backward_close(got, want, leaves, device, tol=1e-10):
    """Backpropagate one random gradient through both and compare each (gputensor, torch)
    leaf's gradient."""
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(_gt(grad, device))
    for g, t in leaves:
        _close(g.grad, t.grad, tol)


# ---------------------------------------------------------------- fractional max pooling

def _same_pool(got, got_idx, want, want_idx):
    np.testing.assert_array_equal(_np(got_idx), want_idx.numpy())
    np.testing.assert_array_equal(_np(got), _np(want))


_POOL2D = [((2, 3, 9, 11), (3, 2), (5, 6)), ((3, 9, 11), 2, (8, 4)),
           ((2, 3, 7, 8), 3, (5, 1)), ((1, 2, 10, 10), (2, 3), (1, 1))]


@pytest.mark.parametrize("shape,kernel,out", _POOL2D)
def test_fractional_max_pool2d_matches_torch(device, shape, kernel, out) -> None:
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    samples = torch.rand(shape[0] if len(shape) == 4 else 1, shape[-3], 2, dtype=torch.float64)
    want, want_idx = TF.fractional_max_pool2d(x, kernel, output_size=out, return_indices=True,
                                              _random_samples=samples)
    xg = _gt(x, device, grad=True)
    got, got_idx = F.fractional_max_pool2d(xg, kernel, output_size=out, return_indices=True,
                                           _random_samples=_gt(samples, device))
    assert got.shape == want.shape and got_idx.dtype == gt.int64
    _same_pool(got, got_idx, want, want_idx)
    _backward_close(got, want, [(xg, x)], device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fractional_max_pool2d_low_precision_intervals(device, dtype) -> None:
    # the interval formula runs in the input dtype: equal samples give equal windows
    x = torch.randn(2, 4, 23, 17).to(dtype)
    samples = torch.rand(2, 4, 2).to(dtype)
    want, want_idx = TF.fractional_max_pool2d(x, 3, output_size=(9, 7), return_indices=True,
                                              _random_samples=samples)
    got, got_idx = F.fractional_max_pool2d(_gt(x, device), 3, output_size=(9, 7),
                                           return_indices=True,
                                           _random_samples=_gt(samples, device))
    assert got.dtype == _DTYPES[dtype]
    np.testing.assert_array_equal(_np(got_idx), want_idx.numpy())
    np.testing.assert_array_equal(_np(got), _np(want))


@pytest.mark.parametrize("shape,kernel,out", [((2, 3, 9, 11, 8), (3, 2, 2), (5, 6, 4)),
                                              ((3, 9, 11, 6), 2, (7, 4, 2))])
def test_fractional_max_pool3d_matches_torch(device, shape, kernel, out) -> None:
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    samples = torch.rand(shape[0] if len(shape) == 5 else 1, shape[-4], 3, dtype=torch.float64)
    want, want_idx = TF.fractional_max_pool3d_with_indices(x, kernel, out,
                                                           _random_samples=samples)
    xg = _gt(x, device, grad=True)
    got, got_idx = F.fractional_max_pool3d_with_indices(xg, kernel, out,
                                                        _random_samples=_gt(samples, device))
    _same_pool(got, got_idx, want, want_idx)
    _backward_close(got, want, [(xg, x)], device)


def test_fractional_max_pool_output_ratio_and_edge_cases(device) -> None:
    x = torch.randn(2, 3, 8, 9)
    s = torch.rand(2, 3, 2)
    for kwargs in ({"output_ratio": (0.5, 0.7)}, {"output_size": 0}):
        want = TF.fractional_max_pool2d(x, 2, _random_samples=s, **kwargs)
        got = F.fractional_max_pool2d(_gt(x, device), 2, _random_samples=_gt(s, device),
                                      **kwargs)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(_np(got), _np(want))
    # an empty window: -inf at the window start, as PyTorch's kernel
    want = TF.fractional_max_pool2d_with_indices(x, 0, 2, _random_samples=s)
    got = F.fractional_max_pool2d_with_indices(_gt(x, device), 0, 2,
                                               _random_samples=_gt(s, device))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(_np(g), _np(w))
    x3 = torch.randn(1, 2, 6, 7, 8)
    s3 = torch.rand(1, 2, 3)
    want = TF.fractional_max_pool3d(x3, 2, output_ratio=0.5, _random_samples=s3)
    got = F.fractional_max_pool3d(_gt(x3, device), 2, output_ratio=0.5,
                                  _random_samples=_gt(s3, device))
    np.testing.assert_array_equal(_np(got), _np(want))
    empty = torch.randn(0, 3, 5, 5)
    got = F.fractional_max_pool2d(_gt(empty, device), 2, output_size=2)
    assert tuple(got.shape) == (0, 3, 2, 2)


def test_fractional_max_pool_nan_picks_last_nan(device) -> None:
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    x[x > 1.0] = float("nan")
    s = torch.rand(2, 3, 2, dtype=torch.float64)
    want, want_idx = TF.fractional_max_pool2d(x, 3, (4, 5), return_indices=True,
                                              _random_samples=s)
    got, got_idx = F.fractional_max_pool2d(_gt(x, device), 3, (4, 5), return_indices=True,
                                           _random_samples=_gt(s, device))
    assert bool(want.isnan().any())
    _same_pool(got, got_idx, want, want_idx)


def test_fractional_max_pool_draws_from_gputensor_generator(device) -> None:
    # alpha = (13 - 2) / (5 - 1) is not whole, so the windows depend on the samples
    x = gt.randn(2, 3, 13, 13, device=device)
    gt.manual_seed(7)
    first = F.fractional_max_pool2d(x, 2, output_size=5, return_indices=True)[1]
    gt.manual_seed(7)
    samples = gt.rand(2, 3, 2, device=device)
    explicit = F.fractional_max_pool2d(x, 2, output_size=5, return_indices=True,
                                       _random_samples=samples)[1]
    assert gt.equal(first, explicit)
    gt.manual_seed(8)
    assert not gt.equal(F.fractional_max_pool2d(x, 2, 5, None, True)[1], first)


def test_fractional_max_pool_gradcheck(device) -> None:
    x = gt.randn(1, 2, 7, 6, dtype=gt.float64, device=device, requires_grad=True)
    s = gt.rand(1, 2, 2, dtype=gt.float64, device=device)
    assert gt.autograd.gradcheck(lambda t: F.fractional_max_pool2d(
        t, 2, output_size=(4, 3), _random_samples=s), (x,))
    x3 = gt.randn(1, 1, 5, 4, 5, dtype=gt.float64, device=device, requires_grad=True)
    s3 = gt.rand(1, 1, 3, dtype=gt.float64, device=device)
    assert gt.autograd.gradcheck(lambda t: F.fractional_max_pool3d(
        t, 2, output_size=(3, 2, 3), _random_samples=s3), (x3,))


_POOL_ERRORS = [
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(6, 6))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(4, 4), samples=(2, 3, 3))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(4, 4), samples=(1, 3, 2))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(4, 4), samples=(2, 2, 2))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(4, 4), samples=(2, 3))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(4, 4), samples="double")),
    ("2d", (2, 3, 7, 8), dict(kernel_size=(3, 2, 1), output_size=(4, 4))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(4, 4, 4))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_ratio=(0.5, 0.5, 0.5))),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3)),
    ("2d", (2, 3, 7, 8), dict(kernel_size=3, output_size=(-1, 4))),
    ("2d", (1, 2, 3, 9, 9), dict(kernel_size=3, output_size=(4, 4))),
    ("2d", (2, 0, 5, 5), dict(kernel_size=3, output_size=(2, 2))),
    ("3d", (2, 3, 6, 7, 8), dict(kernel_size=3, output_size=(4, 4, 4))),
    ("3d", (2, 3, 8, 8, 8), dict(kernel_size=3, output_size=(4, 4, 4), samples=(2, 3, 2))),
    ("3d", (2, 3, 4, 4, 4, 4), dict(kernel_size=3, output_size=(4, 4, 4))),
    ("3d", (2, 3, 8, 8, 8), dict(kernel_size=(3, 2), output_size=(4, 4, 4))),
    ("3d", (2, 3, 4, 0, 4), dict(kernel_size=3, output_size=(1, 1, 1))),
]


@pytest.mark.parametrize("dims,shape,kwargs", _POOL_ERRORS)
def test_fractional_max_pool_errors_match_torch(device, dims, shape, kwargs) -> None:
    kwargs = dict(kwargs)
    samples = kwargs.pop("samples", None)
    x = torch.randn(*shape)
    n = 2 if dims == "2d" else 3
    if samples == "double":
        s = torch.rand(shape[0], shape[1], n, dtype=torch.float64)
    elif samples is not None:
        s = torch.rand(*samples)
    else:
        s = torch.rand(shape[0], max(shape[1], 1), n) if len(shape) == n + 2 else None
    name = f"fractional_max_pool{dims}"
    _same_error(lambda: getattr(TF, name)(x, _random_samples=s, **kwargs),
                lambda: getattr(F, name)(_gt(x, device),
                                         _random_samples=None if s is None else _gt(s, device),
                                         **kwargs))


def test_fractional_max_pool_integer_input_not_implemented() -> None:
    x = torch.zeros(1, 1, 6, 6, dtype=torch.int64)
    s = torch.zeros(1, 1, 2, dtype=torch.int64)
    _same_error(lambda: TF.fractional_max_pool2d(x, 2, 3, _random_samples=s),
                lambda: F.fractional_max_pool2d(_gt(x, "cpu"), 2, 3, _random_samples=_gt(s,
                                                                                    "cpu")))


def test_fractional_max_pool_modules(device) -> None:
    x = torch.randn(2, 3, 9, 9)
    s = torch.rand(2, 3, 2)
    tm = torch.nn.FractionalMaxPool2d(3, output_size=(4, 5), return_indices=True,
                                      _random_samples=s)
    gm = gt.nn.FractionalMaxPool2d(3, output_size=(4, 5), return_indices=True,
                                   _random_samples=_gt(s, "cpu")).to(device)
    assert "_random_samples" in gm.state_dict()
    for g, w in zip(gm(_gt(x, device)), tm(x), strict=True):
        np.testing.assert_array_equal(_np(g), _np(w))
    x3 = torch.randn(1, 2, 8, 8, 8)
    s3 = torch.rand(1, 2, 3)
    tm3 = torch.nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=s3)
    gm3 = gt.nn.FractionalMaxPool3d(2, output_ratio=0.5, _random_samples=_gt(s3, device))
    np.testing.assert_array_equal(_np(gm3(_gt(x3, device))), _np(tm3(x3)))
    assert gm3.kernel_size == (2, 2, 2) and gm3.output_ratio == (0.5, 0.5, 0.5)
    for cls in ("FractionalMaxPool2d", "FractionalMaxPool3d"):
        for args, kwargs in [((2,), {}), ((2,), {"output_size": 2, "output_ratio": 0.5}),
                             ((2,), {"output_ratio": 1.5})]:
            _same_error(lambda c=cls, a=args, k=kwargs: getattr(torch.nn, c)(*a, **k),
                        lambda c=cls, a=args, k=kwargs: getattr(gt.nn, c)(*a, **k))
    _same_error(lambda: torch.nn.FractionalMaxPool3d(0, output_size=2),
                lambda: gt.nn.FractionalMaxPool3d(0, output_size=2))


# ---------------------------------------------------------------- CrossMapLRN2d, Container

@pytest.mark.parametrize("size,channels", [(2, 3), (3, 6), (4, 5), (5, 8), (6, 2)])
def test_cross_map_lrn2d_matches_torch(device, size, channels) -> None:
    x = torch.randn(2, channels, 3, 4, dtype=torch.float64, requires_grad=True)
    tm = torch.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.8, k=1.5)
    gm = gt.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.8, k=1.5)
    assert repr(gm) == repr(tm)
    want = tm(x)
    xg = _gt(x, device, grad=True)
    got = gm(xg)
    _close(got, want, 1e-12)
    _backward_close(got, want, [(xg, x)], device)


def test_cross_map_lrn2d_errors(device) -> None:
    _same_error(lambda: torch.nn.CrossMapLRN2d(3)(torch.randn(2, 3, 4)),
                lambda: gt.nn.CrossMapLRN2d(3)(gt.randn(2, 3, 4, device=device)))

    def backward(lib, make):
        x = make(1, 3, 2, 2)
        x.requires_grad_()
        lib.nn.CrossMapLRN2d(1)(x).sum().backward()

    _same_error(lambda: backward(torch, torch.randn),
                lambda: backward(gt, lambda *s: gt.randn(*s, device=device)))


def test_container_is_deprecated() -> None:
    with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
        c = gt.nn.Container(a=gt.nn.Linear(2, 3), b=gt.nn.ReLU())
    assert list(dict(c.named_children())) == ["a", "b"]
    assert [n for n, _ in c.named_parameters()] == ["a.weight", "a.bias"]
    with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
        class Sub(gt.nn.Container):
            pass
    assert issubclass(Sub, gt.nn.Module)


@pytest.mark.parametrize("kwargs", [None, {}, {"dtype": "d", "device": "c"},
                                    {"factory_kwargs": {"dtype": "x"}, "device": "c"},
                                    {"factory_kwargs": {"dtype": "x"}, "dtype": "y"},
                                    {"bogus": 1}])
def test_factory_kwargs_matches_torch(kwargs) -> None:
    try:
        want = torch.nn.factory_kwargs(kwargs)
    except TypeError as e:
        with pytest.raises(TypeError) as got:
            gt.nn.factory_kwargs(kwargs)
        assert str(got.value) == str(e)
    else:
        assert gt.nn.factory_kwargs(kwargs) == want


# ---------------------------------------------------------------- conv_tbc, channel shuffle

@pytest.mark.parametrize("pad", [0, 1, 2, -1])
def test_conv_tbc_matches_torch(device, pad) -> None:
    x = torch.randn(7, 2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    want = torch.conv_tbc(x, w, b, pad)
    xs = [_gt(t, device, grad=True) for t in (x, w, b)]
    got = F.conv_tbc(*xs, pad=pad)
    assert gt.conv_tbc is not None
    _close(got, want)
    _close(gt.conv_tbc(*xs, pad), want)
    _backward_close(got, want, list(zip(xs, (x, w, b), strict=True)), device)
    assert gt.autograd.gradcheck(lambda *a: F.conv_tbc(*a, pad=pad),
                                 tuple(t.detach().requires_grad_() for t in xs))


@pytest.mark.parametrize("shapes", [((7, 2), (3, 3, 4), (4,)), ((7, 2, 3), (3, 4), (4,)),
                                    ((7, 2, 3), (3, 3, 4), (1, 4)),
                                    ((7, 2, 3), (3, 3, 4), (5,)),
                                    ((7, 2, 3), (3, 2, 4), (4,)),
                                    ((7, 2, 3), (9, 3, 4), (4,))])
def test_conv_tbc_errors(device, shapes) -> None:
    ts = [torch.randn(*s) for s in shapes]
    _same_error(lambda: torch.conv_tbc(*ts), lambda: gt.conv_tbc(*[_gt(t, device) for t in ts]))
    _same_error(lambda: torch.conv_tbc(torch.randn(5, 2, 3), torch.randn(2, 3, 4).double(),
                                       torch.randn(4)),
                lambda: gt.conv_tbc(gt.randn(5, 2, 3), gt.randn(2, 3, 4, dtype=gt.float64),
                                    gt.randn(4)))


def test_native_channel_shuffle(device) -> None:
    x = torch.randn(2, 6, 3, 2)
    for fn in (F.native_channel_shuffle, gt.native_channel_shuffle):
        np.testing.assert_array_equal(_np(fn(_gt(x, device), 3)),
                                      torch.native_channel_shuffle(x, 3).numpy())
    for args in ((x, 4), (x, 0), (x[0, 0], 2)):
        _same_error(lambda a=args: TF.native_channel_shuffle(*a),
                    lambda a=args: F.native_channel_shuffle(_gt(a[0], device), a[1]))


# ---------------------------------------------------------------- AdaptiveLogSoftmaxWithLoss

def _asm_pair(device, head_bias=True):
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0,
                                             head_bias=head_bias).double()
    gm = gt.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 9, 15], div_value=2.0,
                                          head_bias=head_bias, dtype=gt.float64)
    gm.load_state_dict({k: _gt(v, "cpu") for k, v in tm.state_dict().items()})
    return tm, gm.to(device)


def test_adaptive_log_softmax_matches_torch(device) -> None:
    tm, gm = _asm_pair(device)
    assert [n for n, _ in gm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    x = torch.randn(7, 16, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 5, 19, 3, 10, 16, 8])
    want = tm(x, target)
    xg = _gt(x, device, grad=True)
    got = gm(xg, _gt(target, device))
    assert type(got).__name__ == "_ASMoutput" and got._fields == ("output", "loss")
    _close(got.output, want.output)
    _close(got.loss, want.loss)
    (want.output.sum() + want.loss).backward()
    (got.output.sum() + got.loss).backward()
    _close(xg.grad, x.grad)
    for (_, p), (_, q) in zip(tm.named_parameters(), gm.named_parameters(), strict=True):
        _close(q.grad, p.grad)
    _close(gm.log_prob(xg), tm.log_prob(x))
    unbatched = gm(xg[2], _gt(target[2], device))
    assert unbatched.output.dim() == 0
    _close(unbatched.loss, tm(x[2], target[2]).loss)


def test_adaptive_log_softmax_predict(device) -> None:
    tm, gm = _asm_pair(device, head_bias=True)
    x = torch.randn(9, 16, dtype=torch.float64)
    xg = _gt(x, device)
    with torch.no_grad():
        for bias in (None, 30.0, -30.0):
            # push the head towards the shortlist, the cluster tokens, or leave it mixed
            if bias is not None:
                tm.head.bias[:4] = bias
                gm.head.bias.data = _gt(tm.head.bias, device)
            np.testing.assert_array_equal(_np(gm.predict(xg)), tm.predict(x).numpy())


def test_adaptive_log_softmax_errors(device) -> None:
    for cutoffs in ([], [5, 3], [0, 4], [4, 20], [4, 4], [4.5]):
        _same_error(lambda c=cutoffs: torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, c),
                    lambda c=cutoffs: gt.nn.AdaptiveLogSoftmaxWithLoss(8, 20, c))
    tm, gm = _asm_pair(device)
    cases = [(torch.randn(3, 16), torch.tensor([0, 25, 1])),
             (torch.randn(3, 16), torch.tensor([0, 1])),
             (torch.randn(3, 16), torch.tensor(1)),
             (torch.randn(16), torch.tensor([1])),
             (torch.randn(3, 16), torch.zeros(3, 2, dtype=torch.int64))]
    for x, t in cases:
        _same_error(lambda x=x, t=t: tm(x.double(), t),
                    lambda x=x, t=t: gm(_gt(x.double(), device), _gt(t, device)))


# ---------------------------------------------------------------- linear_cross_entropy

def _lce_data(n=11, f=5, v=9, dtype=torch.float64):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, f, generator=g).to(dtype)
    w = torch.randn(v, f, generator=g).to(dtype)
    b = torch.randn(v, generator=g).to(dtype)
    t = torch.randint(0, v, (n,), generator=g)
    if n > 7:
        t[3] = -100
        t[7] = 2
    cw = torch.rand(v, generator=g).to(dtype)
    return x, w, b, t, cw


def _run_lce(lib, device, x, w, b, t, cw, grad=None, **kwargs):
    if lib is torch:
        leaves = [a.clone().requires_grad_() for a in (x, w, b)]
        loss = TF.linear_cross_entropy(leaves[0], leaves[1], t, linear_bias=leaves[2],
                                       weight=cw, **kwargs)
    else:
        leaves = [_gt(a, device, grad=True) for a in (x, w, b)]
        loss = F.linear_cross_entropy(leaves[0], leaves[1], _gt(t, device),
                                      linear_bias=leaves[2], weight=_gt(cw, device), **kwargs)
    if grad is not None:
        loss.backward(grad if lib is torch else _gt(grad, device))
    return loss, [a.grad for a in leaves]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunk", [None, 1, 4, "aspect_ratio"])
def test_linear_cross_entropy_chunked_matches_torch(device, reduction, chunk) -> None:
    data = _lce_data()
    if chunk == "aspect_ratio":
        kw = {"chunking_method": "aspect_ratio"}
    else:
        kw = {"batch_chunk_size": chunk, "chunking_method": None}
    t_opts = torch.nn.LinearCrossEntropyOptions(**kw)
    g_opts = gt.nn.LinearCrossEntropyOptions(**kw)
    grad = torch.randn(11 if reduction == "none" else (), dtype=torch.float64)
    want, want_grads = _run_lce(torch, device, *data, grad, reduction=reduction,
                                options=t_opts)
    got, got_grads = _run_lce(gt, device, *data, grad, reduction=reduction, options=g_opts)
    _close(got, want)
    for g, w in zip(got_grads, want_grads, strict=True):
        _close(g, w)
    ref, _ = _run_lce(gt, device, *data, None, reduction=reduction)  # options=None
    _close(got, ref)


def test_linear_cross_entropy_chunking_does_not_change_results(device) -> None:
    data = _lce_data(n=13)
    results = {}
    for chunk in (13, 1, 3, 5):
        opts = gt.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk, chunking_method=None)
        for reduction in ("mean", "sum", "none"):
            grad = torch.ones(13 if reduction == "none" else (), dtype=torch.float64)
            loss, grads = _run_lce(gt, device, *data, grad, reduction=reduction, options=opts)
            results[chunk, reduction] = (_np(loss), [_np(g) for g in grads])
    for (_, reduction), (loss, grads) in results.items():
        base_loss, base_grads = results[13, reduction]
        # each row's loss comes from its own logits row and the losses are summed once over
        # all rows, so chunking only changes the rounding inside the matrix products
        np.testing.assert_allclose(loss, base_loss, rtol=1e-14, atol=1e-15)
        for g, base in zip(grads, base_grads, strict=True):
            np.testing.assert_allclose(g, base, rtol=1e-13, atol=1e-14)
    opts = gt.nn.LinearCrossEntropyOptions(batch_chunk_size=4, chunking_method=None)
    loss, _ = _run_lce(gt, device, *data, None, options=opts)
    ref, _ = _run_lce(gt, device, *data, None)
    _close(loss, ref, 1e-14)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("policy", ["auto", "accurate", "balanced", "compact"])
def test_linear_cross_entropy_low_precision(device, dtype, policy) -> None:
    data = _lce_data(n=16, f=8, v=24, dtype=dtype)
    opts = {"acc_policy": policy}
    want, want_grads = _run_lce(torch, device, *data, torch.tensor(1.0, dtype=dtype),
                                options=torch.nn.LinearCrossEntropyOptions(**opts))
    got, got_grads = _run_lce(gt, device, *data, torch.tensor(1.0, dtype=dtype),
                              options=gt.nn.LinearCrossEntropyOptions(**opts))
    assert got.dtype == _DTYPES[dtype] and got_grads[1].dtype == _DTYPES[dtype]
    tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    _close(got, want, tol)
    for g, w in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(_np(g), _np(w), rtol=tol, atol=tol * 0.2)


def test_linear_cross_entropy_reference_path(device) -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 6, generator=g, dtype=torch.float64)
    w = torch.randn(5, 3, 2, 6, generator=g, dtype=torch.float64)  # K-dim: (C, d1, d2, F)
    b = torch.randn(5, 3, 2, generator=g, dtype=torch.float64)
    cases = [
        (torch.randint(0, 5, (4, 3, 2), generator=g), {"label_smoothing": 0.2}),
        (torch.randn(4, 5, 3, 2, generator=g, dtype=torch.float64).softmax(1), {}),
        (torch.randint(0, 5, (4, 3, 2), generator=g), {"ignore_index": 1,
                                                       "reduction": "none"}),
    ]
    for target, kwargs in cases:
        xs, ws, bs = (a.clone().requires_grad_() for a in (x, w, b))
        want = TF.linear_cross_entropy(xs, ws, target, linear_bias=bs, **kwargs)
        want.sum().backward()
        xg, wg, bg = (_gt(a, device, grad=True) for a in (x, w, b))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no options, no warning
            got = F.linear_cross_entropy(xg, wg, _gt(target, device), linear_bias=bg,
                                         **kwargs)
        got.sum().backward()
        _close(got, want)
        for a, t in ((xg, xs), (wg, ws), (bg, bs)):
            _close(a.grad, t.grad)
    # unbatched input with class-index and probability targets
    x1, w2 = torch.randn(6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)
    for target in (torch.tensor(3), torch.rand(5, dtype=torch.float64)):
        want = TF.linear_cross_entropy(x1, w2, target)
        _close(F.linear_cross_entropy(_gt(x1, device), _gt(w2, device), _gt(target, device)),
               want)


def test_linear_cross_entropy_options_fall_back_with_warning(device) -> None:
    x, w, _, t, _ = _lce_data()
    t = t.clamp(min=0)
    with pytest.warns(UserWarning, match="``options`` ignored") as record:
        got = F.linear_cross_entropy(_gt(x, device), _gt(w, device), _gt(t, device),
                                     label_smoothing=0.1,
                                     options=gt.nn.LinearCrossEntropyOptions())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = TF.linear_cross_entropy(x, w, t, label_smoothing=0.1,
                                       options=torch.nn.LinearCrossEntropyOptions())
    _close(got, want)
    assert "label_smoothing=0.1" in str(record[0].message)


def test_linear_cross_entropy_retain_graph(device) -> None:
    x, w, b, t, cw = _lce_data()
    xg = _gt(x, device, grad=True)
    loss = F.linear_cross_entropy(xg, _gt(w, device), _gt(t, device),
                                  options=gt.nn.LinearCrossEntropyOptions())
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="chunked backward called twice"):
        loss.backward()
    xg = _gt(x, device, grad=True)
    loss = F.linear_cross_entropy(xg, _gt(w, device), _gt(t, device),
                                  options=gt.nn.LinearCrossEntropyOptions(
                                      allow_retain_graph=True))
    loss.backward(retain_graph=True)
    first = _np(xg.grad).copy()
    loss.backward()
    np.testing.assert_allclose(_np(xg.grad), 2 * first, rtol=1e-14)


def test_linear_cross_entropy_errors(device) -> None:
    x, w, b, t, _ = _lce_data()
    cases = [
        (x[None], w, t, {}), (x, w[0], t, {}), (x, w[:, :3], t, {}),
        (x, w, t, {"linear_bias": b[:3]}), (x[0], w[:, None], t[0], {}),
        (x, w, torch.rand(11, 9, dtype=torch.float64), {"ignore_index": 0}),
    ]
    for xa, wa, ta, kw in cases:
        gkw = {k: _gt(v, device) for k, v in kw.items() if k == "linear_bias"}
        gkw.update({k: v for k, v in kw.items() if k != "linear_bias"})
        _same_error(lambda a=(xa, wa, ta), k=kw: TF.linear_cross_entropy(*a, **k),
                    lambda a=(xa, wa, ta), k=gkw: F.linear_cross_entropy(
                        *[_gt(t, device) for t in a], **k))


@pytest.mark.parametrize("kwargs", [{"acc_policy": "fast"}, {"chunking_method": "ratio"},
                                    {"chunking_method": "aspect_ratio:0"},
                                    {"batch_chunk_size": 0}, {"acc_dtype": "int64"}])
def test_linear_cross_entropy_options_validation(kwargs) -> None:
    with pytest.raises(ValueError) as want:
        torch.nn.LinearCrossEntropyOptions(**{k: getattr(torch, v) if k == "acc_dtype" else v
                                              for k, v in kwargs.items()})
    with pytest.raises(ValueError) as got:
        gt.nn.LinearCrossEntropyOptions(**{k: getattr(gt, v) if k == "acc_dtype" else v
                                           for k, v in kwargs.items()})
    assert str(got.value).replace("gputensor.", "torch.") == str(want.value)


@pytest.mark.parametrize("kwargs", [{}, {"batch_chunk_size": 3}, {"chunking_method": None},
                                    {"chunking_method": "aspect_ratio:4"},
                                    {"acc_policy": "balanced", "acc_dtype": "float64"}])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear_cross_entropy_options_adjust_matches_torch(kwargs, dtype) -> None:
    def build(lib):
        kw = {k: getattr(lib, v) if k == "acc_dtype" else v for k, v in kwargs.items()}
        opts = lib.nn.LinearCrossEntropyOptions(**kw)
        return opts._adjust(40, 8, 100, getattr(lib, dtype), lib.device("cpu"))

    want, got = build(torch), build(gt)
    for field in dataclasses.fields(want):
        a, b = getattr(got, field.name), getattr(want, field.name)
        assert str(a).replace("gputensor", "torch") == str(b), field.name
    with pytest.raises(ValueError):
        gt.nn.LinearCrossEntropyOptions(batch_chunk_size=3, chunking_method="aspect_ratio")._adjust(
            40, 8, 100, gt.float32, gt.device("cpu"))


@pytest.mark.parametrize("options", [False, True])
def test_linear_cross_entropy_loss_module(device, options) -> None:
    kw = {"options": torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2)} if options else {}
    gkw = {"options": gt.nn.LinearCrossEntropyOptions(batch_chunk_size=2)} if options else {}
    cw = torch.rand(7, dtype=torch.float64)
    tm = torch.nn.LinearCrossEntropyLoss(5, 7, bias=True, weight=cw, ignore_index=3,
                                         dtype=torch.float64, **kw)
    gm = gt.nn.LinearCrossEntropyLoss(5, 7, bias=True, weight=_gt(cw, "cpu"), ignore_index=3,
                                      dtype=gt.float64, **gkw).to(device)
    gm.load_state_dict({k: _gt(v, device) for k, v in tm.state_dict().items()})
    assert repr(gm).replace("gputensor", "torch") == repr(tm)
    x = torch.randn(6, 5, dtype=torch.float64)
    t = torch.tensor([0, 3, 6, 2, 3, 1])
    want = tm(x, t)
    got = gm(_gt(x, device), _gt(t, device))
    _close(got, want)
    want.backward()
    got.backward()
    _close(gm.linear.weight.grad, tm.linear.weight.grad)
    _close(gm.linear.bias.grad, tm.linear.bias.grad)
    kd = torch.nn.LinearCrossEntropyLoss(5, 7, out_features=(2,), dtype=torch.float64)
    gkd = gt.nn.LinearCrossEntropyLoss(5, 7, out_features=(2,), dtype=gt.float64).to(device)
    gkd.load_state_dict({k: _gt(v, device) for k, v in kd.state_dict().items()})
    t2 = torch.randint(0, 7, (6, 2))
    _close(gkd(_gt(x, device), _gt(t2, device)), kd(x, t2))
    for args, kwargs in [((5, 7), {"weight": torch.rand(3)}),
                         ((5, 7), {"label_smoothing": 1.5})]:
        gkwargs = {k: _gt(v, "cpu") if k == "weight" else v for k, v in kwargs.items()}
        _same_error(lambda a=args, k=kwargs: torch.nn.LinearCrossEntropyLoss(*a, **k),
                    lambda a=args, k=gkwargs: gt.nn.LinearCrossEntropyLoss(*a, **k))


# ---------------------------------------------------------------- __torch_function__ helpers

class _Overriding:
    calls: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append((cls.__name__, func, types))
        return cls.__name__


class _SubOverriding(_Overriding):
    pass


class _Declining:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return NotImplemented


class _Opted(gt.Tensor):
    __torch_function__ = classmethod(F._overrides._disabled_torch_function_impl)


def test_has_torch_function() -> None:
    plain = [gt.randn(2), gt.nn.Parameter(gt.randn(2)), 1, None, "s"]
    for arg in plain:
        assert not F.has_torch_function_unary(arg)
    assert not F.has_torch_function(plain)
    assert not F.has_torch_function_variadic(*plain)
    assert not F.has_torch_function_unary(_Opted([1.0]))
    assert F.has_torch_function_unary(_Overriding())
    assert F.has_torch_function((1, _Overriding()))
    assert F.has_torch_function_variadic(None, _Declining())
    with pytest.raises(TypeError, match="expected a sequence"):
        F.has_torch_function(3)
    # PyTorch agrees for objects that are not tensors
    assert torch.overrides.has_torch_function((1, _Overriding()))


def test_handle_torch_function_dispatch() -> None:
    def api(a, b, scale=1):
        return "plain"

    _Overriding.calls.clear()
    base, sub = _Overriding(), _SubOverriding()
    # subclasses first, one call per type, first non-NotImplemented result wins
    assert F.handle_torch_function(api, (base, sub, base), base, sub, scale=2) == \
        "_SubOverriding"
    assert _Overriding.calls == [("_SubOverriding", api, (_SubOverriding, _Overriding))]
    assert F.handle_torch_function(api, (_Declining(), base), 1, 2) == "_Overriding"
    with pytest.raises(TypeError, match="no implementation found for '.*api' on types that "
                                        "implement __torch_function__"):
        F.handle_torch_function(api, (_Declining(),), 1, 2)
    # the same precedence as PyTorch's implementation
    want = torch.overrides.handle_torch_function(api, (base, sub), base, sub)
    assert F.handle_torch_function(api, (base, sub), base, sub) == want


def test_boolean_dispatch_and_small_helpers() -> None:
    def with_idx(x, flag=False):
        """doc"""
        return ("idx", x)

    def without(x, flag=False):
        return ("plain", x)

    fn = F.boolean_dispatch("flag", 1, False, with_idx, without, "m", "pick")
    assert fn(1) == ("plain", 1) and fn(1, True) == ("idx", 1) and fn(1, flag=True)[0] == "idx"
    assert fn.__name__ == "pick" and fn.__module__ == "m" and fn.__doc__ == "doc"
    assert without.__doc__ == "doc"
    assert F.fractional_max_pool2d.__name__ == "fractional_max_pool2d"
    F.assert_int_or_pair(3, "k", "{} bad")
    F.assert_int_or_pair((1, 2), "k", "{} bad")
    with pytest.raises(AssertionError, match="k bad"):
        F.assert_int_or_pair((1, 2, 3), "k", "{} bad")
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == TF.GRID_SAMPLE_INTERPOLATION_MODES
    assert F.GRID_SAMPLE_PADDING_MODES == TF.GRID_SAMPLE_PADDING_MODES


def test_convert_conv3d_weight_memory_format(device) -> None:
    def build(lib, **kw):
        return lib.nn.Sequential(lib.nn.Conv3d(4, 3, 2, **kw), lib.nn.ConvTranspose3d(3, 2, 2,
                                                                                      **kw),
                                 lib.nn.Conv2d(2, 2, 1, **kw))

    tm = torch.nn.utils.convert_conv3d_weight_memory_format(build(torch), torch.channels_last_3d)
    gm = gt.nn.utils.convert_conv3d_weight_memory_format(build(gt, device=device),
                                                         gt.channels_last_3d)
    for a, b in zip(gm.parameters(), tm.parameters(), strict=True):
        assert a.stride() == b.stride()
    assert gm[0].weight.is_contiguous(memory_format=gt.channels_last_3d)
    with pytest.raises(TypeError):
        gt.nn.utils.convert_conv3d_weight_memory_format(gm, "channels_last_3d")


# ---------------------------------------------------------------- grouped_mm

def _grouped_cases():
    i32 = torch.int32
    return [(torch.randn(24, 16), torch.randn(3, 16, 8), torch.tensor([3, 7, 24], dtype=i32)),
            (torch.randn(24, 16), torch.randn(3, 16, 8), torch.tensor([0, 9, 24], dtype=i32)),
            (torch.randn(3, 8, 16), torch.randn(3, 16, 8), None),
            (torch.randn(16, 24), torch.randn(24, 8), torch.tensor([4, 12, 24], dtype=i32)),
            (torch.randn(3, 8, 16), torch.randn(16, 24), torch.tensor([8, 16, 24], dtype=i32)),
            (torch.randn(24, 16), torch.randn(3, 8, 16).transpose(1, 2),
             torch.tensor([5, 10, 24], dtype=i32))]


@pytest.mark.parametrize("case", range(6))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_mm_matches_torch(device, case, dtype) -> None:
    a, b, offs = _grouped_cases()[case]
    a, b = a.to(dtype).requires_grad_(), b.to(dtype).requires_grad_()
    want = TF.grouped_mm(a, b, offs=offs)
    ga, gb = _gt(a, device, grad=True), _gt(b, device, grad=True)
    got = F.grouped_mm(ga, gb, offs=None if offs is None else _gt(offs, device))
    assert got.dtype == _DTYPES[dtype] and tuple(got.shape) == tuple(want.shape)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    _close(got, want, tol)
    _backward_close(got, want, [(ga, a), (gb, b)], device, tol)


def test_grouped_mm_zeroes_rows_past_the_last_offset(device) -> None:
    a, b = gt.randn(10, 4, device=device), gt.randn(2, 4, 4, device=device)
    out = F.grouped_mm(a, b, offs=gt.tensor([3, 6], dtype=gt.int32, device=device))
    assert gt.equal(out[6:], gt.zeros(4, 4, device=device))
    _close(out[:3], a[:3] @ b[0], 1e-6)


_GROUPED_ERRORS = [
    ((24, 16), (3, 16, 8), {"offs": [3, 7]}),
    ((24, 16), (3, 12, 8), {"offs": [3, 7, 24]}),
    ((24, 16), (3, 16, 8), {"offs": [[3], [7], [24]]}),
    ((24, 16), (3, 16, 8), {}),
    ((3, 8, 16), (3, 16, 8), {"offs": [3, 7, 24]}),
    ((24, 16), (3, 16, 8), {"offs": [3, 7, 24], "offs_dtype": torch.int64}),
    ((24, 16), (3, 16, 8), {"offs": [3, 7, 24], "out_dtype": "float64"}),
    ((24, 16), (3, 16, 8), {"offs": [3, 7, 24], "bias": (3, 8)}),
    ((24, 6), (3, 6, 8), {"offs": [3, 7, 24]}),
    ((3, 8, 16), (4, 16, 8), {}),
    ((24, 16), (3, 16, 8), {"offs": [3, 7, 24], "dtype": torch.float64}),
    ((24, 16), (3, 16, 8), {"offs": [3, 7, 24], "b_dtype": torch.float16}),
]


@pytest.mark.parametrize("a_shape,b_shape,kw", _GROUPED_ERRORS)
def test_grouped_mm_errors_match_torch(device, a_shape, b_shape, kw) -> None:
    kw = dict(kw)
    dtype = kw.pop("dtype", torch.float32)
    a = torch.randn(*a_shape, dtype=dtype)
    b = torch.randn(*b_shape, dtype=kw.pop("b_dtype", dtype))
    offs_dtype = kw.pop("offs_dtype", torch.int32)
    t_kw, g_kw = {}, {}
    if "offs" in kw:
        offs = torch.tensor(kw.pop("offs"), dtype=offs_dtype)
        t_kw["offs"], g_kw["offs"] = offs, _gt(offs, device)
    if "bias" in kw:
        bias = torch.randn(*kw.pop("bias"))
        t_kw["bias"], g_kw["bias"] = bias, _gt(bias, device)
    if "out_dtype" in kw:
        name = kw.pop("out_dtype")
        t_kw["out_dtype"], g_kw["out_dtype"] = getattr(torch, name), getattr(gt, name)
    _same_error(lambda: TF.grouped_mm(a, b, **t_kw),
                lambda: F.grouped_mm(_gt(a, device), _gt(b, device), **g_kw))


def test_gradcheck_adaptive_softmax_and_linear_cross_entropy(device) -> None:
    _, gm = _asm_pair(device)
    x = gt.randn(5, 16, dtype=gt.float64, device=device, requires_grad=True)
    target = gt.tensor([0, 5, 19, 3, 10], device=device)
    assert gt.autograd.gradcheck(lambda t: gm(t, target).loss, (x,))
    assert gt.autograd.gradcheck(lambda t: gm.log_prob(t), (x,))
    xs, w, b, t, cw = (_gt(a, device) for a in _lce_data(n=6, f=4, v=5))
    leaves = tuple(a.requires_grad_() for a in (xs, w, b))
    t = t.clamp(min=0)
    for reduction in ("mean", "none"):
        for options in (None, gt.nn.LinearCrossEntropyOptions(batch_chunk_size=4,
                                                              allow_retain_graph=True)):
            def fn(x_, w_, b_, reduction=reduction, options=options):
                return F.linear_cross_entropy(x_, w_, t, linear_bias=b_, weight=cw,
                                              reduction=reduction, options=options)
            assert gt.autograd.gradcheck(fn, leaves)
