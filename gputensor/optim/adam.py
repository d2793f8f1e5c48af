"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize.

Contiguous float32/float64 parameters are updated by the backend's fused ``_fused_adam`` kernel
(one pass per parameter); anything else (strided or half-precision parameters, ``fused=False``,
``foreach=True``) takes the op-by-op path, which follows PyTorch's single-tensor rule.
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
    check_betas,
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


class Adam(Optimizer):
    """Adam (Kingma & Ba); ``decoupled_weight_decay=True`` makes it AdamW."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        check_lr(lr)
        check_nonnegative("eps", eps, "epsilon value")
        betas = check_betas(betas)
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_unsupported(capturable=capturable, differentiable=differentiable)
        check_fused_foreach(fused, foreach)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
            group.setdefault("decoupled_weight_decay", isinstance(self, AdamW))

    def _update_group(self, group: dict[str, Any]) -> None:
        amsgrad = group["amsgrad"]
        items, steps = [], []
        for p, g, state in params_with_grad(self, group, type(self).__name__):
            if not state:
                state["step"] = new_step()
                state["exp_avg"] = gt.zeros_like(p)
                state["exp_avg_sq"] = gt.zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = gt.zeros_like(p)
            item = (p, g, state["exp_avg"], state["exp_avg_sq"])
            if amsgrad:
                item += (state["max_exp_avg_sq"],)
            if p._dtype.is_complex:
                item = tuple(as_real(t) for t in item)
            items.append(item)
            steps.append(increment_step(state["step"]))
        if not items:
            return
        beta1, beta2 = group["betas"]
        hyper = dict(lr=to_scalar(group["lr"]), beta1=to_scalar(beta1),
                     beta2=to_scalar(beta2), weight_decay=group["weight_decay"],
                     eps=group["eps"], amsgrad=amsgrad, maximize=group["maximize"],
                     decoupled_weight_decay=group["decoupled_weight_decay"])
        fn, fast, slow = fused_kernel(group, "_fused_adam", type(self).__name__, items)
        if fast:
            cols = columns(items, fast)
            fn(cols[0], cols[1], cols[2], cols[3], cols[4] if amsgrad else (),
               [steps[i] for i in fast], **hyper)
        for i in slow:
            item = items[i]
            _adam_tensor(*item[:4], item[4] if amsgrad else None, steps[i], **hyper)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter); weight_decay defaults to 1e-2."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


def _adam_tensor(param: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor,
                 max_exp_avg_sq: Tensor | None, step: float, *, lr: float, beta1: float,
                 beta2: float, weight_decay: float, eps: float, amsgrad: bool, maximize: bool,
                 decoupled_weight_decay: bool) -> None:
    """PyTorch's single-tensor Adam rule for one (real-viewed) parameter, op by op."""
    if maximize:
        grad = grad.neg()
    if weight_decay != 0:
        if decoupled_weight_decay:
            param.mul_(1 - lr * weight_decay)
        else:
            grad = grad.add(param, alpha=weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2 ** 0.5
    if amsgrad:
        max_exp_avg_sq.maximum_(exp_avg_sq)
        denom = max_exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(eps)
    else:
        denom = exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(eps)
    addcdiv_(param, exp_avg, denom, -step_size)
