"""``SyncBatchNorm``: batch norm whose training statistics cover the whole data-parallel batch.

Each rank computes its channels' mean and biased variance and its element count; one
all-gather shares them and every rank combines them (the parallel variance formula) into the
global batch's statistics, then normalises its own slice with them. Backward all-reduces the
two per-channel sums the input gradient needs (of ``grad_out`` and of ``grad_out * (x -
mean)``); the weight and bias gradients stay local, as in PyTorch (DDP averages them). Outside
training, or in a one-process group, it is plain batch norm.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.autograd.function import Function

from .batchnorm import _BatchNorm
from .module import Module


def _channel_dims(x: Tensor) -> list[int]:
    return [0, *range(2, x.dim())]


def _per_channel(t: Tensor, x: Tensor) -> Tensor:
    """A (C,) tensor shaped to broadcast against ``x`` (N, C, ...)."""
    return t.reshape(1, -1, *([1] * (x.dim() - 2)))


class _SyncBatchNormFunction(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor | None, bias: Tensor | None,
                running_mean: Tensor | None, running_var: Tensor | None, eps: float,
                momentum: float, group: Any) -> Tensor:
        from gputensor import distributed as dist
        dims = _channel_dims(x)
        count = x.numel() // x.shape[1]
        mean = x.mean(dims)
        var = x.var(dims, correction=0)
        size = dist.get_world_size(group)
        # [mean, var, count] per rank, float64 so the combination loses nothing
        local = gt.cat([mean.double(), var.double(),
                        gt.full((1,), float(count), dtype=gt.float64, device=x.device)])
        gathered = gt.empty(size * local.numel(), dtype=gt.float64, device=x.device)
        dist.all_gather_into_tensor(gathered, local, group=group)
        per_rank = gathered.reshape(size, -1)
        c = x.shape[1]
        means, variances, counts = per_rank[:, :c], per_rank[:, c:2 * c], per_rank[:, 2 * c:]
        total = counts.sum()
        if total.item() <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(x.shape)} on every rank")
        g_mean = (means * counts).sum(0) / total
        g_var = ((variances + (means - g_mean) ** 2) * counts).sum(0) / total
        if running_mean is not None:
            n = total.item()
            running_mean.mul_(1 - momentum).add_(g_mean.to(running_mean.dtype) * momentum)
            running_var.mul_(1 - momentum).add_((g_var * n / (n - 1)).to(running_var.dtype)
                                                * momentum)
        mean32, invstd = g_mean.to(x.dtype), (g_var + eps).rsqrt().to(x.dtype)
        xhat = (x - _per_channel(mean32, x)) * _per_channel(invstd, x)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.group, ctx.total = group, total.item()
        out = xhat
        if weight is not None:
            out = out * _per_channel(weight, x)
        if bias is not None:
            out = out + _per_channel(bias, x)
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple:
        from gputensor import distributed as dist
        xhat, weight, invstd = ctx.saved_tensors
        dims = _channel_dims(grad_out)
        sum_dy = grad_out.sum(dims)
        sum_dy_xhat = (grad_out * xhat).sum(dims)
        grad_weight = sum_dy_xhat if weight is not None and ctx.needs_input_grad[1] else None
        grad_bias = sum_dy if ctx.needs_input_grad[2] else None
        grad_x = None
        if ctx.needs_input_grad[0]:
            sums = gt.cat([sum_dy, sum_dy_xhat])
            dist.all_reduce(sums, group=ctx.group)
            c = grad_out.shape[1]
            g_sum_dy, g_sum_dy_xhat = sums[:c] / ctx.total, sums[c:] / ctx.total
            scale = invstd if weight is None else invstd * weight
            grad_x = _per_channel(scale, grad_out) * (
                grad_out - _per_channel(g_sum_dy, grad_out)
                - xhat * _per_channel(g_sum_dy_xhat, grad_out))
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch norm over (N, C, ...) inputs, with statistics over every rank of
    ``process_group`` while training."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _check_non_zero_input_channels(self, input: Tensor) -> None:
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    def forward(self, input: Tensor) -> Tensor:
        from gputensor import distributed as dist
        self._check_input_dim(input)
        self._check_non_zero_input_channels(input)
        distributed = self.training and dist.is_initialized() and \
            dist.get_world_size(self.process_group) > 1
        if not distributed:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        track = self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias, self.running_mean if track else None,
            self.running_var if track else None, self.eps, factor, self.process_group)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every BatchNorm*D replaced by a SyncBatchNorm holding the same
        parameters and buffers (a BatchNorm module itself is returned converted)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                with gt.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


__all__ = ["SyncBatchNorm"]
