"""The recording side of a running profiler: what a hooked kernel call, CUDA launch, device
copy or ``record_function`` range turns into.

What is measured (``Event.device_ns``; host times are ``start_ns``/``end_ns`` everywhere):
- the CPU backend: the wall time around the kernel call (it runs before the call returns);
- the CUDA emulator: the same, for launches, backend kernels and copies alike. The emulator
  runs every launch and copy on the host before the call returns, so host time is device time
  (there is no queue and no separate device clock);
- CuPy (a real GPU): launches and copies are queued, so the host time around a call is only
  its submission. Each launch, each CUDA backend kernel call and each copy touching the
  device gets a pair of CUDA events, recorded right before and right after the call ON THE
  STREAM THE WORK IS QUEUED ON (the current ``gt.cuda.stream``'s raw stream, else CuPy's
  current stream: where a launch or copy without an explicit stream goes). Nothing waits
  while the profile runs; when it stops, ``finish()`` synchronizes the last end event of each
  stream used (once) and reads every pair's ``elapsed_time`` (``_EventTimer``).
  The device time is thus the GPU time between the two events on that stream. Queued behind
  earlier work, the start event completes when that work has, so waiting in the queue is
  excluded and the figure is the work itself (work on another stream running at the same time
  slows it, and that shows). On an idle stream the start event completes as soon as it is
  recorded, so the pair also spans the host's submission (argument conversion and the launch
  call): a short kernel on an idle GPU reads as about its submission time. On an H200, a
  16M-element float32 add read 50 us queued behind matmuls and 76 us on an idle stream (27 us
  of submission); CuPy's events around ten back-to-back adds gave 63 us each.
  The submission is the launch event's host span (``time_range``, ``start_ns``..``end_ns``,
  which excludes the event records); it is part of the calling kernel's CPU time, a launch
  has none of its own. A host read (DtoH without a stream) is a copy like the others: its
  start event sits on the stream it waits for, behind that stream's work, so its device time
  is the transfer (plus the host's wake-up: the end event is recorded once the read
  returned), not the wait. A schedule's warm-up steps record no events.

Memory (profile_memory, kept events only): each kernel, launch, copy and range reads the
allocation counters (memory.py) when it opens and when it closes; the difference is its
``cpu_memory_usage``/``device_memory_usage``. Every hook brackets its own bookkeeping with the
meter's ``enter()``/``leave()`` so that the records it makes don't count. What changes while no
event is open anywhere becomes a "[memory]" event when the next top-level event opens (or the
recording stops).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .costs import kernel_cost
from .events import (
    COPY,
    KERNEL,
    LAUNCH,
    MEMORY,
    MEMORY_EVENT_NAME,
    RANGE,
    Event,
    FreshDict,
    FreshList,
    FreshTuple,
    describe_args,
    device_of,
)
from .memory import MemoryMeter

_now = time.perf_counter_ns


class _EventTimer:
    """CUDA event pairs around device work on a CuPy runtime, resolved once at the end.

    ``begin(stream)`` records a start event on the stream the work is about to be queued on
    (``stream_now()``); ``end(stream)`` records the end event on that same stream. Neither
    waits for the GPU. ``resolve(events)`` (the profile stopping) synchronizes the last end
    event recorded on each stream (events on one stream complete in order, so that is every
    event on it) and reads each pair's elapsed time. Events are created per pair: on an H200,
    ``cupy.cuda.Event()`` took 0.6 us against 1.1 us per record, so a pool would save little.

    Runtime calls used (runtime.py's interface, nothing else): ``create_event()`` (CuPy:
    ``cupy.cuda.Event()``, timing enabled), ``event.record(stream)`` (enqueues the event on
    ``stream``), ``event.synchronize()``, ``elapsed_time(start, end)`` (ms; both events must be
    complete) and ``current_stream()``, the stream a launch or copy made without an explicit
    stream is queued on (the one ``gt.cuda.stream(s)`` entered, else CuPy's null stream).
    """

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self._current = rt.current_stream
        self._last: dict[int, Any] = {}  # stream handle -> the last end event recorded on it

    def stream_now(self) -> Any:
        """The raw stream work queued now goes to: the current ``gt.cuda.stream``'s (what the
        storage driver passes to copies and casts), else CuPy's current stream (what a launch
        with ``stream=None`` uses; the same stream whenever a gt stream is entered)."""
        stream = _storage_driver().STREAM_HOOK(self.rt)
        return self._current() if stream is None else stream

    def begin(self, stream: Any) -> Any:
        event = self.rt.create_event()
        event.record(stream)
        return event

    def end(self, stream: Any) -> Any:
        event = self.rt.create_event()
        event.record(stream)
        self._last[_stream_key(stream)] = event
        return event

    def resolve(self, events: Sequence[Event]) -> None:
        """Fill ``device_ns`` of ``events`` (whose ``timing`` is ``(self, start, end)``)."""
        last, self._last = list(self._last.values()), {}
        for event in last:  # one wait per stream used, none per launch
            event.synchronize()
        elapsed = self.rt.elapsed_time
        for ev in events:
            _, start, end = ev.timing
            ev.device_ns = float(elapsed(start, end)) * 1e6
            ev.timing = None


def _stream_key(stream: Any) -> int:
    ptr = getattr(stream, "ptr", None)
    return id(stream) if ptr is None else int(ptr)


def _storage_driver() -> Any:
    from gputensor.kernels.cuda import storage_driver

    return storage_driver


def _event_timer(device: str) -> _EventTimer | None:
    """An event timer when ``device`` is served by CuPy; None for devices that run work
    synchronously (the CPU, the CUDA emulator), which are timed on the host."""
    if not device.startswith("cuda"):
        return None
    from gputensor.kernels.cuda import device as cuda_device

    _, _, index = device.partition(":")
    rt = cuda_device.active() if not index or not cuda_device.runtimes() else \
        cuda_device.runtime_of(int(index))
    # A runtime that runs every launch and copy before it returns (the emulator): the host
    # time around the call is its device time.
    return None if rt is None or rt.synchronous_launches else _EventTimer(rt)


class Recorder:
    """Collects events while hooks are installed; ``keep=False`` (a schedule's warm-up) runs
    the hooks but drops what they record."""

    def __init__(self, record_shapes: bool = True, profile_memory: bool = False,
                 with_flops: bool = True, keep: bool = True,
                 record_launches: bool = True) -> None:
        self.record_shapes = record_shapes
        self.record_launches = record_launches
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.keep = keep
        self.events: list[Event] = []
        self.start_ns = _now()
        self.end_ns = 0
        self._local = threading.local()
        self._timers: dict[str, _EventTimer | None] = {}
        # profile_memory: the counters, the ranges still open (their counters at open), how
        # many events are open at top level (all threads) and the counters when that last
        # dropped to zero. A warm-up's events are dropped, so it meters nothing.
        self._meter = MemoryMeter() if profile_memory and keep else None
        self._range_mem: dict[Event, tuple[int, int]] = {}
        self._top_open = 0
        self._idle_mem = (0, 0)
        if self._meter is not None:
            self._idle_mem = self._meter.enter()
            self._meter.leave()

    # -- the per-thread stack that parents events ----------------------------------------------
    def _stack(self) -> list[Event]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _open(self, ev: Event) -> list[Event]:
        stack = self._stack()
        if stack:
            parent = ev.parent = stack[-1]
            if parent.children:
                parent.children.append(ev)
            else:
                parent.children = FreshList((ev,))
        if self.keep:
            self.events.append(ev)
        stack.append(ev)
        return stack

    def _timer(self, device: str) -> _EventTimer | None:
        if not self.keep:  # a warm-up's events are dropped: nothing to time on the device
            return None
        if device not in self._timers:
            self._timers[device] = _event_timer(device)
        return self._timers[device]

    # -- memory (profile_memory) ---------------------------------------------------------------
    def _mem_opened(self, ev: Event, mem: tuple[int, int], top_level: bool) -> None:
        """``ev`` opened with the counters at ``mem``: a top-level event first reports what
        changed since no event was open as a "[memory]" event."""
        if not top_level:
            return
        if self._top_open == 0:
            self._report_unattributed(mem, ev.thread)
        self._top_open += 1

    def _mem_closed(self, ev: Event, mem0: tuple[int, int], mem1: tuple[int, int]) -> None:
        ev.cpu_memory_usage = mem1[0] - mem0[0]
        ev.device_memory_usage = mem1[1] - mem0[1]
        if ev.parent is None:
            self._top_open -= 1
            if self._top_open == 0:
                self._idle_mem = mem1

    def rebase_memory(self) -> None:
        """Start counting unattributed memory from now (the session calls it once the hooks
        are installed, so that installing them is not reported as the program's)."""
        if self._meter is not None and not self._meter.closed:
            self._idle_mem = self._meter.enter()
            self._meter.leave()

    def _report_unattributed(self, mem: tuple[int, int], thread: int) -> None:
        host, device = mem[0] - self._idle_mem[0], mem[1] - self._idle_mem[1]
        self._idle_mem = mem
        if host or device:
            ev = Event(MEMORY_EVENT_NAME, MEMORY, "", "", _now(), thread)
            ev.end_ns = ev.start_ns
            ev.cpu_memory_usage, ev.device_memory_usage = host, device
            self.events.append(ev)

    # -- backend kernels -------------------------------------------------------------------------
    # With a meter, each hook is ``enter()``, the work in a helper, ``leave()``: the helper's
    # temporaries (the counters' tuple, closures) are freed before ``leave()``, so they are not
    # freed in the program's time, which would read as the program freeing memory.
    def kernel(self, backend: Any, name: str, fn: Callable[..., Any], args: Sequence[Any],
               kwargs: dict[str, Any]) -> Any:
        meter = self._meter
        if meter is None:
            return self._kernel(backend, name, fn, args, kwargs, None)
        try:
            return self._kernel(backend, name, fn, args, kwargs, meter.enter())
        finally:
            meter.leave()

    def _kernel(self, backend: Any, name: str, fn: Callable[..., Any], args: Sequence[Any],
                kwargs: dict[str, Any], mem0: tuple[int, int] | None) -> Any:
        device = device_of(args) or backend.device_type
        ev = Event(name, KERNEL, device, backend.name, 0, threading.get_ident())
        if self.record_shapes:
            ev.inputs = describe_args(args)
        result = self._timed(ev, device, lambda: fn(*args, **kwargs), mem0)
        ev.bytes, ev.flops = kernel_cost(name, args, result, kwargs)
        if not self.with_flops:
            ev.flops = 0
        return result

    # -- CUDA launches (device.launch_observer) ------------------------------------------------
    def launch(self, source: str, name: str, grid: Any, block: Any, shared_bytes: int,
               run: Callable[[], None]) -> None:
        if not self.record_launches:
            run()
            return
        meter = self._meter
        if meter is None:
            self._launch(source, name, grid, block, shared_bytes, run, None)
            return
        try:  # metered too, so that the launch's record is not its kernel's memory
            self._launch(source, name, grid, block, shared_bytes, run, meter.enter())
        finally:
            meter.leave()

    def _launch(self, source: str, name: str, grid: Any, block: Any, shared_bytes: int,
                run: Callable[[], None], mem0: tuple[int, int] | None) -> None:
        device = f"cuda:{_current_index()}"
        ev = Event(name, LAUNCH, device, "CUDA", 0, threading.get_ident())
        ev.extra = FreshDict(grid=_dims(grid), block=_dims(block),
                             shared_bytes=int(shared_bytes), source=source)
        self._timed(ev, device, run, mem0)

    def _timed(self, ev: Event, device: str, call: Callable[[], Any],
               mem0: tuple[int, int] | None) -> Any:
        """Run ``call`` as event ``ev`` (open while it runs, so launches inside nest under
        it): host time around it, device time from the device's timer when it has one, and
        with ``mem0`` (the counters when the hook was entered) the memory it allocated. The
        caller calls ``leave()`` when its own bookkeeping is done."""
        stack = self._open(ev)
        meter = self._meter if mem0 is not None else None
        if meter is not None:
            self._mem_opened(ev, mem0, len(stack) == 1)
        timer = self._timer(device)
        if timer is not None:  # before the host clock: the event record is not the call's
            stream = timer.stream_now()
            start = timer.begin(stream)
        # With a meter, the reads bracket the call inside the timestamps: a timestamp is an
        # int allocated, and inside the bracket it would count as the call's memory.
        ev.start_ns = _now()
        if meter is not None:
            meter.leave()
        done = False
        try:
            result = call()
            done = True
        finally:
            mem1 = meter.enter() if meter is not None else None
            ev.end_ns = _now()
            if done and timer is not None:  # the end event: only the clock reads before it
                ev.timing = FreshTuple((timer, start, timer.end(stream)))
            if mem1 is not None:
                self._mem_closed(ev, mem0, mem1)
            stack.pop()
        if timer is None:
            ev.device_ns = ev.end_ns - ev.start_ns  # an int: floats come from a free list
        return result

    # -- device copies (COPY_TABLE movers) -----------------------------------------------------
    def copy(self, mover: Callable[..., None], dst: Any, dst_offset: int, src: Any,
             src_offset: int, count: int) -> None:
        meter = self._meter
        if meter is None:
            self._copy(mover, dst, dst_offset, src, src_offset, count, None)
            return
        try:
            self._copy(mover, dst, dst_offset, src, src_offset, count, meter.enter())
        finally:
            meter.leave()

    def _copy(self, mover: Callable[..., None], dst: Any, dst_offset: int, src: Any,
              src_offset: int, count: int, mem0: tuple[int, int] | None) -> None:
        s_type, d_type = src.device.type, dst.device.type
        direction = ("H" if s_type == "cpu" else "D") + "to" + ("H" if d_type == "cpu" else "D")
        device = str(dst.device if d_type != "cpu" else src.device)
        ev = Event(f"Memcpy {direction}", COPY, device, direction, 0, threading.get_ident())
        if self.record_shapes:
            shape = FreshTuple((count,))
            ev.inputs = FreshTuple((FreshTuple((shape, dst.dtype)),
                                    FreshTuple((shape, src.dtype))))
        ev.extra = FreshDict(direction=direction, src=str(src.device), dst=str(dst.device))
        # Between devices: the bytes that land on the destination; within one: read + write.
        ev.bytes = count * dst.dtype.itemsize
        if direction in ("DtoD", "HtoH") and s_type == d_type:
            ev.bytes += count * src.dtype.itemsize
        # Timed like a kernel on ``device``: with CuPy, events on the stream it is queued on.
        self._timed(ev, device, lambda: mover(dst, dst_offset, src, src_offset, count), mem0)

    # -- record_function ranges ------------------------------------------------------------------
    def open_range(self, name: str, args: Any = None) -> Event:
        meter = self._meter
        mem0 = meter.enter() if meter is not None else None
        ev = Event(name, RANGE, "", "", 0, threading.get_ident())
        if args:
            ev.extra = FreshDict(args=str(args))
        stack = self._open(ev)
        if mem0 is not None:
            self._range_mem[ev] = mem0
            self._mem_opened(ev, mem0, len(stack) == 1)
        ev.start_ns = _now()
        if mem0 is not None:
            meter.leave()
        return ev

    def close_range(self, ev: Event) -> None:
        meter = self._meter
        if meter is None or meter.closed:  # closed: a range outliving its recording
            self._close_range(ev, None)
            return
        try:
            self._close_range(ev, meter.enter())
        finally:
            meter.leave()

    def _close_range(self, ev: Event, mem1: tuple[int, int] | None) -> None:
        ev.end_ns = _now()
        stack = self._stack()
        if ev in stack:  # ranges closed out of order close what they enclose too
            while stack:
                top = stack.pop()
                if top is ev:
                    break
                top.end_ns = top.end_ns or ev.end_ns
                self._close_range_memory(top, mem1)
        self._close_range_memory(ev, mem1)

    def _close_range_memory(self, ev: Event, mem1: tuple[int, int] | None) -> None:
        mem0 = self._range_mem.pop(ev, None)
        if mem1 is not None and mem0 is not None:
            self._mem_closed(ev, mem0, mem1)

    # -- stopping ----------------------------------------------------------------------------------
    def finish(self) -> list[Event]:
        """Stop the clock and resolve lazy device times (one synchronize per CuPy device);
        with profile_memory, close the memory of ranges left open, report what changed since
        the last top-level event closed, and stop tracemalloc if the meter started it."""
        self.end_ns = _now()
        if self._meter is not None:
            try:
                self._finish_memory(self._meter)
            finally:
                self._meter.close()
        pending: dict[_EventTimer, list[Event]] = {}
        for ev in self.events:
            if ev.timing is not None:
                pending.setdefault(ev.timing[0], []).append(ev)
        for timer, events in pending.items():
            timer.resolve(events)
        return self.events

    def _finish_memory(self, meter: MemoryMeter) -> None:
        if meter.closed:
            return
        mem = meter.enter()
        for ev in list(self._range_mem):  # ranges never closed: count up to now
            self._close_range_memory(ev, mem)
        if self._top_open == 0:
            self._report_unattributed(mem, threading.get_ident())
        meter.leave()

    def release(self) -> None:
        """Stop metering without finishing (a recording abandoned on an error)."""
        if self._meter is not None:
            self._meter.close()


def _dims(x: Any) -> list[int]:
    return FreshList((int(x),) if isinstance(x, int) else (int(v) for v in x))


def _current_index() -> int:
    try:
        from gputensor.cuda.devices import current_device

        return int(current_device())
    except (ImportError, RuntimeError):
        return 0
