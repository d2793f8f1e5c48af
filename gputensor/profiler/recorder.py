"""The recording side of a running profiler: what a hooked kernel call, CUDA launch, device
copy or ``record_function`` range turns into.

Device time:
- the CPU backend and the CUDA emulator run synchronously, so the wall time around the call is
  its device time;
- CuPy (a real GPU) queues launches asynchronously: a pair of CUDA events is recorded around
  each on the current stream and resolved once, when the profile stops (one synchronize, not
  one per launch). That is the only CuPy-specific code here (``_CupyTimer``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .costs import kernel_cost
from .events import COPY, KERNEL, LAUNCH, RANGE, Event, describe_args, device_of

_now = time.perf_counter_ns


class _CupyTimer:
    """CUDA events around device work on CuPy's current stream, resolved lazily.

    CuPy documentation: ``cupy.cuda.get_current_stream()`` is the stream a RawKernel launched
    without an explicit stream goes to; ``cupy.cuda.Event()`` is created with timing enabled
    (``disable_timing=False``); ``Event.record(stream)`` enqueues it on ``stream``;
    ``cupy.cuda.get_elapsed_time(start, end)`` is the time between two recorded events in ms
    (after they completed: the runtime's ``synchronize()`` waits for everything queued).
    """

    def __init__(self, cp: Any) -> None:
        self.cp = cp

    def mark(self) -> Any:
        event = self.cp.cuda.Event()
        event.record(self.cp.cuda.get_current_stream())
        return event

    def elapsed_ns(self, start: Any, end: Any) -> float:
        return float(self.cp.cuda.get_elapsed_time(start, end)) * 1e6


def _cupy_timer(device: str) -> _CupyTimer | None:
    """A CUDA-event timer when ``device`` is served by CuPy, None for synchronous devices."""
    if not device.startswith("cuda"):
        return None
    from gputensor.kernels.cuda import device as cuda_device

    rt = cuda_device.active()
    cp = getattr(rt, "cp", None)  # CupyRuntime keeps the cupy module; the emulator has none
    return None if cp is None else _CupyTimer(cp)


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
        self._timers: dict[str, _CupyTimer | None] = {}

    # -- the per-thread stack that parents events ----------------------------------------------
    def _stack(self) -> list[Event]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _open(self, ev: Event) -> list[Event]:
        stack = self._stack()
        if stack:
            ev.parent = stack[-1]
            stack[-1].children.append(ev)
        if self.keep:
            self.events.append(ev)
        stack.append(ev)
        return stack

    def _timer(self, device: str) -> _CupyTimer | None:
        if device not in self._timers:
            self._timers[device] = _cupy_timer(device)
        return self._timers[device]

    def _memory(self, device: str) -> int | None:
        """The CUDA runtime's allocated bytes (profile_memory, for "cuda" devices and for
        ranges, which may allocate on any device), else None."""
        if not (self.profile_memory and (device.startswith("cuda") or device == "")):
            return None
        from gputensor.kernels.cuda import device as cuda_device

        rt = cuda_device.active()
        return None if rt is None else int(rt.memory_allocated())

    # -- backend kernels -------------------------------------------------------------------------
    def kernel(self, backend: Any, name: str, fn: Callable[..., Any], args: Sequence[Any],
               kwargs: dict[str, Any]) -> Any:
        device = device_of(args) or backend.device_type
        ev = Event(name, KERNEL, device, backend.name, 0, threading.get_ident())
        if self.record_shapes:
            ev.inputs = describe_args(args)
        mem0 = self._memory(device)
        result = self._timed(ev, device, lambda: fn(*args, **kwargs))
        if mem0 is not None:
            ev.memory_bytes = self._memory(device) - mem0
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
        device = f"cuda:{_current_index()}"
        ev = Event(name, LAUNCH, device, "CUDA", 0, threading.get_ident())
        ev.extra = {"grid": _dims(grid), "block": _dims(block), "shared_bytes": int(shared_bytes),
                    "source": source}
        self._timed(ev, device, run)

    def _timed(self, ev: Event, device: str, call: Callable[[], Any]) -> Any:
        """Run ``call`` as event ``ev`` (open while it runs, so launches inside nest under
        it): host time around it, device time from the device's timer when it has one."""
        stack = self._open(ev)
        timer = self._timer(device)
        mark = timer.mark() if timer is not None else None
        ev.start_ns = _now()
        try:
            result = call()
        finally:
            ev.end_ns = _now()
            stack.pop()
        if timer is not None:
            ev.timing = (timer, mark, timer.mark())
        else:
            ev.device_ns = float(ev.end_ns - ev.start_ns)
        return result

    # -- device copies (COPY_TABLE movers) -----------------------------------------------------
    def copy(self, mover: Callable[..., None], dst: Any, dst_offset: int, src: Any,
             src_offset: int, count: int) -> None:
        s_type, d_type = src.device.type, dst.device.type
        direction = ("H" if s_type == "cpu" else "D") + "to" + ("H" if d_type == "cpu" else "D")
        device = str(dst.device if d_type != "cpu" else src.device)
        ev = Event(f"Memcpy {direction}", COPY, device, direction, 0, threading.get_ident())
        if self.record_shapes:
            ev.inputs = (((count,), dst.dtype), ((count,), src.dtype))
        ev.extra = {"direction": direction, "src": str(src.device), "dst": str(dst.device)}
        # Between devices: the bytes that land on the destination; within one: read + write.
        ev.bytes = count * dst.dtype.itemsize
        if direction in ("DtoD", "HtoH") and s_type == d_type:
            ev.bytes += count * src.dtype.itemsize
        stack = self._open(ev)
        ev.start_ns = _now()
        try:
            mover(dst, dst_offset, src, src_offset, count)
        finally:
            ev.end_ns = _now()
            stack.pop()
        # Copies issued without a stream are synchronous on both runtimes: wall time.
        ev.device_ns = float(ev.end_ns - ev.start_ns)

    # -- record_function ranges ------------------------------------------------------------------
    def open_range(self, name: str, args: Any = None) -> Event:
        ev = Event(name, RANGE, "", "", 0, threading.get_ident())
        if args:
            ev.extra = {"args": str(args)}
        self._open(ev)
        mem0 = self._memory("")
        if mem0 is not None:
            ev.memory_bytes = -mem0  # the allocation count at close is added
        ev.start_ns = _now()
        return ev

    def close_range(self, ev: Event) -> None:
        ev.end_ns = _now()
        mem = self._memory("")
        if mem is not None:
            ev.memory_bytes += mem
        stack = self._stack()
        if ev in stack:  # ranges closed out of order close what they enclose too
            while stack:
                top = stack.pop()
                if top is ev:
                    break
                top.end_ns = top.end_ns or ev.end_ns

    # -- stopping ----------------------------------------------------------------------------------
    def finish(self) -> list[Event]:
        """Stop the clock and resolve lazy device times (one synchronize per CuPy device)."""
        self.end_ns = _now()
        pending = [ev for ev in self.events if ev.timing is not None]
        if pending:
            from gputensor.kernels.cuda.device import runtime

            runtime().synchronize()
            for ev in pending:
                timer, start, end = ev.timing
                ev.device_ns = timer.elapsed_ns(start, end)
                ev.timing = None
        return self.events


def _dims(x: Any) -> list[int]:
    return [int(x)] if isinstance(x, int) else [int(v) for v in x]


def _current_index() -> int:
    try:
        from gputensor.cuda.devices import current_device

        return int(current_device())
    except (ImportError, RuntimeError):
        return 0
