"""Batching rules of the matmul family, convolutions and the nn ops with a leading batch.

``matmul`` gives each batched operand the rank the other broadcasts against (a vector sample
becomes a one-row or one-column matrix first); mm/bmm/mv/dot check per-sample ranks and then
batch as matmul; linear and the add* products are their decompositions on batched tensors.
Convolutions fold the vmap batch into the conv's batch (batched input) or into its groups
(batched weight). Ops that already batch over leading dims (linalg, tril/triu, layer norm)
run on the value directly.
"""

from __future__ import annotations

from typing import Any

import gputensor
from gputensor._tensor import Tensor

from ._batched import BatchedTensor, materialize, unwrap, wrap
from ._dispatch import Ctx, batching_rule, fallback, wrap_all


def _batched(x: Any, level: int) -> bool:
    return type(x) is BatchedTensor and x._level == level


@batching_rule("matmul")
def matmul(ctx: Ctx, a: Tensor, b: Tensor, *, out: Any = None) -> Tensor:
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.dim()}D and {b.dim()}D")
    va, ba = unwrap(a, ctx.level)
    vb, bb = unwrap(b, ctx.level)
    ra, rb = a.dim(), b.dim()
    if ra == 1:
        va = va.unsqueeze(-2)
    if rb == 1:
        vb = vb.unsqueeze(-1)
    rank = max(ra, rb, 2)
    if ba:
        for _ in range(rank - max(ra, 2)):
            va = va.unsqueeze(1)
    if bb:
        for _ in range(rank - max(rb, 2)):
            vb = vb.unsqueeze(1)
    result = gputensor.matmul(va, vb)
    if ra == 1:
        result = result.squeeze(-2)
    if rb == 1:
        result = result.squeeze(-1)
    return wrap(result, ctx.level)


_RANKS = {"mm": (2, 2, "self must be a matrix", "mat2 must be a matrix"),
          "bmm": (3, 3, "batch1 must be a 3D tensor", "batch2 must be a 3D tensor"),
          "mv": (2, 1, "vector + matrix @ vector expected", "vector + matrix @ vector expected"),
          "dot": (1, 1, "1D tensors expected, but got {}D and {}D tensors",
                  "1D tensors expected, but got {}D and {}D tensors")}


@batching_rule(*_RANKS)
def fixed_rank_product(ctx: Ctx, a: Tensor, b: Tensor, *, out: Any = None) -> Tensor:
    ra, rb, msg_a, msg_b = _RANKS[ctx.name]
    if a.dim() != ra:
        raise RuntimeError(msg_a.format(a.dim(), b.dim()))
    if b.dim() != rb:
        raise RuntimeError(msg_b.format(a.dim(), b.dim()))
    if ctx.name == "bmm" and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{a.shape[0]} and {b.shape[0]}")
    return matmul(ctx, a, b)


@batching_rule("outer")
def outer(ctx: Ctx, a: Tensor, b: Tensor, *, out: Any = None) -> Tensor:
    return a.unsqueeze(-1) * b.unsqueeze(-2)


@batching_rule("linear")
def linear(ctx: Ctx, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    y = gputensor.matmul(x, weight.transpose(-1, -2) if weight.dim() == 2 else weight)
    return y if bias is None else y + bias


@batching_rule("addmm", "addmv", "baddbmm", "addbmm", "addr")
def add_product(ctx: Ctx, input: Tensor, m1: Tensor, m2: Tensor, *, beta: Any = 1,
                alpha: Any = 1, out: Any = None) -> Tensor:
    product = {"addmm": gputensor.mm, "addmv": gputensor.mv, "baddbmm": gputensor.bmm,
               "addr": gputensor.outer,
               "addbmm": lambda x, y: gputensor.bmm(x, y).sum(0)}[ctx.name](m1, m2)
    product = product if alpha == 1 else product * alpha
    return product + (input if beta == 1 else input * beta) if beta != 0 else product


@batching_rule("tril", "triu", "inverse", "det", "logdet", "slogdet", "matrix_exp", "trace",
               "cholesky", "_linalg_det", "_linalg_inv_ex", "_linalg_slogdet", "_linalg_eigh",
               "_linalg_svd", "_linalg_qr", "_linalg_cholesky_ex", "_linalg_matrix_exp",
               "_linalg_solve_ex", "_linalg_solve_triangular", "_linalg_lu_factor_ex")
def leading_batch(ctx: Ctx, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """Ops that batch over every leading dim of their (matrix) operands already."""
    if ctx.name == "trace":
        if x.dim() != 2:
            raise RuntimeError("trace: expected a matrix, but got tensor with dim "
                               f"{x.dim()}")
        return x.diagonal(0, -2, -1).sum(-1)
    if not _batched(x, ctx.level) or any(isinstance(a, Tensor) for a in args):
        operands = [x, *(a for a in args if isinstance(a, Tensor))]
        rank = max(t.dim() for t in operands)
        if any(t.dim() != rank for t in operands):
            return fallback(ctx, (x, *args), kwargs)
        x = materialize(x, ctx.level, ctx.size)
        args = tuple(materialize(a, ctx.level, ctx.size) if isinstance(a, Tensor) else a
                     for a in args)
    else:
        x = x._value
    out = ctx.call(x, *args, **kwargs)
    return wrap_all(ctx, out)


# -- convolution --------------------------------------------------------------------------------
_SPATIAL = {"conv1d": 1, "conv2d": 2, "conv3d": 3}


@batching_rule(*_SPATIAL)
def conv(ctx: Ctx, x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
         padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    k = _SPATIAL[ctx.name]
    n = ctx.size
    unbatched_sample = x.dim() == k + 1   # a sample without the conv's batch dim
    if not _batched(weight, ctx.level) and not _batched(bias, ctx.level):
        value = x._value
        if unbatched_sample:
            y = ctx.call(value, weight, bias, stride, padding, dilation, groups)
            return wrap(y, ctx.level)
        folded = value.reshape(n * value.shape[1], *value.shape[2:])
        y = ctx.call(folded, weight, bias, stride, padding, dilation, groups)
        return wrap(y.reshape(n, value.shape[1], *y.shape[1:]), ctx.level)
    # Batched weight: the vmap batch becomes n times the groups over stacked channels.
    xv = materialize(x, ctx.level, n)
    if unbatched_sample:
        xv = xv.unsqueeze(1)
    xv = xv.movedim(0, 1)                                   # (N, n, C, *spatial)
    xv = xv.reshape(xv.shape[0], -1, *xv.shape[3:])          # (N, n*C, *spatial)
    wv = materialize(weight, ctx.level, n)
    out_channels = wv.shape[1]
    wv = wv.reshape(n * out_channels, *wv.shape[2:])
    bv = None if bias is None else materialize(bias, ctx.level, n).reshape(-1)
    y = ctx.call(xv, wv, bv, stride, padding, dilation, groups * n)
    y = y.reshape(y.shape[0], n, out_channels, *y.shape[2:]).movedim(1, 0)
    return wrap(y.squeeze(1) if unbatched_sample else y, ctx.level)


# -- nn ops with a leading batch ----------------------------------------------------------------
@batching_rule("_layer_norm")
def layer_norm(ctx: Ctx, tensors: list, normalized_ndim: int, eps: float) -> Any:
    x, *affine = tensors
    if any(_batched(t, ctx.level) for t in affine if t is not None):
        return fallback(ctx, (tensors, normalized_ndim, eps), {})
    out = ctx.call([materialize(x, ctx.level, ctx.size), *affine], normalized_ndim, eps)
    return wrap_all(ctx, out)


@batching_rule("_nll_loss")
def nll_loss(ctx: Ctx, input: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
             ignore_index: int) -> Tensor:
    if _batched(weight, ctx.level):
        return fallback(ctx, (input, target, weight, reduction, ignore_index), {})
    n = ctx.size
    xv = materialize(input, ctx.level, n)
    tv = materialize(target, ctx.level, n)
    if input.dim() > 1:   # (N, C, ...) with targets (N, ...): fold N into the batch
        xv = xv.reshape(n * input.shape[0], *input.shape[1:])
        tv = tv.reshape(n * target.shape[0], *target.shape[1:])
    losses = ctx.call(xv, tv, weight, 0, ignore_index).reshape(n, -1)
    if reduction == 0:
        return wrap(losses.reshape(n, *target.shape), ctx.level)
    total = losses.sum(1)
    if reduction == 2:
        return wrap(total, ctx.level)
    counted = tv.reshape(n, -1) != ignore_index
    safe = tv.reshape(n, -1).masked_fill(~counted, 0)
    w = weight[safe] if weight is not None else gputensor.ones_like(losses)
    return wrap(total / (w * counted).sum(1), ctx.level)


@batching_rule("_embedding")
def embedding(ctx: Ctx, weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False) -> Tensor:
    if _batched(weight, ctx.level):
        return fallback(ctx, (weight, indices, padding_idx, scale_grad_by_freq), {})
    return wrap(ctx.call(weight, indices._value, padding_idx, scale_grad_by_freq), ctx.level)
