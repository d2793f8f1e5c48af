"""``batch`` on a MapDataPipe (Batcher)."""

from __future__ import annotations

from typing import TypeVar

from .._decorator import functional_datapipe
from ..datapipe import DataChunk, MapDataPipe
from ..utils.common import batch_count, init_batcher

__all__ = ["BatcherMapDataPipe"]

_T = TypeVar("_T")


@functional_datapipe("batch")
class BatcherMapDataPipe(MapDataPipe[DataChunk]):
    """``dp.batch(batch_size, drop_last=False, wrapper_class=DataChunk)``: ``dp[i]`` is the
    batch of source elements ``i*batch_size ... (i+1)*batch_size - 1``."""

    def __init__(self, datapipe: MapDataPipe[_T], batch_size: int, drop_last: bool = False,
                 wrapper_class: type[DataChunk] = DataChunk) -> None:
        super().__init__()
        init_batcher(self, datapipe, batch_size, drop_last, wrapper_class)

    def __getitem__(self, index: int) -> DataChunk:
        batch: list = []
        try:
            for i in range(index * self.batch_size, (index + 1) * self.batch_size):
                batch.append(self.datapipe[i])
            return self.wrapper_class(batch)
        except IndexError as e:
            if not self.drop_last and batch:
                return self.wrapper_class(batch)
            raise IndexError(f"Index {index} is out of bound.") from e

    def __len__(self) -> int:
        return batch_count(self)
