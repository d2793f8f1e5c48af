"""CPU tensors over memory they do not own: ``gt.frombuffer`` (any object with the buffer
protocol) and ``gt.from_file`` (a memory-mapped file).

Both share the memory (writes through the tensor reach the buffer or, with ``shared=True``,
the file) and, as PyTorch's, their storage cannot be resized. The storage's NumPy buffer keeps
the Python buffer or the mapping alive.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import warnings
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import CPU, get_default_device, to_device
from gputensor._layout import strided
from gputensor._tensor import Tensor
from gputensor.storage.untyped import UntypedStorage

_warned_readonly = False


def _wrap(buf: np.ndarray, dtype: D.dtype, count: int, requires_grad: bool) -> Tensor:
    storage = UntypedStorage._wrap(buf, CPU)
    storage._resizable = False
    t = Tensor._make(storage, dtype, (count,), (1,), 0)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _writable(arr: np.ndarray, owner: Any) -> np.ndarray:
    """A writable alias of a read-only host array (PyTorch writes into read-only buffers too,
    after its warning); the alias keeps ``owner`` alive."""
    raw = (ctypes.c_char * arr.nbytes).from_address(arr.ctypes.data)
    raw._owner = owner
    return np.frombuffer(raw, np.uint8)


def frombuffer(buffer: Any, *, dtype: D.dtype, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """A 1-d CPU tensor of ``dtype`` over ``buffer``'s bytes from ``offset``: ``count``
    elements, or all the rest when ``count`` is negative. Shares the memory."""
    global _warned_readonly
    dt = D.to_dtype(dtype)
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    if not view.contiguous:
        raise ValueError("object does not implement Python buffer protocol.")
    size = dt.itemsize
    buf_len = view.nbytes
    if buf_len <= 0 or count == 0:
        raise ValueError(f"both buffer length ({buf_len}) and count ({count}) must not be 0")
    if not 0 <= offset < buf_len:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({buf_len} bytes) minus 1")
    if count < 0 and (buf_len - offset) % size:
        raise ValueError(f"buffer length ({buf_len - offset} bytes) after offset ({offset} "
                         f"bytes) must be a multiple of element size ({size})")
    n = (buf_len - offset) // size if count < 0 else count
    if offset + n * size > buf_len:
        raise ValueError(f"requested buffer length ({n} * {size} bytes) after offset ({offset} "
                         f"bytes) must not be greater than actual buffer length ({buf_len} "
                         f"bytes)")
    data = np.frombuffer(view.cast("B"), np.uint8, n * size, offset)
    if not data.flags.writeable:
        from gputensor._switches import is_warn_always_enabled  # PyTorch's TORCH_WARN_ONCE

        if not _warned_readonly or is_warn_always_enabled():
            _warned_readonly = True
            warnings.warn("The given buffer is not writable, and PyTorch does not support "
                          "non-writable tensors. This means you can write to the underlying "
                          "(supposedly non-writable) buffer using the tensor. You may want to "
                          "copy the buffer to protect its data or make it writable before "
                          "converting it to a tensor. This type of warning will be suppressed "
                          "for the rest of this program.", UserWarning, stacklevel=2)
        data = _writable(data, data)
    return _wrap(data, dt, n, requires_grad)


def _os_error(e: OSError) -> str:
    return f"{e.strerror} ({e.errno})"


def from_file(filename: str, shared: bool | None = None, size: int = 0, *,
              dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """A 1-d CPU tensor of ``size`` elements mapped from ``filename``. ``shared=True`` maps it
    shared (writes reach the file; it is created, or grown, to hold the tensor); otherwise the
    mapping is private and the file must already hold ``size`` elements."""
    if not isinstance(filename, str):
        raise TypeError(f"from_file(): argument 'filename' (position 1) must be str, not "
                        f"{type(filename).__name__}")
    dt = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    dev = get_default_device() if device is None else to_device(device)
    if layout is not None and layout is not strided:
        raise NotImplementedError(f"Could not run 'aten::from_file' with arguments from the "
                                  f"'Sparse{dev.type.upper()}' backend: only strided tensors "
                                  f"can be mapped from a file.")
    if dev.type != "cpu":
        raise NotImplementedError(f"Could not run 'aten::from_file' with arguments from the "
                                  f"'{dev.type.upper()}' backend: only CPU tensors can be "
                                  f"mapped from a file.")
    if pin_memory:
        raise RuntimeError("tensors constructed from a file cannot be pinned")
    nbytes = size * dt.itemsize
    if nbytes < 0:
        raise RuntimeError(f"unable to mmap {nbytes} bytes from file <{filename}>: Cannot "
                           f"allocate memory (12)")
    mode = "read-write" if shared else "read-only"
    try:
        fd = os.open(filename, os.O_RDWR | os.O_CREAT if shared else os.O_RDONLY, 0o666)
    except OSError as e:
        raise RuntimeError(f"unable to open file <{filename}> in {mode} mode: "
                           f"{_os_error(e)}") from None
    try:
        file_size = os.fstat(fd).st_size
        if file_size < nbytes:
            if not shared:
                raise RuntimeError(f"file <{filename}> size <{file_size}> is smaller than the "
                                   f"required mapping size <{nbytes}>")
            os.ftruncate(fd, nbytes)
        if nbytes == 0:
            return _wrap(np.empty(0, np.uint8), dt, 0, requires_grad)
        # MAP_SHARED writes reach the file; a private mapping copies pages on write.
        access = mmap.ACCESS_WRITE if shared else mmap.ACCESS_COPY
        mapping = mmap.mmap(fd, nbytes, access=access)
    finally:
        os.close(fd)
    return _wrap(np.frombuffer(mapping, np.uint8, nbytes), dt, size, requires_grad)
