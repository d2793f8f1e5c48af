"""DLPack capsules, both ways, with ctypes (the C structs of dlpack.h, versions 0.8 and 1.x).

Export (``Tensor.__dlpack__``): a ``DLManagedTensor`` (or, when the consumer passes
``max_version >= (1, 0)``, a ``DLManagedTensorVersioned``) describing the tensor's memory is
kept alive in ``_EXPORTS`` with the tensor; the consumer renames the capsule to
``used_dltensor[_versioned]`` and calls the struct's deleter when done, which drops the entry.
A capsule nobody consumed calls the deleter from its destructor.

Import (``from_capsule``): the struct is read, the capsule marked used, and the memory wrapped
in a storage without a copy; the producer's deleter runs when that storage dies.
"""

from __future__ import annotations

import ctypes
import enum
import threading
from typing import Any

import numpy as np

from gputensor import _dtype as D


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", _DELETER)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


VERSION = (1, 1)  # the DLPack version the versioned structs follow
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}
_USED = {False: b"used_dltensor", True: b"used_dltensor_versioned"}

# DLDataTypeCode: Int 0, UInt 1, Float 2, Bfloat 4, Complex 5, Bool 6.
_CODES: dict[D.dtype, tuple[int, int]] = {
    D.bool: (6, 8), D.uint8: (1, 8), D.int8: (0, 8), D.int16: (0, 16), D.int32: (0, 32),
    D.int64: (0, 64), D.float16: (2, 16), D.bfloat16: (4, 16), D.float32: (2, 32),
    D.float64: (2, 64), D.complex64: (5, 64), D.complex128: (5, 128)}
_DTYPES = {v: k for k, v in _CODES.items()}
for _name in ("uint16", "uint32", "uint64"):
    if hasattr(D, _name):
        _DTYPES[1, getattr(D, _name).itemsize * 8] = getattr(D, _name)

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]

# Exported structs by address: the struct, its shape/strides arrays and the tensor, alive until
# the deleter runs.
_EXPORTS: dict[int, tuple[Any, ...]] = {}
_LOCK = threading.Lock()


def _drop_export(address: int) -> None:
    with _LOCK:
        _EXPORTS.pop(address, None)


_delete_export = _DELETER(_drop_export)  # the deleter consumers call, through C


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# The destructor gets the dying capsule's raw address: these take it as such (a py_object
# argument would take a new reference to an object already being deallocated).
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule: int) -> None:
    """A capsule that was never consumed: run its struct's deleter (a consumed one is renamed,
    and its consumer has taken over that duty)."""
    for versioned in (False, True):
        if _is_valid_raw(capsule, _NAMES[versioned]):
            _drop_export(_get_pointer_raw(capsule, _NAMES[versioned]))
            return


def dtype_code(dt: D.dtype) -> tuple[int, int]:
    try:
        return _CODES[dt]
    except KeyError:
        raise BufferError(f"DLPack has no type for {dt}") from None


def export(data_ptr: int, device: tuple[int, int], dt: D.dtype, shape: tuple[int, ...],
           strides: tuple[int, ...], owner: Any, versioned: bool, read_only: bool = False,
           copied: bool = False) -> Any:
    """A DLPack capsule over ``ndim`` elements at ``data_ptr`` (strides in elements), keeping
    ``owner`` alive until the consumer is done."""
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    code, bits = dtype_code(dt)
    tensor = _Tensor(data_ptr, _Device(*device), ndim, _DataType(code, bits, 1),
                     ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64)),
                     ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64)), 0)
    if versioned:
        flags = (FLAG_READ_ONLY if read_only else 0) | (FLAG_IS_COPIED if copied else 0)
        managed: Any = _ManagedVersioned(_Version(*VERSION), None, _delete_export, flags, tensor)
    else:
        managed = _Managed(tensor, None, _delete_export)
    address = ctypes.addressof(managed)
    with _LOCK:
        _EXPORTS[address] = (managed, shape_arr, strides_arr, owner)
    return _api.PyCapsule_New(address, _NAMES[versioned],
                              ctypes.cast(_destroy_capsule, ctypes.c_void_p))


class Imported:
    """A consumed capsule's tensor: where its elements are, and the producer's deleter, which
    runs when this object dies (storages over the memory keep it alive)."""

    def __init__(self, capsule: Any) -> None:
        versioned = bool(_api.PyCapsule_IsValid(capsule, _NAMES[True]))
        if not versioned and not _api.PyCapsule_IsValid(capsule, _NAMES[False]):
            name = _api.PyCapsule_GetName(capsule) if type(capsule).__name__ == "PyCapsule" \
                else None
            raise RuntimeError(f"from_dlpack: expected a DLPack capsule named 'dltensor' or "
                               f"'dltensor_versioned', got {name!r} (a capsule can be "
                               f"consumed only once)")
        address = _api.PyCapsule_GetPointer(capsule, _NAMES[versioned])
        kind = _ManagedVersioned if versioned else _Managed
        self._managed = kind.from_address(address)
        if versioned and self._managed.version.major > VERSION[0]:
            raise BufferError(f"from_dlpack: DLPack {self._managed.version.major}."
                              f"{self._managed.version.minor} is newer than the supported "
                              f"{VERSION[0]}.x")
        self.read_only = versioned and bool(self._managed.flags & FLAG_READ_ONLY)
        _api.PyCapsule_SetName(capsule, _USED[versioned])  # ours now: we call the deleter
        t = self._managed.dl_tensor
        self.device = (DLDeviceType(t.device.device_type), int(t.device.device_id))
        if t.dtype.lanes != 1 or (t.dtype.code, t.dtype.bits) not in _DTYPES:
            raise BufferError(f"from_dlpack: unsupported DLPack type (code {t.dtype.code}, "
                              f"{t.dtype.bits} bits, {t.dtype.lanes} lanes)")
        self.dtype = _DTYPES[t.dtype.code, t.dtype.bits]
        self.shape = tuple(int(t.shape[i]) for i in range(t.ndim))
        if t.strides:
            self.strides = tuple(int(t.strides[i]) for i in range(t.ndim))
        else:  # NULL strides: compact row-major
            self.strides = tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64))
                                 for i in range(t.ndim))
        self.data = int(t.data or 0) + int(t.byte_offset)

    def extent(self) -> int:
        """Bytes from ``data`` to one past the last element."""
        if 0 in self.shape:
            return 0
        return (sum((n - 1) * s for n, s in zip(self.shape, self.strides, strict=True)) + 1) \
            * self.dtype.itemsize

    def __del__(self) -> None:
        managed = getattr(self, "_managed", None)
        if managed is not None and managed.deleter:
            managed.deleter(ctypes.addressof(managed))


__all__ = ["DLDeviceType", "Imported", "export"]
