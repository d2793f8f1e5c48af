"""``gt.Stream`` and ``gt.Event`` (torch.Stream/torch.Event): device-generic streams and events.

On a CUDA device each wraps a ``gt.cuda.Stream``/``gt.cuda.Event`` and forwards to it, so a
``with gt.Stream("cuda"):`` block queues its kernels on that stream. The CPU has one trivial
stream (id 0, always idle) and events that cannot be recorded, exactly as in PyTorch.
"""

from __future__ import annotations

from typing import Any

# c10::DeviceType values, which torch.Stream.device_type reports.
_DEVICE_TYPE_IDS = {"cpu": 0, "cuda": 1}
_NO_EVENTS = "cpu backend doesn't support events."


def _resolve(device: Any) -> Any:
    """The device a stream or event lives on: a CUDA device gets its index, the CPU none."""
    import gputensor as gt

    if device is None:
        acc = gt.accelerator.current_accelerator()
        device = "cpu" if acc is None else acc.type
    dev = gt.device(device)
    if dev.type == "cuda":
        index = gt.cuda.current_device() if dev.index is None else dev.index
        return gt.device("cuda", index)
    return dev


def _cuda_stream(s: Any) -> Any:
    return s._impl if isinstance(s, Stream) else s


class Stream:
    """``gt.Stream(device=None, *, priority=0)``: an in-order queue of work on a device."""

    def __init__(self, device: Any = None, *, priority: int = 0, _impl: Any = None) -> None:
        from gputensor import cuda

        self._device = _resolve(device)
        self._impl = None
        if self._device.type == "cuda":
            self._impl = _impl if _impl is not None else cuda.Stream(self._device,
                                                                     priority=priority)

    @property
    def device(self) -> Any:
        return self._device

    @property
    def device_type(self) -> int:
        return _DEVICE_TYPE_IDS[self._device.type]

    @property
    def device_index(self) -> int:
        return -1 if self._device.index is None else self._device.index

    @property
    def stream_id(self) -> int:
        return 0 if self._impl is None else self._impl.cuda_stream

    @property
    def native_handle(self) -> int:
        if self._impl is None:
            raise RuntimeError("Backend doesn't support getting stream native handle.")
        return self._impl.cuda_stream

    def query(self) -> bool:
        return True if self._impl is None else self._impl.query()

    def synchronize(self) -> None:
        if self._impl is not None:
            self._impl.synchronize()

    def is_capturing(self) -> bool:
        if self._impl is None:
            return False
        from gputensor import cuda

        with cuda.stream(self._impl):
            return cuda.is_current_stream_capturing()

    def wait_event(self, event: Event) -> None:
        if self._impl is None:
            raise RuntimeError(_NO_EVENTS)
        self._impl.wait_event(event._impl if isinstance(event, Event) else event)

    def wait_stream(self, stream: Any) -> None:
        if self._impl is None:
            raise RuntimeError(_NO_EVENTS)
        self._impl.wait_stream(_cuda_stream(stream))

    def record_event(self, event: Event | None = None) -> Event:
        if self._impl is None:
            raise RuntimeError(_NO_EVENTS)
        event = Event(self._device) if event is None else event
        event.record(self)
        return event

    def __enter__(self) -> Stream:
        if self._impl is not None:
            self._impl.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._impl is not None:
            self._impl.__exit__(*exc)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        return self._device == other._device and self._impl == other._impl

    def __hash__(self) -> int:
        return hash((str(self._device), self._impl))

    def __repr__(self) -> str:
        return (f"torch.Stream device_type={self._device.type}, "
                f"device_index={self.device_index}, stream_id={self.stream_id}")


class Event:
    """``gt.Event(device=None, *, enable_timing=False, blocking=False, interprocess=False)``:
    a marker recorded in a stream, to wait on or to time between."""

    def __init__(self, device: Any = None, *, enable_timing: bool = False,
                 blocking: bool = False, interprocess: bool = False) -> None:
        from gputensor import cuda

        self._device = _resolve(device)
        self.enable_timing = bool(enable_timing)
        self._impl = None
        if self._device.type == "cuda":
            with cuda.device(self._device.index):
                self._impl = cuda.Event(enable_timing, blocking, interprocess)

    @property
    def device(self) -> Any:
        return self._device

    @property
    def event_id(self) -> int:
        return 0 if self._impl is None else id(self._impl.raw)

    def record(self, stream: Stream | None = None) -> None:
        """Record on ``stream`` (the device's current stream when None)."""
        if self._impl is None:
            raise RuntimeError(_NO_EVENTS)
        self._impl.record(None if stream is None else _cuda_stream(stream))

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (the current stream when None) wait for this event; the CPU never
        has pending work, so there it returns at once."""
        if self._impl is not None:
            self._impl.wait(None if stream is None else _cuda_stream(stream))

    def query(self) -> bool:
        return True if self._impl is None else self._impl.query()

    def synchronize(self) -> None:
        if self._impl is not None:
            self._impl.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event's record to ``end_event``'s."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self._impl is None or end_event._impl is None:
            raise RuntimeError(_NO_EVENTS)
        return self._impl.elapsed_time(end_event._impl)

    def __repr__(self) -> str:
        index = -1 if self._device.index is None else self._device.index
        return (f"torch.Event device_type={self._device.type}, device_index={index}, "
                f"event_flag={int(self.enable_timing)}, event_id={self.event_id}")
