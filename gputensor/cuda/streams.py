"""CUDA streams and events, PyTorch-shaped, over the runtime's own stream and event objects.

A :class:`Stream` wraps ``runtime().create_stream()`` (a CuPy stream on a GPU, an always-complete
stream in the emulator); the default stream wraps ``runtime().default_stream()`` (CuPy's null
stream, the device's legacy stream), so its events, waits and queries act on that stream
whatever stream is current. ``with gt.cuda.stream(s):`` makes ``s`` current: kernels launch
on it (the runtime's own stream is entered too, which is how CuPy picks the stream of a
launch), and the "cuda" storage driver orders its copies and host reads on it. Events wrap
``runtime().create_event()``.
"""

from __future__ import annotations

import threading
from typing import Any

from gputensor.kernels.cuda import device as _kdevice
from gputensor.kernels.cuda import errors as _errors
from gputensor.kernels.cuda.runtime import work_done

from .devices import _checked, _index, _require, current_device

_local = threading.local()  # per thread: .stacks, device index -> the stack of entered streams


def _stack(index: int) -> list[Stream]:
    stacks = getattr(_local, "stacks", None)
    if stacks is None:
        stacks = _local.stacks = {}
    stack = stacks.get(index)
    if stack is None:
        stack = stacks[index] = []
    return stack


class Stream:
    """A CUDA stream (``gt.cuda.Stream(device=None, priority=0)``): work queued on it runs in
    order; different streams may overlap."""

    def __init__(self, device: Any = None, priority: int = 0, *, _raw: Any = None,
                 _default: bool = False) -> None:
        _require()
        index = _checked(_index(device, optional=False))
        rt = _kdevice.runtime_of(index)
        self.device_index = index
        self.priority = int(priority)
        self._runtime = rt
        self._default = _default
        if _raw is not None:
            self.raw = _raw
        else:
            self.raw = rt.default_stream() if _default else rt.create_stream()

    @property
    def device(self) -> Any:
        from gputensor._device import to_device

        return to_device(f"cuda:{self.device_index}")

    @property
    def cuda_stream(self) -> int:
        """The native handle (0 for the default stream)."""
        if self._default:
            return 0
        return int(getattr(self.raw, "ptr", id(self.raw)))

    def query(self) -> bool:
        """True when all work queued on this stream has completed."""
        with _kdevice.on_device(self.device_index):
            return work_done(self.raw)

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has completed (then raise any error a
        kernel recorded since the last check)."""
        with _kdevice.on_device(self.device_index):
            self.raw.synchronize()
        _errors.check_pending()

    def wait_event(self, event: Event) -> None:
        """Make work queued on this stream after now wait for ``event``."""
        if not event._recorded:
            return  # PyTorch: waiting on a never-recorded event does nothing
        fn = getattr(self.raw, "wait_event", None)
        if callable(fn):
            with _kdevice.on_device(self.device_index):
                fn(event.raw)  # an event of another device may be waited for (CUDA allows)
        else:  # a runtime that runs work when issued (the emulator): the host waits
            event.synchronize()

    def wait_stream(self, stream: Stream) -> None:
        """Make work queued on this stream after now wait for what ``stream`` queued so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one when None) on this stream and return it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    # -- as a context manager: ``with gt.cuda.Stream() as s:`` ---------------------------------
    def __enter__(self) -> Stream:
        self._contexts = getattr(self, "_contexts", [])
        context = StreamContext(self)
        self._contexts.append(context)
        context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._contexts.pop().__exit__()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        return self.raw is other.raw and self.device_index == other.device_index

    def __hash__(self) -> int:
        return hash((self.device_index, id(self.raw)))

    def __repr__(self) -> str:
        return (f"<gputensor.cuda.Stream device=cuda:{self.device_index} "
                f"cuda_stream={self.cuda_stream:#x}>")


class ExternalStream(Stream):
    """A stream another library created (``stream_ptr``: its ``cudaStream_t`` handle), to wait
    on or queue work on; gputensor never destroys it."""

    def __init__(self, stream_ptr: int, device: Any = None) -> None:
        _require()
        index = _checked(_index(device, optional=False))
        super().__init__(index, _raw=_kdevice.runtime_of(index).external_stream(stream_ptr))
        self._handle = int(stream_ptr)

    @property
    def cuda_stream(self) -> int:
        return self._handle


class Event:
    """A CUDA event: a marker in a stream, to wait on or to time between
    (``gt.cuda.Event(enable_timing=False, blocking=False, interprocess=False)``)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        if interprocess:
            raise NotImplementedError("interprocess CUDA events are not supported")
        _require()
        self.device_index = current_device()
        self._runtime = _kdevice.runtime_of(self.device_index)
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.raw = self._runtime.create_event()
        self._recorded = False

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (the current stream when None)."""
        stream = current_stream() if stream is None else stream
        if stream.device_index != self.device_index:
            raise RuntimeError(f"Event device cuda:{self.device_index} does not match "
                               f"recording stream's device cuda:{stream.device_index}.")
        with _kdevice.on_device(self.device_index):
            self.raw.record(stream.raw)
        self._recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (the current stream when None) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """True when the work before the event's record completed (or it was never recorded)."""
        if not self._recorded:
            return True
        with _kdevice.on_device(self.device_index):
            return work_done(self.raw)

    def synchronize(self) -> None:
        """Wait until the work before the event's record completed (then raise any error a
        kernel recorded since the last check)."""
        if self._recorded:
            with _kdevice.on_device(self.device_index):
                self.raw.synchronize()
        _errors.check_pending()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event's record and ``end_event``'s (both complete)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument "
                               "'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return float(self._runtime.elapsed_time(self.raw, end_event.raw))

    def __repr__(self) -> str:
        state = "recorded" if self._recorded else "not recorded"
        return f"<gputensor.cuda.Event {state}, enable_timing={self.enable_timing}>"


# -- the current stream ----------------------------------------------------------------------
_defaults: dict[tuple[int, int], Stream] = {}  # (id(runtime), device) -> default stream


def default_stream(device: Any = None) -> Stream:
    """The default (legacy) stream of the device (None: the current device)."""
    _require()
    index = _checked(_index(device, optional=False))
    rt = _kdevice.runtime_of(index)
    key = (id(rt), index)
    s = _defaults.get(key)
    if s is None or s._runtime is not rt:
        s = _defaults[key] = Stream(index, _default=True)
    return s


def current_stream(device: Any = None) -> Stream:
    """The stream work on the device (None: the current device) is queued on now: the
    innermost ``stream(...)`` of that device entered in this thread, else its default stream."""
    _require()
    index = _checked(_index(device, optional=False))
    stack = _stack(index)
    if stack:
        return stack[-1]
    return default_stream(index)


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` current for its device in this thread until another is set (None: the
    current device's default stream)."""
    index = current_device() if stream is None else stream.device_index
    stack = _stack(index)
    for s in reversed(stack):
        _exit_raw(s)
    stack.clear()
    if stream is not None and not stream._default:
        _push(stream)


def _push(stream: Stream) -> None:
    _stack(stream.device_index).append(stream)
    enter = getattr(stream.raw, "__enter__", None)
    if callable(enter):
        enter()  # CuPy: kernels and copies issued with stream=None go to its current stream


def _exit_raw(stream: Stream) -> None:
    leave = getattr(stream.raw, "__exit__", None)
    if callable(leave):
        leave(None, None, None)


def _pop(stream: Stream) -> None:
    stack = _stack(stream.device_index)
    if not stack or stack[-1] is not stream:
        raise RuntimeError("gputensor.cuda.stream contexts must be exited in the reverse order "
                           "of entering them")
    stack.pop()
    _exit_raw(stream)


class StreamContext:
    """``gt.cuda.stream(s)``: make ``s`` the current stream of its device inside the block, and
    its device the current device (None: no-op)."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self._guard: Any = None

    def __enter__(self) -> Stream | None:
        if self.stream is not None:
            self._guard = _kdevice.on_device(self.stream.device_index).__enter__()
            _push(self.stream)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is not None:
            _pop(self.stream)
            self._guard.__exit__()


def stream(stream: Stream | None) -> StreamContext:
    """Context manager selecting ``stream`` as the current stream."""
    return StreamContext(stream)


def raw_current_stream(runtime: Any = None) -> Any:
    """The runtime stream object copies on ``runtime``'s device (None: the current device)
    should be ordered on (None: that device's default stream)."""
    stacks = getattr(_local, "stacks", None)
    if not stacks:
        return None
    index = _kdevice.current_index() if runtime is None else runtime.device_index
    stack = stacks.get(index)
    return stack[-1].raw if stack else None
