"""Compile CUDA sources with NVRTC: the one compile step of gputensor's kernels.

The same function builds what a GPU runs (the CuPy runtime loads the CUBIN it returns, see
binaries.py) and what CI checks without a GPU (tests/cuda/test_nvrtc.py), so both see the same
options. NVRTC (``libnvrtc.so.12`` / ``.13``) and the CUDA headers (``cuda_fp16.h``,
``cuda_bf16.h``...) come from the PyPI wheels (CUDA 12: ``nvidia-cuda-nvrtc-cu12`` and
``nvidia-cuda-runtime-cu12``; CUDA 13: ``nvidia-cuda-nvrtc`` and ``nvidia-cuda-runtime``
13.*) or from a CUDA toolkit; neither needs a driver or a device. The library is loaded with
ctypes; every prototype below follows ``nvrtc.h`` as shipped in the wheel.

    ptx = compile_ptx(source, "vector_add.cu", arch="sm_90")
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent  # kernels/cuda: common.cuh lives here
BASE_OPTIONS = ("-std=c++17",)

_c_char_pp = ctypes.POINTER(ctypes.c_char_p)


class NvrtcError(RuntimeError):
    """NVRTC rejected a program (the message names the source and holds the compile log)."""

    def __init__(self, message: str, *, name: str = "", log: str = "", code: int = 0) -> None:
        super().__init__(message)
        self.name = name
        self.log = log
        self.code = code


class NvrtcUnavailable(RuntimeError):
    """The NVRTC wheel is not installed (or its library does not load)."""


@dataclass(frozen=True)
class Program:
    """One successful compilation."""

    name: str
    arch: str
    ptx: str
    cubin: bytes  # empty for a virtual architecture (compute_XX)
    log: str  # warnings, if any
    lowered_names: dict[str, str] = field(default_factory=dict)  # name expression -> symbol


# ---- locating NVRTC and the CUDA headers -----------------------------------------------------
@dataclass(frozen=True)
class Toolkit:
    """One NVRTC library with the CUDA headers of the same CUDA major version."""

    major: int         # CUDA major version (12, 13) of the library's file name
    library: Path      # libnvrtc.so.<major>
    include: Path      # folder holding cuda_fp16.h, cuda_bf16.h, ...
    origin: str        # where it was found: "wheel" or "toolkit <path>"


# Wheel layouts (site-packages/nvidia/...): CUDA 12 ships one folder per component
# (nvidia-cuda-nvrtc-cu12 -> cuda_nvrtc/lib, nvidia-cuda-runtime-cu12 -> cuda_runtime/include);
# CUDA 13 ships one folder for all (nvidia-cuda-nvrtc / nvidia-cuda-runtime 13.* -> cu13/lib,
# cu13/include).
_WHEEL_LAYOUTS = ((13, "cu13/lib", "cu13/include"), (12, "cuda_nvrtc/lib", "cuda_runtime/include"))
_TOOLKIT_ENVS = ("CUDA_PATH", "CUDA_HOME")


def _nvidia_roots() -> list[Path]:
    """Every ``<site-packages>/nvidia`` namespace path entry."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def _toolkit_roots() -> list[Path]:
    roots = [Path(os.environ[e]) for e in _TOOLKIT_ENVS if os.environ.get(e)]
    return [*roots, Path("/usr/local/cuda")]


def find_toolkits() -> list[Toolkit]:
    """Every usable (NVRTC library, matching headers) pair: the wheels first, newest CUDA
    major first, then a CUDA toolkit (``$CUDA_PATH``, ``$CUDA_HOME``, /usr/local/cuda)."""
    found: list[Toolkit] = []
    for major, lib_dir, inc_dir in _WHEEL_LAYOUTS:
        libs = [r / lib_dir / f"libnvrtc.so.{major}" for r in _nvidia_roots()]
        incs = [r / inc_dir for r in _nvidia_roots() if (r / inc_dir / "cuda_fp16.h").is_file()]
        for lib in libs:
            if lib.is_file() and incs:
                found.append(Toolkit(major, lib, incs[0], "wheel"))
                break
    for root in _toolkit_roots():
        for lib in sorted(root.glob("lib*/libnvrtc.so.[0-9]*"), reverse=True):
            m = re.fullmatch(r"libnvrtc\.so\.(\d+)", lib.name)
            if m and (root / "include" / "cuda_fp16.h").is_file():
                found.append(Toolkit(int(m.group(1)), lib, root / "include", f"toolkit {root}"))
                break
    return found


# The CUDA major the runtime asked for (a GPU's driver runs cubins of its own major or older):
# None takes the newest toolkit found.
_preferred_major: int | None = None


def prefer_major(major: int | None) -> None:
    """Compile with the newest toolkit of CUDA major version <= ``major`` (None: any)."""
    global _preferred_major
    _preferred_major = major
    _select.cache_clear()
    _load.cache_clear()
    _supported_archs.cache_clear()


@functools.lru_cache(maxsize=1)
def _select() -> Toolkit:
    toolkits = find_toolkits()
    usable = [t for t in toolkits if _preferred_major is None or t.major <= _preferred_major]
    if usable:
        return max(usable, key=lambda t: t.major)
    if toolkits:
        want = _preferred_major
        raise NvrtcUnavailable(
            f"NVRTC {', '.join(str(t.major) for t in toolkits)} found, but the CUDA driver "
            f"runs code of CUDA {want} or older: install the NVRTC and header wheels of "
            f"CUDA {want} (`pip install 'gputensor[cuda{want}]'`)")
    raise NvrtcUnavailable(
        "NVRTC not found: install the NVRTC and CUDA header wheels with `pip install "
        "'gputensor[cuda13]'` or `'gputensor[cuda12]'` (nvidia-cuda-nvrtc + nvidia-cuda-runtime), "
        "or point CUDA_PATH at a CUDA toolkit")


def toolkit() -> Toolkit:
    """The NVRTC library and headers compiles use (see :func:`prefer_major`)."""
    return _select()


def cuda_include_dirs() -> list[Path]:
    """The CUDA header folder matching the NVRTC in use (cuda_fp16.h, cuda_bf16.h, ...)."""
    try:
        return [_select().include]
    except NvrtcUnavailable:
        return []


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    res, prog, sz = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
    protos = {
        # name: (restype, argtypes), as in nvrtc.h (nvrtcResult is a C enum -> int)
        "nvrtcGetErrorString": (ctypes.c_char_p, [res]),
        "nvrtcVersion": (res, [ctypes.POINTER(ctypes.c_int)] * 2),
        "nvrtcGetNumSupportedArchs": (res, [ctypes.POINTER(ctypes.c_int)]),
        "nvrtcGetSupportedArchs": (res, [ctypes.POINTER(ctypes.c_int)]),
        "nvrtcCreateProgram": (res, [ctypes.POINTER(prog), ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.c_int, _c_char_pp, _c_char_pp]),
        "nvrtcDestroyProgram": (res, [ctypes.POINTER(prog)]),
        "nvrtcCompileProgram": (res, [prog, ctypes.c_int, _c_char_pp]),
        "nvrtcGetPTXSize": (res, [prog, ctypes.POINTER(sz)]),
        "nvrtcGetPTX": (res, [prog, ctypes.c_char_p]),
        "nvrtcGetCUBINSize": (res, [prog, ctypes.POINTER(sz)]),
        "nvrtcGetCUBIN": (res, [prog, ctypes.c_char_p]),
        "nvrtcGetProgramLogSize": (res, [prog, ctypes.POINTER(sz)]),
        "nvrtcGetProgramLog": (res, [prog, ctypes.c_char_p]),
        "nvrtcAddNameExpression": (res, [prog, ctypes.c_char_p]),
        "nvrtcGetLoweredName": (res, [prog, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]),
    }
    for fname, (restype, argtypes) in protos.items():
        fn = getattr(lib, fname)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


@functools.lru_cache(maxsize=1)
def _load() -> ctypes.CDLL:
    path = _select().library
    try:
        # libnvrtc dlopens libnvrtc-builtins from its own folder (RUNPATH $ORIGIN).
        return _declare(ctypes.CDLL(str(path)))
    except OSError as e:
        raise NvrtcUnavailable(f"cannot load {path}: {e}") from e


def availability() -> tuple[bool, str]:
    """(True, "") when NVRTC and the CUDA headers can be used, else (False, why not)."""
    try:
        _load()
    except NvrtcUnavailable as e:
        return False, str(e)
    return True, ""


def is_available() -> bool:
    """Whether :func:`compile_ptx` can run here (see :func:`availability` for the reason)."""
    return availability()[0]


def _check(lib: ctypes.CDLL, code: int, what: str, name: str) -> None:
    if code != 0:
        msg = lib.nvrtcGetErrorString(code).decode()
        raise NvrtcError(f"{what} failed for {name!r}: {msg}", name=name, code=code)


def version() -> tuple[int, int]:
    """NVRTC's (major, minor) version, e.g. (12, 9)."""
    lib = _load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion", "")
    return major.value, minor.value


def supported_archs() -> list[int]:
    """The SM versions this NVRTC can target, ascending (e.g. [50, 52, ..., 90, 100, 120])."""
    return list(_supported_archs())


@functools.lru_cache(maxsize=1)
def _supported_archs() -> tuple[int, ...]:  # asked on every compile: query the library once
    lib = _load()
    n = ctypes.c_int()
    _check(lib, lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs", "")
    archs = (ctypes.c_int * n.value)()
    _check(lib, lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs", "")
    return tuple(archs)


def arch_for(capability: tuple[int, int]) -> str:
    """What to build for a device of compute ``capability``: its own ``sm_XY`` CUBIN when this
    NVRTC targets it, else PTX for the newest virtual architecture below it (the driver
    compiles PTX for newer devices; a CUBIN runs only on its own major version)."""
    cc = capability[0] * 10 + capability[1]
    archs = _supported_archs()
    if cc in archs:
        return f"sm_{cc}"
    lower = [a for a in archs if a <= cc]
    if not lower:
        raise NvrtcUnavailable(f"NVRTC {version()} cannot build for compute capability "
                               f"{capability[0]}.{capability[1]} (oldest target: sm_{archs[0]})")
    return f"compute_{lower[-1]}"


def check_archs(wanted: Iterable[int] = (70, 80, 90)) -> list[str]:
    """The ``sm_XY`` among ``wanted`` this NVRTC can build (NVRTC 13 dropped sm_70)."""
    return [f"sm_{a}" for a in wanted if a in _supported_archs()]


def _arch_option(arch: str) -> str:
    m = re.fullmatch(r"(?:sm|compute)_(\d+)[af]?", arch)  # sm_90, compute_90, sm_90a, sm_100f
    if not m:
        raise ValueError(f"arch must look like 'sm_90' or 'compute_90' (got {arch!r})")
    if int(m.group(1)) not in _supported_archs():
        raise ValueError(f"arch {arch!r} is not supported by NVRTC {version()}: "
                         f"supported SM versions are {supported_archs()}")
    return f"--gpu-architecture={arch}"


def _get(lib: ctypes.CDLL, prog: ctypes.c_void_p, size_fn: str, get_fn: str, name: str) -> bytes:
    n = ctypes.c_size_t()
    _check(lib, getattr(lib, size_fn)(prog, ctypes.byref(n)), size_fn, name)
    buf = ctypes.create_string_buffer(n.value)
    if n.value:
        _check(lib, getattr(lib, get_fn)(prog, buf), get_fn, name)
    return buf.raw


def _c_strings(items: Sequence[str]) -> ctypes.Array:
    return (ctypes.c_char_p * len(items))(*(s.encode() for s in items))


def compile_program(source: str, name: str, arch: str = "sm_90", *,
                    include_dirs: Iterable[str | Path] = (), options: Iterable[str] = (),
                    name_expressions: Iterable[str] = ()) -> Program:
    """Compile ``source`` (named ``name`` in diagnostics) for ``arch``.

    Include paths: ``include_dirs``, then ``kernels/cuda`` (common.cuh) and the wheel's CUDA
    headers. ``name_expressions`` (e.g. ``"&add"``, ``"&scale<float>"``) are resolved to their
    mangled symbols in :attr:`Program.lowered_names`. An ``sm_XX`` arch also yields a CUBIN
    (ptxas runs, so resource errors surface too); ``compute_XX`` yields PTX only.
    Raises :class:`NvrtcError` with the compile log when NVRTC rejects the source.
    """
    lib = _load()
    incs = [*map(Path, include_dirs), KERNELS_DIR, *cuda_include_dirs()]
    opts = [_arch_option(arch), *BASE_OPTIONS, *(f"--include-path={d}" for d in incs),
            *options]
    exprs = list(name_expressions)
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                       0, None, None), "nvrtcCreateProgram", name)
    try:
        for e in exprs:
            _check(lib, lib.nvrtcAddNameExpression(prog, e.encode()), "nvrtcAddNameExpression",
                   name)
        code = lib.nvrtcCompileProgram(prog, len(opts), _c_strings(opts))
        log = _get(lib, prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog", name)
        log = log.rstrip(b"\0").decode(errors="replace")
        if code != 0:
            what = lib.nvrtcGetErrorString(code).decode()
            raise NvrtcError(f"NVRTC could not compile {name!r} for {arch} ({what}):\n{log}\n"
                             f"{numbered_excerpt(source, name, log)}",
                             name=name, log=log, code=code)
        ptx = _get(lib, prog, "nvrtcGetPTXSize", "nvrtcGetPTX", name).rstrip(b"\0").decode()
        cubin = (_get(lib, prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN", name)
                 if arch.startswith("sm_") else b"")
        lowered = {}
        for e in exprs:
            out = ctypes.c_char_p()
            _check(lib, lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(out)),
                   f"nvrtcGetLoweredName({e})", name)
            lowered[e] = out.value.decode()
        return Program(name=name, arch=arch, ptx=ptx, cubin=cubin, log=log,
                       lowered_names=lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def numbered_excerpt(source: str, name: str, log: str, context: int = 3) -> str:
    """The lines of ``source`` the compile log points at (``name(LINE): error``), numbered,
    with ``context`` lines around each; the whole numbered source when no line is named."""
    lines = source.splitlines()
    hits = sorted({int(m) for m in re.findall(rf"{re.escape(name)}\((\d+)\)", log)})
    keep = sorted({k for h in hits for k in range(max(1, h - context),
                                                   min(len(lines), h + context) + 1)})
    if not keep:
        keep = list(range(1, len(lines) + 1))
    out, prev = [], 0
    for k in keep:
        if prev and k != prev + 1:
            out.append("     ...")
        mark = ">" if k in hits else " "
        out.append(f"{mark}{k:5d} | {lines[k - 1]}")
        prev = k
    return "source:\n" + "\n".join(out)


def compile_ptx(source: str, name: str, arch: str = "sm_90", *,
                include_dirs: Iterable[str | Path] = (), options: Iterable[str] = ()) -> str:
    """The PTX of ``source`` compiled for ``arch`` (see :func:`compile_program`)."""
    return compile_program(source, name, arch, include_dirs=include_dirs, options=options).ptx


def compile_file(path: str | Path, arch: str = "sm_90", *,
                 include_dirs: Iterable[str | Path] = (), options: Iterable[str] = (),
                 name_expressions: Iterable[str] = ()) -> Program:
    """Compile a ``.cu`` file; its own folder is searched first for ``#include "..."``."""
    path = Path(path)
    return compile_program(path.read_text(), str(path), arch,
                           include_dirs=[path.parent, *include_dirs], options=options,
                           name_expressions=name_expressions)
