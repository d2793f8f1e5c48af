"""SequenceWrapper: a sequence or mapping as a MapDataPipe."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ..datapipe import MapDataPipe

__all__ = ["SequenceWrapperMapDataPipe"]

_T = TypeVar("_T")


class SequenceWrapperMapDataPipe(MapDataPipe[_T]):
    """``dp[i]`` is ``sequence[i]`` (of a deep copy of it unless ``deepcopy=False``)."""

    def __init__(self, sequence: Sequence[_T] | Mapping[Any, _T], deepcopy: bool = True) -> None:
        self.sequence = sequence
        if deepcopy:
            try:
                self.sequence = copy.deepcopy(sequence)
            except TypeError:
                warnings.warn("The input sequence can not be deepcopied, please be aware of "
                              "in-place modification would affect source data", stacklevel=2)

    def __getitem__(self, index: Any) -> _T:
        return self.sequence[index]

    def __len__(self) -> int:
        return len(self.sequence)
