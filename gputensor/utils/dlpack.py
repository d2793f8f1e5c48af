"""gputensor.utils.dlpack: PyTorch's DLPack entry points (``to_dlpack``, ``from_dlpack``)."""

from __future__ import annotations

from typing import Any

from gputensor._dlpack import DLDeviceType
from gputensor._interop import from_dlpack, to_capsule
from gputensor._tensor import Tensor


def to_dlpack(tensor: Tensor) -> Any:
    """A legacy (unversioned, ``"dltensor"``) capsule sharing ``tensor``'s memory; consume it
    once, with ``from_dlpack``."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'tensor' must be Tensor, not "
                        f"{type(tensor).__name__}")
    return to_capsule(tensor)


__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]
