"""Adadelta (Zeiler): per-coordinate steps from running averages of squared grads and deltas."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    addcmul_,
    as_real,
    check_lr,
    check_nonnegative,
    check_unsupported,
    increment_step,
    new_step,
    params_with_grad,
    to_scalar,
)


class Adadelta(Optimizer):
    """Adadelta: unit-corrected steps from running averages of squared grads and updates."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho} (must be in [0, 1])")
        check_nonnegative("eps", eps, "epsilon value")
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, rho, eps = to_scalar(group["lr"]), group["rho"], group["eps"]
        weight_decay = group["weight_decay"]
        for param, grad, state in params_with_grad(self, group, "Adadelta"):
            if not state:
                state["step"] = new_step()
                state["square_avg"] = gt.zeros_like(param)
                state["acc_delta"] = gt.zeros_like(param)
            increment_step(state["step"])
            if group["maximize"]:
                grad = grad.neg()
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            grad = as_real(grad)
            square_avg, acc_delta = as_real(state["square_avg"]), as_real(state["acc_delta"])
            addcmul_(square_avg.mul_(rho), grad, grad, 1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
            addcmul_(acc_delta.mul_(rho), delta, delta, 1 - rho)
            as_real(param).add_(delta, alpha=-lr)
