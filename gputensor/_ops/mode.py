"""torch.mode: the most frequent value along a dim and an index of it.

PyTorch's CPU kernel sorts each row's (value, index) pairs by value with std::sort and scans
the runs: the mode is the smallest of the most frequent values, and its index is the one that
ends that value's run after the sort. std::sort is not stable, so that index is an accident of
libstdc++'s introsort (beyond 16 elements; below, an insertion sort leaves the last
occurrence); the "mode" kernel (kernels/cpu/mode.py, kernels/cuda/mode.cu) replays that sort
exactly, so both devices report PyTorch's index. NaNs never compare equal: each is its own
run (and std::sort's order around them is as arbitrary as PyTorch's).
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor, normalize_dim

from ._core import empty, kernel, op
from .shape import _alloc, _written
from .sort import _pair_out


@op(grad={"input": "_gather_backward(unsqueeze_like(g, input_shape, dim, keepdim), "
                   "input_shape, dim, unsqueeze_like(out1, input_shape, dim, keepdim))"},
    output_differentiable=(True, False),
    jvp="select_jvp(input, input_t, dim, 0, out, out1, keepdim, False)")
def mode(input: Tensor, dim: int = -1, keepdim: bool = False, *,
         out: Any = None) -> return_types.mode:
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and
    an index of it (PyTorch's CPU choice, on every device)."""
    d = normalize_dim(dim, input.dim())
    size = input.shape[d] if input.dim() else 1
    if size == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    if input.is_complex() and input.numel() and input.dim():
        # PyTorch checks the reduced dim first and dispatches on dtype only with work to do
        # (a 0-d input is its own mode, for every dtype)
        raise NotImplementedError(f"\"mode_{'cuda' if input.is_cuda else 'cpu'}\" not "
                                  f"implemented for '{input.dtype.legacy_name}'")
    rest = tuple(input.shape[:d]) + tuple(input.shape[d + 1:])  # the other dims, in order
    if not input.dim():
        shape: tuple[int, ...] = ()
    else:
        shape = tuple(input.shape[:d]) + (1,) + tuple(input.shape[d + 1:]) if keepdim else rest
    vo, io = _pair_out(out, "mode")
    values = _alloc(vo, shape, input.dtype, input.device, "mode")
    indices = _alloc(io, shape, D.int64, input.device, "mode")
    if not input.dim():
        values.copy_(input)
        indices.zero_()
    elif input.numel():
        rows = input.movedim(d, -1).reshape(-1, size).contiguous()
        v = empty((rows.shape[0],), input.dtype, input.device)
        i = empty((rows.shape[0],), D.int64, input.device)
        kernel(input, "mode")(v, i, rows)
        values.copy_(v.reshape(shape))  # rows are in the order of the other dims
        indices.copy_(i.reshape(shape))
    _written(values, vo)
    return return_types.mode(values, _written(indices, io))


__all__ = ["mode"]
