"""gt.Size: a tuple of ints, like torch.Size."""

from __future__ import annotations

import math


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
