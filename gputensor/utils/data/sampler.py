"""Samplers: the order in which a DataLoader visits a map-style dataset's indices.

Random samplers draw from a ``gt.Generator``. Without one, RandomSampler seeds a fresh generator
from gt's default generator on every pass (the subset and weighted samplers draw from the
default generator itself), so ``gt.manual_seed(s)`` makes a whole run reproducible while
successive epochs still differ. Draws happen when iteration starts, not at ``iter()``, and in
PyTorch's order, so with ``gt.random.use_torch_cpu_stream()`` the orders are PyTorch's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from itertools import islice
from typing import Any

import gputensor as gt


def _draw_seed(generator: gt.Generator | None = None) -> int:
    """A 64-bit seed from ``generator`` (gt's default generator when None)."""
    return int(gt.empty((), dtype=gt.int64).random_(generator=generator).item())


def _pass_generator(generator: gt.Generator | None) -> gt.Generator:
    """The generator one sampling pass draws from: the user's, or a freshly seeded one."""
    if generator is not None:
        return generator
    return gt.Generator().manual_seed(_draw_seed())


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")
    return value


class Sampler:
    """Base class of samplers: subclasses yield dataset indices from ``__iter__``."""

    def __init__(self, data_source: Sized | None = None) -> None:
        self.data_source = data_source


class SequentialSampler(Sampler):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices, or ``num_samples`` draws with replacement."""

    CHUNK = 1024  # draws with replacement made per randint call

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: gt.Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement!r}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            _check_count("num_samples", num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, k = len(self.data_source), self.num_samples
        if n == 0:
            if self.replacement and k:
                raise ValueError("RandomSampler: cannot draw with replacement from an empty "
                                 "dataset")
            return iter(())
        return self._draws(n, k)

    def _draws(self, n: int, k: int) -> Iterator[int]:
        """Drawn lazily, as PyTorch does: ``num_samples`` may be far larger than memory
        (minGPT's trainer asks for 10**10 draws and takes what it needs). The pass's seed
        too is drawn on the first ``next``, as PyTorch's generator function does."""
        gen = _pass_generator(self.generator)
        if self.replacement:
            for start in range(0, k, self.CHUNK):
                yield from gt.randint(0, n, (min(self.CHUNK, k - start),), dtype=gt.int64,
                                      generator=gen).tolist()
            return
        # Without replacement, more samples than n means whole permutations back to back.
        for _ in range(k // n):
            yield from gt.randperm(n, generator=gen).tolist()
        if k % n:
            yield from gt.randperm(n, generator=gen)[:k % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (no replacement)."""

    def __init__(self, indices: Sequence[int], generator: gt.Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in gt.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))`` drawn with probability ~ weights."""

    def __init__(self, weights: Sequence[float] | gt.Tensor, num_samples: int,
                 replacement: bool = True, generator: gt.Generator | None = None) -> None:
        _check_count("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement!r}")
        w = weights if isinstance(weights, gt.Tensor) else gt.tensor(weights)
        w = w.to(dtype=gt.float64)
        if w.dim() != 1:
            raise ValueError(f"weights should be a 1-d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        draws = gt.multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator)
        yield from draws.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last may be short)."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        _check_count("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it, size = iter(self.sampler), self.batch_size
        while batch := list(islice(it, size)):  # islice chunks in C, no per-index Python
            if len(batch) < size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]
