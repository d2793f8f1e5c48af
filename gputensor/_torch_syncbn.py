"""torch.* building blocks of synchronised batch norm: per-rank statistics, their combination
across ranks, the elementwise normalisation and the two halves of its backward.

PyTorch registers these for CUDA only; here they are compositions of ordinary ops, so they
run on every device, with CUDA's formulas: statistics of float16/bfloat16 inputs in float32,
``invstd = 1 / sqrt(biased var + eps)`` (0 where var and eps are both 0), the ranks'
statistics merged with the parallel-variance formula weighted by each rank's count, running
statistics moved by ``momentum`` towards the batch mean and unbiased variance. PyTorch has no
derivatives for them (SyncBatchNorm wraps them in its own autograd Function); these are
differentiable compositions, so a gradient through them is computed rather than refused.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._ops.nn import _compute_dtype
from gputensor._tensor import Tensor


def _dims(x: Tensor) -> list[int]:
    if x.dim() < 2:
        raise RuntimeError(f"batch norm expects an input of at least 2 dims (N, C, *), got "
                           f"{list(x.shape)}")
    return [0, *range(2, x.dim())]


def _channel(t: Tensor, x: Tensor) -> Tensor:
    """A (C,) tensor viewed to broadcast against ``x`` (N, C, *)."""
    return t.reshape(1, -1, *([1] * (x.dim() - 2)))


def _invstd(var: Tensor, eps: float) -> Tensor:
    if eps == 0:
        return gt.where(var == 0, gt.zeros_like(var), var.rsqrt())
    return (var + eps).rsqrt()


def _update_running(running: Tensor | None, value: Tensor, momentum: float) -> None:
    if running is not None:
        with gt.no_grad():
            running.mul_(1 - momentum).add_(value.to(running.dtype), alpha=momentum)


def batch_norm_stats(input: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(mean, invstd) per channel of this rank's ``input``."""
    dims = _dims(input)
    x = input.to(_compute_dtype(input.dtype))
    return x.mean(dims), _invstd(x.var(dims, correction=0), eps)


def batch_norm_gather_stats_with_counts(input: Tensor, mean: Tensor, invstd: Tensor,
                                        running_mean: Tensor | None,
                                        running_var: Tensor | None, momentum: float,
                                        eps: float, counts: Tensor) -> tuple[Tensor, Tensor]:
    """The global (mean, invstd) of ranks' (world, C) ``mean``/``invstd`` with element counts
    ``counts`` (world,); updates the running statistics in place. ``input`` only names the
    device and layout in PyTorch; its values are not read."""
    if mean.dim() != 2 or invstd.shape != mean.shape or counts.numel() != mean.shape[0]:
        raise RuntimeError(f"batch_norm_gather_stats: expected mean and invstd of shape (world, "
                           f"C) and counts of (world,), but got mean {list(mean.shape)}, "
                           f"invstd {list(invstd.shape)} and counts {list(counts.shape)}")
    n = counts.to(mean.dtype).reshape(-1, 1)
    total = n.sum(0)
    g_mean = (mean * n).sum(0) / total
    var = invstd.reciprocal().square() - eps          # each rank's biased variance
    m2 = ((var + (mean - g_mean).square()) * n).sum(0)
    _update_running(running_mean, g_mean, momentum)
    _update_running(running_var, m2 / (total - 1), momentum)
    return g_mean, (m2 / total + eps).rsqrt()


def batch_norm_gather_stats(input: Tensor, mean: Tensor, invstd: Tensor,
                            running_mean: Tensor | None, running_var: Tensor | None,
                            momentum: float, eps: float, count: int) -> tuple[Tensor, Tensor]:
    """batch_norm_gather_stats_with_counts with the same ``count`` for every rank."""
    counts = gt.full((mean.shape[0],), count, dtype=mean.dtype, device=mean.device)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                               momentum, eps, counts)


def batch_norm_elemt(input: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor,
                     invstd: Tensor, eps: float) -> Tensor:
    """``(input - mean) * invstd * weight + bias`` per channel. ``eps`` is unused, as in
    PyTorch: ``invstd`` already includes it."""
    _dims(input)
    out = (input - _channel(mean, input)) * _channel(invstd, input)
    if weight is not None:
        out = out * _channel(weight, input)
    if bias is not None:
        out = out + _channel(bias, input)
    return out.to(input.dtype)


def batch_norm_backward_reduce(grad_out: Tensor, input: Tensor, mean: Tensor, invstd: Tensor,
                               weight: Tensor | None, input_g: bool, weight_g: bool,
                               bias_g: bool) -> tuple[Any, Any, Any, Any]:
    """(sum_dy, sum_dy_xmu, grad_weight, grad_bias) over this rank's batch; each is None
    when its flag (input_g for the first two) is False, as PyTorch leaves it undefined."""
    dims = _dims(input)
    sdt = mean.dtype
    dy = grad_out.to(sdt)
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * (input.to(sdt) - _channel(mean, input))).sum(dims)
    pdt = weight.dtype if weight is not None else sdt
    return (sum_dy if input_g else None, sum_dy_xmu if input_g else None,
            (sum_dy_xmu * invstd).to(pdt) if weight_g else None,
            sum_dy.to(pdt) if bias_g else None)


def batch_norm_backward_elemt(grad_out: Tensor, input: Tensor, mean: Tensor, invstd: Tensor,
                              weight: Tensor | None, sum_dy: Tensor, sum_dy_xmu: Tensor,
                              count: Tensor) -> Tensor:
    """The input gradient from the globally reduced ``sum_dy`` and ``sum_dy_xmu``, with
    ``count`` holding each rank's element count per channel."""
    total = count.to(mean.dtype).sum()
    mean_dy = _channel(sum_dy / total, input)
    k = _channel(sum_dy_xmu / total * invstd.square(), input)
    scale = invstd if weight is None else invstd * weight.to(invstd.dtype)
    xmu = input.to(mean.dtype) - _channel(mean, input)
    grad = (grad_out.to(mean.dtype) - mean_dy - xmu * k) * _channel(scale, input)
    return grad.to(input.dtype)


def batch_norm_update_stats(input: Tensor, running_mean: Tensor | None,
                            running_var: Tensor | None, momentum: float
                            ) -> tuple[Tensor, Tensor]:
    """(mean, biased var) per channel; the running statistics move towards the mean and the
    unbiased variance."""
    dims = _dims(input)
    x = input.to(_compute_dtype(input.dtype))
    mean, var = x.mean(dims), x.var(dims, correction=0)
    _update_running(running_mean, mean, momentum)
    _update_running(running_var, x.var(dims, correction=1), momentum)
    return mean, var


FUNCTIONS: dict[str, Any] = {
    name: obj for name, obj in list(globals().items())
    if callable(obj) and name.startswith("batch_norm_")
    and getattr(obj, "__module__", "") == __name__}
