"""Fetchers: turn one entry of the index sampler into one (collated) batch.

The map-style fetcher has a batched fast path. When the default collate function would stack
rows of a ``TensorDataset`` (possibly behind ``Subset`` wrappers), it gathers every tensor's
rows for the whole batch in one indexing call instead of building and stacking one sample at
a time. The result is the same list of tensors ``default_collate`` would build.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

import numpy as np

import gputensor as gt

from .collate import default_collate
from .dataset import Subset, TensorDataset

MAP, ITERABLE = "map", "iterable"


def _tensor_rows(dataset: Any) -> tuple[tuple[gt.Tensor, ...], np.ndarray | None] | None:
    """(tensors, row map) when a batch of ``dataset`` is rows of tensors, else None.

    Only exact ``TensorDataset``/``Subset`` behaviour qualifies: a subclass that overrides
    item access must go through its own ``__getitem__``.
    """
    cls = type(dataset)
    if isinstance(dataset, TensorDataset) and cls.__getitem__ is TensorDataset.__getitem__:
        return dataset.tensors, None
    if (isinstance(dataset, Subset) and cls.__getitem__ is Subset.__getitem__
            and cls.__getitems__ is Subset.__getitems__):
        inner = _tensor_rows(dataset.dataset)
        if inner is None:
            return None
        try:
            rows = np.asarray(dataset.indices, dtype=np.int64)
        except (TypeError, ValueError):
            return None
        if rows.ndim != 1:
            return None
        tensors, inner_rows = inner
        return tensors, rows if inner_rows is None else inner_rows[rows]
    return None


class _RowGather:
    """Gathers a batch of rows from each tensor with one indexing call per tensor."""

    def __init__(self, tensors: tuple[gt.Tensor, ...], rows: np.ndarray | None) -> None:
        self.tensors = tensors
        self.rows = rows

    def __call__(self, index: Any) -> list[gt.Tensor] | None:
        try:
            idx = np.asarray(index, dtype=np.int64)
        except (TypeError, ValueError):
            return None  # not a flat list of ints: let the dataset interpret it
        if idx.ndim != 1 or idx.size == 0:
            return None
        if self.rows is not None:
            idx = self.rows[idx]
        out = []
        for t in self.tensors:
            if t.device.type == "cpu" and not t.requires_grad:
                # np.take on the zero-copy host view: one C gather that range-checks itself.
                out.append(gt.from_numpy(np.take(t.numpy(), idx, axis=0)))
            else:  # other devices (and autograd) index through the tensor op
                out.append(t[gt.from_numpy(idx).to(t.device)])
        return out


class MapFetcher:
    """Fetches ``dataset[i]`` for each index of a batch (or one index), then collates."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        rows = _tensor_rows(dataset) if auto_collation and collate_fn is default_collate else None
        self._gather = None if rows is None else _RowGather(*rows)

    def fetch(self, index: Any) -> Any:
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self._gather is not None:
            batch = self._gather(index)
            if batch is not None:
                return batch
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class IterableFetcher:
    """Pulls the next ``len(index)`` items (or one item) from the dataset's iterator."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool) -> None:
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            try:
                return self.collate_fn(next(self.iterator))
            except StopIteration:
                self.ended = True
                raise
        data = list(islice(self.iterator, len(index)))
        if len(data) < len(index):
            self.ended = True
            if not data or self.drop_last:
                raise StopIteration
        return self.collate_fn(data)


def make_fetcher(kind: str, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool) -> MapFetcher | IterableFetcher:
    cls = IterableFetcher if kind == ITERABLE else MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


__all__ = ["ITERABLE", "MAP", "IterableFetcher", "MapFetcher", "make_fetcher"]
