"""Fractional max pooling (torch.nn.functional's fractional_max_pool2d/3d).

Each (sample, channel) plane gets its own pseudo-random window starts from PyTorch's interval
formula ``int((i + u) * alpha) - int(u * alpha)`` (the last window ends at the input's edge),
evaluated with one elementwise op per step in the input's dtype so every rounding matches
PyTorch's CPU kernel and equal ``_random_samples`` give equal results. The windows are then
gathered, the first maximum of each (the last NaN, if any) is picked and the output gathered
from the input at that flat index, so autograd (a scatter-add into the input, as PyTorch's
backward) and both devices follow from the gather.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import gputensor as gt
from gputensor._tensor import Tensor

from ._overrides import boolean_dispatch

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]

_FLOATING = (gt.float16, gt.bfloat16, gt.float32, gt.float64)
# PyTorch's names for the spatial dims in its "pool ... too large" message
_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}


def _sizes(value: Any, n: int, op: str, what: str) -> tuple[int, ...]:
    values = tuple(value) if isinstance(value, Sequence) else (value,) * n
    if len(values) != n:
        tail = "tuple of Ints" if n == 2 else "tuple of three Ints"
        raise RuntimeError(f"{op}: {what} must either be a single Int or {tail}")
    return tuple(int(v) for v in values)


def _output_size(input: Tensor, n: int, output_size: Any, output_ratio: Any,
                 op: str) -> Any:
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is not None:
        return output_size
    if n == 2 and len(output_ratio) > 2:
        raise ValueError(f"{op} requires output_ratio to either be a single Int or tuple of "
                         f"Ints.")
    ratio = tuple(output_ratio) if isinstance(output_ratio, Sequence) else (output_ratio,) * n
    if len(ratio) < n:  # PyTorch indexes the ratio per dim
        raise IndexError("tuple index out of range")
    return [int(input.size(d - n) * r) for d, r in enumerate(ratio[:n])]


def _check(input: Tensor, n: int, pool: tuple[int, ...], out: tuple[int, ...],
           samples: Tensor) -> None:
    op = "fractional_max_pool2d()" if n == 2 else "fractional_max_pool3d_out()"
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"{op}: Expected {n + 1}D or {n + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    for d in range(1 if input.dim() == n + 2 else 0, input.dim()):
        if input.size(d) == 0:
            raise RuntimeError(f"{op}: Expected input to have non-zero size for non-batch "
                               f"dimensions, but got{list(input.shape)} with dimension {d} "
                               f"being empty.")
    spatial = input.shape[-n:]
    for name, k, o, size in zip(_DIM_NAMES[n], pool, out, spatial, strict=True):
        # 3-D windows must leave room (strict), 2-D ones may reach the edge: PyTorch's checks
        fits = o + k - 1 <= size if n == 2 else o + k - 1 < size
        if not fits:
            raise RuntimeError(f"{op}: pool {name} {k} too large relative to input {name} "
                               f"{size}")
    if samples.dim() != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.dim()}")
    batch = input.size(0) if input.dim() == n + 2 else 1
    if samples.size(0) < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.size(1) != input.size(-n - 1):
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.size(2) != n:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {n}; got "
                           f"{samples.size(2)}.")
    if samples.dtype != input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if input.dtype not in _FLOATING:
        frame = f"fractional_max_pool{n}d_out_frame"
        raise NotImplementedError(f'"{frame}" not implemented for '
                                  f"'{input.dtype.legacy_name}'")


def _starts(u: Tensor, size: int, out: int, pool: int) -> Tensor:
    """Window starts (N, C, out) int64 for per-plane samples ``u`` (N, C)."""
    last = gt.full((*u.shape, 1), size - pool, dtype=gt.int64, device=u.device)
    if out <= 1:
        return last[..., :out]
    # alpha in the samples' dtype, as PyTorch's scalar_t division
    np_dtype = np.float64 if u.dtype == gt.float64 else np.float32
    alpha = float(np_dtype(size - pool) / np_dtype(out - 1))
    alpha = float(gt.tensor(alpha, dtype=u.dtype).item())
    steps = gt.arange(out - 1, dtype=u.dtype, device=u.device)
    shifted = (steps + u.unsqueeze(-1)) * alpha
    offset = (u * alpha).to(gt.int64).unsqueeze(-1)
    return gt.cat([shifted.to(gt.int64) - offset, last.expand(*u.shape, 1)], dim=-1)


def _fractional(input: Tensor, n: int, kernel_size: Any, output_size: Any,
                output_ratio: Any, samples: Tensor | None) -> tuple[Tensor, Tensor]:
    op = f"fractional_max_pool{n}d"
    pool = _sizes(kernel_size, n, op, "kernel_size")
    out = _sizes(_output_size(input, n, output_size, output_ratio, op), n, op, "output_size")
    for o in out:
        if o < 0:
            shape = [*input.shape[:-n], *out]
            raise RuntimeError(f"Trying to create tensor with negative dimension {o}: {shape}")
    if samples is None:
        # drawn from gputensor's default generator, as PyTorch draws torch.rand
        batch = 1 if input.dim() == n + 1 else input.size(0)
        samples = gt.rand(batch, input.size(-n - 1), n, dtype=input.dtype,
                          device=input.device)
    _check(input, n, pool, out, samples)
    unbatched = input.dim() == n + 1
    x = input.unsqueeze(0) if unbatched else input
    batch, channels, spatial = x.size(0), x.size(1), tuple(x.shape[2:])
    samples = samples.detach()[:batch]
    # PyTorch's sample columns: 2-D uses (w, h) order, 3-D (t, h, w)
    columns = (1, 0) if n == 2 else (0, 1, 2)
    strides = [int(np.prod(spatial[d + 1:], dtype=np.int64)) for d in range(n)]
    # flat plane index of each window's first tap (N, C, *out), then of every tap
    corner = gt.zeros((batch, channels, *[1] * n), dtype=gt.int64, device=x.device)
    offsets = gt.zeros([1] * n, dtype=gt.int64, device=x.device)
    for d in range(n):
        starts = _starts(samples[:, :, columns[d]], spatial[d], out[d], pool[d])
        corner = corner + (starts * strides[d]).reshape(
            batch, channels, *[1] * d, out[d], *[1] * (n - 1 - d))
        offsets = offsets + (gt.arange(pool[d], device=x.device) * strides[d]).reshape(
            *[1] * d, pool[d], *[1] * (n - 1 - d))
    positions = int(np.prod(out, dtype=np.int64))
    window = int(np.prod(pool, dtype=np.int64))
    corner = corner.expand(batch, channels, *out).reshape(batch, channels, positions)
    plane = x.reshape(batch, channels, int(np.prod(spatial, dtype=np.int64)))
    if window == 0:
        # an empty window: PyTorch's kernel leaves -inf at the window's start
        index = corner
        values = gt.full((batch, channels, positions), -float("inf"), dtype=x.dtype,
                         device=x.device)
    else:
        flat = corner.unsqueeze(-1) + offsets.reshape(window)  # (N, C, positions, window)
        taps = plane.detach().gather(2, flat.reshape(batch, channels, positions * window))
        taps = taps.reshape(batch, channels, positions, window)
        best = taps.argmax(dim=-1, keepdim=True)
        # PyTorch's kernel takes the first maximum, but the last NaN of a window
        rank = gt.arange(1, window + 1, device=x.device)
        last_nan = (taps.isnan() * rank).amax(dim=-1, keepdim=True) - 1
        best = gt.where(last_nan >= 0, last_nan, best)
        index = flat.gather(3, best).squeeze(-1)
        values = plane.gather(2, index)
    values = values.reshape(batch, channels, *out)
    index = index.reshape(batch, channels, *out)
    if unbatched:
        values, index = values.squeeze(0), index.squeeze(0)
    return values, index


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None
                                       ) -> tuple[Tensor, Tensor]:
    """2-D fractional max pooling of (N, C, H, W) or (C, H, W) input over ``kernel_size``
    windows at pseudo-random steps reaching ``output_size`` (or ``output_ratio`` times the
    input size); returns the output and the flat (h * W + w) index of each maximum."""
    size = _output_size(input, 2, output_size, output_ratio, "fractional_max_pool2d")
    return _fractional(input, 2, kernel_size, size, None, _random_samples)


def _fractional_max_pool2d(input: Tensor, kernel_size: Any, output_size: Any = None,
                           output_ratio: Any = None, return_indices: bool = False,
                           _random_samples: Tensor | None = None) -> Tensor:
    return fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio,
                                              return_indices, _random_samples)[0]


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None
                                       ) -> tuple[Tensor, Tensor]:
    """3-D fractional max pooling of (N, C, T, H, W) or (C, T, H, W) input; the indices are
    flat (t * H * W + h * W + w) positions in each plane."""
    size = _output_size(input, 3, output_size, output_ratio, "fractional_max_pool3d")
    return _fractional(input, 3, kernel_size, size, None, _random_samples)


def _fractional_max_pool3d(input: Tensor, kernel_size: Any, output_size: Any = None,
                           output_ratio: Any = None, return_indices: bool = False,
                           _random_samples: Tensor | None = None) -> Tensor:
    return fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio,
                                              return_indices, _random_samples)[0]


fractional_max_pool2d = boolean_dispatch(
    arg_name="return_indices", arg_index=4, default=False,
    if_true=fractional_max_pool2d_with_indices, if_false=_fractional_max_pool2d,
    module_name=__name__, func_name="fractional_max_pool2d")

fractional_max_pool3d = boolean_dispatch(
    arg_name="return_indices", arg_index=4, default=False,
    if_true=fractional_max_pool3d_with_indices, if_false=_fractional_max_pool3d,
    module_name=__name__, func_name="fractional_max_pool3d")
