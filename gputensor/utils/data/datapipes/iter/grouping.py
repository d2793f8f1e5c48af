"""``batch`` (Batcher), ``unbatch`` (UnBatcher) and ``groupby`` (Grouper)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .._decorator import functional_datapipe
from ..datapipe import DataChunk, IterDataPipe
from ..utils.common import batch_count, check_unpickable_fn, init_batcher

__all__ = ["BatcherIterDataPipe", "GrouperIterDataPipe", "UnBatcherIterDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


@functional_datapipe("batch")
class BatcherIterDataPipe(IterDataPipe[DataChunk]):
    """``dp.batch(batch_size, drop_last=False, wrapper_class=DataChunk)``: consecutive
    elements grouped into batches (the last one shorter unless dropped)."""

    def __init__(self, datapipe: IterDataPipe, batch_size: int, drop_last: bool = False,
                 wrapper_class: type[DataChunk] = DataChunk) -> None:
        super().__init__()
        init_batcher(self, datapipe, batch_size, drop_last, wrapper_class)

    def __iter__(self) -> Iterator[DataChunk]:
        batch: list = []
        for x in self.datapipe:
            batch.append(x)
            if len(batch) == self.batch_size:
                yield self.wrapper_class(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.wrapper_class(batch)

    def __len__(self) -> int:
        return batch_count(self)


@functional_datapipe("unbatch")
class UnBatcherIterDataPipe(IterDataPipe):
    """``dp.unbatch(unbatch_level=1)``: the elements of each batch, ``unbatch_level`` levels
    deep (-1: all the way down)."""

    def __init__(self, datapipe: IterDataPipe, unbatch_level: int = 1) -> None:
        self.datapipe = datapipe
        self.unbatch_level = unbatch_level

    def __iter__(self) -> Iterator:
        for element in self.datapipe:
            yield from self._dive(element, self.unbatch_level)

    def _dive(self, element: Any, level: int) -> Iterator:
        if level < -1:
            raise ValueError("unbatch_level must be -1 or >= 0")
        if level == 0 or level == -1 and not isinstance(element, list):
            yield element
        elif isinstance(element, list):  # DataChunk is a list
            for item in element:
                yield from self._dive(item, -1 if level == -1 else level - 1)
        else:
            raise IndexError(f"unbatch_level {self.unbatch_level} exceeds the depth of the "
                             f"DataPipe")


@functional_datapipe("groupby")
class GrouperIterDataPipe(IterDataPipe[DataChunk]):
    """``dp.groupby(group_key_fn, *, keep_key=False, buffer_size=10000, group_size=None,
    guaranteed_group_size=None, drop_remaining=False)``: elements grouped by key; a group is
    yielded when it reaches ``group_size``, when the buffer is full (its largest group), or
    at the end."""

    def __init__(self, datapipe: IterDataPipe[_T_co], group_key_fn: Callable[[_T_co], Any],
                 *, keep_key: bool = False, buffer_size: int = 10000,
                 group_size: int | None = None, guaranteed_group_size: int | None = None,
                 drop_remaining: bool = False) -> None:
        check_unpickable_fn(group_key_fn)
        self.datapipe = datapipe
        self.group_key_fn = group_key_fn
        self.keep_key = keep_key
        self.max_buffer_size = buffer_size
        self.buffer_elements: defaultdict[Any, list] = defaultdict(list)
        self.curr_buffer_size = 0
        self.group_size = group_size
        self.guaranteed_group_size = None
        if group_size is not None and buffer_size is not None:
            if not 0 < group_size <= buffer_size:
                raise AssertionError("group_size must be > 0 and <= buffer_size")
            self.guaranteed_group_size = group_size
        if guaranteed_group_size is not None:
            if group_size is None or not 0 < guaranteed_group_size <= group_size:
                raise AssertionError("guaranteed_group_size must be > 0 and <= group_size and "
                                     "group_size must be set")
            self.guaranteed_group_size = guaranteed_group_size
        self.drop_remaining = drop_remaining
        self.wrapper_class = DataChunk

    def _pop_biggest(self) -> list | None:
        key = max(self.buffer_elements, key=lambda k: len(self.buffer_elements[k]))
        group = self.buffer_elements.pop(key)
        self.curr_buffer_size -= len(group)
        small = self.guaranteed_group_size is not None and len(group) < \
            self.guaranteed_group_size
        if small and not self.drop_remaining:
            raise RuntimeError("Failed to group items", str(group))
        return None if small else group

    def _out(self, key: Any, group: list) -> Any:
        chunk = self.wrapper_class(group)
        return (key, chunk) if self.keep_key else chunk

    def __iter__(self) -> Iterator:
        for x in self.datapipe:
            key = self.group_key_fn(x)
            self.buffer_elements[key].append(x)
            self.curr_buffer_size += 1
            if self.group_size is not None and len(self.buffer_elements[key]) == \
                    self.group_size:
                group = self.buffer_elements.pop(key)
                self.curr_buffer_size -= len(group)
                yield self._out(key, group)
            if self.curr_buffer_size == self.max_buffer_size:
                group = self._pop_biggest()
                if group is not None:
                    yield self._out(key, group)
        for key in tuple(self.buffer_elements):
            group = self.buffer_elements.pop(key)
            self.curr_buffer_size -= len(group)
            yield self._out(key, group)

    def reset(self) -> None:
        self.curr_buffer_size = 0
        self.buffer_elements = defaultdict(list)
