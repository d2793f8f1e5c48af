"""The real-GPU timing path without a GPU, against the stand-in cupy of tests/cuda/fake_cupy.py
(which logs every event record, copy, launch and synchronize with its stream): each launch and
device copy is bracketed by CUDA events on the stream its work is queued on, nothing waits
while the profile runs, and the profile's stop resolves every pair with one synchronize per
stream used."""

from __future__ import annotations

import types

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda import device as cuda_device
from gputensor.kernels.cuda import nvrtc, storage_driver
from gputensor.profiler import hooks
from gputensor.profiler import recorder as recorder_module
from tests.cuda import fake_cupy

_WAITS = ("stream_sync", "deviceSynchronize")


@pytest.fixture
def cupy_rt(monkeypatch):
    """(stand-in cupy, a CupyRuntime on it), the runtime active for the profiler only."""
    gt.cuda.is_available()  # pick the real runtime first: the stand-in must never become it
    cp = fake_cupy.install(monkeypatch)
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    rt = CupyRuntime()
    monkeypatch.setattr(cuda_device, "_runtime", rt)
    monkeypatch.setattr(cuda_device, "_runtimes", (rt,))
    monkeypatch.setattr(recorder_module, "_current_index", lambda: 0)
    yield cp, rt
    nvrtc.prefer_major(None)


def _event_syncs(cp, monkeypatch) -> list:
    """The events ``synchronize()`` is called on, in order."""
    synced: list = []
    original = cp.cuda.Event.synchronize

    def synchronize(self):
        synced.append(self)
        original(self)

    monkeypatch.setattr(cp.cuda.Event, "synchronize", synchronize)
    return synced


def _launcher(cp):
    """A runtime stand-in whose ``launch`` is CuPy's: stream=None goes to the current stream."""
    fn = cp.cuda.function.Module().get_function("k")

    class Launcher:
        def launch(self, kern, grid, block, shared, args, stream=None):
            fn(grid, block, args, shared_mem=shared, stream=stream)

    return Launcher(), types.SimpleNamespace(name="k")


def _trail(cp, start: int = 0) -> list[tuple]:
    """The log from ``start`` as (what, stream) pairs (a launch's stream is None: current)."""
    out = []
    for entry in cp.log[start:]:
        if entry[0] == "event_record" or entry[0] in _WAITS:
            out.append((entry[0], entry[1] if len(entry) > 1 else None))
        elif entry[0] == "kernel":
            out.append(("kernel", None))
        elif entry[0].startswith("copy"):
            out.append((entry[0], entry[2]))
    return out


def test_only_cupy_devices_get_an_event_timer(cupy_rt):
    assert isinstance(recorder_module._event_timer("cuda:0"), recorder_module._EventTimer)
    assert recorder_module._event_timer("cpu") is None


def test_launch_events_are_on_the_launch_stream_and_resolve_once(cupy_rt, monkeypatch):
    cp, rt = cupy_rt
    synced = _event_syncs(cp, monkeypatch)
    launcher, kern = _launcher(cp)
    null, side = cp.cuda.Stream.null, rt.create_stream()
    with gt.profiler.profile() as prof:
        mark = len(cp.log)
        cuda_device.launch_kernel(launcher, kern, 1, 32, 0, [], "k.cu")
        with side:  # CuPy's current stream: where the launch goes, and its events
            cuda_device.launch_kernel(launcher, kern, 2, 64, 0, [], "k.cu")
        assert _trail(cp, mark) == [
            ("event_record", null), ("kernel", None), ("event_record", null),
            ("event_record", side), ("kernel", None), ("event_record", side)]
        assert (null.queued, side.queued) == (1, 1)  # each kernel ran on its events' stream
        assert synced == [], "no synchronize per launch"
    assert not any(e[0] in _WAITS for e in cp.log), "resolving waits on events, not streams"
    launches = [e for e in prof.events() if e.kind == "launch"]
    assert [e.extra["grid"] for e in launches] == [[1], [2]]
    ends = [e for e in cp.log[mark:] if e[0] == "event_record"][1::2]
    assert len(synced) == 2 and {s.stream for s in synced} == {null, side}, \
        "one synchronize per stream: its last end event"
    assert all(s.done for s in synced) and len(ends) == 2
    for ev in launches:
        assert ev.timing is None
        assert ev.device_ns == 2e6  # the fake's clock: 2 ms between record, kernel, record


def test_copies_are_timed_with_events_on_their_stream(cupy_rt, monkeypatch):
    """A copy is bracketed on the stream it is queued on: the gt stream the storage driver
    passes (STREAM_HOOK), else CuPy's current one; a host read's events wait for nothing."""
    cp, rt = cupy_rt
    synced = _event_syncs(cp, monkeypatch)
    drv = storage_driver.RuntimeStorageDriver(rt)
    buf = drv.alloc(64)
    side = rt.create_stream()
    monkeypatch.setattr(storage_driver, "STREAM_HOOK", lambda rt=None: side)  # gt.cuda.stream(side)
    host, out = np.arange(16, dtype=np.float32), np.empty(16, np.float32)
    on_gpu = types.SimpleNamespace(device=gt.device("cuda:0"), dtype=gt.float32)
    on_cpu = types.SimpleNamespace(device=gt.device("cpu"), dtype=gt.float32)
    with gt.profiler.profile() as prof:
        rec = hooks.active()
        mark = len(cp.log)
        rec.copy(lambda *a: drv.from_host(buf, 0, host), on_gpu, 0, on_cpu, 0, 16)
        with side:
            rec.copy(lambda *a: rt.memcpy_dtoh(out, buf.ptr), on_cpu, 0, on_gpu, 0, 16)
        assert _trail(cp, mark) == [
            ("event_record", side), ("copy_from_host_async", side), ("event_record", side),
            ("event_record", side), ("copy_to_host_async", side), ("stream_sync", side),
            ("event_record", side)]  # the stream_sync is the host read's own wait
        assert synced == []
    np.testing.assert_array_equal(out, host)
    assert len(synced) == 1 and synced[0].stream is side
    htod, dtoh = (e for e in prof.events() if e.kind == "copy")
    assert (htod.name, dtoh.name) == ("Memcpy HtoD", "Memcpy DtoH")
    assert (htod.device_ns, dtoh.device_ns) == (2e6, 3e6)  # event clock, not wall time
    assert htod.device == dtoh.device == "cuda:0" and htod.bytes == 64


def test_two_events_per_launch_and_none_in_a_warmup(cupy_rt):
    cp, _ = cupy_rt
    launcher, kern = _launcher(cp)
    with gt.profiler.profile():
        mark = len(cp.log)
        for _ in range(3):
            cuda_device.launch_kernel(launcher, kern, 1, 32, 0, [], "k.cu")
        assert [e[0] for e in cp.log[mark:]].count("event_record") == 6
    warmup = recorder_module.Recorder(keep=False)
    mark = len(cp.log)
    warmup.launch("k.cu", "k", 1, 32, 0, lambda: launcher.launch(kern, 1, 32, 0, []))
    assert _trail(cp, mark) == [("kernel", None)], "a warm-up's events are dropped: none made"
    assert warmup.finish() == []


def test_a_failed_launch_leaves_no_pending_pair(cupy_rt):
    cp, _ = cupy_rt

    def fail():
        raise RuntimeError("launch failed")

    with gt.profiler.profile() as prof:
        with pytest.raises(RuntimeError, match="launch failed"):
            hooks.active().launch("k.cu", "k", 1, 32, 0, fail)
    (ev,) = prof.events()
    assert ev.timing is None and ev.device_ns == 0
    assert [e[0] for e in cp.log if e[0] == "event_record"] == ["event_record"]


def _on_emulator() -> bool:
    if not gt.cuda.is_available():
        return False
    from gputensor.kernels.cuda.emulator_driver import EmulatorRuntime

    return isinstance(cuda_device.active(), EmulatorRuntime)


@pytest.mark.skipif(not _on_emulator(), reason="needs the CUDA emulator")
def test_real_kernels_resolve_once_when_the_profile_stops(monkeypatch):
    """Backend kernels, their launches and a host read on the emulator, timed by event pairs
    from a CupyRuntime on the stand-in cupy (as a GPU would time them)."""
    assert recorder_module._event_timer("cuda:0") is None  # the emulator: host time
    device = "cuda:0"
    a = gt.ones(100, device=device)
    a * a
    cp = fake_cupy.install(monkeypatch)
    from gputensor.kernels.cuda.cupy_driver import CupyRuntime

    try:
        timer = recorder_module._EventTimer(CupyRuntime())
    finally:
        nvrtc.prefer_major(None)
    monkeypatch.setattr(recorder_module, "_event_timer",
                        lambda dev: timer if dev.startswith("cuda") else None)
    synced = _event_syncs(cp, monkeypatch)
    with gt.profiler.profile() as prof:
        (a * a).sum().cpu()
        assert synced == []  # nothing waits while the profile runs
    assert len(synced) == 1, "one synchronize when the profile stops (one stream), none per launch"
    assert not any(e[0] in _WAITS for e in cp.log)
    launches = [e for e in prof.events() if e.kind == "launch"]
    assert launches
    for ev in prof.events():
        assert ev.timing is None
        if ev.kind == "launch":
            assert ev.device_ns == 1e6  # nothing logged between its two records: one tick
    (mul,) = [e for e in prof.events() if e.name == "mul"]
    assert mul.device_time_total == sum(c.device_ns for c in mul.children
                                        if c.kind == "launch") / 1e3
    (dtoh,) = [e for e in prof.events() if e.name == "Memcpy DtoH"]
    assert dtoh.device_ns == 1e6 and dtoh.device == device
