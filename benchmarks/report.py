"""Summarise a pytest-benchmark JSON as gputensor-vs-NumPy/PyTorch throughput ratios.

    python -m pytest benchmarks --benchmark-only --benchmark-json=bench.json
    python benchmarks/report.py bench.json

A ratio is (other library's median time) / (gputensor's median time) for the same work, i.e.
gputensor's throughput relative to the other's: > 1 means gputensor is faster.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

LIBS = ("gputensor", "numpy", "torch")


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def lib_of(bench: dict) -> str | None:
    """The library a benchmark timed (None for single-library timings, e.g. launch costs)."""
    return (bench.get("extra_info") or {}).get("lib") or (bench.get("params") or {}).get("lib")


def by_group(benchmarks: list[dict]) -> dict[str, dict[str, dict]]:
    """group -> lib -> benchmark, in the order the groups first appear."""
    groups: dict[str, dict[str, dict]] = defaultdict(dict)
    for b in benchmarks:
        lib = lib_of(b)
        if lib is not None:
            groups[b.get("group") or b["name"]][lib] = b
    return groups


def single_lines(benchmarks: list[dict]) -> list[str]:
    """Benchmarks outside the library comparison: their group, name and median."""
    return [f"  {b.get('group') or '-'}: {b['name']}  {fmt_time(median(b))}"
            for b in benchmarks if lib_of(b) is None]


def median(bench: dict | None) -> float | None:
    return None if bench is None else bench["stats"]["median"]


def ratio(gt: dict | None, other: dict | None, stat: str = "median") -> float | None:
    if gt is None or other is None:
        return None
    return other["stats"][stat] / gt["stats"][stat]


def throughput(bench: dict) -> str:
    info, t = bench.get("extra_info", {}), median(bench)
    if info.get("flops"):
        return f"{info['flops'] / t / 1e9:.1f} GFLOP/s"
    if info.get("bytes"):
        return f"{info['bytes'] / t / 1e9:.1f} GB/s"
    return ""


def verdict(value: float | None, target: float | None, higher_is_better: bool) -> str:
    if value is None or target is None:
        return ""
    met = value >= target if higher_is_better else value <= target
    return "meets" if met else "below" if higher_is_better else "above"


def header(machine: dict) -> list[str]:
    cpu = machine.get("cpu", {})
    th = machine.get("threads", {})
    lines = [f"CPU: {cpu.get('brand_raw', machine.get('machine', '?'))}, "
             f"{th.get('cores', cpu.get('count', '?'))} cores usable; "
             f"Python {machine.get('python_version', '?')}"]
    if th:
        lines.append(f"threads: numba={th.get('numba')} openblas={th.get('openblas')} "
                     f"torch={th.get('torch')}  (numpy {th.get('numpy_version')}, "
                     f"numba {th.get('numba_version')}, torch {th.get('torch_version')})")
        if th.get("OPENBLAS_CORETYPE"):
            lines.append(f"OPENBLAS_CORETYPE={th['OPENBLAS_CORETYPE']}")
    return lines


def throughput_table(groups: dict[str, dict[str, dict]]) -> list[str]:
    cols = ("group", "gputensor", "numpy", "torch", "gt/numpy", "gt/torch", "min gt/np",
            "min gt/torch", "target", "", "gt rate")
    rows = []
    for name, libs in groups.items():
        if any(b.get("extra_info", {}).get("kind") in ("overhead", "import")
               for b in libs.values()):
            continue
        gt = libs.get("gputensor")
        # A target is a minimum throughput ratio against NumPy or against PyTorch.
        target, against = None, "numpy"
        for key, lib in (("target_vs_numpy", "numpy"), ("target_vs_torch", "torch")):
            found = next((b["extra_info"][key] for b in libs.values()
                          if key in b.get("extra_info", {})), None)
            if found is not None:
                target, against = found, lib
        r_np = ratio(gt, libs.get("numpy"))
        r_torch = ratio(gt, libs.get("torch"))
        r_target = r_np if against == "numpy" else r_torch
        rows.append((name, *(fmt_time(median(libs.get(k))) if k in libs else "n/a"
                             for k in LIBS),
                     fmt_ratio(r_np), fmt_ratio(r_torch),
                     fmt_ratio(ratio(gt, libs.get("numpy"), "min")),
                     fmt_ratio(ratio(gt, libs.get("torch"), "min")),
                     f">= {target:.2g}x {against}" if target else "",
                     verdict(r_target, target, True), throughput(gt) if gt else ""))
    widths = [max(len(str(r[i])) for r in (cols, *rows)) for i in range(len(cols))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
           for row in (cols, *rows)]
    out.insert(1, "-" * len(out[0]))
    return out


def overhead_lines(groups: dict[str, dict[str, dict]]) -> list[str]:
    out = []
    for name, libs in groups.items():
        if not any(b.get("extra_info", {}).get("kind") == "overhead" for b in libs.values()):
            continue
        gt = libs.get("gputensor")
        parts = [f"{k} {median(libs[k]) * 1e6:.2f} us" for k in LIBS if k in libs]
        line = f"  {name}: " + ", ".join(parts)
        target = gt and gt["extra_info"].get("target_us")
        if target:
            us = median(gt) * 1e6
            line += f"  [target <= {target:g} us: {verdict(us, target, False)}]"
        out.append(line)
    return out


def import_lines(groups: dict[str, dict[str, dict]]) -> list[str]:
    out = []
    for libs in groups.values():
        if not any(b.get("extra_info", {}).get("kind") == "import" for b in libs.values()):
            continue
        for k in LIBS:
            if k not in libs:
                continue
            info = libs[k]["extra_info"]
            best = info["import_s_min"]
            line = (f"  {k}: {best:.3f} s (import statement, min of {len(info['import_s'])}); "
                    f"whole subprocess min {libs[k]['stats']['min']:.3f} s")
            if "target_s" in info:
                line += f"  [target <= {info['target_s']:g} s: " \
                        f"{verdict(best, info['target_s'], False)}]"
            out.append(line)
            if info.get("importtime_ms_by_package"):
                top = ", ".join(f"{p} {ms:g}" for p, ms in info["importtime_ms_by_package"]
                                .items())
                out.append(f"    -X importtime self ms by package: {top}")
    return out


def report(data: dict[str, Any]) -> str:
    groups = by_group(data.get("benchmarks", []))
    lines = header(data.get("machine_info", {}))
    if any("[emulated CUDA]" in name for name in groups):
        lines.append("Groups tagged [emulated CUDA] ran gputensor's CUDA kernels on the CPU "
                     "emulator: not GPU times.")
    lines += ["", "Throughput: median times; ratio = other's time / gputensor's (> 1 means "
              "gputensor is faster),", "from medians and, less sensitive to a busy machine, "
              "from minimum times; the verdict uses medians.", *throughput_table(groups)]
    lines += ["", "Small-op overhead (median per call):", *overhead_lines(groups)]
    lines += ["", "Import time (fresh subprocess, warm caches):", *import_lines(groups)]
    singles = single_lines(data.get("benchmarks", []))
    if singles:
        lines += ["", "Other timings (one library, no comparison; median):", *singles]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json_file", help="output of pytest --benchmark-json=...")
    args = parser.parse_args(argv)
    with open(args.json_file) as f:
        print(report(json.load(f)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
