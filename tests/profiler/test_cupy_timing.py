"""The real-GPU timing path without a GPU: a fake ``cupy`` module stands in for CuPy's event API,
so the lazy resolution (events recorded per launch, one synchronize when the profile stops) is
exercised on the emulator."""

from __future__ import annotations

import types

import pytest

import gputensor as gt
from gputensor.kernels.cuda import device as cuda_device
from gputensor.profiler import recorder as recorder_module


class FakeEvent:
    clock = 0

    def __init__(self) -> None:
        self.stream = None
        self.t = None

    def record(self, stream=None) -> None:
        FakeEvent.clock += 1
        self.stream, self.t = stream, FakeEvent.clock


def fake_cupy(log: list) -> types.SimpleNamespace:
    def get_elapsed_time(start, end):
        log.append("elapsed")
        return 0.5 * (end.t - start.t)  # ms

    cuda = types.SimpleNamespace(Event=FakeEvent, get_current_stream=lambda: "current",
                                 get_elapsed_time=get_elapsed_time)
    return types.SimpleNamespace(cuda=cuda)


def test_cupy_timer_records_on_the_current_stream():
    log: list = []
    timer = recorder_module._CupyTimer(fake_cupy(log))
    start, end = timer.mark(), timer.mark()
    assert start.stream == "current" and end.t == start.t + 1
    assert timer.elapsed_ns(start, end) == 0.5e6
    assert log == ["elapsed"]


@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs a cuda device (the emulator)")
def test_device_times_resolve_once_when_the_profile_stops(monkeypatch):
    device = "cuda:0"
    log: list = []
    timer = recorder_module._CupyTimer(fake_cupy(log))
    monkeypatch.setattr(recorder_module, "_cupy_timer",
                        lambda dev: timer if dev.startswith("cuda") else None)
    real_runtime = cuda_device.runtime()
    synced = []

    class Runtime:  # the real runtime, counting synchronize() calls
        def __getattr__(self, name):
            return getattr(real_runtime, name)

        def synchronize(self):
            synced.append(1)
            real_runtime.synchronize()

    monkeypatch.setattr(cuda_device, "runtime", lambda: Runtime())
    a = gt.ones(100, device=device)
    a * a
    with gt.profiler.profile() as prof:
        (a * a).sum()
        assert synced == []  # nothing waits while the profile runs
    assert synced == [1], "one synchronize when the profile stops, none per launch"
    launches = [e for e in prof.events() if e.kind == "launch"]
    assert launches and log.count("elapsed") >= len(launches)
    for ev in prof.events():
        assert ev.timing is None
        if ev.kind == "launch":
            assert ev.device_ns == 0.5e6  # one fake tick between its two events
    (mul,) = [e for e in prof.events() if e.name == "mul"]
    assert mul.device_time_total == sum(c.device_ns for c in mul.children
                                        if c.kind == "launch") / 1e3
