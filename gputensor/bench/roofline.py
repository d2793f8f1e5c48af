"""Device peaks and the roofline, as the profiler defines them (``gputensor.profiler.peaks``).

The bench does not measure or look up peaks itself: ``device_peaks`` gives a user override, a
datasheet entry or a cached measurement, and ``roofline_fraction`` is achieved / attainable
with attainable = ``min(peak_flops, AI * peak_bandwidth)``. For a kernel that counts no flops
that is achieved bytes/s over peak bandwidth; for an elementwise op the two readings agree,
its arithmetic intensity being far left of the ridge point.
"""

from __future__ import annotations

import math
from typing import Any

import gputensor as gt
from gputensor.profiler.peaks import Peaks, device_peaks, roofline_fraction


def peaks_for(device: str) -> tuple[Peaks | None, str]:
    """(the profiler's peaks for ``device``, "") or (None, why there are none)."""
    try:
        return device_peaks(gt.device(device)), ""
    except Exception as exc:  # a failed measurement leaves the roofline columns empty
        return None, f"no device peaks ({type(exc).__name__}: {exc}): roofline not computed"


def peaks_dict(peaks: Peaks | None) -> dict[str, Any]:
    """The JSON form: bandwidth (bytes/s), flops (flop/s), source."""
    if peaks is None:
        return {"bandwidth": None, "flops": None, "source": "unavailable"}
    return {"bandwidth": peaks.bandwidth_bytes_per_s, "flops": peaks.flops_per_s,
            "source": peaks.source}


def roofline_pct(nbytes: int, flops: int, seconds: float, peaks: Peaks | None) -> float | None:
    """Achieved rate as a percentage of the roofline (None without peaks or work)."""
    if peaks is None:
        return None
    fraction = roofline_fraction(peaks, nbytes, flops, seconds)
    return None if math.isnan(fraction) else 100.0 * fraction


def roof_rate(nbytes: int, flops: int, metric: str, peaks: Peaks | None) -> float | None:
    """The roofline in ``metric`` units at this intensity: peak GB/s for memory-bound kernels,
    ``min(peak, AI * bandwidth)`` GFLOP/s for compute-bound ones."""
    if peaks is None:
        return None
    if metric == "GFLOP/s":
        if nbytes <= 0 or flops <= 0:
            return peaks.flops_per_s / 1e9
        return peaks.attainable_flops(flops / nbytes) / 1e9
    return peaks.bandwidth_bytes_per_s / 1e9
