"""``gputensor info``: what this installation can run on, and where it keeps its caches.

Sections: gputensor (versions), devices (CPU cores; CUDA devices with name, memory and compute
capability), backends (kernels registered per backend and layout), ops, NVRTC (the CUDA
compile check: library, version, a trivial kernel compiled), emulator (g++ and whether it
serves "cuda"), CuPy, caches (the emulator's and NVRTC's build caches and the Numba kernel
cache, with their sizes on disk).

Every probe is cheap and none needs a GPU: a probe that fails shows its error instead of
stopping the report. ``collect()`` returns the figures as a dict (``--json`` prints it);
``render()`` formats them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gputensor as gt
from gputensor.kernels.registry import BACKENDS, OPS

Section = dict[str, Any]
TRIVIAL_KERNEL = 'extern "C" __global__ void gt_info_probe(float* x) { x[threadIdx.x] += 1.0f; }'


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else the machine type."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def dir_size(path: Path) -> tuple[int, int]:
    """(bytes, files) under ``path`` (0, 0 when it does not exist)."""
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:  # removed while walking (another process pruning its cache)
                continue
    return total, files


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _probe(fn: Callable[[], Section]) -> Section:
    try:
        return fn()
    except Exception as exc:  # a broken probe is reported, never fatal
        return {"error": f"{type(exc).__name__}: {exc}"}


# ---- sections -----------------------------------------------------------------------------------
def gputensor_section() -> Section:
    import numba
    import numpy as np

    return {"version": _version("gputensor"), "location": str(Path(gt.__file__).parent),
            "python": platform.python_version(), "platform": platform.platform(),
            "numpy": np.__version__, "numba": numba.__version__}


def devices_section() -> Section:
    out: Section = {"cpu": cpu_model(), "cpu cores usable": usable_cores(),
                    "cpu cores total": os.cpu_count()}
    available = gt.cuda.is_available()
    out["cuda available"] = available
    if not available:
        out["cuda"] = gt.cuda.why_unavailable()
        return out
    out["cuda runtime"] = gt.cuda.runtime_name()
    cuda_devices = []
    for i in range(gt.cuda.device_count()):
        p = gt.cuda.get_device_properties(i)
        cuda_devices.append({"index": i, "name": p.name,
                             "memory": fmt_bytes(p.total_memory),
                             "capability": f"{p.major}.{p.minor}",
                             "multiprocessors": p.multi_processor_count})
    out["cuda devices"] = cuda_devices
    return out


def backends_section() -> Section:
    """Kernels registered per backend. Elementwise ops compile on first use from their
    expression, so a backend with a code generator serves those too."""
    elementwise = sum(1 for op in OPS.values() if op.expr is not None)
    out: Section = {}
    for (device, layout), b in BACKENDS.items():
        line = f"device={device} layout={layout} kernels={len(b.kernels)}"
        if b.elementwise_factory is not None:
            line += f" (+ {elementwise} elementwise ops generated on first use)"
        elif device == "cuda" and not b.kernels:
            line += " (registered when a CUDA runtime is activated)"
        out[b.name] = line
    return out


def ops_section() -> Section:
    return {"ops": len(OPS), "elementwise (one expression)": sum(
                1 for op in OPS.values() if op.expr is not None),
            "with a derivative": sum(1 for op in OPS.values() if op.derivative is not None),
            "tensor methods": sum(1 for op in OPS.values() if op.method)}


def nvrtc_section() -> Section:
    from gputensor.kernels.cuda import nvrtc

    ok, why = nvrtc.availability()
    out: Section = {"available": ok}
    if not ok:
        out["why"] = why
        return out
    major, minor = nvrtc.version()
    archs = nvrtc.supported_archs()
    out["version"] = f"{major}.{minor}"
    out["archs"] = f"sm_{archs[0]} .. sm_{archs[-1]}" if archs else "none"
    arch = "sm_80" if 80 in archs else f"sm_{archs[-1]}"
    t0 = time.perf_counter()
    try:
        nvrtc.compile_ptx(TRIVIAL_KERNEL, "gt_info_probe.cu", arch=arch)
        out["trivial compile"] = f"ok ({arch}, {1e3 * (time.perf_counter() - t0):.0f} ms)"
    except Exception as exc:
        out["trivial compile"] = f"FAILED ({arch}): {exc}"
    return out


def emulator_section() -> Section:
    from gputensor.cuda import EMULATOR_ENV
    from gputensor.kernels.cuda import device as kdevice
    from gputensor.kernels.cuda.emulator import build

    compiler = shutil.which(build.CXX)
    out: Section = {"compiler": build.CXX, "found": compiler}
    if compiler:
        try:
            out["version"] = build.compiler_version().splitlines()[0]
        except build.CompileError as exc:
            out["version"] = f"error: {exc}"
    out[EMULATOR_ENV] = os.environ.get(EMULATOR_ENV, "")
    active = kdevice.active()
    out["selected"] = type(active).__name__ == "EmulatorRuntime"
    return out


def cupy_section() -> Section:
    importable = importlib.util.find_spec("cupy") is not None
    out: Section = {"importable": importable,
                    "version": _version("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy")}
    if importable:
        from gputensor.kernels.cuda import cupy_driver

        ok, why = cupy_driver.is_usable()
        out["sees a GPU"] = ok
        if not ok:
            out["why"] = why
        else:
            out["devices"] = cupy_driver._import_cupy().cuda.runtime.getDeviceCount()
    return out


def caches_section() -> Section:
    import numba

    from gputensor.kernels.cpu import codegen
    from gputensor.kernels.cuda import binaries
    from gputensor.kernels.cuda.emulator import build

    out: Section = {}
    for label, path in (("emulator builds", build.cache_dir()),
                        ("NVRTC builds (GPU)", binaries.cache_dir()),
                        ("numba kernels", codegen.cache_dir())):
        size, files = dir_size(path)
        out[label] = f"{path} ({fmt_bytes(size)}, {files} files)"
    out["GPUTENSOR_CACHE_DIR"] = os.environ.get("GPUTENSOR_CACHE_DIR", "")
    out["NUMBA_CACHE_DIR"] = numba.config.CACHE_DIR or "(unset: caches beside the sources)"
    return out


SECTIONS: dict[str, Callable[[], Section]] = {
    "gputensor": gputensor_section, "devices": devices_section, "backends": backends_section,
    "ops": ops_section, "nvrtc": nvrtc_section, "emulator": emulator_section,
    "cupy": cupy_section, "caches": caches_section,
}


def collect() -> dict[str, Section]:
    """Every section's figures (a failing probe becomes ``{"error": ...}``)."""
    return {name: _probe(fn) for name, fn in SECTIONS.items()}


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "-" if v is None or v == "" else str(v)


def render(info: dict[str, Section]) -> str:
    lines: list[str] = []
    for name, section in info.items():
        lines += ["", f"== {name} " + "=" * max(0, 70 - len(name))]
        width = max((len(k) for k in section), default=0)
        for key, value in section.items():
            if isinstance(value, list):
                lines.append(f"{key:<{width}} : {len(value)}")
                lines += ["    " + ", ".join(f"{k}={_value(v)}" for k, v in item.items())
                          for item in value]
            else:
                lines.append(f"{key:<{width}} : {_value(value)}")
    return "\n".join(lines[1:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gputensor info",
                                description="Devices, backends, compilers and caches.")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    info = collect()
    print(json.dumps(info, indent=2, default=str) if args.json else render(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
