"""Adamax: Adam's variant with an infinity-norm second moment."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    addcdiv_,
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


class Adamax(Optimizer):
    """Adamax: Adam with the second moment replaced by a decaying infinity norm."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        check_lr(lr)
        check_nonnegative("eps", eps, "epsilon value")
        betas = check_betas(betas)
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay = to_scalar(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        for param, grad, state in params_with_grad(self, group, "Adamax"):
            if not state:
                state["step"] = new_step()
                state["exp_avg"] = gt.zeros_like(param)
                state["exp_inf"] = gt.zeros_like(param)
            step = increment_step(state["step"])
            if group["maximize"]:
                grad = grad.neg()
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            param, grad = as_real(param), as_real(grad)
            exp_avg, exp_inf = as_real(state["exp_avg"]), as_real(state["exp_inf"])
            exp_avg.lerp_(grad, 1 - beta1)
            exp_inf.mul_(beta2).maximum_(grad.abs().add_(eps))
            clr = lr / (1 - beta1 ** step)
            addcdiv_(param, exp_avg, exp_inf, -clr)
