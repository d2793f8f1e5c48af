"""A stand-in ``cupy`` (and ``cupy_backends...cublas``) that encodes the CuPy facts the CuPy
driver relies on, so CI checks the driver's calls without a GPU.

Device memory is host memory (a pointer is a real host address, so copies and cuBLAS gemm have
real effects). What it models, each as CuPy 14 behaves (sources named where it matters):

* streams: ``Stream.null`` is the legacy default stream (handle 0); ``get_current_stream()``
  is the innermost entered stream, else ``Stream.null``; a stream's work is *queued* (data
  moves at once, completion does not): ``done`` is False until ``synchronize()``, and an
  ``Event`` recorded on a stream is ``done`` only once that stream was synchronized after it;
* ``MemoryPointer.copy_*`` (synchronous: logged as such) and ``copy_*_async(..., stream)``;
* ``MemoryPool(allocator=...)``: takes segments from its allocator (``cuda.Memory`` by
  default), hands out 512-byte-rounded blocks, caches freed ones until ``free_all_blocks``,
  honours ``set_limit`` and raises ``cuda.memory.OutOfMemoryError``;
* ``using_allocator`` (CuPy's own allocations go to the given function while inside);
* ``PinnedMemoryPool.malloc`` returns page-locked memory that ``pinned_memory.
  is_memory_pinned`` recognises; a block goes back to the pool when its last user drops it;
* ``cuda.function.Module.load(image)`` / ``get_function(name)(grid, block, args, shared_mem=,
  stream=)`` (cupy/cuda/function.pyx: stream=None launches on the current stream), and
  ``cuda.driver.launchKernel(f, grid xyz, block xyz, shared_mem, stream_ptr, 0, extra)`` with
  ``extra`` naming one parameter buffer (logged as its bytes)
* the current device (``runtime.getDevice``/``setDevice``, per process here): ``cudaMalloc``,
  streams and loaded modules belong to the device current when they were made, and launching a
  module's function, or on a stream, of another device than the current one fails as CUDA does
  (an invalid resource handle);
* ``cublas.gemmStridedBatchedEx`` with host-pointer alpha/beta, column-major operands.
"""

from __future__ import annotations

import contextlib
import ctypes
import types
import weakref
from typing import Any

import ml_dtypes
import numpy as np

ROUND = 512


class OutOfMemoryError(MemoryError):
    pass


def _bytes_at(ptr: int, size: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr)) if size else \
        np.empty(0, np.uint8)


def make(devices: int = 1, driver_version: int = 13000, fail_mallocs: int = 0,
         total_memory: int = 80 << 30) -> types.ModuleType:
    log: list = []
    cp = types.ModuleType("cupy")
    cp.log = log
    stack: list = []           # entered streams
    pinned: dict[int, int] = {}  # live pinned blocks: address -> size
    state = types.SimpleNamespace(allocator=None, fails=fail_mallocs, device=0)
    cp.malloc_devices = []  # the current device of each cudaMalloc, in order
    cp.allocation_bases = {}  # base pointer -> size of each cudaMalloc

    # ---- streams and events ------------------------------------------------------------------
    class Stream:
        def __init__(self, non_blocking: bool = False, *, _ptr: int | None = None) -> None:
            self.non_blocking = non_blocking
            self.device_id = -1 if _ptr == 0 else state.device  # null: the current device's
            self.ptr = id(self) if _ptr is None else _ptr
            self.queued = 0      # work items issued
            self.completed = 0   # work items known complete (after synchronize)

        def _issue(self) -> None:
            self.queued += 1

        @property
        def done(self) -> bool:
            return self.completed == self.queued

        def synchronize(self) -> None:
            log.append(("stream_sync", self))
            self.completed = self.queued

        def wait_event(self, event: Event) -> None:
            log.append(("wait_event", self, event))

        capturing = False

        def begin_capture(self, mode=None) -> None:
            log.append(("begin_capture", self))
            self.capturing = True

        def end_capture(self):
            log.append(("end_capture", self))
            self.capturing = False
            return Graph()

        def __enter__(self) -> Stream:
            stack.append(self)
            return self

        def __exit__(self, *exc: object) -> None:
            stack.pop()

        def __repr__(self) -> str:
            return "<Stream null>" if self.ptr == 0 else f"<Stream {self.ptr:#x}>"

    Stream.null = Stream(_ptr=0)

    def get_current_stream() -> Stream:
        return stack[-1] if stack else Stream.null

    def _stream(s: Stream | None) -> Stream:
        return get_current_stream() if s is None else s

    class Event:
        def __init__(self, block: bool = False, disable_timing: bool = False,
                     interprocess: bool = False) -> None:
            self.stream: Stream | None = None
            self.mark = 0
            self.t = None

        def record(self, stream: Stream | None = None) -> None:
            self.stream = _stream(stream)
            self.mark = self.stream.queued
            self.t = len(log)
            log.append(("event_record", self.stream))

        @property
        def done(self) -> bool:
            return self.stream is None or self.stream.completed >= self.mark

        def synchronize(self) -> None:
            if self.stream is not None:
                self.stream.completed = max(self.stream.completed, self.mark)

    # ---- device memory -----------------------------------------------------------------------
    class Memory:
        def __init__(self, size: int) -> None:
            self.buf = np.zeros(max(size, 1), np.uint8)
            self.ptr = self.buf.ctypes.data
            self.size = size
            self.device_id = state.device
            cp.malloc_devices.append(state.device)
            cp.allocation_bases[self.ptr] = size
            log.append(("cudaMalloc", size))

    class UnownedMemory:
        def __init__(self, ptr: int, size: int, owner: Any, device_id: int = -1) -> None:
            self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem: Any, offset: int) -> None:
            self.mem, self.offset = mem, offset
            self.ptr = mem.ptr + offset

        def __add__(self, off: int) -> MemoryPointer:
            return MemoryPointer(self.mem, self.offset + off)

        def copy_from_host(self, src: ctypes.c_void_p, size: int) -> None:
            log.append(("copy_from_host", size))
            ctypes.memmove(self.ptr, src, size)

        def copy_from_host_async(self, src: ctypes.c_void_p, size: int, stream=None) -> None:
            s = _stream(stream)
            if s.capturing:  # cupy/cuda/memory.pyx refuses it (pageable host memory may move)
                raise RuntimeError("the current stream is capturing, so H2D transfers are "
                                   "disallowed")
            s._issue()
            log.append(("copy_from_host_async", size, s))
            ctypes.memmove(self.ptr, src, size)

        def copy_to_host(self, dst: ctypes.c_void_p, size: int) -> None:
            log.append(("copy_to_host", size))
            ctypes.memmove(dst, self.ptr, size)

        def copy_to_host_async(self, dst: ctypes.c_void_p, size: int, stream=None) -> None:
            s = _stream(stream)
            s._issue()
            log.append(("copy_to_host_async", size, s))
            ctypes.memmove(dst, self.ptr, size)

        def copy_from_device(self, src: MemoryPointer, size: int) -> None:
            log.append(("copy_from_device", size))
            ctypes.memmove(self.ptr, src.ptr, size)

        def copy_from_device_async(self, src: MemoryPointer, size: int, stream=None) -> None:
            s = _stream(stream)
            s._issue()
            log.append(("copy_from_device_async", size, s))
            ctypes.memmove(self.ptr, src.ptr, size)

    class MemoryPool:
        def __init__(self, allocator: Any = None) -> None:
            self._allocator = allocator or (lambda n: MemoryPointer(Memory(n), 0))
            self._free: dict[int, list] = {}   # rounded size -> cached segment pointers
            self._used = 0
            self._total = 0
            self._limit = 0

        def malloc(self, size: int) -> MemoryPointer:
            n = max(ROUND, -(-size // ROUND) * ROUND)
            log.append(("malloc", size))
            cached = self._free.get(n)
            if cached:
                seg = cached.pop()
            else:
                if state.fails:
                    state.fails -= 1
                    raise OutOfMemoryError(size)
                if self._limit and self._total + n > self._limit:
                    raise OutOfMemoryError(size)
                seg = self._allocator(n)
                self._total += n
            self._used += n
            block = MemoryPointer(seg.mem, seg.offset)
            weakref.finalize(block, self._release, n, seg)
            return block

        def _release(self, n: int, seg: MemoryPointer) -> None:
            self._used -= n
            self._free.setdefault(n, []).append(seg)

        def free_all_blocks(self) -> None:
            log.append(("free_all_blocks",))
            for n, segs in self._free.items():
                self._total -= n * len(segs)
            self._free.clear()

        def used_bytes(self) -> int:
            return self._used

        def total_bytes(self) -> int:
            return self._total

        def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
            self._limit = int(size if size is not None else fraction * total_memory)

    @contextlib.contextmanager
    def using_allocator(allocator: Any = None):
        prev, state.allocator = state.allocator, allocator
        log.append(("using_allocator", allocator))
        try:
            yield
        finally:
            state.allocator = prev

    # ---- pinned memory -----------------------------------------------------------------------
    class PinnedBlock(bytearray):  # exposes the buffer protocol and can be weak-referenced
        __hash__ = object.__hash__

    class PinnedMemoryPool:
        def malloc(self, size: int) -> PinnedBlock:
            log.append(("pinned_malloc", size))
            block = PinnedBlock(size)
            addr = np.frombuffer(block, np.uint8).ctypes.data
            pinned[addr] = size
            weakref.finalize(block, pinned.pop, addr, None)
            cp.live_pinned.add(block)
            return block

    def is_memory_pinned(ptr: int) -> bool:
        return any(a <= ptr < a + n for a, n in pinned.items())

    # ---- kernels -----------------------------------------------------------------------------
    class Module:
        def __init__(self) -> None:
            self.device_id = state.device

        def load(self, image: bytes) -> None:
            self.device_id = state.device
            log.append(("module_load", image[:4], len(image)))

        def get_function(self, name: str):
            module = self

            def function(grid, block, args, shared_mem=0, stream=None):
                _issue_launch(module, name, stream)
                log.append(("kernel", name, grid, block, args, shared_mem, stream))
                if name == "gt_probe":  # gputensor's availability probe: out[0] = v + 1
                    ctypes.c_int64.from_address(int(args[0])).value = int(args[1]) + 1
            function.name = name
            function.module = module
            function.ptr = len(functions) + 0x1000  # the CUfunction handle
            functions[function.ptr] = function
            return function

    functions: dict[int, Any] = {}  # CUfunction handle -> the function

    def _issue_launch(module: Module, name: str, stream: Any) -> None:
        on = _stream(stream).device_id
        if module.device_id != state.device or on not in (-1, state.device):
            raise RuntimeError(f"cudaErrorInvalidResourceHandle: {name} of device "
                               f"{module.device_id} launched on a stream of device "
                               f"{on} with device {state.device} current")
        _stream(stream)._issue()

    def launchKernel(f, gx, gy, gz, bx, by, bz, shared_mem, stream_ptr, kernel_params,  # noqa: N802
                     extra):
        # cupy_backends/cuda/api/driver.pyx: cuLaunchKernel. Only the ``extra`` form with one
        # parameter buffer is modelled: the log holds a copy of the buffer's bytes.
        fn = functions[f]
        assert kernel_params == 0 and extra, "only CU_LAUNCH_PARAM_BUFFER_POINTER is modelled"
        tags = (ctypes.c_uint64 * 5).from_address(extra)
        assert (tags[0], tags[2], tags[4]) == (1, 2, 0), list(tags)
        size = ctypes.c_uint64.from_address(tags[3]).value
        raw = bytes(_bytes_at(tags[1], size))
        stream = next((x for x in (*stack, Stream.null, *cp.streams) if x.ptr == stream_ptr),
                      None)
        assert stream is not None, f"launch on an unknown stream {stream_ptr:#x}"
        _issue_launch(fn.module, fn.name, stream)
        log.append(("kernel", fn.name, (gx, gy, gz), (bx, by, bz), raw, shared_mem, stream))
        if fn.name == "gt_probe":  # gputensor's availability probe: out[0] = v + 1
            out, v = np.frombuffer(raw, np.int64)
            ctypes.c_int64.from_address(int(out)).value = int(v) + 1

    # ---- cuBLAS --------------------------------------------------------------------------------
    dtypes = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128,
              14: ml_dtypes.bfloat16}
    scales = {68: np.float32, 77: np.float32, 70: np.float64}

    def gemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA,
                             B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
                             computeType, algo):
        if get_current_stream().capturing:  # cublas.pyx: setStream refuses capturing streams
            raise NotImplementedError("calling cuBLAS API during stream capture is currently "
                                      "unsupported")
        get_current_stream()._issue()
        log.append(("gemmStridedBatchedEx", transa, transb, m, n, k, lda, strideA, ldb,
                    strideB, ldc, strideC, batchCount, computeType, state.allocator))
        dt = np.dtype(dtypes[Atype])
        scale = dt if dt.kind == "c" else np.dtype(scales[computeType])
        al = _bytes_at(alpha, scale.itemsize).view(scale)[0]
        be = _bytes_at(beta, scale.itemsize).view(scale)[0]
        work = np.float32 if dt.itemsize == 2 else dt

        def mat(ptr, rows, cols, ld, i, stride):
            if rows == 0 or cols == 0:
                return np.zeros((rows, cols), dt)
            start = ptr + i * stride * dt.itemsize
            count = (cols - 1) * ld + rows
            flat = _bytes_at(start, count * dt.itemsize).view(dt)
            return np.lib.stride_tricks.as_strided(flat, (rows, cols),
                                                   (dt.itemsize, ld * dt.itemsize))

        def op(x, t):
            return x if t == 0 else (x.T if t == 1 else x.conj().T)

        for i in range(batchCount):
            ra, ca = (m, k) if transa == 0 else (k, m)
            rb, cb = (k, n) if transb == 0 else (n, k)
            a = op(mat(A, ra, ca, lda, i, strideA), transa).astype(work)
            b = op(mat(B, rb, cb, ldb, i, strideB), transb).astype(work)
            c = mat(C, m, n, ldc, i, strideC)
            prod = al * (a @ b)
            if be != 0:
                prod = prod + be * c.astype(work)
            c[...] = prod

    cublas = types.ModuleType("cupy_backends.cuda.libs.cublas")
    cublas.gemmStridedBatchedEx = gemmStridedBatchedEx

    # ---- runtime -------------------------------------------------------------------------------
    def _set_device(index: int) -> None:
        if not 0 <= index < devices:
            raise RuntimeError(f"cudaErrorInvalidDevice: device {index} of {devices}")
        state.device = index

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: devices, getDevice=lambda: state.device, setDevice=_set_device,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "totalGlobalMem": total_memory,
                                       "multiProcessorCount": 132, "major": 9, "minor": 0},
        deviceSynchronize=lambda: _device_sync(),
        driverGetVersion=lambda: driver_version,
        memGetInfo=lambda: (total_memory - 1024, total_memory))

    # IPC: a handle names an allocation's base (cudaIpcGetMemHandle refuses other pointers);
    # opening it in this same process maps the same memory again.
    def _ipc_get(ptr: int) -> bytes:
        if ptr not in cp.allocation_bases:
            raise RuntimeError("cudaErrorInvalidValue: not the base of a cudaMalloc allocation")
        log.append(("ipcGetMemHandle", ptr))
        return ptr.to_bytes(8, "little") + bytes(56)

    def _ipc_open(handle: bytes, flags: int = 1) -> int:
        assert isinstance(handle, bytes) and len(handle) == 64 and flags == 1
        log.append(("ipcOpenMemHandle", handle))
        return int.from_bytes(handle[:8], "little")

    def _memcpy_async(dst: int, src: int, size: int, kind: int, stream_ptr: int) -> None:
        assert kind == 1  # cudaMemcpyHostToDevice: the only kind the driver queues this way
        s = next((x for x in (*stack, Stream.null) if x.ptr == stream_ptr), None)
        assert s is not None, f"memcpyAsync on an unknown stream {stream_ptr:#x}"
        s._issue()
        log.append(("memcpyAsync", size, s))
        ctypes.memmove(dst, src, size)

    runtime.memcpyAsync = _memcpy_async
    runtime.ipcGetMemHandle = _ipc_get
    runtime.ipcOpenMemHandle = _ipc_open
    runtime.ipcCloseMemHandle = lambda ptr: log.append(("ipcCloseMemHandle", ptr))

    def _device_sync() -> None:
        log.append(("deviceSynchronize",))
        for s in {id(s): s for s in [Stream.null, *cp.streams]}.values():
            s.completed = s.queued

    # ---- arrays (only what as_array/array_library use) ---------------------------------------
    class ndarray:  # noqa: N801 - CuPy's name
        """A view of fake device memory: cupy.ndarray(shape, dtype, memptr, strides)."""

        def __init__(self, shape, dtype=float, memptr=None, strides=None) -> None:
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
            self.memptr, self.strides = memptr, strides
            log.append(("ndarray", self.shape, self.dtype, strides))

        def get(self) -> np.ndarray:
            extent = zip(self.shape, self.strides, strict=True)
            n = self.dtype.itemsize + sum((d - 1) * s for d, s in extent)
            raw = _bytes_at(self.memptr.ptr, n)
            return np.lib.stride_tricks.as_strided(raw.view(self.dtype), self.shape, self.strides)

    def empty(shape, dtype=float) -> ndarray:
        return ndarray(shape, dtype, None, (0,) * len(tuple(shape)))

    @contextlib.contextmanager
    def Device(index: int = 0):  # noqa: N802 - CuPy's name
        prev = state.device
        _set_device(index)
        log.append(("Device", index))
        try:
            yield
        finally:
            state.device = prev

    class Graph:
        def launch(self, stream=None) -> None:
            log.append(("graph_launch", stream))

    cp.ndarray, cp.empty = ndarray, empty
    cp.streams = weakref.WeakSet()
    _orig_init = Stream.__init__

    def _tracked_init(self, *a, **kw):
        _orig_init(self, *a, **kw)
        cp.streams.add(self)
    Stream.__init__ = _tracked_init

    def ExternalStream(ptr: int, device_id: int = -1) -> Stream:  # noqa: N802 - CuPy's name
        log.append(("ExternalStream", ptr, device_id))
        return Stream(_ptr=ptr)

    cp.live_pinned = weakref.WeakSet()
    cp.cuda = types.SimpleNamespace(
        MemoryPool=MemoryPool, PinnedMemoryPool=PinnedMemoryPool, Stream=Stream, Event=Event,
        Memory=Memory, UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer,
        memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
        pinned_memory=types.SimpleNamespace(is_memory_pinned=is_memory_pinned),
        function=types.SimpleNamespace(Module=Module), runtime=runtime,
        driver=types.SimpleNamespace(launchKernel=launchKernel),
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1),
        get_current_stream=get_current_stream, using_allocator=using_allocator, Device=Device,
        ExternalStream=ExternalStream,
        get_elapsed_time=lambda s, e: float(e.t - s.t))
    cp.cublas_module = cublas
    return cp


# A ``cupy`` package for a subprocess (``python -c`` with this folder's parent on sys.path):
# ``FAKE_CUPY_BROKEN=load`` makes every module load fail, as a driver too old for the CUBIN.
PACKAGE_INIT = """
import os, sys
from tests.cuda import fake_cupy as _f
_cp = _f.make()
if os.environ.get("FAKE_CUPY_BROKEN") == "load":
    def _fail(self, image):
        raise RuntimeError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled "
                           "with an unsupported toolchain")
    _cp.cuda.function.Module.load = _fail
sys.modules["cupy_backends.cuda.libs.cublas"] = _cp.cublas_module
globals().update({k: v for k, v in vars(_cp).items() if not k.startswith("__")})
"""


def install(monkeypatch: Any, **kw: Any) -> types.ModuleType:
    """Put a stand-in cupy (and its cuBLAS module) into sys.modules for one test."""
    import sys

    cp = make(**kw)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", cp.cublas_module)
    return cp
