"""The device-runtime interface the CUDA backend programs against, and what its drivers share.

Two drivers implement it: ``EmulatorRuntime`` (emulator_driver.py: device memory is host memory,
kernels run through the CPU emulator) and ``CupyRuntime`` (cupy_driver.py: a real GPU through
CuPy). Code above this layer sees only these methods (``RUNTIME_METHODS``):

memory     alloc(nbytes) -> DevicePtr, free(ptr, streams=()) (``streams``: the block is
           reused only after the work they queued so far, PyTorch's record_stream),
           alloc_host(nbytes) -> np.ndarray (pinned; kept alive by the runtime while a queued
           copy uses it)
copies     memcpy_htod(dst, host, stream=None), memcpy_dtoh(host_out, src, stream=None),
           memcpy_dtod(dst, src, nbytes, stream=None), upload(dst, host, stream=None) (a small
           copy that never makes the host wait: kernel metadata); stream=None means the current
           stream
           (so the copy is ordered after the work queued on it), and memcpy_dtoh with
           stream=None is a host read: complete when it returns
kernels    compile(source, name, options=(), name_expressions=()) -> module,
           get_kernel(module, name) -> kernel,
           launch(kernel, grid, block, shared_bytes, args, stream=None)
           (pointer args are DevicePtr / None, scalars are NumPy scalars of the parameter type)
streams    create_stream() -> stream (.synchronize()), default_stream() -> the device's
           default stream, current_stream() -> the stream a launch with stream=None uses,
           create_event() -> event (.record(stream=None), .synchronize()),
           elapsed_time(start, end) -> ms, synchronize()
stats      memory_allocated(), memory_reserved(), max_memory_allocated(),
           max_memory_reserved(), reset_peak_memory_stats(), memory_stats() (PyTorch's keys,
           memstats.py), empty_cache(), mem_get_info() -> (free, total),
           set_memory_fraction(fraction)
device     device_count(), properties(index=0) -> DeviceProperties
BLAS       gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, dtype, *,
           batch=1, stride_a=0, stride_b=0, stride_c=0, allow_tf32=False): column-major
           strided-batched like cuBLAS, C_i = alpha * op(A_i) @ op(B_i) + beta * C_i with
           X_i at X + i * stride_x elements (a row-major ``out = x @ w`` is the column-major
           ``out^T = w^T @ x^T``: swap the operands); 16-bit floats accumulate in float32
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

RUNTIME_METHODS = (
    "alloc", "free", "alloc_host",
    "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "upload",
    "compile", "get_kernel", "launch",
    "create_stream", "default_stream", "current_stream", "create_event", "elapsed_time",
    "synchronize",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "memory_stats", "empty_cache", "mem_get_info",
    "set_memory_fraction",
    "device_count", "properties", "gemm",
)


def work_done(raw: Any) -> bool:
    """Whether a runtime stream or event has finished its work: ``query()`` (the emulator's
    objects) or ``.done`` (CuPy's ``Stream``/``Event``)."""
    q = getattr(raw, "query", None)
    if callable(q):
        return bool(q())
    return bool(getattr(raw, "done", True))


def missing_methods(runtime: Any) -> list[str]:
    """The interface methods ``runtime`` lacks (empty for a complete driver)."""
    return [m for m in RUNTIME_METHODS if not callable(getattr(runtime, m, None))]


class DevicePtr(int):
    """A device address. An int (so arithmetic and comparisons work) that stays a DevicePtr
    under ``+``/``-`` with an integer offset, so kernel launches can tell pointers from
    integer scalars."""

    __slots__ = ()

    def __add__(self, offset: int) -> DevicePtr:
        return DevicePtr(int(self) + int(offset))

    __radd__ = __add__

    def __sub__(self, other: int) -> int:  # type: ignore[override]
        # pointer - pointer is a distance (plain int); pointer - offset is a pointer
        diff = int(self) - int(other)
        return diff if isinstance(other, DevicePtr) else DevicePtr(diff)

    def __repr__(self) -> str:
        return f"DevicePtr(0x{int(self):x})"


NULL = DevicePtr(0)


class OutOfMemoryError(RuntimeError):
    """A device allocation failed even after the cached blocks were released."""


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int

    @property
    def compute_capability(self) -> tuple[int, int]:
        return (self.major, self.minor)


class AllocationTable:
    """Live allocations by base address, with bounds-checked lookup of any address inside one.

    ``lookup(ptr, nbytes)`` returns (base, owner, offset) for the allocation holding
    ``[ptr, ptr + nbytes)``; an address outside every allocation, or a range running past the
    end of one, is a clear error (the emulator's answer to an illegal-address fault).
    """

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._entries: dict[int, tuple[int, Any]] = {}  # base -> (size, owner)
        # Read-only alias for callers' fast path: a pointer that is exactly a block's start
        # (the common kernel argument) is one dict lookup instead of a bisect.
        self.by_base = self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, base: int) -> bool:
        return int(base) in self._entries

    def add(self, base: int, size: int, owner: Any) -> None:
        bisect.insort(self._bases, int(base))
        self._entries[int(base)] = (size, owner)

    def pop(self, base: int) -> tuple[int, Any]:
        base = int(base)
        if base not in self._entries:
            raise ValueError(f"free of {DevicePtr(base)!r}: not the start of a live device "
                             f"allocation (double free, or a pointer into a block?)")
        self._bases.pop(bisect.bisect_left(self._bases, base))
        return self._entries.pop(base)

    def lookup(self, ptr: int, nbytes: int) -> tuple[int, Any, int]:
        ptr = int(ptr)
        if nbytes < 0:
            raise ValueError(f"negative byte count {nbytes} at {DevicePtr(ptr)!r}")
        i = bisect.bisect_right(self._bases, ptr) - 1
        if i >= 0:
            base = self._bases[i]
            size, owner = self._entries[base]
            if ptr + nbytes <= base + size and (ptr < base + size or nbytes == 0):
                return base, owner, ptr - base
            if ptr < base + size:
                raise IndexError(f"device access of {nbytes} bytes at {DevicePtr(ptr)!r} "
                                 f"(offset {ptr - base}) overruns its allocation of {size} "
                                 f"bytes at {DevicePtr(base)!r}")
        raise IndexError(f"illegal device address {DevicePtr(ptr)!r} ({nbytes} bytes): not "
                         f"inside any live allocation")


def column_major(flat: np.ndarray, rows: int, cols: int, ld: int, what: str) -> np.ndarray:
    """A (rows, cols) column-major view, leading dimension ``ld``, of a flat typed array."""
    if rows < 0 or cols < 0:
        raise ValueError(f"gemm: {what} has negative shape ({rows}, {cols})")
    if ld < max(1, rows):
        raise ValueError(f"gemm: ld{what.lower()}={ld} is smaller than its {rows} rows")
    need = gemm_extent(rows, cols, ld)
    if need > flat.size:
        raise IndexError(f"gemm: {what} ({rows}x{cols}, ld {ld}) needs {need} elements, the "
                         f"buffer has {flat.size}")
    isz = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (isz, ld * isz), writeable=True)


def gemm_extent(rows: int, cols: int, ld: int) -> int:
    """Elements a column-major (rows, cols) matrix with leading dimension ``ld`` spans."""
    return 0 if rows == 0 or cols == 0 else (cols - 1) * ld + rows


def gemm_op_shape(trans: str, rows: int, cols: int) -> tuple[int, int]:
    """Stored shape of an operand whose op() is (rows, cols)."""
    t = check_trans(trans)
    return (rows, cols) if t == "N" else (cols, rows)


def check_trans(trans: str) -> str:
    t = str(trans).upper()
    if t not in ("N", "T", "C"):
        raise ValueError(f"gemm: transpose flag must be 'N', 'T' or 'C', got {trans!r}")
    return t


def apply_op(mat: Any, trans: str) -> Any:
    """op(X) for a stored matrix: X, X^T or X^H (works for NumPy and CuPy arrays)."""
    t = check_trans(trans)
    if t == "N":
        return mat
    return mat.T if t == "T" else mat.conj().T
