"""ASGD (Polyak & Juditsky): SGD with a decaying step and a running average of the iterates."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    as_real,
    check_lr,
    check_nonnegative,
    check_unsupported,
    increment_step,
    params_with_grad,
    step_dtype,
    to_scalar,
)

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """Averaged SGD: ``eta`` decays as ``lr / (1 + lambd * lr * t) ** alpha`` and, from step
    ``t0`` on, ``ax`` keeps the running average of the iterates (before ``t0`` it tracks the
    parameter itself).

    State per param, as PyTorch's: ``step``, ``eta`` and ``mu`` are 0-dim tensors of the
    default float dtype (float32, or float64 when that is the default) on the param's device;
    ``ax`` is like the param. ``foreach`` only picks PyTorch's multi-tensor kernels and is
    accepted; ``capturable`` and ``differentiable`` must stay False, as for every gputensor
    optimizer.
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        check_lr(lr)
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, lambd, alpha = to_scalar(group["lr"]), group["lambd"], group["alpha"]
        t0, weight_decay = group["t0"], group["weight_decay"]
        for param, grad, state in params_with_grad(self, group, "ASGD"):
            if not state:
                dev, dt = param.device, step_dtype()
                state["step"] = gt.zeros((), dtype=dt, device=dev)
                state["eta"] = gt.tensor(lr, dtype=dt, device=dev)
                state["mu"] = gt.ones((), dtype=dt, device=dev)
                state["ax"] = gt.zeros_like(param)
            step = increment_step(state["step"])
            eta, mu = state["eta"], state["mu"]
            if group["maximize"]:
                grad = grad.neg()
            param, grad, ax = as_real(param), as_real(grad), as_real(state["ax"])
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            eta_value = eta.item()
            param.mul_(1 - lambd * eta_value)
            param.add_(grad, alpha=-eta_value)
            mu_value = mu.item()
            if mu_value != 1:
                ax.add_(param.sub(ax).mul_(mu_value))
            else:
                ax.copy_(param)
            _store(eta, lr / ((1 + lambd * lr * step) ** alpha))
            _store(mu, 1 / max(1, step - t0))


def _store(t: Tensor, value: float) -> None:
    """``t.copy_(torch.as_tensor(value))``: PyTorch rounds the new value to the default dtype
    first, then to ``t``'s dtype (which differs once a state dict has cast ``t``)."""
    t.copy_(gt.tensor(value))
