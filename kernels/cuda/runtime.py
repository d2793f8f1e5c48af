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
           (pointer args are DevicePtr / None, scalars are NumPy scalars of the parameter type),
           launcher(kernel, block) -> go(grid, args): ``launch`` on the current stream with
           no shared memory, prepared once for a caller that launches one kernel many times
           (the generated elementwise kernels),
           kernel_addresses(ptrs) -> list[int]: the addresses a kernel dereferences for these
           device pointers when it reads them from device memory (a pointer table: the
           pointers themselves on a GPU, the host memory behind them on the emulator)
streams    create_stream() -> stream (.synchronize()), default_stream() -> the device's
           default stream, current_stream() -> the stream a launch with stream=None uses,
           create_event() -> event (.record(stream=None), .synchronize()),
           elapsed_time(start, end) -> ms, synchronize()
stats      memory_allocated(), memory_reserved(), max_memory_allocated(),
           max_memory_reserved(), reset_peak_memory_stats(), memory_stats() (PyTorch's keys,
           memstats.py), empty_cache(), mem_get_info() -> (free, total),
           set_memory_fraction(fraction)
device     device_count(), properties(index=0) -> DeviceProperties, make_current() (make
           this runtime's device the current one of the calling thread, where raw stream
           and event calls act; a no-op with one device), device_index (attribute)
BLAS       gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, dtype, *,
           batch=1, stride_a=0, stride_b=0, stride_c=0, allow_tf32=False): column-major
           strided-batched like cuBLAS, C_i = alpha * op(A_i) @ op(B_i) + beta * C_i with
           X_i at X + i * stride_x elements (a row-major ``out = x @ w`` is the column-major
           ``out^T = w^T @ x^T``: swap the operands); 16-bit floats accumulate in float32;
           gemm_plan(transa, transb, m, n, k, lda, ldb, ldc, dtype, *, batch=1, stride_a=0,
           stride_b=0, stride_c=0, allow_tf32=False) -> run(alpha, a, b, beta, c): the same
           product with its shape arguments checked once, for a caller that repeats one
           layout (the CUDA ``_gemm`` kernel); the caller checks that its operands lie inside
           their buffers (``gemm_span``), the GPU driver's ``run`` does not look them up
arrays     as_array(ptr, shape, strides, dtype) -> an array of the runtime's array library
           over device memory, no copy (``strides`` in bytes, non-negative; a cupy.ndarray on
           a GPU, a NumPy view on the emulator), array_library() -> a context manager
           yielding an ``ArrayLibrary`` (the library's array, FFT, linear algebra and special
           function namespaces: CuPy/cuFFT/cuSOLVER on a GPU, NumPy/SciPy on the emulator)
           inside which the library's own allocations come from this runtime's pool and its
           work is queued on the current stream (the backends of gt.linalg and gt.fft)
graphs     begin_capture() (the current stream's work from now on is recorded, not run;
           blocks freed meanwhile stay reserved for the graph; host reads and device
           synchronisation raise), end_capture() -> graph (.launch(): replay on the current
           stream, .release(): return its blocks), hold(obj) (keep an object the captured work
           reads alive with the graph), capturing (attribute: a capture is open),
           blas_captures (attribute: gemm records into an open capture; where it is False,
           products inside a capture run the tiled gemm kernel)
IPC        ipc_export(ptr) -> (handle, offset): a picklable handle another process opens to
           reach the allocation holding ``ptr`` and ptr's offset in it (the host first waits
           for the current stream, so the receiver sees the data as of the export);
           ipc_open(handle) -> DevicePtr: the allocation mapped into this process;
           ipc_close(ptr): unmap it
foreign    adopt_external(ptr, nbytes) -> bool: make another library's device memory usable
           by copies and launches (False when it already lies in a live allocation of this
           runtime, True when it was registered and drop_external(ptr) must follow);
           external_stream(handle) -> stream: another library's stream (DLPack's handshake)
caps       name ("cupy", "emulator"), is_emulated, synchronous_launches (every launch and copy
           has finished when the call returns: host time is device time, errors can be
           checked at once)

Both drivers, and user kernels (gputensor/cuda/kernels.py), read a kernel's signature the same
way: ``parse_kernels`` lists a source's launchable kernels and their ``Param``s, and
``scalar_value`` converts a scalar argument to its parameter's C type (``SCALAR_DTYPES``).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

RUNTIME_METHODS = (
    "alloc", "free", "alloc_host",
    "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "upload",
    "compile", "get_kernel", "launch", "launcher", "kernel_addresses",
    "create_stream", "default_stream", "current_stream", "create_event", "elapsed_time",
    "synchronize",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "memory_stats", "empty_cache", "mem_get_info",
    "set_memory_fraction",
    "device_count", "properties", "make_current", "gemm", "gemm_plan",
    "as_array", "array_library", "begin_capture", "end_capture", "hold",
    "ipc_export", "ipc_open", "ipc_close", "adopt_external", "drop_external",
    "external_stream",
)
RUNTIME_ATTRIBUTES = ("name", "is_emulated", "synchronous_launches", "device_index",
                      "capturing", "blas_captures")
CAPTURE_ERROR = ("CUDA error: operation not permitted when stream is capturing "
                 "(cudaErrorStreamCaptureUnsupported): {what} during a CUDA graph capture")


@dataclass(frozen=True)
class ArrayLibrary:
    """The namespaces of a runtime's array library (``array_library()``): ``xp`` (numpy /
    cupy), ``fft`` (scipy.fft / cupy.fft), ``linalg`` (numpy.linalg / cupy.linalg),
    ``scipy_linalg`` (scipy.linalg / cupyx.scipy.linalg), ``special`` (scipy.special /
    cupyx.scipy.special); on CuPy also ``cusolver`` (the raw cuSOLVER bindings) and
    ``device`` (cupy.cuda.device: the library handles). Modules are imported on first use of
    the attribute."""

    names: tuple[tuple[str, str], ...]

    def __getattr__(self, attr: str) -> Any:
        for key, module in self.names:
            if key == attr:
                import importlib
                return importlib.import_module(module)
        raise AttributeError(attr)


HOST_LIBRARY = ArrayLibrary((("xp", "numpy"), ("fft", "scipy.fft"), ("linalg", "numpy.linalg"),
                             ("scipy_linalg", "scipy.linalg"), ("special", "scipy.special")))
CUPY_LIBRARY = ArrayLibrary((("xp", "cupy"), ("fft", "cupy.fft"), ("linalg", "cupy.linalg"),
                             ("scipy_linalg", "cupyx.scipy.linalg"),
                             ("special", "cupyx.scipy.special"),
                             ("cusolver", "cupy_backends.cuda.libs.cusolver"),
                             ("device", "cupy.cuda.device")))


def array_span(shape: Any, strides: Any, itemsize: int) -> int:
    """Bytes from the first to one past the last element of a strided array (0 if empty)."""
    if any(int(n) == 0 for n in shape):
        return 0
    return itemsize + sum((int(n) - 1) * int(s) for n, s in zip(shape, strides, strict=True))


def work_done(raw: Any) -> bool:
    """Whether a runtime stream or event has finished its work: ``query()`` (the emulator's
    objects) or ``.done`` (CuPy's ``Stream``/``Event``)."""
    q = getattr(raw, "query", None)
    if callable(q):
        return bool(q())
    return bool(getattr(raw, "done", True))


def missing_methods(runtime: Any) -> list[str]:
    """The interface methods and attributes ``runtime`` lacks (empty for a complete driver)."""
    return [m for m in RUNTIME_METHODS if not callable(getattr(runtime, m, None))] + \
        [a for a in RUNTIME_ATTRIBUTES if not hasattr(runtime, a)]


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


class AcceleratorError(RuntimeError):
    """A CUDA runtime call failed ("CUDA error: ..."; torch.AcceleratorError)."""


class CompileError(RuntimeError):
    """A kernel source was rejected: by the compiler, or a kernel signature that cannot be
    passed arguments (a reference or pointer-to-pointer parameter)."""


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

    A freed base stays in the table, *retired* (owner None), until ``RETIRED_LIMIT`` of them
    pile up. Pools hand the same addresses out again and again, and re-adding a retired base
    only replaces its value, where deleting the key and inserting it again uses up a fresh dict
    slot: every few thousand frees the dict (and the sorted base list) would be rebuilt, a host
    allocation the size of the whole table that the profiler's memory meter reads as memory the
    program kept. Retired entries also let a stale pointer be reported as a use after free.
    """

    RETIRED_LIMIT = 4096

    def __init__(self) -> None:
        self._bases: list[int] = []  # sorted, live and retired
        self._entries: dict[int, tuple[int, Any]] = {}  # base -> (size, owner or None)
        self._retired = 0
        # Read-only alias for callers' fast path: a pointer that is exactly a block's start
        # (the common kernel argument) is one dict lookup instead of a bisect; an entry whose
        # owner is None is a freed block.
        self.by_base = self._entries

    def __len__(self) -> int:
        return len(self._entries) - self._retired

    def __contains__(self, base: int) -> bool:
        entry = self._entries.get(int(base))
        return entry is not None and entry[1] is not None

    def add(self, base: int, size: int, owner: Any) -> None:
        base = int(base)
        old = self._entries.get(base)
        if old is None:
            bisect.insort(self._bases, base)
        elif old[1] is None:
            self._retired -= 1
        else:
            raise ValueError(f"allocation at {DevicePtr(base)!r} handed out twice: its "
                             f"{old[0]}-byte block is still live")
        self._entries[base] = (size, owner)

    def pop(self, base: int) -> tuple[int, Any]:
        base = int(base)
        entry = self._entries.get(base)
        if entry is None:
            raise ValueError(f"free of {DevicePtr(base)!r}: not the start of a live device "
                             f"allocation (a pointer into a block?)")
        if entry[1] is None:
            raise ValueError(f"double free of {DevicePtr(base)!r}: its {entry[0]}-byte "
                             f"allocation was already freed")
        self._entries[base] = (entry[0], None)
        self._retired += 1
        if self._retired > self.RETIRED_LIMIT:
            self._drop_retired()
        return entry

    def _drop_retired(self) -> None:
        for base in [b for b, (_, owner) in self._entries.items() if owner is None]:
            del self._entries[base]  # in place: by_base aliases this dict
        self._bases = sorted(self._entries)
        self._retired = 0

    def lookup(self, ptr: int, nbytes: int) -> tuple[int, Any, int]:
        ptr = int(ptr)
        if nbytes < 0:
            raise ValueError(f"negative byte count {nbytes} at {DevicePtr(ptr)!r}")
        freed = None  # the retired block holding ptr, if no live one does
        i = bisect.bisect_right(self._bases, ptr) - 1
        while i >= 0:  # retired bases may lie inside a live block a pool merged since
            base = self._bases[i]
            size, owner = self._entries[base]
            i -= 1
            if owner is None:
                if freed is None and ptr < base + size:
                    freed = (base, size)
                continue
            if ptr + nbytes <= base + size and (ptr < base + size or nbytes == 0):
                return base, owner, ptr - base
            if ptr < base + size:
                raise IndexError(f"device access of {nbytes} bytes at {DevicePtr(ptr)!r} "
                                 f"(offset {ptr - base}) overruns its allocation of {size} "
                                 f"bytes at {DevicePtr(base)!r}")
            break
        if freed is not None:
            raise IndexError(f"illegal device address {DevicePtr(ptr)!r} ({nbytes} bytes): "
                             f"use after free, inside the freed {freed[1]}-byte allocation "
                             f"at {DevicePtr(freed[0])!r}")
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


def gemm_span(trans: str, rows: int, cols: int, ld: int, batch: int, stride: int) -> int:
    """Elements from the first to one past the last element a strided-batched gemm operand
    op(X) of shape (rows, cols) touches (0 when it has none)."""
    r, c = gemm_op_shape(trans, rows, cols)
    one = gemm_extent(r, c, ld)
    return 0 if one == 0 or batch == 0 else (batch - 1) * stride + one


def checked_gemm_plan(rt: Any, transa: str, transb: str, m: int, n: int, k: int, lda: int,
                      ldb: int, ldc: int, dtype: Any, **batching: Any) -> Any:
    """A ``gemm_plan`` that calls ``rt.gemm`` (every check on every call): the emulator's,
    where a launch's host cost does not matter."""
    check_trans(transa), check_trans(transb)

    def run(alpha: Any, a: int, b: int, beta: Any, c: int) -> None:
        rt.gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, dtype, **batching)

    return run


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


# ---- kernel signatures ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One kernel parameter as written in the source."""

    name: str
    ctype: str  # the declared type, qualifiers normalised: "const float*", "int"
    base: str  # pointee (for pointers) or the scalar type, without cv-qualifiers
    pointer: bool
    const: bool  # pointee is const (pointers only)


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{"
)
_QUALIFIERS = re.compile(r"\b(?:__restrict__|__restrict|restrict|volatile)\b")


def _parse_param(text: str, kernel: str) -> Param:
    text = " ".join(_QUALIFIERS.sub(" ", text).replace("*", " * ").replace("&", " & ").split())
    m = re.fullmatch(r"(.*?)\s*([A-Za-z_]\w*)", text)
    if not m or not m.group(1):
        raise CompileError(f"kernel '{kernel}': cannot parse parameter '{text}'")
    ctype, name = m.group(1), m.group(2)
    if "&" in ctype:
        raise CompileError(f"kernel '{kernel}': reference parameter '{name}' is not allowed")
    pointer = "*" in ctype
    if ctype.count("*") > 1:
        raise CompileError(f"kernel '{kernel}': parameter '{name}' is a pointer to pointer")
    pointee = ctype.split("*")[0] if pointer else ctype
    const = bool(re.search(r"\bconst\b", pointee))
    base = " ".join(w for w in pointee.split() if w != "const")
    return Param(name, ctype.replace(" *", "*"), base, pointer, const and pointer)


def parse_kernels(source: str) -> dict[str, tuple[Param, ...]]:
    """Non-template ``__global__`` kernels in ``source`` and their parameter lists."""
    code = _COMMENTS.sub(" ", source)
    kernels: dict[str, tuple[Param, ...]] = {}
    for m in _KERNEL.finditer(code):
        before = code[: m.start()].rstrip()
        before = re.sub(r'extern\s+"C"\s*$', "", before).rstrip()
        if re.search(r"\btemplate\s*<[^;{}]*>$", before):  # needs explicit instantiation
            continue
        name, plist = m.group(1), m.group(2).strip()
        items = [] if plist in ("", "void") else plist.split(",")
        kernels[name] = tuple(_parse_param(p, name) for p in items)
    return kernels


# Scalar parameter C types and their NumPy dtypes.
_INT_TYPES = {
    ("int", "signed", "signed int", "int32_t"): "int32",
    ("unsigned", "unsigned int", "uint32_t"): "uint32",
    ("long", "long int", "long long", "long long int", "int64_t", "ptrdiff_t", "ssize_t",
     "int64"): "int64",
    ("unsigned long", "unsigned long int", "unsigned long long", "unsigned long long int",
     "uint64_t", "size_t"): "uint64",
    ("short", "short int", "int16_t"): "int16",
    ("unsigned short", "unsigned short int", "uint16_t"): "uint16",
    ("char", "signed char", "int8_t"): "int8",
    ("unsigned char", "uint8_t"): "uint8",
}
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
SCALAR_DTYPES: dict[str, np.dtype] = {
    t: np.dtype(d) for names, d in _INT_TYPES.items() for t in names}
SCALAR_DTYPES.update({"float": np.dtype("float32"), "double": np.dtype("float64"),
                      "bool": np.dtype("bool"), "__half": np.dtype("float16"),
                      "half": np.dtype("float16"), "__nv_bfloat16": BFLOAT16,
                      "nv_bfloat16": BFLOAT16})
# Pointer element types: the scalar table plus CUDA vector types (arrays of their element) and
# complex.cuh's value type (interleaved (re, im), like NumPy's complex).
POINTEE_DTYPES: dict[str, np.dtype] = dict(SCALAR_DTYPES)
POINTEE_DTYPES.update({
    "float2": np.dtype("float32"), "float3": np.dtype("float32"), "float4": np.dtype("float32"),
    "double2": np.dtype("float64"), "int2": np.dtype("int32"), "int4": np.dtype("int32"),
    "uint2": np.dtype("uint32"), "uint4": np.dtype("uint32"),
    "gt::complex<float>": np.dtype("complex64"), "gt::complex<double>": np.dtype("complex128")})


def scalar_value(kernel: str, p: Param, value: Any) -> np.generic:
    """``value`` as a NumPy scalar of parameter ``p``'s C type, checked: an integer parameter
    takes an integer that fits, a floating one a real number that does not overflow it.
    16-bit float parameters come back as their uint16 bit pattern. Both drivers pass these to
    kernels, so a Python float never lands in a ``float`` as a double."""
    dtype = SCALAR_DTYPES.get(p.base)
    where = f"kernel '{kernel}', parameter '{p.name}' ({p.ctype})"
    if dtype is None:
        raise TypeError(f"{where}: scalar parameters of type '{p.base}' are not supported")
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise TypeError(f"{where}: expected a scalar, got an array of shape {value.shape}")
        value = value[()]
    if dtype.kind in "iu" or dtype == np.bool_:
        if isinstance(value, (float, np.floating)) or \
                not isinstance(value, (int, np.integer, np.bool_)):
            raise TypeError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        info = (0, 1) if dtype == np.bool_ else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        if not info[0] <= int(value) <= info[1]:
            raise OverflowError(f"{where}: {int(value)} does not fit (range {info[0]}..{info[1]})")
        return dtype.type(int(value))
    if not isinstance(value, (int, float, np.integer, np.floating)) or \
            isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: expected a real number, got {type(value).__name__} {value!r}")
    fval = float(value)
    with np.errstate(over="ignore"):
        narrowed = np.array(fval).astype(dtype)
    if math.isfinite(fval) and not math.isfinite(float(narrowed)):
        raise OverflowError(f"{where}: {fval!r} overflows {p.base}")
    if dtype.itemsize == 2:  # __half / __nv_bfloat16: pass the bit pattern
        return narrowed.view(np.uint16)[()]
    return narrowed[()]
