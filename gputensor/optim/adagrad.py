"""Adagrad (Duchi et al.), with learning-rate decay and an initial accumulator value.

Contiguous float32/float64 parameters go through the backend's fused ``_fused_adagrad``
kernel (PyTorch's ``fused`` Adagrad); the rest follow the single-tensor rule op by op.
"""

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
    check_fused_foreach,
    check_lr,
    check_nonnegative,
    check_unsupported,
    columns,
    fused_kernel,
    increment_step,
    new_step,
    params_with_grad,
    to_scalar,
)


class Adagrad(Optimizer):
    """Adagrad: steps scaled by the root of the accumulated squared gradients."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_lr(lr)
        check_nonnegative("lr_decay", lr_decay, "lr_decay value")
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_nonnegative("initial_accumulator_value", initial_accumulator_value,
                          "initial_accumulator_value value")
        check_nonnegative("eps", eps, "epsilon value")
        check_unsupported(differentiable=differentiable)
        check_fused_foreach(fused, foreach)
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        # PyTorch creates Adagrad's state up front, so state_dict() lists every param at once.
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state[p], group)

    @staticmethod
    def _init_state(p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        value = group["initial_accumulator_value"]
        state["step"] = new_step()
        state["sum"] = gt.full_like(p, complex(value, value) if p.is_complex() else value)

    def share_memory(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"].share_memory_()

    def _update_group(self, group: dict[str, Any]) -> None:
        items, steps = [], []
        for p, g, state in params_with_grad(self, group, "Adagrad"):
            if not state:  # params added by add_param_group after construction
                self._init_state(p, state, group)
            item = (as_real(p), as_real(g), as_real(state["sum"]))
            items.append(item)
            steps.append(increment_step(state["step"]))
        if not items:
            return
        hyper = dict(lr=to_scalar(group["lr"]), lr_decay=group["lr_decay"],
                     weight_decay=group["weight_decay"], eps=group["eps"],
                     maximize=group["maximize"])
        fn, fast, slow = fused_kernel(group, "_fused_adagrad", "Adagrad", items)
        if fast:
            cols = columns(items, fast)
            fn(cols[0], cols[1], cols[2], [steps[i] for i in fast], **hyper)
        for i in slow:
            _adagrad_tensor(*items[i], steps[i], **hyper)


def _adagrad_tensor(param: Tensor, grad: Tensor, state_sum: Tensor, step: float, *, lr: float,
                    lr_decay: float, weight_decay: float, eps: float, maximize: bool) -> None:
    """PyTorch's single-tensor (dense) Adagrad rule for one (real-viewed) parameter."""
    if maximize:
        grad = grad.neg()
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    clr = lr / (1 + (step - 1) * lr_decay)
    addcmul_(state_sum, grad, grad, 1)
    std = state_sum.sqrt().add_(eps)
    addcdiv_(param, grad, std, -clr)
