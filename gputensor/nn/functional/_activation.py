"""Activation functions (torch.nn.functional's), mapped onto the elementwise and softmax ops.

Most are one registered elementwise op (relu, gelu, silu, elu, ...); the rest are short
compositions of ops, so they differentiate once the ops do. ``inplace=True`` writes into the
input through the op's in-place form.
"""

from __future__ import annotations

import warnings
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode as _autocast

# SELU's constants (Klambauer et al., 2017), as PyTorch uses them.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

__all__ = ["relu", "relu_", "hardtanh", "hardtanh_", "relu6", "leaky_relu", "leaky_relu_", "elu",
           "elu_", "selu", "selu_", "celu", "celu_", "gelu", "silu", "mish", "sigmoid", "tanh",
           "softplus", "logsigmoid", "hardsigmoid", "hardswish", "softsign", "tanhshrink",
           "threshold", "threshold_", "hardshrink", "softshrink", "glu", "prelu", "softmax",
           "log_softmax", "softmin", "gumbel_softmax", "rrelu", "rrelu_"]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return input.relu_() if inplace else gt.relu(input)


def relu_(input: Tensor) -> Tensor:
    return input.relu_()


def _check_limits(min_val: float, max_val: float) -> None:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    _check_limits(min_val, max_val)
    if inplace:
        return input.hardtanh_(min_val, max_val)
    return gt.hardtanh(input, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    if inplace:
        return input.leaky_relu_(negative_slope)
    return gt.leaky_relu(input, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return input.leaky_relu_(negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    if inplace:
        return input.elu_(alpha=alpha)
    return gt.elu(input, alpha=alpha)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return input.elu_(alpha=alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    if inplace:
        return input.elu_(alpha=_SELU_ALPHA, scale=_SELU_SCALE)
    return gt.elu(input, alpha=_SELU_ALPHA, scale=_SELU_SCALE)


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): elu with input_scale = 1 / alpha."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    if inplace:
        return input.elu_(alpha=alpha, input_scale=1.0 / alpha)
    return gt.elu(input, alpha=alpha, input_scale=1.0 / alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return gt.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    return input.silu_() if inplace else gt.silu(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    t = gt.softplus(input).tanh_()
    return input.mul_(t) if inplace else input * t


def sigmoid(input: Tensor) -> Tensor:
    return gt.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return gt.tanh(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold."""
    return gt.softplus(input, beta=beta, threshold=threshold)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), which stays finite for large |x|."""
    return gt.softplus(-input).neg_()


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    if inplace:
        return input.add_(3).hardtanh_(0.0, 6.0).div_(6)
    return gt.hardtanh(input + 3, 0.0, 6.0).div_(6)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    gate = gt.hardtanh(input + 3, 0.0, 6.0)
    if inplace:
        return input.mul_(gate).div_(6)
    return (input * gate).div_(6)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    return input - gt.tanh(input)


def _threshold(input: Tensor, limit: float, value: float, inplace: bool) -> Tensor:
    result = gt.where(input > limit, input, value)
    return input.copy_(result) if inplace else result


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value."""
    return _threshold(input, threshold, value, inplace)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _threshold(input, threshold, value, True)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return gt.where(input.abs() > lambd, input, 0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return gt.where(input > lambd, input - lambd, gt.where(input < -lambd, input + lambd, 0))


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """First half of ``input`` along ``dim`` gated by the sigmoid of the second half."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        d = dim % input.dim()
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    a, b = input.chunk(2, dim)
    return a * gt.sigmoid(b)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x >= 0, else weight * x; weight has 1 or C (= input.size(1)) entries."""
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.dim()}")
    channels = input.shape[1] if input.dim() >= 2 else 1
    n = weight.numel()
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {n} and channel size = {channels}.")
    if n == 1:
        weight = weight.reshape(())  # a shared slope never changes the output's shape
    elif input.dim() > 2:
        weight = weight.view(channels, *([1] * (input.dim() - 2)))
    return gt.where(input >= 0, input, weight * input)


def _implicit_dim_warning(name: str) -> None:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=3)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    if dim is None:
        _implicit_dim_warning("softmax")
    return gt.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype: Any = None) -> Tensor:
    if dim is None:
        _implicit_dim_warning("log_softmax")
    return gt.log_softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    """softmax(-x)."""
    if dim is None:
        _implicit_dim_warning("softmin")
    if dtype is not None:
        input = input.to(dtype)
    return gt.softmax(-input, dim)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """Samples of the Gumbel-softmax distribution over ``dim``: softmax((logits + g) / tau)
    with g = -log(Exponential(1)) noise (PyTorch's draw, from the default generator). With
    ``hard``, the one-hot of the argmax in the forward pass and the soft sample's gradient
    (the straight-through estimator). ``eps`` is unused, as in PyTorch (deprecated there)."""
    gumbels = -gt.empty_like(logits, memory_format=gt.contiguous_format).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = gt.zeros_like(logits, memory_format=gt.contiguous_format).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: negative inputs times a slope drawn uniformly from
    [lower, upper] per element when training, times (lower + upper) / 2 otherwise."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slope = gt.empty_like(input).uniform_(lower, upper)
    scale = gt.where(input >= 0, gt.ones_like(input), slope)
    return input.mul_(scale) if inplace else input * scale


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True)


# Autocast policies (gputensor/amp/autocast_mode.py's tables).
_autocast.apply(globals(), ("softplus", "softmin", "prelu"))
