"""The device runtime on a real NVIDIA GPU through CuPy (imported lazily).

Every CuPy call here follows CuPy's reference documentation (docs.cupy.dev):
  cupy.cuda.MemoryPool (malloc, free_all_blocks, used_bytes, total_bytes) and the
    "Memory Management" user guide (pools cache freed blocks; get_default_memory_pool);
  cupy.cuda.PinnedMemoryPool (malloc); cupy.cuda.memory.OutOfMemoryError (raised by the pool);
  cupy.cuda.MemoryPointer (copy_from_host / _async, copy_to_host / _async,
    copy_from_device / _async taking a ctypes.c_void_p host pointer, offsets via ``+``;
    async host copies need pinned memory, see alloc_host);
  cupy.RawModule(code=, options=, name_expressions=) and RawModule.get_function;
  cupy.RawKernel.__call__(grid, block, args, shared_mem=) (args: cupy.ndarray or NumPy
    scalars), launched on a stream by entering it (cupy.cuda.Stream.__enter__);
  cupy.cuda.Stream(non_blocking=) / synchronize; cupy.cuda.Event / record / synchronize;
    cupy.cuda.get_elapsed_time;
  cupy.cuda.runtime.getDeviceCount, deviceSynchronize, getDeviceProperties (a dict with
    "name" (bytes), "totalGlobalMem", "multiProcessorCount", "major", "minor");
  cupy.ndarray(shape, dtype, memptr=, strides=) and cupy.matmul for gemm.
"""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .emulator.build import Param, parse_kernels
from .emulator.launch import _SCALARS, scalar_value
from .runtime import (
    AllocationTable,
    DeviceProperties,
    DevicePtr,
    OutOfMemoryError,
    apply_op,
    check_trans,
    gemm_extent,
    gemm_op_shape,
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


@dataclass(frozen=True)
class CupyModule:
    raw: Any                                 # cupy.RawModule
    params: dict[str, tuple[Param, ...]]     # extern "C" kernels' parameters, from the source


@dataclass(frozen=True)
class CupyKernel:
    function: Any                    # cupy.RawKernel
    name: str
    params: tuple[Param, ...] | None  # None for template instantiations (name expressions)
    converters: tuple[Callable[[Any], Any], ...] | None = None  # one per param, built once


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


# Pointer arguments repeat (the same buffers launch after launch): their np.uint64 forms are
# memoised, which costs a dict lookup instead of a NumPy scalar construction per pointer.
_POINTER_CACHE: dict[int, np.uint64] = {}
_POINTER_CACHE_MAX = 4096


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
    dtype = _SCALARS.get(p.base)

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

    def convert(a: Any) -> Any:
        t = type(a)
        if t is exact:
            return a
        if t in fast and lo <= a <= hi:
            return ctor(a)
        return checked(a)

    return convert


def converters(kernel: str, params: tuple[Param, ...]) -> tuple[Callable[[Any], Any], ...]:
    """One argument converter per parameter of ``kernel`` (see above)."""
    return tuple(_pointer_converter(kernel, p) if p.pointer else _scalar_converter(kernel, p)
                 for p in params)


def _kernel_args(kernel: CupyKernel, args: Sequence[Any]) -> tuple:
    """Arguments as CuPy must receive them (see ``converters``); a template instantiation
    (no parsed parameter list) passes pointers as uint64 and everything else unchanged."""
    convs = kernel.converters
    if convs is None:
        return tuple(np.uint64(int(a)) if isinstance(a, DevicePtr) else
                     (_NULL if a is None else a) for a in args)
    if len(args) != len(convs):
        params = kernel.params or ()
        raise TypeError(f"kernel '{kernel.name}' takes {len(params)} arguments "
                        f"({', '.join(p.ctype + ' ' + p.name for p in params)}), "
                        f"got {len(args)}")
    return tuple([c(a) for c, a in zip(convs, args)])  # noqa: B905 - lengths checked above


def _host_ptr(arr: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(arr.ctypes.data)


class CupyRuntime:
    """The device runtime on CuPy (see runtime.py for the interface); device 0."""

    def __init__(self) -> None:
        self.cp = _import_cupy()
        self.pool = self.cp.cuda.MemoryPool()
        self.pinned_pool = self.cp.cuda.PinnedMemoryPool()
        self._table = AllocationTable()  # address -> cupy MemoryPointer (keeps the block alive)
        self._peak = 0

    # -- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, stream: Any = None) -> DevicePtr:
        if nbytes == 0:
            return DevicePtr(0)
        oom = self.cp.cuda.memory.OutOfMemoryError
        try:
            mem = self.pool.malloc(nbytes)
        except oom:
            self.pool.free_all_blocks()  # release cached blocks, then retry once
            try:
                mem = self.pool.malloc(nbytes)
            except oom:
                raise OutOfMemoryError(
                    f"CUDA out of memory: tried to allocate {nbytes} bytes; "
                    f"{self.pool.used_bytes()} bytes in use, {self.pool.total_bytes()} "
                    f"reserved") from None
        self._table.add(mem.ptr, nbytes, mem)
        self._peak = max(self._peak, self.pool.used_bytes())
        return DevicePtr(mem.ptr)

    def free(self, ptr: int) -> None:
        if int(ptr):
            self._table.pop(ptr)  # dropping the MemoryPointer returns the block to the pool

    def alloc_host(self, nbytes: int) -> np.ndarray:
        """Pinned host memory (what async copies need: pageable memory makes them sync)."""
        if nbytes == 0:
            return np.empty(0, np.uint8)
        mem = self.pinned_pool.malloc(nbytes)
        return np.frombuffer(mem, np.uint8, nbytes)  # the array keeps ``mem`` alive

    def _mem(self, ptr: int, nbytes: int) -> Any:
        base, mem, off = self._table.lookup(ptr, nbytes)
        return mem + off if off else mem

    # -- copies ------------------------------------------------------------------------------
    def memcpy_htod(self, dst: int, host: np.ndarray, stream: Any = None) -> None:
        host = np.ascontiguousarray(host)
        mem = self._mem(dst, host.nbytes)
        if stream is None:
            mem.copy_from_host(_host_ptr(host), host.nbytes)
        else:
            mem.copy_from_host_async(_host_ptr(host), host.nbytes, stream)

    def memcpy_dtoh(self, host_out: np.ndarray, src: int, stream: Any = None) -> None:
        mem = self._mem(src, host_out.nbytes)
        if stream is None:
            mem.copy_to_host(_host_ptr(host_out), host_out.nbytes)
        else:
            mem.copy_to_host_async(_host_ptr(host_out), host_out.nbytes, stream)

    def memcpy_dtod(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        d, s = self._mem(dst, nbytes), self._mem(src, nbytes)
        if stream is None:
            d.copy_from_device(s, nbytes)
        else:
            d.copy_from_device_async(s, nbytes, stream)

    # -- kernels -----------------------------------------------------------------------------
    def compile(self, source: str, name: str, options: Sequence[str] = (),
                name_expressions: Sequence[str] = ()) -> CupyModule:
        raw = self.cp.RawModule(code=source, options=tuple(options),
                                name_expressions=list(name_expressions) or None)
        return CupyModule(raw, parse_kernels(source))

    def get_kernel(self, module: CupyModule, name: str) -> CupyKernel:
        params = module.params.get(name)
        return CupyKernel(module.raw.get_function(name), name, params,
                          None if params is None else converters(name, params))

    def launch(self, kernel: CupyKernel, grid: int | Sequence[int], block: int | Sequence[int],
               shared_bytes: int, args: Sequence[Any], stream: Any = None) -> None:
        cargs = _kernel_args(kernel, args)
        grid = (grid,) if type(grid) is int else tuple(grid)
        block = (block,) if type(block) is int else tuple(block)
        if stream is None:  # the current stream
            kernel.function(grid, block, cargs, shared_mem=shared_bytes)
        else:
            with stream:
                kernel.function(grid, block, cargs, shared_mem=shared_bytes)

    # -- streams and events ------------------------------------------------------------------
    def create_stream(self) -> Any:
        return self.cp.cuda.Stream(non_blocking=True)

    def create_event(self) -> Any:
        return self.cp.cuda.Event()

    def elapsed_time(self, start: Any, end: Any) -> float:
        return float(self.cp.cuda.get_elapsed_time(start, end))

    def synchronize(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()

    # -- statistics --------------------------------------------------------------------------
    def memory_allocated(self) -> int:
        return int(self.pool.used_bytes())

    def memory_reserved(self) -> int:
        return int(self.pool.total_bytes())

    def max_memory_allocated(self) -> int:
        return self._peak

    def reset_peak_memory_stats(self) -> None:
        self._peak = self.memory_allocated()

    def empty_cache(self) -> None:
        self.pool.free_all_blocks()

    # -- device ------------------------------------------------------------------------------
    def device_count(self) -> int:
        return int(self.cp.cuda.runtime.getDeviceCount())

    def properties(self, index: int = 0) -> DeviceProperties:
        p = self.cp.cuda.runtime.getDeviceProperties(index)
        name = p["name"]
        return DeviceProperties(name.decode() if isinstance(name, bytes) else str(name),
                                int(p["totalGlobalMem"]), int(p["multiProcessorCount"]),
                                int(p["major"]), int(p["minor"]))

    # -- BLAS --------------------------------------------------------------------------------
    def gemm(self, transa: str, transb: str, m: int, n: int, k: int, alpha: Any, a: int,
             lda: int, b: int, ldb: int, beta: Any, c: int, ldc: int, dtype: Any) -> None:
        dt = np.dtype(dtype)
        check_trans(transa), check_trans(transb)
        if m == 0 or n == 0:
            return
        ra, ca = gemm_op_shape(transa, m, k)
        rb, cb = gemm_op_shape(transb, k, n)
        av = self._matrix(a, ra, ca, lda, dt)
        bv = self._matrix(b, rb, cb, ldb, dt)
        cv = self._matrix(c, m, n, ldc, dt)
        prod = self.cp.matmul(apply_op(av, transa), apply_op(bv, transb))  # cuBLAS underneath
        if alpha != 1:
            prod *= dt.type(alpha)
        if beta != 0:
            prod += dt.type(beta) * cv
        cv[...] = prod

    def _matrix(self, ptr: int, rows: int, cols: int, ld: int, dt: np.dtype) -> Any:
        """A column-major cupy.ndarray view of device memory (no copy)."""
        if ld < max(1, rows):
            raise ValueError(f"gemm: leading dimension {ld} is smaller than {rows} rows")
        mem = self._mem(ptr, gemm_extent(rows, cols, ld) * dt.itemsize)
        return self.cp.ndarray((rows, cols), dt, memptr=mem,
                               strides=(dt.itemsize, ld * dt.itemsize))
