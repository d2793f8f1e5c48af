"""Collation: turn a list of samples into one batch, mirroring the samples' structure.

``default_collate`` stacks tensors along a new first dimension, turns NumPy arrays, NumPy
scalars and Python numbers into tensors, and recurses into dicts, namedtuples, tuples and lists
(tuples come back as lists, as in PyTorch). ``default_convert`` is the no-batching variant used
when ``batch_size=None``: it converts NumPy data to tensors and keeps the structure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

import gputensor as gt

_STRING_KINDS = "SaUO"  # NumPy dtype kinds that have no tensor equivalent


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _rebuild_mapping(elem: Mapping, values: dict) -> Any:
    """A mapping of ``elem``'s type holding ``values`` (a plain dict when the type can't)."""
    if isinstance(elem, MutableMapping):
        clone = copy.copy(elem)  # keeps the type and extra state (defaultdict's factory, ...)
        clone.update(values)
        return clone
    try:
        return type(elem)(values)
    except TypeError:
        return values


def _rebuild_sequence(elem: Sequence, values: list) -> Any:
    if isinstance(elem, tuple):  # tuples come back as lists, like PyTorch
        return values
    try:
        return type(elem)(values)
    except TypeError:
        return values


def _stack_tensors(batch: list[gt.Tensor]) -> gt.Tensor:
    """``gt.stack(batch)``, done as one ``np.stack`` of host views when that is equivalent.

    Equivalent means: CPU tensors of one dtype and shape that autograd does not track. The
    result is then the same new contiguous tensor, built without gt.stack's per-tensor
    dispatch. It runs once per batch on the DataLoader's hot path.
    """
    first = batch[0]
    dt, shape = first.dtype, first.shape
    for t in batch:
        if (not isinstance(t, gt.Tensor) or t.dtype is not dt or t.shape != shape
                or t.device.type != "cpu" or t.requires_grad):
            return gt.stack(batch)  # mixed or tracked input: the op handles (or rejects) it
    return gt.from_numpy(np.stack([t.numpy() for t in batch]))


def _type_error(found: Any) -> TypeError:
    return TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                     f"dicts or lists; found {found}")


def default_collate(batch: Sequence[Any]) -> Any:
    """Collate a list of samples into a batch (see the module docstring for the rules)."""
    if not isinstance(batch, Sequence) or isinstance(batch, str | bytes):
        batch = list(batch)
    if not batch:
        raise ValueError("default_collate: cannot collate an empty batch")
    elem = batch[0]
    if isinstance(elem, gt.Tensor):
        return _stack_tensors(list(batch))
    if isinstance(elem, np.ndarray | np.generic) and not isinstance(elem, np.str_ | np.bytes_):
        if elem.dtype.kind in _STRING_KINDS:
            raise _type_error(elem.dtype)
        # One np.stack (a single copy) instead of converting each array, then stacking.
        return gt.as_tensor(np.stack(batch) if isinstance(elem, np.ndarray) else np.array(batch))
    if isinstance(elem, int):  # bools included: gt.tensor keeps a list of bools as bool
        return gt.tensor(list(batch))
    if isinstance(elem, float):
        return gt.tensor(list(batch), dtype=gt.float64)
    if isinstance(elem, str | bytes):
        return list(batch)
    if isinstance(elem, Mapping):
        return _rebuild_mapping(elem, {k: default_collate([d[k] for d in batch]) for k in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch, strict=True)))
    if isinstance(elem, Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError(f"each element in list of batch should be of equal size (got "
                               f"sizes {[len(e) for e in batch]})")
        columns = [default_collate(list(s)) for s in zip(*batch, strict=True)]
        return _rebuild_sequence(elem, columns)
    raise _type_error(type(elem))


def default_convert(data: Any) -> Any:
    """Convert NumPy arrays/scalars in ``data`` to tensors, keeping the structure around them."""
    if isinstance(data, gt.Tensor):
        return data
    if isinstance(data, np.ndarray | np.generic) and not isinstance(data, np.str_ | np.bytes_):
        return data if data.dtype.kind in _STRING_KINDS else gt.as_tensor(data)
    if isinstance(data, str | bytes):
        return data
    if isinstance(data, Mapping):
        return _rebuild_mapping(data, {k: default_convert(v) for k, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, Sequence):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


__all__ = ["default_collate", "default_convert"]
