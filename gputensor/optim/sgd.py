"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.

Contiguous float32/float64 parameters go through the backend's fused ``_fused_sgd`` kernel;
the rest follow PyTorch's single-tensor rule op by op.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import (
    Optimizer,
    ParamsT,
    as_real,
    check_fused_foreach,
    check_lr,
    check_nonnegative,
    check_unsupported,
    columns,
    fused_kernel,
    params_with_grad,
    to_scalar,
)


class SGD(Optimizer):
    """SGD; with ``momentum`` the heavy-ball (or ``nesterov``) variant, as torch.optim.SGD."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_lr(lr)
        check_nonnegative("momentum", momentum, "momentum value")
        check_nonnegative("weight_decay", weight_decay, "weight_decay value")
        check_unsupported(differentiable=differentiable)
        check_fused_foreach(fused, foreach)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"Nesterov momentum requires a momentum and zero dampening "
                             f"(got momentum={momentum}, dampening={dampening})")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

    def _update_group(self, group: dict[str, Any]) -> None:
        momentum = group["momentum"]
        items, fresh = [], []
        # Without momentum SGD keeps no per-parameter state (PyTorch leaves `state` empty).
        for p, g, state in params_with_grad(self, group, "SGD", with_state=momentum != 0,
                                            allow_sparse=True):
            if g.is_sparse:
                _sgd_sparse(p, g, group)
                continue
            item, is_first = (p, g), False
            if momentum != 0:
                buf = state.get("momentum_buffer")
                is_first = buf is None  # the update fills it (PyTorch clones the grad)
                if is_first:
                    buf = state["momentum_buffer"] = gt.empty_like(p)
                item += (buf,)
            if p._dtype.is_complex:
                item = tuple(as_real(t) for t in item)
            items.append(item)
            fresh.append(is_first)
        if not items:
            return
        hyper = dict(lr=to_scalar(group["lr"]), momentum=momentum,
                     dampening=group["dampening"], weight_decay=group["weight_decay"],
                     nesterov=group["nesterov"], maximize=group["maximize"])
        fn, fast, slow = fused_kernel(group, "_fused_sgd", "SGD", items)
        if fast:
            cols = columns(items, fast)
            fn(cols[0], cols[1], cols[2] if momentum != 0 else (), [fresh[i] for i in fast],
               **hyper)
        for i in slow:
            item = items[i]
            _sgd_tensor(item[0], item[1], item[2] if momentum != 0 else None, fresh[i],
                        **hyper)


def _sgd_sparse(param: Tensor, grad: Tensor, group: dict[str, Any]) -> None:
    """A sparse gradient (nn.Embedding(sparse=True)) updates only the rows it holds; like
    PyTorch's SGD that needs plain SGD: momentum and weight decay would densify the update."""
    if group["momentum"] != 0 or group["weight_decay"] != 0:
        raise RuntimeError(f"SGD with momentum={group['momentum']} or weight_decay="
                           f"{group['weight_decay']} does not support sparse gradients "
                           f"(parameter of shape {list(param.shape)})")
    lr = to_scalar(group["lr"])
    param.add_(grad, alpha=lr if group["maximize"] else -lr)


def _sgd_tensor(param: Tensor, grad: Tensor, buf: Tensor | None, first: bool, *, lr: float,
                momentum: float, dampening: float, weight_decay: float, nesterov: bool,
                maximize: bool) -> None:
    """PyTorch's single-tensor SGD rule for one (real-viewed) parameter, op by op."""
    if maximize:
        grad = grad.neg()
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    if momentum != 0:
        if first:
            buf.copy_(grad)
        else:
            buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        grad = grad.add(buf, alpha=momentum) if nesterov else buf
    param.add_(grad, alpha=-lr)
