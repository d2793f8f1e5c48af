"""Bags of embeddings (torch.nn.functional.embedding_bag).

PyTorch has a fused kernel for this; here the bag reduction is composed of differentiable ops
so that autograd gives every gradient and every device runs it: one ``F.embedding`` lookup of
all indices (so ``sparse=True`` gives the weight a sparse gradient and ``scale_grad_by_freq``
works as there), then ``index_add`` of the rows into their bags ('sum', 'mean' divided by
the bag sizes) or ``scatter_reduce(..., 'amax', include_self=False)`` ('max'; an empty bag keeps
its zero row and gets no gradient). ``padding_idx`` entries are dropped before the lookup, so
they add nothing, do not count towards a mean and give the padding row no gradient.
"""

from __future__ import annotations

import warnings

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ._sparse import _renorm_, embedding

__all__ = ["embedding_bag"]

_MODES = ("sum", "mean", "max")
_INDEX_DTYPES = (D.int32, D.int64)


def _check_dtypes(input: Tensor, offsets: Tensor | None, weight: Tensor,
                  per_sample_weights: Tensor | None) -> None:
    """The C++ op's argument checks (indices and offsets are promoted together first, so a
    float ``offsets`` is reported as the indices' type, as PyTorch does)."""
    for t in (input, offsets):
        if t is not None and t.dtype not in _INDEX_DTYPES:
            raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                               f"following scalar types: Long, Int; but got {t.type()} instead "
                               f"(while checking arguments for embedding_bag)")
    if not weight.dtype.is_floating_point:
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have one of the "
                           f"following scalar types: Half, BFloat16, Float, Double; but got "
                           f"{weight.type()} instead (while checking arguments for embedding_bag)")
    if per_sample_weights is not None and per_sample_weights.dtype is not weight.dtype:
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have the same type as "
                           f"tensor for argument #1 'per_sample_weights'; but type {weight.type()} "
                           f"does not equal {per_sample_weights.type()} (while checking "
                           f"arguments for embedding_bag)")


def _padding(padding_idx: int | None, num_embeddings: int) -> int:
    """The padding row as a non-negative index, or -1 for none (the C++ op's rule)."""
    if padding_idx is None:
        return -1
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise RuntimeError(f"padding_idx must be within the number of embeddings, "
                           f"-{num_embeddings} through {num_embeddings - 1}, but got "
                           f"{padding_idx}")
    return padding_idx % num_embeddings


def _check_indices(input: Tensor, num_embeddings: int) -> None:
    """Every index must name a row (one host read, as the CPU kernel's own check)."""
    if input.numel() == 0:
        return
    bad = (input < 0) | (input >= num_embeddings)
    if bool(bad.any()):
        first = int(input[gt.nonzero(bad)[0, 0]].item())
        raise RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found "
                           f"idx to be {first}")


def _bag_of_each_index(offsets: Tensor, num_bags: int, n: int, length: int | None) -> Tensor:
    """int64 (n,): the bag each input position belongs to.

    Fixed-size bags (2-D input) divide positions by ``length``. Otherwise each of the first
    ``num_bags`` offsets marks where a bag starts and a running count of marks gives the bag,
    as PyTorch's ``make_offset2bag``; the last bag runs to the end of the input (PyTorch's CPU
    behaviour, which also ignores the value of an ``include_last_offset`` end marker).
    """
    device = offsets.device if offsets is not None else None
    if length is not None:
        return gt.arange(n, device=device) // length
    starts = offsets[:num_bags].long()
    marks = gt.zeros(n + 1, dtype=gt.int64, device=device)
    marks.index_add_(0, starts, gt.ones(num_bags, dtype=gt.int64, device=device))
    return marks.cumsum(0)[:n] - 1


def _check_offsets(offsets: Tensor, n: int) -> None:
    if offsets.numel() == 0:
        return
    first, last = int(offsets[0].item()), int(offsets[-1].item())
    if first != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {first}")
    if last > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {last}")


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of rows of ``weight`` (num_embeddings, embedding_dim),
    without materialising the (bags, bag length, dim) lookup a user would otherwise build.

    ``input`` is either 2-D (B, N): B bags of N indices, or 1-D with ``offsets`` (B,) giving
    where each bag starts (``include_last_offset``: offsets has one more, final entry, as in
    CSR). Empty bags give zero rows. ``per_sample_weights`` (input's shape) scales each looked-up
    row, 'sum' mode only. ``padding_idx`` entries are left out of their bags. Returns (B, dim).
    """
    if weight.dtype is D.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is "
                         f"not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    length = None
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated "
                             f"is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets)}")
        num_bags, length = input.shape
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        num_bags = max(offsets.numel() - (1 if include_last_offset else 0), 0)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' "
                                  f"(got mode='{mode}'). Please open a feature request on GitHub.")
    _check_dtypes(input, offsets, weight, per_sample_weights)
    num_embeddings, dim = weight.shape
    pad = _padding(padding_idx, num_embeddings)
    n = input.numel()
    if length is None:
        _check_offsets(offsets, n)
    _check_indices(input, num_embeddings)
    if max_norm is not None and n:
        _renorm_(weight, input.contiguous(), max_norm, norm_type)

    out = gt.zeros(num_bags, dim, dtype=weight.dtype, device=weight.device)
    if n == 0 or num_bags == 0:   # only empty bags (or none): zeros, a zero gradient
        return out + weight[:0].sum(0) if weight.requires_grad else out
    idx = input.long()
    bag = _bag_of_each_index(offsets, num_bags, n, length).to(idx.device)
    if pad >= 0:
        keep = gt.nonzero(idx != pad).reshape(-1)
        idx, bag = idx.index_select(0, keep), bag.index_select(0, keep)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.index_select(0, keep)
    rows = embedding(idx, weight, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
    if mode == "max":
        return out.scatter_reduce(0, bag.unsqueeze(1).expand(-1, dim).contiguous(), rows,
                                  "amax", include_self=False)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    out = out.index_add(0, bag, rows)
    if mode == "mean":
        sizes = gt.zeros(num_bags, dtype=weight.dtype, device=weight.device)
        sizes = sizes.index_add(0, bag, gt.ones(bag.numel(), dtype=weight.dtype,
                                                device=weight.device))
        out = out / sizes.clamp(min=1).unsqueeze(1)
    return out
