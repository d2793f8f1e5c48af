"""What a sweep prints (one table per kernel) and writes (``--json``).

JSON schema (``SCHEMA_VERSION`` 1)::

    {
      "version": 1,                       # this schema's version
      "device": "cpu" | "cuda:0",         # where gputensor ran
      "device_name": str,                 # CPU model, GPU name, or the emulator's name
      "emulated": bool,                   # true: "cuda" is the CPU emulator, not a GPU
      "peaks": {"bandwidth": float|null,  # bytes/s
                "flops": float|null,      # flop/s
                "source": str},           # "datasheet: H100 SXM", "measured", "user", ...
      "repeat": int,                      # timed repeats per figure (median taken)
      "libraries": {name: version},       # gputensor and the comparison libraries used
      "results": [{
          "kernel": str, "family": str,   # e.g. "add", "elementwise"
          "size": int,                    # element count of the main operand
          "shape": [int, ...],            # the main operand's shape
          "dtype": str, "device": str,
          "time_s": float,                # gputensor's median seconds per call
          "bytes": int, "flops": int,     # one call's traffic and work (the op's cost model)
          "gbps": float, "gflops": float, # bytes / time_s / 1e9, flops / time_s / 1e9
          "metric": "GB/s" | "GFLOP/s",   # the figure that matters for this kernel
          "roofline_pct": float|null,     # % of min(peak flops, AI * peak bandwidth)
          "compare": {lib: float|null}    # each comparison library's median seconds per call
      }, ...],
      "notes": [str], "failures": [str]
    }
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gputensor._files import write_atomically

from .roofline import peaks_dict
from .sweep import Result, Sweep

SCHEMA_VERSION = 1
RATIO_NOTE = "vs <lib> = their time / gputensor's time (> 1: gputensor is faster)"


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_rate(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.3g} {unit}"


def _rate(r: Result) -> str:
    return fmt_rate(r.gflops if r.metric == "GFLOP/s" else r.gbps, r.metric)


def _cell_ratio(r: Result, lib: str) -> str:
    ratio = r.ratio(lib)
    return "-" if ratio is None else f"{ratio:.2f}x"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return lines


def kernel_table(results: list[Result], libs: list[str]) -> list[str]:
    """One kernel's rows: size, shape, dtype, time, throughput, roofline, ratios."""
    head = ("size", "shape", "dtype", "time", "throughput", "roofline",
            *(f"vs {lib}" for lib in libs))
    rows = [head]
    for r in results:
        pct = "-" if r.roofline_pct is None else f"{r.roofline_pct:.1f}%"
        rows.append((str(r.size), r.label, r.dtype, fmt_time(r.time_s), _rate(r), pct,
                     *(_cell_ratio(r, lib) for lib in libs)))
    return _table(rows)


def header_lines(sweep: Sweep, meta: dict[str, Any]) -> list[str]:
    p = peaks_dict(sweep.peaks)
    bw = "?" if p["bandwidth"] is None else f"{p['bandwidth'] / 1e9:.4g} GB/s"
    fl = "?" if p["flops"] is None else f"{p['flops'] / 1e9:.4g} GFLOP/s"
    lines = [f"gputensor bench on {meta['device']} ({meta['device_name']})",
             f"peaks: {bw}, {fl} ({p['source']})",
             f"timing: warm-up call untimed, then the median of {meta['repeat']} repeats",
             "compared with: " + (", ".join(f"{k} {v}" for k, v in meta["libraries"].items()
                                            if k != "gputensor") or "nothing")]
    if sweep.libs:
        lines.append(RATIO_NOTE)
    if meta.get("emulated"):
        lines.append("NOTE: cuda is the CPU emulator here: these times are not GPU times")
    return lines


def render(sweep: Sweep, meta: dict[str, Any], docs: dict[str, str]) -> str:
    """The whole report: header, one table per kernel (in catalogue order), notes, failures."""
    out = header_lines(sweep, meta)
    by_kernel: dict[str, list[Result]] = {}
    for r in sweep.results:
        by_kernel.setdefault(r.kernel, []).append(r)
    for name, rows in by_kernel.items():
        bound = ("compute-bound" if rows[0].metric == "GFLOP/s" else "memory-bound"
                 if rows[0].roofline_pct is not None else "host-link-bound, no roofline")
        out += ["", f"== {name} ({rows[0].family}, {bound}): {docs.get(name, '')}".rstrip(),
                *kernel_table(rows, sweep.libs)]
    if sweep.notes:
        out += ["", "notes:", *(f"  {n}" for n in sweep.notes)]
    if sweep.failures:
        out += ["", "FAILED:", *(f"  {f}" for f in sweep.failures)]
    return "\n".join(out)


def result_dict(r: Result) -> dict[str, Any]:
    return {"kernel": r.kernel, "family": r.family, "size": r.size, "shape": r.shape,
            "dtype": r.dtype, "device": r.device, "time_s": r.time_s, "bytes": r.bytes,
            "flops": r.flops, "gbps": r.gbps, "gflops": r.gflops, "metric": r.metric,
            "roofline_pct": r.roofline_pct, "compare": dict(r.compare)}


def to_json(sweep: Sweep, meta: dict[str, Any]) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "device": meta["device"],
            "device_name": meta["device_name"], "emulated": bool(meta.get("emulated")),
            "peaks": peaks_dict(sweep.peaks), "repeat": meta["repeat"],
            "libraries": dict(meta["libraries"]),
            "results": [result_dict(r) for r in sweep.results],
            "notes": list(sweep.notes), "failures": list(sweep.failures)}


def write_json(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, renamed."""
    target = Path(path)
    write_atomically(target, json.dumps(data, indent=2) + "\n")
