"""torch.nn's legacy layers: CrossMapLRN2d (Lua Torch's cross-channel LRN) and the deprecated
Container."""

from __future__ import annotations

import warnings
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.autograd import Function
from gputensor.nn.functional import pad

from .module import Module

__all__ = ["Container", "CrossMapLRN2d"]


def _window_sum(x: Tensor, low: int, high: int) -> Tensor:
    """out[:, c] = sum of x[:, j] for j in [c + low, c + high] inside [0, C) (dim 1)."""
    channels = x.size(1)
    before, after = max(0, -low), max(0, high)
    padded = pad(x, (0, 0, 0, 0, before, after))
    total = padded[:, low + before:low + before + channels]
    for shift in range(low + 1, high + 1):
        total = total + padded[:, shift + before:shift + before + channels]
    return total


class _CrossMapLRN2dFunction(Function):
    """PyTorch's CrossMapLRN2d autograd function, formula for formula.

    PyTorch's forward builds the channel-window sums incrementally and never drops channel 0
    once channel ``pre_pad`` is reached, and its backward sums ``grad * output / scale`` over
    an asymmetric window; neither is the derivative of the other. Both are reproduced so
    results and gradients equal PyTorch's (a gradcheck of this layer therefore fails there and
    here alike).
    """

    @staticmethod
    def forward(ctx: Any, input: Tensor, size: int, alpha: float, beta: float,
                k: float) -> Tensor:
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                             f"instead.")
        pre_pad = int((size - 1) / 2 + 1)
        square = input * input
        scale = _window_sum(square, 1 - pre_pad, pre_pad - 1)
        if input.size(1) > pre_pad:
            late = gt.arange(input.size(1), device=input.device) >= pre_pad
            scale = scale + square[:, :1] * late.to(input.dtype).reshape(1, -1, 1, 1)
        scale = scale * (alpha / size) + k
        output = scale.pow(-beta) * input
        ctx.size, ctx.alpha, ctx.beta = size, alpha, beta
        ctx.save_for_backward(input, output, scale)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        input, output, scale = ctx.saved_tensors
        size = ctx.size
        inverse_pre_pad = int(size - (size - 1) / 2)
        channels = input.size(1)
        if inverse_pre_pad > size - 1:  # PyTorch's padded buffer is too short (size 1)
            raise RuntimeError(f"start ({inverse_pre_pad}) + length ({channels}) exceeds "
                               f"dimension size ({channels + size - 1}).")
        ratio = grad_output * output / scale
        accum = _window_sum(ratio, -inverse_pre_pad, size - 1 - inverse_pre_pad)
        cache_ratio = 2 * ctx.alpha * ctx.beta / size
        grad_input = scale.pow(-ctx.beta) * grad_output - cache_ratio * input * accum
        return grad_input, None, None, None, None


class CrossMapLRN2d(Module):
    """Local response normalization across channels of (N, C, H, W) input, as Lua Torch's
    SpatialCrossMapLRN (PyTorch's legacy formulation, see ``_CrossMapLRN2dFunction``)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return _CrossMapLRN2dFunction.apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


_CONTAINER_DEPRECATION = ("`nn.Container` is deprecated. All of its functionality is now "
                          "implemented in `nn.Module`. Subclass that instead.")


class Container(Module):
    """Deprecated: a Module whose keyword arguments become its submodules. Creating or
    subclassing it warns (FutureWarning), as PyTorch's."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        warnings.warn(_CONTAINER_DEPRECATION, FutureWarning, stacklevel=2)
        super().__init_subclass__(**kwargs)

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn(_CONTAINER_DEPRECATION, FutureWarning, stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)
