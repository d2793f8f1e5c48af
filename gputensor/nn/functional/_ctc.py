"""Connectionist temporal classification loss (torch.nn.functional.ctc_loss).

The forward (alpha) recursion of Graves et al. (2006) runs in log space over the extended
label sequence ``blank, l1, blank, l2, ..., blank`` (length 2S+1 for the longest target S),
vectorised over the batch and the label positions, with a Python loop over time only; autograd
differentiates it, so there is no hand-written beta recursion and it runs on every device.

Two details keep that sound and equal to PyTorch:

- log(0) is a large finite negative number (``_LOG_ZERO``), not -inf: a logsumexp whose terms
  are all -inf has a NaN gradient, and a NaN times the zero gradient such unreachable states
  get would spread into every gradient. A loss at that scale is an impossible alignment and
  becomes +inf.
- PyTorch's gradient for ``log_probs`` is ``exp(log_probs) - posterior`` at each frame before
  the input length (the gradient for the logits when ``log_probs`` is their ``log_softmax``;
  the two agree once chained through it). The recursion's own gradient is ``-posterior``, so
  each loss gets a term of value exactly 0, ``exp(lp) - exp(lp).detach()``, summed over those
  frames, whose gradient is the missing ``exp(log_probs)``. An infinite loss gets NaN gradients
  there, as in PyTorch, unless ``zero_infinity`` zeroes the loss and its gradient.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.autograd import Function

from ._loss import _reduction

__all__ = ["ctc_loss"]

_LOG_ZERO = -1e30
_INFINITE = 5e29   # a loss above this came from _LOG_ZERO paths only: no alignment exists
_WHERE = "(while checking arguments for ctc_loss_allocate_outputs)"

Lengths = Tensor | Sequence[int]


class _NanGradWhere(Function):
    """Value 0 per batch entry; gradient NaN for ``log_probs`` where ``mask`` is set (the
    frames of infinite losses), zero elsewhere: PyTorch's gradient of an infinite loss."""

    @staticmethod
    def forward(ctx: Any, log_probs: Tensor, mask: Tensor) -> Tensor:
        ctx.save_for_backward(mask)
        ctx.shape = log_probs.shape
        return gt.zeros(log_probs.shape[1], dtype=log_probs.dtype, device=log_probs.device)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (mask,) = ctx.saved_tensors
        zeros = gt.zeros(ctx.shape, dtype=grad.dtype, device=grad.device)
        return zeros.masked_fill(mask, float("nan")), None


def _lengths(input_lengths: Lengths, target_lengths: Lengths) -> tuple[list[int], list[int]]:
    """Both lengths as Python ints (the two overloads of PyTorch's ``ctc_loss``: tensors, or
    sequences of ints)."""
    both_tensors = isinstance(input_lengths, Tensor) and isinstance(target_lengths, Tensor)
    if both_tensors:
        out = []
        for name, t in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
            if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype is D.bool:
                raise RuntimeError(f"{name} must be integral")
            out.append([int(v) for v in t.reshape(-1).tolist()])
        return out[0], out[1]
    seqs = [input_lengths, target_lengths]
    if all(isinstance(s, (tuple, list)) and all(isinstance(v, numbers.Integral) for v in s)
           for s in seqs):
        return [int(v) for v in input_lengths], [int(v) for v in target_lengths]
    raise TypeError(f"ctc_loss(): input_lengths and target_lengths must both be Tensors or both "
                    f"be tuples of ints, but got {type(input_lengths).__name__} and "
                    f"{type(target_lengths).__name__}")


def _padded_targets(targets: Tensor, target_lengths: list[int], batch: int) -> np.ndarray:
    """Targets as an int64 (N, S) host array, S the longest target length, checked as
    PyTorch's ctc_loss_allocate_outputs does (and, beyond it, for labels out of range)."""
    if targets.dim() < 1 or targets.dim() > 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.dim()}-dimensional "
                           f"tensor for argument #2 'targets' {_WHERE}")
    for length in target_lengths:
        if length < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got "
                               f"value {length} {_WHERE}")
    longest = max(target_lengths, default=0)
    host = np.asarray(targets.long().tolist(), dtype=np.int64).reshape(targets.shape)
    out = np.zeros((batch, longest), dtype=np.int64)
    if targets.dim() == 1:   # concatenated
        total = sum(target_lengths)
        if targets.shape[0] != total:
            raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got "
                               f"size {targets.shape[0]} for argument #2 'targets' {_WHERE}")
        starts = np.cumsum([0] + target_lengths[:-1])
        for n, (start, length) in enumerate(zip(starts, target_lengths, strict=True)):
            out[n, :length] = host[start:start + length]
    else:
        if targets.shape[0] != batch:
            raise RuntimeError(f"Expected tensor to have size {batch} at dimension 0, but got "
                               f"size {targets.shape[0]} for argument #2 'targets' {_WHERE}")
        if targets.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, "
                               f"but got size {targets.shape[1]} for argument #2 'targets' "
                               f"{_WHERE}")
        for n, length in enumerate(target_lengths):
            out[n, :length] = host[n, :length]
    return out


def _extended_labels(targets: np.ndarray, target_lengths: list[int], blank: int,
                     classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2S+1) labels ``blank, l1, blank, ..., lS, blank`` and the mask of positions that
    may also be entered from two back (a label different from the label before it)."""
    batch, longest = targets.shape
    valid = np.arange(longest)[None, :] < np.asarray(target_lengths, dtype=np.int64)[:, None]
    used = targets[valid]
    if used.size and (used.min() < 0 or used.max() >= classes):
        bad = used[(used < 0) | (used >= classes)][0]
        raise RuntimeError(f"ctc_loss: target labels must be in [0, {classes}), but got {bad}")
    labels = np.full((batch, 2 * longest + 1), blank, dtype=np.int64)
    labels[:, 1::2] = np.where(valid, targets, blank)
    skip = np.zeros(labels.shape, dtype=bool)
    skip[:, 3::2] = labels[:, 3::2] != labels[:, 1:-2:2]
    return labels, skip


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Lengths,
             target_lengths: Lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """The negative log likelihood of each target under all alignments of ``log_probs``.

    ``log_probs``: (T, N, C) log-probabilities (or unbatched (T, C)); ``targets``: padded
    (N, S) or the N targets concatenated (sum(target_lengths),), labels in [0, C) other than
    ``blank``; lengths per batch entry as tensors or tuples of ints. 'mean' divides each loss
    by its target length (at least 1) before averaging over the batch. ``zero_infinity``
    turns the infinite loss of an impossible alignment (and its gradient) into zero.
    """
    reduction = _reduction(None, None, reduction)
    in_lens, tg_lens = _lengths(input_lengths, target_lengths)
    batched = log_probs.dim() == 3
    if log_probs.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for '
                                  f"'{log_probs.dtype.legacy_name}'")
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    if not batched:   # PyTorch adds the batch dim to any other rank, then checks for 3
        if log_probs.dim() != 2:
            raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.dim() + 1}-"
                               f"dimensional tensor for argument #1 'log_probs' {_WHERE}")
        log_probs = log_probs.unsqueeze(1)
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    if len(in_lens) != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tg_lens) != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    padded = _padded_targets(targets, tg_lens, batch)
    for length in in_lens:
        if length < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                               f"{length} {_WHERE}")
        if length > steps:
            raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got "
                               f"value {length} {_WHERE}")
    labels, skip = _extended_labels(padded, tg_lens, blank, classes)
    losses = _losses(log_probs, labels, skip, in_lens, tg_lens, zero_infinity)
    if reduction == "mean":
        divisor = gt.tensor(tg_lens, dtype=losses.dtype, device=losses.device).clamp(min=1)
        return (losses / divisor).mean()
    if reduction == "sum":
        return losses.sum()
    return losses if batched else losses.squeeze(0)


def _losses(log_probs: Tensor, labels_np: np.ndarray, skip_np: np.ndarray, in_lens: list[int],
            tg_lens: list[int], zero_infinity: bool) -> Tensor:
    """(N,) negative log likelihoods: the alpha recursion, then PyTorch's gradient terms."""
    batch = log_probs.shape[1]
    dtype, device = log_probs.dtype, log_probs.device
    frames = max(in_lens, default=0)
    width = labels_np.shape[1]
    labels = gt.tensor(labels_np, device=device)
    skip = gt.tensor(skip_np, device=device)
    in_len = gt.tensor(in_lens, dtype=gt.int64, device=device)
    position = gt.arange(width, device=device)

    # log p(label s at frame t) for every extended position: (frames, N, 2S+1)
    lp = log_probs[:frames].clamp(min=_LOG_ZERO)
    lp_ext = lp.gather(2, labels.unsqueeze(0).expand(frames, batch, width).contiguous())
    empty = gt.where(position == 0, 0.0, _LOG_ZERO).to(dtype).expand(batch, width)
    if frames:
        alpha = gt.where(position < 2, lp_ext[0], _LOG_ZERO)
        alpha = gt.where((in_len > 0).unsqueeze(1), alpha, empty)   # no frames: only ""
    else:   # no frames at all: the losses are constants, with a zero gradient
        alpha = empty + log_probs[:0].sum((0, 2)).unsqueeze(1)
    pad = gt.full((batch, 2), _LOG_ZERO, dtype=dtype, device=device)
    for t in range(1, frames):
        shifted = gt.cat([pad, alpha], 1)
        from_prev = shifted[:, 1:width + 1]
        from_skip = gt.where(skip, shifted[:, :width], _LOG_ZERO)
        new = gt.logsumexp(gt.stack([alpha, from_prev, from_skip]), 0) + lp_ext[t]
        alpha = gt.where((in_len > t).unsqueeze(1), new, alpha)

    # end in the last label or the blank after it
    tg_len = gt.tensor(tg_lens, dtype=gt.int64, device=device)
    ends = alpha.gather(1, gt.stack([2 * tg_len, (2 * tg_len - 1).clamp(min=0)], 1))
    ends = gt.where(gt.stack([tg_len >= 0, tg_len > 0], 1), ends, _LOG_ZERO)
    raw = -gt.logsumexp(ends, 1)
    infinite = raw.detach() > _INFINITE

    active = (gt.arange(frames, device=device).unsqueeze(1) < in_len).unsqueeze(2)
    if frames:
        e = log_probs[:frames].exp() * active
        raw = raw + (e - e.detach()).sum((0, 2))
        if not zero_infinity and log_probs.requires_grad and gt.is_grad_enabled():
            mask = (active & infinite.reshape(1, batch, 1)).expand(lp.shape).contiguous()
            raw = raw + _NanGradWhere.apply(log_probs[:frames], mask)
    fill = 0.0 if zero_infinity else float("inf")
    return gt.where(infinite, fill, raw)
