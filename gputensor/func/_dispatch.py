"""Routing op calls with batched arguments to batching rules.

Each op family declares its rule with ``@batching_rule(*op_names)`` in a ``_rules_*`` module of
this package. A rule is called as ``rule(ctx, *args, **kwargs)`` where ``ctx`` names the op, the
level being unwrapped, its batch size and ``ctx.call``, the op itself; rules call ops on
unwrapped values, so a value that is still batched (a lower level) dispatches again. An op
without a rule runs once per sample and the results are stacked (PyTorch's fallback, with its
performance warning); ``_set_vmap_fallback_enabled(False)`` turns that into an error.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from gputensor._tensor import Tensor

from ._batched import BatchedTensor, unwrap, wrap
from ._state import VMAP, VmapLevel

Rule = Callable[..., Any]
RULES: dict[str, Rule] = {}
# Ops whose result depends on random state: called even with no batched argument.
RANDOM_OPS: set[str] = set()


def batching_rule(*names: str, random: bool = False) -> Callable[[Rule], Rule]:
    def deco(rule: Rule) -> Rule:
        for name in names:
            if name in RULES:
                raise RuntimeError(f"batching rule for {name!r} is declared twice")
            RULES[name] = rule
            if random:
                RANDOM_OPS.add(name)
        return rule
    return deco


class Ctx:
    """What a rule knows about the call: the op's name and function, the level and its size."""

    __slots__ = ("name", "call", "level", "size", "vmap_level")

    def __init__(self, name: str, call: Callable, vmap_level: VmapLevel) -> None:
        self.name = name
        self.call = call
        self.vmap_level = vmap_level
        self.level = vmap_level.level
        self.size = vmap_level.size


def _max_level(args: tuple, kwargs: dict) -> int:
    top = 0
    for x in (*args, *kwargs.values()):
        if type(x) is BatchedTensor:
            top = max(top, x._level)
        elif type(x) in (list, tuple):
            for y in x:
                if type(y) is BatchedTensor:
                    top = max(top, y._level)
    return top


def dispatch(name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    level = _max_level(args, kwargs)
    if level == 0:
        if name not in RANDOM_OPS:
            return NotImplemented
        # A random op with no batched argument: the innermost vmap decides its randomness.
        level = VMAP.levels[-1].level
    ctx = Ctx(name, fn, VMAP.levels[level - 1])
    rule = RULES.get(name)
    if rule is None:
        return fallback(ctx, args, kwargs)
    return rule(ctx, *args, **kwargs)


VMAP.dispatch = dispatch

FALLBACK_WARNING = ("There is a performance drop because we have not yet implemented the "
                    "batching rule for {}. Please file us an issue on GitHub so that we can "
                    "prioritize its implementation.")


def _set_vmap_fallback_enabled(enabled: bool) -> None:
    """Whether ops without a batching rule run once per sample (True, the default, with a
    performance warning) or raise."""
    VMAP.fallback_enabled = bool(enabled)


def _get_vmap_fallback_enabled() -> bool:
    return VMAP.fallback_enabled


def fallback(ctx: Ctx, args: tuple, kwargs: dict) -> Any:
    """Run the op on each sample of ``ctx.level`` and stack the results."""
    if not VMAP.fallback_enabled:
        raise RuntimeError(f"Batching rule not implemented for {ctx.name}. We could not "
                           f"generate a fallback.")
    inplace = ctx.name.endswith("_") and not ctx.name.endswith("__")
    if inplace:
        self = args[0] if args else None
        if not (type(self) is BatchedTensor and self._level == ctx.level):
            raise inplace_error(ctx.name)
    warnings.warn(FALLBACK_WARNING.format(ctx.name), UserWarning, stacklevel=4)

    def sample(x: Any, i: int) -> Any:
        if type(x) is BatchedTensor and x._level == ctx.level:
            return x._value[i]
        if type(x) in (list, tuple):
            return type(x)(sample(y, i) for y in x)
        return x
    results = [ctx.call(*(sample(a, i) for a in args),
                        **{k: sample(v, i) for k, v in kwargs.items()})
               for i in range(ctx.size)]
    # An in-place op wrote each sample's view of the value: the result is ``self``.
    return args[0] if inplace else stack_results(ctx, results)


def stack_results(ctx: Ctx, results: list) -> Any:
    first = results[0]
    if isinstance(first, Tensor):
        import gputensor
        if any(r.shape != first.shape for r in results):
            raise RuntimeError(f"vmap: We do not support batching operators that can output "
                               f"dynamic shape. Attempted to vmap over {ctx.name}. Please file "
                               f"an issue at https://github.com/pytorch/pytorch/issues if you "
                               f"need this feature.")
        return wrap(gputensor.stack(results), ctx.level)
    if isinstance(first, tuple):
        parts = [stack_results(ctx, [r[j] for r in results]) for j in range(len(first))]
        return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)
    if isinstance(first, list):
        return [stack_results(ctx, [r[j] for r in results]) for j in range(len(first))]
    raise RuntimeError(f"vmap: {ctx.name} returned {type(first).__name__}, which depends on the "
                       f"sample's values; it cannot be batched")


def inplace_error(name: str) -> RuntimeError:
    return RuntimeError(
        f"vmap: {name}(self, *extra_args) is not possible because there exists a Tensor "
        f"`other` in extra_args that has more elements than `self`. This happened due to "
        f"`other` being vmapped over but `self` not being vmapped over in a vmap. Please try "
        f"to use out-of-place operators instead of {name}. If said operator is being called "
        f"inside the PyTorch framework, please file a bug report instead.")


def dynamic_shape_error(name: str) -> RuntimeError:
    return RuntimeError(f"vmap: We do not support batching operators that can output dynamic "
                        f"shape. Attempted to vmap over {name}. Please file an issue at "
                        f"https://github.com/pytorch/pytorch/issues if you need this feature.")


def unwrap_all(ctx: Ctx, xs: Any) -> Any:
    """``xs`` (a value or a list/tuple of them) unwrapped at ``ctx.level``."""
    if type(xs) in (list, tuple):
        return type(xs)(unwrap(x, ctx.level)[0] for x in xs)
    return unwrap(xs, ctx.level)[0]


def wrap_all(ctx: Ctx, out: Any) -> Any:
    """Wrap every tensor of an op's result (a tensor, tuple, namedtuple or list) at the level."""
    if isinstance(out, Tensor):
        return wrap(out, ctx.level)
    if isinstance(out, tuple):
        parts = [wrap_all(ctx, o) for o in out]
        return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)
    if isinstance(out, list):
        return [wrap_all(ctx, o) for o in out]
    return out
