"""gt.Size: a tuple of ints, like torch.Size."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence


class Size(tuple):
    __slots__ = ()

    def __new__(cls, sizes: tuple | list = ()) -> Size:
        return super().__new__(cls, (int(s) for s in sizes))

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"gputensor.Size([{', '.join(str(s) for s in self)}])"

    def __getitem__(self, item):
        out = super().__getitem__(item)
        return Size(out) if isinstance(item, slice) else out

    def __add__(self, other: tuple) -> Size:
        return Size(tuple(self) + tuple(other))

    def __reduce__(self) -> tuple:
        return (Size, (tuple(self),))


_SIZES: dict[tuple[int, ...], Size] = {}


def size_of(shape: tuple[int, ...]) -> Size:
    """The Size of a tensor's own shape tuple (ints already): one shared instance per shape,
    as ``Tensor.shape`` is read on most ops' paths and building a Size checks every dim."""
    size = _SIZES.get(shape)
    if size is None:
        size = Size(shape)   # (Python ints even where a shape tuple held NumPy ints)
        if len(_SIZES) < 4096:
            _SIZES[shape] = size
    return size


def broadcast_shapes(*shapes: int | Sequence[int]) -> Size:
    """``torch.broadcast_shapes``: the shape tensors of these shapes broadcast to; an int is a
    1-d shape. (Op dispatch uses the plain-tuple ``kernels.layout.broadcast_shapes``.)"""
    from gputensor.kernels.layout import broadcast_shapes as broadcast

    tuples = []
    for shape in shapes:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        try:
            dims = tuple(operator.index(n) for n in dims)
        except TypeError:
            raise TypeError(f"broadcast_shapes: expected ints or sequences of ints, got "
                            f"{shape!r}") from None
        if any(n < 0 for n in dims):
            raise ValueError(f"Attempting to broadcast a dimension with negative length! "
                             f"(shape {dims})")
        tuples.append(dims)
    return Size(broadcast(*tuples))
