"""The active CUDA runtime, and what the CUDA backend's kernels use to launch on tensors.

``activate(runtime)`` makes a device runtime (the CPU emulator or CuPy) serve the "cuda" device:
it registers the storage driver, rebuilds the copy table and imports the CUDA kernels (which
register themselves with the CUDA backend). Kernels live in ``kernels/cuda/*.cu``; a
:class:`CudaSource` is one such file plus the ``extern "C"`` wrappers that instantiate its
templates per dtype (both the emulator and NVRTC launch plain, non-template kernels), compiled
once per runtime on first use.

    SRC = CudaSource("optim.cu")
    SRC.instantiate("optim_adagrad_{s}",
                    "{T}* p, const {T}* g, {T}* sum, {T} c0, {T} c1, {T} c2, int neg, long long n",
                    "gtoptim::adagrad<{T}>(p, g, sum, c0, c1, c2, neg, n)",
                    variants([D.float32, D.float64]))
    launch(SRC, "optim_adagrad_f32", grid_for(n), BLOCK, [p, g, s, c0, c1, c2, 0, n])
    # tensors pass as device pointers to their first element
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gputensor import _device as _device_module
from gputensor._device import device as Device
from gputensor.storage.allocator import unavailable_message

from .runtime import NULL, AcceleratorError, DevicePtr, parse_kernels

HERE = Path(__file__).resolve().parent

# NVRTC options every CUDA-backend module compiles with (the emulator keeps -D/-I and adds
# -fwrapv itself). -fmad=false: no FMA contraction, so results match the CPU backend's rounding.
# -ftz=false: float32 subnormals are kept, as on the CPU (NVRTC's default, stated because
# CuPy's own compiler appends -ftz=true; this project never compiles through it).
NVRTC_OPTIONS = ("--std=c++17", "-fmad=false", "-ftz=false", f"-I{HERE}")
BLOCK = 256
MAX_GRID = 1024  # grid-stride loops: a bounded grid covers any size


# ---- the active runtimes, one per device --------------------------------------------------------
# Device i of "cuda" is served by _runtimes[i]: its own memory pool and statistics, streams,
# compiled modules, cuBLAS handle and error record. A thread's *current device* (PyTorch's
# set_device / device guard) picks the runtime that kernels launch on and temporaries come
# from; an op runs under a guard that makes its tensors' device current (``guard_kernels``).
_runtimes: tuple[Any, ...] = ()
_runtime: Any = None  # the runtime when exactly one device is served: the fast path
_current = threading.local()  # .index: this thread's current device (0 when unset)
_lock = threading.Lock()


def runtime() -> Any:
    """The runtime of the current device (a clear error when CUDA is not served)."""
    rt = _runtime
    if rt is not None:
        return rt
    rts = _runtimes
    if not rts:
        raise RuntimeError(unavailable_message("cuda"))
    return rts[getattr(_current, "index", 0)]


def active() -> Any:
    """The runtime of the current device, or None when CUDA is not served."""
    rt = _runtime
    if rt is not None or not _runtimes:
        return rt
    return _runtimes[getattr(_current, "index", 0)]


def runtimes() -> tuple[Any, ...]:
    """Every device's runtime, by device index (empty when CUDA is not served)."""
    return _runtimes


def runtime_of(index: int | None) -> Any:
    """The runtime of device ``index`` (None: the current device)."""
    rts = _runtimes
    if not rts:
        raise RuntimeError(unavailable_message("cuda"))
    if index is None:
        return rts[getattr(_current, "index", 0)]
    if not 0 <= index < len(rts):
        raise AcceleratorError(f"CUDA error: invalid device ordinal (device {index} requested, "
                               f"{len(rts)} device(s) available)")
    return rts[index]


def current_index() -> int:
    """This thread's current device index."""
    return getattr(_current, "index", 0)


_device_module.current_cuda_index = current_index  # "cuda" without an index means it


def set_current_index(index: int) -> None:
    """Make device ``index`` current for this thread (checked against the served devices),
    for the runtime too (CUDA's current device, where raw stream and event calls act)."""
    runtime_of(index).make_current()
    _current.index = index


class on_device:
    """Make device ``index`` current inside the block (None, or the current one: nothing to
    do), restoring the previous one on exit: PyTorch's device guard."""

    __slots__ = ("index", "prev")

    def __init__(self, index: int | None) -> None:
        self.index = index
        self.prev = -1

    def __enter__(self) -> on_device:
        index = self.index
        if index is not None:
            prev = getattr(_current, "index", 0)
            if prev != index:
                runtime_of(index).make_current()
                self.prev = prev
                _current.index = index
        return self

    def __exit__(self, *exc: object) -> None:
        prev = self.prev
        if prev >= 0:
            _runtimes[prev].make_current()
            _current.index = prev
            self.prev = -1


def activate(rt: Any) -> None:
    """Make ``rt`` (one runtime, or a sequence with one per device) serve the "cuda" device
    (storages, copies and kernels)."""
    global _runtime, _runtimes
    from gputensor.storage import copy_table
    from gputensor.storage.allocator import register_driver
    from gputensor.storage.typed import STORAGE_TYPES

    from . import ops  # noqa: F401  - registers the CUDA backend's kernels
    from .storage_driver import RuntimeStorageDriver

    rts = tuple(rt) if isinstance(rt, list | tuple) else (rt,)
    if not rts:
        raise ValueError("activate: no runtime given")
    with _lock:
        register_driver(RuntimeStorageDriver(rts))
        clear_constants()
        _runtimes = rts
        _runtime = rts[0] if len(rts) == 1 else None
        _current.index = 0
        guard_kernels(len(rts) > 1)
        copy_table.rebuild(list(STORAGE_TYPES.values()))


def deactivate() -> None:
    """Stop serving "cuda" (tests that restore a machine without CUDA)."""
    global _runtime, _runtimes
    from gputensor.storage import copy_table
    from gputensor.storage.allocator import DRIVERS
    from gputensor.storage.typed import STORAGE_TYPES

    with _lock:
        DRIVERS.pop("cuda", None)
        clear_constants()
        _runtimes, _runtime = (), None
        guard_kernels(False)
        copy_table.rebuild(list(STORAGE_TYPES.values()))


# ---- the device guard of CUDA kernels -----------------------------------------------------------
def device_index_of(args: Sequence[Any], kwargs: dict[str, Any]) -> int | None:
    """The CUDA device a backend kernel call works on: that of its first CUDA tensor (looked
    for in the arguments and one level into lists and tuples), else of a CUDA device argument;
    None when there is neither."""
    for a in (*args, *kwargs.values()):
        if type(a) is list or type(a) is tuple:
            for b in a:
                index = _cuda_index(b)
                if index is not None:
                    return index
        else:
            index = _cuda_index(a)
            if index is not None:
                return index
    return None


def _cuda_index(a: Any) -> int | None:
    dev = a if type(a) is Device else (getattr(a, "device", None) if hasattr(a, "_shape")
                                       else None)
    if type(dev) is Device and dev.type == "cuda":
        return dev.index or 0
    return None


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a CUDA backend kernel) run with its tensors' device current."""
    fn = getattr(fn, "_gt_guarded", fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        index = device_index_of(args, kwargs)
        if index is None or index == getattr(_current, "index", 0):
            return fn(*args, **kwargs)
        with on_device(index):
            return fn(*args, **kwargs)

    run._gt_guarded = fn  # type: ignore[attr-defined]
    return run


def guard_kernels(on: bool) -> None:
    """Wrap (or unwrap) every CUDA backend kernel in the device guard. Only a machine serving
    several devices pays for it: with one device, every op already runs on the current one."""
    from gputensor.kernels import registry

    for (device_type, _layout), backend in registry.BACKENDS.items():
        if device_type == "cuda":
            backend.guard = guarded if on else None
            backend.rewrap()
    registry.clear_kernel_caches()


# ---- sources ------------------------------------------------------------------------------------
class CudaSource:
    """One ``kernels/cuda/<file>.cu`` plus generated ``extern "C"`` wrappers, compiled lazily
    (once per runtime) into one module. ``code`` gives the source inline instead (tests and
    benchmarks): its kernels are the ``extern "C"`` ones it defines, and it stays out of
    ``SOURCES``, the backend's list that the NVRTC test compiles."""

    def __init__(self, filename: str, *, emulator_flags: Sequence[str] = (),
                 code: str | None = None) -> None:
        self.code = code
        self.filename = filename
        self.name = Path(filename).stem
        self.emulator_flags = tuple(emulator_flags)
        self._declarations: list[str] = []  # generated device code the wrappers call
        self._wrappers: list[str] = []
        self.kernel_names: list[str] = []
        self._modules: dict[int, tuple[Any, Any, dict[str, Any]]] = {}
        self._last: tuple[Any, Any, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        if code is None:
            SOURCES.append(self)
        else:
            self.kernel_names = list(parse_kernels(code))

    def instantiate(self, name: str, params: str, call: str,
                    variants: Iterable[dict[str, str]],
                    launch_bounds: tuple[int, int] | None = None) -> None:
        """One wrapper kernel per variant: ``extern "C" __global__ void <name>(<params>)
        { <call>; }`` with each variant's placeholders filled in. ``launch_bounds`` =
        (threads per block, blocks per SM) caps the registers so that many blocks fit an SM
        (``__launch_bounds__``)."""
        bounds = "" if launch_bounds is None else \
            f"__launch_bounds__({launch_bounds[0]}, {launch_bounds[1]}) "
        for v in variants:
            kname = name.format(**v)
            self._wrappers.append(f'extern "C" __global__ void {bounds}{kname}('
                                  f"{params.format(**v)}) {{ {call.format(**v)}; }}\n")
            self.kernel_names.append(kname)

    def declare(self, code: str) -> None:
        """Generated device code (e.g. an op struct), placed after the file's own source and
        before the wrappers; a repeated declaration is kept once."""
        if code not in self._declarations:
            self._declarations.append(code)

    def source(self) -> str:
        body = self.code if self.code is not None else (HERE / self.filename).read_text()
        return (f"{body}\n// ---- generated declarations ----\n" + "".join(self._declarations)
                + "// ---- generated instantiations ----\n" + "".join(self._wrappers))

    def nvrtc_check(self, arch: str) -> Any:
        """Compile the whole source with NVRTC for ``arch`` (no GPU needed); a failure names
        the instantiations the source was specialised for."""
        from . import nvrtc

        options = [o for o in NVRTC_OPTIONS if not o.startswith(("-I", "--std"))]
        try:
            return nvrtc.compile_program(self.source(), self.filename, arch, options=options)
        except nvrtc.NvrtcError as exc:
            raise nvrtc.NvrtcError(f"{exc}\nspecialised for: {', '.join(self.kernel_names)}",
                                   name=exc.name, log=exc.log, code=exc.code) from None

    def kernel(self, name: str) -> Any:
        """The compiled kernel ``name`` on the active runtime."""
        rt = runtime()
        entry = self._last  # (runtime, module, kernels) of the latest lookup: one check per launch
        if entry is not None and entry[0] is rt:
            k = entry[2].get(name)
            if k is not None:
                return k
        entry = self._modules.get(id(rt))
        if entry is None or entry[0] is not rt:
            with self._lock:
                entry = self._modules.get(id(rt))
                if entry is None or entry[0] is not rt:
                    module = rt.compile(self.source(), self.name,
                                        options=(*NVRTC_OPTIONS, *self.emulator_flags))
                    entry = self._modules[id(rt)] = (rt, module, {})
        self._last = entry
        kernels = entry[2]
        k = kernels.get(name)
        if k is None:
            if name not in self.kernel_names:
                raise KeyError(f"{self.filename} has no kernel {name!r}")
            k = kernels[name] = rt.get_kernel(entry[1], name)
        return k


SOURCES: list[CudaSource] = []  # every CudaSource, for the NVRTC test and the selftest


# ---- launching on tensors -----------------------------------------------------------------------
def ptr(t: Any) -> DevicePtr:
    """The device address of a CUDA tensor's first element."""
    storage = t._storage
    if storage.device.type != "cuda":
        raise RuntimeError(f"expected a CUDA tensor, got one on {storage.device}")
    buf = storage._buf
    if not buf.size:
        return NULL
    base, off = buf.ptr, t._offset
    if not off:
        return base if type(base) is DevicePtr else DevicePtr(base)
    return DevicePtr(int(base) + off * t._dtype.itemsize)  # one DevicePtr, not __add__'s two


def grid_for(n: int, block: int = BLOCK) -> int:
    """Blocks for a grid-stride loop over ``n`` items."""
    return max(1, min(MAX_GRID, -(-int(n) // block)))


# Argument types that pass to the runtime unchanged (checked by type, before the slower tests).
_PLAIN = frozenset((int, float, bool, DevicePtr, type(None), np.float32, np.float64, np.int32,
                    np.int64))


def launch(src: CudaSource, name: str, grid: int | Sequence[int], block: int | Sequence[int],
           args: Sequence[Any], shared_bytes: int = 0) -> None:
    """Launch ``src``'s kernel ``name``; tensor args pass as device pointers to their first
    element, :class:`DeviceArray` as its pointer, None as a null pointer."""
    cargs = [a if type(a) in _PLAIN else
             (ptr(a) if hasattr(a, "_storage") else (a.ptr if isinstance(a, DeviceArray) else a))
             for a in args]
    launch_kernel(runtime(), src.kernel(name), grid, block, shared_bytes, cargs, src.filename)


def launch_kernel(rt: Any, kern: Any, grid: int | Sequence[int], block: int | Sequence[int],
                  shared_bytes: int, args: Sequence[Any], source: str = "",
                  stream: Any = None) -> None:
    """Launch a compiled kernel on runtime ``rt`` (arguments already converted): the one path
    every CUDA launch takes (``launch``, the generated elementwise kernels, dtype casts), so
    the profiler's observer sees them all."""
    if launch_observer is None:
        rt.launch(kern, grid, block, shared_bytes, args, stream=stream)
    else:
        launch_observer(source, kern.name, grid, block, shared_bytes,
                        lambda: rt.launch(kern, grid, block, shared_bytes, args, stream=stream))


# The profiler's hook, None unless a profiler is running (one check per launch). Called as
# observer(source_file, kernel_name, grid, block, shared_bytes, run); ``run()`` launches.
launch_observer: Callable[..., None] | None = None


class DeviceArray:
    """A small device array from host values (shapes, strides, offsets for a kernel), uploaded
    without making the host wait for the GPU (``runtime.upload``: staged in pinned memory and
    copied asynchronously on the current stream; a synchronous copy from pageable memory would
    drain the queue first). Freed when garbage collected: the pool reuses the block on the same
    stream only, after the kernels queued before it."""

    __slots__ = ("buf", "ptr", "size")

    def __init__(self, values: Sequence[int] | np.ndarray, dtype: Any = np.int64) -> None:
        from gputensor.storage.allocator import driver_for

        values = np.ascontiguousarray(values, dtype=dtype)
        drv = driver_for("cuda")
        self.buf = drv.alloc(max(values.nbytes, 1))
        if values.nbytes:
            self.buf.runtime.upload(self.buf.ptr, values)
        self.ptr = self.buf.ptr
        self.size = values.size


# Read-only metadata: (id(runtime), id(stream), dtype, values) -> (array, runtime, stream). The
# entry holds the runtime and stream, so neither id can be reused while it exists (and no
# hash or equality of a CuPy stream object is relied on).
_CONSTANTS: dict[tuple, tuple[DeviceArray, Any, Any]] = {}
CONSTANTS_MAX = 4096


def constant_array(values: Sequence[int], dtype: Any = np.int64) -> DeviceArray:
    """A device copy of ``values`` (ints: shapes, strides, offsets) that kernels only read,
    shared by every launch on the current stream that passes the same values. A training step
    repeats its layouts, so a repeated one costs a dict lookup instead of an allocation, an
    upload and a free. Per stream because the upload is ordered on the stream that first
    needed it. Never hand one to a kernel that writes its argument (use :class:`DeviceArray`)."""
    values = tuple(values)
    return _cached_constant((dtype, values), values, dtype)


def strided_pointers(base: int, step: int, count: int) -> DeviceArray:
    """``constant_array([base + i * step for i in range(count)], uint64)`` (the addresses of
    the matrices of a stack, cuBLAS' Aarray), cached under (base, step, count) so that a
    repeated stack costs no list."""
    return _cached_constant(
        ("pointers", base, step, count),
        lambda: np.uint64(base) + np.arange(count, dtype=np.uint64) * np.uint64(step),
        np.uint64)


def _cached_constant(key: tuple, values: Any, dtype: Any) -> DeviceArray:
    """The read-only device array of ``values`` (or of what a callable ``values`` returns, made
    only on a miss) for the current stream, cached under ``key``; a capture gets a private
    copy the graph holds (its upload is captured, not run)."""
    rt = runtime()
    if rt.capturing:
        arr = DeviceArray(values() if callable(values) else values, dtype)
        rt.hold(arr)
        return arr
    stream = rt.current_stream()
    full_key = (id(rt), id(stream), *key)
    entry = _CONSTANTS.get(full_key)
    if entry is None:
        if len(_CONSTANTS) >= CONSTANTS_MAX:
            clear_constants()  # the blocks return to the pool behind the work that read them
        entry = _CONSTANTS[full_key] = (
            DeviceArray(values() if callable(values) else values, dtype), rt, stream)
    return entry[0]


def clear_constants() -> None:
    """Drop every cached metadata array (``empty_cache`` and a runtime switch call this)."""
    _CONSTANTS.clear()


# Called (no arguments) at the start of every read_back, None when unset: a synchronising
# point's hook, e.g. for raising a kernel error that a deferred launch recorded
# (kernels/cuda/errors.py's check_pending) before the data is used.
host_read_hook: Callable[[], None] | None = None


def read_into(host: np.ndarray, address: int, rt: Any = None) -> None:
    """Fill ``host`` from a device address: THE host read of the CUDA backend (tensors'
    ``.cpu()``/``.item()``, output-sizing counts). It is ordered after the work queued on the
    current stream (``gt.cuda.stream(s)`` included) and complete when it returns, and it is a
    synchronising point: a kernel error recorded earlier is raised first. ``rt``: the runtime
    holding the address (default: the active one)."""
    if host_read_hook is not None:
        host_read_hook()
    if host.nbytes:
        (rt or runtime()).memcpy_dtoh(host, DevicePtr(int(address)))  # None: a host read


def read_back(address: int, dtype: Any = np.int64, count: int = 1) -> np.ndarray:
    """``count`` elements at a device address, copied to the host (see :func:`read_into`):
    for a count that sizes an output."""
    host = np.empty(count, dtype)
    read_into(host, address)
    return host


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)
