"""``functionalize`` and ``debug_unwrap`` (torch.func's).

PyTorch's ``functionalize`` wraps every input in a functional tensor and rewrites each
mutating (and, with ``remove='mutations_and_views'``, each aliasing) ATen op into its
out-of-place form, copying the final value of every mutated input back into the caller's
tensor when the function returns. This runtime has no dispatcher layer to rewrite ops, so the
same eager contract is kept by construction: the function runs on clones of its tensor inputs
(so its mutations never touch the caller's tensors while it runs, and aliasing between
different inputs is not seen inside, as in PyTorch), an input whose clone's storage version
moved is copied back (``copy_``, recorded by autograd) after the call, and the outputs are
fixed up as PyTorch's would be:

* an output that is an unmutated input returns that input itself;
* ``'mutations'``: an output viewing an unmutated input is re-pointed to a view of the
  caller's input (PyTorch replays the view on it); one viewing a mutated input stays a view of
  the clone, a tensor of its own, as in PyTorch;
* ``'mutations_and_views'``: an output that is a view (of an input or of an intermediate) is
  replaced by a contiguous copy, as PyTorch's ``{view}_copy`` ops return.

Clones, ``copy_``, ``as_strided`` and contiguous copies are ordinary ops, so ``grad`` and
``vmap`` compose with the transform (inputs batched by vmap are cloned and copied back through
their batching rules).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gputensor._tensor import Tensor

from ._batched import BatchedTensor, physical
from ._pytree import tree_flatten, tree_unflatten

__all__ = ["functionalize", "debug_unwrap"]

_REMOVE_ERROR = (
    "functionalize(f, remove='mutations'): received invalid argument for remove={}. Valid "
    "options are:\n     remove='mutations': all inplace and out= operators will be removed from "
    "the program, and replaced with their out-of-place equivalents.\n     "
    "remove='mutations_and_views': In addition to the above, all aliasing operators {{view}} "
    "will be replaced with their non-aliasing counterparts, {{view}}_copy.\n")


def debug_unwrap(tensor: Tensor, *, recurse: bool = True) -> Tensor:
    """The tensor under a transform's wrapper: a vmap ``BatchedTensor``'s value (its batch dim
    in front), and with ``recurse`` the real tensor under every level. Other tensors come back
    unchanged; ``grad``/``jvp`` need no wrapper here (their inputs are ordinary autograd leaves
    and dual tensors), so their tensors are returned as they are. For debugging only: using the
    result inside the transformed function breaks the transform's view of the batch."""
    if type(tensor) is not BatchedTensor:
        return tensor
    return physical(tensor) if recurse else tensor._value


class _Input:
    """A tensor input, the clone the function sees, and the clone's storage version."""

    __slots__ = ("original", "clone", "version")

    def __init__(self, original: Tensor) -> None:
        self.original = original
        self.clone = original.clone()
        self.version = physical(self.clone)._storage._version

    @property
    def mutated(self) -> bool:
        return physical(self.clone)._storage._version != self.version

    def write_back(self) -> None:
        if tuple(self.clone.shape) != tuple(self.original.shape):   # func resized its input
            self.original.resize_(tuple(self.clone.shape))
        self.original.copy_(self.clone)


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """``func`` with its mutations removed: it runs on copies of its tensor inputs, and the
    final values of the inputs it mutated are copied back into the caller's tensors when it
    returns. ``remove='mutations_and_views'`` also makes its outputs independent of the inputs
    (views come back as contiguous copies)."""
    if remove == "mutations":
        reapply_views = True
    elif remove == "mutations_and_views":
        reapply_views = False
    else:
        raise RuntimeError(_REMOVE_ERROR.format(remove))

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, spec = tree_flatten((args, kwargs))
        inputs: dict[int, _Input] = {}   # by id: one clone for a tensor passed twice
        for x in leaves:
            if isinstance(x, Tensor) and id(x) not in inputs:
                inputs[id(x)] = _Input(x)
        call_args, call_kwargs = tree_unflatten(
            [inputs[id(x)].clone if isinstance(x, Tensor) else x for x in leaves], spec)
        outputs = func(*call_args, **call_kwargs)
        by_clone = {id(i.clone): i for i in inputs.values()}
        for entry in inputs.values():
            if entry.mutated:
                entry.write_back()
        out_leaves, out_spec = tree_flatten(outputs)
        fixed = [_fix_output(y, by_clone, inputs.values(), reapply_views)
                 if isinstance(y, Tensor) else y for y in out_leaves]
        return tree_unflatten(fixed, out_spec)

    return wrapped


def _fix_output(y: Tensor, by_clone: dict[int, _Input], inputs: Any, reapply_views: bool
                ) -> Tensor:
    entry = by_clone.get(id(y))
    if entry is not None and not entry.mutated:
        return entry.original
    storage = physical(y)._storage
    if not reapply_views:
        viewed = physical(y)._base is not None or any(
            storage is physical(i.original)._storage for i in inputs)
        return y.clone(memory_format=_contiguous()) if viewed else y
    for i in inputs:
        if i.mutated or storage is not physical(i.clone)._storage:
            continue
        return _repoint(y, i)
    return y


def _repoint(y: Tensor, entry: _Input) -> Tensor:
    """``y`` (a view of an unmutated input's clone) as the same view of the caller's input,
    where the clone has the input's layout; PyTorch replays the view ops on the input."""
    clone, original = entry.clone, entry.original
    if type(y) is BatchedTensor or type(original) is BatchedTensor:
        return y   # a batched view: its geometry is per sample, not expressible as as_strided
    if clone.stride() != original.stride():
        return y   # an input that is not dense: the clone is laid out differently
    offset = original.storage_offset() + y.storage_offset() - clone.storage_offset()
    return original.as_strided(tuple(y.shape), y.stride(), offset)


def _contiguous() -> Any:
    import gputensor
    return gputensor.contiguous_format
