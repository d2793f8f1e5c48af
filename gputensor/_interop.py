"""Zero-copy exchange with other array libraries: DLPack both ways, the NumPy array interface
(CPU tensors) and the CUDA array interface (CUDA tensors).

Export shares the tensor's memory (the capsule keeps the tensor alive); import wraps the other
library's memory in a storage without a copy (the storage keeps the producer's object alive).
Writes through either side are seen by the other. CUDA exports order the consumer's stream
after the work queued on the current stream (DLPack's stream handshake).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import to_device
from gputensor._dlpack import DLDeviceType, Imported, export
from gputensor._layout import strided
from gputensor._tensor import Tensor
from gputensor.storage.untyped import UntypedStorage

_CPU = to_device("cpu")
_NO_SYNC = -1  # PyTorch's default stream argument: keep the consumer's stream as it is


def dlpack_device(t: Tensor) -> tuple[DLDeviceType, int]:
    if t.device.type == "cuda":
        return DLDeviceType.kDLCUDA, t.device.index or 0
    return (DLDeviceType.kDLCUDAHost if t.is_pinned() else DLDeviceType.kDLCPU), 0


def _check_exportable(t: Tensor) -> None:
    if t.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if t.layout is not strided:
        raise BufferError("Can't export tensors with layout other than torch.strided")
    if t.is_conj():
        raise BufferError("Can't export tensors with the conjugate bit set")


def _order_consumer_stream(t: Tensor, stream: Any) -> None:
    """The stream handshake: work the consumer queues on ``stream`` runs after the work queued
    on the current stream so far."""
    from gputensor import cuda
    if stream is not None and type(stream) is not int:
        raise TypeError("stream must be ``int`` or ``none``")
    if t.device.type != "cuda":
        if stream is not None and stream != _NO_SYNC:
            raise AssertionError("stream should be None on cpu.")
        return
    index = t.device.index or 0
    if index != cuda.current_device():
        raise BufferError(f"Can't export tensors on a different CUDA device index. Expected: "
                          f"{index}. Current device: {cuda.current_device()}.")
    if stream == _NO_SYNC:
        return
    if stream == 2:
        raise BufferError("per-thread default stream is not supported.")
    if stream == 0:
        raise AssertionError(f"unsupported stream on CUDA: {stream}.")
    consumer = cuda.default_stream(index) if stream in (None, 1) else \
        cuda.ExternalStream(stream, device=index)
    current = cuda.current_stream(index)
    if consumer != current:
        consumer.wait_stream(current)


def to_capsule(t: Tensor, stream: Any = _NO_SYNC, max_version: Any = None,
               dl_device: Any = None, copy: bool | None = None) -> Any:
    """``Tensor.__dlpack__``: a DLPack capsule over ``t``'s memory (a copy when ``copy`` is
    True or ``dl_device`` names another device and copying is allowed)."""
    _check_exportable(t)
    _order_consumer_stream(t, stream)
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    copied = False
    if dl_device is not None and tuple(dl_device) != dlpack_device(t):
        target = _torch_device_of(tuple(dl_device))
        if copy is False:
            raise BufferError(f"cannot export a tensor on {t.device} to DLPack device "
                              f"{tuple(dl_device)} without a copy (copy=False)")
        t, copied = t.to(target), True
    elif copy:
        t, copied = t.clone(), True
    code = dlpack_device(t)
    return export(t.data_ptr(), (int(code[0]), code[1]), t.dtype, tuple(t.shape), t.stride(),
                  t, versioned, copied=copied)


def _torch_device_of(dl_device: tuple[int, int]) -> Any:
    kind, index = int(dl_device[0]), int(dl_device[1])
    if kind in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        return _CPU
    if kind == DLDeviceType.kDLCUDA:
        return to_device(f"cuda:{index}")
    raise BufferError(f"unsupported DLPack device {dl_device}")


class _HostMemory:
    """Host memory of another library as a flat uint8 array (keeps the import alive)."""

    def __init__(self, imported: Imported, address: int, nbytes: int) -> None:
        self._imported = imported
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}


def _storage_over(imported: Imported) -> tuple[UntypedStorage, int]:
    """A storage spanning the imported elements, and the first element's offset in it."""
    if any(s < 0 for s in imported.strides):
        raise BufferError(f"from_dlpack: negative strides {list(imported.strides)} are not "
                          f"supported")
    nbytes = imported.extent()
    kind, index = imported.device
    if kind in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        buf = np.asarray(_HostMemory(imported, imported.data, nbytes)) if nbytes else \
            np.empty(0, np.uint8)
        return UntypedStorage._wrap(buf, _CPU), 0
    if kind == DLDeviceType.kDLCUDA:
        from gputensor.cuda.foreign import storage_over
        return storage_over(imported, index, imported.data, nbytes), 0
    raise BufferError(f"from_dlpack: unsupported DLPack device type {kind!r}")


def from_capsule(capsule: Any) -> Tensor:
    imported = Imported(capsule)
    storage, offset = _storage_over(imported)
    return Tensor._make(storage, imported.dtype, imported.shape, imported.strides, offset)


def from_dlpack(ext_tensor: Any, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """``gt.from_dlpack``: a tensor sharing memory with ``ext_tensor`` (anything with
    ``__dlpack__``, or a DLPack capsule), as PyTorch's from_dlpack negotiates it."""
    if not hasattr(ext_tensor, "__dlpack__"):
        if device is not None or copy is not None:
            raise AssertionError("device and copy kwargs not supported when ext_tensor is "
                                 "already a DLPack capsule.")
        return from_capsule(ext_tensor)
    kwargs: dict[str, Any] = {"max_version": (1, 0)}
    if copy is not None:
        kwargs["copy"] = copy
    ext_device = tuple(ext_tensor.__dlpack_device__())
    target = None
    if device is not None:
        target = to_device(device)
        wanted = _dl_device_of(target)
        if (int(ext_device[0]), int(ext_device[1])) != wanted:
            if copy is False:
                raise ValueError(f"cannot move DLPack tensor from device {ext_device} to "
                                 f"{wanted} without copying. Set copy=None or copy=True.")
        else:
            kwargs["dl_device"] = wanted
            target = None
    if int(ext_device[0]) == DLDeviceType.kDLCUDA:
        from gputensor import cuda
        handle = cuda.current_stream(int(ext_device[1])).cuda_stream
        kwargs["stream"] = 1 if handle == 0 else handle
    capsule, producer_copied = _negotiate(ext_tensor, kwargs)
    t = from_capsule(capsule)
    if copy and not producer_copied and target is None:
        t = t.clone()
    return t.to(target) if target is not None else t


def _negotiate(obj: Any, kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """Call ``obj.__dlpack__`` with what it accepts, dropping the newer keywords one by one
    (max_version, then copy, then dl_device) for older producers."""
    for drop in ((), ("max_version",), ("copy",), ("dl_device",)):
        for key in drop:
            kwargs.pop(key, None)
        try:
            return obj.__dlpack__(**kwargs), "copy" in kwargs
        except TypeError:
            if drop == ("dl_device",):
                raise
    raise AssertionError("unreachable")


def _dl_device_of(dev: Any) -> tuple[int, int]:
    if dev.type == "cuda":
        return int(DLDeviceType.kDLCUDA), dev.index or 0
    return int(DLDeviceType.kDLCPU), 0


# -- asarray ----------------------------------------------------------------------------------
def _is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def _converted(t: Tensor, dtype: Any, device: Any, copy: bool | None) -> Tensor:
    """``t`` itself, or ``t`` cast/moved/copied as asked; copy=False refuses a copy."""
    dt = t.dtype if dtype is None else D.to_dtype(dtype)
    dev = t.device if device is None else to_device(device)
    if copy is False:
        if dt is not t.dtype:
            raise ValueError(f"can't alias tensor with dtype '{t.dtype.legacy_name}' into "
                             f"dtype '{dt.legacy_name}'.")
        if dev != t.device:
            raise ValueError(f"can't alias tensor from device '{t.device}' to '{dev}'.")
    if copy:
        return t.to(device=dev, dtype=dt, copy=True)
    return t.to(device=dev, dtype=dt)


def _from_buffer(obj: Any, dtype: Any) -> Tensor:
    from gputensor._ops.creation import from_numpy
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    raw = np.frombuffer(obj, np.uint8)
    if raw.size % dt.itemsize:
        raise ValueError(f"buffer length ({raw.size} bytes) is not a multiple of the element "
                         f"size ({dt.itemsize} bytes of {dt})")
    return from_numpy(raw.view(dt.np_dtype))


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
            requires_grad: bool | None = None) -> Tensor:
    """``gt.asarray``: ``obj`` as a tensor, sharing its memory when it can (a tensor, a NumPy
    array, an object with ``__cuda_array_interface__`` or ``__dlpack__``, a DLPack capsule, a
    buffer) unless ``dtype``/``device`` differ or ``copy=True``; other data is copied
    (``copy=False`` then raises)."""
    from gputensor._ops.creation import from_numpy, tensor
    if isinstance(obj, Tensor):
        t = obj
        if requires_grad is False and t.requires_grad:
            t = t.detach()
        t = _converted(t, dtype, None if device is None else device, copy)
        if requires_grad and not t.requires_grad:
            t = t if t is not obj else t.detach()
            t.requires_grad_(True)
        return t
    if _is_capsule(obj):
        t = from_capsule(obj)
    elif isinstance(obj, np.ndarray):
        t = from_numpy(obj)
    elif hasattr(obj, "__cuda_array_interface__"):
        t = from_cuda_array_interface(obj)
    elif hasattr(obj, "__dlpack__"):
        t = from_dlpack(obj)
    elif _has_buffer(obj) and not isinstance(obj, np.generic):
        t = _from_buffer(obj, dtype)
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        t = tensor(obj, dtype=dtype, device=device)
        copy = None
    t = _converted(t, dtype, device, copy)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _has_buffer(obj: Any) -> bool:
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def from_cuda_array_interface(obj: Any) -> Tensor:
    """A CUDA tensor over another library's ``__cuda_array_interface__`` memory (no copy);
    the consumer side of the protocol's stream: the current stream waits for ``stream``."""
    from gputensor import cuda
    from gputensor.cuda.foreign import storage_over
    desc = obj.__cuda_array_interface__
    dt = D.from_numpy_dtype(np.dtype(desc["typestr"]))
    shape = tuple(int(n) for n in desc["shape"])
    isz = dt.itemsize
    if desc.get("strides") is None:
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    else:
        if any(s % isz or s < 0 for s in desc["strides"]):
            raise ValueError(f"__cuda_array_interface__ strides {tuple(desc['strides'])} are "
                             f"not non-negative multiples of the element size {isz}")
        strides = tuple(int(s) // isz for s in desc["strides"])
    ptr = int(desc["data"][0])
    extent = 0 if 0 in shape else (sum((n - 1) * s for n, s in zip(shape, strides,
                                                                    strict=True)) + 1) * isz
    index = cuda.current_device()
    stream = desc.get("stream")
    if stream:  # the producer's work on ``stream`` comes before ours
        cuda.current_stream(index).wait_stream(cuda.ExternalStream(
            0 if stream in (1, 2) else stream, device=index))
    storage = storage_over(obj, index, ptr, extent)
    return Tensor._make(storage, dt, shape, strides, 0)


# -- the array interfaces ---------------------------------------------------------------------
def _typestr(dt: D.dtype) -> str:
    if dt is D.bfloat16:
        raise TypeError("Got unsupported ScalarType BFloat16")
    return dt.np_dtype.str


def _layout(t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...] | None, int]:
    shape = tuple(t.shape)
    strides = None if t.is_contiguous() else tuple(s * t.element_size() for s in t.stride())
    return shape, strides, (t.data_ptr() if t.numel() > 0 else 0)


def array_interface(t: Tensor) -> dict[str, Any]:
    """``__array_interface__`` of a CPU tensor (version 3, writable, no copy)."""
    if t.device.type != "cpu":
        raise AttributeError(f"Can't get __array_interface__ on non-CPU tensor type: "
                             f"{t.type()}. Use Tensor.cpu() to copy the tensor to host memory "
                             f"first.")
    if t.requires_grad:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                           "tensor.detach().numpy() instead.")
    shape, strides, ptr = _layout(t)
    return {"shape": shape, "typestr": _typestr(t.dtype), "data": (ptr, False),
            "strides": strides, "version": 3}


def cuda_array_interface(t: Tensor) -> dict[str, Any]:
    """``__cuda_array_interface__`` of a CUDA tensor (version 3: ``stream`` is the current
    stream's handle, 1 for the default stream, as the protocol asks)."""
    if t.device.type != "cuda":
        raise AttributeError(f"Can't get __cuda_array_interface__ on non-CUDA tensor type: "
                             f"{t.type()} If CUDA data is required use tensor.cuda() to copy "
                             f"tensor to device memory.")
    if t.requires_grad:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. "
                           "If gradients aren't required, use var.detach() to get Variable "
                           "that doesn't require grad.")
    from gputensor import cuda
    shape, strides, ptr = _layout(t)
    handle = cuda.current_stream(t.device.index or 0).cuda_stream
    return {"shape": shape, "typestr": _typestr(t.dtype), "data": (ptr, False),
            "strides": strides, "version": 3, "stream": 1 if handle == 0 else handle}


__all__ = ["array_interface", "asarray", "cuda_array_interface", "dlpack_device",
           "from_capsule", "from_cuda_array_interface", "from_dlpack", "to_capsule"]
