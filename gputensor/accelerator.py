"""``gt.accelerator`` (PyTorch 2.6+'s ``torch.accelerator``): the one accelerator kind this
build can use, CUDA, answered through ``gt.cuda``."""

from __future__ import annotations

from typing import Any

from gputensor import cuda
from gputensor._device import device as Device


def is_available() -> bool:
    """Whether an accelerator (a CUDA runtime: a GPU, or the emulator when asked for) works."""
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Device | None:
    """``device('cuda')`` when a CUDA runtime can start, else None. PyTorch answers for the
    accelerator its build was compiled for; gputensor's CUDA support is the runtime found at
    first use, so both values of ``check_available`` give this answer."""
    return Device("cuda") if cuda.is_available() else None


def _require() -> None:
    if not cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")


def device_count() -> int:
    return cuda.device_count() if cuda.is_available() else 0


def current_device_index() -> int:
    _require()
    return cuda.current_device()


def set_device_index(device: Any) -> None:
    _require()
    cuda.set_device(device)


def synchronize(device: Any = None) -> None:
    """Wait for the work queued on the accelerator."""
    _require()
    cuda.synchronize(device)
