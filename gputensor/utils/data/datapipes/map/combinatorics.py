"""``shuffle`` on a MapDataPipe: an IterDataPipe of its elements in a random order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from ..datapipe import IterDataPipe, MapDataPipe
from ..utils.common import SeededShuffle

__all__ = ["ShufflerIterDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


class ShufflerIterDataPipe(SeededShuffle, IterDataPipe[_T_co]):
    """``map_dp.shuffle(*, indices=None)``: ``source[i]`` for a random permutation of the
    indices, redrawn each iteration (seeded by ``set_seed`` once, else from gt's default
    generator); ``set_shuffle(False)`` keeps the index order."""

    def __init__(self, datapipe: MapDataPipe[_T_co], *, indices: list | None = None) -> None:
        super().__init__()
        self.datapipe = datapipe
        self.indices = list(range(len(datapipe))) if indices is None else indices
        self._init_shuffle()
        self._shuffled_indices: list = self.indices

    def __iter__(self) -> Iterator[_T_co]:
        if not self._enabled:
            for idx in self.indices:
                yield self.datapipe[idx]
            return
        while self._shuffled_indices:
            yield self.datapipe[self._shuffled_indices.pop()]

    def reset(self) -> None:
        self._reseed()
        self._shuffled_indices = self._rng.sample(self.indices, len(self.indices))

    def __len__(self) -> int:
        return len(self.datapipe)


MapDataPipe.register_datapipe_as_function("shuffle", ShufflerIterDataPipe)
