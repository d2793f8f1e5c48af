"""tests/gpu: run only on a real NVIDIA GPU through the CuPy driver (marker ``gpu``); on the
emulator or without CUDA they are skipped. The same CuPy facts are checked without a GPU by
tests/cuda/test_cupy_driver.py against a stand-in cupy."""

from __future__ import annotations

import socket

import pytest

import gputensor as gt


def _real_gpu() -> bool:
    return gt.cuda.is_available() and gt.cuda.runtime_name() == "cupy"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    real = _real_gpu()
    for item in items:
        if "tests/gpu/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not real:
                item.add_marker(pytest.mark.skip(reason="needs a real NVIDIA GPU with CuPy"))


@pytest.fixture
def busy():
    """A function that queues ~``ms`` milliseconds of float32 GEMMs on the current stream."""
    a = gt.ones(4096, 4096, device="cuda") if _real_gpu() else None

    def run(ms: float = 100.0) -> None:
        for _ in range(max(1, int(ms / 2))):  # ~2 ms per 4096^3 float32 product on an H100
            a @ a
    return run


@pytest.fixture
def unused_port() -> int:
    """A TCP port nothing listens on now, for a store's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
