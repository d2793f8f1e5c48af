"""What backend kernels allocate and copy with: a new contiguous tensor on a device (the one
allocation path, which op frontends use too) or one with given strides (memory formats,
empty_strided), a same-device strided copy through the backend's ``_copy`` kernel, and the
kernel lookup behind both. Kernels import these from here, never from the op frontends
(``gputensor/_ops``), so the layers depend one way only."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from gputensor import _dtype as D
from gputensor._compile import state as _capture
from gputensor._device import CPU
from gputensor._device import device as Device
from gputensor._tensor import _STRIDES_CACHE, Tensor, contiguous_strides
from gputensor.kernels.registry import BACKENDS
from gputensor.storage import untyped as _untyped
from gputensor.storage.allocator import allocator_for, driver_for
from gputensor.storage.untyped import UntypedStorage


def kernel(t: Tensor, op_name: str) -> Callable:
    """The kernel for ``op_name`` on the backend serving ``t``'s device and layout."""
    try:
        backend = BACKENDS[t._storage.device.type, t.layout.name]
    except KeyError:   # the compressed sparse layouts have no kernel table of their own
        from gputensor.sparse._tensor import not_supported
        raise not_supported(op_name, t._storage.device.type, t.layout.name) from None
    if type(t._dtype) is D._LimitedDtype:  # only the kernels PyTorch runs for it
        from gputensor._limited import check_kernel
        check_kernel(t, op_name)
    return backend.kernel(op_name)


def empty_cpu(shape: tuple[int, ...], dtype: D.dtype) -> Tensor:
    """A new contiguous CPU tensor around a fresh NumPy array (the hot path of every op)."""
    try:
        arr = np.empty(shape, dtype.np_dtype)
    except MemoryError:  # PyTorch's error type, naming the size
        raise RuntimeError(f"DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                           f"{math.prod(shape) * dtype.itemsize} bytes.") from None
    except ValueError:   # NumPy's "array is too big": more bytes than an int64 counts
        _check_nbytes(shape, dtype)
        raise
    return wrap_cpu(arr, dtype, shape)


_new = object.__new__  # (one global read on the hot path below, not two)


def wrap_cpu(arr: np.ndarray, dtype: D.dtype, shape: tuple[int, ...],
             strides: tuple[int, ...] | None = None) -> Tensor:
    """A new CPU tensor that owns ``arr``, a fresh C-contiguous array of ``shape`` and
    ``dtype`` (what empty_cpu allocates, or a NumPy ufunc's new result); ``strides``, when
    the caller has them, are ``shape``'s contiguous strides."""
    storage = _new(UntypedStorage)
    storage._buf, storage.device, storage._version = arr, CPU, 0
    if _untyped.inference_blocks and _untyped.in_inference_mode():
        storage._inference = True
    if _capture.TRACE is not None:
        _capture.TRACE.storage_created(storage)
    t = _new(Tensor)
    t._storage, t._dtype, t._shape, t._offset = storage, dtype, shape, 0
    t._stride = strides or _STRIDES_CACHE.get(shape) or contiguous_strides(shape)
    t._np = t._np_buf = arr
    return t


_INT64_MAX = 2**63 - 1


def _check_nbytes(shape: tuple[int, ...], dtype: D.dtype) -> None:
    """PyTorch's error for a size whose byte count overflows int64."""
    if math.prod(shape) * dtype.itemsize > _INT64_MAX:
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}")


def empty(shape: tuple[int, ...], dtype: D.dtype, dev: Device) -> Tensor:
    """A new contiguous tensor with uninitialised elements."""
    if dev is CPU or dev.type == "cpu":
        return empty_cpu(shape, dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > _INT64_MAX:
        _check_nbytes(shape, dtype)
    buf = allocator_for(dev)(nbytes) if dev.index is not None else \
        driver_for(dev.type).alloc(nbytes, None)
    shape = tuple(shape)
    return Tensor._make(UntypedStorage._wrap(buf, dev), dtype, shape,
                        _STRIDES_CACHE.get(shape) or contiguous_strides(shape), 0)


def empty_with_strides(shape: tuple[int, ...], strides: tuple[int, ...], dtype: D.dtype,
                       dev: Device) -> Tensor:
    """A new tensor with these (non-negative) strides over storage that just holds it."""
    span = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
    block = empty((span,), dtype, dev)
    return Tensor._make(block._storage, dtype, tuple(shape), tuple(strides), 0)


def strided_copy(dst: Tensor, src: Tensor) -> None:
    """Same-device copy into a (possibly strided) ``dst``, casting to its dtype."""
    if type(dst._dtype) is D._LimitedDtype or type(src._dtype) is D._LimitedDtype:
        from gputensor._limited import copy_into  # through the carrier (gputensor/_limited.py)
        return copy_into(dst, src)
    kernel(dst, "_copy")(dst, [src], (), dst._dtype)


def contiguous_copy(x: Tensor) -> Tensor:
    """A contiguous copy of ``x`` on its device (no autograd: kernels work below it)."""
    out = empty(x._shape, x._dtype, x._storage.device)
    strided_copy(out, x)
    return out
