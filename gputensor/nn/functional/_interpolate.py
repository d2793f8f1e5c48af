"""Resampling (torch.nn.functional's interpolate and the deprecated upsample* wrappers).

Every mode is separable: resampling one spatial dim at a time is an ``index_select`` of a few
source rows per output row (the "taps"), a multiply by their weights and a sum over the taps.
The indices and weights depend only on sizes, scales and flags, so they are computed on the
host with NumPy (cached) and moved to the input's device; autograd then differentiates the
gather and the weighted sum, and the same code serves every device. The index formulas are
PyTorch's CPU ones (``area_pixel_compute_scale`` / ``area_pixel_compute_source_index``, the
float32 ``floorf`` rounding, A = -0.75 bicubic with clamped borders, and the separable
antialias filters of ``_upsample_*_aa``), evaluated in the same precision (float32 for every
dtype but float64), so indices and weights match PyTorch's bit for bit in ordinary cases.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn.functional._pooling import adaptive_avg_pool1d, adaptive_avg_pool2d

__all__ = ["interpolate", "upsample", "upsample_bilinear", "upsample_nearest"]

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
# mode -> (spatial dims it needs, the filter that resamples each dim, PyTorch's op name)
_FILTERED = {"linear": (1, "linear", "upsample_linear1d"),
             "bilinear": (2, "linear", "upsample_bilinear2d"),
             "trilinear": (3, "linear", "upsample_trilinear3d"),
             "bicubic": (2, "cubic", "upsample_bicubic2d"),
             "lanczos": (2, "lanczos", "_upsample_lanczos2d_aa")}
_NEEDS = {1: "3D", 2: "4D", 3: "5D"}


# -- host-side indices and weights ------------------------------------------------------------
def _area_scale(in_size: int, out_size: int, align_corners: bool, scale: float | None,
                f: type) -> Any:
    """PyTorch's area_pixel_compute_scale: source step per output step, in precision ``f``."""
    if align_corners:
        return f(in_size - 1) / f(out_size - 1) if out_size > 1 else f(0)
    if scale is not None and scale > 0:
        return f(1.0 / scale)
    return f(in_size) / f(out_size)


def _source_index(scale: Any, out_size: int, align_corners: bool, cubic: bool,
                  f: type) -> np.ndarray:
    """PyTorch's area_pixel_compute_source_index for every output position."""
    i = np.arange(out_size, dtype=f)
    if align_corners:
        return scale * i
    src = scale * (i + f(0.5)) - f(0.5)
    return src if cubic else np.maximum(src, f(0))


def _floorf(x: np.ndarray) -> np.ndarray:
    """C's floorf: the argument is rounded to float32 first, whatever its precision."""
    return np.floor(np.asarray(x).astype(np.float32)).astype(np.int64)


def _conv1(x: Any, a: Any) -> Any:
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _conv2(x: Any, a: Any) -> Any:
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _aa_filter(kind: str, x: np.ndarray, f: type) -> np.ndarray:
    x = np.abs(x)
    if kind == "linear":
        return np.where(x < 1, f(1) - x, f(0)).astype(f)
    if kind == "cubic":  # Keys' a = -0.5 with antialias, as Pillow
        a = f(-0.5)
        return np.where(x < 1, _conv1(x, a), np.where(x < 2, _conv2(x, a), f(0))).astype(f)

    def sinc(v: np.ndarray) -> np.ndarray:
        pv = v * f(np.pi)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(v == 0, f(1), np.sin(pv) / pv).astype(f)

    third = (x.astype(np.float64) / 3.0).astype(f)
    return np.where(x < 3, sinc(x) * sinc(third), f(0)).astype(f)


@lru_cache(maxsize=256)
def _taps(kind: str, in_size: int, out_size: int, align_corners: bool, scale: float | None,
          antialias: bool, precision: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(indices, weights), each (out_size, taps): output j = sum_t w[j, t] * input[idx[j, t]].

    Weights are None for the nearest modes (one tap of weight 1)."""
    f = np.dtype(precision).type
    if kind == "area":  # adaptive average pooling: window [floor(j*I/O), ceil((j+1)*I/O))
        j = np.arange(out_size, dtype=np.int64)
        start = j * in_size // out_size
        end = ((j + 1) * in_size + out_size - 1) // out_size
        width = int((end - start).max()) if out_size else 1
        t = np.arange(width)
        idx = np.minimum(start[:, None] + t, in_size - 1)
        w = np.where(t < (end - start)[:, None], 1.0 / (end - start)[:, None], 0.0)
        return _frozen(idx, w.astype(f))
    if kind == "nearest_idx" and out_size in (in_size, 2 * in_size):
        # PyTorch's nearest_idx (its 2-D nearest forward, every nearest backward) shortcut
        return _frozen((np.arange(out_size) * in_size // out_size)[:, None], None)
    scale = _area_scale(in_size, out_size, align_corners, scale, f)
    if kind in ("nearest", "nearest_idx"):  # floor(j * scale): OpenCV's INTER_NEAREST
        src = _floorf(_source_index(scale, out_size, True, False, f))
        return _frozen(np.minimum(src, in_size - 1)[:, None], None)
    if kind == "nearest-exact":  # round((j + 0.5) * scale - 0.5), as Pillow and scipy
        real = _source_index(scale, out_size, False, False, f).astype(np.float64) + 0.5
        return _frozen(np.minimum(_floorf(real), in_size - 1)[:, None], None)
    if antialias:
        return _frozen(*_aa_taps(kind, in_size, out_size, scale, f))
    real = _source_index(scale, out_size, align_corners, kind == "cubic", f)
    base = np.minimum(_floorf(real), in_size - 1)  # guard_index_and_lambda
    lam = np.clip(real - base.astype(f), f(0), f(1)).astype(f)
    if kind == "linear":
        upper = base + (base < in_size - 1)
        return _frozen(np.stack([base, upper], 1), np.stack([f(1) - lam, lam], 1).astype(f))
    a = f(-0.75)  # bicubic: OpenCV's constant, borders clamped
    rest = (f(1) - lam).astype(f)
    w = np.stack([_conv2((lam + f(1)).astype(f), a), _conv1(lam, a), _conv1(rest, a),
                  _conv2((rest + f(1)).astype(f), a)], 1).astype(f)
    idx = np.clip(base[:, None] + np.arange(-1, 3), 0, in_size - 1)
    return _frozen(idx, w)


def _aa_taps(kind: str, in_size: int, out_size: int, scale: Any,
             f: type) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's _compute_indices_min_size_weights_aa: the filter widened by the downscale
    factor, normalised to sum to one over the in-range taps."""
    interp = {"linear": 2, "cubic": 4, "lanczos": 6}[kind]
    s64 = float(scale)
    support = f(interp * 0.5 * s64) if s64 >= 1.0 else f(interp * 0.5)
    size = int(math.ceil(support)) * 2 + 1
    center = (s64 * (np.arange(out_size) + 0.5)).astype(f)
    invscale = f(1.0 / s64) if s64 >= 1.0 else f(1.0)
    xmin = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5).astype(np.int64), 0)
    xmax = np.trunc((center + support).astype(np.float64) + 0.5).astype(np.int64)
    xsize = np.clip(np.minimum(xmax, in_size) - xmin, 0, size)
    t = np.arange(size)
    offset = ((xmin[:, None] + t).astype(f) - center[:, None]).astype(np.float64)
    w = _aa_filter(kind, ((offset + 0.5) * float(invscale)).astype(f), f)
    w = np.where(t < xsize[:, None], w, f(0)).astype(f)
    total = np.zeros(out_size, dtype=f)
    for k in range(size):  # the sequential float sum of the C++ loop
        total = (total + w[:, k]).astype(f)
    safe = np.where(total != 0, total, f(1)).astype(f)
    w = (w / safe[:, None]).astype(f)
    return np.minimum(xmin[:, None] + t, in_size - 1), w


def _frozen(idx: np.ndarray, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    idx.setflags(write=False)
    if w is not None:
        w = np.ascontiguousarray(w)
        w.setflags(write=False)
    return idx, w


# -- the device-side pass -------------------------------------------------------------------
def _resample_dim(x: Tensor, dim: int, idx: np.ndarray, w: np.ndarray | None) -> Tensor:
    """Gather each output row's taps along ``dim`` and take their weighted sum."""
    out_size, taps = idx.shape
    picked = x.index_select(dim, gt.tensor(idx.reshape(-1), device=x.device))
    if w is None:
        return picked
    shape = tuple(x.shape)
    picked = picked.reshape(*shape[:dim], out_size, taps, *shape[dim + 1:])
    weights = gt.tensor(w, dtype=x.dtype, device=x.device)
    return (picked * weights.reshape(out_size, taps, *([1] * (x.dim() - dim - 1)))).sum(dim + 1)


def _separable(input: Tensor, kind: str, out_size: Sequence[int],
               scales: Sequence[float | None], align_corners: bool, antialias: bool) -> Tensor:
    """Resample each spatial dim in turn, the last one first (as PyTorch's separable path).

    float16/bfloat16 compute in float32, as PyTorch's opmath does."""
    low = input.dtype in (gt.float16, gt.bfloat16) and kind not in ("nearest", "nearest-exact")
    x = input.float() if low else input
    precision = "float64" if input.dtype is gt.float64 else "float32"
    n = len(out_size)
    if kind == "nearest" and n == 2:  # PyTorch's 2-D kernel copies or halves exactly
        kind = "nearest_idx"
    for k in reversed(range(n)):
        dim = x.dim() - n + k
        size_in, size_out = x.shape[dim], out_size[k]
        # linear (and every antialiased filter) copies a dim whose size doesn't change
        if size_in == size_out and (kind == "linear" or antialias):
            continue
        idx, w = _taps(kind, size_in, size_out, align_corners, scales[k], antialias, precision)
        x = _resample_dim(x, dim, idx, w)
    if x is input:
        x = input.clone()
    return x.to(input.dtype) if low else x


# -- argument handling ------------------------------------------------------------------------
def _is_integer(x: Any) -> bool:
    if isinstance(x, float):
        return False
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def _check_sizes(input: Tensor, out_size: Sequence[int]) -> None:
    """PyTorch's upsample_{1,2,3}d_common_check and its non-empty check."""
    spatial = tuple(input.shape[2:])
    if any(n <= 0 for n in (*spatial, *out_size)):
        names = ("D", "H", "W")[3 - len(spatial):]
        src = ", ".join(f"{a}: {b}" for a, b in zip(names, spatial, strict=True))
        dst = ", ".join(f"{a}: {b}" for a, b in zip(names, out_size, strict=True))
        sep = " and" if len(spatial) == 1 else ""
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({src}){sep} output ({dst})")
    if input.shape[1] == 0:
        raise RuntimeError(f"Non-empty {input.dim()}D data tensor expected but got a tensor "
                           f"with sizes {list(input.shape)}")


def _check_float(input: Tensor, op_name: str) -> None:
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{op_name}\" not implemented for "
                                  f"'{input.dtype.legacy_name}'")


def _area(input: Tensor, out_size: Sequence[int]) -> Tensor:
    """'area' is adaptive average pooling to the output size."""
    if input.dim() == 3:
        return adaptive_avg_pool1d(input, out_size[0])
    if input.dim() == 4:
        return adaptive_avg_pool2d(input, tuple(out_size))
    empty = [d for d in range(1, 5) if input.shape[d] == 0]
    if empty:
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected input to have non-zero size for "
                           f"non-batch dimensions, but input has sizes {list(input.shape)} with "
                           f"dimension {empty[0]} being empty")
    if any(n < 0 for n in out_size):
        raise RuntimeError(f"adaptive_avg_pool3d: elements of output_size must be greater than "
                           f"or equal to 0 but received {list(out_size)}")
    _check_float(input, "adaptive_avg_pool3d_cpu")
    return _separable(input, "area", out_size, (None,) * 3, False, False)


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resample the spatial dims of (N, C, *spatial) to ``size`` or by ``scale_factor``.

    Modes: nearest, nearest-exact (3-5D), linear (3D), bilinear / bicubic (4D), trilinear (5D),
    area (3-5D, adaptive average pooling) and lanczos (4D, antialias only); ``antialias``
    widens the bilinear / bicubic / lanczos filters when downsampling, as PIL does. Argument
    checks and their errors are torch.nn.functional.interpolate's."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    spatial = list(input.shape[2:])
    scales: list[float] | None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scales = None
        if isinstance(size, list | tuple):
            if len(size) != dim:
                raise ValueError(
                    f"Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {spatial} and output size of {size}. "
                    f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and output "
                    f"size in (o1, o2, ...,oK) format.")
            if not all(_is_integer(n) for n in size):
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, "
                                f"int] or Tuple[int, int, int], but got size with types "
                                f"{[type(n) for n in size]}")
            output_size = list(size)
        else:
            output_size = [size] * dim
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, list | tuple):
            if len(scale_factor) != dim:
                raise ValueError(
                    f"Input and scale_factor must have the same number of spatial dimensions, "
                    f"but got input with spatial dimensions of {spatial} and scale_factor of "
                    f"shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,"
                    f"dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:  # the output size from the scales, then the scales forgotten
        output_size = [_scaled(n, s) for n, s in zip(spatial, scales, strict=True)]
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    if mode == "lanczos" and input.dim() == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    unsupported = NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors "
                                      f"supported (got {input.dim()}D) for the modes: {_MODES} "
                                      f"(got {mode})")
    if not 1 <= dim <= 3 or mode not in (*_FILTERED, "nearest", "nearest-exact", "area"):
        raise unsupported
    if mode in _FILTERED and _FILTERED[mode][0] != dim:
        if mode in ("bicubic", "lanczos"):  # PyTorch names the right rank for the others
            raise unsupported
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{_NEEDS[_FILTERED[mode][0]]} input")
    if output_size is None:
        output_size = [_scaled(n, s) for n, s in zip(spatial, scales, strict=True)]
    output_size = [_int_size(n) for n in output_size]
    if mode == "area":
        return _area(input, output_size)
    _check_sizes(input, output_size)
    all_scales = scales if scales is not None else [None] * dim
    if mode in ("nearest", "nearest-exact"):
        return _separable(input, mode, output_size, all_scales, False, False)
    kind = _FILTERED[mode][1]
    op_name = _FILTERED[mode][2]
    if antialias and kind != "lanczos":
        op_name = f"_{op_name}_aa"
    _check_float(input, op_name)
    return _separable(input, kind, output_size, all_scales, bool(align_corners), antialias)


def _scaled(n: int, s: float) -> int:
    """floor(n * s) as PyTorch's compute_output_size (a checked float -> int64 conversion)."""
    v = n * s
    if not math.isfinite(v) or abs(v) >= 2.0 ** 63:
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return int(v)


def _int_size(n: Any) -> int:
    if not _is_integer(n):
        raise TypeError(f"interpolate(): size must be an int or a tuple of ints, but got "
                        f"{type(n).__name__}")
    return operator.index(n)


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None,
             mode: str = "nearest", align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`interpolate` (kept because PyTorch keeps it)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='nearest')``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
