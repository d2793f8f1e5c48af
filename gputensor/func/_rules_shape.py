"""Batching rules of the shape ops that take sizes (view, reshape, expand, repeat, tile, t) and
of indexing (``x[index]`` with a batched ``x``; a batched index runs per sample), and the
``*_like`` factories.

Sizes are per-sample sizes, so the value takes the batch size in front of them; expand and
repeat first give the value the rank they produce.
"""

from __future__ import annotations

from typing import Any

from gputensor._tensor import Tensor, parse_size

from ._batched import BatchedTensor, unwrap, wrap
from ._dispatch import Ctx, batching_rule, fallback


def _sizes(args: tuple) -> tuple:
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple) else args


@batching_rule("view", "reshape")
def view(ctx: Ctx, x: Tensor, *shape: Any) -> Tensor:
    value, _ = unwrap(x, ctx.level)
    if len(shape) == 1 and not isinstance(shape[0], int | list | tuple):
        return wrap(ctx.call(value, shape[0]), ctx.level)   # view(dtype)
    return wrap(ctx.call(value, (ctx.size, *parse_size(shape))), ctx.level)


@batching_rule("expand", "broadcast_to")
def expand(ctx: Ctx, x: Tensor, *sizes: Any, **kwargs: Any) -> Tensor:
    value, _ = unwrap(x, ctx.level)
    sizes = tuple(kwargs.get("size", _sizes(sizes)))
    if len(sizes) < x.dim():
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(x.shape)}}}, size={list(sizes)}): "
                           f"the number of sizes provided ({len(sizes)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({x.dim()})")
    for _ in range(len(sizes) - x.dim()):
        value = value.unsqueeze(1)
    return wrap(value.expand(ctx.size, *sizes), ctx.level)


@batching_rule("repeat", "tile")
def repeat(ctx: Ctx, x: Tensor, *sizes: Any) -> Tensor:
    value, _ = unwrap(x, ctx.level)
    sizes = tuple(_sizes(sizes))
    if ctx.name == "repeat" and len(sizes) < x.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    sizes = (1,) * (x.dim() - len(sizes)) + sizes   # tile pads its dims in front
    for _ in range(len(sizes) - x.dim()):
        value = value.unsqueeze(1)
    return wrap(value.repeat(1, *sizes), ctx.level)


@batching_rule("t")
def transpose_2d(ctx: Ctx, x: Tensor) -> Tensor:
    if x.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    value, _ = unwrap(x, ctx.level)
    return wrap(value.transpose(1, 2) if x.dim() == 2 else value, ctx.level)


# -- indexing -----------------------------------------------------------------------------------
def _batched_in(index: Any, level: int) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(type(i) is BatchedTensor and i._level == level for i in items)


@batching_rule("__getitem__")
def getitem(ctx: Ctx, x: Tensor, index: Any) -> Tensor:
    value, batched = unwrap(x, ctx.level)
    if not batched or _batched_in(index, ctx.level):
        return fallback(ctx, (x, index), {})
    items = index if isinstance(index, tuple) else (index,)
    out = value[(slice(None), *items)]
    # Advanced indices apart from each other put their dims first, before the batch dim.
    positions = [i for i, item in enumerate(items)
                 if isinstance(item, Tensor | list) and not
                 (isinstance(item, Tensor) and item.dtype.is_floating_point)]
    if positions and positions != list(range(positions[0], positions[-1] + 1)):
        shapes = [item.shape if isinstance(item, Tensor) else (len(item),)
                  for item in (items[p] for p in positions)]
        from gputensor.kernels.layout import broadcast_shapes
        out = out.movedim(len(broadcast_shapes(*shapes)), 0)
    return wrap(out, ctx.level)


@batching_rule("zeros_like", "ones_like", "empty_like", "full_like")
def like_factory(ctx: Ctx, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """A batched ``x`` gives a batched result (its value's like); a batched fill value of
    ``full_like`` has no rule."""
    value, batched = unwrap(x, ctx.level)
    if not batched or any(type(a) is BatchedTensor for a in (*args, *kwargs.values())):
        return fallback(ctx, (x, *args), kwargs)
    return wrap(ctx.call(value, *args, **kwargs), ctx.level)
