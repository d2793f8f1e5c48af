"""Gradient clipping: clip_grad_norm_ (rescale all grads by one factor) and clip_grad_value_.

``foreach=`` is accepted for PyTorch compatibility; gradients are processed one tensor at a
time either way (there is no fused multi-tensor kernel yet).
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable

import gputensor as gt
from gputensor._tensor import Tensor

TensorOrTensors = Tensor | Iterable[Tensor]


def _as_list(tensors: TensorOrTensors) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(tensors: TensorOrTensors, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` seen as one vector (a 0-d tensor)."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return gt.tensor(0.0)
    first_device = tensors[0].device
    with gt.no_grad():
        # The norm of the per-tensor norms equals the norm of the concatenation.
        norms = [gt.norm(t, norm_type).to(first_device) for t in tensors]
        total = gt.norm(gt.stack(norms), norm_type)
    if error_if_nonfinite and not bool(gt.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           f"`parameters` is non-finite, so it cannot be clipped. To disable "
                           f"this error and scale the gradients by the non-finite norm anyway, "
                           f"set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale every ``.grad`` by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with gt.no_grad():
        # Always multiply (by 1 when no clipping is needed): no host sync on the comparison.
        coef = gt.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        per_device = {}
        for g in grads:
            c = per_device.get(g.device)
            if c is None:
                c = per_device[g.device] = coef.to(g.device)
            g.mul_(c)


def clip_grad_norm_(parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Rescale the gradients so their total norm is at most ``max_norm``; returns that norm
    (before clipping)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        was_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)  # it is walked twice
        if was_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every ``.grad`` elementwise to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with gt.no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


def clip_grad_norm(parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated name of :func:`clip_grad_norm_` (PyTorch's warning)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)

