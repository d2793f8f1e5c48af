"""Load an emulated CUDA module and launch its kernels with checked arguments.

``module.launch(kernel, grid, block, args, shared_bytes=0)`` checks every argument against the
kernel's parameter list *before* running anything: NumPy arrays for pointers (dtype, contiguity
and writability checked), Python / NumPy scalars for scalars (range checked). Launches are
serialised with a lock: the runtime drives all of a launch's fibers on the calling thread.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import build as _build
from .build import Built, Param

try:  # bfloat16 arrays / scalars
    import ml_dtypes

    _BF16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _BF16 = None

DEFAULT_STACK_SIZE = 64 * 1024
MAX_THREADS_PER_BLOCK = 1024
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
_REVERSE = 1


class KernelError(RuntimeError):
    """A kernel failed while running (assert, __trap, deadlock, stack overflow)."""


def _dt(name: str) -> np.dtype:
    return np.dtype(name)


# Scalar parameter types: (ctypes type, numpy dtype, kind) with kind "i" integer, "f" float,
# "b" bool, "h" 16-bit float stored as bits.
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
_SCALARS: dict[str, np.dtype] = {t: _dt(d) for names, d in _INT_TYPES.items() for t in names}
_SCALARS.update({"float": _dt("float32"), "double": _dt("float64"), "bool": _dt("bool"),
                 "__half": _dt("float16"), "half": _dt("float16")})
if _BF16 is not None:
    _SCALARS["__nv_bfloat16"] = _SCALARS["nv_bfloat16"] = _BF16

# Pointer element types: the scalar table plus CUDA vector types (arrays of their element).
_POINTEES: dict[str, np.dtype] = dict(_SCALARS)
_POINTEES.update({"float2": _dt("float32"), "float3": _dt("float32"), "float4": _dt("float32"),
                  "double2": _dt("float64"), "int2": _dt("int32"), "int4": _dt("int32"),
                  "uint2": _dt("uint32"), "uint4": _dt("uint32"),
                  # kernels/cuda/complex.cuh's value type: interleaved (re, im) like NumPy's
                  "gt::complex<float>": _dt("complex64"), "gt::complex<double>": _dt("complex128")})

_CTYPES = {
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16, "int32": ctypes.c_int32, "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
    "float64": ctypes.c_double, "bool": ctypes.c_bool,
}

_LAUNCH_ARGTYPES = [ctypes.POINTER(ctypes.c_uint), ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t,
                    ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]

_launch_lock = threading.Lock()


def _dims(value: int | Sequence[int], what: str, kernel: str, limits: tuple[int, ...]) -> tuple:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise ValueError(f"kernel '{kernel}': {what} must be an int or 1-3 ints, got {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, (d, lim) in enumerate(zip(dims, limits, strict=True)):
        if not 1 <= d <= lim:
            raise ValueError(f"kernel '{kernel}': {what}[{axis}] = {d} is outside [1, {lim}]")
    return dims


def scalar_value(kernel: str, p: Param, value: Any) -> np.generic:
    """``value`` as a NumPy scalar of parameter ``p``'s C type, checked: an integer parameter
    takes an integer that fits, a floating one a real number that does not overflow it.
    16-bit float parameters come back as their uint16 bit pattern. The CuPy driver passes
    these to real kernels too, so a Python float never lands in a ``float`` as a double."""
    dtype = _SCALARS.get(p.base)
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


def _scalar(kernel: str, p: Param, value: Any) -> ctypes._SimpleCData:
    v = scalar_value(kernel, p, value)
    return (ctypes.c_uint16 if v.dtype == np.uint16 else _CTYPES[v.dtype.name])(v.item())


def _pointer(kernel: str, p: Param, value: Any) -> ctypes.c_void_p:
    where = f"kernel '{kernel}', parameter '{p.name}' ({p.ctype})"
    if value is None:
        return ctypes.c_void_p(None)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where}: expected a NumPy array, got {type(value).__name__}")
    expected = _POINTEES.get(p.base)
    if expected is not None and value.dtype != expected:
        raise TypeError(f"{where}: expected an array of {expected}, got {value.dtype}")
    if not value.flags.c_contiguous:
        raise ValueError(f"{where}: the array must be C-contiguous (shape {value.shape}, "
                         f"strides {value.strides})")
    if not p.const and not value.flags.writeable:
        raise ValueError(f"{where}: the kernel may write through it but the array is read-only")
    return ctypes.c_void_p(value.ctypes.data)


class Module:
    """A compiled emulated CUDA module: ``launch`` its kernels by name."""

    def __init__(self, built: Built):
        self.name = built.name
        self.path = built.path
        self.kernels: dict[str, tuple[Param, ...]] = dict(built.kernels)
        _load_runtime(built.runtime)
        self._lib = ctypes.CDLL(str(built.path))
        self._fns = {}
        for k in self.kernels:
            fn = getattr(self._lib, f"gt_emu_launch__{k}")
            fn.argtypes = _LAUNCH_ARGTYPES
            fn.restype = ctypes.c_int
            self._fns[k] = fn

    def __repr__(self) -> str:
        return f"<emulated CUDA module '{self.name}': {', '.join(self.kernels)}>"

    def launch(self, kernel: str, grid: int | Sequence[int], block: int | Sequence[int],
               args: Sequence[Any], shared_bytes: int = 0, *, reverse_threads: bool = False,
               stack_size: int = DEFAULT_STACK_SIZE) -> None:
        """Run ``kernel<<<grid, block, shared_bytes>>>(*args)`` on the CPU.

        ``reverse_threads`` runs each block's threads in reverse order (between barriers), which
        exposes reads of shared memory that a missing ``__syncthreads`` leaves unordered.
        ``stack_size`` is each CUDA thread's stack in bytes; overflowing it raises KernelError.
        """
        if kernel not in self.kernels:
            raise KeyError(f"module '{self.name}' has no kernel '{kernel}' "
                           f"(kernels: {', '.join(self.kernels)})")
        params = self.kernels[kernel]
        if len(args) != len(params):
            raise TypeError(f"kernel '{kernel}' takes {len(params)} arguments "
                            f"({', '.join(p.ctype + ' ' + p.name for p in params)}), "
                            f"got {len(args)}")
        g = _dims(grid, "grid", kernel, _MAX_GRID)
        b = _dims(block, "block", kernel, _MAX_BLOCK)
        if b[0] * b[1] * b[2] > MAX_THREADS_PER_BLOCK:
            raise ValueError(f"kernel '{kernel}': block {b} has {b[0] * b[1] * b[2]} threads; "
                             f"the limit is {MAX_THREADS_PER_BLOCK}")
        if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
            raise ValueError(f"kernel '{kernel}': shared_bytes must be a non-negative int")
        if stack_size < 16 * 1024:
            raise ValueError(f"kernel '{kernel}': stack_size must be at least 16 KiB")
        values = [_pointer(kernel, p, a) if p.pointer else _scalar(kernel, p, a)
                  for p, a in zip(params, args, strict=True)]
        argv = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        dims = (ctypes.c_uint * 6)(*g, *b)
        err = ctypes.create_string_buffer(2048)
        flags = _REVERSE if reverse_threads else 0
        with _launch_lock:
            rc = self._fns[kernel](dims, int(shared_bytes), flags, int(stack_size), argv, err,
                                   len(err))
        if rc != 0:
            raise KernelError(f"kernel '{kernel}' (module '{self.name}'): "
                              f"{err.value.decode(errors='replace')}")


_runtimes: dict[str, ctypes.CDLL] = {}


def _load_runtime(path: Any) -> None:
    """Load the shared fiber runtime once, globally, so modules bind to this one copy."""
    key = str(path)
    if key not in _runtimes:
        _runtimes[key] = ctypes.CDLL(key, mode=ctypes.RTLD_GLOBAL)


_modules: dict[str, Module] = {}
_modules_lock = threading.Lock()


def compile_source(source: str, name: str, extra_flags: Sequence[str] = ()) -> Module:
    """Compile a ``.cu`` source for the CPU emulator (disk- and memory-cached) and load it."""
    built = _build.build_source(source, name, tuple(extra_flags))
    key = str(built.path)
    with _modules_lock:
        mod = _modules.get(key)
        if mod is None:
            mod = _modules[key] = Module(built)
    return mod


def clear_memory_cache() -> None:
    """Forget the modules this process loaded; the next compile_source re-reads the disk cache."""
    with _modules_lock:
        _modules.clear()
