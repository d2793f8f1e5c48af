"""narrow_copy, nonzero_static and slice_inverse: torch's functional companions of narrow,
nonzero and slicing."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor import _memory_format as MF
from gputensor._tensor import Tensor, normalize_dim

from ._core import check_out, op


@op()
def narrow_copy(input: Tensor, dim: int, start: Any, length: int, *,
                out: Tensor | None = None) -> Tensor:
    """``input.narrow(dim, start, length)`` copied into new contiguous memory (differentiable
    through the narrow and the copy), with narrow_copy's own checks and their order."""
    if not input.dim():
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if dim >= input.dim():
        raise RuntimeError("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, "
                           "but got false.")
    d = normalize_dim(dim, input.dim())
    size, start = input.shape[d], int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    start += size if start < 0 else 0
    if length < 0 or start > size - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    result = input.narrow(d, start, length).clone(memory_format=MF.contiguous_format)
    if out is None:
        return result
    check_out(out, tuple(result.shape), result.dtype, result.device, "narrow_copy")
    return out.copy_(result)


def _coordinates(flat: Tensor, shape: tuple[int, ...]) -> Tensor:
    """(len(flat), ndim) int64: the index of each flat position of a C-ordered ``shape``."""
    cols = []
    for size in reversed(shape):
        cols.append(flat % size)
        flat = flat.div(size, rounding_mode="floor")
    return gt.stack(cols[::-1], 1)


@op(differentiable=False)
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The first ``size`` rows of ``nonzero(input)``, padded with ``fill_value`` rows when there
    are fewer: a result shape known before the values, so no device read is needed (a cumsum,
    a searchsorted and gathers of coordinates)."""
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"nonzero_static(): argument 'size' must be int, not "
                        f"{type(size).__name__}")
    if isinstance(fill_value, bool) or not isinstance(fill_value, int):
        raise TypeError(f"nonzero_static(): argument 'fill_value' must be int, not "
                        f"{type(fill_value).__name__}")
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    shape, dev = tuple(input.shape), input.device
    n = input.numel()
    if not shape or n == 0 or size == 0:
        # 0-dim input: ndim 0 columns; nothing to index: every row is padding.
        return gt.full((size, len(shape)), fill_value, dtype=D.int64, device=dev)
    # Row r holds the (r + 1)-th nonzero: the first position where the running count of
    # nonzeros reaches r + 1 (n where it never does: a padding row).
    count = (input.reshape(-1) != 0).cumsum(0)
    pos = gt.searchsorted(count, gt.arange(1, size + 1, device=dev))
    coords = _coordinates(pos.clamp(max=n - 1), shape)
    return gt.where((pos < n).unsqueeze(1), coords, fill_value)


def _slice_of(g: Tensor, dim: int, start: Any, end: Any, step: int) -> Tensor:
    index = [slice(None)] * g.dim()
    index[normalize_dim(dim, g.dim())] = slice(start, end, step)
    return g[tuple(index)]


@op(grad={"input": lambda g, dim, start, end, step: _slice_of(g, dim, start, end, step),
          "src": lambda g, input, dim, start, end, step:
              gt.slice_scatter(g, gt.zeros_like(input), dim, start, end, step)},
    jvp="auto_linear")
def slice_inverse(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    """The inverse of slicing ``src`` by ``[start:end:step]`` on ``dim``, for ``input`` such a
    slice: a view of ``input``'s storage with ``src``'s sizes, strides and offset (so
    ``slice_inverse(src[s], src)`` views all of ``src``; ``input``'s storage must hold it)."""
    return input.as_strided(tuple(src.shape), src.stride(), src.storage_offset())
