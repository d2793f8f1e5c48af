"""gputensor.cuda: CUDA availability, devices, and the CUDA storage and tensor types.

The CUDA backend (CuPy driver on real GPUs, the CPU emulator in CI) registers a memory driver for
"cuda"; until one is registered, ``is_available()`` is False and moving data to CUDA raises a
clear error from the copy table.
"""

from __future__ import annotations

from gputensor._legacy import types_in
from gputensor.storage.allocator import CUDA_UNAVAILABLE, DRIVERS
from gputensor.storage.typed import STORAGE_TYPES


def is_available() -> bool:
    return "cuda" in DRIVERS and device_count() > 0


def device_count() -> int:
    drv = DRIVERS.get("cuda")
    return drv.device_count() if drv is not None else 0


def _require() -> None:
    if not is_available():
        raise RuntimeError(CUDA_UNAVAILABLE)


def current_device() -> int:
    _require()
    return 0


def synchronize(device: object = None) -> None:
    _require()
    DRIVERS["cuda"].synchronize()


def get_device_name(device: object = None) -> str:
    _require()
    return DRIVERS["cuda"].device_name(0)


globals().update({cls.__name__: cls for (_dt, dev), cls in STORAGE_TYPES.items()
                  if dev == "cuda"})
globals().update(types_in("gputensor.cuda"))
