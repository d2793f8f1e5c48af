"""A device's peak memory bandwidth and arithmetic throughput: the roofline the profiler and the
benchmarks measure kernels against.

``device_peaks(device)`` answers, in order of preference:

1. a user override (``set_device_peaks(device, bandwidth=..., flops=...)``);
2. a datasheet entry for a known GPU model, matched by the device's name (FP32 without tensor
   cores, and HBM/GDDR bandwidth: what the CUDA C kernels here can use);
3. a measurement with the device's own kernels (a STREAM-like copy for bandwidth, a float32
   GEMM for flops; well under a second), cached as JSON in the gputensor cache directory per
   (device name, host) and taken again when the entry is a day old or the core count
   changed. On the CPU the copy's working set is four times the last-level cache (at least
   64 MiB), so the caches cannot inflate the bandwidth, and the best of several runs counts;
   the source string says what was measured and when.

The CPU and the CUDA emulator always take path 3 (no datasheet describes them).
"""

from __future__ import annotations

import json
import math
import platform
import re
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gputensor._files import write_atomically

__all__ = ["Peaks", "device_peaks", "set_device_peaks", "roofline_fraction", "DATASHEET"]


@dataclass(frozen=True)
class Peaks:
    """Peak bandwidth (bytes/s) and FP32 throughput (flop/s) of a device, and where they come
    from ("user override", "datasheet: NVIDIA H100 SXM5", "measured (CPU)", ...)."""

    bandwidth_bytes_per_s: float
    flops_per_s: float
    source: str

    def attainable_flops(self, arithmetic_intensity: float) -> float:
        """The roofline: min(peak flops, AI * peak bandwidth), AI in flops per byte."""
        return min(self.flops_per_s, arithmetic_intensity * self.bandwidth_bytes_per_s)

    def fraction(self, nbytes: float, flops: float, seconds: float) -> float:
        """How close a kernel that moved ``nbytes`` and did ``flops`` in ``seconds`` came to
        the roofline (0..1; see ``roofline_fraction``)."""
        return roofline_fraction(self, nbytes, flops, seconds)


def roofline_fraction(peaks: Peaks, nbytes: float, flops: float, seconds: float) -> float:
    """achieved / attainable, where attainable = min(peak_flops, AI * peak_bw).

    Written as (time the roofline allows) / (time taken): the roofline's time is
    max(flops / peak_flops, bytes / peak_bw), so a compute-bound kernel is measured in flops and
    a memory-bound one (flops == 0 included) in bytes, with one formula. NaN when nothing was
    timed or moved.
    """
    if seconds <= 0 or (nbytes <= 0 and flops <= 0):
        return math.nan
    bound = max(flops / peaks.flops_per_s, nbytes / peaks.bandwidth_bytes_per_s)
    return bound / seconds


# -- datasheets ----------------------------------------------------------------------------------
# (pattern on the lower-cased CUDA device name, model, FP32 flop/s (no tensor cores), bytes/s),
# first match wins, so specific variants come before their family. Sources: NVIDIA's product
# datasheets (H200, H100, A100, V100, L4, L40S, A10, T4 and the GeForce RTX 4090/3090 specs).
DATASHEET: tuple[tuple[str, str, float, float], ...] = (
    (r"h200.*nvl", "NVIDIA H200 NVL", 60.0e12, 4.8e12),
    (r"h200", "NVIDIA H200 SXM", 67.0e12, 4.8e12),
    (r"h100.*nvl", "NVIDIA H100 NVL", 60.0e12, 3.9e12),
    (r"h100.*pcie", "NVIDIA H100 PCIe", 51.0e12, 2.0e12),
    (r"h100", "NVIDIA H100 SXM5", 67.0e12, 3.35e12),
    (r"a100.*80gb.*pcie|a100.*pcie.*80gb", "NVIDIA A100 80GB PCIe", 19.5e12, 1.935e12),
    (r"a100.*80gb", "NVIDIA A100 80GB SXM4", 19.5e12, 2.039e12),
    (r"a100", "NVIDIA A100 40GB", 19.5e12, 1.555e12),
    (r"v100s", "NVIDIA V100S PCIe", 16.4e12, 1.134e12),
    (r"v100.*pcie", "NVIDIA V100 PCIe", 14.0e12, 0.9e12),
    (r"v100", "NVIDIA V100 SXM2", 15.7e12, 0.9e12),
    (r"l40s", "NVIDIA L40S", 91.6e12, 0.864e12),
    (r"\bl4\b", "NVIDIA L4", 30.3e12, 0.3e12),
    (r"\ba10\b", "NVIDIA A10", 31.2e12, 0.6e12),
    (r"\bt4\b", "NVIDIA T4", 8.1e12, 0.32e12),
    (r"rtx 4090", "NVIDIA GeForce RTX 4090", 82.6e12, 1.008e12),
    (r"rtx 3090", "NVIDIA GeForce RTX 3090", 35.6e12, 0.936e12),
)


def datasheet_peaks(device_name: str) -> Peaks | None:
    """The datasheet entry for a GPU called ``device_name`` (as CUDA reports it), or None."""
    lowered = device_name.lower()
    for pattern, model, flops, bandwidth in DATASHEET:
        if re.search(pattern, lowered):
            return Peaks(bandwidth, flops, f"datasheet: {model}")
    return None


# -- overrides and the per-process cache ---------------------------------------------------------
_overrides: dict[str, Peaks] = {}
_known: dict[str, Peaks] = {}  # device key -> peaks found this process
_lock = threading.Lock()


def _device(device: Any) -> Any:
    from gputensor._device import device as Device

    dev = device if isinstance(device, Device) else Device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = Device("cuda", 0)
    return dev


def _key(dev: Any) -> str:
    return dev.type if dev.type == "cpu" else f"{dev.type}:{dev.index}"


def set_device_peaks(device: Any, bandwidth: float | None = None,
                     flops: float | None = None) -> None:
    """Override ``device``'s peaks: ``bandwidth`` in bytes/s, ``flops`` in flop/s. One of them
    alone keeps the other from the datasheet or measurement; neither removes the override."""
    dev = _device(device)
    key = _key(dev)
    for what, value in (("bandwidth", bandwidth), ("flops", flops)):
        if value is not None and not (isinstance(value, int | float) and value > 0
                                      and math.isfinite(value)):
            raise ValueError(f"set_device_peaks({dev}): {what} must be a positive number, got "
                             f"{value!r}")
    with _lock:
        _overrides.pop(key, None)
    if bandwidth is None and flops is None:
        return
    base = device_peaks(dev) if bandwidth is None or flops is None else None
    peaks = Peaks(float(bandwidth if bandwidth is not None else base.bandwidth_bytes_per_s),
                  float(flops if flops is not None else base.flops_per_s), "user override")
    with _lock:
        _overrides[key] = peaks


def device_peaks(device: Any = "cpu") -> Peaks:
    """``device``'s peak bandwidth and FP32 flops: an override, a datasheet entry, or a cached
    measurement (taken on first use, under a second)."""
    dev = _device(device)
    key = _key(dev)
    with _lock:
        found = _overrides.get(key) or _known.get(key)
    if found is not None:
        return found
    name = device_name(dev)
    peaks = datasheet_peaks(name) if dev.type == "cuda" else None
    if peaks is None:
        peaks = _cached_measurement(dev, name)
    with _lock:
        _known[key] = peaks
    return peaks


def device_name(dev: Any) -> str:
    """The device's model name: the CPU model, or the name the CUDA runtime reports."""
    if dev.type == "cpu":
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return platform.processor() or platform.machine() or "cpu"
    if dev.type == "cuda":
        import gputensor.cuda
        from gputensor.kernels.cuda.device import runtime

        gputensor.cuda.init()  # the lazy initialiser picks the runtime
        return runtime().properties(dev.index or 0).name
    return dev.type


# -- measuring -----------------------------------------------------------------------------------
def _cache_file() -> Path:
    # The gputensor cache directory, as the emulator's build cache finds it
    # (GPUTENSOR_CACHE_DIR, else ~/.cache/gputensor).
    from gputensor.kernels.cuda.emulator.build import cache_dir

    return cache_dir().parent / "device_peaks.json"


MAX_AGE_S = 86400.0  # a measurement older than a day is taken again


def _machine() -> int:
    import os

    return os.cpu_count() or 1


def _cached_measurement(dev: Any, name: str) -> Peaks:
    entry = f"{name} @ {socket.gethostname()}"
    path = _cache_file()
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    hit = table.get(entry) if isinstance(table, dict) else None
    if isinstance(hit, dict):
        try:
            fresh = time.time() - float(hit["measured_at"]) < MAX_AGE_S and \
                int(hit["cores"]) == _machine()
            if fresh:
                return Peaks(float(hit["bandwidth_bytes_per_s"]), float(hit["flops_per_s"]),
                             str(hit["source"]))
        except (KeyError, TypeError, ValueError):
            pass  # a damaged or older-format entry: measure again
    peaks = measure_peaks(dev, name)
    table = table if isinstance(table, dict) else {}
    table[entry] = {**asdict(peaks), "measured_at": time.time(), "cores": _machine()}
    write_atomically(path, json.dumps(table, indent=1, sort_keys=True))
    return peaks


def _best_time(fn: Any, sync: Any, reps: int) -> float:
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return max(best, 1e-9)


def _grow(make: Any, sizes: list[int], target_s: float, budget_s: float) -> float:
    """Best throughput of ``make(size)() -> (work, run)`` over growing sizes: stop once one run
    takes ``target_s`` (big enough to hide overheads) or ``budget_s`` is spent."""
    best, spent = 0.0, 0.0
    for i, size in enumerate(sizes):
        work, run, sync = make(size)
        run()  # warm-up (compiles the kernel, starts BLAS threads): not counted in the budget
        sync()
        start = time.perf_counter()
        seconds = _best_time(run, sync, 5)
        spent += time.perf_counter() - start
        best = max(best, work / seconds)
        # At least two sizes: the smallest one alone underestimates a loaded machine's peak.
        if i >= 1 and (seconds >= target_s or spent > budget_s):
            break
    return best


def last_level_cache_bytes() -> int:
    """The largest CPU cache (sysfs; 32 MiB when it cannot be read)."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):
            continue
    return max(sizes, default=32 << 20)


def measure_peaks(device: Any, name: str | None = None) -> Peaks:
    """Measure ``device``'s bandwidth (a copy kernel: bytes read + written per second) and
    float32 GEMM flop/s with its own backend kernels; kept well under a second."""
    from gputensor import _dtype as D
    from gputensor._ops._core import empty, kernel
    from gputensor._ops.creation import ones

    from .hooks import suspended

    dev = _device(device)
    sync = _synchronizer(dev)

    def copy(n: int) -> tuple[float, Any, Any]:
        src, dst = empty((n,), D.float32, dev), empty((n,), D.float32, dev)
        k = kernel(dst, "_copy")
        return 8.0 * n, lambda: k(dst, [src], (), D.float32), sync

    def gemm(m: int) -> tuple[float, Any, Any]:
        # Ones, not uninitialised memory: denormal garbage would slow the FPU down.
        a, b = (ones((m, m), dtype=D.float32, device=dev) for _ in range(2))
        out = empty((m, m), D.float32, dev)
        k = kernel(out, "_gemm")
        return 2.0 * m ** 3, lambda: k(out, a, b, None, 0, 1), sync

    emulated = _is_emulator(dev)
    with suspended():
        if emulated:  # fibers per CUDA thread: small sizes keep this under a second
            bandwidth = _grow(copy, [1 << 14, 1 << 16, 1 << 18], 0.02, 0.3)
            flops = _grow(gemm, [64, 128, 256], 0.02, 0.3)
        elif dev.type == "cpu":
            # Source and destination together four times the last-level cache: DRAM bandwidth,
            # not the cache's; the best of several runs.
            n = max(4 * last_level_cache_bytes(), 64 << 20) // 8
            work, run, sync_ = copy(n)
            run()
            bandwidth = work / _best_time(run, sync_, 7)
            flops = _grow(gemm, [128, 256, 512], 0.03, 0.3)
        else:
            bandwidth = _grow(copy, [1 << 16, 1 << 19, 1 << 22], 0.01, 0.2)
            flops = _grow(gemm, [128, 256, 512], 0.03, 0.3)
    if dev.type == "cpu":
        when = time.strftime("%Y-%m-%d")
        return Peaks(bandwidth, flops, f"measured (CPU): copy of {8 * n >> 20} MiB, best of 7, "
                                       f"float32 GEMM; {when}")
    what = "CUDA emulator" if emulated else name or str(dev)
    return Peaks(bandwidth, flops, f"measured ({what})")


def _is_emulator(dev: Any) -> bool:
    if dev.type != "cuda":
        return False
    from gputensor.kernels.cuda.device import runtime

    return runtime().is_emulated


def _synchronizer(dev: Any) -> Any:
    if dev.type != "cuda":
        return lambda: None
    from gputensor.kernels.cuda.device import runtime

    return runtime().synchronize
