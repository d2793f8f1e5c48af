"""Device binaries built by the project's own NVRTC step, cached on disk.

A real GPU runs exactly what CI compiles: ``build`` calls :func:`nvrtc.compile_program` with the
project's options (never CuPy's compiler, which appends ``-ftz=true`` after the caller's options
and keys its cache on the source text alone, so an edited header would load stale code).

The cache key covers every byte that reaches the compiler: the source, the text of every header
it includes (followed recursively through the include folders, the CUDA headers included), the
options, the target architecture and the NVRTC library and version. Entries are written
atomically (``gputensor._files``), so processes sharing ``GPUTENSOR_CACHE_DIR`` never read a
half-written binary.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gputensor import _files
from gputensor._files import write_atomically

from . import nvrtc

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)


@dataclass(frozen=True)
class Binary:
    """What the driver loads: a CUBIN (``sm_XY``) or PTX text (``compute_XY``)."""

    image: bytes
    arch: str
    lowered_names: dict[str, str]  # name expression -> mangled symbol
    key: str


def split_options(options: Iterable[str]) -> tuple[list[Path], list[str]]:
    """NVRTC options as (include folders from ``-I``, every other option); the language
    standard comes from nvrtc.BASE_OPTIONS."""
    dirs, rest = [], []
    for o in options:
        if o.startswith("-I"):
            dirs.append(Path(o[2:]))
        elif not o.startswith(("--std", "-std")):
            rest.append(o)
    return dirs, rest


_file_digests: dict[tuple[str, int, int, int, int], bytes] = {}


def _file_digest(path: Path) -> bytes:
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size)
    d = _file_digests.get(key)
    if d is None:
        d = _file_digests[key] = hashlib.sha256(path.read_bytes()).digest()
    return d


def included_files(source: str, include_dirs: Sequence[Path]) -> list[Path]:
    """Every header ``source`` includes, directly or through other headers, that exists in
    ``include_dirs`` (or, for ``"..."``, next to the including header); system headers NVRTC
    provides itself (none of these folders holds them) are left out."""
    seen: dict[Path, None] = {}
    todo: list[tuple[bytes, Path | None]] = [(source.encode(), None)]
    while todo:
        text, here = todo.pop()
        for quote, name in _INCLUDE.findall(text):
            dirs = ([here] if quote == b'"' and here is not None else []) + list(include_dirs)
            for d in dirs:
                p = (d / name.decode()).resolve()
                if p.is_file():
                    if p not in seen:
                        seen[p] = None
                        todo.append((p.read_bytes(), p.parent))
                    break
    return list(seen)


def cache_key(source: str, name: str, arch: str, options: Sequence[str],
              include_dirs: Sequence[Path], name_expressions: Sequence[str]) -> str:
    tk = nvrtc.toolkit()
    h = hashlib.sha256()
    for part in (source.encode(), name.encode(), arch.encode(), "\0".join(options).encode(),
                 "\0".join(name_expressions).encode(), str(tk.library).encode(),
                 repr(nvrtc.version()).encode()):
        h.update(len(part).to_bytes(8, "little") + part)
    for path in included_files(source, [*include_dirs, tk.include]):
        h.update(str(path).encode() + b"\0" + _file_digest(path))
    return h.hexdigest()[:40]


def cache_dir() -> Path:
    return _files.cache_dir("cuda_nvrtc")


def build(source: str, name: str, arch: str, options: Sequence[str] = (),
          name_expressions: Sequence[str] = ()) -> Binary:
    """The binary of ``source`` for ``arch`` (from the cache, or compiled and cached)."""
    include_dirs, rest = split_options(options)
    exprs = list(name_expressions)
    key = cache_key(source, name, arch, rest, include_dirs, exprs)
    stem = re.sub(r"[^\w.-]", "_", name)[:60]
    image_path = cache_dir() / f"{stem}-{key}.{'cubin' if arch.startswith('sm_') else 'ptx'}"
    names_path = image_path.with_suffix(".names")
    if image_path.is_file() and (not exprs or names_path.is_file()):
        lowered = {}
        if exprs:
            lowered = dict(line.split("\t", 1) for line in names_path.read_text().splitlines())
        return Binary(image_path.read_bytes(), arch, lowered, key)
    prog = nvrtc.compile_program(source, name, arch, include_dirs=include_dirs, options=rest,
                                 name_expressions=exprs)
    image = prog.cubin if arch.startswith("sm_") else prog.ptx.encode() + b"\0"
    if exprs:
        write_atomically(names_path, "".join(f"{e}\t{s}\n"
                                               for e, s in prog.lowered_names.items()).encode())
    write_atomically(image_path, image)
    return Binary(image, arch, dict(prog.lowered_names), key)


def _build_one(index: int, arch: str) -> str:
    from . import ops  # noqa: F401 - declares every backend CudaSource
    from .device import NVRTC_OPTIONS, SOURCES

    src = SOURCES[index]
    build(src.source(), src.name, arch, (*NVRTC_OPTIONS, *src.emulator_flags))
    return src.filename


def precompile(arch: str, jobs: int | None = None) -> list[str]:
    """Build every backend source for ``arch`` into the cache, ``jobs`` NVRTC processes at a
    time (a GPU machine's first run then loads binaries instead of compiling on first use)."""
    from concurrent.futures import ProcessPoolExecutor

    from . import ops  # noqa: F401
    from .device import SOURCES

    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count()) as pool:
        return list(pool.map(_build_one, range(len(SOURCES)), [arch] * len(SOURCES)))


def device_arch() -> str:
    """What the CuPy runtime builds for GPU 0 (its NVRTC chosen by the driver's version)."""
    from .cupy_driver import CupyRuntime

    return CupyRuntime().binary_arch()


if __name__ == "__main__":  # python -m gputensor.kernels.cuda.binaries [ARCH|auto] [JOBS]
    import sys
    import time

    t0 = time.perf_counter()
    target = sys.argv[1] if len(sys.argv) > 1 else "auto"
    target = device_arch() if target == "auto" else target
    built = precompile(target, int(sys.argv[2]) if len(sys.argv) > 2 else None)
    print(f"NVRTC {'.'.join(map(str, nvrtc.version()))} ({nvrtc.toolkit().library}): "
          f"{len(built)} modules for {target} in {time.perf_counter() - t0:.1f} s -> {cache_dir()}")
