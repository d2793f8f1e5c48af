"""The device runtime on a real NVIDIA GPU through CuPy (imported lazily).

Every CuPy call here follows CuPy's reference documentation (docs.cupy.dev) and, where the
documentation is silent, its sources (cupy/cuda/memory.pyx, function.pyx, pinned_memory.pyx,
stream.pyx; cupy_backends/cuda/libs/cublas.pyx):
  memory: cupy.cuda.MemoryPool(allocator=) (malloc, free_all_blocks, used_bytes,
    total_bytes, set_limit(fraction=)); its allocator returns cupy.cuda.MemoryPointer(
    cupy.cuda.UnownedMemory(ptr, size, owner, device_id), 0) over a cupy.cuda.Memory(size)
    (one cudaMalloc per pool segment, counted by its owner); cupy.cuda.memory.OutOfMemoryError;
    cupy.cuda.PinnedMemoryPool (malloc) and pinned_memory.is_memory_pinned;
    cupy.cuda.runtime.memGetInfo;
  copies: cupy.cuda.MemoryPointer.copy_from_host_async / copy_to_host_async /
    copy_from_device_async(..., stream) with a ctypes.c_void_p host pointer, offsets via ``+``
    (never the synchronous forms: they run on the legacy stream, which does not wait for the
    non-blocking streams gt.cuda.Stream creates);
  kernels: cupy.cuda.function.Module().load(image) (a CUBIN or PTX from the project's own
    NVRTC step, binaries.py), Module.get_function(name), Function(grid, block, args,
    shared_mem=, stream=) (stream=None: the current stream; args: NumPy scalars by value),
    Function.ptr (the CUfunction) and cupy.cuda.driver.launchKernel(f, grid xyz, block xyz,
    shared_mem, stream_ptr, kernel_params, extra) (cupy_backends/cuda/api/driver.pyx: one
    cuLaunchKernel, no context check: CuPy's Function call establishes the thread's context,
    function.pyx ``_launch``);
  streams: cupy.cuda.Stream(non_blocking=True), Stream.null (the legacy default stream),
    get_current_stream, Stream.synchronize / done / wait_event; cupy.cuda.Event(block=,
    disable_timing=) / record / synchronize / done; cupy.cuda.get_elapsed_time;
  device: cupy.cuda.runtime.getDeviceCount, getDevice, setDevice (what cupy.cuda.Device's
    context manager calls, cupy/cuda/device.pyx), deviceSynchronize, driverGetVersion,
    getDeviceProperties (a dict with "name" (bytes), "totalGlobalMem", "multiProcessorCount",
    "major", "minor");
  arrays: cupy.ndarray(shape, dtype, memptr, strides) over a pool block, cupy.empty,
    cupy.cuda.using_allocator(malloc) (CuPy's allocations inside come from our pool),
    cupy.cuda.Device(index) as a context manager; the library namespaces cupy.fft,
    cupy.linalg, cupyx.scipy.linalg, cupyx.scipy.special (runtime.CUPY_LIBRARY);
  graphs: cupy.cuda.Stream.begin_capture() / end_capture() -> cupy.cuda.Graph,
    Graph.launch(stream), Stream.ptr (0 for the legacy default stream);
  BLAS: cupy.cuda.device.get_cublas_handle and cupy_backends.cuda.libs.cublas.
    gemmStridedBatchedEx (host-pointer alpha/beta; it sets the handle's stream to the
    current stream, and refuses a capturing stream: products inside a CUDA graph capture
    call the same libcublas through cublas_capture.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import arg_packing, binaries, cublas_capture, nvrtc
from .memstats import MemoryStats
from .runtime import (
    CAPTURE_ERROR,
    CUPY_LIBRARY,
    NULL,
    RUNTIME_METHODS,
    SCALAR_DTYPES,
    AllocationTable,
    ArrayLibrary,
    DeviceProperties,
    DevicePtr,
    OutOfMemoryError,
    Param,
    array_span,
    check_trans,
    gemm_op_shape,
    gemm_span,
    parse_kernels,
    scalar_value,
)


def _import_cupy() -> Any:
    return importlib.import_module("cupy")


def is_usable() -> tuple[bool, str]:
    """(True, "") when CuPy imports and sees a CUDA device; else (False, why not)."""
    try:
        cp = _import_cupy()
    except ImportError as exc:
        return False, f"CuPy is not installed ({exc})"
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, or the driver is too old
        return False, f"CUDA driver unavailable: {exc}"
    if count < 1:
        return False, "no CUDA device found"
    return True, ""


_PROBE = 'extern "C" __global__ void gt_probe(long long* out, long long v) { out[0] = v + 1; }\n'


def probe(rt: CupyRuntime) -> None:
    """Compile (the project's NVRTC step), load, launch and read back a trivial kernel: CUDA
    counts as available only when this works (a clear error says why not)."""
    from .device import NVRTC_OPTIONS

    module = rt.compile(_PROBE, "gt_probe", options=NVRTC_OPTIONS)
    out = rt.alloc(8)
    try:
        rt.launch(rt.get_kernel(module, "gt_probe"), 1, 1, 0, [out, 41])
        host = np.zeros(1, np.int64)
        rt.memcpy_dtoh(host, out)
    finally:
        rt.free(out)
    if int(host[0]) != 42:
        raise RuntimeError(f"the probe kernel returned {int(host[0])} instead of 42")


@dataclass(frozen=True)
class CupyModule:
    raw: Any                                 # cupy.cuda.function.Module (a loaded CUBIN/PTX)
    params: dict[str, tuple[Param, ...]]     # extern "C" kernels' parameters, from the source
    lowered_names: dict[str, str]            # name expression -> mangled symbol


@dataclass(frozen=True)
class CupyKernel:
    function: Any                    # cupy.RawKernel
    name: str
    params: tuple[Param, ...] | None  # None for template instantiations (name expressions)
    converters: tuple[Callable[[Any], Any], ...] | None = None  # one per param, built once
    convert: Callable[[Sequence[Any]], tuple] | None = None  # all of them in one call
    packed: PackedArgs | None = None  # the direct cuLaunchKernel path (see PackedArgs)


# ---- argument conversion, prepared once per kernel ---------------------------------------------
# RawKernel packs each argument by its own type: a NumPy scalar by its dtype, a Python int as a
# 64-bit integer and a Python float as a double (CuPy user guide, docs.cupy.dev/en/stable/
# user_guide/kernel.html, "Raw kernels"; ``_pointer`` in cupy/cuda/function.pyx does the
# packing), so every scalar becomes a NumPy scalar of its declared C type (a Python float
# would otherwise fill a ``float`` parameter with a double's bytes). A pointer
# goes as a np.uint64 address. Each parameter gets a converter closure when the kernel is
# fetched: a launch is a type test, a range test and a NumPy constructor per argument; anything
# outside that fast path goes through ``scalar_value``, which converts it or raises the same
# error the emulator raises.
# Python numbers are range-checked here; a NumPy scalar already of the declared type passes as
# is; anything else (other NumPy types, 0-d arrays, ...) takes the checked path.
_PY_INT = frozenset((int, bool))
_PY_REAL = frozenset((float, int))
_PY_BOOL = frozenset((bool,))
_NULL = np.uint64(0)
# CuPy's pool hands out multiples of 512 bytes (cupy/cuda/memory.pyx, ALLOCATION_UNIT_SIZE).
_POOL_UNIT = 512


# Pointer arguments repeat (the same buffers launch after launch): their np.uint64 forms are
# memoised, which costs a dict lookup instead of a NumPy scalar construction per pointer.
_POINTER_CACHE: dict[int, np.uint64] = {}
_POINTER_CACHE_MAX = 4096
_SCALAR_MEMO_MAX = 256


def _as_u64(address: int) -> np.uint64:
    v = _POINTER_CACHE.get(address)
    if v is None:
        if len(_POINTER_CACHE) >= _POINTER_CACHE_MAX:
            _POINTER_CACHE.clear()
        v = _POINTER_CACHE[address] = np.uint64(int(address))
    return v


def _pointer_converter(kernel: str, p: Param) -> Callable[[Any], Any]:
    def convert(a: Any) -> Any:
        if type(a) is DevicePtr:
            return _as_u64(a)
        if a is None:
            return _NULL
        if isinstance(a, DevicePtr):
            return _as_u64(int(a))
        raise TypeError(f"kernel '{kernel}', parameter '{p.name}' ({p.ctype}): expected a "
                        f"DevicePtr, got {type(a).__name__}")

    return convert


def _scalar_converter(kernel: str, p: Param) -> Callable[[Any], Any]:
    dtype = SCALAR_DTYPES.get(p.base)

    def checked(a: Any) -> Any:
        return scalar_value(kernel, p, a)

    if dtype is None or dtype.itemsize == 2 and dtype.kind not in "iu":
        return checked  # unsupported (scalar_value explains) or 16-bit float (bit pattern)
    exact = ctor = dtype.type
    if dtype == np.bool_:
        fast, lo, hi = _PY_BOOL, False, True
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        fast, lo, hi = _PY_INT, int(info.min), int(info.max)
    else:
        big = float(np.finfo(dtype).max)
        fast, lo, hi = _PY_REAL, -big, big  # NaN and inf fail the test: checked path

    # Launches repeat their scalars (sizes, alpha = 1, eps...): the NumPy scalar of a nonzero
    # value is memoised by (type, value) (zeros are not: 0.0 == -0.0), bounded in size.
    memo: dict[tuple[type, Any], Any] = {}

    def convert(a: Any) -> Any:
        t = type(a)
        if t is exact:
            return a
        if t in fast:
            v = memo.get((t, a))
            if v is not None:
                return v
            if lo <= a <= hi:
                v = ctor(a)
                if a and len(memo) < _SCALAR_MEMO_MAX:
                    memo[t, a] = v
                return v
        return checked(a)

    return convert


def converters(kernel: str, params: tuple[Param, ...]) -> tuple[Callable[[Any], Any], ...]:
    """One argument converter per parameter of ``kernel`` (see above)."""
    return tuple(_pointer_converter(kernel, p) if p.pointer else _scalar_converter(kernel, p)
                 for p in params)


def _arity_error(kernel: str, params: tuple[Param, ...], got: int) -> TypeError:
    return TypeError(f"kernel '{kernel}' takes {len(params)} arguments "
                     f"({', '.join(p.ctype + ' ' + p.name for p in params)}), got {got}")


def batch_converter(kernel: str, params: tuple[Param, ...],
                    convs: tuple[Callable[[Any], Any], ...]) -> Callable[[Sequence[Any]], tuple]:
    """One function converting a whole argument list with ``convs``, generated for this
    parameter list so a launch makes one call: a DevicePtr seen before costs one dict lookup,
    scalars call their converter. (Generated code sees only indices, never source text.)"""
    n = len(params)
    scope: dict[str, Any] = {"_DP": DevicePtr, "_get": _POINTER_CACHE.get, "_n": n,
                             "_arity": lambda got: _arity_error(kernel, params, got)}
    items = []
    for i, (p, c) in enumerate(zip(params, convs, strict=True)):
        scope[f"_c{i}"] = c
        items.append(f"(type(a{i}) is _DP and _get(a{i})) or _c{i}(a{i})" if p.pointer
                     else f"_c{i}(a{i})")
    names = "".join(f"a{i}, " for i in range(n))
    code = ("def convert(args):\n"
            "    if len(args) != _n:\n"
            "        raise _arity(len(args))\n"
            + (f"    ({names}) = args\n" if n else "")
            + f"    return ({''.join(item + ', ' for item in items)})\n")
    exec(code, scope)  # noqa: S102 - generated from the parameter count only
    return scope["convert"]


def _kernel_args(kernel: CupyKernel, args: Sequence[Any]) -> tuple:
    """Arguments as CuPy must receive them (see ``converters``); a template instantiation
    (no parsed parameter list) passes pointers as uint64 and everything else unchanged."""
    convert = kernel.convert
    if convert is None:
        return tuple(np.uint64(int(a)) if isinstance(a, DevicePtr) else
                     (_NULL if a is None else a) for a in args)
    return convert(args)


# ---- the direct launch: arguments packed into one parameter buffer ------------------------------
# CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END (cuda.h): ``extra`` names one buffer holding the
# kernel's parameters in the ABI's layout.
_BUFFER_POINTER, _BUFFER_SIZE, _END = 1, 2, 0


class PackedArgs:
    """A kernel's arguments as one CUDA parameter buffer (arg_packing.py) for
    ``cuLaunchKernel``'s ``extra``. CuPy's Function call wraps every argument in a CScalar /
    CPointer object: 10.4 us for six arguments on an H200's host, against 5.3 us for the
    driver's launch itself and 0.8 us for the pack (measured). The buffer is the kernel's, so
    only the thread that owns it packs into it (the driver reads it with the GIL released):
    ``owner`` is the first thread that launched the kernel through CuPy's Function, which
    also made sure that thread has a CUDA context; any other thread keeps using Function."""

    __slots__ = ("fill", "fptr", "extra_ptr", "owner", "_keep")

    def __init__(self, kernel: str, params: tuple[Param, ...], fptr: int,
                 convert: Callable[[Sequence[Any]], tuple]) -> None:
        fast = struct.Struct(arg_packing.cuda_format(params, exact=False))
        exact = struct.Struct(arg_packing.cuda_format(params, exact=True))
        buf = np.zeros(exact.size, np.uint8)
        size = np.array([exact.size], np.uint64)  # a size_t the driver reads
        extra = np.array([_BUFFER_POINTER, buf.ctypes.data, _BUFFER_SIZE, size.ctypes.data,
                          _END], np.uint64)
        self._keep = (buf, size, extra)
        self.fptr, self.extra_ptr, self.owner = int(fptr), int(extra.ctypes.data), None
        self.fill = _filler(kernel, params, buf, fast.pack_into, exact.pack_into, convert)


def packed_values(params: tuple[Param, ...], raw: bytes) -> tuple:
    """The values a parameter buffer holds (what the kernel receives) as NumPy scalars of the
    parameters' types (16-bit floats as their bit patterns): for tests, against a stand-in
    driver's log."""
    kinds = [np.dtype(np.uint64) if p.pointer else SCALAR_DTYPES[p.base] for p in params]
    kinds = [np.dtype(np.uint16) if d.itemsize == 2 and d.kind not in "iu" else d
             for d in kinds]
    values = struct.unpack(arg_packing.cuda_format(params, exact=True), raw)
    return tuple(d.type(v) for d, v in zip(kinds, values, strict=True))


def _filler(kernel: str, params: tuple[Param, ...], buf: np.ndarray, fast: Callable[..., None],
            exact: Callable[..., None], convert: Callable[[Sequence[Any]], tuple]
            ) -> Callable[[Sequence[Any]], None]:
    """``fill(args)``: pack a launch's arguments into ``buf``, generated for this parameter
    list. Pointers take a DevicePtr or None (null), scalars the types arg_packing lets struct
    pack directly; anything else, or a value struct refuses (out of range), goes through
    ``convert`` (the checked converters: NumPy scalars, or the precise error).
    (Generated code sees only indices, never source text.)"""
    n = len(params)
    scope: dict[str, Any] = {"_DP": DevicePtr, "_n": n, "_buf": buf, "_fast": fast,
                             "_exact": exact, "_convert": convert, "_SE": struct.error,
                             "_arity": lambda got: _arity_error(kernel, params, got)}
    tests, values = [], []
    for i, p in enumerate(params):
        if p.pointer:
            tests.append(f"(type(a{i}) is _DP or a{i} is None)")
            values.append(f"a{i} or 0")
        else:
            scope[f"_t{i}"] = arg_packing.fast_scalar_types(p)
            tests.append(f"type(a{i}) in _t{i}")
            values.append(f"a{i}")
    names = "".join(f"a{i}, " for i in range(n))
    code = ("def fill(args):\n"
            "    if len(args) != _n:\n"
            "        raise _arity(len(args))\n"
            f"    ({names}) = args\n"
            f"    if {' and '.join(tests)}:\n"
            "        try:\n"
            f"            _fast(_buf, 0, {', '.join(values)})\n"
            "            return\n"
            "        except (_SE, OverflowError):\n"
            "            pass\n"
            "    _exact(_buf, 0, *_convert(args))\n")
    exec(code, scope)  # noqa: S102 - generated from the parameter count and kinds only
    return scope["fill"]


_get_ident = threading.get_ident


def _dim3(dims: Sequence[int]) -> tuple[int, int, int]:
    """A grid or block of 1-3 dims as three, each at least 1 (as CuPy's Function call)."""
    d = (*dims, 1, 1)
    return max(1, int(d[0])), max(1, int(d[1])), max(1, int(d[2]))


def _host_ptr(arr: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(arr.ctypes.data)


class _Watch:
    """Objects kept alive until the stream work recorded before an event completes (pinned
    host buffers of async copies, device blocks a side stream still uses): CuPy's own
    watch-list model (``cupy/cuda/pinned_memory.pyx``, ``_add_to_watch_list``)."""

    def __init__(self) -> None:
        self.items: deque[tuple[Any, Any]] = deque()

    def add(self, event: Any, obj: Any) -> None:
        self.items.append((event, obj))

    def release_finished(self) -> None:
        items = self.items
        while items and items[0][0].done:
            items.popleft()

    def release_all(self) -> None:
        """Wait for every watched event, then drop what it kept (a device-wide sync)."""
        while self.items:
            event, _ = self.items.popleft()
            event.synchronize()


class _StagingRing:
    """Page-locked host memory for small uploads (kernel shapes and strides), reused as a ring
    of chunks: a slice is written by the host, then copied by a queued async copy, so a chunk
    is reused only after an event recorded behind its copies (on each stream that had one)
    has completed; that is long done in practice, so an upload costs one memcpy and one
    cudaMemcpyAsync, and no allocation, pointer query or event of its own."""

    CHUNK = 64 * 1024
    CHUNKS = 16

    def __init__(self, rt: CupyRuntime) -> None:
        self.rt = rt
        self.buf = rt.alloc_host(self.CHUNK * self.CHUNKS)
        self.address = self.buf.ctypes.data
        self.events: list[list[Any]] = [[] for _ in range(self.CHUNKS)]
        self.streams: list[Any] = []  # streams with copies out of the current chunk
        self.chunk = 0
        self.offset = 0
        self.lock = threading.Lock()

    def copy(self, mem: Any, data: np.ndarray, stream: Any) -> bool:
        """Queue ``data`` (uint8, at most CHUNK bytes) to device memory ``mem`` on ``stream``
        through the ring; False when it does not fit a chunk."""
        n = data.nbytes
        if n > self.CHUNK:
            return False
        with self.lock:
            if self.offset + n > self.CHUNK:
                self._next_chunk()
            start = self.chunk * self.CHUNK + self.offset
            self.offset += (n + 15) & ~15
            if all(stream is not s for s in self.streams):
                self.streams.append(stream)
            self.buf[start:start + n] = data
            mem.copy_from_host_async(ctypes.c_void_p(self.address + start), n, stream)
        return True

    def _next_chunk(self) -> None:
        cuda = self.rt.cp.cuda
        for s in self.streams:  # behind every copy out of the chunk being left
            ev = cuda.Event(block=False, disable_timing=True)
            ev.record(s)
            self.events[self.chunk].append(ev)
        self.streams = []
        self.chunk = (self.chunk + 1) % self.CHUNKS
        for ev in self.events[self.chunk]:  # its copies were queued a whole ring ago
            if not ev.done:
                ev.synchronize()
        self.events[self.chunk] = []
        self.offset = 0


def all_devices() -> list[CupyRuntime]:
    """One runtime per GPU CuPy sees (``CUDA_VISIBLE_DEVICES`` chooses which)."""
    count = int(_import_cupy().cuda.runtime.getDeviceCount())
    return [CupyRuntime(i) for i in range(count)]


def _bind_to_device(rt: CupyRuntime) -> None:
    """On a machine with several GPUs, every interface method of ``rt`` runs with its device
    current (CUDA allocates, launches, creates streams and events, and picks the cuBLAS
    handle and CuPy's current stream on the current device), and restores the previous one:
    what ``with cupy.cuda.Device(i):`` does, without its per-call object."""
    api = rt.cp.cuda.runtime
    index = rt.device_index

    def bind(method: Callable[..., Any]) -> Callable[..., Any]:
        def on_device(*args: Any, **kwargs: Any) -> Any:
            prev = api.getDevice()
            if prev == index:
                return method(*args, **kwargs)
            api.setDevice(index)
            try:
                return method(*args, **kwargs)
            finally:
                api.setDevice(prev)
        on_device.__name__ = method.__name__
        return on_device

    for name in RUNTIME_METHODS:
        if name not in ("make_current", "array_library"):  # the scope enters its device
            setattr(rt, name, bind(getattr(rt, name)))


class _Capture:
    """An open capture: its stream, the blocks freed meanwhile (the graph may use them) and
    the buffers its copy nodes read."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.kept: list[Any] = []
        self.held: list[Any] = []


class CupyGraph:
    """A captured ``cupy.cuda.Graph`` with the memory its work uses."""

    def __init__(self, runtime: Any, graph: Any, capture: _Capture) -> None:
        self.runtime, self.graph, self.capture = runtime, graph, capture

    def launch(self, stream: Any = None) -> None:
        if self.graph is None:
            raise RuntimeError("CUDA graph: launch() after release()")
        self.graph.launch(self.runtime._stream(stream))

    def release(self) -> None:
        self.graph, self.capture = None, None  # the kept blocks return to the pool


class CupyRuntime:
    """The device runtime on CuPy (see runtime.py for the interface) for GPU ``index``.

    ``stream=None`` in a copy or launch means CuPy's current stream (the one ``gt.cuda.stream``
    entered, else the default stream), never the legacy stream behind it: a host read waits
    for exactly the work queued before it on the stream it belongs to."""

    name = "cupy"
    is_emulated = False
    synchronous_launches = False  # launches and copies are queued; the GPU runs them later

    def __init__(self, index: int = 0) -> None:
        self.cp = _import_cupy()
        self.device_index = int(index)
        self.stats = MemoryStats()
        self.pool = self.cp.cuda.MemoryPool(allocator=self._device_malloc)
        self.pinned_pool = self.cp.cuda.PinnedMemoryPool()
        self._table = AllocationTable()  # address -> cupy MemoryPointer (keeps the block alive)
        self._segments: dict[int, int] = {}  # base -> size of each cudaMalloc'd pool segment
        self._watch = _Watch()
        # A tensor's block is freed by a GC finalizer, which can run inside alloc/free (any
        # allocation may start a GC pass): such a free waits in ``_deferred``.
        self._in_pool = False
        self._deferred: list[tuple[int, Sequence[Any]]] = []
        self._oom = self.cp.cuda.memory.OutOfMemoryError
        # PackedArgs' direct launch (None if this CuPy has no driver module: Function calls)
        self._launch_kernel = getattr(getattr(self.cp.cuda, "driver", None), "launchKernel",
                                      None)
        self._current_stream = self.cp.cuda.get_current_stream
        self._capability: tuple[int, int] | None = None
        self._binary_arch: str | None = None
        driver = int(self.cp.cuda.runtime.driverGetVersion())  # e.g. 13000 for CUDA 13.0
        nvrtc.prefer_major(driver // 1000)  # cubins the driver can load
        self._capture: _Capture | None = None  # an open CUDA graph capture
        # products inside a capture (cublas_capture.py): made before the first capture
        self._capture_blas: cublas_capture.CaptureBlas | None = None
        self._capture_blas_tried = False
        self._several = self.cp.cuda.runtime.getDeviceCount() > 1
        if self._several:
            _bind_to_device(self)  # one GPU: the current device is always this one

    # -- memory ------------------------------------------------------------------------------
    def _device_malloc(self, nbytes: int) -> Any:
        """The pool's source of device memory: one cudaMalloc per segment, counted."""
        cuda = self.cp.cuda
        mem = cuda.Memory(nbytes)
        seg = _Segment(mem, nbytes, self.stats, self._segments)
        return cuda.MemoryPointer(cuda.UnownedMemory(mem.ptr, nbytes, seg, mem.device_id), 0)

    def malloc(self, nbytes: int) -> Any:
        """A block of the project's pool as a cupy MemoryPointer: what ``alloc`` hands to
        tensors. Nothing else of the project allocates through CuPy (the raw cuBLAS call takes
        no CuPy memory; wrap a future CuPy call that does in ``cp.cuda.using_allocator(
        self.malloc)``), so there is one pool, one set of statistics and one OOM path."""
        if self._watch.items:
            self._watch.release_finished()
        try:
            return self.pool.malloc(nbytes)
        except self._oom:
            return self._malloc_retry(nbytes)

    def _malloc_retry(self, nbytes: int) -> Any:
        """After an OOM: wait for watched blocks, release the cached ones, retry once."""
        self.stats.event("num_alloc_retries")
        self._watch.release_all()
        self.pool.free_all_blocks()
        try:
            return self.pool.malloc(nbytes)
        except self._oom:
            self.stats.event("num_ooms")
            raise OutOfMemoryError(
                f"CUDA out of memory: tried to allocate {nbytes} bytes; "
                f"{self.pool.used_bytes()} bytes in use, {self.pool.total_bytes()} "
                f"reserved") from None

    # alloc and free run once per tensor: straight-line code, helpers only off the hot path.
    def alloc(self, nbytes: int, stream: Any = None) -> DevicePtr:
        if nbytes == 0:
            return NULL
        self._in_pool = True
        try:
            if self._watch.items:
                self._watch.release_finished()
            try:  # ``malloc``, inlined: this runs once per tensor
                mem = self.pool.malloc(nbytes)
            except self._oom:
                mem = self._malloc_retry(nbytes)
            address = mem.ptr
            self._table.add(address, nbytes, mem)
            self.stats.block(nbytes, -(-nbytes // _POOL_UNIT) * _POOL_UNIT, +1)
        finally:
            self._in_pool = False
            if self._deferred:
                self._drain_deferred()
        return DevicePtr(address)

    def free(self, ptr: int, streams: Sequence[Any] = ()) -> None:
        """Return a block to the pool; with ``streams`` (``record_stream``), only once the
        work those streams queued so far has completed."""
        if not ptr:
            return
        if self._in_pool:  # called by a finalizer inside alloc/free: free it afterwards
            self._deferred.append((int(ptr), streams))
            return
        self._in_pool = True
        try:
            if streams:
                self._free_now(ptr, streams)
            else:  # ``_free_now`` without streams, inlined: this runs once per tensor
                nbytes, mem = self._table.pop(ptr)
                self.stats.block(nbytes, -(-nbytes // _POOL_UNIT) * _POOL_UNIT, -1)
                if self._capture is not None:  # a graph being captured may use it
                    self._capture.kept.append(mem)
        finally:
            self._in_pool = False
            if self._deferred:
                self._drain_deferred()

    def _free_now(self, ptr: int, streams: Sequence[Any]) -> None:
        nbytes, mem = self._table.pop(ptr)
        self.stats.block(nbytes, -(-nbytes // _POOL_UNIT) * _POOL_UNIT, -1)
        for s in streams:  # dropping ``mem`` is what returns the block to the pool
            ev = self.cp.cuda.Event(block=False, disable_timing=True)
            ev.record(s)
            self._watch.add(ev, mem)

    def _drain_deferred(self) -> None:
        while self._deferred:
            self._in_pool = True
            try:
                self._free_now(*self._deferred.pop())
            finally:
                self._in_pool = False

    def alloc_host(self, nbytes: int) -> np.ndarray:
        """Pinned host memory (what async copies need: pageable memory makes them sync)."""
        self._watch.release_finished()
        if nbytes == 0:
            return np.empty(0, np.uint8)
        mem = self.pinned_pool.malloc(nbytes)
        return np.frombuffer(mem, np.uint8, nbytes)  # the array keeps ``mem`` alive

    def _is_pinned(self, host: np.ndarray) -> bool:
        """Whether ``host`` lives in page-locked memory (the driver's own answer)."""
        if not host.nbytes:
            return False
        return bool(self.cp.cuda.pinned_memory.is_memory_pinned(host.ctypes.data))

    def _mem(self, ptr: int, nbytes: int) -> Any:
        base, mem, off = self._table.lookup(ptr, nbytes)
        return mem + off if off else mem

    def as_array(self, ptr: int, shape: Sequence[int], strides: Sequence[int],
                 dtype: Any) -> Any:
        """A cupy.ndarray over a block of the pool (no copy): ``cupy.ndarray(shape, dtype,
        memptr, strides)`` with a MemoryPointer into the block (the address table checks the
        span lies inside it); the array keeps the block's MemoryPointer alive."""
        dtype = np.dtype(dtype)
        span = array_span(shape, strides, dtype.itemsize)
        if not span:
            return self.cp.empty(tuple(shape), dtype)
        return self.cp.ndarray(tuple(shape), dtype, self._mem(int(ptr), span), tuple(strides))

    @contextlib.contextmanager
    def array_library(self) -> Iterator[ArrayLibrary]:
        """CuPy's namespaces, with CuPy's own allocations taken from this runtime's pool
        (``cupy.cuda.using_allocator``, so there stays one pool) on this runtime's device.
        CuPy queues work on its current stream, which is the one gt.cuda.stream entered."""
        if self._capture is not None:
            raise RuntimeError(CAPTURE_ERROR.format(what="a CuPy library call"))
        with self.cp.cuda.Device(self.device_index), self.cp.cuda.using_allocator(self.malloc):
            yield CUPY_LIBRARY

    # -- graphs ------------------------------------------------------------------------------
    @property
    def capturing(self) -> bool:
        return self._capture is not None

    def begin_capture(self) -> None:
        """Capture the current stream's work (``Stream.begin_capture``, global mode): a
        side stream, as PyTorch requires; the legacy default stream cannot be captured."""
        if self._capture is not None:
            raise RuntimeError(CAPTURE_ERROR.format(what="begin_capture"))
        stream = self.cp.cuda.get_current_stream()
        if stream.ptr == 0:
            raise RuntimeError("CUDA graphs are captured on a side stream: use gt.cuda.graph"
                               "(...) or enter a gt.cuda.Stream (the default stream cannot "
                               "be captured)")
        self._prepare_capture_blas()  # allocates: never while the stream is captured
        stream.begin_capture()
        self._capture = _Capture(stream)

    def _prepare_capture_blas(self) -> None:
        if self._capture_blas_tried:
            return
        self._capture_blas_tried = True
        self.cp.cuda.device.get_cublas_handle()  # CuPy's own handle: libcublas is loaded
        lib = cublas_capture.load_library()
        if lib is None:
            return
        workspace = self.alloc(cublas_capture.WORKSPACE_BYTES)
        self._capture_blas = cublas_capture.CaptureBlas(lib, int(workspace))
        self._capture_blas_workspace = workspace  # freed with the runtime, never before

    @property
    def blas_captures(self) -> bool:
        """Whether products on a capturing stream go to cuBLAS (else: the tiled kernel)."""
        return self._capture_blas is not None

    def end_capture(self) -> CupyGraph:
        cap = self._capture
        if cap is None:
            raise RuntimeError("end_capture(): no capture is open on this device")
        self._capture = None
        return CupyGraph(self, cap.stream.end_capture(), cap)

    def hold(self, obj: Any) -> None:
        if self._capture is not None:
            self._capture.held.append(obj)

    def _stream(self, stream: Any) -> Any:
        return self.cp.cuda.get_current_stream() if stream is None else stream

    def _keep_until_done(self, host: np.ndarray, stream: Any) -> None:
        """A pinned buffer read or written by a queued copy stays alive until the copy ran
        (pageable buffers are staged by the driver before the call returns)."""
        if self._is_pinned(host):
            ev = self.cp.cuda.Event(block=False, disable_timing=True)
            ev.record(stream)
            self._watch.add(ev, host)

    # -- copies ------------------------------------------------------------------------------
    def memcpy_htod(self, dst: int, host: np.ndarray, stream: Any = None) -> None:
        """Queued on ``stream`` (None: the current stream). During a capture the bytes are
        staged in pinned memory the graph keeps (its copy node reads them on each replay)."""
        host = np.ascontiguousarray(host)
        mem = self._mem(dst, host.nbytes)
        s = self._stream(stream)
        if self._capture is not None:
            # CuPy's copy_from_host_async refuses capturing streams; a copy from pinned memory
            # is capturable, so the bytes go through cudaMemcpyAsync from a pinned buffer
            staged = self.alloc_host(host.nbytes)
            staged[...] = host.reshape(-1).view(np.uint8)
            self._capture.held.append(staged)
            self.cp.cuda.runtime.memcpyAsync(mem.ptr, staged.ctypes.data, host.nbytes,
                                             _MEMCPY_HOST_TO_DEVICE, s.ptr)
            return
        mem.copy_from_host_async(_host_ptr(host), host.nbytes, s)
        self._keep_until_done(host, s)

    def upload(self, dst: int, host: np.ndarray, stream: Any = None) -> None:
        """A small host-to-device copy queued on ``stream`` (None: the current stream) that
        never waits for the GPU: staged through the pinned ring (kernel metadata)."""
        data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        if self._capture is not None:
            self.memcpy_htod(dst, data, stream)
            return
        ring = self.__dict__.get("_ring")
        if ring is None:
            ring = self._ring = _StagingRing(self)
        if not ring.copy(self._mem(dst, data.nbytes), data, self._stream(stream)):
            staged = self.alloc_host(data.nbytes)
            staged[...] = data
            self.memcpy_htod(dst, staged, stream)

    def memcpy_dtoh(self, host_out: np.ndarray, src: int, stream: Any = None) -> None:
        """With ``stream``: queued on it (``host_out`` is filled once it ran). None: a host
        read, ordered after the current stream's work and complete when this returns."""
        if self._capture is not None:
            raise RuntimeError(CAPTURE_ERROR.format(what="a device-to-host copy"))
        mem = self._mem(src, host_out.nbytes)
        s = self._stream(stream)
        mem.copy_to_host_async(_host_ptr(host_out), host_out.nbytes, s)
        if stream is None:
            s.synchronize()
        else:
            self._keep_until_done(host_out, s)

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        d, s = self._mem(dst, nbytes), self._mem(src, nbytes)
        d.copy_from_device_async(s, nbytes, self._stream(stream))

    # -- kernels -----------------------------------------------------------------------------
    def capability(self) -> tuple[int, int]:
        if self._capability is None:
            p = self.properties(self.device_index)
            self._capability = (p.major, p.minor)
        return self._capability

    def binary_arch(self) -> str:
        """What the project's NVRTC builds for this device: ``sm_XY`` or ``compute_XY``."""
        if self._binary_arch is None:
            self._binary_arch = nvrtc.arch_for(self.capability())
        return self._binary_arch

    def compile(self, source: str, name: str, options: Sequence[str] = (),
                name_expressions: Sequence[str] = ()) -> CupyModule:
        """Build with the project's NVRTC step (binaries.py: its options, its cache key over
        every included byte) and load the CUBIN/PTX into the current device's context."""
        binary = binaries.build(source, name, self.binary_arch(), options, name_expressions)
        module = self.cp.cuda.function.Module()
        module.load(binary.image)
        return CupyModule(module, parse_kernels(source), binary.lowered_names)

    def get_kernel(self, module: CupyModule, name: str) -> CupyKernel:
        params = module.params.get(name)
        symbol = module.lowered_names.get(name, name)
        if params is None:
            return CupyKernel(module.raw.get_function(symbol), name, None)
        convs = converters(name, params)
        convert = batch_converter(name, params, convs)
        function = module.raw.get_function(symbol)
        packed = None
        if params and self._launch_kernel is not None:
            packed = PackedArgs(name, params, function.ptr, convert)
        return CupyKernel(function, name, params, convs, convert, packed)

    def launch(self, kernel: CupyKernel, grid: int | Sequence[int], block: int | Sequence[int],
               shared_bytes: int, args: Sequence[Any], stream: Any = None) -> None:
        pk = kernel.packed
        if pk is not None and pk.owner == _get_ident():  # PackedArgs: cuLaunchKernel directly
            pk.fill(args)
            gx, gy, gz = (grid if grid > 0 else 1, 1, 1) if type(grid) is int else _dim3(grid)
            bx, by, bz = (block, 1, 1) if type(block) is int else _dim3(block)
            # stream=None: the current stream (the one gt.cuda.stream entered)
            self._launch_kernel(pk.fptr, gx, gy, gz, bx, by, bz, shared_bytes,
                                (self._current_stream() if stream is None else stream).ptr, 0,
                                pk.extra_ptr)
            return
        cargs = _kernel_args(kernel, args)
        grid = (grid,) if type(grid) is int else tuple(grid)
        block = (block,) if type(block) is int else tuple(block)
        # stream=None: CuPy launches on its current stream (the one gt.cuda.stream entered)
        kernel.function(grid, block, cargs, shared_mem=shared_bytes, stream=stream)
        if pk is not None and pk.owner is None:
            pk.owner = _get_ident()

    def kernel_addresses(self, ptrs: Sequence[int]) -> list[int]:
        """Device pointers as a kernel reads them from a pointer table: unchanged on a GPU."""
        return [int(p) for p in ptrs]

    def launcher(self, kernel: CupyKernel, block: int) -> Callable[[int, Sequence[Any]], None]:
        """``launch`` of one kernel with ``block`` threads on the current stream, without the
        per-call argument dispatch (the generated elementwise kernels' path)."""
        function, convert, threads = kernel.function, kernel.convert, (block,)
        pk = kernel.packed
        if pk is not None:
            launch, current, fill = self._launch_kernel, self._current_stream, pk.fill
            fptr, extra = pk.fptr, pk.extra_ptr

            def go(grid: int, args: Sequence[Any]) -> None:
                if pk.owner == _get_ident():
                    fill(args)
                    launch(fptr, grid, 1, 1, block, 1, 1, 0, current().ptr, 0, extra)
                    return
                function((grid,), threads, convert(args), 0, None)
                if pk.owner is None:
                    pk.owner = _get_ident()
        elif convert is None:
            def go(grid: int, args: Sequence[Any]) -> None:
                function((grid,), threads, _kernel_args(kernel, args), 0, None)
        else:
            def go(grid: int, args: Sequence[Any]) -> None:
                function((grid,), threads, convert(args), 0, None)
        return go

    # -- streams and events ------------------------------------------------------------------
    def create_stream(self) -> Any:
        return self.cp.cuda.Stream(non_blocking=True)  # on the current (this) device

    def default_stream(self) -> Any:
        """The device's default stream: CuPy's null stream (the legacy stream, handle 0)."""
        return self.cp.cuda.Stream.null

    def current_stream(self) -> Any:
        """CuPy's current stream: where a launch or copy with ``stream=None`` goes."""
        return self.cp.cuda.get_current_stream()

    def create_event(self) -> Any:
        return self.cp.cuda.Event()

    # -- IPC (cudaIpcGetMemHandle works on whole cudaMalloc allocations: a pool block is
    # exported as its segment's handle plus its offset in the segment) -----------------------
    def ipc_export(self, ptr: int) -> tuple[Any, int]:
        if self._capture is not None:
            raise RuntimeError(CAPTURE_ERROR.format(what="ipc_export"))
        ptr = int(ptr)
        base = next((b for b, n in self._segments.items() if b <= ptr < b + n), None)
        if base is None:
            raise RuntimeError(f"cannot share device memory at {DevicePtr(ptr)!r}: it is not "
                               f"in this runtime's memory pool")
        self.cp.cuda.get_current_stream().synchronize()
        handle = self.cp.cuda.runtime.ipcGetMemHandle(base)
        return (bytes(handle), self._segments[base]), ptr - base

    def ipc_open(self, handle: Any) -> DevicePtr:
        raw, size = handle
        ptr = int(self.cp.cuda.runtime.ipcOpenMemHandle(raw))
        cuda = self.cp.cuda
        # Registered like a pool block, so copies and launches find it; the runtime owns it.
        mem = cuda.MemoryPointer(cuda.UnownedMemory(ptr, size, self, self.device_index), 0)
        self._table.add(ptr, size, mem)
        return DevicePtr(ptr)

    def ipc_close(self, ptr: int) -> None:
        self._table.pop(ptr)
        self.cp.cuda.runtime.ipcCloseMemHandle(int(ptr))

    # -- other libraries' memory (DLPack, the CUDA array interface) and streams --------------
    def adopt_external(self, ptr: int, nbytes: int) -> bool:
        try:
            self._table.lookup(ptr, nbytes)
            return False  # inside a live block of this pool
        except IndexError:
            pass  # not ours (or where a block of ours was once): register it
        cuda = self.cp.cuda
        size = max(int(nbytes), 1)
        mem = cuda.MemoryPointer(cuda.UnownedMemory(int(ptr), size, self, self.device_index), 0)
        self._table.add(int(ptr), size, mem)
        return True

    def drop_external(self, ptr: int) -> None:
        self._table.pop(int(ptr))

    def external_stream(self, handle: int) -> Any:
        return self.cp.cuda.ExternalStream(int(handle), self.device_index)

    def elapsed_time(self, start: Any, end: Any) -> float:
        return float(self.cp.cuda.get_elapsed_time(start, end))

    def synchronize(self) -> None:
        if self._capture is not None:
            raise RuntimeError(CAPTURE_ERROR.format(what="synchronize()"))
        self.cp.cuda.runtime.deviceSynchronize()
        self._watch.release_finished()

    # -- statistics --------------------------------------------------------------------------
    def memory_allocated(self) -> int:
        return self.stats.current("allocated_bytes")

    def memory_reserved(self) -> int:
        return int(self.pool.total_bytes())

    def max_memory_allocated(self) -> int:
        return self.stats.peak("allocated_bytes")

    def max_memory_reserved(self) -> int:
        return self.stats.peak("reserved_bytes")

    def reset_peak_memory_stats(self) -> None:
        self.stats.reset_peaks()

    def memory_stats(self) -> dict[str, int]:
        return self.stats.as_dict()

    def empty_cache(self) -> None:
        self._watch.release_finished()
        self.pool.free_all_blocks()

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) bytes of the device, as the driver reports them."""
        free, total = self.cp.cuda.runtime.memGetInfo()
        return int(free), int(total)

    def set_memory_fraction(self, fraction: float) -> None:
        """Cap the pool at ``fraction`` of the device's memory (allocations past it raise
        OutOfMemoryError after the usual cache release and retry)."""
        self.pool.set_limit(fraction=float(fraction))

    # -- device ------------------------------------------------------------------------------
    def device_count(self) -> int:
        return int(self.cp.cuda.runtime.getDeviceCount())

    def make_current(self) -> None:
        """CUDA's current device := this one (``cudaSetDevice``), for raw stream and event
        calls made outside this runtime's methods."""
        if self._several:
            self.cp.cuda.runtime.setDevice(self.device_index)

    def properties(self, index: int = 0) -> DeviceProperties:
        p = self.cp.cuda.runtime.getDeviceProperties(index)
        name = p["name"]
        return DeviceProperties(name.decode() if isinstance(name, bytes) else str(name),
                                int(p["totalGlobalMem"]), int(p["multiProcessorCount"]),
                                int(p["major"]), int(p["minor"]))

    # -- BLAS --------------------------------------------------------------------------------
    def gemm(self, transa: str, transb: str, m: int, n: int, k: int, alpha: Any, a: int,
             lda: int, b: int, ldb: int, beta: Any, c: int, ldc: int, dtype: Any, *,
             batch: int = 1, stride_a: int = 0, stride_b: int = 0, stride_c: int = 0,
             allow_tf32: bool = False) -> None:
        """One cuBLAS ``cublasGemmStridedBatchedEx`` call on the current stream (see
        runtime.py); 16-bit floats accumulate in float32, float32 uses TF32 tensor cores
        only when ``allow_tf32``. Every operand's last batch must lie inside its allocation."""
        run = self.gemm_plan(transa, transb, m, n, k, lda, ldb, ldc, dtype, batch=batch,
                             stride_a=stride_a, stride_b=stride_b, stride_c=stride_c,
                             allow_tf32=allow_tf32)
        if m == 0 or n == 0 or batch == 0:
            return
        isz = np.dtype(dtype).itemsize
        for what, p, trans, r, cc, ld, st in (("A", a, transa, m, k, lda, stride_a),
                                              ("B", b, transb, k, n, ldb, stride_b),
                                              ("C", c, "N", m, n, ldc, stride_c)):
            span = gemm_span(trans, r, cc, ld, batch, st)
            if span or what == "C":
                self._mem(p, span * isz)
        run(alpha, int(a), int(b), beta, int(c))

    def gemm_plan(self, transa: str, transb: str, m: int, n: int, k: int, lda: int, ldb: int,
                  ldc: int, dtype: Any, *, batch: int = 1, stride_a: int = 0,
                  stride_b: int = 0, stride_c: int = 0,
                  allow_tf32: bool = False) -> Callable[[Any, int, int, Any, int], None]:
        """``gemm``'s arguments checked and converted once; ``run(alpha, a, b, beta, c)``
        makes only the cuBLAS call (the caller keeps the operands inside their buffers)."""
        dt = np.dtype(dtype)
        ta, tb = check_trans(transa), check_trans(transb)
        spec = _CUBLAS_BY_DTYPE.get(dt)
        if spec is None:
            raise TypeError(f"gemm: cuBLAS path does not take {dt}")
        data_type, compute, scale = spec
        if allow_tf32 and compute == _COMPUTE_32F and data_type == _CUDA_R_32F:
            compute = _COMPUTE_32F_FAST_TF32
        for what, r, ld in (("a", gemm_op_shape(ta, m, k)[0], lda),
                            ("b", gemm_op_shape(tb, k, n)[0], ldb), ("c", m, ldc)):
            if ld < max(1, r):
                raise ValueError(f"gemm: ld{what}={ld} is smaller than its {r} rows")
        if m == 0 or n == 0 or batch == 0:
            return _no_gemm
        call = self._cublas().gemmStridedBatchedEx
        handle = self.cp.cuda.device.get_cublas_handle  # the current device's
        opa, opb, scalars = _OPS[ta], _OPS[tb], _HOST_SCALARS
        scalar_of = _host_scalar

        rt = self

        def run(alpha: Any, a: int, b: int, beta: Any, c: int) -> None:
            al = scalars.get((scale, type(alpha), alpha)) or scalar_of(alpha, scale)
            be = scalars.get((scale, type(beta), beta)) or scalar_of(beta, scale)
            if rt._capture is not None and rt._capture_blas is not None:
                # CuPy's wrapper would refuse the capturing stream (cublas_capture.py)
                rt._capture_blas.gemm(rt._current_stream().ptr, opa, opb, m, n, k, al[1], a,
                                      data_type, lda, stride_a, b, data_type, ldb, stride_b,
                                      be[1], c, data_type, ldc, stride_c, batch, compute,
                                      _GEMM_DEFAULT)
                rt._capture.held.append(al[0])  # read when the call is made: kept regardless
                rt._capture.held.append(be[0])
                return
            call(handle(), opa, opb, m, n, k, al[1], a, data_type, lda, stride_a, b, data_type,
                 ldb, stride_b, be[1], c, data_type, ldc, stride_c, batch, compute,
                 _GEMM_DEFAULT)

        return run

    def _cublas(self) -> Any:
        mod = self.__dict__.get("_cublas_module")
        if mod is None:
            mod = self._cublas_module = importlib.import_module("cupy_backends.cuda.libs.cublas")
        return mod


class _Segment:
    """Owner of one cudaMalloc'd segment of the pool: counts it in (and lists it in
    ``segments``, where IPC finds a block's allocation) and, when the pool lets it go
    (``empty_cache``), out again before the memory is freed."""

    __slots__ = ("mem", "size", "stats", "segments")

    def __init__(self, mem: Any, size: int, stats: MemoryStats,
                 segments: dict[int, int]) -> None:
        self.mem, self.size, self.stats, self.segments = mem, size, stats, segments
        stats.segment(size, +1)
        segments[mem.ptr] = size

    def __del__(self) -> None:
        self.stats.segment(self.size, -1)
        self.segments.pop(self.mem.ptr, None)



_MEMCPY_HOST_TO_DEVICE = 1  # cudaMemcpyHostToDevice (driver_types.h)

# cuBLAS enums (cublas_api.h / library_types.h, as CuPy's cublas.pxd and _runtime_enum.pxd
# declare them): transpose ops, data types, compute types.
_OPS = {"N": 0, "T": 1, "C": 2}
_CUDA_R_32F, _CUDA_R_64F, _CUDA_R_16F, _CUDA_C_32F, _CUDA_C_64F, _CUDA_R_16BF = 0, 1, 2, 4, 5, 14
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_GEMM_DEFAULT = -1
# dtype name -> (data type, compute type, alpha/beta host type)
_CUBLAS_TYPES = {
    "float32": (_CUDA_R_32F, _COMPUTE_32F, np.float32),
    "float64": (_CUDA_R_64F, _COMPUTE_64F, np.float64),
    "float16": (_CUDA_R_16F, _COMPUTE_32F, np.float32),
    "bfloat16": (_CUDA_R_16BF, _COMPUTE_32F, np.float32),
    "complex64": (_CUDA_C_32F, _COMPUTE_32F, np.complex64),
    "complex128": (_CUDA_C_64F, _COMPUTE_64F, np.complex128),
}
_CUBLAS_BY_DTYPE = {np.dtype(name): spec for name, spec in _CUBLAS_TYPES.items()}

# alpha / beta in host pointer mode: cuBLAS reads them during the call, so one read-only
# array per (host type, value) serves every call: (array, its address). A zero's key carries
# its text too, so 0.0 and -0.0 (equal keys otherwise) keep their own arrays.
_HOST_SCALARS: dict[tuple, tuple[np.ndarray, int]] = {}


def _host_scalar(value: Any, scale: Any) -> tuple[np.ndarray, int]:
    key: tuple = (scale, type(value), value)
    if value == 0:
        key += (str(value),)
    entry = _HOST_SCALARS.get(key)
    if entry is None:
        arr = np.array([value], scale)
        entry = (arr, arr.ctypes.data)
        if len(_HOST_SCALARS) < 64:
            arr.flags.writeable = False
            _HOST_SCALARS[key] = entry
    return entry


def _no_gemm(alpha: Any, a: int, b: int, beta: Any, c: int) -> None:
    """An empty product (m, n or batch 0): nothing to compute."""
