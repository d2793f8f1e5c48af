"""The device runtime on the CPU: host memory behind device addresses, kernels via the emulator.

Device memory is NumPy buffers handed out at synthetic, 256-byte-aligned addresses with a guard
gap between blocks, so an out-of-bounds or stale pointer is an error instead of silent
corruption. A caching allocator rounds requests up to size classes (512-byte units, like CuPy's
pool) and keeps freed blocks for reuse, so memory_allocated / memory_reserved / empty_cache
behave like CuPy's MemoryPool. Work on streams runs at once, in issue order (a valid schedule for
a stream); events stamp a monotonic clock, so elapsed_time measures the host time in between.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gputensor.storage import shared

from .emulator import Module, compile_source
from .emulator.launch import Kernel
from .memstats import MemoryStats
from .runtime import (
    CAPTURE_ERROR,
    HOST_LIBRARY,
    NULL,
    AcceleratorError,
    AllocationTable,
    ArrayLibrary,
    DeviceProperties,
    DevicePtr,
    OutOfMemoryError,
    apply_op,
    array_span,
    checked_gemm_plan,
    column_major,
    gemm_extent,
    gemm_op_shape,
)

UNIT = 512                    # size-class granularity (CuPy rounds to 512 bytes too)
_BASE_ADDRESS = 0x7E00_0000_0000
# Each emulated device hands out addresses from its own 1 TiB range, so a pointer of one
# device used on another is a stray address (a real GPU faults on it), never a silent alias.
_DEVICE_SPAN = 0x0100_0000_0000
_GUARD = 4096                 # address gap between blocks: overruns never land in a neighbour
_NOT_A_BASE = (0, None)       # by_base's answer for a pointer that starts no block
DEFAULT_LIMIT = 8 * 1024**3   # the emulated device's memory
DEVICE_NAME = "gputensor CUDA emulator (CPU)"


def size_class(nbytes: int) -> int:
    return max(UNIT, -(-nbytes // UNIT) * UNIT)


@dataclass
class _Block:
    address: int
    size: int           # size class: what the block reserves
    nbytes: int         # what was asked for: the bounds of a live allocation
    buf: np.ndarray     # uint8, length ``size``
    host: int = 0       # buf's host address: what kernels get for ``address``
    segment: Any = None  # the shared segment behind ``buf`` once exported (or imported)

    def __post_init__(self) -> None:
        self.host = self.buf.__array_interface__["data"][0]

    def rebase(self, segment: Any) -> None:
        """Move the block's bytes into ``segment`` (a storage.shared.Segment)."""
        segment.array[:] = self.buf
        self.buf, self.segment = segment.array, segment
        self.host = self.buf.__array_interface__["data"][0]


class EmulatorStream:
    """A stream whose work runs when issued (so it is always complete)."""

    def __init__(self, runtime: EmulatorRuntime) -> None:
        self.runtime = runtime

    def synchronize(self) -> None:
        """All work already ran; nothing to wait for."""

    def query(self) -> bool:
        return True


class EmulatorEvent:
    def __init__(self) -> None:
        self.time_ns: int | None = None

    def record(self, stream: EmulatorStream | None = None) -> None:
        self.time_ns = time.perf_counter_ns()

    def synchronize(self) -> None:
        if self.time_ns is None:
            raise RuntimeError("event.synchronize(): the event was never recorded")

    def query(self) -> bool:
        return self.time_ns is not None


class EmulatorGraph:
    """A captured sequence of launches and copies, replayed in order by ``launch``; holds the
    blocks freed during the capture until ``release``."""

    def __init__(self, runtime: EmulatorRuntime, work: list[Callable[[], None]],
                 kept: list[_Block]) -> None:
        self.runtime, self.work, self.kept = runtime, work, kept
        self.held: list[Any] = []

    def launch(self, stream: Any = None) -> None:
        if self.work is None:
            raise RuntimeError("CUDA graph: launch() after release()")
        for item in self.work:
            item()

    def release(self) -> None:
        if self.kept:
            self.runtime._return_blocks(self.kept)
        self.work, self.kept, self.held = None, [], []


@dataclass(frozen=True)
class EmulatorKernel:
    module: Module
    name: str
    handle: Kernel  # the module's prepared launcher for it


class _PoolLock:
    """The pool's lock, knowing which thread holds it: a finalizer freeing a block in that
    thread (a GC pass started by any allocation under the lock, in alloc, free, an IPC call
    or empty_cache) must defer the free rather than wait on its own thread. The owner is set
    right after acquiring and cleared right before releasing, with no allocation between."""

    __slots__ = ("_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        self._owner = threading.get_ident()

    def __exit__(self, *exc: object) -> None:
        self._owner = None
        self._lock.release()

    def held_here(self) -> bool:
        return self._owner == threading.get_ident()


class EmulatorRuntime:
    """One emulated CUDA device (see runtime.py for the interface): device ``index`` of
    ``count`` (``emulated_devices(n)`` makes the runtimes of an n-device machine)."""

    name = "emulator"
    is_emulated = True
    synchronous_launches = True  # every launch and copy has run when the call returns

    def __init__(self, memory_limit: int = DEFAULT_LIMIT, *, index: int = 0,
                 count: int = 1) -> None:
        if not 0 <= index < count:
            raise ValueError(f"emulated device {index} of {count}: no such device")
        self.device_index = index
        self.count = count
        self.device_memory = int(memory_limit)  # what properties() reports as total memory
        self.memory_limit = int(memory_limit)   # what the pool may reserve (memory fraction)
        self._table = AllocationTable()          # blocks by address
        self._cache: dict[int, list[_Block]] = {}  # size class -> free blocks
        self._next_address = _BASE_ADDRESS + index * _DEVICE_SPAN
        self._allocated = 0   # size-class bytes of live blocks
        self._reserved = 0    # live + cached
        self.stats = MemoryStats()
        self._default_stream = EmulatorStream(self)
        self._lock = _PoolLock()
        # A tensor's block is freed by a GC finalizer, which can run wherever the pool's
        # thread allocates while holding the lock (any allocation may start a GC pass): such
        # a free waits in ``_deferred`` for the next alloc/free to drain it.
        self._deferred: list[int] = []
        self._capture: list[Callable[[], None]] | None = None  # work recorded by a capture
        self._kept: list[_Block] = []  # blocks freed during the capture (the graph's)
        self._held: list[Any] = []     # objects the captured work needs alive

    @property
    def capturing(self) -> bool:
        return self._capture is not None

    # gemm records into a capture, as the CuPy driver's products do (cublas_capture.py)
    blas_captures = True

    def _not_capturing(self, what: str) -> None:
        if self._capture is not None:
            raise RuntimeError(CAPTURE_ERROR.format(what=what))

    # -- graphs ------------------------------------------------------------------------------
    def begin_capture(self) -> None:
        self._not_capturing("begin_capture")
        self._capture, self._kept, self._held = [], [], []

    def end_capture(self) -> EmulatorGraph:
        if self._capture is None:
            raise RuntimeError("end_capture(): no capture is open on this device")
        graph = EmulatorGraph(self, self._capture, self._kept)
        graph.held = self._held
        self._capture, self._kept, self._held = None, [], []
        return graph

    def hold(self, obj: Any) -> None:
        """Keep ``obj`` (a buffer the captured work reads) alive as long as the graph."""
        if self._capture is not None:
            self._held.append(obj)

    def _return_blocks(self, blocks: list[_Block]) -> None:
        with self._lock:
            for block in blocks:
                self._cache.setdefault(block.size, []).append(block)

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, stream: Any = None) -> DevicePtr:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        if nbytes == 0:
            return NULL
        with self._lock:
            try:
                return self._alloc_locked(nbytes)
            finally:
                self._drain_deferred()

    def _alloc_locked(self, nbytes: int) -> DevicePtr:
        size = size_class(nbytes)
        cached = self._cache.get(size)
        if cached:
            block = cached.pop()
            block.nbytes = nbytes
        else:
            block = self._new_block(size, nbytes)
        self._table.add(block.address, nbytes, block)
        self._allocated += size
        self.stats.block(nbytes, size, +1)
        return DevicePtr(block.address)

    def _new_block(self, size: int, nbytes: int) -> _Block:
        if self._reserved + size > self.memory_limit:
            self.stats.event("num_alloc_retries")
            self._release_cache()  # like CuPy's pool: free cached blocks, then retry once
            if self._reserved + size > self.memory_limit:
                self.stats.event("num_ooms")
                raise OutOfMemoryError(
                    f"CUDA out of memory (emulator): tried to allocate {nbytes} bytes "
                    f"({size} with rounding); {self._allocated} bytes in use, "
                    f"{self._reserved} reserved, device limit {self.memory_limit} bytes")
        address = self._next_address
        self._next_address += -(-(size + _GUARD) // 256) * 256
        self._reserved += size
        self.stats.segment(size, +1)
        return _Block(address, size, nbytes, np.empty(size, np.uint8))

    def free(self, ptr: int, streams: Sequence[Any] = ()) -> None:
        """Return a block to the pool (``streams``: the work they queued has already run)."""
        if int(ptr) == 0:
            return
        if self._lock.held_here():  # a finalizer while this thread holds the pool: afterwards
            self._deferred.append(int(ptr))
            return
        with self._lock:
            try:
                self._free_locked(ptr)
            finally:
                self._drain_deferred()

    def _free_locked(self, ptr: int) -> None:
        nbytes, block = self._table.pop(ptr)
        self._allocated -= block.size
        self.stats.block(nbytes, block.size, -1)
        if self._capture is not None:  # the graph's work may still use it: the graph's now
            self._kept.append(block)
        else:
            self._cache.setdefault(block.size, []).append(block)

    def _drain_deferred(self) -> None:
        """Free what finalizers handed over while the pool was busy (lock held, so a
        finalizer running meanwhile defers too, and this loop takes it)."""
        while self._deferred:
            self._free_locked(self._deferred.pop())

    def alloc_host(self, nbytes: int) -> np.ndarray:
        """Page-locked host memory on a GPU; ordinary host memory here."""
        return np.empty(int(nbytes), np.uint8)

    def view(self, ptr: int, nbytes: int) -> np.ndarray:
        """The writable uint8 bytes behind ``[ptr, ptr + nbytes)`` (bounds-checked)."""
        if nbytes == 0:
            return np.empty(0, np.uint8)
        _, block, off = self._table.lookup(ptr, nbytes)
        return block.buf[off:off + nbytes]

    def as_array(self, ptr: int, shape: Sequence[int], strides: Sequence[int],
                 dtype: Any) -> np.ndarray:
        """A NumPy view of device memory (``strides`` in bytes): the emulator's memory is host
        memory, so library calls on it (SciPy's LAPACK and pocketfft) work in place."""
        dtype = np.dtype(dtype)
        span = array_span(shape, strides, dtype.itemsize)
        raw = self.view(int(ptr), span) if span else np.empty(dtype.itemsize, np.uint8)
        return np.lib.stride_tricks.as_strided(raw.view(dtype), tuple(shape), tuple(strides))

    @contextlib.contextmanager
    def array_library(self) -> Iterator[ArrayLibrary]:
        """NumPy/SciPy: the emulator runs every call at once, on the host."""
        self._not_capturing("a library call (SciPy on the emulator)")
        yield HOST_LIBRARY

    def _release_cache(self) -> None:
        for blocks in self._cache.values():
            for b in blocks:
                self._reserved -= b.size
                self.stats.segment(b.size, -1)
        self._cache.clear()

    # -- copies (streams run work at once, so async copies complete before returning) --------
    def memcpy_htod(self, dst: int, host: np.ndarray, stream: Any = None) -> None:
        raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        target = self.view(dst, raw.nbytes)
        if self._capture is not None:  # the bytes as they are now, written on each replay
            data = raw.copy()
            self._capture.append(lambda: target.__setitem__(Ellipsis, data))
            return
        target[...] = raw

    def upload(self, dst: int, host: np.ndarray, stream: Any = None) -> None:
        """A small host-to-device copy (kernel metadata): an ordinary copy here."""
        self.memcpy_htod(dst, host, stream)

    def memcpy_dtoh(self, host_out: np.ndarray, src: int, stream: Any = None) -> None:
        self._not_capturing("a device-to-host copy")
        out = host_out.reshape(-1).view(np.uint8)  # must be a contiguous, writable array
        out[...] = self.view(src, out.nbytes)

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        d, s = self.view(dst, nbytes), self.view(src, nbytes)
        if self._capture is not None:
            self._capture.append(lambda: d.__setitem__(Ellipsis, s))
            return
        d[...] = s  # NumPy handles overlap

    # -- kernels -----------------------------------------------------------------------------
    def compile(self, source: str, name: str, options: Sequence[str] = (),
                name_expressions: Sequence[str] = ()) -> Module:
        """Build a module. ``options`` are NVRTC flags: the emulator keeps ``-D``/``-I`` ones
        and g++'s ``-f``/``-O`` ones, and always adds -fwrapv (signed overflow wraps, as on the
        GPU); ``name_expressions`` (template instantiations) are not launchable here."""
        flags = [o for o in options if o.startswith(("-D", "-I", "-O"))
                 or (o.startswith("-f") and not o.startswith(("-fmad", "-ftz")))]
        return compile_source(source, name, ["-fwrapv", *flags])

    def get_kernel(self, module: Module, name: str) -> EmulatorKernel:
        if name not in module.kernels:
            raise KeyError(f"module '{module.name}' has no kernel '{name}' "
                           f"(kernels: {', '.join(module.kernels)})")
        return EmulatorKernel(module, name, module.kernel(name))

    def launch(self, kernel: EmulatorKernel, grid: int | Sequence[int],
               block: int | Sequence[int], shared_bytes: int, args: Sequence[Any],
               stream: Any = None) -> None:
        """Launch with device pointers (DevicePtr / None) translated to the host addresses
        behind them; scalars are converted and checked by the kernel's prepared packer."""
        handle = kernel.handle
        if len(args) != handle.nargs:
            raise TypeError(f"kernel '{kernel.name}' takes {handle.nargs} arguments, "
                            f"got {len(args)}")
        values = list(args)
        by_base = self._table.by_base
        for i in handle.pointer_indices:
            v = values[i]
            if v is None:
                values[i] = 0
            else:  # inline fast path: a DevicePtr to the start of a block
                owner = by_base.get(v, _NOT_A_BASE)[1] if type(v) is DevicePtr else None
                values[i] = owner.host if owner is not None else \
                    self._host_address(handle, i, v)
        if self._capture is not None:
            self._capture.append(functools.partial(handle.run, grid, block, shared_bytes,
                                                   values))
            return
        handle.run(grid, block, shared_bytes, values)

    def launcher(self, kernel: EmulatorKernel,
                 block: int) -> Callable[[int, Sequence[Any]], None]:
        def go(grid: int, args: Sequence[Any]) -> None:
            self.launch(kernel, grid, block, 0, args)

        return go

    def kernel_addresses(self, ptrs: Sequence[int]) -> list[int]:
        """The host addresses behind device pointers (0 stays null), for a pointer table a
        kernel reads from device memory: launches translate only their own arguments."""
        lookup = self._table.lookup
        out = []
        for p in ptrs:
            if int(p) == 0:
                out.append(0)
            else:
                _, block, off = lookup(int(p), 0)
                out.append(block.host + off)
        return out

    def _host_address(self, handle: Kernel, i: int, value: Any) -> int:
        """Where device pointer ``value`` lives in host memory (0 for null); it must point
        into a live allocation (or one past its end, as C allows)."""
        if value is None or (isinstance(value, int) and int(value) == 0):
            return 0  # a null pointer (None, NULL, or a plain 0)
        if not isinstance(value, DevicePtr):
            param = handle.params[i]
            raise TypeError(f"kernel '{handle.name}', parameter '{param.name}' ({param.ctype}):"
                            f" expected a DevicePtr, got {type(value).__name__}")
        _, block, off = self._table.lookup(value, 0)
        return block.host + off

    # -- IPC ---------------------------------------------------------------------------------
    # The emulated device's memory is this process's memory, so an exported block moves into
    # a named shared-memory segment (once; the block keeps it through reuse) and another
    # process maps that segment as a block of its own. Graphs captured before the export
    # keep the block's old host address: exporting during a capture is refused.
    def ipc_export(self, ptr: int) -> tuple[Any, int]:
        self._not_capturing("ipc_export")
        with self._lock:
            _, block, off = self._table.lookup(ptr, 0)
            if block.segment is None:
                block.rebase(shared.create_named(block.size))
            return ("emulator", block.segment.name, block.size), off

    def ipc_open(self, handle: Any) -> DevicePtr:
        if not (isinstance(handle, tuple) and len(handle) == 3 and handle[0] == "emulator"):
            raise AcceleratorError(f"CUDA error: invalid argument (cudaErrorInvalidValue): "
                                   f"{handle!r} is not an IPC handle of the emulator")
        _, name, size = handle
        segment = shared.attach_name(name, size)
        with self._lock:
            address = self._next_address
            self._next_address += -(-(size + _GUARD) // 256) * 256
            block = _Block(address, size, size, segment.array, segment=segment)
            self._table.add(address, size, block)
        return DevicePtr(address)

    def ipc_close(self, ptr: int) -> None:
        with self._lock:
            self._table.pop(ptr)  # the segment unmaps when the block goes

    # -- other libraries' memory and streams: only this emulator's own memory is emulated
    # device memory, and its streams run work when issued --------------------------------------
    def adopt_external(self, ptr: int, nbytes: int) -> bool:
        try:
            self._table.lookup(ptr, nbytes)
        except IndexError as e:
            raise RuntimeError(f"device memory at {DevicePtr(int(ptr))!r} ({nbytes} bytes) is "
                               f"not memory of the CUDA emulator: {e}") from None
        return False

    def drop_external(self, ptr: int) -> None:
        raise RuntimeError("the CUDA emulator never registers external memory")

    def external_stream(self, handle: int) -> EmulatorStream:
        return EmulatorStream(self)

    # -- streams and events ------------------------------------------------------------------
    def create_stream(self) -> EmulatorStream:
        return EmulatorStream(self)

    def default_stream(self) -> EmulatorStream:
        return self._default_stream

    def current_stream(self) -> EmulatorStream:
        """Launches and copies run to completion when issued, so every stream is one queue:
        the default stream stands for all of them."""
        return self._default_stream

    def create_event(self) -> EmulatorEvent:
        return EmulatorEvent()

    def elapsed_time(self, start: EmulatorEvent, end: EmulatorEvent) -> float:
        if start.time_ns is None or end.time_ns is None:
            raise RuntimeError("elapsed_time: both events must be recorded first")
        return (end.time_ns - start.time_ns) / 1e6

    def synchronize(self) -> None:
        """Every stream's work already ran."""
        self._not_capturing("synchronize()")

    # -- statistics --------------------------------------------------------------------------
    def memory_allocated(self) -> int:
        return self._allocated

    def memory_reserved(self) -> int:
        return self._reserved

    def max_memory_allocated(self) -> int:
        return self.stats.peak("allocated_bytes")

    def max_memory_reserved(self) -> int:
        return self.stats.peak("reserved_bytes")

    def reset_peak_memory_stats(self) -> None:
        self.stats.reset_peaks()

    def memory_stats(self) -> dict[str, int]:
        return self.stats.as_dict()

    def empty_cache(self) -> None:
        with self._lock:
            self._release_cache()

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total): the emulated device's limit minus what the pool reserved."""
        return self.memory_limit - self._reserved, self.device_memory

    def set_memory_fraction(self, fraction: float) -> None:
        """Cap the pool at ``fraction`` of the emulated device's memory."""
        self.memory_limit = int(float(fraction) * self.device_memory)

    # -- device ------------------------------------------------------------------------------
    def device_count(self) -> int:
        return self.count

    def make_current(self) -> None:
        """Nothing to switch: the emulator keeps no per-thread device state."""

    def properties(self, index: int = 0) -> DeviceProperties:
        if not 0 <= index < self.count:
            raise ValueError(f"invalid CUDA device index {index}: the emulator has "
                             f"{self.count} device(s)")
        return DeviceProperties(DEVICE_NAME, self.device_memory, os.cpu_count() or 1, 8, 0)

    # -- BLAS --------------------------------------------------------------------------------
    def gemm(self, transa: str, transb: str, m: int, n: int, k: int, alpha: Any, a: int,
             lda: int, b: int, ldb: int, beta: Any, c: int, ldc: int, dtype: Any, *,
             batch: int = 1, stride_a: int = 0, stride_b: int = 0, stride_c: int = 0,
             allow_tf32: bool = False) -> None:
        """Strided-batched gemm with NumPy (TF32 does not exist on the CPU: full float32);
        16-bit floats compute in float32 and round once, as cuBLAS with a float32 compute
        type does."""
        dt = np.dtype(dtype)
        work = np.dtype(np.float32) if dt.itemsize == 2 and dt.kind in "fV" else dt
        ra, ca = gemm_op_shape(transa, m, k)
        rb, cb = gemm_op_shape(transb, k, n)
        if m == 0 or n == 0 or batch == 0:
            return
        views = []
        for i in range(batch):
            cv = column_major(self._typed(c + i * stride_c * dt.itemsize, gemm_extent(m, n, ldc),
                                          dt), m, n, ldc, "C")
            av = column_major(self._typed(a + i * stride_a * dt.itemsize,
                                          gemm_extent(ra, ca, lda), dt), ra, ca, lda, "A")
            bv = column_major(self._typed(b + i * stride_b * dt.itemsize,
                                          gemm_extent(rb, cb, ldb), dt), rb, cb, ldb, "B")
            views.append((cv, av, bv))
        if self._capture is not None:  # recorded, as cuBLAS records into a stream capture
            self._capture.append(functools.partial(_gemm_views, views, transa, transb, alpha,
                                                   beta, work))
            return
        _gemm_views(views, transa, transb, alpha, beta, work)

    def gemm_plan(self, transa: str, transb: str, m: int, n: int, k: int, lda: int, ldb: int,
                  ldc: int, dtype: Any, **batching: Any) -> Any:
        return checked_gemm_plan(self, transa, transb, m, n, k, lda, ldb, ldc, dtype, **batching)

    def _typed(self, ptr: int, count: int, dt: np.dtype) -> np.ndarray:
        return self.view(ptr, count * dt.itemsize).view(dt)


def _gemm_views(views: list, transa: str, transb: str, alpha: Any, beta: Any,
                work: np.dtype) -> None:
    for cv, av, bv in views:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            prod = np.matmul(apply_op(av, transa).astype(work, copy=False),
                             apply_op(bv, transb).astype(work, copy=False))
            prod = prod * work.type(alpha) if alpha != 1 else prod
            if beta != 0:  # BLAS: beta == 0 never reads C (it may hold NaN garbage)
                prod = prod + work.type(beta) * cv.astype(work, copy=False)
            cv[...] = prod


def emulated_devices(count: int = 1, memory_limit: int = DEFAULT_LIMIT) -> list[EmulatorRuntime]:
    """The runtimes of an emulated machine with ``count`` CUDA devices, one per device."""
    if count < 1:
        raise ValueError(f"an emulated machine needs at least one device, got {count}")
    return [EmulatorRuntime(memory_limit, index=i, count=count) for i in range(count)]

