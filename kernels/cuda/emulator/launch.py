"""Load an emulated CUDA module and launch its kernels with checked arguments.

``module.launch(kernel, grid, block, args, shared_bytes=0)`` checks every argument against the
kernel's parameter list *before* running anything: NumPy arrays for pointers (dtype, contiguity
and writability checked), Python / NumPy scalars for scalars (range checked). Each kernel's
:class:`Kernel` handle prepares that checking once, when the module loads (a struct format from
the parameter types), so a launch costs a few microseconds of Python; the emulator driver
launches through the handles with device pointers already translated. Launches are serialised
with a lock: the runtime drives all of a launch's fibers on the calling thread.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..arg_packing import BITS16, CODES, HALF, code, fast_scalar_types
from ..runtime import POINTEE_DTYPES, AcceleratorError, Param, scalar_value
from . import build as _build
from .build import Built

DEFAULT_STACK_SIZE = 64 * 1024
MAX_THREADS_PER_BLOCK = 1024
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
_REVERSE = 1


class KernelError(AcceleratorError):  # a device-side fault, as PyTorch reports one
    """A kernel failed while running (assert, __trap, deadlock, stack overflow)."""


_launch_lock = threading.Lock()


def _dims(value: int | Sequence[int], what: str, kernel: str, limits: tuple[int, ...]) -> tuple:
    try:
        dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    except TypeError:  # not a number and not iterable
        dims = (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) for d in dims):
        raise ValueError(f"kernel '{kernel}': {what} must be an int or 1-3 ints, got {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, (d, lim) in enumerate(zip(dims, limits, strict=True)):
        if not 1 <= d <= lim:
            raise ValueError(f"kernel '{kernel}': {what}[{axis}] = {d} is outside [1, {lim}]")
    return dims


# ---- packing a launch ------------------------------------------------------------------------
# A launch is ONE bytes object handed to the module's generated launcher: a header (grid, block,
# flags, argument count, shared bytes, stack bytes: cuda_shim.h's LaunchHeader) and one 8-byte
# little-endian slot per argument, which the C side unpacks with memcpy. Each kernel's struct
# format is built once from its parameter list, so a launch is a type check and one
# ``Struct.pack`` call (arg_packing.py: which argument types take that path); anything else
# goes through ``scalar_value``, which either converts it or raises the precise error.
_HEADER = "<6I2I2Q"
_FAST_POINTER = frozenset((int,))
_SLOT = {c: c + "x" * (8 - struct.calcsize(c)) for c in (*CODES.values(), HALF, BITS16)}


def _fast_types(p: Param) -> frozenset:
    return _FAST_POINTER if p.pointer else fast_scalar_types(p)


def _slot(p: Param, exact: bool) -> str:
    return "Q" if p.pointer else _SLOT[code(p, exact)]


def _grid_dims(value: Any, kernel: str) -> tuple[int, ...]:
    if type(value) is int and 1 <= value <= _MAX_GRID[0]:
        return (value, 1, 1)
    return _dims(value, "grid", kernel, _MAX_GRID)


def _block_dims(value: Any, kernel: str) -> tuple[int, ...]:
    if type(value) is int and 1 <= value <= MAX_THREADS_PER_BLOCK:
        return (value, 1, 1)
    b = _dims(value, "block", kernel, _MAX_BLOCK)
    if b[0] * b[1] * b[2] > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"kernel '{kernel}': block {b} has {b[0] * b[1] * b[2]} threads; "
                         f"the limit is {MAX_THREADS_PER_BLOCK}")
    return b


class Kernel:
    """One kernel of a loaded module, its argument packing prepared once.

    ``run(grid, block, shared_bytes, values)`` launches it: pointer parameters take host
    addresses as ints (0 for null; the caller vouches for them: :meth:`Module.launch` checks
    NumPy arrays, the emulator driver checks device pointers against its allocations), scalar
    parameters take Python / NumPy numbers, converted and range-checked to the declared type.
    """

    __slots__ = ("name", "module", "params", "nargs", "pointer_indices", "_fn", "_error",
                 "_fast", "_exact", "_types", "_scalars")

    def __init__(self, module: Module, name: str, params: tuple[Param, ...], fn: Any,
                 last_error: Any) -> None:
        self.name = name
        self.module = module
        self.params = params
        self.nargs = len(params)
        self._fn = fn
        self._error = last_error
        self._fast = struct.Struct(_HEADER + "".join(_slot(p, False) for p in params))
        self._exact = struct.Struct(_HEADER + "".join(_slot(p, True) for p in params))
        self._types = tuple(_fast_types(p) for p in params)
        self._scalars = tuple(i for i, p in enumerate(params) if not p.pointer)
        self.pointer_indices = tuple(i for i, p in enumerate(params) if p.pointer)

    def __repr__(self) -> str:
        return f"<emulated CUDA kernel '{self.name}' of module '{self.module.name}'>"

    def arity_error(self, got: int) -> TypeError:
        return TypeError(f"kernel '{self.name}' takes {self.nargs} arguments "
                         f"({', '.join(p.ctype + ' ' + p.name for p in self.params)}), "
                         f"got {got}")

    def pack(self, grid: Any, block: Any, shared_bytes: Any, values: Sequence[Any],
             flags: int = 0, stack_size: int = DEFAULT_STACK_SIZE) -> bytes:
        """The launch blob: header and argument slots (raises for a bad configuration or
        argument, naming the kernel and parameter)."""
        if len(values) != self.nargs:
            raise self.arity_error(len(values))
        g = _grid_dims(grid, self.name)
        b = _block_dims(block, self.name)
        if type(shared_bytes) is not int:
            if not isinstance(shared_bytes, (int, np.integer)):
                raise ValueError(f"kernel '{self.name}': shared_bytes must be a non-negative "
                                 f"int, got {shared_bytes!r}")
            shared_bytes = int(shared_bytes)
        if shared_bytes < 0:
            raise ValueError(f"kernel '{self.name}': shared_bytes must be a non-negative int, "
                             f"got {shared_bytes}")
        if all(map(frozenset.__contains__, self._types, map(type, values))):
            try:
                return self._fast.pack(*g, *b, flags, self.nargs, shared_bytes, stack_size,
                                       *values)
            except (struct.error, OverflowError):
                pass  # out of range: scalar_value says which argument and why
        vals = list(values)
        for i in self._scalars:
            vals[i] = scalar_value(self.name, self.params[i], vals[i])
        return self._exact.pack(*g, *b, flags, self.nargs, shared_bytes, stack_size, *vals)

    def run(self, grid: Any, block: Any, shared_bytes: Any, values: Sequence[Any],
            flags: int = 0, stack_size: int = DEFAULT_STACK_SIZE) -> None:
        """Pack and launch; a failure inside the kernel raises :class:`KernelError`."""
        blob = self.pack(grid, block, shared_bytes, values, flags, stack_size)
        with _launch_lock:
            if self._fn(blob):
                raise KernelError(f"kernel '{self.name}' (module '{self.module.name}'): "
                                  f"{self._error().decode(errors='replace')}")


def _address(kernel: str, p: Param, value: Any) -> int:
    """A NumPy array argument's data address, after checking it suits parameter ``p``."""
    if value is None:
        return 0
    where = f"kernel '{kernel}', parameter '{p.name}' ({p.ctype})"
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where}: expected a NumPy array, got {type(value).__name__}")
    expected = POINTEE_DTYPES.get(p.base)
    if expected is not None and value.dtype != expected:
        raise TypeError(f"{where}: expected an array of {expected}, got {value.dtype}")
    if not value.flags.c_contiguous:
        raise ValueError(f"{where}: the array must be C-contiguous (shape {value.shape}, "
                         f"strides {value.strides})")
    if not p.const and not value.flags.writeable:
        raise ValueError(f"{where}: the kernel may write through it but the array is read-only")
    return value.__array_interface__["data"][0]


class Module:
    """A compiled emulated CUDA module: ``launch`` its kernels by name."""

    def __init__(self, built: Built):
        self.name = built.name
        self.path = built.path
        self.kernels: dict[str, tuple[Param, ...]] = dict(built.kernels)
        last_error = _load_runtime(built.runtime).gt_emu_last_error
        self._lib = ctypes.CDLL(str(built.path))
        self._handles: dict[str, Kernel] = {}
        for k, params in self.kernels.items():
            fn = getattr(self._lib, f"gt_emu_launch__{k}")
            fn.argtypes = (ctypes.c_char_p,)
            fn.restype = ctypes.c_int
            self._handles[k] = Kernel(self, k, params, fn, last_error)

    def __repr__(self) -> str:
        return f"<emulated CUDA module '{self.name}': {', '.join(self.kernels)}>"

    def kernel(self, name: str) -> Kernel:
        """The launch handle of kernel ``name``."""
        k = self._handles.get(name)
        if k is None:
            raise KeyError(f"module '{self.name}' has no kernel '{name}' "
                           f"(kernels: {', '.join(self.kernels)})")
        return k

    def launch(self, kernel: str, grid: int | Sequence[int], block: int | Sequence[int],
               args: Sequence[Any], shared_bytes: int = 0, *, reverse_threads: bool = False,
               stack_size: int = DEFAULT_STACK_SIZE) -> None:
        """Run ``kernel<<<grid, block, shared_bytes>>>(*args)`` on the CPU.

        Pointer parameters take C-contiguous NumPy arrays of the pointee type, or None.
        ``reverse_threads`` runs each block's threads in reverse order (between barriers), which
        exposes reads of shared memory that a missing ``__syncthreads`` leaves unordered.
        ``stack_size`` is each CUDA thread's stack in bytes; overflowing it raises KernelError.
        """
        k = self.kernel(kernel)
        if len(args) != k.nargs:
            raise k.arity_error(len(args))
        if stack_size < 16 * 1024:
            raise ValueError(f"kernel '{kernel}': stack_size must be at least 16 KiB")
        values = [_address(kernel, p, a) if p.pointer else a
                  for p, a in zip(k.params, args, strict=True)]
        k.run(grid, block, shared_bytes, values, _REVERSE if reverse_threads else 0,
              int(stack_size))


_runtimes: dict[str, ctypes.CDLL] = {}


def _load_runtime(path: Any) -> ctypes.CDLL:
    """Load the shared fiber runtime once, globally, so modules bind to this one copy."""
    key = str(path)
    lib = _runtimes.get(key)
    if lib is None:
        lib = _runtimes[key] = ctypes.CDLL(key, mode=ctypes.RTLD_GLOBAL)
        lib.gt_emu_last_error.argtypes = ()
        lib.gt_emu_last_error.restype = ctypes.c_char_p
    return lib


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
