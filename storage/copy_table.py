"""The copy-function table: (source storage type, destination storage type) -> copy function.

It is filled by a loop over the storage-type registry from four generic movers, never by one
hand-written function per pair; every storage and tensor cast or device move routes through
``copy_storage``. A device type joins by registering a memory driver and calling ``rebuild``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .allocator import DRIVERS, LAZY_INIT, unavailable_message

# mover(dst, dst_offset, src, src_offset, count); offsets and count are in elements.
Mover = Callable[..., None]
COPY_TABLE: dict[tuple[type, type], Mover] = {}


def _within_device(dst, dst_offset: int, src, src_offset: int, count: int) -> None:
    """Same device type: the driver casts (and copies between devices of that type)."""
    s, d = src.dtype, dst.dtype
    drv = DRIVERS[dst.device.type]
    drv.cast(dst._untyped._buf, dst_offset * d.itemsize, d.np_dtype,
             src._untyped._buf, src_offset * s.itemsize, s.np_dtype, count)


def _host_to_device(dst, dst_offset: int, src, src_offset: int, count: int) -> None:
    with np.errstate(all="ignore"):  # casts wrap silently, as PyTorch's do (no warning)
        host = src._host_elements(src_offset, count).astype(dst.dtype.np_dtype, copy=False)
    DRIVERS[dst.device.type].from_host(dst._untyped._buf, dst_offset * dst.dtype.itemsize, host)


def _device_to_host(dst, dst_offset: int, src, src_offset: int, count: int) -> None:
    host = src._host_elements(src_offset, count)
    out = dst._host_elements(dst_offset, count)
    with np.errstate(all="ignore"):
        out[...] = host.astype(dst.dtype.np_dtype, copy=False)


def _device_to_device(dst, dst_offset: int, src, src_offset: int, count: int) -> None:
    """Different non-CPU device types: stage through host memory."""
    with np.errstate(all="ignore"):  # casts wrap silently, as PyTorch's do (no warning)
        host = src._host_elements(src_offset, count).astype(dst.dtype.np_dtype, copy=False)
    DRIVERS[dst.device.type].from_host(dst._untyped._buf, dst_offset * dst.dtype.itemsize, host)


def _pick_mover(src_device_type: str, dst_device_type: str) -> Mover:
    if src_device_type == dst_device_type:
        return _within_device
    if src_device_type == "cpu":
        return _host_to_device
    if dst_device_type == "cpu":
        return _device_to_host
    return _device_to_device


def rebuild(storage_types: list[type]) -> None:
    """Fill the table for every pair of storage types whose device types have a driver."""
    COPY_TABLE.clear()
    usable = [t for t in storage_types if t.device_type in DRIVERS]
    for src in usable:
        for dst in usable:
            COPY_TABLE[src, dst] = _pick_mover(src.device_type, dst.device_type)


def copy_storage(dst, src, count: int | None = None, dst_offset: int = 0,
                 src_offset: int = 0) -> None:
    """Copy ``count`` elements from ``src`` into ``dst`` (typed storages), casting as needed."""
    key = (type(src), type(dst))
    mover = COPY_TABLE.get(key)
    if mover is None:
        for device_type in (key[0].device_type, key[1].device_type):
            if device_type not in DRIVERS and device_type in LAZY_INIT:
                LAZY_INIT.pop(device_type)()  # registers the driver and rebuilds this table
        mover = COPY_TABLE.get(key)
    if mover is None:
        raise RuntimeError(f"no copy function from {key[0].__module__}.{key[0].__name__} to "
                           f"{key[1].__module__}.{key[1].__name__}: "
                           + _why_missing(key[0].device_type, key[1].device_type))
    if count is None:
        count = src.size() - src_offset
    for name, st, off in (("source", src, src_offset), ("destination", dst, dst_offset)):
        if off < 0 or (count and off + count > st.size()):  # an empty view may sit past the end
            raise RuntimeError(f"copy of {count} elements at offset {off} overruns the {name} "
                               f"storage of size {st.size()}")
    if count:
        mover(dst, dst_offset, src, src_offset, count)
        dst._untyped._version += 1


def _why_missing(*device_types: str) -> str:
    missing = [t for t in device_types if t not in DRIVERS]
    if "cuda" in missing:
        return unavailable_message("cuda")
    return f"no driver registered for device type(s) {missing}"
