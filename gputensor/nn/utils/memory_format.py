"""Converting convolution weights to channels-last (torch.nn.utils' memory_format helpers)."""

from __future__ import annotations

from typing import Any

from gputensor import _memory_format as MF

__all__ = ["convert_conv2d_weight_memory_format"]


def convert_conv2d_weight_memory_format(module: Any, memory_format: Any) -> Any:
    """Lay out the weight of every Conv2d/ConvTranspose2d in ``module`` (itself included) in
    ``memory_format``, in place; returns ``module``."""
    from gputensor.nn.modules.conv import Conv2d, ConvTranspose2d

    fmt = MF.check(memory_format, "convert_conv2d_weight_memory_format")
    if isinstance(module, Conv2d | ConvTranspose2d):
        weight = module.weight.detach().clone().contiguous(memory_format=fmt)
        module.weight.data = weight
    for child in module.children():
        convert_conv2d_weight_memory_format(child, memory_format)
    return module
