"""Compile a CUDA ``.cu`` source for the CPU emulator: g++ + the shim, cached on disk.

The shared library holds the kernels, one generated ``extern "C"`` launcher per kernel
(``gt_emu_launch__<name>``) and the fiber runtime (``runtime.cpp``, compiled once to an object
file and cached too). Cache entries are keyed by a hash of everything that affects the binary:
the shim and runtime sources, the kernel source, the flags and ``g++ --version``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..runtime import CompileError, Param, parse_kernels

HERE = Path(__file__).resolve().parent
SHIM = HERE / "cuda_shim.h"
RUNTIME = HERE / "runtime.cpp"
STUB_INCLUDE = HERE / "include"
KERNELS_DIR = HERE.parent  # kernels/cuda: common.cuh lives here

CXX = os.environ.get("GPUTENSOR_CXX", "g++")
# Optimisation level of emulated kernels (GPUTENSOR_EMULATOR_OPT overrides it: -O0 to debug a
# kernel with gdb, -O2 for long-running workloads). -O1, measured on a 2-core machine (issue 4):
# g++ CPU time for the backend's sources is 25-37% lower than at -O2 (nn.cu 2.7 s vs 4.3 s,
# reduce.cu 3.2 s vs 4.3 s, a 24-kernel elementwise module 1.3 s vs 1.5 s), while the suite's
# kernels run no slower (tests/gputensor/test_reduction.py -k cuda, warm cache: 7.8 s user CPU
# at both levels; a 1M-element add: ~4.7 ms at both). Test runs are dominated by compiling
# (every header edit recompiles every module), not by kernel run time.
_OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Og")
DEFAULT_OPT = "-O1"
CXXFLAGS = ("-std=c++17", "-fPIC", "-fstack-clash-protection", "-fvisibility=hidden", "-w")
LDFLAGS = ("-shared", "-Wl,-Bsymbolic")  # -Bsymbolic: kernel asserts reach our __assert_fail


# Per-module glue: the module's own static __shared__ section (an anchor object guarantees it
# exists) and a module-local __assert_fail (bound inside the module by -Bsymbolic, so a kernel's
# assert reaches the runtime instead of glibc's abort()).
_MODULE_GLUE = """
extern "C" int gt_emu_launch(const unsigned char*, void (*)(const unsigned char*),
                             unsigned char*, unsigned char*);
extern "C" [[noreturn]] void gt_emu_assert_fail(const char*, const char*, unsigned,
                                                const char*) noexcept;
extern "C" __attribute__((noreturn)) void __assert_fail(const char* e, const char* f,
                                                        unsigned l, const char* fn) noexcept {
    gt_emu_assert_fail(e, f, l, fn);
}
static unsigned char gt_emu_shared_anchor[16] __attribute__((section("gt_emu_shared"), used));
extern "C" unsigned char __start_gt_emu_shared[] __attribute__((visibility("hidden")));
extern "C" unsigned char __stop_gt_emu_shared[] __attribute__((visibility("hidden")));
"""


def _launchers(names: list[str]) -> str:
    # gt_emu_launch__<name>(blob): blob is launch.py's packed header + argument slots.
    out = [_MODULE_GLUE]
    for name in names:
        out.append(
            f'extern "C" __attribute__((visibility("default"))) int gt_emu_launch__{name}('
            "const unsigned char* blob) {\n"
            f"    struct Thunk {{ static void run(const unsigned char* a) {{ "
            f"gt_emu::invoke(&{name}, a); }} }};\n"
            "    return gt_emu_launch(blob, &Thunk::run, __start_gt_emu_shared, "
            "__stop_gt_emu_shared);\n"
            "}\n"
        )
    return "".join(out)


# ---- compiling and caching --------------------------------------------------------------------
def cache_dir() -> Path:
    from gputensor._files import cache_dir as project_cache

    return project_cache("cuda_emulator")


@functools.cache
def compiler_version() -> str:
    try:
        res = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise CompileError(f"the CUDA emulator needs a C++ compiler ({CXX}): {exc}") from exc
    return res.stdout


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        data = p.encode() if isinstance(p, str) else p
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


def _runtime_sources() -> list[bytes]:
    # Every shared kernel header (common.cuh, scalar_fns.cuh, ...) keys the cache: an edit to
    # one must never reuse a library built against the old text.
    # This file too: it generates each module's launchers and glue.
    files = [SHIM, RUNTIME, Path(__file__), *sorted(KERNELS_DIR.glob("*.cuh")),
             *sorted(STUB_INCLUDE.glob("*.h"))]
    return [f.read_bytes() for f in files]


def _included_headers(source: str, flags: tuple[str, ...]) -> list[bytes]:
    """Path and text of every header the source includes from its ``-I`` folders (a user's
    kernel headers too): an edited header must never reuse the old library."""
    from ..binaries import included_files

    dirs = [Path(f[2:]) for f in flags if f.startswith("-I")] + [KERNELS_DIR, STUB_INCLUDE]
    return [str(p).encode() + b"\0" + p.read_bytes() for p in included_files(source, dirs)]


def _invoke_compiler(cmd: list[str]) -> None:
    """Run g++; the one place the emulator spawns the compiler (tests patch it)."""
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise CompileError(f"g++ failed ({' '.join(cmd)}):\n{res.stderr.strip()}")


def _atomic_build(target: Path, build) -> Path:
    """Build into a temporary file next to ``target`` and move it into place atomically."""
    if target.exists():
        return target
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=target.suffix)
    os.close(fd)
    try:
        build(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def opt_level() -> str:
    """The -O flag kernels compile with (GPUTENSOR_EMULATOR_OPT, else DEFAULT_OPT)."""
    opt = os.environ.get("GPUTENSOR_EMULATOR_OPT", "").strip() or DEFAULT_OPT
    if opt not in _OPT_LEVELS:
        raise ValueError(f"GPUTENSOR_EMULATOR_OPT={opt!r}: expected one of "
                         f"{', '.join(_OPT_LEVELS)}")
    return opt


def _common_flags(extra: tuple[str, ...]) -> list[str]:
    return [opt_level(), *CXXFLAGS, *extra, "-include", str(SHIM), "-I", str(STUB_INCLUDE),
            "-I", str(KERNELS_DIR), "-I", str(HERE)]


def runtime_library(extra: tuple[str, ...] = ()) -> Path:
    """The fiber runtime as ONE shared library per process, which every module links against:
    one stack pool, one launch lock and one set of scheduler globals however many modules are
    loaded (a copy per module would map a guarded stack pool each, exhausting vm.max_map_count
    after a few hundred modules)."""
    key = _digest(*_runtime_sources(), " ".join(extra), opt_level(), compiler_version())
    target = cache_dir() / f"libgtemu-{key}.so"
    return _atomic_build(
        target,
        lambda tmp: _invoke_compiler([CXX, *_common_flags(extra), "-fvisibility=default",
                                      *LDFLAGS, f"-Wl,-soname,{target.name}", str(RUNTIME),
                                      "-o", tmp]),
    )


_lock = threading.Lock()


@dataclass(frozen=True)
class Built:
    """A compiled module on disk and its kernels' signatures."""

    path: Path
    name: str
    kernels: dict[str, tuple[Param, ...]]
    runtime: Path  # the runtime library the module links against (load it first, globally)


def build_source(source: str, name: str, extra_flags: tuple[str, ...] = ()) -> Built:
    """Compile ``source`` (or reuse the cached library) and return where it lives."""
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
        raise ValueError(f"module name {name!r} must be a plain file-name-like identifier")
    kernels = parse_kernels(source)
    if not kernels:
        raise CompileError(f"module '{name}': no non-template __global__ kernel found")
    key = _digest(*_runtime_sources(), *_included_headers(source, extra_flags), source, name,
                  " ".join(extra_flags), opt_level(), compiler_version())
    target = cache_dir() / f"{name}-{key}.so"

    def build(tmp: str) -> None:
        runtime = runtime_library()
        src = Path(tmp).with_suffix(".cpp")
        src.write_text(f'#line 1 "{name}.cu"\n{source}\n#line 1 "<launchers>"\n'
                       + _launchers(list(kernels)))
        try:
            _invoke_compiler([CXX, *_common_flags(extra_flags), *LDFLAGS, str(src),
                              str(runtime), "-Wl,-rpath,$ORIGIN", "-o", tmp])
        finally:
            src.unlink()

    with _lock:
        _atomic_build(target, build)
    return Built(target, name, kernels, runtime_library())

