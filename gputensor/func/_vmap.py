"""``vmap``: map a function over a dimension of its inputs (torch.func.vmap).

The inputs' mapped dims (``in_dims``, a prefix tree of the inputs: an int, None, or nested
tuples/lists/dicts of them) move to the front and become BatchedTensors of a new level; the
function runs once on the per-sample views, every op reaching a batching rule; the outputs'
batch dims move to ``out_dims``. ``chunk_size`` runs the batch in chunks and concatenates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gputensor
from gputensor._tensor import Tensor

from . import (  # noqa: F401  (each declares its family's batching rules)
    _rules_dims,
    _rules_elementwise,
    _rules_inplace,
    _rules_linalg,
    _rules_random,
    _rules_shape,
)
from ._batched import BatchedTensor, move_bdim, wrap
from ._dispatch import _set_vmap_fallback_enabled as _set_vmap_fallback_enabled  # noqa: F401
from ._pytree import broadcast_prefix, tree_flatten, tree_unflatten
from ._state import VMAP, VmapLevel

_RANDOMNESS = ("error", "different", "same")


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over dim ``in_dims`` of its inputs, its outputs' batch dims at
    ``out_dims`` (see torch.func.vmap)."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        name = getattr(func, "__name__", repr(func))
        flat_args, sizes = _flat_inputs(name, in_dims, args)
        if chunk_size is None or chunk_size >= sizes:
            return _run(func, name, out_dims, randomness, flat_args, args, sizes, kwargs)
        outputs = []
        for start in range(0, sizes, chunk_size):
            n = min(chunk_size, sizes - start)
            chunk = [(x.narrow(d, start, n), d) if d is not None else (x, d)
                     for x, d in flat_args]
            outputs.append(_run(func, name, out_dims, randomness, chunk, args, n, kwargs))
        return _concat_chunks(outputs, out_dims, name)
    return wrapped


def _flat_inputs(name: str, in_dims: Any, args: tuple) -> tuple[list[tuple[Any, Any]], int]:
    """Each leaf of ``args`` with its mapped dim (normalised), and the batch size."""
    if not isinstance(in_dims, int | tuple):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` "
                         f"to be int or a (potentially nested) tuple matching the structure of "
                         f"inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add "
                         f"inputs, or you are trying to vmap over a function with no inputs. The "
                         f"latter is unsupported.")
    leaves, spec = tree_flatten(args)
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        in_spec = tree_flatten(in_dims)[1]
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                         f"compatible with the structure of `inputs`. in_dims has structure "
                         f"{in_spec} but inputs has structure {spec}.")
    dims = broadcast_prefix(in_dims, args, lambda: ValueError(
        f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
        f"structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs "
        f"has structure {spec}."))
    flat, sizes = [], {}
    for x, d in zip(leaves, dims, strict=False):
        if d is not None and not isinstance(d, int):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims must be "
                             f"int or None, got {type(d)}")
        if d is not None:
            if not isinstance(x, Tensor):
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d}"
                                 f" for an input but the input is of type {type(x)}. We cannot "
                                 f"vmap over non-Tensor arguments, please use None as the "
                                 f"respective in_dim")
            if not -x.dim() <= d < x.dim():
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d}"
                                 f" for some input, but that input is a Tensor of dimensionality "
                                 f"{x.dim()} so expected in_dim to satisfy -{x.dim()} <= in_dim "
                                 f"< {x.dim()}.")
            d %= x.dim()
            sizes[x.shape[d]] = True
        flat.append((x, d))
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if len(sizes) > 1:
        got = [x.shape[d] for x, d in flat if d is not None]
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {got} for the mapped dimension")
    return flat, next(iter(sizes))


def _run(func: Callable, name: str, out_dims: Any, randomness: str,
         flat_args: list[tuple[Any, Any]], args: tuple, size: int, kwargs: dict) -> Any:
    level = VmapLevel(len(VMAP.levels) + 1, size, randomness)
    batched = [wrap(move_bdim_front(x, d), level.level) if d is not None else x
               for x, d in flat_args]
    VMAP.levels.append(level)
    VMAP.depth += 1
    try:
        out = func(*tree_unflatten(batched, tree_flatten(args)[1]), **kwargs)
    finally:
        VMAP.levels.pop()
        VMAP.depth -= 1
    return _unwrap_outputs(out, out_dims, name, level, size)


def move_bdim_front(x: Tensor, d: int) -> Tensor:
    return x if d == 0 else x.movedim(d, 0)


def _unwrap_outputs(out: Any, out_dims: Any, name: str, level: VmapLevel, size: int) -> Any:
    if not (out_dims is None or isinstance(out_dims, int | tuple | list | dict)):
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, "
                         f"None or a python collection of ints representing where in the "
                         f"outputs the vmapped dimension should appear.")
    leaves, spec = tree_flatten(out)
    dims = broadcast_prefix(out_dims, out, lambda: ValueError(
        f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
        f"structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but "
        f"outputs has structure {spec}."))
    results = []
    for x, d in zip(leaves, dims, strict=False):
        batched = type(x) is BatchedTensor and x._level == level.level
        if d is None:
            if batched:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 f"when out_dim is None")
            results.append(x)
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                             f"{type(x)}. Did you mean to set out_dims= to None for output?")
        value = x._value if batched else x.unsqueeze(0).expand(size, *x.shape)
        rank = value.dim()
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-rank}, {rank - 1}], but got {d})")
        results.append(move_bdim(value, d % rank))
    return tree_unflatten(results, spec)


def _concat_chunks(outputs: list[Any], out_dims: Any, name: str) -> Any:
    flats = [tree_flatten(o)[0] for o in outputs]
    spec = tree_flatten(outputs[0])[1]
    dims = broadcast_prefix(out_dims, outputs[0], lambda: ValueError(name))
    merged = []
    for i, d in enumerate(dims):
        parts = [f[i] for f in flats]
        merged.append(parts[0] if d is None else gputensor.cat(parts, d % parts[0].dim()))
    return tree_unflatten(merged, spec)
