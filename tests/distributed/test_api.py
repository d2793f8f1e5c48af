"""torch.distributed's names in one process, against torch's own (the oracle): the option
holders, debug levels, backend tables, rendezvous handlers, ProcessGroupGloo, DDP's
communication-hook checks and breakpoint. The collectives, groups and meshes run on 4
processes in test_api_processes.py."""

from __future__ import annotations

import datetime
import logging
import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as tdist

import gputensor as gt
import gputensor.distributed as dist

ROOT = Path(__file__).resolve().parents[2]


def _public(module: Any) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_")
            and not isinstance(getattr(module, n), types.ModuleType)}


def test_every_public_name_of_torch_distributed_exists() -> None:
    missing = _public(tdist) - _public(dist)
    assert not missing, sorted(missing)


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except BaseException as e:  # noqa: BLE001 - the error's type and text are compared
        return type(e).__name__, " ".join(str(e).split())  # torch's texts wrap oddly


@pytest.mark.parametrize("name", ["AllreduceOptions", "AllreduceCoalescedOptions",
                                  "ReduceOptions", "BroadcastOptions", "GatherOptions",
                                  "ScatterOptions", "ReduceScatterOptions", "AllToAllOptions",
                                  "BarrierOptions"])
def test_option_holders_have_torchs_fields_and_defaults(name: str) -> None:
    ours, theirs = getattr(dist, name)(), getattr(tdist, name)()
    fields = {a for a in dir(theirs) if not a.startswith("_")}
    assert fields == {a for a in dir(ours) if not a.startswith("_")}
    for f in fields:
        want, got = getattr(theirs, f), getattr(ours, f)
        if f == "reduceOp":
            assert got == dist.ReduceOp.SUM and want == tdist.ReduceOp.SUM
        else:
            assert got == want, f
    ours.rootRank = 3  # plain records: any field may be set
    assert ours.rootRank == 3


def test_enums_and_small_names() -> None:
    for ours, theirs in ((dist.DebugLevel, tdist.DebugLevel),
                         (dist.BuiltinCommHookType, tdist.BuiltinCommHookType)):
        assert [(m.name, int(m)) for m in ours] == \
            [(k, int(v)) for k, v in theirs.__members__.items()]
        member = next(iter(ours))
        assert str(member) == str(theirs.__members__[member.name]) and member != int(member)
    for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        assert dist.supports_complex(getattr(dist.ReduceOp, op)) == \
            tdist.supports_complex(getattr(tdist.ReduceOp, op)), op
    assert dist.timedelta is datetime.timedelta and dist.RankType is int
    assert dist.GroupName("g") == "g" and dist.log.name == tdist.log.name


def test_debug_level_follows_torch_distributed_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        for value in ("DETAIL", "info", "off"):
            monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", value)
            dist.set_debug_level_from_env()
            tdist.set_debug_level_from_env()
            assert dist.get_debug_level().name == tdist.get_debug_level().name
        monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "loud")
        assert _outcome(dist.set_debug_level_from_env) == \
            _outcome(tdist.set_debug_level_from_env)
        dist.set_debug_level(dist.DebugLevel.INFO)
        assert dist.get_debug_level() is dist.DebugLevel.INFO
        with pytest.raises(TypeError, match="incompatible function arguments"):
            dist.set_debug_level(1)
    finally:
        monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG")
        dist.set_debug_level_from_env()
        tdist.set_debug_level_from_env()
    assert dist.get_debug_level() is dist.DebugLevel.OFF


@pytest.mark.parametrize("backend", ["gloo", "nccl", "mpi", "ucc", "cpu:gloo,cuda:nccl",
                                     "cpu:gloo,cpu:mpi", "cpu-gloo:x"])
def test_backend_config_is_torchs(backend: str) -> None:
    def ours() -> str:
        return repr(dist.BackendConfig(dist.Backend(backend)))

    def theirs() -> str:
        return repr(tdist.BackendConfig(tdist.Backend(backend)))
    assert _outcome(ours) == _outcome(theirs)


def test_availability_is_truthful() -> None:
    assert dist.is_backend_available("gloo") and dist.is_backend_available("GLOO")
    assert dist.is_backend_available("mpi") == dist.is_mpi_available()
    assert dist.is_backend_available("nccl") == dist.is_nccl_available()
    assert not dist.is_ucc_available() and not dist.is_xccl_available()
    assert not dist.is_backend_available("ucc") and not dist.is_backend_available("bogus")
    assert dist.is_backend_available("cpu:gloo,cuda:nccl") == dist.is_nccl_available()
    for device in ("cpu", "cuda", "cuda:1", gt.device("cpu")):
        want = tdist.get_default_backend_for_device(str(device))
        assert dist.get_default_backend_for_device(device) == want
    assert _outcome(lambda: dist.get_default_backend_for_device("meta")) == \
        _outcome(lambda: tdist.get_default_backend_for_device("meta"))


def test_torchelastic_launch_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert not dist.is_torchelastic_launched()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    assert dist.is_torchelastic_launched() and tdist.is_torchelastic_launched()
    from gputensor.distributed import _local_launch, run
    args = run._parser().parse_args(["--standalone", "--nproc-per-node", "2", "t.py"])
    assert _local_launch._environment(args, 0, 1)["TORCHELASTIC_RUN_ID"] == "none"


# -- rendezvous ---------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    ("file:///tmp/gt_rdzv_x",), ("tcp://127.0.0.1",), ("tcp://127.0.0.1:5?rank=0",),
    ("env://",), (5,), ("x://", 0.5), ("file:///tmp/gt_rdzv_y?rank=0", 0), ("nope://x",)])
def test_rendezvous_errors_are_torchs(call: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert _outcome(lambda: next(dist.rendezvous(*call))) == \
        _outcome(lambda: next(tdist.rendezvous(*call)))


def test_rendezvous_handlers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, rank, size = next(dist.rendezvous(f"file://{tmp_path / 'f'}", rank=0,
                                             world_size=1))
    assert isinstance(store, dist.FileStore) and (rank, size) == (0, 1)
    with pytest.raises(RuntimeError, match="Rendezvous handler for env:// already registered"):
        dist.register_rendezvous_handler("env", None)
    shared = dist.HashStore()
    calls = []

    def handler(url: str, **kwargs: Any) -> Any:
        calls.append((url, sorted(kwargs)))
        yield shared, 0, 1
    dist.register_rendezvous_handler("gtmem", handler)
    # init_process_group goes through the registered handler
    dist.init_process_group("gloo", init_method="gtmem://here", rank=0, world_size=1)
    try:
        t = gt.tensor([2.0])
        dist.all_reduce(t)
        assert t.item() == 2.0 and calls == [("gtmem://here?rank=0&world_size=1",
                                              ["timeout"])]
    finally:
        dist.destroy_process_group()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "0")
    store, rank, size = next(dist.rendezvous("env://", rank=0, world_size=1))
    assert isinstance(store, dist.TCPStore) and (rank, size) == (0, 1)
    store.close()


# -- one-process groups: ProcessGroupGloo, backend config, DDP hooks -----------------------------
def test_process_group_gloo_and_backend_config() -> None:
    pg = dist.ProcessGroupGloo(dist.HashStore(), 0, 1, datetime.timedelta(seconds=10))
    assert isinstance(pg, dist.ProcessGroup) and pg.size() == 1 and pg.name() == "gloo"
    assert pg.options()._timeout == datetime.timedelta(seconds=10)
    t = gt.ones(3)
    work = pg.allreduce([t])
    assert work.wait() and work.get_future().wait() == [t]
    with pytest.raises(TypeError, match="must be a gt.distributed.Store"):
        dist.ProcessGroupGloo({}, 0, 1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend_config() == "cpu:gloo,cuda:gloo"
        assert dist.get_backend_config(dist.new_group([0])) == "cpu:gloo,cuda:gloo"
        assert dist.group.WORLD.group_name == "0"
        with dist.record_comm("my all_reduce"):
            dist.all_reduce(gt.ones(1))
    finally:
        dist.destroy_process_group()


def test_ddp_comm_hook_checks_and_logging() -> None:
    from gputensor import nn
    from gputensor.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = DDP(nn.Linear(3, 2))

        def wrong_bucket(state: Any, bucket: int) -> Any:
            return None

        with pytest.raises(ValueError, match="bucket annotation should be dist.GradBucket"):
            model.register_comm_hook(None, wrong_bucket)
        with pytest.raises(TypeError, match="Communication hook must be callable"):
            model.register_comm_hook(None, 3)
        seen: list[Any] = []

        def hook(state: Any, bucket: dist.GradBucket) -> gt.futures.Future:
            seen.append((state, bucket.index(), bucket.is_last(),
                         [tuple(p.shape) for p in bucket.parameters()]))
            fut = gt.futures.Future()
            fut.set_result(bucket.buffer() * 3)  # a hook decides the gradients
            return fut
        model.register_comm_hook("s", hook)
        with pytest.raises(RuntimeError, match="can only be called once"):
            model._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
        model(gt.ones(4, 3)).sum().backward()
        assert seen == [("s", 0, True, [(2, 3), (2,)])]  # registration order, as PyTorch's
        assert model.module.weight.grad.tolist() == [[12.0] * 3] * 2
        data = model._get_ddp_logging_data()
        assert data["comm_hook"] == "test_ddp_comm_hook_checks_and_logging.<locals>.hook"
        assert (data["module_name"], data["world_size"], data["bucket_sizes"],
                data["dtypes"]) == ("Linear", 1, "32", "float")
        assert len(model.reducer.get_backward_stats()) == 2
        model(gt.ones(1, 3))  # each forward records the last backward's timing
        assert model._get_ddp_logging_data()["avg_backward_compute_time"] > 0
        dist.set_debug_level(dist.DebugLevel.INFO)  # INFO: DDP logs what it built
        records: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = records.append  # type: ignore[method-assign]
        dist.log.addHandler(handler)  # torch's logging stops propagation at "torch"
        level = dist.log.level
        dist.log.setLevel(logging.INFO)
        try:
            DDP(nn.Linear(2, 2))
        finally:
            dist.log.removeHandler(handler)
            dist.log.setLevel(level)
        assert any("DDP constructed" in r.getMessage() for r in records)
    finally:
        dist.set_debug_level(dist.DebugLevel.OFF)
        dist.destroy_process_group()


def test_breakpoint_stops_one_rank_in_pdb() -> None:
    script = ("import gputensor as gt, gputensor.distributed as dist\n"
              "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
              "dist.breakpoint(rank=1)\n"  # another rank's: only the barrier here
              "secret = 41\n"
              "dist.breakpoint()\n"
              "print('after', flush=True)\n")
    res = subprocess.run([sys.executable, "-c", script], input="up\np secret + 1\nc\n",
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("!!! ATTENTION !!!") == 1
    assert "42" in res.stdout and res.stdout.rstrip().endswith("after")


def test_device_mesh_in_one_process_is_torchs() -> None:
    """Shapes, printing and errors against torch's DeviceMesh (both one-rank worlds)."""
    tdist.init_process_group("gloo", store=tdist.HashStore(), rank=0, world_size=1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        built = {mod: (mod.init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp")),
                       mod.init_device_mesh("cpu", (1,))) for mod in (dist, tdist)}
        (ours, flat), (theirs, tflat) = built[dist], built[tdist]
        assert repr(ours) == repr(theirs) and repr(ours["dp"]) == repr(theirs["dp"])
        assert repr(flat) == repr(tflat)
        assert ours.mesh.tolist() == theirs.mesh.tolist() and ours.shape == theirs.shape
        assert ours.get_coordinate() == theirs.get_coordinate() == (0, 0)
        assert ours == dist.init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
        cases = [lambda m: built[m][1]["x"], lambda m: built[m][0]["x"],
                 lambda m: built[m][0].get_group(),
                 lambda m: m.init_device_mesh("cpu", (2,)),
                 lambda m: m.init_device_mesh("cpu", (1,), mesh_dim_names=("a", "b")),
                 lambda m: m.init_device_mesh("cpu", (1, 1), mesh_dim_names=("a", "a")),
                 lambda m: m.init_device_mesh("cpu:0", (1,))]
        for case in cases:
            assert _outcome(lambda c=case: c(dist)) == _outcome(lambda c=case: c(tdist))
        over = dist.init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"),
                                     backend_override={"tp": "gloo", -2: None})
        assert dist.get_backend(over.get_group("tp")) == "gloo"
        with pytest.raises(ValueError, match="split from the default group's communicator"):
            dist.init_device_mesh("cpu", (1,), backend_override={0: "ucc"})
    finally:
        tdist.destroy_process_group()
        dist.destroy_process_group()


# -- device:backend strings and per-group timeouts ------------------------------------------------
def test_device_backend_strings() -> None:
    dist.init_process_group("cuda:gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "cuda:gloo" and dist.get_backend_config() == "cuda:gloo"
        with pytest.raises(RuntimeError, match="No backend type associated with device type cpu"):
            dist.all_reduce(gt.ones(2))
        sub = dist.new_group([0], backend="cpu:gloo,cuda:gloo")
        assert dist.get_backend_config(sub) == "cpu:gloo,cuda:gloo"
        t = gt.ones(2)
        dist.all_reduce(t, group=sub)
        assert t.tolist() == [1.0, 1.0]
    finally:
        dist.destroy_process_group()
    for bad, err, match in [
            ("cpu:gloo,cuda:mpi", ValueError, "two host engines"),
            ("cpu:nccl", ValueError, "Invalid backend 'nccl' for device type 'cpu'"),
            ("cpu:gloo,cpu:mpi", ValueError, "Duplicate device type cpu")]:
        with pytest.raises(err, match=match):
            dist.init_process_group(bad, store=dist.HashStore(), rank=0, world_size=1)
        assert not dist.is_initialized()
    if not dist.is_nccl_available():
        with pytest.raises(RuntimeError, match="doesn't have NCCL built in"):
            dist.init_process_group("cpu:gloo,cuda:nccl", store=dist.HashStore(), rank=0,
                                    world_size=1)


def test_new_group_timeout_bounds_that_groups_waits() -> None:
    import time

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=600))
    try:
        quick = dist.new_group([0], timeout=datetime.timedelta(seconds=0.3))
        assert quick.timeout_s() == pytest.approx(0.3)
        assert dist.group.WORLD.timeout_s() == 600  # the world keeps its own
        t0 = time.monotonic()
        with pytest.raises(dist.DistBackendError, match="timed out after 0.3 s"):
            dist.recv(gt.empty(1), src=0, group=quick)  # nobody sends it
        assert time.monotonic() - t0 < 10
        with pytest.raises(TypeError, match="datetime.timedelta"):
            dist.new_group([0], timeout=5)
    finally:
        dist.destroy_process_group()
