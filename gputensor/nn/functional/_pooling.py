"""Pooling: max/avg pooling in 1-D, 2-D and 3-D and their adaptive forms.

Most are declared in gputensor/_ops/conv.py and volumetric.py (the ops among them are also gt.*);
adaptive_max_pool1d lives here only, since torch.adaptive_max_pool1d has other semantics (it
always returns the indices).
"""

from __future__ import annotations

from typing import Any

from gputensor._ops.conv import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from gputensor._ops.volumetric import (
    adaptive_avg_pool3d,
    adaptive_max_pool3d,
    avg_pool3d,
    max_pool3d,
)
from gputensor._tensor import Tensor

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d",
           "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices",
           "max_pool3d", "max_pool3d_with_indices"]


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None,
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return adaptive_max_pool3d(input, output_size, True)


def _length(output_size: Any) -> int | None:
    if isinstance(output_size, int) or output_size is None:
        return output_size
    vals = tuple(output_size)
    if len(vals) != 1:
        raise RuntimeError(f"output_size must have 1 element for a 1-D pool, got {list(vals)}")
    return vals[0]


def _check_1d(name: str, input: Tensor) -> None:
    if input.dim() not in (2, 3):
        raise RuntimeError(f"{name}(): Expected 2D or 3D tensor, but got {list(input.shape)}")


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of (N, C, L) or (C, L) to ``output_size`` positions."""
    _check_1d("adaptive_max_pool1d", input)
    res = adaptive_max_pool2d(input.unsqueeze(-2), (1, _length(output_size)), return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return adaptive_max_pool1d(input, output_size, True)
