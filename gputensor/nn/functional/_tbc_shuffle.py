"""conv_tbc and native_channel_shuffle: ATen natives that torch.nn.functional re-exports
(also ``torch.conv_tbc`` / ``torch.native_channel_shuffle``), composed of pad, conv1d and
views so autograd and both devices follow."""

from __future__ import annotations

from gputensor._tensor import Tensor

from ._conv import conv1d
from ._vision import pad as _pad

__all__ = ["conv_tbc", "native_channel_shuffle"]


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-D convolution of (time, batch, in_channels) input with a (kernel_width, in_channels,
    out_channels) weight and an (out_channels,) bias; ``pad`` zero steps on each side of time
    (a negative ``pad`` crops, as in PyTorch). Returns (time_out, batch, out_channels)."""
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, "
                           "out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    if bias.size(0) != weight.size(2):
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    if input.size(2) != weight.size(1):
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    time_out = input.size(0) + 2 * pad - weight.size(0) + 1
    if time_out < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {time_out}: "
                           f"[{time_out}, {input.size(1)}, {weight.size(2)}]")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{input.dtype.legacy_name} and {weight.dtype.legacy_name}")
    x = input.permute(1, 2, 0)  # (batch, in_channels, time)
    if pad:
        x = _pad(x, (pad, pad))
    out = conv1d(x, weight.permute(2, 1, 0), bias)  # (batch, out_channels, time_out)
    return out.permute(2, 0, 1)


def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the channels (dim 1) into ``groups`` groups and interleave them: channel
    g * (C / groups) + i moves to i * groups + g."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{groups}")
    channels = input.size(1)
    if channels % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} "
                           f"channels and {groups} groups.")
    batch, rest = input.size(0), tuple(input.shape[2:])
    grouped = input.reshape(batch, groups, channels // groups, *rest)
    return grouped.transpose(1, 2).reshape(input.shape)
