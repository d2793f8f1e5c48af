"""gt.cpu: the CPU device's module, as torch.cpu (the CPU is always available, one device,
whose work is done when a call returns; ``amp`` holds the deprecated CPU autocast)."""

from __future__ import annotations

from typing import Any

from . import amp


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device: Any = None) -> None:
    """Nothing to wait for: CPU kernels have finished when they return."""


__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]
