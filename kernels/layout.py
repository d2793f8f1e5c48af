"""Layout helpers shared by the backends' kernel launchers."""

from __future__ import annotations

from collections.abc import Sequence


def merge_dims(shape: Sequence[int], strides: Sequence[Sequence[int]], drop_ones: bool = False
               ) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent dims that are contiguous with each other in every operand (``strides``
    holds one stride tuple per operand, in any unit), so loops run over as few dims as possible.

    ``drop_ones`` first removes size-1 dims (their strides never matter); a kernel that takes
    its dims as data can then see zero dims, which a per-ndim generated loop cannot.
    """
    dims = [d for d, n in enumerate(shape) if not (drop_ones and n == 1)]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if out_shape and all(s[d] * shape[d] == os_[-1]
                             for s, os_ in zip(strides, out_strides, strict=True)):
            out_shape[-1] *= shape[d]
            for s, os_ in zip(strides, out_strides, strict=True):
                os_[-1] = s[d]
        else:
            out_shape.append(shape[d])
            for s, os_ in zip(strides, out_strides, strict=True):
                os_.append(s[d])
    return tuple(out_shape), [tuple(s) for s in out_strides]


def broadcast_strides(shape: Sequence[int], tshape: Sequence[int], tstride: Sequence[int]
                      ) -> tuple[int, ...]:
    """Strides (``tstride``'s unit) of an operand of shape ``tshape`` broadcast to ``shape``:
    right-aligned, 0 for the leading dims it lacks and wherever a size-1 dim repeats."""
    lead = len(shape) - len(tshape)
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + d] != 1 else st
                               for d, (n, st) in enumerate(zip(tshape, tstride, strict=True)))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of ``shapes``; a mismatch names the sizes, the dim and the shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        lead = ndim - len(s)
        for i in range(ndim - 1, lead - 1, -1):  # from the right, like PyTorch's infer_size
            n, cur = s[i - lead], out[i]
            if n == cur or n == 1:
                continue
            if cur == 1:
                out[i] = n
                continue
            raise RuntimeError(
                f"The size of tensor a ({cur}) must match the size of tensor b ({n}) at "
                f"non-singleton dimension {i} (broadcasting shapes "
                + " and ".join(str(list(x)) for x in shapes) + ")")
    return tuple(out)


def iteration_order(shape: Sequence[int], operand_strides: Sequence[Sequence[int]]
                    ) -> list[int]:
    """PyTorch's TensorIterator dim order (reorder_dimensions), innermost first: an insertion
    sort of the dims that asks the operands in turn, skipping one where either dim is broadcast
    (stride 0); a smaller stride goes inner, and on equal strides the smaller dim. A new
    elementwise output is laid out densely in this order, so it keeps its inputs' layout."""
    def should_swap(d0: int, d1: int) -> int:
        for st in operand_strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def dense_strides(shape: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """Strides laying ``shape`` out densely with ``order``'s dims innermost first."""
    out = [0] * len(shape)
    step = 1
    for d in order:
        out[d] = step
        step *= max(shape[d], 1)
    return tuple(out)


_DENSE: dict[tuple, bool] = {}


def is_dense(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether (shape, stride) covers a block of memory exactly once with positive strides (a
    permutation of row-major, size-1 dims aside): PyTorch's non-overlapping and dense."""
    key = (shape, stride)
    dense = _DENSE.get(key)
    if dense is None:
        step, dense = 1, True
        for n, st in sorted((p for p in zip(shape, stride, strict=True) if p[0] != 1),
                            key=lambda p: p[1]):
            if st != step:
                dense = False
                break
            step *= n
        if len(_DENSE) > 4096:
            _DENSE.clear()
        _DENSE[key] = dense
    return dense
