"""The libraries a sweep runs: gputensor itself and the comparison points.

Each ``Lib`` knows how to put a host NumPy array on its device (zero-copy on the CPU where the
library allows it) and how to wait for queued device work. Comparisons follow one rule: a
library is compared only on hardware of the same kind as the device under test, except NumPy,
which is always there as the host baseline.

- numpy: always (host arrays, whatever the device).
- torch: CPU torch for the cpu device; torch.cuda for the cuda device, only if it is available.
- cupy:  only for the cuda device on a real GPU (never against the emulator).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

import gputensor as gt

KNOWN = ("numpy", "torch", "cupy")


@dataclass(frozen=True)
class Lib:
    """One library under test on one device."""

    name: str
    xp: ModuleType
    device: str                          # "cpu" or "cuda"
    put: Callable[[np.ndarray], Any]     # host array -> this library's array on its device
    host: Callable[[np.ndarray], Any]    # host array -> this library's host array (no copy)
    sync: Callable[[], None]             # wait for queued device work (no-op on the host)
    version: str


def _no_sync() -> None:
    pass


def _version(dist: str, module: ModuleType | None = None) -> str:
    found = getattr(module, "__version__", None)
    if found:
        return str(found)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def gputensor_lib(device: str) -> Lib:
    """gputensor on ``device`` ("cpu": zero-copy ``from_numpy``; "cuda": one host-to-device
    copy per array)."""
    if device == "cuda":
        return Lib("gputensor", gt, "cuda", lambda a: gt.from_numpy(a).cuda(), gt.from_numpy,
                   gt.cuda.synchronize, _version("gputensor"))
    return Lib("gputensor", gt, "cpu", gt.from_numpy, gt.from_numpy, _no_sync,
               _version("gputensor"))


def numpy_lib() -> Lib:
    return Lib("numpy", np, "cpu", _same, _same, _no_sync, np.__version__)


def _same(a: np.ndarray) -> np.ndarray:
    return a


def torch_lib(device: str) -> tuple[Lib | None, str]:
    """(Lib, "") or (None, why torch is not compared on ``device``)."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"

    def to_torch(a: np.ndarray) -> Any:
        if a.dtype.name == "bfloat16":  # an ml_dtypes array: torch.from_numpy can't read it
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)

    if device == "cuda":
        if not torch.cuda.is_available():
            return None, "torch.cuda is not available (torch is compared on the same kind of " \
                         "device only)"
        return Lib("torch", torch, "cuda", lambda a: to_torch(a).cuda(), to_torch,
                   torch.cuda.synchronize, torch.__version__), ""
    # torch's default thread count is already the core count, like Numba's pool and OpenBLAS.
    # Calling torch.set_num_threads (even with that same count) switches torch's unary ops to
    # OpenMP regions that cost milliseconds per call on a loaded machine: leave it alone.
    return Lib("torch", torch, "cpu", to_torch, to_torch, _no_sync, torch.__version__), ""


def cupy_lib(device: str) -> tuple[Lib | None, str]:
    """(Lib, "") or (None, why CuPy is not compared): only on a real GPU."""
    if device != "cuda":
        return None, "CuPy runs on a GPU only"
    from gputensor.kernels.cuda import cupy_driver

    ok, why = cupy_driver.is_usable()
    if not ok:
        return None, why
    if gt.cuda.runtime_name() != "cupy":
        return None, "gputensor's cuda device is the CPU emulator, not a GPU"
    import cupy

    def sync() -> None:
        cupy.cuda.Device().synchronize()

    return Lib("cupy", cupy, "cuda", cupy.asarray, _same, sync, _version("cupy", cupy)), ""


def comparison_libs(device: str, requested: list[str]) -> tuple[list[Lib], list[str]]:
    """The requested comparison libraries usable against ``device``, and a note for each one
    left out."""
    libs: list[Lib] = []
    notes: list[str] = []
    for name in requested:
        if name == "numpy":
            libs.append(numpy_lib())
            continue
        found, why = torch_lib(device) if name == "torch" else cupy_lib(device)
        if found is None:
            notes.append(f"{name}: not compared ({why})")
        else:
            libs.append(found)
    return libs, notes
