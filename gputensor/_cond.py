"""``gt.cond(pred, true_fn, false_fn, operands)``: PyTorch's control-flow operator, run eagerly.

A Python bool/int/float predicate just runs one branch, as in PyTorch. A tensor (or SymBool)
predicate gets the checks PyTorch's tracer makes of both branches, since a program written
against ``torch.cond`` must pass them: operands are tensors in nested tuples/lists/dicts;
branches must not mutate their inputs nor return them (or views of them); they return tensors
and ints of the same structure, and matching tensors have one dtype (sizes may differ, as
with PyTorch's dynamic shapes). The chosen branch runs on the operands (gradients flow
through it); the other one runs under no_grad on clones, only to be checked. PyTorch finds a
mutating branch while tracing, before anything runs; here the taken branch has already written
its operands when the error is raised.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from gputensor.func._pytree import tree_flatten, tree_map


def _validate(pred: Any, true_fn: Any, false_fn: Any, operands: Any) -> None:
    from gputensor import Tensor
    from gputensor._sym import SymBool

    if not isinstance(pred, (builtins.bool, Tensor, SymBool)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)) or not all(
            isinstance(t, Tensor) for t in tree_flatten(operands)[0]):
        raise RuntimeError("Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")


def _run_checked(fn: Callable, operands: Any, which: str) -> tuple[Any, list[Any], Any]:
    """Run one branch; raise PyTorch's errors for mutation, aliasing and non-int constants."""
    from gputensor import Tensor

    inputs = tree_flatten(operands)[0]
    versions = [t._version for t in inputs]
    out = fn(*operands)
    if any(t._version != v for t, v in zip(inputs, versions, strict=True)):
        raise RuntimeError(f"torch.cond: the {which} branch mutates an input; higher order "
                           f"ops do not support input mutation.")
    leaves, spec = tree_flatten(out)
    storages = {id(t._storage) for t in inputs}
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            if id(leaf._storage) in storages:
                raise RuntimeError(f"torch.cond: the {which} branch returns an input or a view "
                                   f"of one; higher order ops do not support aliasing (return "
                                   f"input.clone() instead).")
        elif not isinstance(leaf, builtins.int):
            raise RuntimeError(f"torch.cond: unsupported branch return type "
                               f"{type(leaf).__name__} from the {which} branch: constants "
                               f"returned from branches must be ints.")
    return out, leaves, spec


def cond(pred: bool | int | float | Any, true_fn: Callable, false_fn: Callable,
         operands: tuple | list = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``."""
    if isinstance(pred, (builtins.bool, builtins.int, builtins.float)):
        return true_fn(*operands) if pred else false_fn(*operands)
    _validate(pred, true_fn, false_fn, operands)
    import gputensor as gt

    take = builtins.bool(pred)
    taken, other = (true_fn, false_fn) if take else (false_fn, true_fn)
    names = ("true", "false") if take else ("false", "true")
    out, leaves, spec = _run_checked(taken, operands, names[0])
    with gt.no_grad():
        clones = tree_map(lambda t: t.clone(), operands)
        _, other_leaves, other_spec = _run_checked(other, clones, names[1])
    specs = {names[0]: spec, names[1]: other_spec}
    if spec != other_spec:
        raise RuntimeError(f"Unmatched output spec from torch.cond branches: true branch "
                           f"tree_spec {specs['true']} vs false branch tree_spec "
                           f"{specs['false']}.")
    for a, b in zip(leaves, other_leaves, strict=True):
        a_t, b_t = isinstance(a, gt.Tensor), isinstance(b, gt.Tensor)
        if a_t != b_t:
            raise RuntimeError("When merging two branches' output in torch.cond, expected "
                               "both to be tensors or both ints, but got "
                               f"{type(a).__name__} and {type(b).__name__}.")
        if a_t and a.dtype is not b.dtype:
            first, second = (a, b) if take else (b, a)
            raise RuntimeError(f"When merging two branches' output in torch.cond,  expected "
                               f"same dtype but got {first.dtype} and {second.dtype}.")
        if a_t and a.device != b.device:
            raise RuntimeError(f"When merging two branches' output in torch.cond, expected "
                               f"same device but got {a.device} and {b.device}.")
    return out
