"""linear_cross_entropy (torch.nn.functional's, new in PyTorch 2.13): cross entropy of
``linear(input, linear_weight, linear_bias)`` logits.

``options=None`` is the reference path: the logits, then ``cross_entropy`` (every target kind,
K-dimensional losses, label smoothing, full autograd). With a ``LinearCrossEntropyOptions`` the
batch runs in row chunks so the (N, num_classes) logits never exist at once, as PyTorch's
chunked op: for 'mean'/'sum' the gradients of input, weight and bias are computed in the same
pass as the loss and the backward scales them by the incoming gradient (a second backward
raises unless ``allow_retain_graph``); for 'none' the backward recomputes them chunk by chunk.
Each row's loss is computed from its own logits row and the rows' weighted losses are summed
once at the end, so the chunk size changes results only through the rounding inside the
matrix products (and the order in which the chunks' weight and bias gradients add up). Like
PyTorch's, the chunked path supports neither double backward nor forward-mode AD.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.autograd import Function

from ._loss import cross_entropy

if TYPE_CHECKING:
    from gputensor.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

__all__ = ["linear_cross_entropy"]

_TWICE = ("linear_cross_entropy chunked backward called twice; retain_graph=True / double "
          "backward are not supported.")


def _row_coefficients(target: Tensor, weight: Tensor | None, ignore_index: int,
                      num_classes: int, reduction: str, acc: Any) -> tuple[Tensor, Tensor]:
    """The in-range targets (ignored rows point at class 0) and each row's loss weight:
    its class weight (0 when ignored), divided by the weights' sum for 'mean' (NaN when that
    sum is 0, as cross_entropy)."""
    ignored = target == ignore_index
    if ignore_index < 0 or ignore_index >= num_classes:
        target = gt.where(ignored, 0, target)
    if weight is None:
        coef = (~ignored).to(acc)
    else:
        coef = gt.where(ignored, 0, weight.index_select(0, target).to(acc))
    if reduction == "mean":
        total = coef.sum()
        coef = coef / gt.where(total == 0, gt.full_like(total, math.nan), total)
    return target, coef


def _chunked_pass(input: Tensor, linear_weight: Tensor, linear_bias: Tensor | None,
                  target: Tensor, coef: Tensor, chunk: int, policy: str, acc: Any,
                  needs: tuple[bool, bool, bool]
                  ) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """Per-row weighted losses ``coef * (logsumexp(logits) - logits[target])`` (N,) in
    ``acc`` and, for each flag in ``needs``, the gradient of ``sum(losses)`` with respect to
    input, linear_weight and linear_bias (in the input dtype)."""
    dtype = input.dtype
    rows = input.size(0)
    weight_acc = linear_weight.to(acc)
    bias_acc = linear_bias.to(acc) if linear_bias is not None else None
    losses = gt.empty(rows, dtype=acc, device=input.device)
    # 'accurate' keeps the input-gradient product and all cross-chunk sums in acc
    accurate = policy == "accurate"
    grad_input = gt.empty(input.shape, dtype=dtype, device=input.device) if needs[0] else None
    sum_dtype = acc if accurate else dtype
    grad_weight = gt.zeros(linear_weight.shape, dtype=sum_dtype,
                           device=input.device) if needs[1] else None
    grad_bias = gt.zeros(linear_weight.shape[0], dtype=sum_dtype,
                         device=input.device) if needs[2] else None
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        x = input[start:stop].to(acc)
        t = target[start:stop].unsqueeze(1)
        c = coef[start:stop]
        logits = gt.linear(x, weight_acc, bias_acc)
        logits = logits - logits.amax(dim=1, keepdim=True)
        picked = logits.gather(1, t).squeeze(1)
        exp = logits.exp()
        denom = exp.sum(dim=1)
        losses[start:stop] = c * (denom.log() - picked)
        if not any(needs):
            continue
        # d loss_row / d logits = coef * (softmax - onehot(target))
        grad_logits = (exp * (c / denom).unsqueeze(1)).scatter_add(1, t, -c.unsqueeze(1))
        if grad_input is not None:
            if accurate:
                grad_input[start:stop] = (grad_logits @ weight_acc).to(dtype)
            else:
                grad_input[start:stop] = grad_logits.to(dtype) @ linear_weight.to(dtype)
        if grad_weight is not None:
            grad_weight += (grad_logits.T @ x).to(sum_dtype)
        if grad_bias is not None:
            grad_bias += grad_logits.sum(dim=0).to(sum_dtype)
    grads = tuple(g.to(dtype) if g is not None else None
                  for g in (grad_input, grad_weight, grad_bias))
    return losses, *grads


class _ChunkedReduced(Function):
    """'mean'/'sum': the loss and its gradients in one chunked pass; backward scales them."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, linear_weight: Tensor, linear_bias: Tensor | None,
                target: Tensor, weight: Tensor | None, reduction: str, ignore_index: int,
                chunk: int, policy: str, acc: Any, allow_retain_graph: bool,
                needs: tuple[bool, bool, bool]) -> Tensor:
        target, coef = _row_coefficients(target, weight, ignore_index,
                                         linear_weight.size(0), reduction, acc)
        losses, *grads = _chunked_pass(input, linear_weight, linear_bias, target, coef, chunk,
                                       policy, acc, needs)
        loss = losses.sum()
        if reduction == "mean" and input.size(0) == 0:
            loss = gt.full_like(loss, math.nan)
        ctx.grads, ctx.allow_retain_graph = grads, allow_retain_graph
        return loss.to(input.dtype)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        grads = ctx.grads
        if grads is None:
            raise RuntimeError(_TWICE)
        if not ctx.allow_retain_graph:
            ctx.grads = None  # consumed, as PyTorch's in-place scaling
        scaled = [g * grad_output if g is not None else None for g in grads]
        return scaled[0], scaled[1], scaled[2], *([None] * 9)


class _ChunkedRows(Function):
    """'none': per-row losses chunk by chunk; backward recomputes the gradients with each
    row's incoming gradient folded into its weight."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, linear_weight: Tensor, linear_bias: Tensor | None,
                target: Tensor, weight: Tensor | None, ignore_index: int, chunk: int,
                policy: str, acc: Any) -> Tensor:
        target, coef = _row_coefficients(target, weight, ignore_index,
                                         linear_weight.size(0), "none", acc)
        losses = _chunked_pass(input, linear_weight, linear_bias, target, coef, chunk, policy,
                               acc, (False, False, False))[0]
        ctx.save_for_backward(input, linear_weight, linear_bias, target, coef)
        ctx.options = (chunk, policy, acc)
        return losses.to(input.dtype)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        input, linear_weight, linear_bias, target, coef = ctx.saved_tensors
        chunk, policy, acc = ctx.options
        needs = (ctx.needs_input_grad[0], ctx.needs_input_grad[1],
                 linear_bias is not None and ctx.needs_input_grad[2])
        if not any(needs):
            return (None,) * 9
        _, *grads = _chunked_pass(input, linear_weight, linear_bias, target,
                                  coef * grad_output.to(acc), chunk, policy, acc, needs)
        return grads[0], grads[1], grads[2], *([None] * 6)


def _check(input: Tensor, linear_weight: Tensor, linear_bias: Tensor | None
           ) -> tuple[tuple[int, ...], int]:
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(f"expected equal input and linear_weight last dimensions "
                           f"(in_features), got {input.shape[-1]} and "
                           f"{linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and input.dim() == 1:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input, "
                           f"(N, {in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    return out_features, num_classes


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Tensor | None = None, weight: Tensor | None = None,
                         reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0,
                         options: LinearCrossEntropyOptions | None = None) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)`` for (F,) or
    (N, F) input and a (C, F) or (C, d1, ..., dK, F) weight (K-dimensional loss).
    ``ignore_index`` None means -100 for class-index targets (it may not be given with
    class probabilities). ``options`` selects the chunked path (see the module docstring);
    it covers class-index int64 targets, 'mean'/'sum'/'none', no label smoothing and a 2-D
    weight, and otherwise warns and takes the reference path, as PyTorch."""
    out_features, num_classes = _check(input, linear_weight, linear_bias)
    batch_shape = tuple(input.shape[:-1])
    logits_shape = (*batch_shape, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    chunkable = (not out_features and reduction in ("mean", "sum", "none")
                 and label_smoothing == 0.0 and target.dtype == gt.int64)
    if options is not None and not chunkable:
        bias_shape = tuple(linear_bias.shape) if linear_bias is not None else None
        warnings.warn(f"linear_cross_entropy: ``options`` ignored; chunked path needs "
                      f"reduction in {{'mean','sum','none'}}, label_smoothing == 0, "
                      f"target.dtype == int64, out_features == (). Got reduction={reduction!r}, "
                      f"label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
                      f"out_features={out_features}, tracing=False, "
                      f"linear_bias.shape={bias_shape}.", stacklevel=2)
    if options is not None and chunkable:
        return _chunked(input, linear_weight, target, linear_bias, weight, reduction,
                        ignore_index, options)
    if out_features:
        flat = math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape(flat, input.shape[-1])
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(flat)
    logits = gt.linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=ignore_index, label_smoothing=label_smoothing)


def _chunked(input: Tensor, linear_weight: Tensor, target: Tensor, linear_bias: Tensor | None,
             weight: Tensor | None, reduction: str, ignore_index: int,
             options: LinearCrossEntropyOptions) -> Tensor:
    if input.dtype != linear_weight.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{input.dtype.legacy_name} != {linear_weight.dtype.legacy_name}")
    batched = input.dim() == 2
    if not batched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    if target.shape != input.shape[:1]:
        raise ValueError(f"Expected input batch_size ({input.size(0)}) to match target "
                         f"batch_size ({target.size(0) if target.dim() else 0}).")
    resolved = options._adjust(num_batches=input.size(0), in_features=input.size(1),
                               num_classes=linear_weight.size(0), dtype=input.dtype,
                               device=input.device)
    chunk, policy, acc = resolved.batch_chunk_size, resolved.acc_policy, resolved.acc_dtype
    if reduction == "none":
        result = _ChunkedRows.apply(input, linear_weight, linear_bias, target, weight,
                                    ignore_index, chunk, policy, acc)
    else:
        grad_on = gt.is_grad_enabled()
        needs = (input.requires_grad and grad_on, linear_weight.requires_grad and grad_on,
                 linear_bias is not None and linear_bias.requires_grad and grad_on)
        result = _ChunkedReduced.apply(input, linear_weight, linear_bias, target, weight,
                                       reduction, ignore_index, chunk, policy, acc,
                                       resolved.allow_retain_graph, needs)
    return result if batched else result.squeeze(0)
