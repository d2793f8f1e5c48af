"""Distances and normalisation along a dim (torch.nn.functional's pairwise_distance,
cosine_similarity, normalize), composed of differentiable ops."""

from __future__ import annotations

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode as _autocast

__all__ = ["pairwise_distance", "cosine_similarity", "normalize", "pdist"]


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of ``x1 - x2 + eps`` over the last dim (eps keeps the norm differentiable
    where the two inputs meet)."""
    return gt.norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """x1 . x2 / (max(|x1|, eps) * max(|x2|, eps)) along ``dim`` of the broadcast shape; each
    input is divided by its own norm first, as PyTorch does for precision."""
    shape = gt.broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    n1 = gt.norm(x1, 2, dim=dim, keepdim=True).clamp_min(eps)
    n2 = gt.norm(x2, 2, dim=dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input`` divided by its p-norm along ``dim``, the norm held at least ``eps``."""
    denom = gt.norm(input, p, dim=dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    return gt.div(input, denom, out=out)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between every pair of rows of an (N, M) input, in the order of
    the upper triangle (i < j), N * (N - 1) / 2 of them."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = gt.triu_indices(input.shape[0], input.shape[0], 1, device=input.device)
    return gt.norm(input[i] - input[j], p, dim=1)


# Autocast policies (gputensor/amp/autocast_mode.py's tables).
_autocast.apply(globals(), ("cosine_similarity",))
