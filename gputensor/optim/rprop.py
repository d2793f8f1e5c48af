"""Rprop (Riedmiller & Braun): per-coordinate step sizes driven by the sign of the gradient."""

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
    check_unsupported,
    increment_step,
    new_step,
    params_with_grad,
    to_scalar,
)

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Resilient backpropagation: only the gradient's sign is used, so each coordinate's step
    size grows by ``etaplus`` while the sign holds and shrinks by ``etaminus`` when it flips
    (that coordinate then skips its update), clamped to ``step_sizes``.

    ``foreach`` only picks PyTorch's multi-tensor kernels (same results) and is accepted;
    ``capturable`` and ``differentiable`` must stay False, as for every gputensor optimizer.
    State per param, as PyTorch's: ``step`` (a CPU counter), ``prev`` (the last gradient used,
    zero where its sign flipped) and ``step_size``.
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for param, grad, state in params_with_grad(self, group, "Rprop"):
            if not state:
                lr = to_scalar(group["lr"])
                state["step"] = new_step()
                state["prev"] = gt.zeros_like(param)
                # Complex params are pairs of real numbers: both halves start at lr.
                fill = complex(lr, lr) if param.is_complex() else lr
                state["step_size"] = gt.full_like(grad, fill)
            increment_step(state["step"])
            if group["maximize"]:
                grad = grad.neg()
            param, grad = as_real(param), as_real(grad)
            prev, step_size = as_real(state["prev"]), as_real(state["step_size"])
            # The factor per coordinate: etaplus where the sign held, etaminus where it
            # flipped, 1 where either gradient is zero (NaN stays NaN, as in PyTorch).
            sign = grad.mul(prev).sign()
            sign.masked_fill_(sign.gt(0), etaplus)
            sign.masked_fill_(sign.lt(0), etaminus)
            sign.masked_fill_(sign.eq(0), 1)
            step_size.mul_(sign).clamp_(step_size_min, step_size_max)
            # A flipped sign means the last step overshot: no move now, and the next step
            # treats this coordinate as fresh (prev = 0).
            grad = grad.clone()
            grad.masked_fill_(sign.eq(etaminus), 0)
            addcmul_(param, grad.sign(), step_size, -1)
            prev.copy_(grad)
