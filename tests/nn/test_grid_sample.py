"""F.affine_grid and F.grid_sample against PyTorch on cpu and emulated cuda: values, the
gradients of the input, the grid and theta, every mode / padding mode / align_corners in 2-D
and 3-D, out-of-range and non-finite grid values, warnings and errors."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F
from gputensor.autograd import gradcheck
from tests.helpers import assert_close, assert_same_error

torch = pytest.importorskip("torch")
TF = torch.nn.functional

MODES = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def _grid_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Mostly in [-1.6, 1.6] (beyond the input on every side), a few far out (several
    reflections), and some exactly on pixel corners, centres and the +-1 edges."""
    g = rng.uniform(-1.6, 1.6, shape)
    flat = g.reshape(-1)
    far = rng.choice(flat.size, flat.size // 6, replace=False)
    flat[far] = rng.choice([-7.3, -3.1, 2.7, 5.9, 11.4], far.size)
    exact = rng.choice(flat.size, flat.size // 6, replace=False)
    flat[exact] = rng.choice([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0], exact.size)
    return g


def _pair(data: np.ndarray, device: str) -> tuple[gt.Tensor, torch.Tensor]:
    return (gt.tensor(data, device=device, requires_grad=True),
            torch.tensor(data, requires_grad=True))


def _compare_sample(device: str, in_shape: tuple[int, ...], grid_shape: tuple[int, ...],
                    atol: float = 1e-10, seed: int = 0, **kw) -> None:
    """Output, input gradient and grid gradient of a random-weighted sum match PyTorch's."""
    rng = np.random.default_rng(seed)
    gi, ti = _pair(rng.standard_normal(in_shape), device)
    gg, tg = _pair(_grid_values(rng, grid_shape), device)
    got, want = F.grid_sample(gi, gg, **kw), TF.grid_sample(ti, tg, **kw)
    assert got.device == gt.device(device)
    assert_close(got, want, atol=atol, rtol=atol)
    w = rng.standard_normal(tuple(want.shape))
    (got * gt.tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(gi.grad, ti.grad, atol=atol, rtol=atol)
    assert_close(gg.grad, tg.grad, atol=atol, rtol=atol)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_2d(device, mode, padding_mode, align_corners) -> None:
    _compare_sample(device, (2, 3, 4, 5), (2, 6, 7, 2), mode=mode,
                    padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(device, mode, padding_mode, align_corners) -> None:
    _compare_sample(device, (2, 2, 3, 4, 5), (2, 3, 2, 4, 3), mode=mode,
                    padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("mode", MODES)
def test_single_pixel_dims(device, mode) -> None:
    """Size-1 dims: with align_corners every position maps to the pixel (zero span)."""
    for align_corners in (False, True):
        for padding_mode in PADDINGS:
            _compare_sample(device, (1, 2, 1, 3), (1, 4, 3, 2), mode=mode,
                            padding_mode=padding_mode, align_corners=align_corners)
    if mode != "bicubic":
        _compare_sample(device, (1, 1, 1, 1, 2), (1, 2, 2, 2, 3), mode=mode,
                        padding_mode="reflection", align_corners=True)


def test_float32_and_strided_operands(device) -> None:
    rng = np.random.default_rng(3)
    data = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 2, 6, 5)).astype(np.float32)
    for mode in MODES:
        gi, ti = _pair(data, device)
        gg, tg = _pair(grid, device)
        # a channels-last style input view and a grid built from a permuted layout
        got = F.grid_sample(gi.permute(0, 2, 3, 1).permute(0, 3, 1, 2),
                            gg.permute(0, 3, 2, 1)[..., :2].transpose(1, 2).contiguous()
                            .transpose(1, 2), mode=mode, padding_mode="reflection",
                            align_corners=False)
        want = TF.grid_sample(ti, tg.permute(0, 3, 2, 1)[..., :2], mode=mode,
                              padding_mode="reflection", align_corners=False)
        assert_close(got, want, atol=1e-5, rtol=1e-5)
        got.sum().backward()
        want.sum().backward()
        assert_close(gi.grad, ti.grad, atol=1e-4, rtol=1e-4)
        assert_close(gg.grad, tg.grad, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision(device, dtype) -> None:
    rng = np.random.default_rng(4)
    data, grid = rng.standard_normal((1, 2, 4, 4)), rng.uniform(-1.2, 1.2, (1, 3, 3, 2))
    tdt = getattr(torch, dtype)
    want = TF.grid_sample(torch.tensor(data, dtype=tdt), torch.tensor(grid, dtype=tdt),
                          align_corners=True)
    got = F.grid_sample(gt.tensor(data, dtype=getattr(gt, dtype), device=device),
                        gt.tensor(grid, dtype=getattr(gt, dtype), device=device),
                        align_corners=True)
    assert_close(got, want, atol=5e-2, rtol=5e-2)


def test_non_finite_grid_values(device) -> None:
    """NaN / inf positions give PyTorch's CPU values: NaN for 2-D zeros padding (0 for
    nearest and in 3-D), else the border the clipping sends them to (0 in 2-D, the far
    end in 3-D); huge finite values behave as out of range."""
    nan, inf = float("nan"), float("inf")
    points2 = [[nan, 0.0], [0.0, nan], [inf, 0.0], [-inf, 0.5], [1e30, 0.0], [0.3, 0.2],
               [-1e30, 0.1]]
    points3 = [[nan, 0.0, 0.0], [inf, 0.0, 0.0], [-inf, 0.5, 0.0], [1e30, 0.0, 0.0],
               [0.3, 0.2, 0.1], [0.1, nan, 0.2], [0.1, 0.2, -inf]]
    for in_shape, points, modes in (((1, 2, 3, 4), points2, MODES),
                                    ((1, 2, 2, 3, 4), points3, MODES[:2])):
        data = np.arange(np.prod(in_shape), dtype=np.float32).reshape(in_shape) + 1
        grid = np.array(points, dtype=np.float32).reshape(1, *([1] * (len(in_shape) - 3)),
                                                          len(points), len(points[0]))
        for mode in modes:
            for padding_mode in PADDINGS:
                kw = {"mode": mode, "padding_mode": padding_mode, "align_corners": False}
                want = TF.grid_sample(torch.tensor(data), torch.tensor(grid), **kw)
                got = F.grid_sample(gt.tensor(data, device=device),
                                    gt.tensor(grid, device=device), **kw)
                assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_non_finite_grid_keeps_input_gradient_clean(device) -> None:
    data = np.arange(12.0).reshape(1, 1, 3, 4)
    grid = np.array([float("nan"), 0.0, 0.2, 0.1]).reshape(1, 1, 2, 2)
    gi, ti = _pair(data, device)
    F.grid_sample(gi, gt.tensor(grid, device=device), align_corners=False).nansum().backward()
    TF.grid_sample(ti, torch.tensor(grid), align_corners=False).nansum().backward()
    assert_close(gi.grad, ti.grad)


def test_nearest_gives_the_grid_a_zero_gradient(device) -> None:
    for shape, grid_shape in (((1, 2, 3, 3), (1, 2, 2, 2)), ((1, 1, 2, 2, 2), (1, 1, 2, 2, 3))):
        grid = gt.tensor(np.random.default_rng(0).uniform(-1, 1, grid_shape), device=device,
                         requires_grad=True)
        out = F.grid_sample(gt.ones(shape, dtype=gt.float64, device=device), grid,
                            mode="nearest", align_corners=False)
        assert out.requires_grad
        out.sum().backward()
        assert grid.grad is not None and bool((grid.grad == 0).all())


def test_empty_shapes(device) -> None:
    cases = [((0, 2, 3, 3), (0, 2, 2, 2)), ((2, 0, 3, 3), (2, 2, 2, 2)),
             ((2, 1, 3, 3), (2, 0, 4, 2)), ((1, 2, 2, 2, 2), (1, 0, 1, 2, 3))]
    for in_shape, grid_shape in cases:
        for mode in ("bilinear", "nearest"):
            kw = {"mode": mode, "align_corners": False}
            want = TF.grid_sample(torch.ones(in_shape), torch.zeros(grid_shape), **kw)
            gi = gt.ones(in_shape, device=device, requires_grad=True)
            got = F.grid_sample(gi, gt.zeros(grid_shape, device=device), **kw)
            assert tuple(got.shape) == tuple(want.shape)
            got.sum().backward()
            assert tuple(gi.grad.shape) == in_shape


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_grid_sample_gradcheck(device, mode) -> None:
    rng = np.random.default_rng(5)
    for in_shape, grid_shape in (((1, 2, 3, 4), (1, 2, 3, 2)), ((1, 1, 2, 3, 3), (1, 2, 1, 2, 3))):
        if mode == "bicubic" and len(in_shape) == 5:
            continue
        x = gt.tensor(rng.standard_normal(in_shape), device=device, requires_grad=True)
        # positions away from the integer kinks of the interpolation weights
        grid = rng.uniform(-1.2, 1.2, grid_shape)
        g = gt.tensor(grid, device=device, requires_grad=mode != "nearest")
        for padding_mode in PADDINGS:
            for align_corners in (False, True):
                def fn(x, g, padding_mode=padding_mode, align_corners=align_corners):
                    return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                                         align_corners=align_corners)
                assert gradcheck(fn, (x, g))


# -- affine_grid --------------------------------------------------------------------------------
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 6), (2, 3, 2, 4, 5), (2, 1, 1, 1, 3)])
def test_affine_grid(device, size, align_corners) -> None:
    k = len(size) - 2
    theta = np.random.default_rng(6).standard_normal((size[0], k, k + 1))
    g_theta, t_theta = _pair(theta, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unit-size warning, checked below
        got = F.affine_grid(g_theta, size, align_corners=align_corners)
        want = TF.affine_grid(t_theta, size, align_corners=align_corners)
    assert got.device == gt.device(device)
    assert_close(got, want)
    w = np.random.default_rng(7).standard_normal(tuple(want.shape))
    (got * gt.tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    assert_close(g_theta.grad, t_theta.grad)


def test_affine_grid_float32_and_gradcheck(device) -> None:
    theta = np.array([[[0.9, -0.3, 0.1], [0.2, 1.1, -0.4]]])
    want = TF.affine_grid(torch.tensor(theta, dtype=torch.float32), gt.Size([1, 1, 3, 4]),
                          align_corners=False)
    got = F.affine_grid(gt.tensor(theta, dtype=gt.float32, device=device),
                        gt.Size([1, 1, 3, 4]), align_corners=False)
    assert_close(got, want)
    t = gt.tensor(theta, device=device, requires_grad=True)
    assert gradcheck(lambda t: F.affine_grid(t, [1, 2, 3, 4], align_corners=True), (t,))


@pytest.mark.parametrize("mode", MODES)
def test_spatial_transformer_pipeline(device, mode) -> None:
    """affine_grid into grid_sample, as a spatial transformer uses them: gradients reach
    theta and the input, including grid points exactly on the +-1 edges (align_corners)."""
    rng = np.random.default_rng(8)
    data = rng.standard_normal((2, 3, 5, 6))
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.8, -0.4, 0.3], [0.5, 1.3, -0.2]]])
    for align_corners in (False, True):
        for padding_mode in PADDINGS:
            gi, ti = _pair(data, device)
            g_theta, t_theta = _pair(theta, device)
            kw = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
            got = F.grid_sample(gi, F.affine_grid(g_theta, (2, 3, 4, 7),
                                                  align_corners=align_corners), **kw)
            want = TF.grid_sample(ti, TF.affine_grid(t_theta, (2, 3, 4, 7),
                                                     align_corners=align_corners), **kw)
            assert_close(got, want)
            w = rng.standard_normal(tuple(want.shape))
            (got * gt.tensor(w, device=device)).sum().backward()
            (want * torch.tensor(w)).sum().backward()
            assert_close(gi.grad, ti.grad)
            assert_close(g_theta.grad, t_theta.grad)


# -- warnings and errors ------------------------------------------------------------------------
def _warnings_of(call: Callable) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_warnings_match_pytorch(device) -> None:
    theta = np.eye(2, 3)[None]
    pairs = [
        (lambda: F.affine_grid(gt.tensor(theta, device=device), (1, 1, 2, 3)),
         lambda: TF.affine_grid(torch.tensor(theta), (1, 1, 2, 3))),
        (lambda: F.affine_grid(gt.tensor(theta, device=device), (1, 1, 1, 3), True),
         lambda: TF.affine_grid(torch.tensor(theta), (1, 1, 1, 3), True)),
        (lambda: F.grid_sample(gt.ones(1, 1, 2, 2, device=device),
                               gt.zeros(1, 1, 1, 2, device=device)),
         lambda: TF.grid_sample(torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 1, 2))),
    ]
    for g_call, t_call in pairs:
        got, want = _warnings_of(g_call), _warnings_of(t_call)
        assert got == want and len(want) == 1
    assert _warnings_of(lambda: F.grid_sample(gt.ones(1, 1, 2, 2, device=device),
                                              gt.zeros(1, 1, 1, 2, device=device),
                                              align_corners=False)) == []




GRID_SAMPLE_ERRORS = [
    ((1, 1, 2, 2), (1, 2, 2, 3), {}),  # last dim
    ((1, 1, 2, 2), (2, 2, 2, 2), {}),  # batch
    ((1, 1, 0, 2), (1, 2, 2, 2), {}),  # empty spatial dim
    ((1, 1, 2, 2, 2), (1, 2, 2, 3), {}),  # 5-D input, 4-D grid
    ((1, 1, 2, 2), (1, 2, 2, 2, 2), {}),
    ((1, 1, 2), (1, 2, 1), {}),  # 3-D input
    ((1, 1, 2, 2, 2), (1, 2, 2, 2, 3), {"mode": "bicubic"}),
    ((1, 1, 2, 2), (1, 2, 2, 2), {"mode": "bilinar"}),
    ((1, 1, 2, 2), (1, 2, 2, 2), {"padding_mode": "edge"}),
]


@pytest.mark.parametrize("in_shape,grid_shape,kw", GRID_SAMPLE_ERRORS)
def test_grid_sample_errors(device, in_shape, grid_shape, kw) -> None:
    kw = {"align_corners": False} | kw
    assert_same_error(lambda: F.grid_sample(gt.ones(in_shape, device=device),
                                      gt.zeros(grid_shape, device=device), **kw),
                lambda: TF.grid_sample(torch.ones(in_shape), torch.zeros(grid_shape), **kw))


@pytest.mark.parametrize("in_dt,grid_dt", [("float32", "float64"), ("float64", "float32")])
def test_grid_sample_dtype_mismatch(device, in_dt, grid_dt) -> None:
    assert_same_error(lambda: F.grid_sample(gt.ones(1, 1, 2, 2, dtype=getattr(gt, in_dt),
                                              device=device),
                                      gt.zeros(1, 2, 2, 2, dtype=getattr(gt, grid_dt),
                                               device=device), align_corners=False),
                lambda: TF.grid_sample(torch.ones(1, 1, 2, 2, dtype=getattr(torch, in_dt)),
                                       torch.zeros(1, 2, 2, 2, dtype=getattr(torch, grid_dt)),
                                       align_corners=False))


def test_grid_sample_dtype_and_device_errors(device) -> None:
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.grid_sample(gt.ones(1, 1, 2, 2, dtype=gt.int64, device=device),
                      gt.zeros(1, 2, 2, 2, dtype=gt.int64, device=device), align_corners=False)
    if device != "cpu":
        with pytest.raises(RuntimeError, match="expected input and grid to be on same device"):
            F.grid_sample(gt.ones(1, 1, 2, 2, device=device), gt.zeros(1, 2, 2, 2),
                          align_corners=False)


AFFINE_ERRORS = [
    ("int64", (1, 2, 3), (1, 1, 2, 3)),
    ("float64", (1, 2, 3), (1, 1, 2)),
    ("float64", (1, 2, 3), (1, 1, 0, 3)),
    ("float64", (1, 2, 3), (0, 1, 2, 3)),
    ("float64", (1, 2, 3), (1, 1, 2, 3, 4)),
    ("float64", (1, 3, 4), (1, 1, 2, 3)),
    ("float64", (2, 2, 3), (1, 1, 2, 3)),
    ("float64", (2, 3), (1, 1, 2, 3)),
]


@pytest.mark.parametrize("dtype,theta_shape,size", AFFINE_ERRORS)
def test_affine_grid_errors(device, dtype, theta_shape, size) -> None:
    assert_same_error(lambda: F.affine_grid(gt.zeros(theta_shape, dtype=getattr(gt, dtype),
                                               device=device), size, align_corners=False),
                lambda: TF.affine_grid(torch.zeros(theta_shape, dtype=getattr(torch, dtype)),
                                       size, align_corners=False))
