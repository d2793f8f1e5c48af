"""``prof.key_averages()``: events grouped by name (and input shapes), and the PyTorch-style
table with throughput columns (GB/s, GFLOP/s, % of the device's roofline) added."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .events import KERNEL, RANGE, Event
from .peaks import device_peaks

# sort_by keys -> attribute of an EventAverage (torch.profiler's names, "cuda_*" as aliases of
# the device times, plus the throughput columns).
SORT_KEYS: dict[str, str] = {
    "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
    "cpu_time": "cpu_time", "self_cpu_time": "self_cpu_time",
    "device_time_total": "device_time_total", "self_device_time_total": "self_device_time_total",
    "device_time": "device_time",
    "cuda_time_total": "device_time_total", "self_cuda_time_total": "self_device_time_total",
    "cuda_time": "device_time",
    "count": "count", "bytes": "bytes", "flops": "flops",
    "gbps": "gbps", "gflops": "gflops", "roofline": "roofline_percent",
    "cpu_memory_usage": "cpu_memory_usage", "self_cpu_memory_usage": "self_cpu_memory_usage",
    "device_memory_usage": "device_memory_usage",
    "self_device_memory_usage": "self_device_memory_usage",
    "cuda_memory_usage": "device_memory_usage",
    "self_cuda_memory_usage": "self_device_memory_usage",
}

# Summed by ``add`` and ``total_average`` (bytes; net allocated minus freed).
MEMORY_FIELDS = ("cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage",
                 "self_device_memory_usage")


@dataclass(eq=False)
class EventAverage:
    """One row of ``key_averages()``: totals over the events sharing a key. Times in µs."""

    key: str
    kind: str
    input_shapes: Any = None
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    device_time_total: float = 0.0
    self_device_time_total: float = 0.0
    bytes: int = 0
    flops: int = 0
    cpu_memory_usage: int = 0
    self_cpu_memory_usage: int = 0
    device_memory_usage: int = 0
    self_device_memory_usage: int = 0
    devices: list[str] = field(default_factory=list)
    # Seconds the roofline allows for the rated events (sum over events of
    # max(flops / peak_flops, bytes / peak_bw)) and the device seconds they took.
    roofline_s: float = 0.0
    rated_s: float = 0.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)
    cuda_memory_usage = property(lambda self: self.device_memory_usage)
    self_cuda_memory_usage = property(lambda self: self.self_device_memory_usage)

    @property
    def gbps(self) -> float:
        """Achieved GB/s over the device time (NaN when nothing was moved or timed)."""
        if not self.bytes or self.device_time_total <= 0:
            return math.nan
        return self.bytes / (self.device_time_total * 1e-6) / 1e9

    @property
    def gflops(self) -> float:
        if not self.flops or self.device_time_total <= 0:
            return math.nan
        return self.flops / (self.device_time_total * 1e-6) / 1e9

    @property
    def roofline_percent(self) -> float:
        """100 * achieved / attainable (see peaks.roofline_fraction), NaN when unrated."""
        if self.rated_s <= 0 or self.roofline_s <= 0:
            return math.nan
        return 100.0 * self.roofline_s / self.rated_s

    def add(self, ev: Event, rate: bool) -> None:
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        self.device_time_total += ev.device_time_total
        self.self_device_time_total += ev.self_device_time_total
        self.bytes += ev.bytes
        self.flops += ev.flops
        for name in MEMORY_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(ev, name))
        if ev.device and ev.device not in self.devices:
            self.devices.append(ev.device)
        seconds = ev.device_time_total * 1e-6
        if rate and ev.kind == KERNEL and seconds > 0 and (ev.bytes or ev.flops):
            peaks = device_peaks(ev.device)
            self.roofline_s += max(ev.flops / peaks.flops_per_s,
                                   ev.bytes / peaks.bandwidth_bytes_per_s)
            self.rated_s += seconds

    def __repr__(self) -> str:
        return (f"<EventAverage {self.key!r} x{self.count}: cpu {self.cpu_time_total:.1f} us, "
                f"device {self.device_time_total:.1f} us, {self.bytes} B, {self.flops} flop>")


class EventList(list):
    """A list of events or averages with PyTorch's ``table()``."""

    def __init__(self, items: Iterable[Any] = (), *, group_by_input_shape: bool = False,
                 profile_memory: bool = False) -> None:
        super().__init__(items)
        self.group_by_input_shape = group_by_input_shape
        self.profile_memory = profile_memory

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, top_level_events_only: bool = False,
              header: str | None = None) -> str:
        rows = [r if isinstance(r, EventAverage) else _single(r) for r in self]
        if top_level_events_only:
            rows = [r for r, src in zip(rows, self, strict=True)
                    if not isinstance(src, Event) or src.parent is None]
        return format_table(rows, sort_by, row_limit, max_name_column_width,
                            self.group_by_input_shape, self.profile_memory, header)

    def total_average(self) -> EventAverage:
        total = EventAverage("Total", RANGE)
        for r in self:
            r = r if isinstance(r, EventAverage) else _single(r)
            for name in ("count", "cpu_time_total", "self_cpu_time_total", "device_time_total",
                         "self_device_time_total", "bytes", "flops", "roofline_s", "rated_s",
                         *MEMORY_FIELDS):
                setattr(total, name, getattr(total, name) + getattr(r, name))
        return total


def _single(ev: Event) -> EventAverage:
    avg = EventAverage(ev.name, ev.kind, ev.input_shapes)
    avg.add(ev, rate=True)
    return avg


def key_averages(events: Iterable[Event], group_by_input_shape: bool = False,
                 profile_memory: bool = False, with_flops: bool = True) -> EventList:
    rows: dict[Any, EventAverage] = {}
    for ev in events:
        key: Any = ev.name
        if group_by_input_shape:
            key = (ev.name, repr(ev.input_shapes))
        avg = rows.get(key)
        if avg is None:
            avg = rows[key] = EventAverage(ev.name, ev.kind,
                                           ev.input_shapes if group_by_input_shape else None)
        avg.add(ev, rate=with_flops)
    return EventList(rows.values(), group_by_input_shape=group_by_input_shape,
                     profile_memory=profile_memory)


# -- formatting ------------------------------------------------------------------------------------
def format_time(us: float) -> str:
    """PyTorch's style: 12.345us, 1.234ms, 2.000s."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _num(x: float, digits: int = 2) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:,.{digits}f}"


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def format_table(rows: list[EventAverage], sort_by: str | None, row_limit: int,
                 name_width: int, with_shapes: bool, with_memory: bool,
                 header: str | None = None) -> str:
    if sort_by is not None:
        attr = SORT_KEYS.get(sort_by)
        if attr is None:
            raise ValueError(f"table(sort_by={sort_by!r}): unknown key; use one of "
                             f"{', '.join(sorted(SORT_KEYS))}")
        # NaN (an unrated row) sorts last whatever the direction.
        rows = sorted(rows, key=lambda r: (math.isnan(getattr(r, attr)),
                                           -getattr(r, attr)))
    self_cpu_total = sum(r.self_cpu_time_total for r in rows)
    self_device_total = sum(r.self_device_time_total for r in rows)
    if row_limit is not None and row_limit > 0:
        rows = rows[:row_limit]
    columns = ["Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg", "Device total",
               "Device avg", "# of Calls", "GB/s", "GFLOP/s", "% roofline"]
    if with_memory:  # PyTorch's "CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem"
        columns += ["CPU Mem", "Self CPU Mem", "Device Mem", "Self Device Mem"]
    if with_shapes:
        columns.append("Input Shapes")
    body = []
    for r in rows:
        name = r.key if len(r.key) <= name_width else r.key[:name_width - 3] + "..."
        pct = 100.0 * r.self_cpu_time_total / self_cpu_total if self_cpu_total else 0.0
        cells = [name, f"{pct:.2f}%", format_time(r.self_cpu_time_total),
                 format_time(r.cpu_time_total), format_time(r.cpu_time),
                 format_time(r.device_time_total), format_time(r.device_time), str(r.count),
                 _num(r.gbps), _num(r.gflops), _num(r.roofline_percent, 1)]
        if with_memory:
            cells += [_bytes(getattr(r, name)) for name in MEMORY_FIELDS]
        if with_shapes:
            cells.append(str(r.input_shapes))
        body.append(cells)
    widths = [max([len(c)] + [len(row[i]) for row in body]) for i, c in enumerate(columns)]
    if with_shapes:  # like PyTorch, shapes may run long: don't let one row set the width
        widths[-1] = min(widths[-1], 80)
    sep = "  ".join("-" * w for w in widths)

    def line(cells: list[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths, strict=True)):
            out.append(c.ljust(w) if i == 0 or (with_shapes and i == len(cells) - 1)
                       else c.rjust(w))
        return "  ".join(out).rstrip()

    lines = [header] if header else []
    lines += [sep, line(columns), sep, *(line(c) for c in body), sep,
              f"Self CPU time total: {format_time(self_cpu_total)}",
              f"Self Device time total: {format_time(self_device_total)}"]
    # The peaks the "% roofline" column is measured against, once per device.
    rated = sorted({d for r in rows if r.rated_s > 0 for d in r.devices})
    for device in rated:
        p = device_peaks(device)
        lines.append(f"Roofline peaks ({device}): {p.bandwidth_bytes_per_s / 1e9:,.1f} GB/s, "
                     f"{p.flops_per_s / 1e9:,.1f} GFLOP/s ({p.source})")
    return "\n".join(lines) + "\n"
