"""Anomaly detection: remember where each node was created and fail on NaN gradients."""

from __future__ import annotations

import traceback
from typing import Any

enabled = False
check_nan = True


def forward_trace() -> list[str]:
    # Drop the autograd frames themselves: the user wants to see their own forward code.
    return traceback.format_stack()[:-3]


def is_anomaly_enabled() -> bool:
    return enabled


def is_anomaly_check_nan_enabled() -> bool:
    # PyTorch reports the flag itself, on or off; the engine checks NaNs only when enabled too.
    return check_nan


def _set(mode: bool, nan: bool) -> tuple[bool, bool]:
    global enabled, check_nan
    prev = (enabled, check_nan)
    enabled, check_nan = bool(mode), bool(nan)
    return prev


class set_detect_anomaly:
    """Turn anomaly detection on or off; as a call it takes effect at once, and as a context
    manager it restores the previous mode on exit (like PyTorch)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = _set(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _set(*self._prev)


class detect_anomaly:
    """Context manager and decorator: backward raises on NaN, naming the forward op and
    printing where it ran in the forward pass."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        self._prev = _set(True, self.check_nan)

    def __exit__(self, *exc: Any) -> None:
        _set(*self._prev)

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper
