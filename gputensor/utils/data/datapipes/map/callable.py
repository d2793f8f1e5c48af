"""``map`` on a MapDataPipe (Mapper)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .._decorator import functional_datapipe
from ..datapipe import MapDataPipe
from ..utils.common import check_unpickable_fn

__all__ = ["MapperMapDataPipe", "default_fn"]

_T_co = TypeVar("_T_co", covariant=True)


def default_fn(data: Any) -> Any:
    return data


@functional_datapipe("map")
class MapperMapDataPipe(MapDataPipe[_T_co]):
    """``dp.map(fn)``: ``dp[i]`` is ``fn(source[i])``."""

    def __init__(self, datapipe: MapDataPipe, fn: Callable = default_fn) -> None:
        super().__init__()
        self.datapipe = datapipe
        check_unpickable_fn(fn)
        self.fn = fn

    def __len__(self) -> int:
        return len(self.datapipe)

    def __getitem__(self, index: Any) -> _T_co:
        return self.fn(self.datapipe[index])
