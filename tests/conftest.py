"""Shared fixtures: every op test runs on each available device (cpu, and cuda when present)."""

from __future__ import annotations

import pytest

import gputensor as gt

# "cuda:N", not "cuda": a CUDA tensor's device carries its index, and as in PyTorch
# device("cuda") != device("cuda:0"), so tests compare against the indexed device. On a
# machine with several devices (GPUTENSOR_CUDA_EMULATOR=2 in CI) the tests run on the last
# one while device 0 stays current: every op must then run on its tensors' device, and a
# kernel that launched on the current device instead would meet pointers of another device's
# memory (a stray address in the emulator).
DEVICES = ["cpu"] + ([f"cuda:{gt.cuda.device_count() - 1}"] if gt.cuda.is_available() else [])


@pytest.fixture(params=DEVICES, ids=[d.split(":")[0] for d in DEVICES])
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def _restore_defaults():
    """Tests that change global defaults cannot leak them into other tests."""
    dtype, dev = gt.get_default_dtype(), gt.get_default_device()
    yield
    gt.set_default_dtype(dtype)
    gt.set_default_device(dev)
