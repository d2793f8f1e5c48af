"""UntypedStorage: a run of bytes on one device, with the version counter its tensors share."""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor._compile import state as _capture
from gputensor._device import device as Device
from gputensor._device import to_device

from . import shared
from .allocator import DRIVERS, driver_for, host_bytes

# How many gt.inference_mode(True) blocks are open, in any thread (autograd/grad_mode.py keeps
# it): only then does a new storage ask its thread's mode, and mark itself an inference storage
# (its tensors are inference tensors: gt.Tensor.is_inference).
inference_blocks = 0


def in_inference_mode() -> bool:
    from gputensor.autograd.grad_mode import is_inference_mode_enabled
    return is_inference_mode_enabled()


class UntypedStorage:
    """Bytes on a device (``gt.UntypedStorage(nbytes, device=...)``).

    ``_buf`` is the device driver's buffer (a C-contiguous NumPy array on the CPU). Every
    in-place write through a tensor bumps ``_version``; autograd checks it on saved tensors.
    """

    __slots__ = ("_buf", "device", "_version", "__weakref__", "__dict__")
    _shm = None      # the shared.Segment once share_memory_() ran (or one received)
    _pinned = False
    _resizable = True   # False for memory it does not own (gt.frombuffer, gt.from_file)
    _inference = False  # made under gt.inference_mode()

    def __init__(self, *args: Any, device: Any = "cpu") -> None:
        dev = to_device(device)
        drv = driver_for(dev.type)
        if len(args) > 1:
            raise TypeError(f"UntypedStorage takes at most one positional argument, got {args}")
        arg = args[0] if args else 0
        if isinstance(arg, int):
            if arg < 0:
                raise RuntimeError(f"Storage size must be non-negative, got {arg}")
            buf = drv.alloc(arg, dev.index)
        else:
            data = np.asarray(list(arg) if not isinstance(arg, bytes | bytearray) else
                              np.frombuffer(arg, np.uint8))
            if data.size and (data.min() < 0 or data.max() > 255):
                raise RuntimeError("UntypedStorage data must be bytes in [0, 255]")
            buf = drv.alloc(data.size, dev.index)
            drv.from_host(buf, 0, data.astype(np.uint8))
        self._init(buf, dev)

    def _init(self, buf: Any, dev: Device) -> None:
        self._buf = buf
        self.device = dev
        self._version = 0
        self._shm = None
        self._pinned = False
        if inference_blocks and in_inference_mode():
            self._inference = True
        if _capture.TRACE is not None:
            _capture.TRACE.storage_created(self)

    @classmethod
    def _wrap(cls, buf: Any, dev: Device) -> UntypedStorage:
        """Adopt a driver buffer without copying (fast path for kernel outputs)."""
        self = cls.__new__(cls)
        self._buf = buf
        self.device = dev
        self._version = 0
        if inference_blocks and in_inference_mode():
            self._inference = True
        if _capture.TRACE is not None:
            _capture.TRACE.storage_created(self)
        return self

    @property
    def _driver(self) -> Any:
        return driver_for(self.device.type)

    def nbytes(self) -> int:
        return self._driver.nbytes(self._buf)

    def size(self) -> int:
        return self.nbytes()

    def __len__(self) -> int:
        return self.nbytes()

    def element_size(self) -> int:
        return 1

    def data_ptr(self) -> int:
        return self._driver.data_ptr(self._buf)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_sparse(self) -> bool:
        return False

    def _host_bytes(self) -> np.ndarray:
        """The bytes as a host array: a view on the CPU, a copy from other devices."""
        return self._driver.to_host(self._buf, 0, self.nbytes())

    def tolist(self) -> list[int]:
        return self._host_bytes().tolist()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, idx: int | slice) -> int | UntypedStorage:
        data = self._host_bytes()
        if isinstance(idx, slice):
            return _host_to_storage(data[idx].copy(), self.device)
        return int(data[_check_index(idx, len(data))])

    def __setitem__(self, idx: int | slice, value: Any) -> None:
        n = self.nbytes()
        if isinstance(idx, slice):
            start, stop, step = idx.indices(n)
            if step != 1:
                raise RuntimeError("storage slice assignment needs step 1")
            self.fill_(value, start, stop)
        else:
            self.fill_(value, _check_index(idx, n), _check_index(idx, n) + 1)

    def fill_(self, value: int, start: int = 0, stop: int | None = None) -> UntypedStorage:
        stop = self.nbytes() if stop is None else stop
        self._driver.from_host(self._buf, start, np.full(stop - start, value, np.uint8))
        self._version += 1
        return self

    def copy_(self, src: UntypedStorage, non_blocking: bool = False) -> UntypedStorage:
        if src.nbytes() != self.nbytes():
            raise RuntimeError(f"size mismatch in storage copy_: {src.nbytes()} bytes into "
                               f"{self.nbytes()} bytes")
        if src.device.type == self.device.type:
            self._driver.copy(self._buf, 0, src._buf, 0, self.nbytes())
        else:
            self._driver.from_host(self._buf, 0, src._host_bytes())
        self._version += 1
        return self

    def clone(self) -> UntypedStorage:
        out = UntypedStorage(self.nbytes(), device=self.device)
        return out.copy_(self)

    def cpu(self) -> UntypedStorage:
        return self if self.device.type == "cpu" else _host_to_storage(self._host_bytes(),
                                                                       to_device("cpu"))

    def cuda(self, device: Any = None, non_blocking: bool = False) -> UntypedStorage:
        dev = to_device(device if device is not None else "cuda")
        if dev.type != "cuda":
            raise RuntimeError(f"cuda() needs a CUDA device, got {dev}")
        if self.device == dev:
            return self
        out = UntypedStorage(self.nbytes(), device=dev)
        return out.copy_(self)

    def resize_(self, nbytes: int) -> UntypedStorage:
        """Reallocate to ``nbytes`` keeping the leading bytes (tensors re-view the new buffer)."""
        if self._shm is not None:  # other processes map the segment: it cannot move
            raise RuntimeError("Trying to resize storage that is not resizable: it is in "
                               "shared memory")
        if not self._resizable:
            raise RuntimeError("Trying to resize storage that is not resizable")
        old = self._host_bytes()
        drv = self._driver
        buf = drv.alloc(nbytes, self.device.index)
        keep = min(nbytes, len(old))
        drv.from_host(buf, 0, old[:keep])
        self._buf = buf
        return self

    # -- sharing and pinning (CPU) ------------------------------------------------------
    def share_memory_(self) -> UntypedStorage:
        """Move the bytes into shared memory (the sharing strategy's kind, see
        ``storage/shared.py``), so that multiprocessing passes it to other processes by
        reference. CUDA memory is shared through IPC handles as it is."""
        if self.device.type != "cpu" or self._shm is not None:
            return self
        n = self.nbytes()
        seg = shared.create(n)
        seg.array[:] = self._host_bytes()
        self._buf, self._shm = seg.array, seg
        return self

    @classmethod
    def _from_segment(cls, seg: shared.Segment) -> UntypedStorage:
        """The storage of a shared segment received from another process (one per segment
        and process, so views keep sharing their storage)."""
        key = seg.key()
        known = shared.attached(key)
        if known is not None:
            return known
        out = cls._wrap(seg.array, to_device("cpu"))
        out._shm = seg
        shared.remember(key, out)
        return out

    def is_shared(self) -> bool:
        return self._shm is not None or self.device.type == "cuda"

    def pin_memory(self, device: Any = "cuda") -> UntypedStorage:
        """A copy in page-locked host memory (what asynchronous host<->device copies need),
        from the CUDA runtime's pinned pool; ordinary host memory marked pinned when no CUDA
        runtime is active (the emulator's host memory is all alike). Pinned storages return
        themselves."""
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin storage on {self.device}: only CPU memory can be "
                               f"pinned")
        if self._pinned:
            return self
        n = self.nbytes()
        buf = _pinned_host(n)
        buf[:] = self._host_bytes()
        out = UntypedStorage._wrap(buf, self.device)
        out._shm = None
        out._pinned = True
        return out

    def is_pinned(self, device: Any = "cuda") -> bool:
        return self._pinned

    # -- Python protocol -----------------------------------------------------------------
    def __repr__(self) -> str:
        data = self._host_bytes()
        body = "\n".join(f" {v}" for v in data.tolist())
        return (f"{body}\n[gputensor.storage.UntypedStorage(device={self.device}) of size "
                f"{len(data)}]").lstrip("\n")

    def __copy__(self) -> UntypedStorage:
        return self  # like PyTorch: a shallow copy of a storage is the storage

    def __deepcopy__(self, memo: dict) -> UntypedStorage:
        if id(self) not in memo:
            memo[id(self)] = self.clone()
        return memo[id(self)]

    def __reduce__(self) -> tuple:
        # A plain pickle copies the bytes, shared or not (as PyTorch's does): the pickle may
        # outlive the segment. Multiprocessing passes storages by reference instead, through
        # the reducers gputensor.multiprocessing registers with its pickler.
        return (_rebuild_untyped, (self._host_bytes().tobytes(), str(self.device)))

    def __sizeof__(self) -> int:
        return super().__sizeof__() + self.nbytes()

    def untyped(self) -> UntypedStorage:
        return self

    @property
    def dtype(self) -> Any:
        from gputensor._dtype import uint8
        return uint8

    def type(self, dtype: Any = None) -> Any:
        if dtype is None:
            return "gputensor.storage.UntypedStorage"
        raise TypeError("UntypedStorage has no type conversions; use a typed storage")


def _check_index(idx: int, n: int) -> int:
    if not isinstance(idx, int | np.integer):
        raise TypeError(f"storage indices must be integers or slices, got {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for storage of size {n}")
    return int(idx) % n


def _pinned_host(nbytes: int) -> np.ndarray:
    """``nbytes`` of pinned host memory from the active CUDA runtime, else ordinary memory."""
    if "cuda" in DRIVERS:
        rt = getattr(DRIVERS["cuda"], "runtime", None)
        if rt is not None and callable(getattr(rt, "alloc_host", None)):
            return rt.alloc_host(nbytes)
    return np.empty(nbytes, np.uint8)


def _host_to_storage(data: np.ndarray, dev: Device) -> UntypedStorage:
    drv = driver_for(dev.type)
    buf = drv.alloc(data.nbytes, dev.index)
    drv.from_host(buf, 0, data)
    return UntypedStorage._wrap(buf, dev)


def _rebuild_untyped(data: bytes, device: str) -> UntypedStorage:
    return _host_to_storage(np.frombuffer(data, np.uint8), to_device(device))


__all__ = ["UntypedStorage", "host_bytes"]
