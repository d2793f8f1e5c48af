"""Batching rules of the ops that take dimension arguments: reductions (with ``dim``/``keepdim``
and their "every dim" default), the softmax family, cumulative ops, sorting, and the shape and
view ops that name dims (transpose, movedim, select, split, cat, stack, gather, ...).

Each per-sample dim is normalised against the sample's rank (PyTorch's IndexError when out of
range) and moved past the batch dim, which stays in front. A 0-dim sample is lifted to a 1-dim
one for the call and the size-1 dim removed from the results. "Every dim" reductions flatten the
sample and reduce its one dim. Other tensor operands are expanded over the batch (gather's
index, cat's tensors); index operands that pick slices (``index_select``'s) must be unbatched,
otherwise the op runs per sample.
"""

from __future__ import annotations

import inspect
from typing import Any

from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

from ._batched import BatchedTensor, materialize, unwrap, wrap
from ._dispatch import Ctx, batching_rule, fallback, wrap_all

_SIGNATURES: dict[str, inspect.Signature] = {}


def _bind(ctx: Ctx, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    sig = _SIGNATURES.get(ctx.name)
    if sig is None:
        sig = _SIGNATURES[ctx.name] = inspect.signature(OPS[ctx.name.rstrip("_")].frontend)
    return sig.bind(*args, **kwargs)


def normalize(dim: Any, rank: int) -> int:
    """``dim`` normalised against a sample of ``rank`` dims (a 0-dim sample takes -1 and 0)."""
    if isinstance(dim, Tensor):
        dim = int(dim)
    if not isinstance(dim, int):
        raise TypeError(f"dim must be an int, not {type(dim).__name__}")
    lo, hi = (-rank, rank - 1) if rank else (-1, 0)
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but "
                         f"got {dim})")
    return dim + rank if dim < 0 else dim


def _shift(dims: Any, rank: int) -> Any:
    """Per-sample dims (an int or a sequence) as dims of the value (batch in front)."""
    if isinstance(dims, list | tuple):
        return type(dims)(normalize(d, rank) + 1 for d in dims)
    return normalize(dims, rank) + 1


def _squeeze_lifted(out: Any) -> Any:
    if isinstance(out, Tensor):
        return out.squeeze(1)
    if isinstance(out, tuple):
        parts = [_squeeze_lifted(o) for o in out]
        return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)
    return out


# -- reductions -------------------------------------------------------------------------------
# dim=None (or () for amax/amin) reduces every dim; these return a tuple only when given a dim.
_TUPLE_WITH_DIM = {"max", "min", "median", "nanmedian"}
REDUCTIONS = ("sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "all",
              "any", "std", "var", "std_mean", "var_mean", "logsumexp", "norm", "nansum",
              "nanmean", "count_nonzero", "median", "nanmedian", "aminmax")


@batching_rule(*REDUCTIONS)
def reduction(ctx: Ctx, *args: Any, **kwargs: Any) -> Any:
    b = _bind(ctx, args, kwargs)
    a = b.arguments
    if ctx.name in ("max", "min") and (isinstance(a.get("dim"), Tensor) or a.get("other")
                                       is not None):
        other = a["dim"] if isinstance(a.get("dim"), Tensor) else a["other"]
        return OPS["maximum" if ctx.name == "max" else "minimum"].frontend(a["input"], other)
    x = a["input"]
    value, batched = unwrap(x, ctx.level)
    if not batched:
        return fallback(ctx, args, kwargs)
    rank = x.dim()
    dim = a.get("dim")
    keepdim = a.get("keepdim", False)
    if dim is None or (isinstance(dim, list | tuple) and not dim):
        # Every dim: flatten the sample and reduce its one dim.
        a["input"] = value.reshape(ctx.size, -1)
        a["dim"] = 1
        out = ctx.call(*b.args, **b.kwargs)
        if ctx.name in _TUPLE_WITH_DIM:
            out = out[0]
        if keepdim:
            shape = (ctx.size,) + (1,) * rank
            out = out.reshape(shape) if isinstance(out, Tensor) else \
                type(out)(o.reshape(shape) for o in out)
        return wrap_all(ctx, out)
    if rank == 0:
        normalize(dim if isinstance(dim, int) else dim[0], 0)
        a["input"] = value.unsqueeze(1)
        a["dim"] = 1 if isinstance(dim, int) else (1,)
        return wrap_all(ctx, _squeeze_lifted(ctx.call(*b.args, **b.kwargs)))
    a["input"] = value
    a["dim"] = _shift(dim, rank)
    return wrap_all(ctx, ctx.call(*b.args, **b.kwargs))


# -- ops with one dim over one tensor -----------------------------------------------------------
# op -> its dim parameters; each normalised against the sample's rank plus the op's extra rank.
SINGLE_DIM = {
    "softmax": ("dim",), "log_softmax": ("dim",), "cumsum": ("dim",), "cumprod": ("dim",),
    "logcumsumexp": ("dim",), "cummax": ("dim",), "cummin": ("dim",), "sort": ("dim",),
    "argsort": ("dim",), "topk": ("dim",), "kthvalue": ("dim",), "transpose": ("dim0", "dim1"),
    "select": ("dim",), "narrow": ("dim",), "unbind": ("dim",), "chunk": ("dim",),
    "split": ("dim",), "tensor_split": ("dim",), "split_with_sizes": ("dim",),
    "unsqueeze": ("dim",), "unflatten": ("dim",), "diagonal": ("dim1", "dim2"),
    "diag_embed": ("dim1", "dim2"), "movedim": ("source", "destination"), "flip": ("dims",),
    "permute": ("dims",), "unsafe_chunk": ("dim",), "unsafe_split": ("dim",),
    "unsafe_split_with_sizes": ("dim",),
}
_EXTRA_RANK = {"unsqueeze": 1, "diag_embed": 1}
# 0-dim samples are valid for these (dim -1 or 0); they run on a lifted 1-dim sample.
_SCALAR_OK = {"softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin",
              "sort", "argsort", "topk", "kthvalue"}


@batching_rule(*SINGLE_DIM)
def single_dim(ctx: Ctx, *args: Any, **kwargs: Any) -> Any:
    b = _bind(ctx, args, kwargs)
    a = b.arguments
    first = next(iter(a))
    x = a[first]
    value, batched = unwrap(x, ctx.level)
    if not batched:
        return fallback(ctx, args, kwargs)
    rank = x.dim() + _EXTRA_RANK.get(ctx.name, 0)
    names = SINGLE_DIM[ctx.name]
    defaults = b.signature.parameters
    lifted = rank == 0 and ctx.name in _SCALAR_OK
    for name in names:
        dim = a.get(name, defaults[name].default)
        if dim is None and ctx.name in ("softmax", "log_softmax"):
            dim = 0 if rank in (0, 1, 3) else 1   # PyTorch's implicit softmax dim
        if ctx.name in ("flip", "permute") and len(dim) == 1 and isinstance(dim[0], list | tuple):
            dim = tuple(dim[0])
        if lifted:
            normalize(dim, 0)
            a[name] = 1
        else:
            a[name] = _shift(dim, rank)
    a[first] = value.unsqueeze(1) if lifted else value
    if ctx.name == "permute":
        a["dims"] = (0, *a["dims"])
    out = ctx.call(*b.args, **b.kwargs)
    return wrap_all(ctx, _squeeze_lifted(out) if lifted else out)


@batching_rule("squeeze")
def squeeze(ctx: Ctx, x: Tensor, dim: Any = None) -> Tensor:
    value, _ = unwrap(x, ctx.level)
    rank = x.dim()
    if dim is None:
        dims = tuple(i + 1 for i, s in enumerate(x.shape) if s == 1)
    elif rank == 0:
        for d in (dim if isinstance(dim, list | tuple) else (dim,)):
            normalize(d, 0)
        return x
    else:
        dims = _shift(dim, rank)
    return wrap(value.squeeze(dims) if dims != () else value, ctx.level)


@batching_rule("flatten")
def flatten(ctx: Ctx, x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    value, _ = unwrap(x, ctx.level)
    rank = x.dim()
    if rank == 0:
        normalize(start_dim, 0)
        normalize(end_dim, 0)
        return wrap(value.reshape(ctx.size, 1), ctx.level)
    return wrap(value.flatten(_shift(start_dim, rank), _shift(end_dim, rank)), ctx.level)


@batching_rule("roll")
def roll(ctx: Ctx, x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    value, _ = unwrap(x, ctx.level)
    if dims is None:
        rolled = value.reshape(ctx.size, -1).roll(shifts, 1)
        return wrap(rolled.reshape(value.shape), ctx.level)
    return wrap(value.roll(shifts, _shift(dims, max(x.dim(), 1))), ctx.level)


# -- several tensors along a dim ----------------------------------------------------------------
@batching_rule("cat", "stack")
def cat_stack(ctx: Ctx, tensors: Any, dim: int = 0, **kwargs: Any) -> Tensor:
    tensors = list(tensors)
    rank = max(t.dim() for t in tensors) + (ctx.name == "stack")
    values = [materialize(t, ctx.level, ctx.size) for t in tensors]
    if "axis" in kwargs and kwargs["axis"] is not None:
        dim = kwargs.pop("axis")
    kwargs.pop("axis", None)
    if ctx.name == "cat" and rank == 1 and all(t.dim() == 1 for t in tensors):
        return wrap(ctx.call(values, 1, **kwargs), ctx.level)
    return wrap(ctx.call(values, _shift(dim, rank), **kwargs), ctx.level)


# op -> (the dim parameter, tensor parameters expanded over the batch, index parameters that
# must be unbatched)
TENSOR_DIM = {
    "gather": ("dim", ("input", "index"), ()),
    "scatter": ("dim", ("input", "index", "src"), ()),
    "scatter_add": ("dim", ("input", "index", "src"), ()),
    "take_along_dim": ("dim", ("input", "indices"), ()),
    "index_select": ("dim", ("input",), ("index",)),
    "index_add": ("dim", ("input", "source"), ("index",)),
    "index_copy": ("dim", ("input", "source"), ("index",)),
    "index_fill": ("dim", ("input",), ("index",)),
    "diff": ("dim", ("input", "prepend", "append"), ()),
    "cross": ("dim", ("input", "other"), ()),
    "repeat_interleave": ("dim", ("input",), ("repeats",)),
    "_softmax_backward": ("dim", ("grad", "output"), ()),
    "_log_softmax_backward": ("dim", ("grad", "output"), ()),
}


@batching_rule(*TENSOR_DIM)
def tensor_dim(ctx: Ctx, *args: Any, **kwargs: Any) -> Any:
    b = _bind(ctx, args, kwargs)
    a = b.arguments
    dim_name, expanded, selectors = TENSOR_DIM[ctx.name]
    if any(type(a.get(s)) is BatchedTensor and a[s]._level == ctx.level for s in selectors):
        return fallback(ctx, args, kwargs)
    x = a[next(iter(a))]
    rank = x.dim()
    dim = a.get(dim_name)
    if dim is None and ctx.name == "cross":
        dim = next((i for i, s in enumerate(x.shape) if s == 3), -1)
    if dim is None:   # take_along_dim and repeat_interleave flatten the sample first
        for name in expanded:
            if isinstance(a.get(name), Tensor):
                a[name] = materialize(a[name], ctx.level, ctx.size).reshape(ctx.size, -1)
        a[dim_name] = 1
        return wrap(ctx.call(*b.args, **b.kwargs), ctx.level)
    for name in expanded:
        if isinstance(a.get(name), Tensor):
            a[name] = materialize(a[name], ctx.level, ctx.size)
    if rank == 0:
        normalize(dim, 0)
        for name in expanded:
            if isinstance(a.get(name), Tensor) and a[name].dim() == 1:
                a[name] = a[name].unsqueeze(1)
        a[dim_name] = 1
        return wrap(ctx.call(*b.args, **b.kwargs).squeeze(1), ctx.level)
    a[dim_name] = _shift(dim, rank)
    return wrap(ctx.call(*b.args, **b.kwargs), ctx.level)
