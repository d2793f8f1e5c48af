"""Typed storages: one generic TypedStorage and the named classes generated from the registries.

``gputensor.FloatStorage`` and ``gputensor.cuda.FloatStorage`` are thin subclasses fixing
(dtype, device type); every conversion between them goes through the copy table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import to_device

from . import copy_table
from .allocator import driver_for
from .untyped import UntypedStorage, _check_index, _host_to_storage

# (dtype, device type) -> named storage class, filled by _generate_storage_types below.
STORAGE_TYPES: dict[tuple[D.dtype, str], type[TypedStorage]] = {}


class TypedStorage:
    """Elements of one dtype over an UntypedStorage (``gt.TypedStorage(size, dtype=...)``)."""

    __slots__ = ("_untyped", "dtype")
    # Set on the generated subclasses; None on the generic class.
    _fixed_dtype: D.dtype | None = None
    device_type: str = "cpu"

    def __new__(cls, *args: Any, dtype: Any = None, device: Any = None,
                wrap_storage: UntypedStorage | None = None):
        if cls is TypedStorage:
            dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
            dev = to_device(device if device is not None else
                            (wrap_storage.device if wrap_storage is not None else "cpu"))
            cls = storage_type(dt, dev.type)
        return object.__new__(cls)

    def __init__(self, *args: Any, dtype: Any = None, device: Any = None,
                 wrap_storage: UntypedStorage | None = None) -> None:
        dt = self._fixed_dtype or (D.to_dtype(dtype) if dtype is not None
                                   else D.get_default_dtype())
        if device is None:
            device = "cuda" if self.device_type == "cuda" else (
                wrap_storage.device if wrap_storage is not None else "cpu")
        dev = to_device(device)
        if dev.type != self.device_type:
            raise RuntimeError(f"{type(self).__module__}.{type(self).__name__} lives on "
                               f"{self.device_type}, not {dev}")
        self.dtype = dt
        if wrap_storage is not None:
            if args:
                raise TypeError("pass either wrap_storage or a size/sequence, not both")
            if wrap_storage.nbytes() % dt.itemsize:
                raise RuntimeError(f"untyped storage of {wrap_storage.nbytes()} bytes is not a "
                                   f"multiple of {dt} element size {dt.itemsize}")
            self._untyped = wrap_storage
            return
        if len(args) > 1:
            raise TypeError(f"{type(self).__name__}() takes a size or a sequence, got {args}")
        arg = args[0] if args else 0
        if isinstance(arg, int | np.integer):
            if arg < 0:
                raise RuntimeError(f"Storage size must be non-negative, got {arg}")
            self._untyped = UntypedStorage(int(arg) * dt.itemsize, device=dev)
        else:
            values = np.asarray(list(arg), dtype=dt.np_dtype)
            self._untyped = _host_to_storage(values, dev)

    @classmethod
    def _wrap(cls, untyped: UntypedStorage, dt: D.dtype) -> TypedStorage:
        self = object.__new__(storage_type(dt, untyped.device.type))
        self._untyped = untyped
        self.dtype = dt
        return self

    # -- inspection ------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        return self._untyped.device

    def size(self) -> int:
        return self._untyped.nbytes() // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def element_size(self) -> int:
        return self.dtype.itemsize

    def nbytes(self) -> int:
        return self._untyped.nbytes()

    def data_ptr(self) -> int:
        return self._untyped.data_ptr()

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_sparse(self) -> bool:
        return False

    def untyped(self) -> UntypedStorage:
        return self._untyped

    def _untyped_storage(self) -> UntypedStorage:
        return self._untyped

    def _host_elements(self, offset: int = 0, count: int | None = None) -> np.ndarray:
        """Elements as a host array: a writable view on the CPU, a copy from other devices."""
        count = self.size() - offset if count is None else count
        isz = self.dtype.itemsize
        raw = driver_for(self.device.type).to_host(self._untyped._buf, offset * isz, count * isz)
        return raw.view(self.dtype.np_dtype)

    def tolist(self) -> list:
        return self._host_elements().tolist()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, idx: int | slice) -> Any:
        data = self._host_elements()
        if isinstance(idx, slice):
            return TypedStorage._wrap(_host_to_storage(data[idx].copy(), self.device), self.dtype)
        return data[_check_index(idx, len(data))].item()

    def __setitem__(self, idx: int | slice, value: Any) -> None:
        n = self.size()
        if isinstance(idx, slice):
            start, stop, step = idx.indices(n)
            count = len(range(start, stop, step))
            host = np.empty(count, self.dtype.np_dtype)
            host[...] = value
            if step == 1:
                self._write_host(start, host)
            else:
                for k, i in enumerate(range(start, stop, step)):
                    self._write_host(i, host[k:k + 1])
        else:
            self._write_host(_check_index(idx, n), np.asarray([value], self.dtype.np_dtype))

    def _write_host(self, offset: int, host: np.ndarray) -> None:
        driver_for(self.device.type).from_host(self._untyped._buf, offset * self.dtype.itemsize,
                                               host)
        self._untyped._version += 1

    def fill_(self, value: Any) -> TypedStorage:
        self[:] = value
        return self

    def copy_(self, src: TypedStorage, non_blocking: bool = False) -> TypedStorage:
        if not isinstance(src, TypedStorage):
            raise TypeError(f"copy_ expects a typed storage, got {type(src).__name__}")
        if src.size() != self.size():
            raise RuntimeError(f"size mismatch in storage copy_: {src.size()} elements into "
                               f"{self.size()}")
        copy_table.copy_storage(self, src)
        return self

    def clone(self) -> TypedStorage:
        return self._convert(self.dtype, self.device)

    # -- conversions (all through the copy table) ----------------------------------------------
    def _convert(self, dt: D.dtype, dev: Any) -> TypedStorage:
        dev = to_device(dev)
        out = storage_type(dt, dev.type)(self.size(), device=dev)
        copy_table.copy_storage(out, self)
        return out

    def _to_dtype(self, dt: D.dtype) -> TypedStorage:
        return self if dt is self.dtype else self._convert(dt, self.device)

    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        """No argument: the type name; a dtype, storage class or its name: a converted copy."""
        if dtype is None:
            return f"{type(self).__module__}.{type(self).__name__}"
        if isinstance(dtype, str) and dtype.endswith("Storage"):
            dtype = next((c for c in STORAGE_TYPES.values()
                          if f"{c.__module__}.{c.__name__}" == dtype), None) or dtype
        if isinstance(dtype, type) and issubclass(dtype, TypedStorage):
            if dtype is type(self):
                return self
            dev = self.device if dtype.device_type == self.device.type else dtype.device_type
            return self._convert(dtype._fixed_dtype, dev)
        return self._to_dtype(D.to_dtype(dtype))

    def double(self) -> TypedStorage:
        return self._to_dtype(D.float64)

    def float(self) -> TypedStorage:
        return self._to_dtype(D.float32)

    def half(self) -> TypedStorage:
        return self._to_dtype(D.float16)

    def bfloat16(self) -> TypedStorage:
        return self._to_dtype(D.bfloat16)

    def long(self) -> TypedStorage:
        return self._to_dtype(D.int64)

    def int(self) -> TypedStorage:
        return self._to_dtype(D.int32)

    def short(self) -> TypedStorage:
        return self._to_dtype(D.int16)

    def char(self) -> TypedStorage:
        return self._to_dtype(D.int8)

    def byte(self) -> TypedStorage:
        return self._to_dtype(D.uint8)

    def bool(self) -> TypedStorage:
        return self._to_dtype(D.bool)

    def complex_float(self) -> TypedStorage:
        return self._to_dtype(D.complex64)

    def complex_double(self) -> TypedStorage:
        return self._to_dtype(D.complex128)

    def cpu(self) -> TypedStorage:
        return self if self.device.type == "cpu" else self._convert(self.dtype, "cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> TypedStorage:
        dev = to_device(device if device is not None else "cuda")
        if dev.type != "cuda":
            raise RuntimeError(f"cuda() needs a CUDA device, got {dev}")
        return self if self.device == dev else self._convert(self.dtype, dev)

    def to(self, device: Any = None, non_blocking: bool = False) -> TypedStorage:
        dev = to_device(device)
        return self if dev == self.device else self._convert(self.dtype, dev)

    def pin_memory(self, device: Any = "cuda") -> TypedStorage:
        return TypedStorage._wrap(self._untyped.pin_memory(), self.dtype)

    def is_pinned(self, device: Any = "cuda") -> bool:
        return self._untyped.is_pinned()

    def share_memory_(self) -> TypedStorage:
        self._untyped.share_memory_()
        return self

    def is_shared(self) -> bool:
        return self._untyped.is_shared()

    def resize_(self, size: int) -> TypedStorage:
        self._untyped.resize_(size * self.dtype.itemsize)
        return self

    # -- Python protocol -----------------------------------------------------------------
    def __repr__(self) -> str:
        values = self.tolist()
        body = "".join(f" {v}\n" for v in values)
        return (f"{body}[{self.type()}(dtype={self.dtype}, device={self.device}) of size "
                f"{len(values)}]")

    def __copy__(self) -> TypedStorage:
        return TypedStorage._wrap(self._untyped, self.dtype)

    def __deepcopy__(self, memo: dict) -> TypedStorage:
        if id(self) not in memo:
            memo[id(self)] = TypedStorage._wrap(self._untyped.__deepcopy__(memo), self.dtype)
        return memo[id(self)]

    def __reduce__(self) -> tuple:
        return (TypedStorage._wrap, (self._untyped, self.dtype))

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self.nbytes()

    def __eq__(self, other: object) -> Any:
        return self is other

    __hash__ = object.__hash__


def storage_type(dt: D.dtype, device_type: str) -> type[TypedStorage]:
    try:
        return STORAGE_TYPES[dt, device_type]
    except KeyError:
        raise RuntimeError(f"no storage type for {dt} on {device_type}") from None


def _generate_storage_types() -> None:
    for device_type, module in (("cpu", "gputensor"), ("cuda", "gputensor.cuda")):
        for dt in D.DTYPES:
            name = f"{dt.legacy_name}Storage"
            cls = type(name, (TypedStorage,), {
                "__slots__": (), "_fixed_dtype": dt, "device_type": device_type,
                "__module__": module, "__qualname__": name,
                "__doc__": f"{module}.{name}: {dt} elements on {device_type}.",
            })
            STORAGE_TYPES[dt, device_type] = cls


_generate_storage_types()
copy_table.rebuild(list(STORAGE_TYPES.values()))
