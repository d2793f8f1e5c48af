"""Fixtures for the benchmark suite: one `lib` parameter (gputensor / numpy / torch) over shared
NumPy data, so every op's three variants read the very same bytes and land in one group.

Run with benchmarks enabled (pyproject's addopts disables them for the test suite):
    python -m pytest benchmarks --benchmark-only --benchmark-json=bench.json
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from gputensor.info import usable_cores

try:
    import torch
except ImportError:  # torch is an optional comparison point
    torch = None


CORES = usable_cores()
if torch is not None and torch.get_num_threads() != CORES:
    # Same thread count as Numba's pool and OpenBLAS, so the comparison is like for like. Only
    # when it differs: calling set_num_threads, even with torch's own default, sends torch's
    # unary ops and softmax through OpenMP regions that cost milliseconds per call on a busy
    # few-core machine (torch.exp of 256 floats: ~3 us before, 4-16 ms after, measured here).
    torch.set_num_threads(CORES)


@dataclass(frozen=True)
class Lib:
    """One library under test: its module and how to view a NumPy array as its tensor."""

    name: str
    xp: ModuleType
    wrap: Callable[[np.ndarray], Any]


def _libs() -> dict[str, Lib | None]:
    return {
        "gputensor": Lib("gputensor", gt, gt.from_numpy),
        "numpy": Lib("numpy", np, lambda a: a),
        "torch": None if torch is None else Lib("torch", torch, torch.from_numpy),
    }


LIBS = _libs()


@pytest.fixture(params=list(LIBS))
def lib(request: pytest.FixtureRequest) -> Lib:
    found = LIBS[request.param]
    if found is None:
        pytest.skip("torch is not installed")
    return found


class Data:
    """Seeded float32 arrays, made once per session and shared by all libraries (zero-copy)."""

    def __init__(self) -> None:
        self._cache: dict[tuple, np.ndarray] = {}
        self._rng = np.random.default_rng(0)

    def get(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        k = (key, shape)
        if k not in self._cache:
            # Values in [0.5, 1.5): exp/softmax stay finite, no denormals skew the timings.
            self._cache[k] = self._rng.random(shape, dtype=np.float32) + np.float32(0.5)
        return self._cache[k]


@pytest.fixture(scope="session")
def data() -> Data:
    return Data()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # pyproject's addopts carries --benchmark-disable for the test suite; pytest-benchmark
    # rejects it together with --benchmark-only, so asking for --benchmark-only here re-enables.
    if getattr(config.option, "benchmark_only", False):
        config.option.benchmark_enable = True


def _openblas_threads() -> int | None:
    """OpenBLAS's thread count, read from the library NumPy loaded (None when not found)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    names = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
             "openblas_get_num_threads")
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for name in names:
            fn = getattr(lib, name, None)
            if fn is not None:
                return int(fn())
    return None


def thread_counts() -> dict[str, Any]:
    import numba

    return {
        "cores": CORES,
        "numba": numba.get_num_threads(),
        "openblas": _openblas_threads(),
        "torch": None if torch is None else torch.get_num_threads(),
        "torch_version": None if torch is None else torch.__version__,
        "numpy_version": np.__version__,
        "numba_version": numba.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
    }


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    machine_info["threads"] = thread_counts()
