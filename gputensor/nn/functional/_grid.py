"""Spatial transformer sampling: affine_grid and grid_sample (torch.nn.functional's).

Both are composites of differentiable ops that every backend runs, so autograd gives the
gradients of the input, the grid and theta. grid_sample turns each grid coordinate into a
source position per spatial dim (PyTorch's unnormalize, then clipping or reflection for the
padding mode), picks the taps around it (1 for nearest, 2 for linear, 4 for cubic per dim) with
their weights, gathers every tap of every output point with one ``gather`` over the flattened
spatial dims and sums the weighted taps. Tap positions are integers (no gradient); the
weights carry the grid's gradient, and the gather's backward scatters into the input. A tap
outside the input (zeros padding) gets weight 0 and reads a clamped, valid position.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Callable, Sequence

import gputensor as gt
from gputensor._tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # PyTorch's bicubic convolution constant

_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details.")


def _align(align_corners: bool | None) -> bool:
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


# -- affine_grid --------------------------------------------------------------------------------
def _base_coords(steps: int, align_corners: bool, like: Tensor) -> Tensor:
    """The normalised coordinates of ``steps`` pixel centres (corners with align_corners)."""
    if steps <= 1:
        return gt.zeros(steps, dtype=like.dtype, device=like.device)
    coords = gt.linspace(-1, 1, steps, dtype=like.dtype, device=like.device)
    return coords if align_corners else coords * (steps - 1) / steps


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None
                ) -> Tensor:
    """The sampling grid (N, H, W, 2) or (N, D, H, W, 3) of the affine maps ``theta``
    (N, 2, 3) or (N, 3, 4) for an output of ``size`` (N, C, H, W) or (N, C, D, H, W)."""
    align_corners = _align(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(operator.index(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    k = len(size) - 2
    if theta.dim() != 3 or tuple(theta.shape[-2:]) != (k, k + 1):
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for "
                         f"size {size}. Got {theta.shape}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids "
                      "when align_corners=True. This is not an intended use case of affine_grid. "
                      "See the documentation of affine_grid for details.", UserWarning,
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{size[0]}, {k + 1}] but got: [{theta.shape[0]}, {k + 1}].")
    # Homogeneous coordinates (x, y[, z], 1) of every output point, x along the last dim.
    axes = [_base_coords(n, align_corners, theta) for n in reversed(spatial)]
    mesh = gt.meshgrid(*axes[::-1], indexing="ij")  # (z,) y, x; each of the spatial shape
    ones = gt.ones(spatial, dtype=theta.dtype, device=theta.device)
    base = gt.stack([*mesh[::-1], ones], -1).reshape(-1, k + 1)
    grid = gt.matmul(base, theta.transpose(1, 2))  # (N, points, k)
    return grid.reshape(size[0], *spatial, k)


# -- source positions ---------------------------------------------------------------------------
def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    """Grid value in [-1, 1] -> pixel position (PyTorch's grid_sampler_unnormalize)."""
    if align_corners:
        return ((coord + 1) / 2) * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip(x: Tensor, size: int, nan_high: bool) -> Tensor:
    """x clamped to [0, size - 1] with gradient 1 only strictly inside (PyTorch counts the
    borders as out of bounds for the gradient). A NaN goes where PyTorch's kernels send it:
    to 0 in 2-D, to size - 1 in 3-D (``nan_high``)."""
    hi = float(size - 1)
    if nan_high:
        return gt.where(x < hi, gt.where(x > 0, x, 0.0), hi)
    return gt.where(x > 0, gt.where(x < hi, x, hi), 0.0)


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """x reflected into [twice_low / 2, twice_high / 2] about its ends, repeatedly."""
    if twice_low == twice_high:  # a single aligned pixel: every position maps onto it
        return gt.where(gt.zeros_like(x, dtype=gt.bool), x, 0.0)  # 0, still linked to x
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = x - low
    dist = gt.where(shifted < 0, -shifted, shifted)  # |shifted|, gradient -1/1 (1 at 0)
    extra = gt.fmod(dist, span)
    flips = (dist.detach() / span).floor()
    odd = gt.fmod(flips, 2) != 0
    return gt.where(odd, (span - extra) + low, extra + low)


def _pad(x: Tensor, size: int, padding_mode: str, align_corners: bool, nan_high: bool
         ) -> Tensor:
    """PyTorch's compute_coordinates: positions outside the input per the padding mode."""
    if padding_mode == "border":
        return _clip(x, size, nan_high)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return _clip(x, size, nan_high)
    return x


# -- taps ---------------------------------------------------------------------------------------
# Per spatial dim, the taps of every output point: (positions (N, T, P) as floats, weights
# (N, T, P)). Positions may lie outside the input (zeros padding); _sample masks them.
# ``pad`` is _pad bound to the dim's size and the call's flags.
Taps = tuple[Tensor, Tensor]
Pad = Callable[[Tensor], Tensor]


def _nearest_taps(x: Tensor, pad: Pad) -> Taps:
    pos = pad(x).detach().round()  # half to even
    return pos.unsqueeze(1), gt.ones_like(pos).unsqueeze(1)


def _linear_taps(x: Tensor, pad: Pad) -> Taps:
    x = pad(x)
    lo = x.detach().floor()
    hi = lo + 1
    return gt.stack([lo, hi], 1), gt.stack([hi - x, x - lo], 1)


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for a fraction t."""
    a = _CUBIC_A

    def near(s: Tensor) -> Tensor:  # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s: Tensor) -> Tensor:  # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _cubic_taps(x: Tensor, pad: Pad) -> Taps:
    # The fraction comes from the unpadded position; padding moves each tap on its own.
    lo = x.detach().floor()
    weights = _cubic_weights(x - lo)
    with gt.no_grad():
        pos = [pad(lo + (j - 1)) for j in range(4)]
    return gt.stack(pos, 1).trunc(), gt.stack(weights, 1)


_TAPS: dict[str, Callable[[Tensor, Pad], Taps]] = {
    "nearest": _nearest_taps, "bilinear": _linear_taps, "bicubic": _cubic_taps}


def _sample(input: Tensor, taps: list[Taps]) -> Tensor:
    """Sum over every combination of one tap per dim of weight * input value, as (N, C, P).
    ``taps`` is in the input's spatial order; a tap outside the input weighs 0."""
    n, c, *sizes = input.shape
    flat_index = weight = None
    stride = 1
    for d in reversed(range(len(sizes))):
        pos, w = taps[d]
        with gt.no_grad():
            inside = (pos >= 0) & (pos <= sizes[d] - 1)  # False for NaN
            index = gt.where(inside, pos, 0.0).to(gt.int64) * stride
        w = gt.where(inside, w, 0.0)  # weight and its gradient 0 outside
        # The dims' taps combine by broadcasting: (N, T_0, 1, P) with (N, 1, T_1, P), ...
        shape = [n] + [pos.shape[1] if e == d else 1 for e in range(len(sizes))] + [pos.shape[2]]
        index, w = index.reshape(shape), w.reshape(shape)
        flat_index = index if flat_index is None else flat_index + index
        weight = w if weight is None else weight * w
        stride *= sizes[d]
    points = flat_index.shape[-1]
    taps_count = math.prod(flat_index.shape[1:-1])
    index = flat_index.reshape(n, 1, taps_count * points)
    values = input.reshape(n, c, stride).gather(2, index.expand(n, c, taps_count * points))
    values = values.reshape(n, c, taps_count, points)
    return (values * weight.reshape(n, 1, taps_count, points)).sum(2)


# -- grid_sample --------------------------------------------------------------------------------
def _check(input: Tensor, grid: Tensor, mode: str) -> None:
    """PyTorch's grid_sampler checks, in its order and words."""
    if input.device != grid.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but "
                           f"input is on {input.device} and grid is on {grid.device}")
    sizes, grid_sizes = list(input.shape), list(grid.shape)
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {sizes} and grid with sizes {grid_sizes}")
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {grid_sizes}")
    for i in range(2, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial "
                               f"dimensions, but input has sizes {sizes} with dimension {i} "
                               f"being empty")
    nd = 4 if input.dim() == 4 else 5
    if input.dim() != nd or grid.dim() != nd:
        raise RuntimeError(f"grid_sampler(): expected {nd}D input and grid with same number of "
                           f"dimensions, but got input with sizes {sizes} and grid with sizes "
                           f"{grid_sizes}")
    if nd == 5 and mode == "bicubic":
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.is_floating_point():
        raise NotImplementedError(f'"grid_sampler_{nd - 2}d_{input.device.type}_kernel_impl" '
                                  f"not implemented for '{input.dtype.legacy_name}'")
    if grid.dtype is not input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.legacy_name} but found "
                           f"{grid.dtype.legacy_name}")


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample ``input`` (N, C, H, W) or (N, C, D, H, W) at the normalised positions ``grid``
    (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3), (x, y[, z]) in [-1, 1] per point."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    align_corners = _align(align_corners)
    _check(input, grid, mode)
    dtype = input.dtype
    if dtype.itemsize == 2:  # half types compute in float32, rounded once at the end
        input, grid = input.float(), grid.float()
    n, c, *sizes = input.shape
    out_sizes = tuple(grid.shape[1:-1])
    coords = grid.reshape(n, math.prod(out_sizes), len(sizes))
    make_taps = _TAPS[mode]
    taps, finite = [], None
    for d, size in enumerate(sizes):  # grid component 0 (x) runs along the last dim
        x = _unnormalize(coords[..., len(sizes) - 1 - d], size, align_corners)
        pad = functools.partial(_pad, size=size, padding_mode=padding_mode,
                                align_corners=align_corners, nan_high=len(sizes) == 3)
        taps.append(make_taps(x, pad))
        if padding_mode == "zeros" and mode != "nearest" and len(sizes) == 2:
            finite = x.isfinite() if finite is None else finite & x.isfinite()
    out = _sample(input, taps)
    if finite is not None:
        # A NaN or infinite position has no taps (weight 0) but samples NaN, as in PyTorch's
        # 2-D kernels (its 3-D kernel gives 0 there, as this does without the term).
        out = out + gt.where(finite, 0.0, float("nan")).unsqueeze(1)
    if mode == "nearest" and grid.requires_grad and gt.is_grad_enabled():
        # PyTorch gives the grid a zero gradient (not none): add a zero that depends on it.
        out = out + gt.where(gt.zeros((), dtype=gt.bool, device=grid.device), grid.sum(), 0.0)
    return out.reshape(n, c, *out_sizes).to(dtype)
