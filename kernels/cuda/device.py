"""The active CUDA runtime, and what the CUDA backend's kernels use to launch on tensors.

``activate(runtime)`` makes a device runtime (the CPU emulator or CuPy) serve the "cuda" device:
it registers the storage driver, rebuilds the copy table and imports the CUDA kernels (which
register themselves with the CUDA backend). Kernels live in ``kernels/cuda/*.cu``; a
:class:`CudaSource` is one such file plus the ``extern "C"`` wrappers that instantiate its
templates per dtype (both the emulator and NVRTC launch plain, non-template kernels), compiled
once per runtime on first use.

    SOURCE = CudaSource("reduce.cu")
    SOURCE.instantiate("sum_{s}", "const {T}* x, {A}* out, long long n",
                       "gt_sum<{T}, {A}>(x, out, n)", FLOAT_TYPES)
    launch(SOURCE, "sum_f32", grid, block, [x, out, n])   # tensors pass as device pointers
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor.storage.allocator import CUDA_UNAVAILABLE

from .runtime import DevicePtr

HERE = Path(__file__).resolve().parent

# C types and short names of the dtypes CUDA kernels handle (complex is not covered).
CTYPES: dict[D.dtype, str] = {
    D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short",
    D.int32: "int", D.int64: "long long", D.float16: "__half", D.bfloat16: "__nv_bfloat16",
    D.float32: "float", D.float64: "double",
}
SHORT: dict[D.dtype, str] = {
    D.bool: "b", D.uint8: "u8", D.int8: "i8", D.int16: "i16", D.int32: "i32", D.int64: "i64",
    D.float16: "f16", D.bfloat16: "bf16", D.float32: "f32", D.float64: "f64"}
FLOAT_DTYPES = (D.float16, D.bfloat16, D.float32, D.float64)
ALL_DTYPES = tuple(CTYPES)
# The type a kernel accumulates a dtype in: float for 16-bit floats, 64 bits for integers.
ACC_CTYPES: dict[D.dtype, str] = {
    D.bool: "long long", D.uint8: "long long", D.int8: "long long", D.int16: "long long",
    D.int32: "long long", D.int64: "long long", D.float16: "float", D.bfloat16: "float",
    D.float32: "float", D.float64: "double"}

# NVRTC options every CUDA-backend module compiles with (the emulator keeps -D/-I and adds
# -fwrapv itself). -fmad=false: no FMA contraction, so results match the CPU backend's rounding.
NVRTC_OPTIONS = ("--std=c++17", "-fmad=false", f"-I{HERE}")
BLOCK = 256
MAX_GRID = 1024  # grid-stride loops: a bounded grid covers any size


def dtype_variants(dtypes: Iterable[D.dtype]) -> list[dict[str, str]]:
    """Placeholder maps for ``CudaSource.instantiate``: ``{s}`` short name, ``{T}`` C type,
    ``{A}`` accumulator C type."""
    return [{"s": SHORT[d], "T": CTYPES[d], "A": ACC_CTYPES[d]} for d in dtypes]


def check_dtype(dt: D.dtype, op_name: str) -> str:
    """The short name of ``dt`` for kernel names; a clear error for dtypes CUDA lacks."""
    s = SHORT.get(dt)
    if s is None:
        raise TypeError(f"'{op_name}' on CUDA does not support dtype {dt} (the CUDA kernels "
                        f"cover {', '.join(str(d) for d in ALL_DTYPES)})")
    return s


# ---- the active runtime ---------------------------------------------------------------------
_runtime: Any = None
_lock = threading.Lock()


def runtime() -> Any:
    """The device runtime serving "cuda" (a clear error when there is none)."""
    rt = _runtime
    if rt is None:
        raise RuntimeError(CUDA_UNAVAILABLE)
    return rt


def active() -> Any:
    """The active runtime, or None."""
    return _runtime


def activate(rt: Any) -> None:
    """Make ``rt`` serve the "cuda" device (storages, copies and kernels)."""
    global _runtime
    from gputensor.storage import copy_table
    from gputensor.storage.allocator import register_driver
    from gputensor.storage.typed import STORAGE_TYPES

    from . import ops  # noqa: F401  - registers the CUDA backend's kernels
    from .storage_driver import RuntimeStorageDriver

    with _lock:
        register_driver(RuntimeStorageDriver(rt))
        _runtime = rt
        copy_table.rebuild(list(STORAGE_TYPES.values()))


# ---- sources ------------------------------------------------------------------------------------
class CudaSource:
    """One ``kernels/cuda/<file>.cu`` plus generated ``extern "C"`` wrappers, compiled lazily
    (once per runtime) into one module."""

    def __init__(self, filename: str, *, emulator_flags: Sequence[str] = ()) -> None:
        self.filename = filename
        self.name = Path(filename).stem
        self.emulator_flags = tuple(emulator_flags)
        self._wrappers: list[str] = []
        self.kernel_names: list[str] = []
        self._modules: dict[int, tuple[Any, Any, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        SOURCES.append(self)

    def instantiate(self, name: str, params: str, call: str,
                    variants: Iterable[dict[str, str]]) -> None:
        """One wrapper kernel per variant: ``extern "C" __global__ void <name>(<params>)
        { <call>; }`` with each variant's placeholders filled in."""
        for v in variants:
            kname = name.format(**v)
            self._wrappers.append(f'extern "C" __global__ void {kname}({params.format(**v)}) '
                                  f"{{ {call.format(**v)}; }}\n")
            self.kernel_names.append(kname)

    def source(self) -> str:
        body = (HERE / self.filename).read_text()
        return (f"{body}\n// ---- generated instantiations ----\n" + "".join(self._wrappers))

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
        entry = self._modules.get(id(rt))
        if entry is None or entry[0] is not rt:
            with self._lock:
                entry = self._modules.get(id(rt))
                if entry is None or entry[0] is not rt:
                    module = rt.compile(self.source(), self.name,
                                        options=(*NVRTC_OPTIONS, *self.emulator_flags))
                    entry = self._modules[id(rt)] = (rt, module, {})
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
    buf = t._storage._buf
    if t._storage.device.type != "cuda":
        raise RuntimeError(f"expected a CUDA tensor, got one on {t._storage.device}")
    return DevicePtr(buf.ptr + t._offset * t._dtype.itemsize) if buf.size else DevicePtr(0)


def grid_for(n: int, block: int = BLOCK) -> int:
    """Blocks for a grid-stride loop over ``n`` items."""
    return max(1, min(MAX_GRID, -(-int(n) // block)))


def launch(src: CudaSource, name: str, grid: int | Sequence[int], block: int | Sequence[int],
           args: Sequence[Any], shared_bytes: int = 0) -> None:
    """Launch ``src``'s kernel ``name``; tensor args pass as device pointers to their first
    element, :class:`DeviceArray` as its pointer, None as a null pointer."""
    cargs = [ptr(a) if hasattr(a, "_storage") else (a.ptr if isinstance(a, DeviceArray) else a)
             for a in args]
    if launch_observer is None:
        runtime().launch(src.kernel(name), grid, block, shared_bytes, cargs)
    else:
        launch_observer(src, name, grid, block, shared_bytes,
                        lambda: runtime().launch(src.kernel(name), grid, block, shared_bytes,
                                                 cargs))


# The profiler's hook, None unless a profiler is running (one check per launch). Called as
# observer(src, name, grid, block, shared_bytes, run) where ``run()`` performs the launch.
launch_observer: Callable[..., None] | None = None


class DeviceArray:
    """A small device array from host values (shapes, strides, offsets for a kernel); freed
    when garbage collected (the CuPy pool orders the reuse after queued work)."""

    __slots__ = ("buf", "ptr", "size")

    def __init__(self, values: Sequence[int] | np.ndarray, dtype: Any = np.int64) -> None:
        from gputensor.storage.allocator import driver_for

        host = np.ascontiguousarray(values, dtype=dtype)
        drv = driver_for("cuda")
        self.buf = drv.alloc(max(host.nbytes, 1))
        if host.nbytes:
            drv.from_host(self.buf, 0, host)
        self.ptr = self.buf.ptr
        self.size = host.size


def read_back(address: int, dtype: Any = np.int64, count: int = 1) -> np.ndarray:
    """``count`` elements at a device address, copied to the host (a synchronising copy: for a
    count that sizes an output, or an error word after a launch)."""
    host = np.empty(count, dtype)
    runtime().memcpy_dtoh(host, DevicePtr(int(address)))
    return host


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)
