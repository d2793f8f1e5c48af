"""Multi-tensor metadata shared by the backends' foreach kernels (kernels/cpu/amp.py,
kernels/cuda/ops/amp.py): one table describes every tensor of a group, so one kernel launch
covers the whole list, as PyTorch's multi_tensor_apply does.

Each non-empty tensor is one record of ``width`` int64s:
``[address, first, ndim, size_0 .. size_{D-1}, stride_0 .. stride_{D-1}]``, where ``first`` is
where its elements start in the group's concatenation (records sorted by it), sizes and
strides are in elements and D = (width - 3) // 2. A non-overlapping and dense tensor
(contiguous, or a permutation of contiguous) is one dim of stride 1, since an in-place
elementwise kernel may visit its elements in memory order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .layout import merge_dims

OVERLAP_ERROR = ("unsupported operation: more than one element of the written-to tensor refers "
                 "to a single memory location. Please clone() the tensor before performing the "
                 "operation.")


def _dense(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Non-overlapping and dense: the elements fill exactly ``numel`` consecutive slots."""
    expected = 1
    for n, s in sorted(((n, s) for n, s in zip(shape, stride, strict=True) if n != 1),
                       key=lambda ns: ns[1]):
        if s != expected:
            return False
        expected *= n
    return True


def write_table(tensors: Sequence, addresses: Callable[[list], list[int]]
                ) -> tuple[np.ndarray, int, int, int]:
    """``(table, count, width, total)`` for the in-place foreach kernels over ``tensors``;
    ``addresses(nonempty)`` gives the address a kernel dereferences for each tensor's first
    element. Raises PyTorch's error for a tensor whose elements overlap in memory."""
    layouts: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    nonempty = []
    for t in tensors:
        shape, stride = tuple(t._shape), tuple(t._stride)
        if 0 in shape:
            continue
        if any(s == 0 and n > 1 for n, s in zip(shape, stride, strict=True)):
            raise RuntimeError(OVERLAP_ERROR)
        numel = int(np.prod(shape, dtype=np.int64))
        if _dense(shape, stride):
            layouts.append(((numel,), (1,)))
        else:
            dims, (strides,) = merge_dims(shape, [stride], drop_ones=True)
            layouts.append((dims, strides))
        nonempty.append(t)
    dims_max = max((len(d) for d, _ in layouts), default=1)
    width = 3 + 2 * dims_max
    table = np.zeros((len(layouts), width), np.int64)
    first = 0
    for row, addr, (dims, strides) in zip(table, addresses(nonempty), layouts, strict=True):
        nd = len(dims)
        row[0], row[1], row[2] = addr, first, nd
        row[3:3 + nd] = dims
        row[3 + dims_max:3 + dims_max + nd] = strides
        first += int(np.prod(dims, dtype=np.int64))
    return table, len(layouts), width, first
