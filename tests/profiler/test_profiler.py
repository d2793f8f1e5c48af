"""gt.profiler: events, their costs and nesting, the key_averages table, schedules, the Chrome
trace, and hooks that leave nothing behind. On cpu and on emulated cuda."""

from __future__ import annotations

import json
import math

import pytest

import gputensor as gt
from gputensor.kernels import registry
from gputensor.kernels.cuda import device as cuda_device
from gputensor.profiler.scheduling import ProfilerAction
from gputensor.storage import copy_table

from .conftest import BANDWIDTH, FLOPS


def kernels_named(prof, name):
    return [e for e in prof.events() if e.kind == "kernel" and e.name == name]


def hooks_snapshot():
    return ({key: (b.kernels, dict(b.kernels)) for key, b in registry.BACKENDS.items()},
            dict(copy_table.COPY_TABLE))


def assert_hooks_gone(snapshot):
    tables, movers = snapshot
    for key, b in registry.BACKENDS.items():
        if key in tables:
            assert b.kernels is tables[key][0], f"{b} table was not restored"
            for name, fn in tables[key][1].items():
                assert b.kernels[name] is fn
        assert not any(hasattr(f, "_gt_profiler_raw") for f in b.kernels.values())
    for key, mover in copy_table.COPY_TABLE.items():
        assert not hasattr(mover, "_gt_profiler_raw")
        if key in movers:
            assert mover is movers[key]
    assert cuda_device.launch_observer is None
    assert registry.kernel_wrapper is None
    rt = cuda_device.active()
    assert rt is None or "launch" not in vars(rt)


# -- events and costs ------------------------------------------------------------------------------
def test_add_event_records_name_shapes_bytes_and_flops(device):
    a, b = gt.ones(1000, device=device), gt.ones(1000, device=device)
    a + b  # first use compiles outside the profile
    with gt.profiler.profile(record_shapes=True) as prof:
        c = a + b
    assert c.device == gt.device(device)
    (ev,) = kernels_named(prof, "add")
    assert ev.bytes == 3 * 1000 * 4
    assert ev.flops == 1000
    assert ev.device == device
    assert ev.backend == ("CPU" if device == "cpu" else "CUDA")
    assert ev.input_shapes[0] == [1000] and ev.input_shapes[1] == [[1000], [1000]]
    assert ev.input_dtypes[0] == "gputensor.float32"
    assert ev.cpu_time_total > 0 and ev.device_time_total > 0
    launches = [c for c in ev.children if c.kind == "launch"]
    if device == "cpu":
        assert launches == []
        assert ev.device_time_total == ev.cpu_time_total
    else:
        (launch,) = launches
        assert launch.name.startswith("ew_add_f32")  # the generated extern "C" kernel
        assert launch.parent is ev and launch.device == device
        assert launch.extra["grid"][0] >= 1 and launch.extra["block"][0] >= 1
        assert ev.device_time_total == launch.device_time_total


def test_gemm_flops(device):
    x = gt.randn(64, 32, device=device)
    w = gt.randn(32, 16, device=device)
    with gt.profiler.profile() as prof:
        y = x @ w
    assert list(y.shape) == [64, 16]
    (ev,) = kernels_named(prof, "_gemm")
    assert ev.flops == 2 * 64 * 16 * 32
    assert ev.bytes == (64 * 32 + 32 * 16 + 64 * 16) * 4
    assert ev.input_shapes == []  # record_shapes=False


def test_with_flops_false_keeps_bytes():
    with gt.profiler.profile(with_flops=False) as prof:
        gt.ones(8, 4) @ gt.ones(4, 2)
    (ev,) = kernels_named(prof, "_gemm")
    assert ev.flops == 0 and ev.bytes > 0


def test_training_step_records_backward_and_fused_optimizer(device):
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(8, 4), gt.nn.ReLU(), gt.nn.Linear(4, 3)).to(device)
    opt = gt.optim.Adam(model.parameters(), lr=1e-2)
    x, y = gt.randn(5, 8).to(device), gt.tensor([0, 1, 2, 0, 1]).to(device)
    with gt.profiler.profile(record_shapes=True) as prof:
        opt.zero_grad()
        gt.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    names = {e.name for e in prof.events()}
    assert {"_gemm", "_relu_backward", "softmax", "_nll_loss"} <= names
    (adam,) = kernels_named(prof, "_fused_adam")
    n = sum(p.numel() for p in model.parameters())
    assert adam.flops == 13 * n
    # params, exp_avg and exp_avg_sq read and written, grads read: 7 float32 arrays
    assert adam.bytes == 7 * n * 4


def test_device_copies_record_direction_and_bytes(device):
    x = gt.arange(100, dtype=gt.float32)
    with gt.profiler.profile() as prof:
        moved = x.to(device)
        back = moved.to("cpu")
        as_double = x.double()
    assert back.tolist() == x.tolist() and as_double.dtype == gt.float64
    copies = [(e.name, e.bytes) for e in prof.events() if e.kind == "copy"]
    if device == "cpu":
        assert copies == [("Memcpy HtoH", 100 * 4 + 100 * 8)]
    else:
        assert copies == [("Memcpy HtoD", 400), ("Memcpy DtoH", 400),
                          ("Memcpy HtoH", 100 * 4 + 100 * 8)]
        assert [e.device for e in prof.events() if e.kind == "copy"][:2] == [device] * 2


def test_profile_memory_counts_device_allocations(device):
    with gt.profiler.profile(profile_memory=True) as prof:
        with gt.profiler.record_function("alloc"):
            kept = gt.zeros(1024, device=device)
    (rng,) = [e for e in prof.events() if e.name == "alloc"]
    if device == "cpu":
        assert rng.memory_bytes == 0  # CPU allocations are not tracked
    else:
        assert rng.memory_bytes >= kept.numel() * 4
    assert "Device Mem" in prof.key_averages().table().splitlines()[1]


# -- nesting --------------------------------------------------------------------------------------
def test_record_function_ranges_parent_the_kernels(device):
    x = gt.ones(16, device=device)

    @gt.profiler.record_function("decorated")
    def double(t):
        return t * 2

    with gt.profiler.profile() as prof:
        with gt.profiler.record_function("outer"):
            with gt.profiler.record_function("inner"):
                y = x + x
            z = double(y)
        w = z.neg()
    assert w.sum().item() == -64
    events = {e.name: e for e in prof.events() if e.kind != "launch"}
    assert events["outer"].parent is None
    assert events["inner"].parent is events["outer"]
    assert events["add"].parent is events["inner"]
    assert events["decorated"].parent is events["outer"]
    assert events["mul"].parent is events["decorated"]
    assert events["neg"].parent is None
    assert events["outer"].cpu_time_total >= events["inner"].cpu_time_total
    assert math.isclose(events["inner"].device_time_total, events["add"].device_time_total)
    assert events["inner"].self_cpu_time_total <= events["inner"].cpu_time_total


def test_record_function_is_inert_without_a_profiler():
    with gt.profiler.record_function("nothing") as rf:
        gt.ones(3) + 1
    assert rf._event is None
    with pytest.raises(TypeError, match="non-empty str"):
        gt.profiler.record_function("")


# -- key_averages and the table ------------------------------------------------------------------
def test_key_averages_counts_and_totals(device):
    a = gt.ones(1000, device=device)
    with gt.profiler.profile(record_shapes=True) as prof:
        for _ in range(3):
            a + a
        gt.ones(10, device=device) + gt.ones(10, device=device)
    rows = {r.key: r for r in prof.key_averages()}
    add = rows["add"]
    assert add.count == 4
    assert add.bytes == 3 * 12000 + 120 and add.flops == 3 * 1000 + 10
    assert math.isclose(add.cpu_time_total, sum(e.cpu_time_total
                                                for e in kernels_named(prof, "add")))
    assert math.isclose(add.gbps, add.bytes / (add.device_time_total * 1e-6) / 1e9)
    # Memory-bound on the fixed peaks: the roofline time is bytes / bandwidth per event.
    assert math.isclose(add.roofline_percent,
                        100 * add.bytes / BANDWIDTH / (add.device_time_total * 1e-6))
    by_shape = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "add"]
    assert sorted(r.count for r in by_shape) == [1, 3]
    assert {str(r.input_shapes[0]) for r in by_shape} == {"[1000]", "[10]"}


def test_table_layout_sorting_and_errors(device):
    x = gt.randn(32, 32, device=device)
    with gt.profiler.profile(record_shapes=True) as prof:
        with gt.profiler.record_function("block"):
            (x @ x).relu().sum()
    averages = prof.key_averages()
    text = averages.table(sort_by="device_time_total", row_limit=20)
    lines = text.splitlines()
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg", "Device total",
                   "# of Calls", "GB/s", "GFLOP/s", "% roofline"):
        assert column in lines[1]
    assert "Input Shapes" not in lines[1]
    assert lines[-3].startswith("Self CPU time total:")
    assert lines[-1] == (f"Roofline peaks ({device}): {BANDWIDTH / 1e9:,.1f} GB/s, "
                         f"{FLOPS / 1e9:,.1f} GFLOP/s (user override)")
    for name in ("_gemm", "relu", "sum", "block"):
        assert any(line.startswith(name + " ") for line in lines)
    # sorted by device time, descending
    order = sorted(averages, key=lambda r: -r.device_time_total)
    body = [line.split()[0] for line in lines[3:3 + len(order)]]
    assert body == [r.key for r in order]
    limited = averages.table(sort_by="count", row_limit=2).splitlines()
    assert len([x for x in limited if not x.startswith("Roofline peaks")]) == 2 + 3 + 3
    for key in ("cpu_time_total", "self_cpu_time_total", "cuda_time_total", "gbps", "gflops",
                "count", "roofline"):
        averages.table(sort_by=key)
    shaped = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total")
    assert "Input Shapes" in shaped.splitlines()[1] and "[32, 32]" in shaped
    with pytest.raises(ValueError, match="unknown key.*cpu_time_total"):
        averages.table(sort_by="bogus")


def test_group_by_input_shape_needs_record_shapes():
    with gt.profiler.profile() as prof:
        gt.ones(2) + 1
    with pytest.raises(RuntimeError, match="record_shapes=True"):
        prof.key_averages(group_by_input_shape=True)


# -- schedule ------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_schedule_matches_torch():
    torch = pytest.importorskip("torch")
    for kw in (dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=2),
               dict(wait=2, warmup=1, active=3, repeat=1, skip_first=3)):
        ours, theirs = gt.profiler.schedule(**kw), torch.profiler.schedule(**kw)
        assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)], kw


def test_schedule_records_only_active_steps():
    ready = []
    sched = gt.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    x = gt.ones(4)
    with gt.profiler.profile(schedule=sched,
                             on_trace_ready=lambda p: ready.append(
                                 [e.name for e in p.events()])) as prof:
        for i in range(10):
            with gt.profiler.record_function(f"step{i}"):
                x + i
            prof.step()
    assert ready == [["step2", "add", "step3", "add"], ["step6", "add", "step7", "add"]]
    assert prof.current_action is ProfilerAction.NONE


def test_on_trace_ready_runs_at_exit_without_schedule():
    seen = []
    with gt.profiler.profile(on_trace_ready=lambda p: seen.append(len(p.events()))):
        gt.ones(3) * 2
    assert seen and seen[0] >= 1


def test_schedule_rejects_bad_arguments():
    with pytest.raises(ValueError, match="active must be an int >= 1"):
        gt.profiler.schedule(wait=0, warmup=0, active=0)
    with pytest.raises(ValueError, match="wait"):
        gt.profiler.schedule(wait=-1, warmup=0, active=1)


# -- chrome trace --------------------------------------------------------------------------------
def test_chrome_trace_is_valid_trace_event_json(tmp_path, device):
    x = gt.ones(64, device=device)
    with gt.profiler.profile(record_shapes=True) as prof:
        with gt.profiler.record_function("range"):
            (x * 3).sum()
    path = tmp_path / "trace.json"
    assert prof.export_chrome_trace(path) == str(path)
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # no temporary left over
    data = json.loads(path.read_text())
    complete = [e for e in data["traceEvents"] if e["ph"] == "X"]
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0
    host = {e["name"]: e for e in complete if e["pid"] == 0}
    assert {"range", "mul", "sum"} <= set(host)
    assert host["mul"]["args"]["bytes"] == 2 * 64 * 4 and host["mul"]["args"]["flops"] == 64
    assert host["mul"]["args"]["input_shapes"][0] == [64]
    device_events = [e for e in complete if e["pid"] != 0]
    assert device_events, "device work has its own track"
    names = {m["args"]["name"] for m in data["traceEvents"] if m["ph"] == "M"}
    assert "host" in names and f"device {device}" in names
    if device != "cpu":
        assert any(e["cat"] == "kernel" and e["name"].startswith("ew_mul") for e in device_events)


# -- hooks leave nothing behind -------------------------------------------------------------------
def test_hooks_are_installed_only_while_profiling(device):
    x = gt.ones(4, device=device)
    x + x
    before = hooks_snapshot()
    assert_hooks_gone(before)
    with gt.profiler.profile():
        cpu = registry.BACKENDS["cpu", "strided"]
        assert cpu.kernels is not before[0]["cpu", "strided"][0]
        assert all(hasattr(f, "_gt_profiler_raw") for f in cpu.kernels.values())
        assert all(hasattr(m, "_gt_profiler_raw") for m in copy_table.COPY_TABLE.values())
        assert cuda_device.launch_observer is not None
        x + x
    assert_hooks_gone(before)


def test_kernels_compiled_while_profiling_are_kept_unwrapped():
    cpu = registry.BACKENDS["cpu", "strided"]
    cpu.kernels.pop("atan2", None)  # compiled again on next use
    a, b = gt.ones(3), gt.full((3,), 2.0)
    with gt.profiler.profile() as prof:
        gt.atan2(a, b)
    assert kernels_named(prof, "atan2")
    assert "atan2" in cpu.kernels and not hasattr(cpu.kernels["atan2"], "_gt_profiler_raw")
    assert_hooks_gone(({}, {}))


def test_kernels_and_movers_that_join_while_profiling_are_recorded_then_kept():
    from gputensor.storage.typed import STORAGE_TYPES

    cpu = registry.BACKENDS["cpu", "strided"]
    try:
        with gt.profiler.profile() as prof:
            @cpu.register("_profiler_test_kernel")
            def late(out):
                out.fill_(7)

            cpu.kernel("_profiler_test_kernel")(gt.empty(3))
            # a device joining mid-profile rebuilds the copy table: still hooked
            copy_table.rebuild(list(STORAGE_TYPES.values()))
            assert all(hasattr(m, "_gt_profiler_raw") for m in copy_table.COPY_TABLE.values())
            gt.ones(2).double()
        assert cpu.kernels["_profiler_test_kernel"] is late
        names = [e.name for e in prof.events()]
        assert "_profiler_test_kernel" in names and "Memcpy HtoH" in names
        assert_hooks_gone(({}, {}))
    finally:
        cpu.kernels.pop("_profiler_test_kernel", None)


def test_hooks_are_removed_when_the_block_raises():
    before = hooks_snapshot()
    with pytest.raises(RuntimeError, match="shape"):
        with gt.profiler.profile():
            gt.ones(2, 3) @ gt.ones(2, 3)
    assert_hooks_gone(before)


def test_profiles_do_not_nest():
    with gt.profiler.profile():
        with pytest.raises(RuntimeError, match="already running"):
            with gt.profiler.profile():
                pass
    assert_hooks_gone(({}, {}))


def test_activities_choose_whether_launches_are_recorded(device):
    x = gt.ones(8, device=device)
    x * x
    kinds = {}
    for activities in ([gt.profiler.ProfilerActivity.CPU],
                       [gt.profiler.ProfilerActivity.CPU, gt.profiler.ProfilerActivity.CUDA]):
        with gt.profiler.profile(activities=activities) as prof:
            x * x
        kinds[len(activities)] = sorted(e.kind for e in prof.events())
    assert kinds[1] == ["kernel"]
    assert kinds[2] == (["kernel"] if device == "cpu" else ["kernel", "launch"])
    with pytest.raises(ValueError, match="unknown activities"):
        gt.profiler.profile(activities=["TPU"])


def test_fixed_peaks_are_in_use():
    peaks = gt.profiler.device_peaks("cpu")
    assert (peaks.bandwidth_bytes_per_s, peaks.flops_per_s) == (BANDWIDTH, FLOPS)
    assert peaks.source == "user override"
