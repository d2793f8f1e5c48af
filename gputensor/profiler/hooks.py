"""Installing and removing the profiler's hooks; nothing here costs anything while no profiler
runs, because nothing is installed then.

While a profiler runs:
- every backend's kernel table (``kernels/registry.py`` BACKENDS) is replaced by a table of
  recording wrappers, and ``registry.kernel_wrapper`` wraps kernels that enter a table late
  (registered by the CUDA backend on first use, or compiled by an elementwise factory);
  frontends' hot-path kernel caches are emptied on install and on removal, so they look the
  kernels up again;
- ``kernels/cuda/device.launch_observer`` records every CUDA launch (they all go through
  ``device.launch_kernel``);
- the copy table's movers (``storage/copy_table.py`` COPY_TABLE, the same dict object) are
  wrapped in place, and ``copy_table.rebuild`` re-wraps them if a device joins meanwhile.

``remove()`` puts the original table objects and functions back, keeping any kernel registered
or compiled in between (unwrapped).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from gputensor.kernels import registry
from gputensor.storage import copy_table

from .recorder import Recorder

_active: Recorder | None = None
_saved_tables: dict[Any, dict[str, Callable[..., Any]]] = {}
_saved_rebuild: Callable[..., None] | None = None
_lock = threading.RLock()
_suspended = threading.local()


def active() -> Recorder | None:
    """The recorder hooks currently feed, or None."""
    return _active


def is_installed() -> bool:
    return _saved_rebuild is not None


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Run without recording on this thread (the peaks measurement uses it)."""
    depth = getattr(_suspended, "depth", 0)
    _suspended.depth = depth + 1
    try:
        yield
    finally:
        _suspended.depth = depth


def _recording() -> Recorder | None:
    rec = _active
    if rec is None or getattr(_suspended, "depth", 0):
        return None
    return rec


# -- wrappers --------------------------------------------------------------------------------------
def raw(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function a profiler wrapper wraps (``fn`` itself when it is no wrapper)."""
    return getattr(fn, "_gt_profiler_raw", fn)


def wrap_kernel(backend: Any, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = raw(fn)

    def profiled(*args: Any, **kwargs: Any) -> Any:
        rec = _recording()
        if rec is None:
            return fn(*args, **kwargs)
        return rec.kernel(backend, name, fn, args, kwargs)

    functools.update_wrapper(profiled, fn)
    profiled._gt_profiler_raw = fn  # type: ignore[attr-defined]
    return profiled


def _wrap_mover(mover: Callable[..., None]) -> Callable[..., None]:
    mover = raw(mover)

    def profiled(dst: Any, dst_offset: int, src: Any, src_offset: int, count: int) -> None:
        rec = _recording()
        if rec is None:
            return mover(dst, dst_offset, src, src_offset, count)
        return rec.copy(mover, dst, dst_offset, src, src_offset, count)

    functools.update_wrapper(profiled, mover)
    profiled._gt_profiler_raw = mover  # type: ignore[attr-defined]
    return profiled


def _observe_launch(source: str, name: str, grid: Any, block: Any, shared_bytes: int,
                    run: Callable[[], None]) -> None:
    rec = _recording()
    if rec is None:
        run()
    else:
        rec.launch(source, name, grid, block, shared_bytes, run)


def _wrap_copy_table() -> None:
    for key, mover in list(copy_table.COPY_TABLE.items()):
        copy_table.COPY_TABLE[key] = _wrap_mover(mover)


def _rebuild_and_wrap(storage_types: list[type]) -> None:
    # Called by device.activate() once the new runtime serves "cuda" (a device joining while
    # the profiler runs): wrap its copies too.

    _saved_rebuild(storage_types)
    _wrap_copy_table()


# -- install / remove ------------------------------------------------------------------------------
def install(recorder: Recorder) -> None:
    """Route every kernel, launch and copy to ``recorder`` (hooks installed if they are not)."""
    global _active, _saved_rebuild
    from gputensor.kernels.cuda import device as cuda_device

    with _lock:
        if _saved_rebuild is None:
            for backend in list(registry.BACKENDS.values()):
                _saved_tables[backend] = backend.kernels
                backend.kernels = {n: wrap_kernel(backend, n, f)
                                   for n, f in backend.kernels.items()}
            registry.kernel_wrapper = wrap_kernel
            registry.clear_kernel_caches()
            _saved_rebuild = copy_table.rebuild
            copy_table.rebuild = _rebuild_and_wrap
            _wrap_copy_table()
            cuda_device.launch_observer = _observe_launch
        _active = recorder


def detach() -> None:
    """Stop feeding the recorder but keep the hooks (between a schedule's steps)."""
    global _active
    _active = None


def remove() -> None:
    """Put every original table and function back."""
    global _active, _saved_rebuild
    from gputensor.kernels.cuda import device as cuda_device

    with _lock:
        _active = None
        if _saved_rebuild is None:
            return
        cuda_device.launch_observer = None
        copy_table.rebuild = _saved_rebuild
        _saved_rebuild = None
        for key, mover in list(copy_table.COPY_TABLE.items()):
            copy_table.COPY_TABLE[key] = raw(mover)
        registry.kernel_wrapper = None
        for backend in list(registry.BACKENDS.values()):
            wrapped = backend.kernels
            original = _saved_tables.pop(backend, None)
            if original is None:  # a backend created while profiling
                original = wrapped
            for n, f in list(wrapped.items()):
                # Keep kernels that entered the table while profiling, unwrapped.
                original[n] = raw(f)
            backend.kernels = original
        registry.clear_kernel_caches()
