"""IterableWrapper: any iterable as an IterDataPipe."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Iterator
from typing import TypeVar

from ..datapipe import IterDataPipe
from ..utils.common import sized_len

__all__ = ["IterableWrapperIterDataPipe"]

_T = TypeVar("_T")


class IterableWrapperIterDataPipe(IterDataPipe[_T]):
    """Yields the elements of ``iterable``, of a deep copy of it unless ``deepcopy=False``
    (so in-place changes downstream do not reach the source)."""

    def __init__(self, iterable: Iterable[_T], deepcopy: bool = True) -> None:
        self.iterable = iterable
        self.deepcopy = deepcopy

    def __iter__(self) -> Iterator[_T]:
        source = self.iterable
        if self.deepcopy:
            try:
                source = copy.deepcopy(self.iterable)
            except TypeError:
                warnings.warn("The input iterable can not be deepcopied, please be aware of "
                              "in-place modification would affect source data.", stacklevel=2)
        yield from source

    def __len__(self) -> int:
        return sized_len(self, self.iterable)
