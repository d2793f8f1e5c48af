"""DistributedDataParallel on uneven inputs (``join()``, and without it a clear failure within
the group's timeout), and DDP with gt.compile, gt.autocast and clip_grad_norm_: 2 and 3 MPI
processes and the TCP engine under ``gputensor-run --standalone`` (workers:
join_worker.py, uneven_worker.py, ddp_compile_worker.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

import gputensor as gt
from gputensor.distributed.algorithms import Join, Joinable, JoinHook
from tests.distributed.test_gloo import _env
from tests.distributed.test_mpi_collectives import ROOT, TIMEOUT, _mpiexec, _run_module

SHORT_TIMEOUT_S = 3


def _standalone(n: int, module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputensor.distributed.run", "--standalone",
                           "--nproc-per-node", str(n), "-m", module, *args], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("n,device", [(2, "cpu"), (3, "cpu"), (2, "cuda")])
def test_join_matches_a_single_process_run(n: int, device: str) -> None:
    """join_worker.py: both divisors, a comm hook, no_sync, unused parameters and buffers,
    Join([ddp, counter]), throw_on_early_termination."""
    if device == "cuda" and not gt.cuda.is_available():
        pytest.skip("no CUDA runtime (set GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
    res = _run_module("tests.distributed.join_worker", n, device)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok join world size {n}, device {device}" in res.stdout


def test_join_over_the_tcp_engine() -> None:
    res = _standalone(2, "tests.distributed.join_worker", "cpu")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok join world size 2, device cpu" in res.stdout


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_with_compile_autocast_and_clipping(n: int) -> None:
    res = _run_module("tests.distributed.ddp_compile_worker", n, "cpu")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok ddp compile autocast clip world size {n}" in res.stdout


def _check_fails_in_time(res: subprocess.CompletedProcess, elapsed: float, rank: int,
                         waiting_for: str) -> None:
    assert res.returncode != 0, res.stdout + res.stderr
    assert f"rank {rank} finished" not in res.stdout
    assert f"DistributedDataParallel: waiting for {waiting_for}" in res.stderr, res.stderr
    assert f"timed out after {SHORT_TIMEOUT_S} s" in res.stderr, res.stderr
    assert "train inside `with model.join():`" in res.stderr
    assert elapsed < 60, elapsed  # the idle rank sleeps 120 s: the job was stopped, not waited


def test_uneven_inputs_without_join_fail_within_the_timeout_over_mpi() -> None:
    """MPI's own waits never end: DDP's waits poll against the group's timeout, and the
    error aborts the job (the rank that stopped is idle, not exited)."""
    start = time.monotonic()
    res = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m",
                          "tests.distributed.uneven_worker", str(SHORT_TIMEOUT_S)], cwd=ROOT,
                         env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    _check_fails_in_time(res, time.monotonic() - start, 0,
                         "the gradient all-reduce of bucket 0")


def test_uneven_inputs_without_join_fail_within_the_timeout_over_tcp() -> None:
    start = time.monotonic()
    res = _standalone(2, "tests.distributed.uneven_worker", str(SHORT_TIMEOUT_S), "buffers")
    _check_fails_in_time(res, time.monotonic() - start, 1,
                         "the broadcast of the module's buffers")


class _Fake(Joinable):
    def __init__(self, group: Any) -> None:
        super().__init__()
        self.group = group

    def join_hook(self, **kwargs: Any) -> JoinHook:
        self.kwargs = kwargs
        return JoinHook()

    @property
    def join_device(self) -> Any:
        return "cpu"

    @property
    def join_process_group(self) -> Any:
        return self.group


def test_join_checks_its_joinables() -> None:
    with pytest.raises(ValueError, match="requires at least one joinable"):
        Join([])
    with pytest.raises(ValueError, match="multiple process groups"):
        Join([_Fake("a"), _Fake("b")], spare=1)
    with pytest.raises(TypeError, match="abstract"):
        Joinable()  # type: ignore[abstract]

    class NoInit(Joinable):  # skips Joinable.__init__: no join config
        def __init__(self) -> None:
            pass

        def join_hook(self, **kwargs: Any) -> JoinHook:
            return JoinHook()

        join_device = join_process_group = None  # type: ignore[assignment]
    with pytest.raises(AssertionError, match="calls the ``Joinable`` constructor"):
        Join.notify_join_context(NoInit())
    fake = _Fake(None)
    assert Join.notify_join_context(fake) is None  # outside a context: nothing to do
