"""Adafactor (Shazeer & Stern): Adam-like steps with a factored second moment, in little memory."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    check_lr,
    increment_step,
    new_step,
    params_with_grad,
    to_scalar,
)

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor as ``torch.optim.Adafactor``: for params of two or more dims the second moment
    is kept as a row factor (``row_var``, last dim reduced) and a column factor (``col_var``,
    second-to-last dim reduced), whose outer product over the row mean estimates it; 1-D (and
    0-D) params keep a full ``variance``. The step is relative to the param's RMS and clipped
    by ``d``; ``beta2_decay`` sets the second-moment horizon ``1 - step ** beta2_decay``.

    ``eps[0]`` of None means the param dtype's machine epsilon (taken, as PyTorch does, from
    the first param of the group that has a gradient). ``foreach`` only picks PyTorch's
    multi-tensor kernels and is accepted. Complex params and sparse gradients are rejected.
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        check_lr(lr)
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {"lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, d, beta2_decay = to_scalar(group["lr"]), group["d"], group["beta2_decay"]
        weight_decay = group["weight_decay"]
        eps1, eps2 = group["eps"]
        for param in group["params"]:
            if param.grad is not None and param.is_complex():
                raise RuntimeError("Adafactor does not support complex parameters")
        for param, grad, state in params_with_grad(self, group, "Adafactor"):
            if not state:
                state["step"] = new_step()
                if grad.dim() > 1:
                    row_shape, col_shape = list(grad.shape), list(grad.shape)
                    row_shape[-1] = 1
                    col_shape[-2] = 1
                    state["row_var"] = gt.zeros(row_shape, dtype=grad.dtype, device=grad.device)
                    state["col_var"] = gt.zeros(col_shape, dtype=grad.dtype, device=grad.device)
                else:
                    state["variance"] = gt.zeros_like(grad)
            if group["maximize"]:
                grad = grad.neg()
            if eps1 is None:
                eps1 = gt.finfo(param.dtype).eps
            step = increment_step(state["step"])
            one_minus_beta2_t = step ** beta2_decay
            rho_t = min(lr, 1 / (step ** 0.5))
            alpha = max(eps2, param.norm(2).item() / (param.numel() ** 0.5)) * rho_t
            if weight_decay != 0:
                param.mul_(1 - lr * weight_decay)
            if grad.dim() > 1:
                row_var, col_var = state["row_var"], state["col_var"]
                # Mean of g*g along a dim, as a squared norm, without materialising g*g.
                row_mean = gt.norm(grad, dim=-1, keepdim=True).square_().div_(grad.size(-1))
                row_var.lerp_(row_mean, one_minus_beta2_t)
                col_mean = gt.norm(grad, dim=-2, keepdim=True).square_().div_(grad.size(-2))
                col_var.lerp_(col_mean, one_minus_beta2_t)
                var_estimate = row_var @ col_var
                var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
            else:
                variance = state["variance"]
                variance.lerp_(grad * grad, one_minus_beta2_t)
                var_estimate = variance.clone()
            # eps1 is squared because the update takes the square root.
            update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
            update.mul_(grad)
            denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))
            param.add_(update, alpha=-alpha / denom)
