"""``shuffle`` (Shuffler) and Sampler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from gputensor.utils.data.sampler import Sampler, SequentialSampler

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ..utils.common import SeededShuffle, sized_len

__all__ = ["SamplerIterDataPipe", "ShufflerIterDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


class SamplerIterDataPipe(IterDataPipe[_T_co]):
    """The elements a ``sampler`` (built over the DataPipe) yields."""

    def __init__(self, datapipe: IterDataPipe, sampler: type[Sampler] = SequentialSampler,
                 sampler_args: tuple | None = None,
                 sampler_kwargs: dict | None = None) -> None:
        if not hasattr(datapipe, "__len__"):
            raise AssertionError("Sampler class requires input datapipe implemented `__len__`")
        super().__init__()
        self.datapipe = datapipe
        self.sampler_args = () if sampler_args is None else sampler_args
        self.sampler_kwargs = {} if sampler_kwargs is None else sampler_kwargs
        self.sampler_kwargs["data_source"] = self.datapipe
        self.sampler = sampler(*self.sampler_args, **self.sampler_kwargs)

    def __iter__(self) -> Iterator[_T_co]:
        return iter(self.sampler)

    def __len__(self) -> int:
        return sized_len(self, self.sampler)


@functional_datapipe("shuffle")
class ShufflerIterDataPipe(SeededShuffle, IterDataPipe[_T_co]):
    """``dp.shuffle(*, buffer_size=10000, unbatch_level=0)``: a buffered shuffle: each new
    element swaps with a random one of a full buffer, the rest drains in random order.

    Each iteration reseeds its ``random.Random`` from ``set_seed``'s value (once), else from
    gt's default generator (so ``gt.manual_seed`` makes it repeatable); ``set_shuffle(False)``
    turns it into a pass-through. The DataLoader sets both.
    """

    def __init__(self, datapipe: IterDataPipe[_T_co], *, buffer_size: int = 10000,
                 unbatch_level: int = 0) -> None:
        super().__init__()
        self._buffer: list = []
        if buffer_size <= 0:
            raise AssertionError("buffer_size should be larger than 0")
        self.datapipe = datapipe if unbatch_level == 0 else \
            datapipe.unbatch(unbatch_level=unbatch_level)
        self.buffer_size = buffer_size
        self._init_shuffle()

    def __iter__(self) -> Iterator[_T_co]:
        if not self._enabled:
            yield from self.datapipe
            return
        for x in self.datapipe:
            if len(self._buffer) == self.buffer_size:
                idx = self._rng.randint(0, len(self._buffer) - 1)
                val, self._buffer[idx] = self._buffer[idx], x
                yield val
            else:
                self._buffer.append(x)
        while self._buffer:
            yield self._buffer.pop(self._rng.randint(0, len(self._buffer) - 1))

    def __len__(self) -> int:
        return sized_len(self, self.datapipe)

    def reset(self) -> None:
        self._buffer = []
        if self._enabled:
            self._reseed()
