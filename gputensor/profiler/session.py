"""``gt.profiler.profile`` and ``gt.profiler.record_function``, shaped like torch.profiler's."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

from . import hooks
from .events import Event
from .recorder import Recorder
from .scheduling import RECORDING, ProfilerAction, _always_record
from .table import EventList
from .table import key_averages as _key_averages
from .trace import export_chrome_trace as _export_chrome_trace


class ProfilerActivity:
    """torch.profiler.ProfilerActivity's names. Backend kernel calls, copies and ranges are
    always recorded (they are host-side events that carry their device time); leaving CUDA
    out of ``activities`` drops the per-launch CUDA kernel events."""

    CPU = "CPU"
    CUDA = "CUDA"


class profile:  # noqa: N801 - torch.profiler's name
    """Record every backend kernel call, CUDA launch and device copy made inside the block.

        with gt.profiler.profile(record_shapes=True) as prof:
            model(x).sum().backward()
        print(prof.key_averages().table(sort_by="device_time_total", row_limit=10))

    With ``schedule`` (``gt.profiler.schedule(...)``), call ``prof.step()`` after each step:
    only "active" steps record, and ``on_trace_ready(prof)`` runs at the end of each active
    cycle. Only one profile runs at a time. ``with_flops`` defaults to True (unlike PyTorch):
    the throughput columns are what this profiler is for, and costing a call is cheap.

    ``profile_memory=True`` gives every kernel call, copy and ``record_function`` range the net
    bytes allocated minus freed while it was open, children included, on the host
    (``cpu_memory_usage``) and on the CUDA device (``device_memory_usage``, alias
    ``cuda_memory_usage``), and ``self_*`` variants that leave the children's out, as
    torch.profiler does; the table gets "CPU Mem", "Self CPU Mem", "Device Mem" and "Self
    Device Mem" columns. How it is measured (see memory.py):

    - host bytes come from tracemalloc, which NumPy reports every array buffer to; the profile
      starts tracemalloc for its recording steps if it is not running (it slows all Python
      allocation while it runs) and stops it again at the end, leaving a caller's own
      tracing alone. Device bytes are the CUDA runtime's ``memory_allocated()``;
    - the counters are read when an event opens and when it closes, not per allocation. A
      frontend allocates an op's output before it calls the backend kernel, so that output is
      not in the kernel event's figure: inside a ``record_function`` range it shows in the
      range's self memory (wrap the code of interest in ranges to see per-range allocations);
      outside every event it is reported as a zero-duration "[memory]" event, PyTorch's name
      for allocations no op accounts for, when the next top-level event opens or recording
      stops. (Charging such bytes to the next kernel instead would charge it with whatever
      the Python code in between allocated and freed too.)
    - attribution is by time, as in PyTorch: bytes another thread allocates while an event
      is open count towards it. Freeing memory allocated before tracemalloc started reads as
      no change on the host;
    - host figures count Python objects too (tens to hundreds of bytes an op, part of it
      objects CPython parks in its free lists), and an op's first call may load its kernel
      (Numba's cache, a compiled CUDA module) and allocate for that: read them to the nearest
      few KB, after a warm-up. Device figures are exact (the emulator's rounded to its 512-byte
      size classes, like CuPy's pool).
    """

    def __init__(self, *, activities: Iterable[Any] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[[profile], Any] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_flops: bool = True) -> None:
        self.record_launches = True
        if activities is not None:
            known = {ProfilerActivity.CPU, ProfilerActivity.CUDA}
            names = [str(getattr(a, "name", a)).upper() for a in activities]
            bad = [a for a, n in zip(activities, names, strict=True) if n not in known]
            if bad:
                raise ValueError(f"profile(activities=...): unknown activities {bad}; use "
                                 f"ProfilerActivity.CPU and/or ProfilerActivity.CUDA")
            self.record_launches = ProfilerActivity.CUDA in names
        if schedule is not None and not callable(schedule):
            raise TypeError(f"profile(schedule=...) must be callable (gt.profiler.schedule), "
                            f"got {type(schedule).__name__}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"profile(on_trace_ready=...) must be callable, got "
                            f"{type(on_trace_ready).__name__}")
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recorder: Recorder | None = None
        self._events: list[Event] = []
        self._start_ns = 0
        self._running = False

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._running:
            raise RuntimeError("profile.start(): this profiler is already running")
        if hooks.active() is not None or hooks.is_installed():
            raise RuntimeError("another gputensor profiler is already running; profiles don't "
                               "nest (stop it first)")
        self._running = True
        self.step_num = 0
        self._transition(ProfilerAction.NONE, self.schedule(0))

    def stop(self) -> None:
        if not self._running:
            return
        rec = self._recorder
        try:
            if self.current_action in RECORDING:
                self._finish_recording(ready=True)
        finally:
            if rec is not None:
                rec.release()  # tracemalloc stopped even if finishing failed
            self._running = False
            self.current_action = ProfilerAction.NONE
            self._recorder = None
            hooks.remove()

    def step(self) -> None:
        """Mark the end of a step: the schedule decides what the next one does."""
        if not self._running:
            raise RuntimeError("profile.step() called outside a running profile")
        self.step_num += 1
        self._transition(self.current_action, self.schedule(self.step_num))

    def _transition(self, prev: ProfilerAction, new: ProfilerAction) -> None:
        recording = prev in RECORDING
        if recording and (prev is ProfilerAction.RECORD_AND_SAVE or new not in RECORDING):
            self._finish_recording(ready=True)
            recording = False
        self.current_action = new
        if new is ProfilerAction.NONE:
            self._recorder = None
            hooks.remove()
            return
        fresh = not recording
        if new is ProfilerAction.WARMUP:
            self._recorder = self._new_recorder(keep=False)
        elif fresh:
            self._recorder = self._new_recorder(keep=True)
        hooks.install(self._recorder)
        if fresh:
            self._recorder.rebase_memory()

    def _new_recorder(self, keep: bool) -> Recorder:
        return Recorder(record_shapes=self.record_shapes, profile_memory=self.profile_memory,
                        with_flops=self.with_flops, keep=keep,
                        record_launches=self.record_launches)

    def _finish_recording(self, ready: bool) -> None:
        rec = self._recorder
        hooks.detach()
        self._recorder = None
        if rec is None:
            return
        self._events = rec.finish()
        self._start_ns = rec.start_ns
        if ready and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # -- results ---------------------------------------------------------------------------------
    def events(self) -> EventList:
        """Every event of the last recorded cycle, in the order they started."""
        return EventList(sorted(self._events, key=lambda e: e.start_ns),
                         profile_memory=self.profile_memory)

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        """Events grouped by name (and input shapes when ``group_by_input_shape``)."""
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs "
                               "profile(record_shapes=True)")
        return _key_averages(self._events, group_by_input_shape, self.profile_memory,
                             self.with_flops)

    def export_chrome_trace(self, path: str | os.PathLike) -> str:
        """Write the last recorded cycle as Chrome trace JSON (atomically); returns the path."""
        return _export_chrome_trace(self._events, self._start_ns, path)


class record_function:  # noqa: N801 - torch.profiler's name
    """A named range (context manager or decorator): its events parent the kernels run inside
    it. Costs one global read when no profiler runs."""

    def __init__(self, name: str, args: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"record_function(name): name must be a non-empty str, got "
                            f"{name!r}")
        self.name = name
        self.args = args
        self._event: Event | None = None
        self._recorder: Recorder | None = None

    def __enter__(self) -> record_function:
        rec = hooks.active()
        if rec is not None:
            self._recorder = rec
            self._event = rec.open_range(self.name, self.args)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._event is not None and self._recorder is not None:
            self._recorder.close_range(self._event)
        self._event = self._recorder = None

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name, args = self.name, self.args

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with record_function(name, args):  # a fresh range per call (re-entrant)
                return fn(*a, **kw)

        return wrapper
