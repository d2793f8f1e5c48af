"""The gloo backend (TCP between the ranks, no MPI) and torch.distributed's stores.

Stores run in this process against torch's own stores (the oracle): the same operations give
the same results and raise the same error types. The backend runs in 2 processes started with
torchrun's variables (tests/distributed/gloo_worker.py: every rendezvous, every collective,
DDP vs a single process) and in 3 processes under ``gputensor-run --standalone``
(tests/distributed/mpi_worker.py's collective checks).
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch.distributed as tdist

import gputensor.distributed as dist
from gputensor import _dtype as D
from gputensor.distributed import _gloo, run

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240
SHORT = datetime.timedelta(milliseconds=200)


# -- stores -----------------------------------------------------------------------------------
def _script(s: Any, errors: Any) -> list[Any]:
    """A sequence of store operations; each result (or the error's type name) is recorded."""
    out: list[Any] = []

    def rec(fn: Callable[[], Any]) -> None:
        try:
            out.append(fn())
        except Exception as e:  # the error's kind is what must match
            matched = [n for n in ("QueueEmptyError", "DistStoreError", "NotImplementedError")
                       if isinstance(e, getattr(errors, n, NotImplementedError))]
            out.append(matched[0] if matched else f"other {type(e).__name__}: {e}")
    s.set_timeout(SHORT)
    base = s.num_keys()
    rec(lambda: s.set("a", "x"))
    rec(lambda: s.get("a"))
    rec(lambda: (s.add("c", 3), s.add("c", -1), s.get("c")))
    rec(lambda: (s.compare_set("z", "", "v"), s.compare_set("z", "q", "w"),
                 s.compare_set("z", "v", "w"), s.compare_set("q", "e", "w"), s.check(["q"])))
    rec(lambda: s.get("missing"))
    rec(lambda: s.wait(["a", "missing"], SHORT))
    rec(lambda: s.wait(["a", "z"]))
    rec(lambda: (s.check(["a", "z"]), s.check(["a", "missing"])))
    rec(lambda: (s.delete_key("a"), s.delete_key("a"), s.check(["a"])))
    rec(lambda: (s.append("ap", "1"), s.append("ap", b"2"), s.get("ap")))
    rec(lambda: (s.multi_set(["m1", "m2"], ["1", b"2"]), s.multi_get(["m1", "m2"])))
    rec(lambda: s.num_keys() - base)
    rec(lambda: (s.queue_push("qq", "a"), s.queue_push("qq", "b"), s.queue_len("qq"),
                 s.queue_pop("qq"), s.queue_pop("qq", False)))
    rec(lambda: s.queue_pop("qq", False))
    rec(lambda: s.queue_pop("qq"))
    rec(lambda: s.has_extended_api())
    return out


def _tcp(module: Any) -> tuple[Any, Any]:
    master = module.TCPStore("127.0.0.1", 0, 2, True, timeout=datetime.timedelta(seconds=10),
                             wait_for_workers=False)
    client = module.TCPStore("127.0.0.1", master.port, 2, False,
                             timeout=datetime.timedelta(seconds=10))
    return master, client


def test_hash_store_behaves_as_torchs() -> None:
    assert _script(dist.HashStore(), dist) == _script(tdist.HashStore(), tdist)


def test_prefix_store_behaves_as_torchs() -> None:
    ours, theirs = dist.HashStore(), tdist.HashStore()
    ours.set_timeout(SHORT)
    theirs.set_timeout(SHORT)  # the prefixed store waits with the underlying store's timeout
    assert _script(dist.PrefixStore("p", ours), dist) == \
        _script(tdist.PrefixStore("p", theirs), tdist)
    assert sorted(ours.list_keys()) == sorted(theirs.list_keys())
    with pytest.raises(TypeError, match="must be a Store"):
        dist.PrefixStore("p", {})


def test_tcp_store_behaves_as_torchs() -> None:
    ours, theirs = _tcp(dist), _tcp(tdist)
    assert isinstance(ours[0].port, int) and ours[0].port > 0
    assert _script(ours[1], dist) == _script(theirs[1], tdist)
    # what one client sets, the master sees; a waiting get wakes when another client sets
    for master, client in (ours, theirs):
        master.set_timeout(datetime.timedelta(seconds=10))
        threading.Timer(0.1, lambda c=client: c.set("late", "v")).start()
        assert master.get("late") == b"v"
        assert master.add("n", 2) == 2 and client.add("n", 3) == 5
        assert master.num_keys() == client.num_keys()
    assert theirs[1].num_keys() == ours[1].num_keys()
    ours[1].close()
    ours[0].close()


def test_tcp_store_errors_are_torchs() -> None:
    short = datetime.timedelta(milliseconds=300)
    port = _free_port()
    for mod in (dist, tdist):  # nobody serves the port: the client gives up
        with pytest.raises(mod.DistNetworkError,
                           match=f"timed out after 300ms while trying to connect to "
                                 f"\\(127.0.0.1, {port}\\)"):
            mod.TCPStore("127.0.0.1", port, 1, False, timeout=short)
        with pytest.raises(mod.DistStoreError, match="1/2 clients joined"):  # one of two
            mod.TCPStore("127.0.0.1", 0, 2, True, timeout=short)
    assert issubclass(dist.DistStoreError, dist.DistError) and \
        issubclass(dist.DistError, RuntimeError)
    assert issubclass(dist.QueueEmptyError, dist.DistStoreError)


def test_file_store_behaves_as_torchs(tmp_path: Path) -> None:
    ours = dist.FileStore(str(tmp_path / "ours"), 2)
    theirs = tdist.FileStore(str(tmp_path / "theirs"), 2)
    got, want = _script(ours, dist), _script(theirs, tdist)
    # torch's FileStore times out with a plain RuntimeError (ours: DistStoreError, a
    # RuntimeError), and its delete_key says True for a missing key; the rest agrees
    want = ["DistStoreError" if str(w).startswith("other RuntimeError: ") else w for w in want]
    assert got[8] == (True, False, False) and want[8] == (True, True, False)
    assert got[:8] + got[9:] == want[:8] + want[9:]
    other = dist.FileStore(str(tmp_path / "ours"), 2)  # a second process's handle
    assert other.get("ap") == b"12" and other.add("c", 1) == 3
    ours.close()
    assert (tmp_path / "ours").exists()
    other.close()
    assert not (tmp_path / "ours").exists()  # the last of world_size users removes it


# -- the engine in one process (threads as ranks) ---------------------------------------------
def _threads(n: int, body: Callable[[_gloo.Comm], Any]) -> list[Any]:
    store, results, errors = dist.HashStore(), [None] * n, []

    def rank(r: int) -> None:
        try:
            results[r] = body(_gloo.world(store, r, n, 10.0))
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ring_all_reduce_and_reduce_scatter(n: int) -> None:
    def body(comm: _gloo.Comm) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = comm.Get_rank()
        a = np.arange(10, dtype=np.float64) * (r + 1)  # 10 elements: uneven ring chunks
        comm.Iallreduce(_gloo.IN_PLACE, a, _gloo.reduction(dist.ReduceOp.SUM, D.float64,
                                                           "t")).Wait()
        b = np.array([r % 2, 1, 0], dtype=bool)  # MIN of bools: logical and
        comm.Iallreduce(_gloo.IN_PLACE, b, _gloo.reduction(dist.ReduceOp.MIN, D.bool,
                                                           "t")).Wait()
        rs = np.empty(3, np.int32)
        comm.Ireduce_scatter_block(np.arange(3 * n, dtype=np.int32) + r, rs,
                                   _gloo.reduction(dist.ReduceOp.MAX, D.int32, "t")).Wait()
        return a, b, rs
    for r, (a, b, rs) in enumerate(_threads(n, body)):
        np.testing.assert_array_equal(a, np.arange(10) * n * (n + 1) / 2)
        np.testing.assert_array_equal(b, [False, True, False])  # rank 1 has True
        np.testing.assert_array_equal(rs, np.arange(3 * r, 3 * r + 3) + n - 1)


def test_a_rank_that_leaves_fails_its_peers() -> None:
    def body(comm: _gloo.Comm) -> str:
        if comm.Get_rank() == 1:
            comm.t.close()  # as when the process dies
            return "gone"
        with pytest.raises(dist.DistNetworkError, match="rank 1"):
            comm.Irecv(np.empty(1), 1, 0).Wait()
        return "failed clearly"
    assert _threads(2, body) == ["failed clearly", "gone"]


def test_reduction_refusals() -> None:
    with pytest.raises(ValueError, match="PREMUL_SUM with the gloo backend"):
        _gloo.reduction(dist.ReduceOp.PREMUL_SUM, D.float32, "all_reduce")
    with pytest.raises(ValueError, match="on complex tensors"):
        _gloo.reduction(dist.ReduceOp.MAX, D.complex64, "all_reduce")


def test_rendezvous_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK",
                "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(ValueError, match="environment variable RANK expected"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="rank and world_size"):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1")
    with pytest.raises(RuntimeError, match="No rendezvous handler for foo://"):
        dist.init_process_group("gloo", init_method="foo://x", rank=0, world_size=1)
    with pytest.raises(ValueError, match="world_size must be positive if using store"):
        dist.init_process_group("gloo", store=dist.HashStore())
    with pytest.raises(ValueError, match="Cannot specify both init_method and store"):
        dist.init_process_group("gloo", init_method="env://", store=dist.HashStore())
    assert not dist.is_initialized() and dist.is_gloo_available()


def test_one_process_world_through_a_hash_store() -> None:
    import gputensor as gt
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = gt.tensor([1.0, 2.0])
        dist.all_reduce(t, dist.ReduceOp.AVG)
        assert t.tolist() == [1.0, 2.0] and dist.get_backend() == "gloo"
        objs = [None]
        dist.all_gather_object(objs, {"x": 1})
        assert objs == [{"x": 1}]
    finally:
        dist.destroy_process_group()


# -- processes ----------------------------------------------------------------------------------
def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")}
    return dict(env, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                **extra)


def test_two_processes_every_rendezvous_collective_and_ddp(tmp_path: Path) -> None:
    # The test serves the store on a free port (as torchrun's agent); rank 0 joins as a client.
    store = dist.TCPStore("127.0.0.1", 0, None, True)
    procs = [subprocess.Popen([sys.executable, "-m", "tests.distributed.gloo_worker"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(store.port),
                                       TORCHELASTIC_USE_AGENT_STORE="True",
                                       INIT_FILE=str(tmp_path / "rendezvous")))
             for r in range(2)]
    try:
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            p.kill()
        store.close()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
    assert "ok 9 dtypes, world size 2, device cpu" in outs[0][0]
    assert "ok ddp world size 2" in outs[0][0] and "gloo ok, world size 2" in outs[0][0]


def test_three_processes_under_the_standalone_launcher() -> None:
    res = subprocess.run([sys.executable, "-m", "gputensor.distributed.run", "--standalone",
                          "--nproc-per-node", "3", "-m", "tests.distributed.mpi_worker", "cpu"],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok 9 dtypes, world size 3, device cpu" in res.stdout


def test_launcher_picks_the_local_launch() -> None:
    from gputensor.distributed import _local_launch
    args = run._parser().parse_args(["--standalone", "--nproc-per-node", "2", "-m", "pkg.x",
                                     "--y"])
    assert _local_launch._worker_command(args) == [sys.executable, "-u", "-m", "pkg.x", "--y"]
    env = _local_launch._environment(args, 1, 4321)
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["MASTER_PORT"]) == \
        ("1", "1", "2", "4321")
    bad = run._parser().parse_args(["--standalone", "--nnodes", "2", "t.py"])
    with pytest.raises(SystemExit, match="one node"):
        _local_launch.launch(bad)
    node = run._parser().parse_args(["--no-mpi", "--nnodes", "2", "--node-rank", "1",
                                     "--nproc-per-node", "3", "t.py"])
    assert _local_launch._environment(node, 2, 7)["RANK"] == "5"


def test_a_rank_that_raises_fails_its_peers_without_a_launcher() -> None:
    script = ("import gputensor as gt, gputensor.distributed as dist\n"
              "dist.init_process_group('gloo')\n"
              "if dist.get_rank() == 1:\n    raise ValueError('rank one gives up')\n"
              "dist.all_reduce(gt.ones(1))\n")
    store = dist.TCPStore("127.0.0.1", 0, None, True)
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(store.port),
                                       TORCHELASTIC_USE_AGENT_STORE="True"))
             for r in range(2)]
    try:
        (_, err0), (_, err1) = [p.communicate(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            p.kill()
        store.close()
    assert procs[1].returncode != 0 and "rank one gives up" in err1
    assert procs[0].returncode != 0 and "DistNetworkError" in err0 and "rank 1" in err0, err0
