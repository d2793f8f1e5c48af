"""Sliding blocks (torch.nn.functional's unfold, im2col, and fold, col2im).

Both are one fixed index map between the padded image's flattened positions and the
(kernel offset, block) grid: unfold gathers it with ``index_select`` and fold, its adjoint,
scatters back with ``index_add``, so overlapping blocks sum. The map depends only on sizes,
so it is built once per geometry with NumPy and autograd differentiates the gather and the
scatter (each is the other's gradient) on every device.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

import gputensor as gt
from gputensor._tensor import Tensor

__all__ = ["fold", "unfold"]

_Pair = tuple[int, int]


def _pairs(op_name: str, **args: Any) -> list[_Pair]:
    """Each argument as an (int, int) pair, as PyTorch's _pair and its argument parser: every
    argument's type is checked (naming its position after ``input``) before any length."""
    pairs = []
    for pos, (name, value) in enumerate(args.items(), start=2):
        vals = tuple(value) if isinstance(value, list | tuple) else (value, value)
        for i, v in enumerate(vals):
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise TypeError(f"{op_name}(): argument '{name}' (position {pos}) must be tuple "
                                f"of ints, but found element of type {type(v).__name__} at "
                                f"pos {i}")
        pairs.append(vals)
    for name, vals in zip(args, pairs, strict=True):
        if len(vals) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(vals)}")
    return [(int(a), int(b)) for a, b in pairs]


def _check_positive(kernel: _Pair, dilation: _Pair, padding: _Pair, stride: _Pair,
                    order: tuple[str, ...]) -> None:
    """The geometry checks of PyTorch's im2col/col2im_shape_check, in each one's order."""
    checks = {
        "kernel": (min(kernel) > 0, f"kernel size should be greater than zero, but got "
                                    f"kernel_height: {kernel[0]} kernel_width: {kernel[1]}"),
        "dilation": (min(dilation) > 0, f"dilation should be greater than zero, but got "
                                        f"dilation_height: {dilation[0]} dilation_width: "
                                        f"{dilation[1]}"),
        "padding": (min(padding) >= 0, f"padding should be non-negative, but got pad_height: "
                                       f"{padding[0]} pad_width: {padding[1]}"),
        "stride": (min(stride) > 0, f"stride should be greater than zero, but got "
                                    f"stride_height: {stride[0]} stride_width: {stride[1]}"),
    }
    for name in order:
        ok, message = checks[name]
        if not ok:
            raise RuntimeError(message)


def _blocks(size: _Pair, kernel: _Pair, dilation: _Pair, padding: _Pair,
            stride: _Pair) -> _Pair:
    """Number of block positions per spatial dim (floor division, as div_rtn)."""
    return tuple((size[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                 for i in range(2))  # type: ignore[return-value]


@lru_cache(maxsize=128)
def _block_index(padded: _Pair, kernel: _Pair, dilation: _Pair, stride: _Pair,
                 blocks: _Pair) -> np.ndarray:
    """Flat positions in the padded (Hp, Wp) plane, ordered (ki, kj, block_row, block_col):
    im2col's (C*kh*kw, L) layout within one channel."""
    ki = np.arange(kernel[0])[:, None, None, None] * dilation[0]
    kj = np.arange(kernel[1])[None, :, None, None] * dilation[1]
    bi = np.arange(blocks[0])[None, None, :, None] * stride[0]
    bj = np.arange(blocks[1])[None, None, None, :] * stride[1]
    index = ((ki + bi) * padded[1] + (kj + bj)).reshape(-1).astype(np.int64)
    index.setflags(write=False)
    return index


def _index_tensor(index: np.ndarray, device: Any) -> Tensor:
    return gt.tensor(index, device=device)


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """im2col: (N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L), each column one sliding block."""
    kernel, dil, pad, st = _pairs("im2col", kernel_size=kernel_size, dilation=dilation,
                                  padding=padding, stride=stride)
    _check_positive(kernel, dil, pad, st, ("kernel", "dilation", "padding", "stride"))
    shape = tuple(input.shape)
    if len(shape) < 3:  # PyTorch reads input.size(2) before looking at the rank
        input.size(2)
    if not ((len(shape) == 3 and all(shape)) or (len(shape) == 4 and all(shape[1:]))):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: {list(shape)}")
    batched = len(shape) == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    blocks = _blocks((h, w), kernel, dil, pad, st)
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size={kernel}, "
                           f"dilation={dil}, padding={pad}, calculated shape of the array of "
                           f"sliding blocks as {blocks}, but its components must be at least "
                           f"one.")
    if any(pad):
        x = gt.pad(x, (pad[1], pad[1], pad[0], pad[0]))
    padded = (h + 2 * pad[0], w + 2 * pad[1])
    index = _block_index(padded, kernel, dil, st, blocks)
    cols = x.reshape(n, c, padded[0] * padded[1]).index_select(
        2, _index_tensor(index, x.device))
    out = cols.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return out if batched else out.squeeze(0)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1,
         padding: Any = 0, stride: Any = 1) -> Tensor:
    """col2im: (N, C*kh*kw, L) or (C*kh*kw, L) -> (N, C, H, W), summing where blocks overlap
    (unfold's adjoint, so ``fold(unfold(x))`` is x times each pixel's block count)."""
    size, kernel, dil, pad, st = _pairs("col2im", output_size=output_size,
                                        kernel_size=kernel_size, dilation=dilation,
                                        padding=padding, stride=stride)
    _check_positive(kernel, dil, pad, st, ("kernel", "stride", "dilation", "padding"))
    shape = tuple(input.shape)
    if not ((len(shape) == 2 and all(shape)) or (len(shape) == 3 and all(shape[1:]))):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(shape)}")
    batched = len(shape) == 3
    planes, length = shape[-2:]
    k = kernel[0] * kernel[1]
    if planes % k:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={planes} and "
                           f"kernel_size={kernel}.")
    blocks = _blocks(size, kernel, dil, pad, st)
    geometry = (f"Given output_size={size}, kernel_size={kernel}, dilation={dil}, "
                f"padding={pad}, stride={st}, ")
    if length != blocks[0] * blocks[1]:
        raise RuntimeError(f"{geometry}expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size(2)={length}.")
    if min(blocks) < 1:
        raise RuntimeError(f"{geometry}calculated shape of the array of sliding blocks as "
                           f"{blocks}, which is too small (non-positive)")
    if min(size) < 1:
        raise RuntimeError(f"Expected output spatial size to be positive, but got: "
                           f"output_size={size}.")
    cols = input if batched else input.unsqueeze(0)
    n, c = cols.shape[0], planes // k
    padded = (size[0] + 2 * pad[0], size[1] + 2 * pad[1])
    index = _block_index(padded, kernel, dil, st, blocks)
    plane = gt.zeros((n, c, padded[0] * padded[1]), dtype=input.dtype, device=input.device)
    out = plane.index_add(2, _index_tensor(index, input.device),
                          cols.reshape(n, c, k * length))
    out = out.reshape(n, c, *padded)
    if any(pad):
        out = out[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]].contiguous()
    return out if batched else out.squeeze(0)
