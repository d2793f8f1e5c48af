"""Per-device-type memory drivers that storages allocate from and copy through.

A driver owns raw buffers of one device type. The CPU driver's buffers are C-contiguous NumPy
arrays (of any dtype: a storage created around a NumPy result keeps that array as its buffer);
the CUDA backend registers its own driver for "cuda". The copy table is built from these drivers,
so a device type plugs in by registering one.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np


class DeviceDriver(Protocol):
    """The memory interface a device type gives storages and the copy table."""

    device_type: str

    def alloc(self, nbytes: int, device_index: int | None) -> Any: ...
    def nbytes(self, buf: Any) -> int: ...
    def data_ptr(self, buf: Any) -> int: ...
    def to_host(self, buf: Any, byte_offset: int, nbytes: int) -> np.ndarray: ...
    def from_host(self, buf: Any, byte_offset: int, data: np.ndarray) -> None: ...
    def copy(self, dst: Any, dst_offset: int, src: Any, src_offset: int, nbytes: int) -> None: ...
    def cast(self, dst: Any, dst_offset: int, dst_dtype: np.dtype, src: Any, src_offset: int,
             src_dtype: np.dtype, count: int) -> None: ...


def host_bytes(buf: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a CPU buffer (no copy)."""
    return buf.reshape(-1).view(np.uint8)


class CPUDriver:
    device_type = "cpu"

    def alloc(self, nbytes: int, device_index: int | None = None) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def nbytes(self, buf: np.ndarray) -> int:
        return buf.nbytes

    def data_ptr(self, buf: np.ndarray) -> int:
        return buf.ctypes.data

    def to_host(self, buf: np.ndarray, byte_offset: int, nbytes: int) -> np.ndarray:
        return host_bytes(buf)[byte_offset:byte_offset + nbytes]

    def from_host(self, buf: np.ndarray, byte_offset: int, data: np.ndarray) -> None:
        raw = data.reshape(-1).view(np.uint8)
        host_bytes(buf)[byte_offset:byte_offset + raw.nbytes] = raw

    def copy(self, dst: np.ndarray, dst_offset: int, src: np.ndarray, src_offset: int,
             nbytes: int) -> None:
        host_bytes(dst)[dst_offset:dst_offset + nbytes] = \
            host_bytes(src)[src_offset:src_offset + nbytes]

    def cast(self, dst: np.ndarray, dst_offset: int, dst_dtype: np.dtype, src: np.ndarray,
             src_offset: int, src_dtype: np.dtype, count: int) -> None:
        out = host_bytes(dst)[dst_offset:dst_offset + count * dst_dtype.itemsize].view(dst_dtype)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            # PyTorch casts silently: complex -> real drops the imaginary part, NaN -> int is UB.
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            inp = host_bytes(src)[src_offset:src_offset + count * src_dtype.itemsize]
            np.copyto(out, inp.view(src_dtype), casting="unsafe")


DRIVERS: dict[str, DeviceDriver] = {"cpu": CPUDriver()}
# Why a device type could not start (set by its lazy initialiser): every "not available" error
# carries it, so `.cuda()`, `tensor(device="cuda")` and `Module.cuda()` say what went wrong.
UNAVAILABLE_REASONS: dict[str, str] = {}


def unavailable_message(device_type: str = "cuda") -> str:
    """The error text for a device type without a driver, with the reason when one is known."""
    why = UNAVAILABLE_REASONS.get(device_type, "")
    base = CUDA_UNAVAILABLE if device_type == "cuda" else \
        f"no memory driver for device type {device_type!r}"
    return f"{base} ({why})" if why else base


CUDA_UNAVAILABLE = ("CUDA is not available: no CUDA memory driver is registered (the CUDA "
                    "backend needs an NVIDIA GPU with CuPy, or the CPU emulator of CUDA kernels)")


# device type -> a function that registers its driver on first use (CUDA probes for CuPy or
# the emulator lazily, so importing gputensor never imports CuPy).
LAZY_INIT: dict[str, Any] = {}


def register_driver(driver: DeviceDriver) -> None:
    """Register a device type's memory driver; the caller rebuilds the copy table afterwards."""
    DRIVERS[driver.device_type] = driver


# (device type, index) -> (its driver, ``nbytes -> buffer`` on that device): the allocation hot
# path (kernels/allocation.py) resolves the driver and device index once per device, and checks
# the driver is still the registered one (tests and ``gt.cuda.use_emulator`` swap drivers).
# Keyed by a tuple, whose hash is C-level, not by the device (a Python ``__hash__``).
_ALLOCATORS: dict[tuple[str, int], tuple[DeviceDriver, Callable[[int], Any]]] = {}


def allocator_for(dev: Any) -> Callable[[int], Any]:
    """A function allocating ``nbytes`` on device ``dev`` (an interned device): the driver's
    ``allocator(index)`` when it has one, else its ``alloc`` bound to the index."""
    key = (dev.type, dev.index)
    entry = _ALLOCATORS.get(key)
    if entry is None or DRIVERS.get(key[0]) is not entry[0]:
        drv = driver_for(dev.type)
        make = getattr(drv, "allocator", None)
        fn = make(dev.index) if make is not None else functools.partial(
            drv.alloc, device_index=dev.index)
        entry = _ALLOCATORS[key] = (drv, fn)
    return entry[1]


def driver_for(device_type: str) -> DeviceDriver:
    try:
        return DRIVERS[device_type]
    except KeyError:
        init = LAZY_INIT.pop(device_type, None)
        if init is not None:
            init()
            if device_type in DRIVERS:
                return DRIVERS[device_type]
        if device_type == "cuda":
            raise RuntimeError(unavailable_message("cuda")) from None
        raise RuntimeError(f"no memory driver for device type {device_type!r}") from None
