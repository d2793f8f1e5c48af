"""profile(profile_memory=True): host bytes (tracemalloc, which NumPy reports its buffers to)
and device bytes (the CUDA runtime's memory_allocated()) per event, PyTorch's "[memory]" events,
the memory columns and sort keys of the table, and tracemalloc left as it was found. Oracle:
torch.profiler's cpu_memory_usage for the same program on PyTorch CPU. On cpu and emulated cuda.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda.emulator_driver import size_class
from tests.helpers import requires_torch, torch

# Host figures include the Python objects around the buffers (a few hundred bytes an op):
# compare them with the buffers' sizes to within this.
HOST_SLACK = 64 * 1024
BIG = (1000, 1000)
SMALL = (500, 500)
BIG_BYTES = np.zeros(BIG, np.float32).nbytes
SMALL_BYTES = np.zeros(SMALL, np.float32).nbytes


@pytest.fixture(autouse=True)
def quiet_memory():
    """No cyclic garbage collection inside a measured block: it frees unrelated memory at
    arbitrary moments, which a counter-based figure would charge to whatever is running. And
    tracemalloc off to start with, as a program normally has it."""
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc is already running (PYTHONTRACEMALLOC?)")
    gc.collect()
    gc.disable()
    yield
    gc.enable()
    if tracemalloc.is_tracing():
        tracemalloc.stop()
        pytest.fail("tracemalloc was left running")


def warm(device):
    """Run the ops the tests profile once, so that loading their kernels (Numba's cache, the
    emulator's compiled modules) does not allocate inside a measured block."""
    x = gt.zeros(BIG, device=device)
    y = gt.zeros(SMALL, device=device)
    _ = x + x, x + 1, x.cpu(), y.cpu(), x.double()
    return x


def ranges(prof):
    return {e.name: e for e in prof.events() if e.kind == "range"}


def host_and_device(ev, device):
    """(bytes on the tensor's device, bytes on the other side) for an event."""
    if device == "cpu":
        return ev.cpu_memory_usage, ev.device_memory_usage
    return ev.device_memory_usage, ev.cpu_memory_usage


# -- per-event figures -------------------------------------------------------------------------
def test_range_creating_a_tensor_counts_its_bytes(device):
    warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("alloc"):
            kept = gt.zeros(BIG, device=device)
    rng = ranges(prof)["alloc"]
    here, other = host_and_device(rng, device)
    assert kept.numel() * 4 == BIG_BYTES
    if device == "cpu":
        assert BIG_BYTES <= here <= BIG_BYTES + HOST_SLACK
    else:
        assert here == size_class(BIG_BYTES)  # the emulator's pool rounds to 512 bytes
    # The other side: nothing on a device for cpu; on cuda the emulator's device memory is
    # host memory, counted once (as device memory), not twice.
    assert abs(other) <= HOST_SLACK
    # The frontend allocated the output before the fill kernel ran: the range's own bytes.
    own = rng.self_cpu_memory_usage if device == "cpu" else rng.self_device_memory_usage
    assert own == here - sum(host_and_device(c, device)[0] for c in rng.children)
    assert own >= BIG_BYTES


def test_fresh_emulator_block_is_not_host_memory(device):
    if device == "cpu":
        pytest.skip("the emulator's pool is a cuda matter")
    warm(device)
    shape = (777, 333)  # a size class no other test allocates: the pool grows a new block
    nbytes = 777 * 333 * 4
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("grow"):
            kept = gt.empty(shape, device=device)
    rng = ranges(prof)["grow"]
    assert kept.shape == shape
    assert rng.device_memory_usage == size_class(nbytes)
    # The 1 MB block must not also count as host memory. Incidental host allocations inside
    # the range stay far below it, but not always below HOST_SLACK: late in a full suite a
    # worker read 148,756 bytes here twice (a bookkeeping dict growing past a few thousand
    # entries, ~145 KB; not reproduced alone).
    assert abs(rng.cpu_memory_usage) <= nbytes // 4


def test_create_and_free_nets_zero(device):
    warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("churn"):
            t = gt.zeros(BIG, device=device)
            u = t + 1
            first = u[0, 0].item()
            del t, u
    rng = ranges(prof)["churn"]
    assert first == 1.0
    here, other = host_and_device(rng, device)
    if device == "cpu":
        assert abs(here) <= HOST_SLACK
    else:
        assert here == 0
    assert abs(other) <= HOST_SLACK


@requires_torch
def test_inclusive_and_self_memory_like_pytorch(device):
    """Inclusive figures match torch.profiler's for the same program (PyTorch counts the
    allocator's bytes; the emulator rounds to its size classes). Self figures leave the
    children's out."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as tprof:
        with torch.profiler.record_function("outer"):
            a = torch.zeros(SMALL)
            with torch.profiler.record_function("inner"):
                b = torch.zeros(BIG)
        with torch.profiler.record_function("churn"):
            c = torch.zeros(BIG)
            del c
    expected = {e.name: e.cpu_memory_usage for e in tprof.events()
                if e.name in ("outer", "inner", "churn")}
    assert expected == {"outer": SMALL_BYTES + BIG_BYTES, "inner": BIG_BYTES, "churn": 0}
    del a, b

    warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("outer"):
            a = gt.zeros(SMALL, device=device)
            with gt.profiler.record_function("inner"):
                b = gt.zeros(BIG, device=device)
        with gt.profiler.record_function("churn"):
            c = gt.zeros(BIG, device=device)
            del c
    got = ranges(prof)
    assert a.shape == SMALL and b.shape == BIG
    if device == "cpu":
        for name, want in expected.items():
            assert abs(got[name].cpu_memory_usage - want) <= HOST_SLACK, name
        outer_self, inner_self = (got["outer"].self_cpu_memory_usage,
                                  got["inner"].self_cpu_memory_usage)
        assert abs(outer_self - SMALL_BYTES) <= HOST_SLACK
        assert abs(inner_self - BIG_BYTES) <= HOST_SLACK
    else:
        assert got["outer"].device_memory_usage == size_class(SMALL_BYTES) + size_class(BIG_BYTES)
        assert got["inner"].device_memory_usage == size_class(BIG_BYTES)
        assert got["churn"].device_memory_usage == 0
        assert got["outer"].self_device_memory_usage == size_class(SMALL_BYTES)
        assert got["outer"].cuda_memory_usage == got["outer"].device_memory_usage
        assert got["outer"].self_cuda_memory_usage == size_class(SMALL_BYTES)


def test_the_profilers_own_records_are_not_counted(device):
    """300 ops whose results are dropped leave nothing behind; the profiler keeps hundreds of
    bytes of records per event meanwhile, which must not read as the program's."""
    warm(device)
    x = gt.ones(8, device=device)
    # Until CPython's free lists are full, freeing an op's temporaries into them reads as the
    # program keeping memory (tracemalloc counts what a free list holds): fill them first.
    for _ in range(3000):
        x + x
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("loop"):
            for _ in range(300):
                x + x
    rng = ranges(prof)["loop"]
    assert len(rng.children) == 300
    # Python objects an op frees into a free list read as kept, and the emulator's launches
    # churn some: up to ~130 bytes an op seen after the whole suite ran in the same worker.
    # Counting the records would read >= 344 bytes an op (cpu) and ~1250 (cuda).
    assert abs(rng.cpu_memory_usage) <= 300 * 200
    assert rng.device_memory_usage == 0


@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs a CUDA runtime")
@pytest.mark.parametrize("fill", [0.0, 0.4, 0.8, 0.97])
def test_the_runtimes_statistics_log_is_not_counted(fill):
    """The memory-statistics log grows between folds; at whatever point of its cycle a profile
    starts, its growth stays far below what would read as the program keeping memory."""
    from gputensor.kernels.cuda import device as cuda_device

    warm("cuda")
    x = gt.ones(8, device="cuda")
    for _ in range(3000):
        x + x
    stats = cuda_device.active().stats
    stats.current("allocation")  # reading folds: the log starts empty, then fill it
    for _ in range(int(fill * stats.LOG_EVENTS) // 2):
        stats.block(512, 512, 1)
        stats.block(512, 512, -1)
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("loop"):
            for _ in range(300):
                x + x
    assert abs(ranges(prof)["loop"].cpu_memory_usage) <= 300 * 200


@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs a CUDA runtime")
def test_the_pools_address_table_is_not_counted():
    """With thousands of tensors alive (as late in a test session), the pool's table of blocks
    by address is big; a free and the next allocation at the same address must leave it as it
    is, or every few thousand ops it is rebuilt and the new table (~300 KiB here) reads as
    memory a 300-op loop kept."""
    warm("cuda")
    alive = [gt.empty(4, device="cuda") for _ in range(5000)]
    x = gt.ones(8, device="cuda")
    for _ in range(3000):
        x + x
    for _ in range(24):  # 7,200 frees: past the ~5,700 fresh slots of a 5,000-entry dict
        with gt.profiler.profile(profile_memory=True) as prof:
            with gt.profiler.record_function("loop"):
                for _ in range(300):
                    x + x
        assert abs(ranges(prof)["loop"].cpu_memory_usage) <= 300 * 200
    del alive


def test_allocations_outside_every_event_are_memory_events(device):
    """No range: the frontend allocates ``x + x``'s output before the add kernel runs, so the
    bytes show as a "[memory]" event (PyTorch's name for allocations no op accounts for) and
    the kernel's own figure stays near zero."""
    x = warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        y = x + x
    assert y.shape == BIG
    mem = [e for e in prof.events() if e.name == "[memory]"]
    assert mem and all(e.kind == "memory" and e.cpu_time_total == 0 for e in mem)
    here = sum(host_and_device(e, device)[0] for e in mem)
    if device == "cpu":
        assert BIG_BYTES <= here <= BIG_BYTES + HOST_SLACK
    else:
        assert here == size_class(BIG_BYTES)
    (add,) = [e for e in prof.events() if e.kind == "kernel" and e.name == "add"]
    assert abs(add.cpu_memory_usage) <= HOST_SLACK
    assert add.device_memory_usage == 0
    row = {r.key: r for r in prof.key_averages()}["[memory]"]
    assert row.count == len(mem)
    assert row.cpu_memory_usage == sum(e.cpu_memory_usage for e in mem)


def test_copy_to_host_shows_on_the_host(device):
    x = warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("to_host"):
            h = x.cpu() if device != "cpu" else x.double()
    rng = ranges(prof)["to_host"]
    want = h.numel() * h.element_size()
    assert BIG_BYTES <= want <= 2 * BIG_BYTES
    assert want <= rng.cpu_memory_usage <= want + HOST_SLACK
    assert rng.device_memory_usage == 0
    assert [e.kind for e in rng.children] == ["copy"]


def test_freeing_a_tensor_made_while_tracemalloc_ran_is_negative(device):
    """With tracemalloc already running (the caller's), frees of earlier buffers are seen:
    the figure goes negative, as PyTorch's does for a free."""
    warm(device)
    tracemalloc.start()
    try:
        t = gt.zeros(BIG, device=device)
        with gt.profiler.profile(profile_memory=True) as prof:
            with gt.profiler.record_function("free"):
                del t
        assert tracemalloc.is_tracing()  # the caller's tracing is left running
    finally:
        tracemalloc.stop()
    here, _ = host_and_device(ranges(prof)["free"], device)
    if device == "cpu":
        assert -BIG_BYTES - HOST_SLACK <= here <= -BIG_BYTES + HOST_SLACK
    else:
        assert here == -size_class(BIG_BYTES)


# -- the table -----------------------------------------------------------------------------------
MEMORY_HEADERS = ["CPU Mem", "Self CPU Mem", "Device Mem", "Self Device Mem"]


def test_table_columns_and_sort_keys(device):
    x = warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("big"):
            a = gt.zeros(BIG, device=device)
        with gt.profiler.record_function("small"):
            b = gt.zeros(SMALL, device=device)
        _ = x[0]  # a kernel-free view: a small "[memory]" row at most
    assert a.shape == BIG and b.shape == SMALL
    averages = prof.key_averages()
    header = averages.table().splitlines()[1]
    for column in MEMORY_HEADERS:
        assert column in header
    assert header.index("CPU Mem") < header.index("Self CPU Mem") < header.index("Device Mem")
    big_key = "cpu_memory_usage" if device == "cpu" else "device_memory_usage"
    for key in (big_key, "self_" + big_key):
        lines = averages.table(sort_by=key, row_limit=1).splitlines()
        assert lines[3].split()[0] == "big", (key, lines)
    if device != "cpu":
        for key in ("cuda_memory_usage", "self_cuda_memory_usage", "self_device_memory_usage"):
            assert averages.table(sort_by=key, row_limit=1).splitlines()[3].split()[0] == "big"
    rows = {r.key: r for r in averages}
    assert rows["big"].cuda_memory_usage == rows["big"].device_memory_usage
    total = averages.total_average()
    assert total.cpu_memory_usage == sum(r.cpu_memory_usage for r in averages)
    assert total.self_device_memory_usage == sum(r.self_device_memory_usage for r in averages)
    # The whole events list renders the columns too, per event.
    assert "Self Device Mem" in prof.events().table().splitlines()[1]


def test_no_memory_columns_or_events_without_profile_memory(device):
    x = warm(device)
    with gt.profiler.profile() as prof:
        assert not tracemalloc.is_tracing()
        with gt.profiler.record_function("alloc"):
            y = x + x
    assert y.shape == BIG
    header = prof.key_averages().table().splitlines()[1]
    assert not any(column in header for column in MEMORY_HEADERS)
    assert all(e.cpu_memory_usage == 0 and e.device_memory_usage == 0 for e in prof.events())
    assert "[memory]" not in {e.name for e in prof.events()}


def test_unknown_sort_key_names_the_memory_keys(device):
    warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        gt.zeros(4, device=device)
    with pytest.raises(ValueError, match="self_cpu_memory_usage"):
        prof.key_averages().table(sort_by="cpu_mem")


# -- tracemalloc's state -------------------------------------------------------------------------
def test_tracemalloc_runs_only_while_profiling_memory(device):
    warm(device)
    with gt.profiler.profile(profile_memory=True):
        assert tracemalloc.is_tracing()
    assert not tracemalloc.is_tracing()
    with pytest.raises(RuntimeError, match="boom"), gt.profiler.profile(profile_memory=True):
        gt.zeros(4, device=device)
        raise RuntimeError("boom")
    assert not tracemalloc.is_tracing()


def test_caller_tracemalloc_is_left_running_with_its_traces(device):
    warm(device)
    tracemalloc.start(3)
    try:
        keep = np.ones(10_000)
        with gt.profiler.profile(profile_memory=True):
            gt.zeros(4, device=device)
        assert tracemalloc.is_tracing() and tracemalloc.get_traceback_limit() == 3
        assert tracemalloc.get_object_traceback(keep) is not None  # traces kept
    finally:
        tracemalloc.stop()


def test_schedule_traces_only_active_steps(device):
    x = warm(device)
    seen, ready = [], []
    sched = gt.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with gt.profiler.profile(profile_memory=True, schedule=sched,
                             on_trace_ready=lambda p: ready.append(p.events())) as prof:
        for _ in range(5):
            seen.append(tracemalloc.is_tracing())
            with gt.profiler.record_function("step"):
                y = x + 1
            prof.step()
    assert y.shape == BIG
    assert seen == [False, False, True, True, False]
    assert not tracemalloc.is_tracing()
    (events,) = ready
    first, second = [host_and_device(e, device)[0] for e in events if e.name == "step"]
    # Each step allocates y's new buffer and frees the previous one. The first active step's
    # free is of a buffer the warm-up step made: on the host, tracemalloc did not trace that
    # one, so only the allocation shows; the device counter sees both.
    if device == "cpu":
        assert BIG_BYTES <= first <= BIG_BYTES + HOST_SLACK
        assert abs(second) <= HOST_SLACK
    else:
        assert first == second == 0


def test_chrome_trace_with_memory_events(device, tmp_path):
    x = warm(device)
    with gt.profiler.profile(profile_memory=True) as prof:
        y = x + x
    assert y.shape == BIG
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    with open(path) as f:
        names = {e["name"] for e in json.load(f)["traceEvents"]}
    assert {"[memory]", "add"} <= names
