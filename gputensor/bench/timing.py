"""Timing one call: warm up once (compilation excluded), then the median of N repeats.

The first call of a kernel compiles it (Numba, g++ for the emulator, NVRTC on a GPU) or loads
it from a disk cache, so it is never timed. A short call is run several times inside each
repeat so that the timer's resolution and the loop's own cost stay small against it; the
figure is the median over repeats of (repeat's time / calls in it). On a device, the timed
region starts and ends with a synchronisation, so queued work is counted, and only once.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

# A repeat should last at least this long; shorter calls are looped inside it.
MIN_REPEAT_S = 2e-4
MAX_CALLS_PER_REPEAT = 10_000


def _timed(fn: Callable[[], Any], sync: Callable[[], None], calls: int) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return time.perf_counter() - t0


def calls_per_repeat(one_call_s: float) -> int:
    """How many calls make a repeat of at least ``MIN_REPEAT_S``."""
    if one_call_s <= 0:
        return MAX_CALLS_PER_REPEAT
    return max(1, min(MAX_CALLS_PER_REPEAT, int(MIN_REPEAT_S / one_call_s) + 1))


def measure(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` repeats, after one untimed warm-up.

    One more (timed, discarded) call calibrates how many calls each repeat holds."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    fn()  # warm-up: compiles or loads the kernel; never timed
    sync()
    calls = calls_per_repeat(_timed(fn, sync, 1))
    return statistics.median(_timed(fn, sync, calls) / calls for _ in range(repeat))
