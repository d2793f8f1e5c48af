"""Batching rules of the broadcasting family: every elementwise op of the registry (out of place
and in place) and the ops that broadcast their tensor operands the same way (``where``,
``clamp``, ``lerp``, ``masked_fill``, ...).

Each batched operand's per-sample dims are right-aligned with the others' by inserting size-1
dims after its batch dim, so broadcasting the values broadcasts the samples. A batched 0-dim
sample becomes a 1-dim value, which would rank above dimensioned tensors in promotion, so
operands of mixed dtypes are first cast to the dtype the per-sample call promotes to.
"""

from __future__ import annotations

from typing import Any

import gputensor
from gputensor._ops._core import result_type
from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

from ._batched import BatchedTensor, unwrap, wrap
from ._dispatch import Ctx, batching_rule, inplace_error


def _pad(x: Any, level: int, rank: int) -> Any:
    """``x``'s value with size-1 dims after the batch dim up to ``rank`` sample dims."""
    value, batched = unwrap(x, level)
    if not batched:
        return x
    for _ in range(rank - x.dim()):
        value = value.unsqueeze(1)
    return value


def _promoted(ctx: Ctx, operands: list[Any]) -> list[Any]:
    """Operands cast to their per-sample promoted dtype when a batched one is 0-dim and the
    tensor dtypes differ (promotion would otherwise rank the batched scalar too high)."""
    tensors = [x for x in operands if isinstance(x, Tensor)]
    if len({t._dtype for t in tensors}) < 2 or not any(
            type(t) is BatchedTensor and t._level == ctx.level and not t._shape
            for t in tensors):
        return operands
    dt = result_type(*operands)
    return [x.to(dt) if isinstance(x, Tensor) else x for x in operands]


def broadcasting(ctx: Ctx, *args: Any, **kwargs: Any) -> Any:
    if ctx.name in _ELEMENTWISE_ARITY:
        n = _ELEMENTWISE_ARITY[ctx.name]
        args = (*_promoted(ctx, list(args[:n])), *args[n:])
    rank = max((x.dim() for x in (*args, *kwargs.values()) if isinstance(x, Tensor)),
               default=0)
    out = ctx.call(*(_pad(a, ctx.level, rank) for a in args),
                   **{k: _pad(v, ctx.level, rank) for k, v in kwargs.items()})
    return wrap(out, ctx.level)


def broadcasting_inplace(ctx: Ctx, self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    value, batched = unwrap(self, ctx.level)
    if not batched:
        raise inplace_error(ctx.name)
    rank = self.dim()
    ctx.call(value, *(_pad(a, ctx.level, rank) for a in args),
             **{k: _pad(v, ctx.level, rank) for k, v in kwargs.items()})
    return self


_ELEMENTWISE_ARITY = {name: op.arity for name, op in OPS.items() if op.expr is not None}
BROADCASTING_OPS = (*_ELEMENTWISE_ARITY, "where", "clamp", "clamp_min", "clamp_max", "lerp",
                    "polar", "complex", "ldexp", "logaddexp2", "float_power",
                    "square", "positive", "div", "rsub", "isclose", "logit", "isneginf",
                    "isposinf", "isreal", "real", "imag", "conj", "resolve_conj", "resolve_neg",
                    "clone", "polygamma", "mvlgamma", "gcd", "lcm", "nextafter",
                    "conj_physical")
batching_rule(*BROADCASTING_OPS)(broadcasting)
batching_rule(*(name + "_" for name, op in OPS.items() if op.expr is not None and op.inplace))(
    broadcasting_inplace)


@batching_rule("masked_fill")
def masked_fill(ctx: Ctx, self: Tensor, mask: Tensor, value: Any) -> Tensor:
    """A batched fill value is one scalar per sample: ``where`` selects it."""
    if type(value) is BatchedTensor and value._level == ctx.level:
        if value.dim() != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.dim()} dimension(s).")
        return gputensor.where(mask, value.to(self.dtype), self)
    return broadcasting(ctx, self, mask, value)
