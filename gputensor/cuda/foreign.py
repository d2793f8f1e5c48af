"""Storages over device memory another library owns (DLPack and CUDA-array-interface imports).

The memory is registered with the device's runtime for the storage's life (so copies and
launches find it) unless it already lies in a live allocation of the runtime (a gputensor
tensor coming back); the storage keeps the producer's object alive, and never frees the
memory itself.
"""

from __future__ import annotations

import weakref
from typing import Any

from gputensor._device import device as Device
from gputensor.kernels.cuda import device as _kdevice
from gputensor.kernels.cuda.runtime import DevicePtr
from gputensor.kernels.cuda.storage_driver import DeviceBuffer
from gputensor.storage.untyped import UntypedStorage

from . import _require


class _ForeignBuffer(DeviceBuffer):
    __slots__ = ("owner", "registered", "within")

    def __init__(self, runtime: Any, ptr: int, nbytes: int, owner: Any) -> None:
        self.runtime, self.owner = runtime, owner
        self.size = int(nbytes)
        self.streams = []
        self.ptr = DevicePtr(int(ptr))
        self.within = None
        self.registered = bool(nbytes) and runtime.adopt_external(self.ptr, self.size)
        if self.registered:
            _REGISTERED[id(runtime), int(self.ptr)] = self
        elif nbytes:  # inside memory registered for another import: keep that one registered
            self.within = next((b for (rt, base), b in list(_REGISTERED.items())
                                if rt == id(runtime) and base <= self.ptr
                                and self.ptr + self.size <= base + b.size), None)

    def __del__(self) -> None:
        if getattr(self, "registered", False):
            self.runtime.drop_external(self.ptr)


# Registered imports by (runtime, address), for as long as they live.
_REGISTERED: weakref.WeakValueDictionary[tuple[int, int], _ForeignBuffer] = \
    weakref.WeakValueDictionary()


def storage_over(owner: Any, index: int, ptr: int, nbytes: int) -> UntypedStorage:
    """A storage of ``nbytes`` at device address ``ptr`` on CUDA device ``index``, keeping
    ``owner`` (what keeps the memory valid) alive."""
    _require()
    runtime = _kdevice.runtime_of(index)
    return UntypedStorage._wrap(_ForeignBuffer(runtime, ptr, nbytes, owner),
                                Device("cuda", index))


__all__ = ["storage_over"]
