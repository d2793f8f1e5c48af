"""``concat`` and ``zip`` on MapDataPipes."""

from __future__ import annotations

from typing import Any, TypeVar

from .._decorator import functional_datapipe
from ..datapipe import MapDataPipe

__all__ = ["ConcaterMapDataPipe", "ZipperMapDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


def _check_inputs(datapipes: tuple) -> None:
    if len(datapipes) == 0:
        raise ValueError("Expected at least one DataPipe, but got nothing")
    if not all(isinstance(dp, MapDataPipe) for dp in datapipes):
        raise TypeError("Expected all inputs to be `MapDataPipe`")
    if not all(hasattr(dp, "__len__") for dp in datapipes):
        raise TypeError("Expected all inputs to be `Sized`")


@functional_datapipe("concat")
class ConcaterMapDataPipe(MapDataPipe):
    """``dp.concat(*others)``: indices run through each DataPipe in turn."""

    def __init__(self, *datapipes: MapDataPipe) -> None:
        _check_inputs(datapipes)
        self.datapipes = datapipes

    def __getitem__(self, index: int) -> Any:
        offset = 0
        for dp in self.datapipes:
            if index - offset < len(dp):
                return dp[index - offset]
            offset += len(dp)
        raise IndexError(f"Index {index} is out of range.")

    def __len__(self) -> int:
        return sum(len(dp) for dp in self.datapipes)


@functional_datapipe("zip")
class ZipperMapDataPipe(MapDataPipe[tuple[_T_co, ...]]):
    """``dp.zip(*others)``: ``dp[i]`` is the tuple of every input's element ``i``."""

    def __init__(self, *datapipes: MapDataPipe[_T_co]) -> None:
        _check_inputs(datapipes)
        self.datapipes = datapipes

    def __getitem__(self, index: Any) -> tuple[_T_co, ...]:
        out = []
        for dp in self.datapipes:
            try:
                out.append(dp[index])
            except IndexError as e:
                raise IndexError(f"Index {index} is out of range for one of the input "
                                 f"MapDataPipes {dp}.") from e
        return tuple(out)

    def __len__(self) -> int:
        return min(len(dp) for dp in self.datapipes)
