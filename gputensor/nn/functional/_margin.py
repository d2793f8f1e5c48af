"""Margin losses over classes and triplets (torch.nn.functional's multi_margin_loss,
multilabel_margin_loss and triplet_margin_with_distance_loss), composed of existing ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ._distance import pairwise_distance

__all__ = ["multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss"]


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: Any = None,
                      reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Per sample, ``sum over j != y of max(0, margin - x[y] + x[j])^p / C``, times
    ``weight[y]`` (multi-class hinge loss)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    x = input.unsqueeze(0) if input.dim() <= 1 else input
    if x.dim() != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(input.shape)}")
    t = target.reshape(-1)
    n, c = x.shape
    if t.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got "
                           f"{list(target.shape)}")
    if t.numel() and bool(((t < 0) | (t >= c)).any()):
        raise RuntimeError("target out of range")
    x_y = x.gather(1, t.unsqueeze(1))
    z = (margin - x_y + x).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[t].unsqueeze(1)
    not_target = gt.ones_like(x, dtype=D.bool).scatter(1, t.unsqueeze(1), False)
    loss = (z * not_target).sum(1) / c
    if input.dim() <= 1 and reduction == "none":
        loss = loss.reshape(target.shape)
    return _reduce(loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: Any = None,
                           reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: ``target`` rows list class indices, ended by the first -1;
    ``sum over target j, non-target k of max(0, 1 - (x[j] - x[k])) / C``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x = input.unsqueeze(0) if input.dim() <= 1 else input
    y = target.unsqueeze(0) if target.dim() <= 1 else target
    if x.dim() != 2 or tuple(y.shape) != tuple(x.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    n, c = x.shape
    if y.numel() and bool(((y < -1) | (y >= c)).any()):
        raise RuntimeError("target out of range")
    valid = gt.cumprod((y >= 0).to(D.int64), 1).to(D.bool)  # entries before the first -1
    safe = gt.where(valid, y, gt.zeros_like(y))
    # class -> listed as a target (counted, so the ignored positions' index 0 adds nothing)
    is_target = gt.zeros(n, c, dtype=D.int64, device=x.device).scatter_add(
        1, safe, valid.to(D.int64)) > 0
    x_j = x.gather(1, safe)  # (n, c): the target scores, by position
    hinge = (1 - (x_j.unsqueeze(2) - x.unsqueeze(1))).clamp(min=0)  # (n, pos, class)
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (hinge * mask).sum((1, 2)) / c
    if input.dim() <= 1 and reduction == "none":
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Callable[..., Tensor] | None = None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` for any distance ``d`` (pairwise L2 by
    default); ``swap`` uses min(d(a, n), d(p, n)) as the negative distance."""
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                         f"got {margin} instead")
    dims = {anchor.dim(), positive.dim(), negative.dim()}
    if len(dims) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {anchor.dim()}D, "
                           f"positive {positive.dim()}D, and negative {negative.dim()}D inputs")
    d = distance_function if distance_function is not None else pairwise_distance
    d_pos = d(anchor, positive)
    d_neg = d(anchor, negative)
    if swap:
        d_neg = gt.minimum(d_neg, d(positive, negative))
    loss = (margin + d_pos - d_neg).clamp(min=0)
    return _reduce(loss, reduction)
