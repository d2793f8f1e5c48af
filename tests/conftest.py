"""Shared fixtures: every op test runs on each available device (cpu, and cuda when present)."""

from __future__ import annotations

import pytest

import gputensor as gt

# "cuda:0", not "cuda": a CUDA tensor's device carries its index, and as in PyTorch
# device("cuda") != device("cuda:0"), so tests compare against the indexed device.
DEVICES = ["cpu"] + (["cuda:0"] if gt.cuda.is_available() else [])


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
