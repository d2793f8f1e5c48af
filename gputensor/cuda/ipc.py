"""CUDA tensors between processes: storages travel as IPC handles of their device memory.

The sender exports the allocation holding the storage (``runtime.ipc_export``: a handle and
the storage's offset in the allocation, taken after the current stream's queued work has
finished); the receiver maps the allocation once per process (``runtime.ipc_open``) and
builds a storage over its slice, which unmaps it when the last storage on it goes. As in
PyTorch, the sending process must keep the tensor alive for as long as receivers use it:
its memory returns to the sender's pool when the sender frees it.
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


class _Mapping:
    """One allocation of another process mapped into this one; unmapped when it dies."""

    __slots__ = ("runtime", "base", "__weakref__")

    def __init__(self, runtime: Any, handle: Any) -> None:
        self.runtime = runtime
        self.base = runtime.ipc_open(handle)

    def __del__(self) -> None:
        self.runtime.ipc_close(self.base)


class _ImportedBuffer(DeviceBuffer):
    """A storage's buffer inside a mapped allocation: freeing it releases the mapping (via
    the reference), never a block of this process's pool."""

    __slots__ = ("mapping",)

    def __init__(self, mapping: _Mapping, offset: int, nbytes: int) -> None:
        self.runtime, self.mapping = mapping.runtime, mapping
        self.size = int(nbytes)
        self.streams = []
        self.ptr = DevicePtr(int(mapping.base) + offset)

    def __del__(self) -> None:
        pass  # the mapping is released when its last buffer drops it


_MAPPINGS: weakref.WeakValueDictionary[tuple, _Mapping] = weakref.WeakValueDictionary()
_STORAGES: weakref.WeakValueDictionary[tuple, UntypedStorage] = weakref.WeakValueDictionary()


def export_storage(storage: UntypedStorage) -> tuple[Any, int, int, int]:
    """(handle, device index, byte offset, nbytes): what :func:`open_storage` needs."""
    index = storage.device.index or 0
    nbytes = storage.nbytes()
    if nbytes == 0:
        return None, index, 0, 0
    handle, offset = _kdevice.runtime_of(index).ipc_export(storage.data_ptr())
    return handle, index, offset, nbytes


def open_storage(handle: Any, index: int, offset: int, nbytes: int) -> UntypedStorage:
    """The storage a sender exported; one per (allocation, offset) in this process, so
    tensors that shared a storage there share one here."""
    _require()  # a receiving process may not have used CUDA yet
    dev = Device("cuda", index)
    if handle is None:
        return UntypedStorage(0, device=dev)
    known = _STORAGES.get((index, handle, offset, nbytes))
    if known is not None:
        return known
    mapping = _MAPPINGS.get((index, handle))
    if mapping is None:
        mapping = _Mapping(_kdevice.runtime_of(index), handle)
        _MAPPINGS[index, handle] = mapping
    storage = UntypedStorage._wrap(_ImportedBuffer(mapping, offset, nbytes), dev)
    _STORAGES[index, handle, offset, nbytes] = storage
    return storage


__all__ = ["export_storage", "open_storage"]
