"""Fixed device peaks for the profiler tests: roofline figures are computed against them, and no
test triggers the (cached, sub-second) peaks measurement by accident."""

from __future__ import annotations

import pytest

import gputensor as gt

BANDWIDTH = 1e10  # bytes/s
FLOPS = 1e11      # flop/s


DEVICES = ("cpu", "cuda:0", "cuda:1")  # cuda:1: the suite's device with two emulated GPUs


@pytest.fixture(autouse=True)
def fixed_peaks():
    for dev in DEVICES:
        gt.profiler.set_device_peaks(dev, bandwidth=BANDWIDTH, flops=FLOPS)
    yield
    for dev in DEVICES:
        gt.profiler.set_device_peaks(dev)
