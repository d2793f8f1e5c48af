"""torch.distributed's remaining API on 4 processes, on both engines: MPI (``mpiexec -n 4``)
and the TCP gloo engine (``gputensor-run --standalone``): tests/distributed/api_worker.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.test_mpi_collectives import _mpiexec

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")}
    return dict(env, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


@pytest.mark.parametrize("backend", ["mpi", "gloo"])
def test_api_on_four_processes(backend: str) -> None:
    worker = ["-m", "tests.distributed.api_worker", backend]
    if backend == "mpi":
        cmd = [_mpiexec(), "-n", "4", sys.executable, *worker]
    else:
        cmd = [sys.executable, "-m", "gputensor.distributed.run", "--standalone",
               "--nproc-per-node", "4", *worker]
    res = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok api world size 4, backend {backend}" in res.stdout
