"""``--plot out.png``: throughput against size, one panel per kernel, with the roofline.

matplotlib is an optional dependency (the ``plot`` extra): it is imported only when a plot is
asked for, through the object-oriented API with the Agg canvas, so no GUI backend or global
pyplot state is involved.
"""

from __future__ import annotations

import math
import os
from typing import Any

from .roofline import roof_rate
from .sweep import Result, Sweep

INSTALL_HINT = "pip install gputensor[plot]"


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def require_matplotlib() -> None:
    """Fail early (before the sweep runs) when ``--plot`` cannot be honoured."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailable(f"--plot needs matplotlib ({exc}): {INSTALL_HINT}") from exc


def _throughput(r: Result, seconds: float) -> float:
    work = r.flops if r.metric == "GFLOP/s" else r.bytes
    return work / seconds / 1e9


def _panel(ax: Any, name: str, rows: list[Result], sweep: Sweep) -> None:
    for dtype in dict.fromkeys(r.dtype for r in rows):
        mine = sorted((r for r in rows if r.dtype == dtype), key=lambda r: r.size)
        sizes = [r.size for r in mine]
        ax.plot(sizes, [_throughput(r, r.time_s) for r in mine], "o-",
                label=f"gputensor {dtype}")
        for lib in sweep.libs:
            pts = [(r.size, _throughput(r, r.compare[lib])) for r in mine
                   if r.compare.get(lib)]
            if pts:
                ax.plot(*zip(*pts, strict=True), "x--", alpha=0.7, label=f"{lib} {dtype}")
    roof = [(r.size, roof_rate(r.bytes, r.flops, r.metric, sweep.peaks))
            for r in sorted(rows, key=lambda r: r.size)]
    roof = [(s, v) for s, v in roof if v is not None and rows[0].family != "transfer"]
    if roof:
        ax.plot(*zip(*roof, strict=True), "k.-", linewidth=2, label="roofline")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(name)
    ax.set_xlabel("size (elements)")
    ax.set_ylabel(rows[0].metric)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="x-small")


def plot(sweep: Sweep, path: str | os.PathLike, title: str) -> None:
    """Draw every kernel of ``sweep`` into one PNG at ``path``."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by_kernel: dict[str, list[Result]] = {}
    for r in sweep.results:
        by_kernel.setdefault(r.kernel, []).append(r)
    n = max(1, len(by_kernel))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(5 * cols, 4 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (name, results) in zip(axes, by_kernel.items(), strict=False):
        _panel(ax, name, results, sweep)
    for ax in axes[len(by_kernel):]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.savefig(os.fspath(path), format="png", dpi=100)
