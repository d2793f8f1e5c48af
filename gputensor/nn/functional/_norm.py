"""Normalization functions: batch_norm, layer_norm, group_norm (torch.nn.functional's).

Training-mode batch norm, layer norm and group norm each run one fused op (gputensor/_ops/
nn.py) whose backward is one fused op too. Eval-mode batch norm folds the running
statistics and the affine into a per-channel scale and shift: one elementwise pass, with
gradients from the elementwise ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gputensor as gt
from gputensor._ops import nn as nn_ops
from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode as _autocast

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm"]


def _affine(input: Tensor, weight: Tensor | None, bias: Tensor | None,
            shape: tuple[int, ...]) -> list[Tensor]:
    """The norm ops' differentiable list: [input] or [input, weight(, bias)]; a bias without
    a weight gets a constant weight of ones."""
    if weight is None and bias is None:
        return [input]
    if weight is None:
        weight = gt.ones(shape, dtype=bias.dtype, device=bias.device)
    return [input, weight] if bias is None else [input, weight, bias]


def _verify_batch_size(size: Sequence[int]) -> None:
    count = size[0] * math.prod(size[2:])
    if count == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{gt.Size(size)}")


def _check_channel_vector(t: Tensor | None, name: str, channels: int) -> None:
    if t is not None and t.numel() != channels:
        raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) over the batch and spatial dims.

    Training mode uses the batch statistics and updates ``running_mean``/``running_var`` in
    place (``(1 - momentum) * running + momentum * batch``, the variance unbiased). Eval mode
    uses the running statistics.
    """
    if input.dim() < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {input.dim()}D input)")
    if training:
        _verify_batch_size(input.shape)
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    channels = input.shape[1]
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_channel_vector(t, name, channels)
    if not training:
        if running_mean is None or running_var is None:
            missing = "running_mean" if running_mean is None else "running_var"
            raise RuntimeError(f"{missing} must be defined in evaluation mode")
        return _batch_norm_eval(input, running_mean, running_var, weight, bias, eps)
    momentum = 0.0 if momentum is None else momentum
    tensors = _affine(input, weight, bias, (channels,))
    return nn_ops._batch_norm(tensors, running_mean, running_var, momentum, eps)[0]


def _batch_norm_eval(input: Tensor, running_mean: Tensor, running_var: Tensor,
                     weight: Tensor | None, bias: Tensor | None, eps: float) -> Tensor:
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    shape = (1, input.shape[1]) + (1,) * (input.dim() - 2)
    dt = input.dtype
    return nn_ops._scale_shift(input, scale.to(dt).reshape(shape), shift.to(dt).reshape(shape))


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each (sample, channel) plane over its spatial dims: PyTorch's formulation,
    batch norm of the input viewed as one sample with N*C channels, whose per-channel
    parameters and running statistics are repeated N times (the running statistics then
    take the mean of the N updated copies)."""
    if input.dim() < 3:
        raise ValueError(f"instance_norm: expected at least 3D input (got {input.dim()}D "
                         f"input)")
    n, c = input.shape[0], input.shape[1]
    if use_input_stats:
        spatial = math.prod(input.shape[2:])
        if spatial == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {list(input.shape)}")
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_channel_vector(t, name, c)
    flat = input.contiguous().reshape(1, n * c, *input.shape[2:])

    def repeated(t: Tensor | None) -> Tensor | None:
        return None if t is None else t.repeat(n)

    mean_rep, var_rep = repeated(running_mean), repeated(running_var)
    out = batch_norm(flat, mean_rep, var_rep, repeated(weight), repeated(bias),
                     use_input_stats, momentum, eps)
    with gt.no_grad():
        if running_mean is not None and use_input_stats:
            running_mean.copy_(mean_rep.reshape(n, c).mean(0))
        if running_var is not None and use_input_stats:
            running_var.copy_(var_rep.reshape(n, c).mean(0))
    return out.reshape(input.shape)


def _normalized_shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(n) for n in normalized_shape)


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int],
               weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, then apply the elementwise
    affine (weight, bias of that shape)."""
    shape = _check_layer_norm(input, normalized_shape, weight, bias)
    return nn_ops._layer_norm(_affine(input, weight, bias, shape), len(shape), eps)[0]


def _check_layer_norm(input: Tensor, normalized_shape: int | Sequence[int],
                      weight: Tensor | None, bias: Tensor | None) -> tuple[int, ...]:
    """PyTorch's layer norm argument checks; returns the normalized shape as a tuple."""
    shape = _normalized_shape(normalized_shape)
    k = len(shape)
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if tuple(input.shape[input.dim() - k:]) != shape or input.dim() < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(n) for n in shape)}], but got input of size"
                           f"{list(input.shape)}")
    for t, name in ((weight, "weight"), (bias, "bias")):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got "
                               f"{name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(shape)}")
    return shape


def _check_group_affine(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                        channels: int) -> None:
    for t, name in ((weight, "weight"), (bias, "bias")):
        if t is not None and (t.dim() != 1 or t.numel() != channels):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {list(t.shape)} "
                               f"and input of shape {list(input.shape)}")


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each group of ``C / num_groups`` channels (with all spatial positions) per
    sample, then apply the per-channel affine."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    channels = input.shape[1]
    if num_groups <= 0 or channels % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    _check_group_affine(input, weight, bias, channels)
    _verify_batch_size([input.shape[0] * channels // num_groups, num_groups,
                        *input.shape[2:]])
    return nn_ops._group_norm(_affine(input, weight, bias, (channels,)), num_groups, eps)[0]


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims, times
    ``weight``; eps defaults to the dtype's machine epsilon, as PyTorch's."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.dim() - len(shape):]) != shape or len(shape) > input.dim():
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{', '.join(str(n) for n in shape)}], but got input of size"
                           f"{list(input.shape)}")
    if eps is None:
        eps = gt.finfo(input.dtype).eps
    dims = tuple(range(input.dim() - len(shape), input.dim()))
    out = input * gt.rsqrt((input * input).mean(dims, keepdim=True) + eps)
    return out if weight is None else out * weight


# Autocast policies (gputensor/amp/autocast_mode.py's tables).
_autocast.apply(globals(), ("layer_norm", "group_norm"))
