"""gputensor's profiler, shaped like torch.profiler: which backend kernels, CUDA launches and
device copies ran, for how long on the host and on the device, and how close each came to the
device's roofline (achieved GB/s and GFLOP/s against its peaks).

    with gt.profiler.profile(record_shapes=True) as prof:
        with gt.profiler.record_function("forward"):
            loss = model(x).sum()
        loss.backward()
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=15))
    prof.export_chrome_trace("trace.json")

Nothing is hooked while no profile runs (see hooks.py): the kernel tables, the copy table and
the CUDA launch path are the original objects then. ``import gputensor`` loads none of the
submodules: the names below import theirs on first access (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the submodule defining it (no submodule is named like an export: importing a
# submodule binds its name on the package, which would shadow the export)
_EXPORTS = {
    "profile": "session", "record_function": "session", "ProfilerActivity": "session",
    "schedule": "scheduling", "ProfilerAction": "scheduling",
    "Event": "events", "EventAverage": "table", "EventList": "table",
    "Peaks": "peaks", "device_peaks": "peaks", "set_device_peaks": "peaks",
    "kernel_cost": "costs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gputensor.profiler' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
