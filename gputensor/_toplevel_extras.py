"""The torch.* names that front other modules: process switches, the legacy autocast switches,
symbolic-shape helpers, futures and fork/wait, ``cond``, device-generic streams and events,
and the error types. ``gputensor/__init__`` installs ``NAMES`` into the package namespace."""

from __future__ import annotations

from typing import Any

from gputensor import _switches, _sym
from gputensor._cond import cond
from gputensor._streams import Event, Stream
from gputensor.amp import GradScaler
from gputensor.amp import legacy_switches as _amp_switches
from gputensor.futures import Future, fork, wait
from gputensor.kernels.cuda.runtime import AcceleratorError, OutOfMemoryError

_SWITCHES = ("has_lapack", "has_mkl", "has_openmp", "has_spectral", "set_warn_always",
             "is_warn_always_enabled", "set_deterministic_debug_mode",
             "get_deterministic_debug_mode", "set_anomaly_enabled", "is_anomaly_enabled",
             "is_anomaly_check_nan_enabled", "init_num_threads", "set_flush_denormal",
             "get_device_module")

NAMES: dict[str, Any] = {
    **{n: getattr(_switches, n) for n in _SWITCHES},
    **{n: getattr(_amp_switches, n) for n in _amp_switches.__all__},
    **{n: getattr(_sym, n) for n in _sym.__all__},
    "cond": cond, "Stream": Stream, "Event": Event, "GradScaler": GradScaler,
    "Future": Future, "fork": fork, "wait": wait,
    "AcceleratorError": AcceleratorError, "OutOfMemoryError": OutOfMemoryError,
}
