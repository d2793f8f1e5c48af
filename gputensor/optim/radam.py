"""RAdam (Liu et al.): Adam with a rectified adaptive learning rate."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    addcmul_,
    as_real,
    check_betas,
    check_lr,
    check_nonnegative,
    check_unsupported,
    increment_step,
    new_step,
    params_with_grad,
    to_scalar,
)


class RAdam(Optimizer):
    """RAdam: Adam whose adaptive step is switched on once its variance is tractable
    (``decoupled_weight_decay`` gives RAdamW)."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        check_lr(lr)
        check_nonnegative("eps", eps, "epsilon value")
        betas = check_betas(betas)
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay = to_scalar(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        for param, grad, state in params_with_grad(self, group, "RAdam"):
            if not state:
                state["step"] = new_step()
                state["exp_avg"] = gt.zeros_like(param)
                state["exp_avg_sq"] = gt.zeros_like(param)
            step = increment_step(state["step"])
            if group["maximize"]:
                grad = grad.neg()
            param, grad = as_real(param), as_real(grad)
            exp_avg, exp_avg_sq = as_real(state["exp_avg"]), as_real(state["exp_avg_sq"])
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    param.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            update = exp_avg.div(bias_correction1).mul_(lr)
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                        / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                # (bias_correction2 ** 0.5) / (sqrt(v) + eps): PyTorch's scalar / tensor is
                # reciprocal(tensor) * scalar.
                adaptive_lr = exp_avg_sq.sqrt().add_(eps).reciprocal_().mul_(
                    bias_correction2 ** 0.5)
                update.mul_(adaptive_lr).mul_(rect)
            param.add_(update, alpha=-1.0)
