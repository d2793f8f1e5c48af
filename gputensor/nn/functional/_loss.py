"""Loss functions (torch.nn.functional's), with PyTorch's argument order, defaults, reduction
rules and error messages.

The regression and binary losses are one fused elementwise op each (with a fused backward);
cross entropy with class indices is ``log_softmax`` plus the fused ``_nll_loss`` op, so a
classifier's loss and its gradient take four ops. The rest compose differentiable ops, so they
run and differentiate on every device without kernels of their own.
"""

from __future__ import annotations

import math
import warnings

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops import nn as nn_ops
from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode as _autocast

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "cosine_embedding_loss", "margin_ranking_loss", "soft_margin_loss",
           "hinge_embedding_loss", "gaussian_nll_loss", "poisson_nll_loss", "triplet_margin_loss",
           "multilabel_soft_margin_loss"]

_EPSILON = 1e-12   # cosine_embedding_loss's guard on the squared magnitudes, as PyTorch's


# -- reductions --------------------------------------------------------------------------------
def legacy_get_string(size_average: bool | None, reduce: bool | None,
                      emit_warning: bool = True) -> str:
    """The reduction named by the deprecated ``size_average``/``reduce`` flags."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if (size_average and reduce) else ("sum" if reduce else "none")
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{ret}' instead.", stacklevel=3)
    return ret


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """The effective reduction name, validated ('elementwise_mean' is the old 'mean')."""
    if size_average is not None or reduce is not None:
        return legacy_get_string(size_average, reduce)
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' "
                      "instead.", stacklevel=3)
        return "mean"
    if reduction not in nn_ops.REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_size(input: Tensor, target: Tensor) -> None:
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.size()}) that is different to the input size "
                      f"({input.size()}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=3)


def _weighted(loss: Tensor, weight: Tensor | None, input: Tensor, reduction: str,
              mean_over_weight: bool = True) -> Tensor:
    """Reduce ``loss`` after weighting it elementwise (torch 2.x's ``weight=`` of the
    regression losses); 'mean' divides by the summed weights unless ``mean_over_weight``
    is False (huber_loss averages over the elements)."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and mean_over_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


# -- regression losses -------------------------------------------------------------------------
def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """Squared error ``(input - target) ** 2``, optionally weighted elementwise."""
    _warn_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    return _weighted(nn_ops._squared_error(input, target), weight, input, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """Absolute error ``|input - target|``, optionally weighted elementwise."""
    _warn_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    return _weighted(nn_ops._abs_error(input, target), weight, input, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """``0.5 * d ** 2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``."""
    _warn_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return _reduce(nn_ops._abs_error(input, target), reduction)
    return _reduce(nn_ops._smooth_l1(input, target, beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """``0.5 * d ** 2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``."""
    _warn_size(input, target)
    reduction = _reduction(None, None, reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _weighted(nn_ops._huber(input, target, delta), weight, input, reduction,
                     mean_over_weight=False)


# -- classification ----------------------------------------------------------------------------
def _check_nll_args(input: Tensor, target: Tensor, weight: Tensor | None) -> Tensor:
    """PyTorch's nll_loss checks; returns the target (a size-1 vector for a 1-D input becomes
    a scalar, as PyTorch treats it)."""
    ishape, tshape = input._shape, target._shape   # plain tuples: this runs every step
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f'"nll_loss_out_frame" not implemented for '
                                  f"'{input._dtype.legacy_name}'")
    if len(ishape) < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {len(ishape)})")
    if len(ishape) == 1:
        if len(tshape) == 1:
            if tshape[0] != 1:
                raise ValueError(f"For 1D input, 1D target must have size 1, but got target "
                                 f"size: {tshape[0]}")
            target = target.reshape(())
        elif tshape:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    else:
        if not tshape or ishape[0] != tshape[0]:
            got = tshape[0] if tshape else "()"
            raise ValueError(f"Expected input batch_size ({ishape[0]}) to match target "
                             f"batch_size ({got}).")
        if len(ishape) == 2 and len(tshape) != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        expected = ishape[:1] + ishape[2:]
        if tshape != expected:
            raise RuntimeError(f"Expected target size {list(expected)}, got {list(tshape)}")
    classes = ishape[0 if len(ishape) == 1 else 1]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or "
                           f"no classes but got weight tensor of shape: {list(weight.shape)}")
    if target._dtype is not D.int64 and target._dtype is not D.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{target.dtype.legacy_name}")
    if input._storage.device is not target._storage.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {input.device} and {target.device}!")
    return target


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices ``target`` under log-probabilities ``input``
    (C), (N, C) or (N, C, d1, ...). 'mean' divides by the summed weights of the counted
    targets (those not equal to ``ignore_index``)."""
    reduction = _reduction(size_average, reduce, reduction)
    target = _check_nll_args(input, target, weight)
    return nn_ops._nll_loss(input, target, weight, nn_ops.REDUCTIONS[reduction], ignore_index)


def _class_weight_view(weight: Tensor, ndim: int, class_dim: int) -> Tensor:
    shape = [1] * ndim
    shape[class_dim] = weight.numel()
    return weight.reshape(shape)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between the logits ``input`` (C), (N, C) or (N, C, d1, ...) and either
    class indices (a target without the class dim) or class probabilities (a target of the
    input's shape), with optional class weights and label smoothing."""
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    class_dim = 0 if len(input._shape) == 1 else 1
    if input._shape and target._shape == input._shape:
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction,
                                    label_smoothing, class_dim)
    target = _check_nll_args(input, target, weight)
    logp = gt.log_softmax(input, class_dim)
    code = nn_ops.REDUCTIONS[reduction]
    nll = nn_ops._nll_loss(logp, target, weight, code, ignore_index)
    if label_smoothing == 0.0:
        return nll
    classes = input.shape[class_dim]
    if weight is not None:
        smooth = -(logp * _class_weight_view(weight, logp.dim(), class_dim)).sum(class_dim)
    else:
        smooth = -logp.sum(class_dim)
    kept = target != ignore_index
    smooth = gt.where(kept, smooth, gt.zeros((), dtype=smooth.dtype, device=smooth.device))
    if reduction == "mean":
        if weight is not None:
            # normalised by the weights of the counted targets, as the nll term is
            safe_target = gt.where(kept, target, gt.zeros_like(target))
            denom = gt.where(kept, weight[safe_target], gt.zeros((), dtype=weight.dtype,
                                                                   device=weight.device)).sum()
        else:
            denom = kept.sum()
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def _cross_entropy_probs(input: Tensor, target: Tensor, weight: Tensor | None,
                         ignore_index: int, reduction: str, label_smoothing: float,
                         class_dim: int) -> Tensor:
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"Expected floating point type for target with class probabilities, "
                           f"got {target.dtype.legacy_name}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    classes = input.shape[class_dim]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or "
                           f"no classes but got weight tensor of shape: {list(weight.shape)}")
    logp = gt.log_softmax(input, class_dim)
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    prod = logp * target
    if weight is not None:
        prod = prod * _class_weight_view(weight, input.dim(), class_dim)
    if reduction == "none":
        return -prod.sum(class_dim)
    total = -prod.sum()
    if reduction == "sum":
        return total
    return total / (input.numel() // classes) if input.numel() else total * math.nan


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``-(t * log(x) + (1 - t) * log(1 - x))`` of probabilities ``input``, each log clamped
    at -100 (as PyTorch does), optionally weighted (``weight`` broadcasts to the target)."""
    reduction = _reduction(size_average, reduce, reduction)
    if input.device.type == "cuda" and _autocast.is_autocast_enabled("cuda"):
        raise RuntimeError(
            "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
            "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
            "layer.\nIn this case, combine the two layers using "
            "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss."
            "  binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.")
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input "
                         f"size ({input.size()}) is deprecated. Please ensure they have the same "
                         f"size.")
    for t, name in ((input, "input"), (target, "target")):
        if t.numel():
            lo, hi = gt.aminmax(t.detach())
            if not (lo.item() >= 0 and hi.item() <= 1):   # NaN fails too
                raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    loss = nn_ops._binary_cross_entropy(input, target)
    if weight is not None:
        gt.broadcast_shapes(tuple(target.shape), tuple(weight.shape))
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)`` computed from the logits in the stable
    form ``(1 - t) * x + (1 + (pos_weight - 1) * t) * (max(-x, 0) + log1p(exp(-|x|)))``."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.size()}) must be the same as input size "
                         f"({input.size()})")
    if pos_weight is None:
        loss = nn_ops._bce_with_logits(input, target)
    else:
        loss = nn_ops._bce_with_logits_pos_weight(input, target, pos_weight)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """KL divergence ``target * (log(target) - input)`` of log-probabilities ``input`` (zero
    where target is zero); ``log_target``: the target is given as log-probabilities.
    'batchmean' divides the sum by the batch size (the mathematical KL divergence)."""
    if size_average is not None or reduce is not None:
        reduction = legacy_get_string(size_average, reduce)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if reduction != "batchmean":
        reduction = _reduction(None, None, reduction)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # Terms with target <= 0 are zero, with zero gradients (log of 1 there keeps the
        # masked-out branch finite).
        positive = target > 0
        safe = gt.where(positive, target, gt.ones((), dtype=target.dtype, device=target.device))
        loss = target * (safe.log() - input)
        loss = gt.where(positive, loss, gt.zeros((), dtype=loss.dtype, device=loss.device))
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.dim() else total
    return _reduce(loss, reduction)


# -- embedding and ranking losses --------------------------------------------------------------
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1
    (rows of (N, D) inputs with an (N,) target, or (D,) inputs with a scalar target)."""
    reduction = _reduction(size_average, reduce, reduction)
    tdim = target.dim()
    if tdim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    want = tdim + 1
    if input1.dim() != want or input2.dim() != want:
        raise RuntimeError(f"{tdim}D target tensor expects {want}D input tensors, but found "
                           f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    prod = (input1 * input2).sum(tdim)
    mag1 = (input1 * input1).sum(tdim) + _EPSILON
    mag2 = (input2 * input2).sum(tdim) + _EPSILON
    cos = prod / (mag1 * mag2).sqrt()
    zero = gt.zeros((), dtype=cos.dtype, device=cos.device)
    pos = gt.where(target == 1, 1 - cos, zero)
    neg = gt.where(target == -1, (cos - margin).clamp_min(0), zero)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``: input1 should rank above input2
    where target is 1, below where it is -1."""
    reduction = _reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.size()}, input2: {input2.size()}, "
                           f"target: {target.size()} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1 (as PyTorch, any
    other target value gets both terms)."""
    reduction = _reduction(size_average, reduce, reduction)
    zero = gt.zeros((), dtype=input.dtype, device=input.device)
    below = gt.where(target != 1, (margin - input).clamp_min(0), zero)
    return _reduce(below + gt.where(target != -1, input, zero), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with the pairwise p-norm distance ``d`` over the
    last dim; ``swap``: ``d(a, n)`` becomes ``min(d(a, n), d(p, n))``."""
    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {dims[0]}D, positive "
                           f"{dims[1]}D, and negative {dims[2]}D inputs")
    dist_pos = _pairwise_distance(anchor, positive, p, eps)
    dist_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = gt.minimum(dist_neg, _pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def _pairwise_distance(x1: Tensor, x2: Tensor, p: float, eps: float) -> Tensor:
    # PyTorch's pairwise_distance: eps is added to the difference (not to the norm), so equal
    # rows keep a nonzero distance and a finite gradient.
    return gt.norm(x1 - x2 + eps, p, max(x1.dim(), x2.dim()) - 1)


# -- likelihood and soft-margin losses ---------------------------------------------------------
def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Two-class logistic loss ``log(1 + exp(-target * input))`` for targets of 1 or -1."""
    reduction = _reduction(size_average, reduce, reduction)
    z = -(input * target)
    # PyTorch writes into an output like the input, so only the target broadcasts, and the
    # result keeps the input's dtype
    if z.shape != input.shape:
        raise RuntimeError(f"output with shape {list(input.shape)} doesn't match the broadcast "
                           f"shape {list(z.shape)}")
    if z.dtype is not input.dtype and input.dtype.is_floating_point:
        z = z.to(input.dtype)
    # softplus(z): bce-with-logits against a zero target is exactly log1p(exp(z)), computed
    # stably (PyTorch's log1p(exp(z)) overflows to inf for z beyond ~88 in float32).
    loss = nn_ops._bce_with_logits(z, gt.zeros((), dtype=z.dtype, device=z.device))
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Binary cross entropy of the logits ``input`` (N, C) or (C) against 0/1 targets, weighted
    per class, then averaged over the classes (the last dim): one loss per sample."""
    if size_average is not None or reduce is not None:
        reduction = legacy_get_string(size_average, reduce)
    # -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)) is bce-with-logits, one fused op
    loss = nn_ops._bce_with_logits(input, target)
    if weight is not None:
        loss = loss * weight
    if input.dim() == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    loss = loss.sum(input.dim() - 1) / input.shape[-1]
    if reduction not in nn_ops.REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    return _reduce(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Poisson negative log likelihood: ``exp(input) - target * input`` of log-rates, or
    ``input - target * log(input + eps)`` of rates; ``full`` adds Stirling's approximation of
    ``log(target!)`` where target > 1."""
    if size_average is not None or reduce is not None:
        reduction = legacy_get_string(size_average, reduce)
    if reduction not in nn_ops.REDUCTIONS:   # no 'elementwise_mean' alias here, as in PyTorch
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        # Terms with target <= 1 are zero, with zero gradients: a target of 1 there keeps the
        # masked-out branch finite (PyTorch's target gradient is NaN at target 0). NaN targets
        # stay NaN, as PyTorch's masked_fill(target <= 1, 0) keeps them.
        small = target <= 1
        safe = gt.where(small, gt.ones((), dtype=target.dtype, device=target.device), target)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + gt.where(small, gt.zeros((), dtype=stirling.dtype,
                                                device=stirling.device), stirling)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """Gaussian negative log likelihood ``0.5 * (log(var) + (input - target) ** 2 / var)`` (plus
    ``0.5 * log(2 * pi)`` if ``full``), with ``var`` clamped below at ``eps``. ``var`` matches
    the input's shape, or lacks its last dim or has one dim of size 1 (one variance shared
    along it), or is a float."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * gt.ones_like(input)
    elif not isinstance(var, Tensor):
        # PyTorch fails inside torch.any() on anything else (an int, say), with a TypeError
        raise TypeError(f"gaussian_nll_loss(): var must be a Tensor or a float, not "
                        f"{type(var).__name__}")
    elif gt.any(var < 0):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)   # homoscedastic along the last dim
        elif not (input.dim() == var.dim() and
                  sum(v for i, v in zip(input.shape, var.shape, strict=True) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in nn_ops.REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    # Clamped without recording the clamp, as PyTorch does: var's gradient passes straight
    # through where var < eps (evaluated at eps), rather than being zeroed.
    var = var.clone()
    with gt.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# Autocast policies (gputensor/amp/autocast_mode.py's tables).
_autocast.apply(globals(), tuple(n for n in __all__ if n != "binary_cross_entropy"))
