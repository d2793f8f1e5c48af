"""storage/allocator.py's DeviceDriver on top of a device runtime (emulator or CuPy).

A storage's buffer is a ``DeviceBuffer``: a device pointer plus its size, freed back to the
runtime's caching allocator when the last storage holding it goes away. Registering an instance
(``register_driver(RuntimeStorageDriver(runtime))`` then ``copy_table.rebuild(...)``) makes
"cuda" storages and the host<->device movers of the copy table work through it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from . import cast as _cast
from . import device as _device
from .runtime import AcceleratorError, DevicePtr


def _no_stream(runtime: Any = None) -> Any:
    return None


# STREAM_HOOK(runtime) returns the stream copies and casts on that runtime's device are
# ordered on (None: its current stream); gputensor.cuda points it at the current stream of
# ``gt.cuda.stream(...)`` for that device.
STREAM_HOOK: Callable[[Any], Any] = _no_stream


class DeviceBuffer:
    """``nbytes`` of device memory at ``ptr``; frees itself when garbage collected (after the
    work queued so far on every stream named by :meth:`record_stream`)."""

    __slots__ = ("ptr", "size", "runtime", "streams", "__weakref__")

    def __init__(self, runtime: Any, nbytes: int) -> None:
        self.runtime = runtime
        self.size = int(nbytes)
        self.streams: list[Any] = []  # runtime streams that use the block besides its own
        self.ptr: DevicePtr = runtime.alloc(self.size)  # may raise OutOfMemoryError

    def __del__(self, _finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
        # __del__ rather than weakref.finalize: it runs on every tensor's death, and costs a
        # fraction of a finalizer's registration. At interpreter exit the pool goes away whole
        # (module globals may already be None then: hence the bound default); a buffer whose
        # alloc raised has no block to free.
        ptr = getattr(self, "ptr", None)
        if ptr is not None and not _finalizing():
            self.runtime.free(ptr, self.streams)

    def record_stream(self, stream: Any) -> None:
        """PyTorch's ``Tensor.record_stream``: the block is not reused until the work queued
        on ``stream`` before the block is freed has completed."""
        if stream is not None and all(stream is not s for s in self.streams):
            self.streams.append(stream)

    def __repr__(self) -> str:
        return f"DeviceBuffer({self.ptr!r}, {self.size} bytes)"


class RuntimeStorageDriver:
    """The memory driver for ``device_type`` backed by one device runtime per device index:
    a buffer is allocated by its device's runtime and keeps it, so every later copy, cast and
    free of the buffer goes to that runtime. Between two devices, data moves through the host
    (a read ordered after the source device's current stream, then a write queued on the
    destination's)."""

    def __init__(self, runtimes: Any, device_type: str = "cuda") -> None:
        self.runtimes = tuple(runtimes) if isinstance(runtimes, list | tuple) else (runtimes,)
        self.device_type = device_type

    @property
    def runtime(self) -> Any:
        """The current device's runtime."""
        return _device.runtime_of(None) if len(self.runtimes) > 1 else self.runtimes[0]

    def _runtime_for(self, device_index: int | None) -> Any:
        if device_index is None or len(self.runtimes) == 1 and device_index == 0:
            return self.runtime
        if not 0 <= device_index < len(self.runtimes):
            raise AcceleratorError(f"CUDA error: invalid device ordinal ({self.device_type}:"
                                   f"{device_index} requested, {len(self.runtimes)} device(s) "
                                   f"available)")
        return self.runtimes[device_index]

    def _check_range(self, buf: DeviceBuffer, offset: int, nbytes: int, what: str) -> None:
        if offset < 0 or nbytes < 0 or offset + nbytes > buf.size:
            raise RuntimeError(f"{what} of {nbytes} bytes at offset {offset} is outside the "
                               f"{buf.size}-byte {self.device_type} buffer")

    # -- DeviceDriver protocol ---------------------------------------------------------------
    def alloc(self, nbytes: int, device_index: int | None = None) -> DeviceBuffer:
        return DeviceBuffer(self._runtime_for(device_index), nbytes)

    def allocator(self, device_index: int | None) -> Callable[[int], DeviceBuffer]:
        """``nbytes -> DeviceBuffer`` on one device (None: the current one at each call)."""
        if device_index is None:
            return functools.partial(self.alloc, device_index=None)
        return functools.partial(DeviceBuffer, self._runtime_for(device_index))

    def nbytes(self, buf: DeviceBuffer) -> int:
        return buf.size

    def data_ptr(self, buf: DeviceBuffer) -> int:
        return int(buf.ptr)

    def to_host(self, buf: DeviceBuffer, byte_offset: int, nbytes: int) -> np.ndarray:
        self._check_range(buf, byte_offset, nbytes, "read")
        out = np.empty(nbytes, np.uint8)
        _device.read_into(out, buf.ptr + byte_offset, buf.runtime)  # after the stream's work
        return out

    def from_host(self, buf: DeviceBuffer, byte_offset: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self._check_range(buf, byte_offset, raw.nbytes, "write")
        if raw.nbytes:
            buf.runtime.memcpy_htod(buf.ptr + byte_offset, raw, STREAM_HOOK(buf.runtime))

    def copy(self, dst: DeviceBuffer, dst_offset: int, src: DeviceBuffer, src_offset: int,
             nbytes: int) -> None:
        self._check_range(src, src_offset, nbytes, "copy source")
        self._check_range(dst, dst_offset, nbytes, "copy destination")
        if not nbytes:
            return
        if dst.runtime is not src.runtime:  # another device: through the host
            self.from_host(dst, dst_offset, self.to_host(src, src_offset, nbytes))
            return
        dst.runtime.memcpy_dtod(dst.ptr + dst_offset, src.ptr + src_offset, nbytes,
                                STREAM_HOOK(dst.runtime))

    def cast(self, dst: DeviceBuffer, dst_offset: int, dst_dtype: np.dtype, src: DeviceBuffer,
             src_offset: int, src_dtype: np.dtype, count: int) -> None:
        if count == 0:
            return
        if dst_dtype == src_dtype:
            self.copy(dst, dst_offset, src, src_offset, count * src_dtype.itemsize)
            return
        if dst.runtime is not src.runtime:  # another device: cast on the host on the way
            host = self.to_host(src, src_offset, count * src_dtype.itemsize).view(src_dtype)
            with np.errstate(all="ignore"):
                self.from_host(dst, dst_offset, host.astype(dst_dtype))
            return
        rt = dst.runtime
        src_ptr, dst_ptr = src.ptr + src_offset, dst.ptr + dst_offset
        src_bytes, dst_bytes = count * src_dtype.itemsize, count * dst_dtype.itemsize
        self._check_range(src, src_offset, src_bytes, "cast source")
        self._check_range(dst, dst_offset, dst_bytes, "cast destination")
        tmp = None
        if src_ptr < dst_ptr + dst_bytes and dst_ptr < src_ptr + src_bytes:
            # Overlapping ranges (a storage cast into itself): read from a device copy.
            tmp = DeviceBuffer(rt, src_bytes)
            rt.memcpy_dtod(tmp.ptr, src_ptr, src_bytes, STREAM_HOOK(rt))
            src_ptr = tmp.ptr
        _cast.cast(rt, dst_ptr, dst_dtype, src_ptr, src_dtype, count, STREAM_HOOK(rt))
        del tmp  # the pool orders the block's reuse after the launch

    # -- what gputensor.cuda asks of the "cuda" driver ---------------------------------------
    def device_count(self) -> int:
        return len(self.runtimes)

    def synchronize(self) -> None:
        self.runtime.synchronize()

    def device_name(self, index: int = 0) -> str:
        return self._runtime_for(index).properties(index).name
