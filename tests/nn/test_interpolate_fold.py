"""F.interpolate / upsample* and the Upsample modules, F.unfold / F.fold and the Unfold / Fold
modules against PyTorch: values, input gradients (of a random-weighted sum) and errors, on cpu
and emulated cuda."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F
from tests.helpers import assert_close, assert_same_error

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _compare(device: str, shape: tuple[int, ...], g_fn: Callable, t_fn: Callable,
             dtype: str = "float64", atol: float = 1e-10,
             view: Callable | None = None) -> None:
    """Forward values and the input gradient of a weighted sum match PyTorch's; ``view`` maps
    the leaf to the actual (e.g. non-contiguous) input on both sides."""
    data = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    g_leaf = gt.tensor(data, device=device, requires_grad=True)
    t_leaf = torch.tensor(data, requires_grad=True)
    view = view or (lambda x: x)
    got, want = g_fn(view(g_leaf)), t_fn(view(t_leaf))
    assert got.device == gt.device(device)
    assert_close(got, want, atol=atol, rtol=atol)
    weights = np.random.default_rng(1).standard_normal(tuple(want.shape)).astype(dtype)
    (got * gt.tensor(weights, device=device)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    assert_close(g_leaf.grad, t_leaf.grad, atol=atol, rtol=atol)




# -- interpolate ------------------------------------------------------------------------------
CASES = [
    # nearest: 1-D / 2-D / 3-D, sizes and integer / fractional scales both ways
    ((2, 3, 5), {"size": 8}),
    ((2, 3, 5), {"scale_factor": 1.7}),
    ((2, 3, 7), {"scale_factor": 0.6}),
    ((1, 2, 4, 5), {"scale_factor": (2, 3)}),
    ((1, 2, 5, 6), {"scale_factor": 1.1}),  # the 2-D kernel copies when the size is unchanged
    ((1, 2, 5, 6), {"size": (3, 9)}),
    ((1, 2, 3, 4, 5), {"scale_factor": (2.0, 0.5, 1.5)}),
    ((1, 2, 3, 4, 5), {"size": (4, 2, 7)}),
    # nearest-exact
    ((2, 3, 5), {"scale_factor": 1.6, "mode": "nearest-exact"}),
    ((1, 2, 6, 7), {"scale_factor": (0.5, 2.5), "mode": "nearest-exact"}),
    ((1, 2, 3, 4, 5), {"size": (5, 3, 2), "mode": "nearest-exact"}),
    # linear
    ((2, 3, 5), {"scale_factor": 2.5, "mode": "linear"}),
    ((2, 3, 9), {"size": 4, "mode": "linear", "align_corners": True}),
    ((2, 3, 6), {"scale_factor": 1.5, "mode": "linear", "recompute_scale_factor": True}),
    ((2, 3, 6), {"scale_factor": 0.7, "mode": "linear", "align_corners": True}),
    # bilinear
    ((1, 2, 4, 5), {"scale_factor": 2, "mode": "bilinear"}),
    ((1, 2, 4, 5), {"scale_factor": (1.7, 0.6), "mode": "bilinear"}),
    ((1, 2, 4, 5), {"scale_factor": (1.7, 0.6), "mode": "bilinear", "align_corners": True}),
    ((2, 1, 7, 6), {"size": (3, 6), "mode": "bilinear"}),
    ((2, 1, 7, 6), {"size": (1, 9), "mode": "bilinear", "align_corners": True}),
    # bicubic (A = -0.75, clamped borders)
    ((1, 2, 4, 5), {"scale_factor": 2.3, "mode": "bicubic"}),
    ((1, 2, 6, 7), {"size": (3, 4), "mode": "bicubic"}),
    ((1, 2, 4, 5), {"scale_factor": (1.5, 0.8), "mode": "bicubic", "align_corners": True}),
    ((1, 2, 4, 5), {"scale_factor": 1.5, "mode": "bicubic", "recompute_scale_factor": True}),
    # trilinear
    ((1, 2, 3, 4, 5), {"scale_factor": (1.5, 2, 0.6), "mode": "trilinear"}),
    ((1, 2, 3, 4, 5), {"size": (2, 6, 5), "mode": "trilinear", "align_corners": True}),
    # area (adaptive average pooling)
    ((2, 3, 7), {"size": 3, "mode": "area"}),
    ((1, 2, 7, 6), {"scale_factor": (0.5, 0.7), "mode": "area"}),
    ((1, 2, 3, 4, 5), {"size": (2, 3, 4), "mode": "area"}),
    ((1, 2, 3, 5, 4), {"scale_factor": 1.5, "mode": "area"}),
    # antialias (PIL's widened filters) and lanczos
    ((1, 2, 9, 11), {"size": (4, 5), "mode": "bilinear", "antialias": True}),
    ((1, 2, 9, 11), {"scale_factor": (0.37, 1.6), "mode": "bicubic", "antialias": True}),
    ((1, 2, 9, 11), {"scale_factor": 0.45, "mode": "bilinear", "antialias": True,
                     "align_corners": True}),
    ((1, 2, 9, 8), {"size": (4, 8), "mode": "bicubic", "antialias": True}),
    ((1, 2, 9, 11), {"scale_factor": (0.4, 1.5), "mode": "lanczos", "antialias": True}),
]


@pytest.mark.parametrize(("shape", "kw"), CASES, ids=lambda v: str(v).replace(" ", ""))
def test_interpolate_matches_torch(device: str, shape: tuple[int, ...], kw: dict) -> None:
    _compare(device, shape, lambda x: F.interpolate(x, **kw), lambda x: TF.interpolate(x, **kw))


@pytest.mark.parametrize(("shape", "kw"), [
    ((1, 3, 5, 6), {"scale_factor": 1.6, "mode": "bilinear"}),
    ((1, 3, 8, 6), {"size": (3, 9), "mode": "bicubic", "align_corners": True}),
    ((1, 3, 9, 11), {"size": (4, 5), "mode": "bicubic", "antialias": True}),
    ((1, 2, 3, 4, 5), {"scale_factor": 1.7, "mode": "nearest-exact"}),
])
def test_interpolate_float32_matches_torch(device: str, shape, kw: dict) -> None:
    """float32 indices and weights are computed in float32, as PyTorch's."""
    _compare(device, shape, lambda x: F.interpolate(x, **kw), lambda x: TF.interpolate(x, **kw),
             dtype="float32", atol=2e-6)


@pytest.mark.parametrize(("mode", "kw"), [("bilinear", {}), ("bicubic", {"align_corners": True}),
                                          ("nearest", {})])
def test_interpolate_non_contiguous_input(device: str, mode: str, kw: dict) -> None:
    """A transposed, strided view resamples like its contiguous copy; gradients reach the
    leaf through the view."""
    view = lambda x: x.transpose(-1, -2)[..., ::2, :]  # noqa: E731
    _compare(device, (1, 2, 7, 10), lambda x: F.interpolate(x, (7, 4), mode=mode, **kw),
             lambda x: TF.interpolate(x, (7, 4), mode=mode, **kw), view=view)


def test_interpolate_half_precision_matches_torch(device: str) -> None:
    """float16 computes in float32 and rounds once, as PyTorch's opmath; dtype is kept."""
    data = np.random.default_rng(2).standard_normal((1, 2, 5, 6)).astype(np.float16)
    for kw in ({"mode": "bilinear"}, {"mode": "bicubic"}, {"mode": "nearest"}):
        got = F.interpolate(gt.tensor(data, device=device), scale_factor=1.5, **kw)
        want = TF.interpolate(torch.tensor(data), scale_factor=1.5, **kw)
        assert_close(got, want, atol=2e-3, rtol=2e-3)


def test_interpolate_integer_inputs(device: str) -> None:
    """nearest gathers any dtype (uint8 as PyTorch); the weighted modes need floats."""
    data = np.arange(40, dtype=np.uint8).reshape(1, 2, 4, 5)
    got = F.interpolate(gt.tensor(data, device=device), scale_factor=1.5)
    assert_close(got, TF.interpolate(torch.tensor(data), scale_factor=1.5))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.interpolate(gt.ones(1, 1, 2, 2, dtype=gt.int64, device=device), 3, mode="bilinear")


def test_interpolate_gradcheck() -> None:
    """Finite differences agree with autograd for the weighted modes (float64)."""
    x = gt.randn(1, 1, 4, 5, dtype=gt.float64, requires_grad=True)
    for kw in ({"mode": "bicubic", "scale_factor": 1.4},
               {"mode": "bilinear", "size": (2, 3), "antialias": True}):
        assert gt.autograd.gradcheck(lambda t, kw=kw: F.interpolate(t, **kw), (x,))
    y = gt.randn(1, 1, 2, 3, 3, dtype=gt.float64, requires_grad=True)
    assert gt.autograd.gradcheck(
        lambda t: F.interpolate(t, scale_factor=1.5, mode="trilinear", align_corners=True), (y,))


def test_interpolate_keeps_batch_of_zero_and_returns_new_tensor(device: str) -> None:
    x = gt.zeros(0, 2, 3, 4, device=device)
    assert tuple(F.interpolate(x, size=(5, 6), mode="bilinear").shape) == (0, 2, 5, 6)
    y = gt.randn(1, 2, 3, device=device)
    out = F.interpolate(y, size=3, mode="linear")  # an unchanged size is a copy, not an alias
    assert out.data_ptr() != y.data_ptr()
    assert_close(out, y)


ERRORS = [
    ((1, 2, 4, 5), {"size": 3, "scale_factor": 2}),
    ((1, 2, 4, 5), {}),
    ((1, 2, 4, 5), {"size": (3, 3, 3)}),
    ((1, 2, 4, 5), {"scale_factor": (2, 2, 2)}),
    ((1, 2, 4, 5), {"size": (3.0, 2)}),
    ((1, 2, 4, 5), {"size": 3, "align_corners": True}),
    ((1, 2, 4, 5), {"size": 3, "mode": "area", "align_corners": False}),
    ((1, 2, 4, 5), {"size": 3, "recompute_scale_factor": True}),
    ((1, 2, 4, 5), {"size": 3, "antialias": True}),
    ((1, 2, 5), {"size": 3, "mode": "bilinear", "antialias": True}),
    ((1, 2, 4, 5), {"size": 3, "mode": "lanczos"}),
    ((1, 2, 4, 5), {"size": 3, "mode": "lanczos", "antialias": True, "align_corners": True}),
    ((1, 2, 5), {"size": 3, "mode": "bilinear"}),
    ((1, 2, 5), {"size": 3, "mode": "trilinear"}),
    ((1, 2, 4, 5), {"size": 3, "mode": "linear"}),
    ((1, 2, 4, 5), {"size": 3, "mode": "trilinear"}),
    ((1, 2, 3, 4, 5), {"size": 3, "mode": "linear"}),
    ((1, 2, 3, 4, 5), {"size": 3, "mode": "bilinear"}),
    ((1, 2, 5), {"size": 3, "mode": "bicubic"}),
    ((1, 2, 4, 5), {"size": 3, "mode": "cubic"}),
    ((2, 5), {"size": 3}),
    ((1, 1, 1, 1, 1, 1), {"size": 3}),
    ((1, 2, 4, 5), {"size": (0, 3), "mode": "bilinear"}),
    ((1, 2, 5), {"size": 0, "mode": "linear"}),
    ((1, 2, 3, 4, 5), {"size": 0}),
    ((1, 2, 0, 5), {"size": 3, "mode": "bicubic"}),
    ((1, 0, 4, 5), {"size": 3, "mode": "bilinear"}),
    ((1, 2, 4, 5), {"scale_factor": -1.0}),
    ((1, 2, 4, 5), {"scale_factor": float("inf"), "mode": "bilinear"}),
    ((1, 2, 0, 4, 4), {"size": 2, "mode": "area"}),
]


@pytest.mark.parametrize(("shape", "kw"), ERRORS, ids=lambda v: str(v).replace(" ", ""))
def test_interpolate_errors_are_torchs(shape: tuple[int, ...], kw: dict) -> None:
    assert_same_error(lambda: F.interpolate(gt.zeros(shape), **kw),
                lambda: TF.interpolate(torch.zeros(shape), **kw))


def test_deprecated_upsample_functions(device: str) -> None:
    data = np.random.default_rng(3).standard_normal((1, 2, 3, 4))
    g, t = gt.tensor(data, device=device), torch.tensor(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairs = [(F.upsample(g, scale_factor=2, mode="bicubic"),
                  TF.upsample(t, scale_factor=2, mode="bicubic")),
                 (F.upsample_nearest(g, size=(5, 7)), TF.upsample_nearest(t, size=(5, 7))),
                 (F.upsample_bilinear(g, scale_factor=1.5),
                  TF.upsample_bilinear(t, scale_factor=1.5))]
    for got, want in pairs:
        assert_close(got, want, atol=1e-12, rtol=1e-12)
    with pytest.warns(UserWarning, match="deprecated"):
        F.upsample_nearest(g, scale_factor=2)


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), [
    ("Upsample", (), {"scale_factor": 2}, (1, 2, 3, 4)),
    ("Upsample", (), {"size": (5, 3), "mode": "bilinear"}, (1, 2, 3, 4)),
    ("Upsample", (), {"scale_factor": (1.5, 2), "mode": "bicubic", "align_corners": True},
     (1, 2, 3, 4)),
    ("Upsample", (7,), {"mode": "linear"}, (2, 3, 4)),
    ("Upsample", (), {"scale_factor": 0.5, "mode": "trilinear",
                      "recompute_scale_factor": True}, (1, 1, 4, 4, 6)),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}, (1, 2, 3, 4)),
    ("UpsamplingNearest2d", ((4, 6),), {}, (1, 2, 3, 4)),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, (1, 2, 3, 4)),
    ("UpsamplingBilinear2d", (5,), {}, (1, 2, 3, 4)),
])
def test_upsampling_modules_match_torch(device: str, name: str, args: tuple, kwargs: dict,
                                        shape) -> None:
    g_mod, t_mod = getattr(gt.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(g_mod) == repr(t_mod)
    assert (g_mod.scale_factor, g_mod.size, g_mod.mode, g_mod.align_corners) == \
        (t_mod.scale_factor, t_mod.size, t_mod.mode, t_mod.align_corners)
    _compare(device, shape, g_mod, t_mod)


# -- unfold / fold ----------------------------------------------------------------------------
GEOMETRIES = [
    ((2, 3, 5, 6), {"kernel_size": 2}),
    ((2, 3, 5, 6), {"kernel_size": (2, 3), "stride": (1, 2)}),
    ((1, 2, 6, 7), {"kernel_size": 3, "padding": 1, "stride": 2}),
    ((1, 2, 7, 7), {"kernel_size": (2, 2), "dilation": (2, 3), "padding": (1, 2)}),
    ((2, 1, 6, 5), {"kernel_size": 3, "dilation": 2, "padding": (2, 0), "stride": (3, 1)}),
    ((3, 5, 4), {"kernel_size": (1, 2)}),  # unbatched (C, H, W)
    ((2, 1, 3, 3), {"kernel_size": 4, "padding": 1}),  # one block
]


@pytest.mark.parametrize(("shape", "kw"), GEOMETRIES, ids=lambda v: str(v).replace(" ", ""))
def test_unfold_fold_match_torch(device: str, shape: tuple[int, ...], kw: dict) -> None:
    _compare(device, shape, lambda x: F.unfold(x, **kw), lambda x: TF.unfold(x, **kw))
    cols = tuple(TF.unfold(torch.zeros(shape), **kw).shape)
    size = shape[-2:]
    _compare(device, cols, lambda c: F.fold(c, size, **kw), lambda c: TF.fold(c, size, **kw))


@pytest.mark.parametrize(("shape", "kw"), GEOMETRIES[:5], ids=lambda v: str(v).replace(" ", ""))
def test_fold_of_unfold_counts_blocks(device: str, shape: tuple[int, ...], kw: dict) -> None:
    """fold(unfold(x)) is x times the number of blocks covering each pixel, as in PyTorch's
    docs; and a non-contiguous input unfolds like its copy."""
    data = np.random.default_rng(4).standard_normal(shape)
    x = gt.tensor(data, device=device)
    got = F.fold(F.unfold(x, **kw), shape[-2:], **kw)
    divisor = F.fold(F.unfold(gt.ones(shape, dtype=gt.float64, device=device), **kw),
                     shape[-2:], **kw)
    assert_close(got, x * divisor, atol=1e-12, rtol=1e-12)
    want = TF.fold(TF.unfold(torch.tensor(data), **kw), shape[-2:], **kw)
    assert_close(got, want, atol=1e-12, rtol=1e-12)
    strided = gt.tensor(np.ascontiguousarray(np.swapaxes(data, -1, -2)),
                        device=device).transpose(-1, -2)
    assert_close(F.unfold(strided, **kw), TF.unfold(torch.tensor(data), **kw))


def test_unfold_fold_gradcheck() -> None:
    x = gt.randn(1, 2, 4, 4, dtype=gt.float64, requires_grad=True)
    assert gt.autograd.gradcheck(lambda t: F.unfold(t, 2, padding=1, stride=2), (x,))
    c = gt.randn(1, 8, 20, dtype=gt.float64, requires_grad=True)
    assert gt.autograd.gradcheck(lambda t: F.fold(t, (4, 4), 2, dilation=(1, 2), padding=1),
                                 (c,))


def test_fold_modules_match_torch(device: str) -> None:
    kw = {"kernel_size": (2, 3), "dilation": 1, "padding": (1, 0), "stride": 2}
    g_un, t_un = gt.nn.Unfold(**kw), torch.nn.Unfold(**kw)
    g_fo, t_fo = gt.nn.Fold((5, 6), **kw), torch.nn.Fold((5, 6), **kw)
    assert repr(g_un) == repr(t_un) and repr(g_fo) == repr(t_fo)
    _compare(device, (2, 2, 5, 6), lambda x: g_fo(g_un(x)), lambda x: t_fo(t_un(x)))
    assert repr(gt.nn.Fold(4, 2)) == repr(torch.nn.Fold(4, 2))
    assert repr(gt.nn.Unfold(3)) == repr(torch.nn.Unfold(3))


UNFOLD_ERRORS = [
    ((1, 2, 4, 5), ((2, 2, 2),), {}),
    ((1, 2, 4, 5), ((2,),), {}),
    ((1, 2, 4, 5), (2.0,), {}),
    ((1, 2, 4, 5), (2,), {"stride": 2.0, "padding": (1, 2, 3)}),
    ((1, 2, 4, 5), (0,), {}),
    ((1, 2, 4, 5), (2,), {"dilation": 0, "padding": -1, "stride": 0}),
    ((1, 2, 4, 5), (2,), {"padding": -1, "stride": 0}),
    ((1, 2, 4, 5), (2,), {"stride": 0}),
    ((1, 2, 4, 5), (6,), {}),
    ((1, 2, 4, 5), ((6, 2),), {}),
    ((4, 5), (2,), {}),
    ((1, 1, 2, 4, 5), (2,), {}),
    ((1, 0, 4, 5), (2,), {}),
    ((0, 4, 5), (2,), {}),
]


@pytest.mark.parametrize(("shape", "args", "kw"), UNFOLD_ERRORS,
                         ids=lambda v: str(v).replace(" ", ""))
def test_unfold_errors_are_torchs(shape, args: tuple, kw: dict) -> None:
    assert_same_error(lambda: F.unfold(gt.zeros(shape), *args, **kw),
                lambda: TF.unfold(torch.zeros(shape), *args, **kw))


FOLD_ERRORS = [
    ((1, 8, 12), ((4, 5), 3), {}),
    ((1, 8, 12), ((4, 6), 2), {}),
    ((1, 8, 12), ((1, 1), 2), {}),
    ((1, 8, 12), ((0, 5), 2), {}),
    ((1, 8, 1), ((1, 1), 2), {"stride": 3}),
    ((1, 1, 8, 12), ((4, 5), 2), {}),
    ((8,), ((4, 5), 2), {}),
    ((1, 0, 12), ((4, 5), 2), {}),
    ((1, 8, 12), ((4, 5), 0), {}),
    ((1, 8, 12), ((4, 5), 2), {"stride": 0, "dilation": 0, "padding": -1}),
    ((1, 8, 12), ((4, 5), 2), {"dilation": 0, "padding": -1}),
    ((1, 8, 12), ((4, 5), 2), {"padding": -1}),
    ((1, 8, 12), ((4, 5, 6), 2), {}),
    ((1, 8, 12), ((4, 5), 2), {"padding": [1.5]}),
    ((1, 7, 12), ((4, 5), 2), {"stride": 0}),
]


@pytest.mark.parametrize(("shape", "args", "kw"), FOLD_ERRORS,
                         ids=lambda v: str(v).replace(" ", ""))
def test_fold_errors_are_torchs(shape, args: tuple, kw: dict) -> None:
    assert_same_error(lambda: F.fold(gt.zeros(shape), *args, **kw),
                lambda: TF.fold(torch.zeros(shape), *args, **kw))


def test_fold_unbatched_and_empty_batch(device: str) -> None:
    data = np.random.default_rng(5).standard_normal((8, 12))
    got = F.fold(gt.tensor(data, device=device), (4, 5), 2)
    assert_close(got, TF.fold(torch.tensor(data), (4, 5), 2), atol=1e-12, rtol=1e-12)
    assert tuple(F.fold(gt.zeros(0, 8, 12, device=device), (4, 5), 2).shape) == (0, 2, 4, 5)
    assert tuple(F.unfold(gt.zeros(0, 2, 4, 5, device=device), 2).shape) == (0, 8, 12)
