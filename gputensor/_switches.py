"""PyTorch's top-level process switches: warn-always, the deterministic debug mode, anomaly
mode, the build flags (``has_lapack``...), ``init_num_threads``, ``set_flush_denormal`` and
``get_device_module``.

Each switch is a thin front over the state its subsystem already keeps (gputensor/_determinism.py,
autograd/anomaly_mode.py, gputensor/_threads.py, gputensor/_denormals.py), so setting it here
changes what the kernels and the autograd engine do.
"""

from __future__ import annotations

import builtins
import importlib.util
from types import ModuleType
from typing import Any

import numpy as np

from gputensor import _determinism
from gputensor.autograd import anomaly_mode

# -- build flags: what this runtime really has --------------------------------------------------
# LAPACK: the CPU linalg ops call SciPy's LAPACK (CuPy's cuSOLVER on a GPU).
has_lapack: bool = importlib.util.find_spec("scipy") is not None
# MKL: only when NumPy's BLAS is MKL (it is OpenBLAS in the usual wheels).
has_mkl: bool = "mkl" in str(
    np.__config__.CONFIG.get("Build Dependencies", {}).get("blas", {}).get("name", "")).lower()
# OpenMP: Numba's parallel loops can run on its OpenMP threading layer.
has_openmp: bool = importlib.util.find_spec("numba.np.ufunc.omppool") is not None
# Spectral ops: gt.fft runs on both devices.
has_spectral: bool = True

# -- warn always ---------------------------------------------------------------------------------
_warn_always = [False]


def set_warn_always(b: bool, /) -> None:
    """Make the warnings PyTorch gives once per process appear every time."""
    if not isinstance(b, builtins.bool):
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {type(b).__name__}")
    _warn_always[0] = b


def is_warn_always_enabled() -> bool:
    return _warn_always[0]


# -- deterministic debug mode --------------------------------------------------------------------
_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode: int | str) -> None:
    """0/"default": no alerts; 1/"warn": warn on nondeterministic kernels; 2/"error": raise
    (``use_deterministic_algorithms`` spelled as a level)."""
    if not isinstance(debug_mode, (builtins.int, str)):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    _determinism.use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _determinism.are_deterministic_algorithms_enabled():
        return 0
    return 1 if _determinism.is_deterministic_algorithms_warn_only_enabled() else 2


# -- anomaly mode --------------------------------------------------------------------------------
def _check_bool(fn: str, name: str, position: int, value: Any) -> None:
    if not isinstance(value, builtins.bool):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be bool, not "
                        f"{type(value).__name__}")


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off for the whole process (no restore, unlike
    ``autograd.set_detect_anomaly`` used as a context manager)."""
    _check_bool("set_anomaly_enabled", "enabled", 1, enabled)
    _check_bool("set_anomaly_enabled", "check_nan", 2, check_nan)
    anomaly_mode._set(enabled, check_nan)


is_anomaly_enabled = anomaly_mode.is_anomaly_enabled
is_anomaly_check_nan_enabled = anomaly_mode.is_anomaly_check_nan_enabled


# -- threads and denormals -----------------------------------------------------------------------
def init_num_threads() -> None:
    """Give the calling thread the thread count set by ``set_num_threads`` (Numba keeps the
    count per thread; a new thread starts with the default)."""
    from gputensor import _threads

    _threads.init_num_threads()


def set_flush_denormal(mode: bool) -> bool:
    """Flush denormal floats to zero in this thread's CPU kernels (x86's FTZ and DAZ bits).
    Returns False, changing nothing, where the CPU has no such bits."""
    if not isinstance(mode, builtins.bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    from gputensor import _denormals

    return _denormals.set_flush_denormal(mode)


# -- device modules ------------------------------------------------------------------------------
def get_device_module(device: Any = None) -> ModuleType:
    """``gt.cuda`` for a CUDA device, ``gt.cpu`` for the CPU; None: the current accelerator's
    module, or ``gt.cpu`` without one."""
    import gputensor as gt

    if isinstance(device, gt.device):
        name = device.type
    elif isinstance(device, str):
        name = gt.device(device).type
    elif device is None:
        acc = gt.accelerator.current_accelerator()
        name = "cpu" if acc is None else acc.type
    else:
        raise RuntimeError(f"Invalid value of device '{device}', expect torch.device, str, or "
                           f"None")
    module = getattr(gt, name, None)
    if not isinstance(module, ModuleType):
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered as "
                           f"'torch.{name}'.")
    return module
