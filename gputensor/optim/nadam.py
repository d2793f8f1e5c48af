"""NAdam (Dozat): Adam with Nesterov momentum and a momentum-decay schedule."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._compile import state as _capture
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    addcdiv_,
    addcmul_,
    as_real,
    check_betas,
    check_lr,
    check_nonnegative,
    check_unsupported,
    increment_step,
    new_step,
    params_with_grad,
    step_dtype,
    to_scalar,
)


class NAdam(Optimizer):
    """NAdam: Adam with Nesterov momentum; ``decoupled_weight_decay`` gives NAdamW."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_lr(lr)
        check_nonnegative("eps", eps, "epsilon value")
        betas = check_betas(betas)
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_nonnegative("momentum_decay", momentum_decay, "momentum_decay value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay = to_scalar(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        momentum_decay = group["momentum_decay"]
        for param, grad, state in params_with_grad(self, group, "NAdam"):
            if not state:
                state["step"] = new_step()
                state["mu_product"] = gt.tensor(1.0, dtype=step_dtype())
                state["exp_avg"] = gt.zeros_like(param)
                state["exp_avg_sq"] = gt.zeros_like(param)
            step = increment_step(state["step"])
            if group["maximize"]:
                grad = grad.neg()
            param, grad = as_real(param), as_real(grad)
            exp_avg, exp_avg_sq = as_real(state["exp_avg"]), as_real(state["exp_avg_sq"])
            bias_correction2 = 1 - beta2 ** step
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    param.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product = _mul_scalar_tensor(state["mu_product"], mu)
            exp_avg.lerp_(grad, 1 - beta1)
            addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
            denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)
            mu_product_next = mu_product * mu_next
            addcdiv_(param, grad, denom, -lr * (1.0 - mu) / (1.0 - mu_product))
            addcdiv_(param, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next))


def _mul_scalar_tensor(t: Tensor, factor: float) -> float:
    """``t *= factor`` for a 0-dim counter, rounded in its dtype (PyTorch keeps mu_product as
    a float32 tensor); returns the new value as a Python float."""
    _capture.host_effect("NAdam's mu_product update (a host-side counter)")
    h = t._host
    h *= h.dtype.type(factor)
    t._storage._version += 1
    return float(h)
