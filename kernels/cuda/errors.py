"""Errors that CUDA kernels find (a bad index), reported without a host sync per launch.

PyTorch's model: each device has one persistent error record in device memory (eight int64
words, see ``errors.cuh``) whose pointer the index kernels (gathers, scatters, index_put,
masked_scatter, embedding, nll_loss, max-pool backward) receive with the id of an
:class:`ErrorSite` naming the op and its message. A kernel that meets a bad index claims the
record with a compare-and-swap (the first error wins), fills in the value, bound and dim, and
never dereferences the index. When the host looks:

* **immediate** (launches are synchronous anyway, or the user asked for it: the emulator,
  ``CUDA_LAUNCH_BLOCKING=1`` or ``GPUTENSOR_CUDA_LAUNCH_BLOCKING=1``): right after the launch,
  so the op raises its usual IndexError/RuntimeError;
* **deferred** (the CuPy runtime): the launch only marks the record pending; the next
  synchronising point (``read_back``, a device-to-host copy such as ``.item()``/``.cpu()``,
  ``gt.cuda.synchronize()``, ``Stream``/``Event.synchronize()``) calls :func:`check_pending`,
  which reads the record and raises the error, saying which earlier op launched the failing
  kernel. Either way the record is reset to zeros after raising.

``set_mode("deferred")`` forces deferred checking (the emulator's tests exercise that path
with it); ``set_mode(None)`` restores the automatic choice.

Counts that size an output (nonzero, masked_select, unique, repeat_interleave) are read back
at once by their ops, as in PyTorch; that read is a synchronising point like any other.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import device as _device
from .runtime import DevicePtr, work_done

__all__ = ["ErrorSite", "check_pending", "get_mode", "immediate", "launched", "record",
           "set_mode", "site"]

RECORD_WORDS = 8  # errors.cuh: [site, value, bound, dim, extra, (spare) x3]
RECORD_BYTES = RECORD_WORDS * 8
BLOCKING_ENVS = ("CUDA_LAUNCH_BLOCKING", "GPUTENSOR_CUDA_LAUNCH_BLOCKING")
MODES = ("immediate", "deferred")


@dataclass(frozen=True)
class ErrorSite:
    """One kind of kernel error: the op whose launch reports it, the exception type, and the
    message template (``str.format`` fields: value, bound, dim, extra)."""

    id: int
    op: str
    exc: type[Exception]
    template: str

    def error(self, value: int, bound: int, dim: int, extra: int) -> Exception:
        return self.exc(self.template.format(value=value, bound=bound, dim=dim, extra=extra))


_SITES: dict[int, ErrorSite] = {}
_site_lock = threading.Lock()


def site(op: str, exc: type[Exception], template: str) -> ErrorSite:
    """Register an error site (at import of the module that launches it); its id is what the
    kernel writes to the record."""
    with _site_lock:
        s = ErrorSite(len(_SITES) + 1, op, exc, template)
        _SITES[s.id] = s
    return s


# ---- the per-device records -------------------------------------------------------------------
class _State:
    """Module state read on every guarded launch and every synchronising call (one slot each)."""

    __slots__ = ("forced", "pending", "records")

    def __init__(self) -> None:
        self.forced: str | None = None  # set_mode's override
        # (runtime id, device index, id(stream)) -> (runtime, record pointer, stream) with a
        # deferred launch on that runtime stream since the last check; empty means
        # check_pending has nothing to do.
        self.pending: dict[tuple[int, int, int], tuple[Any, DevicePtr, Any]] = {}
        self.records: dict[tuple[int, int], tuple[Any, DevicePtr]] = {}


_state = _State()
_alloc_lock = threading.Lock()
_ZEROS = np.zeros(RECORD_WORDS, np.int64)


def record(device_index: int = 0) -> DevicePtr:
    """The device's error record (allocated and zeroed on first use, then kept for the
    runtime's lifetime)."""
    rt = _device.runtime()
    key = (id(rt), int(device_index or 0))
    entry = _state.records.get(key)
    if entry is None or entry[0] is not rt:
        with _alloc_lock:
            entry = _state.records.get(key)
            if entry is None or entry[0] is not rt:
                ptr = rt.alloc(RECORD_BYTES)
                rt.memcpy_htod(ptr, _ZEROS)
                entry = _state.records[key] = (rt, ptr)
    return entry[1]


# ---- modes ------------------------------------------------------------------------------------
def set_mode(mode: str | None) -> None:
    """Force "immediate" or "deferred" checking; None: immediate exactly when launches are
    synchronous (the emulator) or a ``*_LAUNCH_BLOCKING`` variable is 1."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"errors.set_mode: mode must be one of {MODES} or None, got {mode!r}")
    _state.forced = mode


def _blocking_env() -> bool:
    return any(os.environ.get(name, "") not in ("", "0") for name in BLOCKING_ENVS)


def immediate() -> bool:
    """Whether kernel errors are checked right after each launch."""
    forced = _state.forced
    if forced is not None:
        return forced == "immediate"
    if _blocking_env():
        return True
    # A runtime that finishes each launch before returning (the emulator) checks for free;
    # a launch being captured into a CUDA graph has not run, so nothing can be read yet.
    rt = _device.active()
    return rt is not None and rt.synchronous_launches and not rt.capturing


def get_mode() -> str:
    """The checking mode in effect: "immediate" or "deferred"."""
    return "immediate" if immediate() else "deferred"


# ---- checking -----------------------------------------------------------------------------------
def launched(device_index: int = 0) -> None:
    """Call after launching a kernel that was given ``record(device_index)``: raises its error
    now (immediate mode), or marks the record for the next synchronising point."""
    rt = _device.runtime()
    if immediate():
        dev = int(device_index or 0)
        earlier = [k for k in _state.pending if k[0] == id(rt) and k[1] == dev]
        for k in earlier:  # launches are synchronous here: this read covers theirs too
            del _state.pending[k]
        _check(None, rt, record(device_index), asynchronous=bool(earlier))
    else:
        stream = _stream_of(rt)
        _state.pending[id(rt), int(device_index or 0), id(stream)] = \
            (rt, record(device_index), stream)


def _stream_of(rt: Any) -> Any:
    """The runtime stream work is queued on now."""
    from .storage_driver import STREAM_HOOK

    stream = STREAM_HOOK(rt)
    return rt.default_stream() if stream is None else stream


def check_pending() -> None:
    """Raise an error a deferred kernel launch recorded, if any (then reset the record).
    Costs one attribute check when no deferred launch happened since the last check.

    The record is read on the current stream, so it is read after a kernel only when that
    kernel ran on the current stream or its stream has finished; a launch on another stream
    that is still running stays pending for a later synchronising point (its stream's or the
    device's ``synchronize()``, or a read on its stream), so no error is lost."""
    if not _state.pending:
        return
    for key, (rt, ptr, stream) in list(_state.pending.items()):
        if stream is _stream_of(rt) or work_done(stream):
            _check(key, rt, ptr, asynchronous=True)


# Every host read of device memory (device.read_back, the storage driver's to_host behind
# .item()/.cpu()/.tolist()) is a synchronising point: raise a recorded error before the data
# is used.
_device.host_read_hook = check_pending


def _check(key: tuple[int, int, int] | None, rt: Any, ptr: DevicePtr,
           asynchronous: bool) -> None:
    if key is not None:
        _state.pending.pop(key, None)
    words = np.empty(RECORD_WORDS, np.int64)
    rt.memcpy_dtoh(words, ptr)  # a host read after the current stream's kernels
    code = int(words[0])
    if code == 0:
        return
    rt.memcpy_htod(ptr, _ZEROS)
    s = _SITES.get(code)
    if s is None:  # cannot happen unless a kernel wrote garbage; say so rather than guess
        raise RuntimeError(f"CUDA error record holds unknown site id {code} "
                           f"(words {words.tolist()})")
    exc = s.error(*(int(w) for w in words[1:5]))
    if asynchronous:
        msg = (f"{exc.args[0]}\n(raised asynchronously: an earlier '{s.op}' kernel launch "
               f"recorded this error and it surfaced at the next synchronising call; set "
               f"CUDA_LAUNCH_BLOCKING=1 to raise it at the launch)")
        exc = s.exc(msg)
    raise exc
