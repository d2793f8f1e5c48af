"""Converting convolution weights to channels-last (torch.nn.utils' memory_format helpers)."""

from __future__ import annotations

from typing import Any

from gputensor import _memory_format as MF

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module: Any, fmt: Any, kinds: tuple[type, ...]) -> Any:
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone().contiguous(memory_format=fmt)
    for child in module.children():
        _convert(child, fmt, kinds)
    return module


def convert_conv2d_weight_memory_format(module: Any, memory_format: Any) -> Any:
    """Lay out the weight of every Conv2d/ConvTranspose2d in ``module`` (itself included) in
    ``memory_format``, in place; returns ``module``."""
    from gputensor.nn.modules.conv import Conv2d, ConvTranspose2d

    fmt = MF.check(memory_format, "convert_conv2d_weight_memory_format")
    return _convert(module, fmt, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module: Any, memory_format: Any) -> Any:
    """Lay out the weight of every Conv3d/ConvTranspose3d in ``module`` (itself included) in
    ``memory_format`` (typically ``channels_last_3d``), in place; returns ``module``."""
    from gputensor.nn.modules.conv import Conv3d, ConvTranspose3d

    fmt = MF.check(memory_format, "convert_conv3d_weight_memory_format")
    return _convert(module, fmt, (Conv3d, ConvTranspose3d))
