"""Datasets: the map-style and iterable bases, TensorDataset, concatenation, subsets, splits.

Map-style datasets answer ``len(ds)`` and ``ds[i]``; iterable ones are consumed with ``iter``.
``TensorDataset`` and ``Subset`` are also read by the DataLoader's batched fast path
(``fetch.py``), which gathers a whole batch of rows at once instead of one sample at a time.
"""

from __future__ import annotations

import bisect
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any

import gputensor as gt


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``).

    ``a + b`` concatenates two map-style datasets into a ``ConcatDataset``.
    """

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy, so split the stream by
    ``get_worker_info()`` inside ``__iter__`` to avoid duplicated samples. ``a + b`` chains
    two iterable datasets.
    """

    def __add__(self, other: Dataset) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Rows of tensors that share their first dimension: ``ds[i]`` is ``(t[i] for t in ...)``."""

    def __init__(self, *tensors: gt.Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, gt.Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, "
                                f"expected a gputensor.Tensor")
            if t.dim() == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-dimensional; every tensor "
                                 f"needs a first (sample) dimension")
        sizes = [t.shape[0] for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"Size mismatch between tensors: TensorDataset needs equal first "
                             f"dimensions, got sizes {sizes} (shapes "
                             f"{[tuple(t.shape) for t in tensors]})")
        self.tensors: tuple[gt.Tensor, ...] = tensors

    def __getitem__(self, index: Any) -> tuple[gt.Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """Map-style datasets one after another; index ``i`` finds its dataset by bisection."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets: list[Dataset] = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset; use "
                                "ChainDataset for streams")
        self.cumulative_sizes: list[int] = list(accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> Any:
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {n}")
            idx += n
        if idx >= n:
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {n}")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (lazily, like ``itertools.chain``)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets: list[Dataset] = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only chains IterableDatasets, got "
                                f"{type(d).__name__}")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)  # type: ignore[arg-type]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        # Batched fetch: pass a whole batch down when the wrapped dataset supports it.
        inner = getattr(self.dataset, "__getitems__", None)
        mapped = [self.indices[i] for i in indices]
        if callable(inner):
            return inner(mapped)
        return [self.dataset[i] for i in mapped]

    def __len__(self) -> int:
        return len(self.indices)


def _split_lengths(n: int, lengths: Sequence[int | float]) -> list[int]:
    """Integer lengths from ints (summing to n) or fractions (summing to 1), like PyTorch."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1: {frac}")
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(sizes)):  # the remainder goes round-robin from the front
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              f"empty dataset.", stacklevel=3)
        return sizes
    for i, length in enumerate(lengths):
        if isinstance(length, float) and not length.is_integer():
            raise ValueError(f"random_split: lengths must be ints summing to {n} or fractions "
                             f"summing to 1, got {list(lengths)}")
        if length < 0:
            raise ValueError(f"random_split: length at index {i} is negative ({length})")
    sizes = [int(length) for length in lengths]
    if sum(sizes) != n:
        raise ValueError(f"Sum of input lengths ({sum(sizes)}) does not equal the length of "
                         f"the input dataset ({n})!")
    return sizes


def random_split(dataset: Dataset, lengths: Sequence[int | float],
                 generator: gt.Generator | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths.

    ``lengths`` are sample counts summing to ``len(dataset)`` or fractions summing to 1 (the
    leftover of flooring each fraction goes round-robin to the first splits). The permutation
    comes from ``generator``, or from gt's default generator so ``gt.manual_seed`` fixes it.
    """
    sizes = _split_lengths(len(dataset), lengths)  # type: ignore[arg-type]
    gen = gt.default_generator if generator is None else generator
    perm = gt.randperm(sum(sizes), generator=gen).tolist()
    out, offset = [], 0
    for size in sizes:
        out.append(Subset(dataset, perm[offset:offset + size]))
        offset += size
    return out


class StackDataset(Dataset):
    """Datasets of the same length stacked per sample: ``StackDataset(a, b)[i]`` is
    ``(a[i], b[i])``, ``StackDataset(x=a, y=b)[i]`` is ``{"x": a[i], "y": b[i]}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        datasets = list(args) if args else list(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(len(d) != self._length for d in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets: Any = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        return [self[i] for i in indices]

    def __len__(self) -> int:
        return self._length


__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "StackDataset", "Subset",
           "TensorDataset", "random_split"]
