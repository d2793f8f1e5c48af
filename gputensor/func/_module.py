"""Running modules with substituted state: ``functional_call``, ``stack_module_state`` and
``replace_all_batch_norm_modules_`` (torch.func's names and semantics).

``functional_call`` puts the given tensors into the modules' parameter and buffer tables for
the duration of the call and restores the originals afterwards, even when the call raises.
With ``tie_weights`` a tensor given for one name of a tied parameter (one object registered
under several names) replaces every name of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import gputensor
from gputensor._tensor import Tensor


def _owner(module: Any, name: str) -> tuple[Any, str]:
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def _tied_names(module: Any) -> dict[str, list[str]]:
    """Each parameter/buffer name -> every name under which the same tensor is registered."""
    by_id: dict[int, list[str]] = {}
    named = list(module.named_parameters(remove_duplicate=False)) + \
        list(module.named_buffers(remove_duplicate=False))
    for name, t in named:
        by_id.setdefault(id(t), []).append(name)
    return {name: by_id[id(t)] for name, t in named}


@contextlib.contextmanager
def _substituted(module: Any, tensors: dict[str, Any]) -> Iterator[None]:
    saved = []
    try:
        for name, value in tensors.items():
            owner, leaf = _owner(module, name)
            table = owner._parameters if leaf in owner._parameters else \
                owner._buffers if leaf in owner._buffers else None
            if table is None:
                saved.append((owner, leaf, None, owner.__dict__.get(leaf, _MISSING)))
                object.__setattr__(owner, leaf, value)
                continue
            saved.append((owner, leaf, table, table[leaf]))
            table[leaf] = value
        yield
    finally:
        for owner, leaf, table, old in reversed(saved):
            if table is not None:
                table[leaf] = old
            elif old is _MISSING:
                owner.__dict__.pop(leaf, None)
            else:
                object.__setattr__(owner, leaf, old)


_MISSING = object()


def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """Call ``module`` with its parameters and buffers replaced by the given tensors."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        tensors = dict(dicts)
    elif isinstance(dicts, Sequence) and all(isinstance(d, dict) for d in dicts):
        tensors = {}
        seen: set[str] = set()
        for d in dicts:
            repeated = seen & set(d)
            if repeated:
                raise ValueError(f"{sorted(repeated)} appeared in multiple dictionaries; behavior "
                                 f"of functional call is ambiguous")
            seen |= set(d)
            tensors.update(d)
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                         f"dicts, but got {type(dicts)}")
    if tie_weights:
        tied = _tied_names(module)
        for name in list(tensors):
            group = tied.get(name, [name])
            given = [n for n in group if n in tensors]
            if len(given) > 1 and any(tensors[n] is not tensors[given[0]] for n in given):
                raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, "
                                 f"which are tied. Consider using tie_weights=False")
            for n in group:
                tensors.setdefault(n, tensors[name])
    if strict:
        expected = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
            {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(expected - set(tensors))
        unexpected = sorted(set(tensors) - expected)
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected)
                             + ".")
            if missing:
                parts.append("Missing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            raise RuntimeError(f"Error(s) in reloading state_dict for "
                               f"{type(module).__name__}:\n\t" + "\n\t".join(parts))
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _substituted(module, tensors):
        return module(*args, **(kwargs or {}))


def stack_module_state(models: Sequence[Any]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and buffers of same-structured ``models`` stacked along a new dim 0
    (parameters as new leaves that require grad, for vmap over ``functional_call``)."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/"
                           "eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named: list[dict[str, Tensor]], params: bool) -> dict[str, Tensor]:
        out = {}
        for name in named[0]:
            value = gputensor.stack([d[name].detach() for d in named])
            out[name] = value.requires_grad_() if params and named[0][name].requires_grad \
                else value
        return out
    params = stacked([dict(m.named_parameters()) for m in models], True)
    buffers = stacked([dict(m.named_buffers()) for m in models], False)
    return params, buffers


def replace_all_batch_norm_modules_(root: Any) -> Any:
    """Make every batch norm module of ``root`` stop tracking running statistics (in place),
    so it normalises with batch statistics under vmap."""
    from gputensor.nn.modules.batchnorm import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
