"""RMSprop (Hinton's lecture 6e), with momentum and the centered variant."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    addcdiv_,
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


class RMSprop(Optimizer):
    """RMSprop: steps scaled by a running RMS of the gradients (``centered``: of their
    deviation from the running mean)."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_lr(lr)
        check_nonnegative("eps", eps, "epsilon value")
        check_nonnegative("momentum", momentum, "momentum value")
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_nonnegative("alpha", alpha, "alpha value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, alpha, eps = to_scalar(group["lr"]), group["alpha"], group["eps"]
        momentum, centered = group["momentum"], group["centered"]
        weight_decay = group["weight_decay"]
        for param, grad, state in params_with_grad(self, group, "RMSprop"):
            if not state:
                state["step"] = new_step()
                state["square_avg"] = gt.zeros_like(param)
                if momentum > 0:
                    state["momentum_buffer"] = gt.zeros_like(param)
                if centered:
                    state["grad_avg"] = gt.zeros_like(param)
            increment_step(state["step"])
            if group["maximize"]:
                grad = grad.neg()
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            param, grad = as_real(param), as_real(grad)
            square_avg = as_real(state["square_avg"])
            addcmul_(square_avg.mul_(alpha), grad, grad, 1 - alpha)
            if centered:
                grad_avg = as_real(state["grad_avg"]).lerp_(grad, 1 - alpha)
                # square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                avg = square_avg.add(grad_avg.mul(-1).mul_(grad_avg)).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg.add_(eps)
            if momentum > 0:
                buf = as_real(state["momentum_buffer"])
                addcdiv_(buf.mul_(momentum), grad, avg)
                param.add_(buf, alpha=-lr)
            else:
                addcdiv_(param, grad, avg, -lr)
