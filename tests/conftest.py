"""Shared fixtures: every op test runs on each available device (cpu, and cuda when present)."""

from __future__ import annotations

import pytest

import gputensor as gt

DEVICES = ["cpu"] + (["cuda"] if gt.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def _restore_defaults():
    """Tests that change global defaults cannot leak them into other tests."""
    dtype, dev = gt.get_default_dtype(), gt.get_default_device()
    yield
    gt.set_default_dtype(dtype)
    gt.set_default_device(dev)
