"""Muon (Keller Jordan): momentum SGD whose update is orthogonalized by a quintic
Newton-Schulz iteration, for the 2-D weights of hidden layers (PyTorch 2.13's
``torch.optim.Muon``, op for op: the iteration runs in bfloat16 as PyTorch's does)."""

from __future__ import annotations

import math
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from .optimizer import Optimizer, ParamsT, to_scalar

# Keller Jordan's constants (https://kellerjordan.github.io/posts/muon/), PyTorch's defaults.
EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5
_ADJUST_LR_FNS = ("original", "match_rms_adamw")


def _zeropower_via_newtonschulz(grad: Tensor, ns_coefficients: tuple[float, float, float],
                                ns_steps: int, eps: float) -> Tensor:
    """An approximately orthogonal matrix U S' V^T (S' ~ diag in [0.5, 1.5]) from
    G = U S V^T, by ``ns_steps`` quintic iterations X <- aX + (bA + cA^2)X, A = XX^T."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    tall = grad.size(0) > grad.size(1)
    x = grad.bfloat16()
    if tall:  # iterate on the wide orientation: the Gram matrix is the smaller one
        x = x.T
    x.div_(x.norm().clamp(min=eps))  # spectral norm <= Frobenius norm <= 1
    for _ in range(ns_steps):
        gram = x @ x.T
        gram_update = gt.addmm(gram, gram, gram, beta=b, alpha=c)
        x = gt.addmm(x, gram_update, x, beta=a)
    return x.T if tall else x


def _adjust_lr(lr: float, adjust_lr_fn: str | None, param_shape: Any) -> float:
    """Scale lr so orthogonalized updates of rectangular matrices keep a consistent RMS."""
    rows, cols = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))  # Keller Jordan's
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))  # Moonshot's: AdamW's lr carries over
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """Muon for 2-D parameters; optimize biases and embeddings with e.g. AdamW."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, weight_decay: float = 0.1,
                 momentum: float = 0.95, nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B,
                                                                DEFAULT_C),
                 eps: float = EPS, ns_steps: int = DEFAULT_NS_STEPS,
                 adjust_lr_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in _ADJUST_LR_FNS:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum,
                    "nesterov": nesterov, "ns_coefficients": ns_coefficients, "eps": eps,
                    "ns_steps": ns_steps, "adjust_lr_fn": adjust_lr_fn}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = to_scalar(group["lr"])
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if p.is_complex():
                raise RuntimeError("Muon does not support complex parameters")
            if grad.is_sparse:
                raise RuntimeError("Muon does not support sparse gradients")
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = gt.zeros_like(grad,
                                                         memory_format=gt.preserve_format)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - momentum)
            update = grad.lerp(buf, momentum) if group["nesterov"] else buf
            update = _zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                                 group["ns_steps"], group["eps"])
            adjusted_lr = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
            p.mul_(1 - lr * weight_decay)  # decoupled weight decay, with the unadjusted lr
            p.add_(update, alpha=-adjusted_lr)


__all__ = ["Muon"]
