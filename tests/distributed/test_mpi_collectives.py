"""gt.distributed on 2 and 3 MPI processes (mpiexec from the mpich wheel): every collective and
dtype against NumPy references (tests/distributed/mpi_worker.py), on cpu and emulated cuda."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gputensor as gt
import gputensor.distributed as dist

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300


def _mpiexec() -> str:
    exe = shutil.which("mpiexec") or str(Path(sys.executable).with_name("mpiexec"))
    if not Path(exe).exists():
        raise RuntimeError("mpiexec not found: install the test extra (mpi4py, mpich)")
    return exe


def _run(n: int, device: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-m",
                           "tests.distributed.mpi_worker", device], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)


def _run_script(n: int, script: str) -> subprocess.CompletedProcess:
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_on_cpu(n: int) -> None:
    res = _run(n, "cpu")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"world size {n}, device cpu" in res.stdout


def test_collectives_on_cuda_tensors() -> None:
    if not gt.cuda.is_available():
        pytest.skip("no CUDA runtime (set GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
    res = _run(2, "cuda")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "world size 2, device cuda" in res.stdout


def test_failing_rank_fails_the_job() -> None:
    """An exception on one rank aborts the whole job instead of leaving the others waiting."""
    script = ("import gputensor as gt, gputensor.distributed as dist\n"
              "dist.init_process_group('gloo')\n"
              "if dist.get_rank() == 1:\n    raise ValueError('rank one gives up')\n"
              "dist.all_reduce(gt.ones(1))\n")
    res = _run_script(2, script)
    assert res.returncode != 0 and "rank one gives up" in res.stderr


def test_single_process_group_and_errors() -> None:
    """Without a launcher the job is one process: the world is rank 0 of 1."""
    script = ("import gputensor as gt, gputensor.distributed as dist\n"
              "assert not dist.is_initialized()\n"
              "try:\n    dist.get_rank()\nexcept ValueError as e:\n    print('E1', e)\n"
              "dist.init_process_group('mpi')\n"
              "t = gt.arange(3.0); dist.all_reduce(t); print('R', t.tolist())\n"
              "print('B', dist.get_backend(), dist.get_rank(), dist.get_world_size())\n"
              "try:\n    dist.init_process_group('mpi')\nexcept ValueError as e:\n"
              "    print('E2', e)\n"
              "dist.destroy_process_group(); print('I', dist.is_initialized())\n"
              "try:\n    dist.init_process_group('nccl')\nexcept RuntimeError as e:\n"
              "    print('E3', e)\n")
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=TIMEOUT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "E1 Default process group has not been initialized" in out
    assert "R [0.0, 1.0, 2.0]" in out and "B mpi 0 1" in out
    assert "E2 trying to initialize the default process group twice!" in out
    assert "I False" in out and "E3 Distributed package doesn't have NCCL built in" in out


def test_names_and_reduce_op() -> None:
    assert dist.is_available() and dist.is_mpi_available() and not dist.is_nccl_available()
    assert dist.ReduceOp.SUM == dist.ReduceOp(dist.ReduceOp.SUM)
    assert dist.reduce_op is dist.ReduceOp and dist.Backend("GLOO") == "gloo"


def _run_module(module: str, n: int, device: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-m", module, device],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_a_single_process_run(n: int) -> None:
    """tests/distributed/ddp_worker.py: DDP of the demo CNN over 5 steps equals one process on
    the global batch (1e-6), bit-identical on every rank; bucket views, no_sync, unused
    parameters."""
    res = _run_module("tests.distributed.ddp_worker", n, "cpu")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok ddp world size {n}, device cpu" in res.stdout


def test_ddp_on_cuda_tensors() -> None:
    if not gt.cuda.is_available():
        pytest.skip("no CUDA runtime (set GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
    res = _run_module("tests.distributed.ddp_worker", 2, "cuda")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok ddp world size 2, device cuda" in res.stdout


@pytest.mark.parametrize("n,device", [(2, "cpu"), (3, "cpu"), (2, "cuda")])
def test_sync_batchnorm_matches_batchnorm_on_the_global_batch(n: int, device: str) -> None:
    if device == "cuda" and not gt.cuda.is_available():
        pytest.skip("no CUDA runtime (set GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
    res = _run_module("tests.distributed.syncbn_worker", n, device)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok syncbn world size {n}, device {device}" in res.stdout


def test_sync_batchnorm_alone_is_batchnorm() -> None:
    """Outside a multi-process job SyncBatchNorm is BatchNorm (and checks PyTorch's input)."""
    sync, plain = gt.nn.SyncBatchNorm(3), gt.nn.BatchNorm1d(3)
    x = gt.randn(4, 3, 5)
    assert gt.equal(sync(x), plain(x)) and gt.equal(sync.running_var, plain.running_var)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        sync(gt.ones(3))
    with pytest.raises(ValueError, match="number of input channels should be non-zero"):
        gt.nn.SyncBatchNorm(0)(gt.ones(2, 0))


def test_a_collective_a_peer_skips_times_out() -> None:
    """MPI's waits have no limit of their own: a collective one rank never reaches fails on the
    other within the group's timeout (DistBackendError) instead of hanging."""
    script = ("import datetime, os, time, gputensor as gt, gputensor.distributed as dist\n"
              "dist.init_process_group('mpi', timeout=datetime.timedelta(seconds=1.5))\n"
              "if dist.get_rank() == 0:\n"
              "    t0 = time.monotonic()\n"
              "    try:\n        dist.all_reduce(gt.ones(1))\n"
              "    except dist.DistBackendError as e:\n"
              "        print(f'raised after {time.monotonic() - t0:.1f} s: {e}', flush=True)\n"
              "else:\n    time.sleep(4)\n"
              "os._exit(0)  # rank 0 still has the abandoned collective in flight\n")
    res = _run_script(2, script)
    assert "timed out after 1.5 s waiting for a collective" in res.stdout, \
        res.stdout + res.stderr
    took = float(res.stdout.split("raised after ")[1].split(" s")[0])
    assert 1.4 <= took < 4
