"""``concat``, ``zip``, ``mux``, and the splitting ``fork`` and ``demux``.

``fork`` and ``demux`` return child DataPipes that read from one shared container: it
iterates the source once and buffers what a faster child has read and a slower one has not
(``buffer_size`` elements at most; -1: unlimited). Starting a new iteration of any child
restarts all of them from the beginning.
"""

from __future__ import annotations

import copy as copymodule
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ..utils.common import check_unpickable_fn, sized_len
from ..utils.streams import StreamWrapper

__all__ = ["ConcaterIterDataPipe", "DemultiplexerIterDataPipe", "ForkerIterDataPipe",
           "MultiplexerIterDataPipe", "ZipperIterDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


@functional_datapipe("concat")
class ConcaterIterDataPipe(IterDataPipe):
    """``dp.concat(*others)``: the elements of each DataPipe in turn."""

    def __init__(self, *datapipes: IterDataPipe) -> None:
        if len(datapipes) == 0:
            raise ValueError("Expected at least one DataPipe, but got nothing")
        if not all(isinstance(dp, IterDataPipe) for dp in datapipes):
            raise TypeError("Expected all inputs to be `IterDataPipe`")
        self.datapipes = datapipes

    def __iter__(self) -> Iterator:
        for dp in self.datapipes:
            yield from dp

    def __len__(self) -> int:
        return sum(sized_len(self, dp) for dp in self.datapipes)


@functional_datapipe("zip")
class ZipperIterDataPipe(IterDataPipe[tuple[_T_co]]):
    """``dp.zip(*others)``: tuples of one element from each, until the shortest ends."""

    def __init__(self, *datapipes: IterDataPipe) -> None:
        if not all(isinstance(dp, IterDataPipe) for dp in datapipes):
            raise TypeError("All inputs are required to be `IterDataPipe` for "
                            "`ZipIterDataPipe`.")
        super().__init__()
        self.datapipes = datapipes

    def __iter__(self) -> Iterator[tuple[_T_co]]:
        yield from zip(*(iter(dp) for dp in self.datapipes), strict=False)

    def __len__(self) -> int:
        return min(sized_len(self, dp) for dp in self.datapipes)


@functional_datapipe("mux")
class MultiplexerIterDataPipe(IterDataPipe):
    """``dp.mux(*others)``: one element from each in turn, until the shortest ends (a round
    that cannot be completed is dropped)."""

    def __init__(self, *datapipes: IterDataPipe) -> None:
        self.datapipes = datapipes
        self.buffer: list = []

    def __iter__(self) -> Iterator:
        iterators = [iter(dp) for dp in self.datapipes]
        while iterators:
            for it in iterators:
                try:
                    self.buffer.append(next(it))
                except StopIteration:
                    self.buffer.clear()
                    return
            yield from self.buffer
            self.buffer.clear()

    def __len__(self) -> int:
        return min(sized_len(self, dp) for dp in self.datapipes) * len(self.datapipes)

    def reset(self) -> None:
        self.buffer = []


class _ChildDataPipe(IterDataPipe):
    """Child ``instance_id`` of a fork/demux container; its iterator is valid while the
    container's iteration it joined is the current one."""

    _is_child_datapipe = True

    def __init__(self, main_datapipe: Any, instance_id: int) -> None:
        self.main_datapipe = main_datapipe
        self.instance_id = instance_id

    def __iter__(self) -> Iterator:
        return self.main_datapipe.get_next_element_by_instance(self.instance_id)

    def __len__(self) -> int:
        return self.main_datapipe.get_length_by_instance(self.instance_id)

    def _set_main_datapipe_valid_iterator_id(self) -> int:
        main = self.main_datapipe
        if main._valid_iterator_id is None:
            main._valid_iterator_id = 0
        elif main._valid_iterator_id == self._valid_iterator_id:  # this child starts over
            main._valid_iterator_id += 1
            if not main.is_every_instance_exhausted():
                warnings.warn("Some child DataPipes are not exhausted when __iter__ is called. "
                              "We are resetting the buffer and each child DataPipe will read "
                              "from the start again.", UserWarning, stacklevel=2)
            main.reset()
        self._valid_iterator_id = main._valid_iterator_id
        return self._valid_iterator_id

    def _check_valid_iterator_id(self, iterator_id: int) -> bool:
        return iterator_id == self._valid_iterator_id == self.main_datapipe._valid_iterator_id


def _check_instances(num_instances: int) -> None:
    if num_instances < 1:
        raise ValueError(f"Expected `num_instances` larger than 0, but {num_instances} is "
                         f"found")


def _warn_unlimited(buffer_size: int, name: str) -> None:
    if buffer_size < 0:
        warnings.warn(f"Unlimited buffer size is set for `{name}`, please be aware of OOM at "
                      f"random places", UserWarning, stacklevel=3)


@functional_datapipe("fork")
class ForkerIterDataPipe(IterDataPipe):
    """``dp.fork(num_instances, buffer_size=1000, copy=None)``: ``num_instances`` DataPipes
    that each yield every element (copied per child with copy="shallow"/"deep")."""

    def __new__(cls, datapipe: IterDataPipe, num_instances: int, buffer_size: int = 1000,
                copy: Literal["shallow", "deep"] | None = None) -> Any:
        _check_instances(num_instances)
        if num_instances == 1:
            return datapipe
        container = _Forker(datapipe, num_instances, buffer_size, copy)
        return [_ChildDataPipe(container, i) for i in range(num_instances)]


def _no_copy(x: Any) -> Any:
    return x


_COPIES = {None: _no_copy, "shallow": copymodule.copy, "deep": copymodule.deepcopy}


class _Forker(IterDataPipe):
    """The shared buffer of a fork: ``buffer`` holds elements from the slowest child's
    position (``slowest_ptr``) to the fastest's (``leading_ptr``)."""

    def __init__(self, datapipe: IterDataPipe, num_instances: int, buffer_size: int,
                 copy: str | None) -> None:
        self.main_datapipe = datapipe
        self.num_instances = num_instances
        self.buffer_size = buffer_size
        _warn_unlimited(buffer_size, "fork")
        if copy not in _COPIES:
            raise ValueError(f"Unknown copy method `{copy}` requested, choose one of None, "
                             f"`shallow` or `deep`.")
        self.copy_fn = _COPIES[copy]
        self.reset()

    def __len__(self) -> int:
        return len(self.main_datapipe)

    def get_length_by_instance(self, instance_id: int) -> int:
        return len(self.main_datapipe)

    def reset(self) -> None:
        self._datapipe_iterator: Iterator | None = None
        self.buffer: deque = deque()
        self.child_pointers = [0] * self.num_instances
        self.slowest_ptr = 0
        self.leading_ptr = 0
        self.end_ptr: int | None = None
        self._child_stop = [True] * self.num_instances

    def is_every_instance_exhausted(self) -> bool:
        return self.end_ptr is not None and all(self._child_stop)

    def get_next_element_by_instance(self, instance_id: int) -> Iterator:
        if self._datapipe_iterator is None and self._child_stop[instance_id]:
            self._datapipe_iterator = iter(self.main_datapipe)
            self._child_stop = [False] * self.num_instances
        try:
            while not self._child_stop[instance_id]:
                self.child_pointers[instance_id] += 1
                ptr = self.child_pointers[instance_id]
                if self.end_ptr is not None and ptr == self.end_ptr:
                    self._child_stop[instance_id] = True
                    break
                if self.buffer and ptr <= self.leading_ptr:
                    value = self.buffer[ptr - self.slowest_ptr - 1]
                else:  # this child leads: read the source
                    self.leading_ptr = ptr
                    try:
                        value = next(self._datapipe_iterator)  # type: ignore[arg-type]
                    except StopIteration:
                        self._child_stop[instance_id] = True
                        self._datapipe_iterator = None
                        self.end_ptr = self.leading_ptr
                        continue
                    self.buffer.append(value)
                if ptr == self.slowest_ptr + 1:
                    new_min = min(self.child_pointers)
                    if self.slowest_ptr < new_min:  # the slowest child moved on
                        self.slowest_ptr = new_min
                        self.buffer.popleft()
                if 0 <= self.buffer_size < self.leading_ptr - self.slowest_ptr:
                    raise BufferError(f"ForkerIterDataPipe buffer overflow,buffer size "
                                      f"{self.buffer_size} is insufficient.")
                yield self.copy_fn(value)
        finally:
            self._child_stop[instance_id] = True
            if all(self._child_stop):
                self._datapipe_iterator = None
                self.buffer.clear()

    def __getstate__(self) -> dict[str, Any]:
        keep = ("main_datapipe", "num_instances", "buffer_size", "copy_fn",
                "_valid_iterator_id", "_number_of_samples_yielded")
        return {k: self.__dict__[k] for k in keep if k in self.__dict__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.reset()


@functional_datapipe("demux")
class DemultiplexerIterDataPipe(IterDataPipe):
    """``dp.demux(num_instances, classifier_fn, drop_none=False, buffer_size=1000)``:
    ``num_instances`` DataPipes; child i yields the elements ``classifier_fn`` sends to i
    (None: dropped with drop_none, else an error)."""

    def __new__(cls, datapipe: IterDataPipe, num_instances: int,
                classifier_fn: Callable[[Any], int | None], drop_none: bool = False,
                buffer_size: int = 1000) -> Any:
        _check_instances(num_instances)
        check_unpickable_fn(classifier_fn)
        container = _Demultiplexer(datapipe, num_instances, classifier_fn, drop_none,
                                   buffer_size)
        return [_ChildDataPipe(container, i) for i in range(num_instances)]


class _Demultiplexer(IterDataPipe):
    """The shared source of a demux: elements meant for another child wait in its buffer."""

    def __init__(self, datapipe: IterDataPipe, num_instances: int,
                 classifier_fn: Callable[[Any], int | None], drop_none: bool,
                 buffer_size: int) -> None:
        self.main_datapipe = datapipe
        self.num_instances = num_instances
        self.buffer_size = buffer_size
        _warn_unlimited(buffer_size, "demux")
        self.classifier_fn = classifier_fn
        self.drop_none = drop_none
        self.reset()

    def reset(self) -> None:
        self._datapipe_iterator: Iterator | None = None
        self.current_buffer_usage = 0
        self.child_buffers: list[deque] = [deque() for _ in range(self.num_instances)]
        self._child_stop = [True] * self.num_instances
        self.main_datapipe_exhausted = False

    def get_length_by_instance(self, instance_id: int) -> int:
        raise TypeError(f"{type(self).__name__} children have no valid length")

    def is_every_instance_exhausted(self) -> bool:
        return self.main_datapipe_exhausted and all(self._child_stop)

    def _find_next(self, instance_id: int) -> Any:
        while True:
            if self.main_datapipe_exhausted or self._child_stop[instance_id]:
                raise StopIteration
            value = next(self._datapipe_iterator)  # type: ignore[arg-type]
            target = self.classifier_fn(value)
            if target is None and self.drop_none:
                StreamWrapper.close_streams(value)
                continue
            if target is None or not 0 <= target < self.num_instances:
                raise ValueError(f"Output of the classification fn should be between 0 and "
                                 f"{self.num_instances - 1}. {target} is returned.")
            if target == instance_id:
                return value
            self.child_buffers[target].append(value)
            self.current_buffer_usage += 1
            if 0 <= self.buffer_size < self.current_buffer_usage:
                raise BufferError(f"DemultiplexerIterDataPipe buffer overflow, buffer size "
                                  f"{self.buffer_size} is insufficient.")

    def get_next_element_by_instance(self, instance_id: int) -> Iterator:
        if self._datapipe_iterator is None and self._child_stop[instance_id]:
            self._datapipe_iterator = iter(self.main_datapipe)
            self.main_datapipe_exhausted = False
            self._child_stop = [False] * self.num_instances
        try:
            while not self._child_stop[instance_id]:
                if self.child_buffers[instance_id]:
                    self.current_buffer_usage -= 1
                    yield self.child_buffers[instance_id].popleft()
                else:
                    try:
                        yield self._find_next(instance_id)
                    except StopIteration:
                        self._child_stop[instance_id] = True
                        self.main_datapipe_exhausted = True
                        self._datapipe_iterator = None
        finally:
            self._child_stop[instance_id] = True
            if all(self._child_stop):
                self._datapipe_iterator = None
            self.child_buffers[instance_id].clear()

    def __getstate__(self) -> dict[str, Any]:
        keep = ("main_datapipe", "num_instances", "buffer_size", "classifier_fn", "drop_none",
                "_valid_iterator_id", "_number_of_samples_yielded")
        return {k: self.__dict__[k] for k in keep if k in self.__dict__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.reset()
