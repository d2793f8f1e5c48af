"""Power-average pooling and max unpooling (torch.nn.functional's lp_pool1d/2d/3d and
max_unpool1d/2d/3d), composed of the pools, elementwise ops and a scatter, so gradients and both
devices follow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from ._pooling import avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d, max_pool2d, max_pool3d

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d"]


def _tuple(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, Sequence) else (v,) * n


def _lp(input: Tensor, norm_type: float, window: int, pooled: Tensor) -> Tensor:
    # sign(out) * relu(|out|): PyTorch's guard, so a window of zeros has a zero gradient
    return (gt.sign(pooled) * gt.relu(gt.abs(pooled))).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride: int | None = None,
              ceil_mode: bool = False) -> Tensor:
    """The ``norm_type``-power average over windows of (N, C, L) input, times the window size,
    to the power 1/``norm_type`` (inf: max of |x|)."""
    if norm_type == float("inf"):
        return max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp(input, norm_type, kernel_size, out)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``lp_pool1d`` over the two spatial dims of (N, C, H, W) input."""
    kw, kh = _tuple(kernel_size, 2)
    if norm_type == float("inf"):
        return max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp(input, norm_type, kw * kh, out)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``lp_pool1d`` over the three spatial dims of (N, C, D, H, W) input."""
    kd, kh, kw = _tuple(kernel_size, 3)
    if norm_type == float("inf"):
        return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp(input, norm_type, kd * kh * kw, out)


def _unpool_size(input: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...], output_size: Any) -> list[int]:
    default = [(input.shape[-len(kernel) + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(len(kernel))]
    if output_size is None:
        out = default
    else:
        out = list(output_size)
        if len(out) == len(kernel) + 2:
            out = out[2:]
        if len(out) != len(kernel):
            raise ValueError(f"output_size should be a sequence containing {len(kernel)} or "
                             f"{len(kernel) + 2} elements, but it has a length of '{len(out)}'")
        for d in range(len(kernel)):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < out[d] < hi:
                raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be '
                                 f'between {lo} and {hi})')
    for d, n in enumerate(out):
        if n < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={n}")
    return out


def _unpool(input: Tensor, indices: Tensor, size: list[int]) -> Tensor:
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    spatial = len(size)
    lead = tuple(input.shape[:-spatial])
    total = 1
    for n in size:
        total *= n
    flat_in = input.reshape(*lead, -1)
    flat_idx = indices.reshape(*lead, -1)
    if flat_idx.numel() and bool(((flat_idx < 0) | (flat_idx >= total)).any()):
        raise RuntimeError(f"Found an invalid max index: "
                           f"{int(flat_idx.max())} (output volumes are of size "
                           f"{'x'.join(map(str, size))}")
    out = gt.zeros(*lead, total, dtype=input.dtype, device=input.device)
    return out.scatter(-1, flat_idx, flat_in).reshape(*lead, *size)


def _max_unpool(input: Tensor, indices: Tensor, n: int, kernel_size: Any, stride: Any,
                padding: Any, output_size: Any) -> Tensor:
    """max_unpool{n}d: the output size from the n-d geometry (stride defaults to the kernel)."""
    k = _tuple(kernel_size, n)
    s = _tuple(stride, n) if stride is not None else k
    return _unpool(input, indices, _unpool_size(input, k, s, _tuple(padding, n), output_size))


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """MaxPool1d's partial inverse: each value back at its max's position, zeros elsewhere."""
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """MaxPool2d's partial inverse: each value back at its max's position, zeros elsewhere."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Tensor:
    """MaxPool3d's partial inverse: each value back at its max's position, zeros elsewhere."""
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size)
