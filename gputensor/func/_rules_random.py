"""Batching rules of the random ops, per vmap's ``randomness``.

``'error'`` refuses any random op inside the vmap (PyTorch's message). ``'same'`` draws one
sample's worth and shares it across the batch. ``'different'`` gives every sample its own
draw: ops sampling from batched tensors (``bernoulli(p)``, ``rand_like(x)``) sample the value
once, which holds the whole batch; factories with no batched argument (``rand(3)``) draw each
sample in turn with the level hidden, so enclosing vmaps still batch the draws. The in-place
samplers (``x.uniform_()``, ...) of a batched tensor follow the same modes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gputensor
from gputensor._tensor import Tensor

from ._batched import BatchedTensor, materialize, unwrap, wrap
from ._dispatch import Ctx, batching_rule
from ._state import VMAP, VmapLevel

RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either "
                "use the 'same' or 'different' randomness flags on vmap or perform the "
                "randomness operation out of vmap")
UNBATCHED_INPLACE_ERROR = ("vmap: Cannot ask for different inplace randomness on an unbatched "
                           "tensor. This will appear like same randomness. If this is necessary "
                           "for your usage, please file an issue with functorch.")


class _hidden:
    """Run with ``level`` (the innermost active one) taken off the vmap stack."""

    def __init__(self, level: VmapLevel) -> None:
        self.level = level

    def __enter__(self) -> None:
        VMAP.levels.remove(self.level)
        VMAP.depth -= 1

    def __exit__(self, *exc: Any) -> None:
        VMAP.levels.append(self.level)
        VMAP.levels.sort(key=lambda lv: lv.level)
        VMAP.depth += 1


def _any_batched(ctx: Ctx, args: tuple, kwargs: dict) -> bool:
    return any(type(x) is BatchedTensor and x._level == ctx.level
               for x in (*args, *kwargs.values()))


@batching_rule("rand", "randn", "randint", "randperm", "normal", "bernoulli", "poisson",
               "multinomial", "binomial", "_standard_gamma", "_sample_dirichlet",
               "rand_like", "randn_like", "randint_like", random=True)
def random_op(ctx: Ctx, *args: Any, **kwargs: Any) -> Any:
    mode = ctx.vmap_level.randomness
    if mode == "error":
        raise RuntimeError(RANDOM_ERROR)
    batched = _any_batched(ctx, args, kwargs)
    if mode == "same":
        # One draw shared by every sample; a *_like op takes its first sample's shape.
        if not batched:
            with _hidden(ctx.vmap_level):
                return ctx.call(*args, **kwargs)
        if ctx.name.endswith("_like"):
            first = unwrap(args[0], ctx.level)[0][0]
            with _hidden(ctx.vmap_level):
                return ctx.call(first, *args[1:], **kwargs)
        raise RuntimeError("Vmap does not currently support same randomness with a batched "
                           "tensor input. Please file an issue with functorch")
    if not batched:
        with _hidden(ctx.vmap_level):
            samples = [ctx.call(*args, **kwargs) for _ in range(ctx.size)]
        return wrap(gputensor.stack(samples), ctx.level)
    n = ctx.size
    values = [materialize(a, ctx.level, n) if isinstance(a, Tensor) else a for a in args]
    kw = {k: materialize(v, ctx.level, n) if isinstance(v, Tensor) else v
          for k, v in kwargs.items()}
    with _hidden(ctx.vmap_level):   # the value holds the batch: its draws are per sample
        return wrap(ctx.call(*values, **kw), ctx.level)


def _inplace_sampler(name: str) -> Callable:
    def method(self: BatchedTensor, *args: Any, **kwargs: Any) -> BatchedTensor:
        vmap_level = VMAP.levels[self._level - 1]
        if vmap_level.randomness == "error":
            raise RuntimeError(RANDOM_ERROR)
        value = self._value
        if vmap_level.randomness == "different":
            getattr(value, name)(*args, **kwargs)
        else:
            sample = value[0].clone()
            getattr(sample, name)(*args, **kwargs)
            value.copy_(sample.expand_as(value))
        return self
    method.__name__ = name
    return method


for _name in ("uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_",
              "log_normal_", "geometric_"):
    setattr(BatchedTensor, _name, _inplace_sampler(_name))
