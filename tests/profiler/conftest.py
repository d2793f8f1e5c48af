"""Fixed device peaks for the profiler tests: roofline figures are computed against them, and no
test triggers the (cached, sub-second) peaks measurement by accident."""

from __future__ import annotations

import pytest

import gputensor as gt

BANDWIDTH = 1e10  # bytes/s
FLOPS = 1e11      # flop/s


@pytest.fixture(autouse=True)
def fixed_peaks():
    for dev in ("cpu", "cuda:0"):
        gt.profiler.set_device_peaks(dev, bandwidth=BANDWIDTH, flops=FLOPS)
    yield
    for dev in ("cpu", "cuda:0"):
        gt.profiler.set_device_peaks(dev)
