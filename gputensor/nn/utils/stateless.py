"""``functional_call`` (PyTorch's ``torch.nn.utils.stateless`` / ``torch.func``): run a module
with some of its parameters and buffers replaced by given tensors.

The module's own tensors are swapped out by dotted name for the duration of the call and put
back afterwards, even when the forward raises, so the module can serve as a pure function of
its weights (meta-learning, ensembling, differentiating with respect to new weights).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from gputensor._tensor import Tensor
from gputensor.nn.modules.module import Module

__all__ = ["functional_call"]

# Marks a name the module did not have before the swap (so restoring deletes it).
_MISSING: Any = object()


def _submodule(module: Module, path: str, memo: dict[str, Module]) -> Module:
    """The submodule at dotted ``path`` (memoised for the swap-in and swap-back walks)."""
    if not path:
        return module
    if path in memo:
        return memo[path]
    prefix, _, attr = path.rpartition(".")
    parent = _submodule(module, prefix, memo)
    try:
        sub = getattr(parent, attr)
    except AttributeError as ex:
        raise AttributeError(f"{parent._get_name()} has no attribute `{attr}`") from ex
    if not isinstance(sub, Module):
        raise TypeError(f"submodule `{path}`: {sub} is not an instance of gputensor.nn.Module")
    memo[path] = sub
    return sub


def _swap_tensor(module: Module, name: str, tensor: Any) -> Any:
    """Put ``tensor`` (or, for ``_MISSING``, nothing) under ``name`` on ``module`` and return
    what was there. Parameters and buffers are replaced in their dicts directly, so any tensor
    (not only a Parameter) can stand in for a parameter."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of gputensor.Tensor")
    if "." in name:
        raise KeyError('tensor name can\'t contain "."')
    if name == "":
        raise KeyError('tensor name can\'t be empty string ""')
    for store in (module._parameters, module._buffers):
        if name in store:
            orig = store[name]
            if tensor is _MISSING:
                del store[name]
            else:
                store[name] = tensor
            return orig
    orig = getattr(module, name) if hasattr(module, name) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of gputensor.Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif hasattr(module, name):
        delattr(module, name)
    return orig


def _swap_all(module: Module, named: Mapping[str, Any], memo: dict[str, Module]
              ) -> dict[str, Any]:
    """Swap every entry in; on failure, swap back what was done and re-raise."""
    originals: dict[str, Any] = {}
    try:
        for name, tensor in named.items():
            prefix, _, attr = name.rpartition(".")
            originals[name] = _swap_tensor(_submodule(module, prefix, memo), attr, tensor)
    except Exception:
        _swap_back(module, originals, memo)
        raise
    return originals


def _swap_back(module: Module, originals: Mapping[str, Any], memo: dict[str, Module]
               ) -> dict[str, Any]:
    current: dict[str, Any] = {}
    for name, tensor in originals.items():
        prefix, _, attr = name.rpartition(".")
        current[name] = _swap_tensor(_submodule(module, prefix, memo), attr, tensor)
    return current


def _untie(module: Module, given: dict[str, Tensor]) -> dict[str, Tensor]:
    """Extend ``given`` so a value given for one of several tied names (one tensor reachable
    under several names) reaches all of them; conflicting values for tied names are an
    error."""
    named: dict[str, Tensor] = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    groups: dict[int, set[str]] = {}
    for name, tensor in named.items():
        groups.setdefault(id(tensor), set()).add(name)
    tied: dict[str, set[str]] = {n: g for g in groups.values() if len(g) > 1 for n in g}
    given_tied = [n for n in given if n in tied]
    for name in given_tied:
        values = {id(given[n]) for n in tied[name] if n in given}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys "
                             f"{sorted(tied[name])}, which are tied. Consider using "
                             f"tie_weights=False")
    untied = dict(given)
    for name in given_tied:
        for other in tied[name]:
            untied[other] = given[name]
    return untied


@contextmanager
def _reparametrize_module(module: Module, parameters_and_buffers: dict[str, Tensor],
                          tie_weights: bool = False, strict: bool = False) -> Iterator[None]:
    untied = _untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(valid - set(untied)), sorted(set(untied) - valid)
        error_msgs = []
        if unexpected:
            error_msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            error_msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if error_msgs:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
                module._get_name(), "\n\t".join(error_msgs)))
    memo: dict[str, Module] = {}
    originals: dict[str, Any] = {}
    try:
        originals = _swap_all(module, untied, memo)
        yield
    finally:
        current = _swap_back(module, originals, memo)
        # What the forward left under a given name (e.g. a reassigned running statistic)
        # flows back into the caller's dict, as in PyTorch.
        parameters_and_buffers.update({k: current[k] for k in parameters_and_buffers
                                       if k in current})


def functional_call(module: Module,
                    parameters_and_buffers: dict[str, Tensor] | Sequence[dict[str, Tensor]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the named parameters and buffers replaced
    (``torch.nn.utils.stateless.functional_call``).

    ``parameters_and_buffers`` maps dotted names (as in ``named_parameters()``) to
    tensors; a list of such dicts is merged (a name in two of them is an error). With
    ``tie_weights`` a value given for one of several tied names applies to all of them; with
    ``strict`` the names must be exactly the module's parameters and buffers. A single
    non-tuple ``args`` is the one positional argument.
    """
    parameter_and_buffer_dicts = parameters_and_buffers
    if isinstance(parameter_and_buffer_dicts, dict):
        parameters_and_buffers = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             f"functional call is ambiguous")
        parameters_and_buffers = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                         f"dicts, but got {type(parameter_and_buffer_dicts)}")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights,
                               strict=strict):
        return module(*args, **kwargs)
