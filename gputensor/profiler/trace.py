"""Chrome trace export (the Trace Event Format read by chrome://tracing and Perfetto).

Host-side events (backend kernels, copies, ``record_function`` ranges) are complete events
(``"ph": "X"``) on the host process, one track per thread; device work (CUDA launches, device
copies, CPU kernels' compute) goes on one process per device. Timestamps and durations are µs
from the start of the profile. On a real GPU a launch's device duration is measured with CUDA
events, its position is the host time it was issued (CUDA events give durations, not clocks).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gputensor._files import write_atomically

from .events import COPY, KERNEL, LAUNCH, Event

HOST_PID = 0


def trace_events(events: Iterable[Event], start_ns: int) -> list[dict[str, Any]]:
    events = list(events)
    threads: dict[int, int] = {}
    device_pids: dict[str, int] = {}
    out: list[dict[str, Any]] = []

    def tid(ev: Event) -> int:
        return threads.setdefault(ev.thread, len(threads))

    def device_pid(device: str) -> int:
        return device_pids.setdefault(device, len(device_pids) + 1)

    for ev in events:
        ts = (ev.start_ns - start_ns) / 1e3
        args: dict[str, Any] = {"kind": ev.kind}
        if ev.device:
            args["device"] = ev.device
        if ev.backend:
            args["backend"] = ev.backend
        if ev.input_shapes:
            args["input_shapes"] = ev.input_shapes
            args["input_dtypes"] = ev.input_dtypes
        if ev.bytes or ev.flops:
            args["bytes"] = ev.bytes
            args["flops"] = ev.flops
        if ev.cpu_memory_usage:
            args["cpu_memory_bytes"] = ev.cpu_memory_usage
        if ev.device_memory_usage:
            args["device_memory_bytes"] = ev.device_memory_usage
        args.update(ev.extra)
        if ev.kind == LAUNCH:
            out.append({"name": ev.name, "cat": "kernel", "ph": "X", "ts": ts,
                        "dur": ev.device_ns / 1e3, "pid": device_pid(ev.device), "tid": 0,
                        "args": args})
            continue
        out.append({"name": ev.name, "cat": ev.kind, "ph": "X", "ts": ts,
                    "dur": (ev.end_ns - ev.start_ns) / 1e3, "pid": HOST_PID, "tid": tid(ev),
                    "args": args})
        # Device work without launches of its own (CPU kernels, copies, cuBLAS calls) gets a
        # device-track entry too; nested kernels are inside their parent's.
        nested = ev.parent is not None and ev.parent.kind in (KERNEL, COPY)
        launched = any(c.kind == LAUNCH for c in ev.children)
        if ev.kind in (KERNEL, COPY) and ev.device and not nested and not launched:
            out.append({"name": ev.name, "cat": "device", "ph": "X", "ts": ts,
                        "dur": ev.device_time_total, "pid": device_pid(ev.device), "tid": 0,
                        "args": {"bytes": ev.bytes, "flops": ev.flops}})
    meta = [{"name": "process_name", "ph": "M", "pid": HOST_PID, "tid": 0,
             "args": {"name": "host"}}]
    for device, pid in device_pids.items():
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"name": f"device {device}"}})
    for ident, t in threads.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": HOST_PID, "tid": t,
                     "args": {"name": f"thread {ident}"}})
    return meta + out


def export_chrome_trace(events: Iterable[Event], start_ns: int, path: str | os.PathLike) -> str:
    """Write the trace to ``path`` atomically (a temporary file in the same folder, renamed):
    a reader never sees half a file. Returns the path."""
    target = Path(path)
    payload = {"traceEvents": trace_events(events, start_ns), "displayTimeUnit": "ms",
               "otherData": {"producer": "gputensor.profiler"}}
    text = json.dumps(payload, default=str)
    write_atomically(target, text)
    return str(target)
