"""PyTorch's per-device autocast switches (``torch.get_autocast_cpu_dtype``,
``torch.set_autocast_ipu_enabled``, ...), deprecated spellings of ``get_autocast_dtype(dev)``
and friends, plus the cache and nesting switches ``torch.autocast`` itself uses.

They read and write the same per-thread state as ``gt.autocast`` (autocast_mode._state), so
``set_autocast_cpu_enabled(True)`` makes the CPU ops autocast exactly as a region does.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Callable
from typing import Any

from gputensor import _dtype as D

from . import autocast_mode as _am


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.",
                  DeprecationWarning, stacklevel=3)


def _check_dtype(dtype: Any) -> None:
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"dtype must be a torch.dtype (got {type(dtype).__name__})")


def _check_enabled(enabled: Any) -> None:
    if not isinstance(enabled, builtins.bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")


def _getter(name: str, dev: str) -> Callable[[], D.dtype]:
    def get() -> D.dtype:
        _deprecated(f"{get.__name__}()", f"get_autocast_dtype('{dev}')")
        return _am.get_autocast_dtype(dev)
    get.__name__ = get.__qualname__ = f"get_autocast_{name}_dtype"
    return get


def _setter(name: str, dev: str) -> Callable[[D.dtype], None]:
    def set_(dtype: D.dtype) -> None:
        _deprecated(f"{set_.__name__}(dtype)", f"set_autocast_dtype('{dev}', dtype)")
        _check_dtype(dtype)
        _am.set_autocast_dtype(dev, dtype)
    set_.__name__ = set_.__qualname__ = f"set_autocast_{name}_dtype"
    return set_


def _is_enabled(dev: str) -> Callable[[], bool]:
    def is_enabled() -> bool:
        _deprecated(f"{is_enabled.__name__}()", f"is_autocast_enabled('{dev}')")
        return _am.is_autocast_enabled(dev)
    is_enabled.__name__ = is_enabled.__qualname__ = f"is_autocast_{dev}_enabled"
    return is_enabled


def _set_enabled(dev: str) -> Callable[[bool], None]:
    def set_enabled(enabled: bool) -> None:
        _deprecated(f"{set_enabled.__name__}(enabled)", f"set_autocast_enabled('{dev}', enabled)")
        _check_enabled(enabled)
        _am.set_autocast_enabled(dev, enabled)
    set_enabled.__name__ = set_enabled.__qualname__ = f"set_autocast_{dev}_enabled"
    return set_enabled


get_autocast_cpu_dtype = _getter("cpu", "cpu")
get_autocast_gpu_dtype = _getter("gpu", "cuda")
get_autocast_ipu_dtype = _getter("ipu", "ipu")
get_autocast_xla_dtype = _getter("xla", "xla")
set_autocast_cpu_dtype = _setter("cpu", "cpu")
set_autocast_gpu_dtype = _setter("gpu", "cuda")
set_autocast_ipu_dtype = _setter("ipu", "ipu")
set_autocast_xla_dtype = _setter("xla", "xla")
is_autocast_cpu_enabled = _is_enabled("cpu")
is_autocast_ipu_enabled = _is_enabled("ipu")
is_autocast_xla_enabled = _is_enabled("xla")
set_autocast_cpu_enabled = _set_enabled("cpu")
set_autocast_ipu_enabled = _set_enabled("ipu")
set_autocast_xla_enabled = _set_enabled("xla")


def is_autocast_cache_enabled() -> bool:
    """Whether casts of leaf tensors are cached inside autocast regions (this thread)."""
    return _am._state.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _check_enabled(enabled)
    _am._state.cache_enabled = enabled


def autocast_increment_nesting() -> int:
    """Enter one autocast nesting level; returns the new depth."""
    _am._state.nesting += 1
    return _am._state.nesting


def autocast_decrement_nesting() -> int:
    """Leave one nesting level; returns the new depth (the caller clears the cast cache at 0,
    as ``autocast.__exit__`` does)."""
    _am._state.nesting -= 1
    return _am._state.nesting


__all__ = ["autocast_decrement_nesting", "autocast_increment_nesting", "get_autocast_cpu_dtype",
           "get_autocast_gpu_dtype", "get_autocast_ipu_dtype", "get_autocast_xla_dtype",
           "is_autocast_cache_enabled", "is_autocast_cpu_enabled", "is_autocast_ipu_enabled",
           "is_autocast_xla_enabled", "set_autocast_cache_enabled", "set_autocast_cpu_dtype",
           "set_autocast_cpu_enabled", "set_autocast_gpu_dtype", "set_autocast_ipu_dtype",
           "set_autocast_ipu_enabled", "set_autocast_xla_dtype", "set_autocast_xla_enabled"]
