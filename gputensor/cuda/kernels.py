"""User CUDA kernels on gputensor tensors: ``gt.cuda.compile_kernel`` and ``gt.cuda.load_inline``.

A user kernel takes the path the backend's own kernels take (kernels/cuda/device.py): the
active runtime's ``compile`` builds it, with the project's NVRTC options
(``device.NVRTC_OPTIONS``) plus the caller's, so on a GPU it is the project's NVRTC step with its
disk cache keyed by the source, every header it includes (a user header found through ``-I``
too), the options, the arch and the NVRTC build (kernels/cuda/binaries.py), and in CI the
emulator's g++ build, cached by the same inputs (kernels/cuda/emulator/build.py). Launches go
through ``device.launch_kernel``, so the profiler records them, and the runtime converts and
checks each scalar against the parameter type it parsed from the source.

    saxpy = gt.cuda.compile_kernel(r'''
    #include "common.cuh"
    extern "C" __global__ void saxpy(float a, const float* x, float* y, long long n) {
        for (GT_GRID_STRIDE(i, n)) y[i] = a * x[i] + y[i];
    }''', "saxpy")
    saxpy((64,), (256,), (2.0, x, y, y.numel()))      # grid, block, args (like CuPy's RawKernel)

Arguments: a CUDA tensor passes as a pointer to its first element (strides are the kernel's
business: pass ``x.contiguous()``, or the strides as scalars), ``None`` as a null pointer, a
Python or NumPy number as a scalar of the declared C type (range-checked: an ``int`` parameter
refuses 2**40, a ``float`` refuses a value that overflows it). A tensor must live on the active
runtime's current device and match the pointee type (``float*`` takes float32; ``void*`` and
``char*``/``unsigned char*`` take any dtype as raw bytes; integer pointees of the same width
take each other's tensors; ``float2*``/``double2*`` take complex64/complex128). Launches are
asynchronous on a GPU, like every kernel launch: a tensor used on another stream needs
``record_stream`` as in PyTorch, and a kernel writing a tensor does not bump its version
counter (a ``gt.library.custom_op`` with ``mutates_args`` does).

Dynamic shared memory: the emulator gives each block ``shared_mem`` bytes through
``GT_DYNAMIC_SHARED(type, name)`` from ``common.cuh`` (which also compiles with NVRTC); a plain
``extern __shared__ T s[];`` compiles with NVRTC only.

How ``load_inline`` differs from ``torch.utils.cpp_extension.load_inline``: there is no host
C++ code (``cpp_sources`` must be empty), no pybind11 module and no ``extra_cflags``/
``extra_ldflags``; the CUDA sources hold ``__global__`` kernels, and the module it returns has
one :class:`CudaKernel` per kernel, launched from Python with a grid, a block and arguments.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gputensor.kernels.cuda import device as _kdevice
from gputensor.kernels.cuda.runtime import (
    BFLOAT16,
    NULL,
    POINTEE_DTYPES,
    DevicePtr,
    parse_kernels,
)

__all__ = ["CudaKernel", "CudaModule", "compile_kernel", "load_inline"]

_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
_MAX_THREADS = 1024
_MODULE_NAME = re.compile(r"[A-Za-z_][\w.-]*")

# Pointees any tensor may be passed to (raw bytes), and the CUDA vector types whose pairs of
# reals also take a complex tensor.
_BYTES = frozenset(("void", "char", "signed char", "unsigned char", "int8_t", "uint8_t"))
_VECTOR2 = frozenset(("float2", "double2"))


def _pointee_ok(base: str, dt: Any) -> bool:
    """Whether a tensor of gputensor dtype ``dt`` may be passed to a ``base*`` parameter:
    integers by width (any signedness), floats and complex exactly (``float2``/``double2``
    also take complex64/complex128), ``bool`` any 1-byte non-float dtype."""
    want = POINTEE_DTYPES.get(base)
    if base in _BYTES or want is None:  # raw bytes, or a user-defined type: the kernel's call
        return True
    npdt = dt.np_dtype
    if want.kind == "b":
        return dt.itemsize == 1 and npdt.kind in "biu"
    if want.kind in "iu":
        return npdt.kind in "iu" and npdt.itemsize == want.itemsize
    if npdt == want:
        return True
    return base in _VECTOR2 and npdt.kind == "c" and npdt.itemsize == 2 * want.itemsize


def _expected_dtypes(base: str) -> str:
    want = POINTEE_DTYPES.get(base)
    if want is None or want.kind == "b":
        return "the matching dtype" if want is None else "a 1-byte bool or integer dtype"
    if want.kind in "iu":
        return f"an integer dtype of {want.itemsize} bytes"
    name = "bfloat16" if want == BFLOAT16 else want.name
    extra = (" (or complex" + ("64" if name == "float32" else "128") + ")"
             if base in _VECTOR2 else "")
    return f"gputensor.{name}{extra}"


def _runtime() -> Any:
    """The runtime serving "cuda" (initialised on first use; a clear error without CUDA)."""
    rt = _kdevice.active()
    if rt is None:
        from .devices import _require

        _require()
        rt = _kdevice.runtime()
    return rt


def _normalize_options(options: Iterable[str] | str | None) -> tuple[str, ...]:
    """NVRTC options as single tokens: ``-I dir``/``--include-path=dir`` become ``-I<abs dir>``
    (the form both compile caches key headers by), ``-D X`` becomes ``-DX``."""
    if options is None:
        return ()
    if isinstance(options, str):
        options = [options]
    items = [str(o) for o in options]
    out: list[str] = []
    i = 0
    while i < len(items):
        o = items[i]
        if o in ("-I", "-D", "--include-path", "--define-macro"):
            if i + 1 >= len(items):
                raise ValueError(f"compile option {o!r} needs a value after it")
            o = ("-I" if o in ("-I", "--include-path") else "-D") + items[i + 1]
            i += 1
        elif o.startswith("--include-path="):
            o = "-I" + o.split("=", 1)[1]
        elif o.startswith("--define-macro="):
            o = "-D" + o.split("=", 1)[1]
        if o.startswith("-I"):
            o = "-I" + str(Path(o[2:]).expanduser().resolve())
        if o.startswith(("-arch", "--gpu-architecture", "-code")):
            raise ValueError(f"compile option {o!r}: the architecture is the device's (the "
                             f"runtime picks it); leave it out")
        out.append(o)
        i += 1
    return tuple(out)


def _header_fingerprint(source: str, options: Sequence[str]) -> str:
    """A digest of every header ``source`` includes from the include folders: a program
    compiled before a header changed is not reused after (the disk caches key the same)."""
    from gputensor.kernels.cuda.binaries import included_files

    dirs = [Path(o[2:]) for o in (*_kdevice.NVRTC_OPTIONS, *options) if o.startswith("-I")]
    h = hashlib.sha256()
    for path in included_files(source, dirs):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class _Program:
    """One source + options, compiled once per runtime into one module."""

    def __init__(self, source: str, module_name: str, options: tuple[str, ...],
                 entries: tuple[str, ...]) -> None:
        self.source = source
        self.module_name = module_name
        self.options = options
        # NVRTC lowers each entry to its symbol (a C++ kernel's mangled name; an extern "C"
        # kernel's own); the emulator launches every kernel by name.
        self.entries = entries
        self._modules: dict[int, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def compile_options(self) -> tuple[str, ...]:
        return (*_kdevice.NVRTC_OPTIONS, *self.options)

    def module(self, rt: Any, verbose: bool = False) -> Any:
        entry = self._modules.get(id(rt))
        if entry is None or entry[0] is not rt:
            with self._lock:
                entry = self._modules.get(id(rt))
                if entry is None or entry[0] is not rt:
                    t0 = time.perf_counter()
                    module = rt.compile(self.source, self.module_name,
                                        options=self.compile_options(),
                                        name_expressions=self.entries)
                    if verbose:
                        print(f"gputensor: built module '{self.module_name}' "
                              f"({', '.join(self.entries)}) for {type(rt).__name__} in "
                              f"{time.perf_counter() - t0:.2f} s")
                    entry = self._modules[id(rt)] = (rt, module)
        return entry[1]


_programs: dict[tuple, _Program] = {}
_programs_lock = threading.Lock()


def _program(source: str, module_name: str, options: tuple[str, ...],
             entries: tuple[str, ...]) -> _Program:
    key = (source, module_name, options, entries, _header_fingerprint(source, options))
    with _programs_lock:
        prog = _programs.get(key)
        if prog is None:
            prog = _programs[key] = _Program(source, module_name, options, entries)
        return prog


def _no_kernel(name: str, kernels: Iterable[str], where: str) -> ValueError:
    names = ", ".join(kernels) or "none"
    return ValueError(f"{where} defines no kernel {name!r} (its non-template __global__ "
                      f"kernels: {names}); a template kernel needs an extern \"C\" wrapper "
                      f"that instantiates it")


def _dims(value: Any, what: str, kernel: str, limits: tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims: tuple = (value,)
    elif isinstance(value, (tuple, list)):
        dims = tuple(value)
    else:
        raise ValueError(f"kernel '{kernel}': {what} must be an int or a tuple of 1-3 ints, "
                         f"got {value!r}")
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer))
                                          and not isinstance(d, bool) for d in dims):
        raise ValueError(f"kernel '{kernel}': {what} must be an int or a tuple of 1-3 ints, "
                         f"got {value!r}")
    dims = tuple(int(d) for d in dims)
    for axis, (d, lim) in enumerate(zip(dims, limits, strict=False)):
        if not 1 <= d <= lim:
            raise ValueError(f"kernel '{kernel}': {what}[{axis}] = {d} is outside [1, {lim}]")
    return dims


class CudaKernel:
    """A compiled user kernel: ``kernel(grid, block, args, shared_mem=0, stream=None)``.

    ``grid``/``block``: an int or a tuple of 1-3 ints; ``args``: one value per kernel
    parameter (tensors, None, numbers: see the module docstring); ``shared_mem``: dynamic
    shared memory bytes per block; ``stream``: a ``gt.cuda.Stream`` (None: the current
    stream). It compiles for the active runtime on first launch (or :meth:`compile`)."""

    def __init__(self, program: _Program, name: str, params: tuple[Any, ...],
                 doc: str | None = None) -> None:
        self._program = program
        self.name = name
        self.params = params
        self._handles: dict[int, tuple[Any, Any]] = {}
        self._last: tuple[Any, Any] | None = None
        if doc:
            self.__doc__ = doc

    # -- what it is ---------------------------------------------------------------------------
    @property
    def source(self) -> str:
        return self._program.source

    @property
    def options(self) -> tuple[str, ...]:
        """The caller's compile options (the project's NVRTC_OPTIONS come first)."""
        return self._program.options

    @property
    def module_name(self) -> str:
        return self._program.module_name

    def signature(self) -> str:
        return f"{self.name}({', '.join(f'{p.ctype} {p.name}' for p in self.params)})"

    def __repr__(self) -> str:
        return f"<gputensor.cuda.CudaKernel {self.signature()} of '{self.module_name}'>"

    # -- compiling ----------------------------------------------------------------------------
    def _handle(self, rt: Any) -> Any:
        last = self._last
        if last is not None and last[0] is rt:
            return last[1]
        entry = self._handles.get(id(rt))
        if entry is None or entry[0] is not rt:
            kern = rt.get_kernel(self._program.module(rt), self.name)
            entry = self._handles[id(rt)] = (rt, kern)
        self._last = entry
        return entry[1]

    def compile(self) -> CudaKernel:
        """Compile now for the active CUDA runtime (else on first launch); returns self."""
        self._handle(_runtime())
        return self

    def nvrtc_check(self, arch: str = "sm_80") -> Any:
        """Build with the project's NVRTC step for ``arch`` (no GPU needed: the NVRTC wheel):
        what a GPU of that architecture loads, through the same disk cache
        (``kernels/cuda/binaries.Binary``)."""
        from gputensor.kernels.cuda import binaries

        return binaries.build(self.source, self.module_name, arch,
                              self._program.compile_options(), self._program.entries)

    # -- launching ----------------------------------------------------------------------------
    def __call__(self, grid: Any, block: Any, args: Sequence[Any], shared_mem: int = 0,
                 stream: Any = None) -> None:
        rt = _runtime()
        grid = _dims(grid, "grid", self.name, _MAX_GRID)
        block = _dims(block, "block", self.name, _MAX_BLOCK)
        if len(block) > 1 and np.prod(block) > _MAX_THREADS:
            raise ValueError(f"kernel '{self.name}': block {block} has {int(np.prod(block))} "
                             f"threads; the limit is {_MAX_THREADS}")
        if not isinstance(shared_mem, (int, np.integer)) or isinstance(shared_mem, bool) or \
                shared_mem < 0:
            raise ValueError(f"kernel '{self.name}': shared_mem must be a non-negative int, "
                             f"got {shared_mem!r}")
        raw = self._stream(stream, rt)
        cargs = self._arguments(args, rt)
        _kdevice.launch_kernel(rt, self._handle(rt), grid, block, int(shared_mem), cargs,
                               source=f"{self.module_name}.cu", stream=raw)

    def _stream(self, stream: Any, rt: Any) -> Any:
        if stream is None:
            return None
        from .streams import Stream

        if not isinstance(stream, Stream):
            raise TypeError(f"kernel '{self.name}': stream must be a gputensor.cuda.Stream or "
                            f"None, got {type(stream).__name__}")
        if stream._runtime is not rt:
            raise RuntimeError(f"kernel '{self.name}': the stream belongs to another CUDA "
                               f"runtime than the active one")
        return stream.raw

    def _arguments(self, args: Sequence[Any], rt: Any) -> list[Any]:
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            raise TypeError(f"kernel '{self.name}': args must be a tuple or list of the "
                            f"kernel's arguments, got {type(args).__name__}")
        params = self.params
        if len(args) != len(params):
            raise TypeError(f"kernel '{self.signature()}' takes {len(params)} arguments, got "
                            f"{len(args)}")
        out: list[Any] = []
        for i, (a, p) in enumerate(zip(args, params, strict=True)):
            where = f"kernel '{self.name}', argument {i} ('{p.ctype} {p.name}')"
            is_tensor = hasattr(a, "_storage") and hasattr(a, "_dtype")
            if p.pointer:
                if is_tensor:
                    out.append(self._tensor_pointer(a, p, rt, where))
                elif a is None:
                    out.append(NULL)
                elif isinstance(a, DevicePtr):
                    out.append(a)
                else:
                    raise TypeError(f"{where}: a pointer parameter takes a CUDA tensor or None, "
                                    f"got {type(a).__name__} {a!r}")
            else:
                if is_tensor:
                    raise TypeError(f"{where}: a scalar parameter takes a Python or NumPy "
                                    f"number, got a Tensor (use .item() for a 0-dim tensor, "
                                    f"or declare the parameter a pointer)")
                if a is None or isinstance(a, DevicePtr):
                    raise TypeError(f"{where}: a scalar parameter takes a Python or NumPy "
                                    f"number, got {type(a).__name__}")
                out.append(a)  # converted and range-checked by the runtime (its parsed types)
        return out

    @staticmethod
    def _tensor_pointer(t: Any, p: Any, rt: Any, where: str) -> DevicePtr:
        dev = t._storage.device
        if dev.type != "cuda":
            raise RuntimeError(f"{where}: expected a CUDA tensor, got one on {dev}")
        if getattr(t, "is_sparse", False):
            raise TypeError(f"{where}: a sparse tensor has no single buffer; pass its "
                            f".indices() and .values()")
        buf = t._storage._buf
        if getattr(buf, "runtime", rt) is not rt:
            raise RuntimeError(f"{where}: the tensor's memory belongs to another CUDA runtime "
                               f"than the active one")
        from .devices import current_device

        index = dev.index if dev.index is not None else 0
        if index != current_device():
            raise RuntimeError(f"{where}: the tensor is on {dev}, the current device is "
                               f"cuda:{current_device()}")
        if not _pointee_ok(p.base, t._dtype):
            raise TypeError(f"{where}: a tensor of dtype {t._dtype} does not match the pointee "
                            f"type '{p.base}' (expected {_expected_dtypes(p.base)}); declare "
                            f"the parameter void* or unsigned char* to take raw bytes")
        return _kdevice.ptr(t)


class CudaModule:
    """What :func:`load_inline` returns: one :class:`CudaKernel` attribute per kernel, all
    compiled together into one module."""

    def __init__(self, name: str, kernels: Mapping[str, CudaKernel]) -> None:
        self.__name__ = name
        self.kernels: dict[str, CudaKernel] = dict(kernels)

    def __getattr__(self, attr: str) -> CudaKernel:
        kernels = self.__dict__.get("kernels", {})
        if attr in kernels:
            return kernels[attr]
        raise AttributeError(f"CUDA module '{self.__dict__.get('__name__')}' has no kernel "
                             f"{attr!r} (kernels: {', '.join(kernels) or 'none'})")

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.kernels})

    def __repr__(self) -> str:
        return f"<gputensor.cuda.CudaModule '{self.__name__}': {', '.join(self.kernels)}>"


def compile_kernel(source: str, name: str, options: Sequence[str] | str = ()) -> CudaKernel:
    """The kernel ``name`` of CUDA C++ ``source`` as a launchable :class:`CudaKernel`.

    ``name`` is a non-template ``__global__`` kernel of the source (``extern "C"`` or not).
    ``options`` are NVRTC options after the project's own (``-I<dir>`` for headers, ``-D``
    macros, ``-std=``...); the emulator keeps ``-I``/``-D`` and g++'s ``-f``/``-O`` flags.
    Compiles for the active runtime on first launch (or ``.compile()``), through the
    project's cached NVRTC step on a GPU and the emulator's cached g++ build in CI."""
    if not isinstance(source, str):
        raise TypeError(f"compile_kernel: source must be a str, got {type(source).__name__}")
    kernels = parse_kernels(source)
    if name not in kernels:
        raise _no_kernel(name, kernels, "the source")
    opts = _normalize_options(options)
    return CudaKernel(_program(source, name, opts, (name,)), name, kernels[name])


def load_inline(name: str, cpp_sources: str | Sequence[str] | None = None,
                cuda_sources: str | Sequence[str] | None = None,
                functions: str | Sequence[str] | Mapping[str, str] | None = None,
                extra_cuda_cflags: Sequence[str] | None = None,
                extra_include_paths: Sequence[str] | None = None,
                verbose: bool = False) -> CudaModule:
    """Compile CUDA sources into one module of launchable kernels (the shape of
    ``torch.utils.cpp_extension.load_inline``, for kernels only).

    ``cuda_sources``: one source or several (joined in order); ``functions``: the kernels to
    expose (a name, names, or a {name: docstring} mapping; None: every non-template
    ``__global__`` kernel); ``extra_cuda_cflags``: NVRTC options; ``extra_include_paths``:
    folders for ``#include``. Compiles now when a CUDA runtime is available (else on first
    launch). There is no host code: ``cpp_sources`` must be empty; kernels are launched from
    Python as ``module.kernel(grid, block, args, shared_mem=0, stream=None)``."""
    if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
        raise ValueError(f"load_inline: name must be a file-name-like identifier, got {name!r}")
    if cpp_sources:
        raise NotImplementedError(
            "load_inline: host C++ code (cpp_sources) is not supported: gputensor launches "
            "kernels from Python, so pass the __global__ kernels in cuda_sources and call them "
            "as module.kernel(grid, block, args)")
    if isinstance(cuda_sources, str):
        cuda_sources = [cuda_sources]
    if not cuda_sources:
        raise ValueError("load_inline: cuda_sources is empty")
    source = "\n".join(cuda_sources)
    kernels = parse_kernels(source)
    docs: dict[str, str] = {}
    if functions is None:
        wanted = list(kernels)
    elif isinstance(functions, str):
        wanted = [functions]
    elif isinstance(functions, Mapping):
        wanted, docs = list(functions), {k: str(v) for k, v in functions.items()}
    else:
        wanted = list(functions)
    if not wanted:
        raise ValueError(f"load_inline: module '{name}' has no non-template __global__ kernel")
    for k in wanted:
        if k not in kernels:
            raise _no_kernel(k, kernels, f"module '{name}'")
    options = [*(extra_cuda_cflags or ()), *(f"-I{p}" for p in (extra_include_paths or ()))]
    prog = _program(source, name, _normalize_options(options), tuple(wanted))
    module = CudaModule(name, {k: CudaKernel(prog, k, kernels[k], docs.get(k)) for k in wanted})
    from . import is_available

    if is_available():
        rt = _runtime()
        prog.module(rt, verbose)
        for k in module.kernels.values():
            k._handle(rt)
    return module
