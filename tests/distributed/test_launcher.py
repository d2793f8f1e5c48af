"""gputensor.distributed.run: torchrun's flags over mpiexec, PyTorch's launcher variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputensor.distributed import run
from gputensor.distributed._bootstrap import launcher_environment

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import os, sys
import gputensor as torch
import gputensor.distributed as dist
rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group(backend="gloo")
assert (dist.get_rank(), dist.get_world_size()) == (rank, ws)
t = torch.tensor([float(rank)])
dist.all_reduce(t)
if os.environ.get("FAIL_RANK") == str(rank):
    raise SystemError(f"rank {rank} failed on purpose")
# one write per line: with PYTHONUNBUFFERED, print's text and newline are two writes, which
# the two ranks' output can interleave
sys.stdout.write(f"rank={rank} local={os.environ['LOCAL_RANK']} sum={t.item()} "
                 f"args={sys.argv[1:]} port={os.environ['MASTER_PORT']}\\n")
sys.stdout.flush()
"""


def _launch(tmp_path: Path, *flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, "-m", "gputensor.distributed.run", *flags,
                           str(script), "--lr", "0.1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def test_runs_a_torchrun_script_on_two_processes(tmp_path: Path) -> None:
    res = _launch(tmp_path, "--nproc-per-node", "2", "--master-port", "1234")
    assert res.returncode == 0, res.stderr
    lines = sorted(line for line in res.stdout.splitlines() if line.startswith("rank="))
    assert lines == ["rank=0 local=0 sum=1.0 args=['--lr', '0.1'] port=1234",
                     "rank=1 local=1 sum=1.0 args=['--lr', '0.1'] port=1234"]


def test_a_failing_rank_fails_the_job(tmp_path: Path) -> None:
    res = _launch(tmp_path, "--nproc_per_node", "2", env={"FAIL_RANK": "1"})
    assert res.returncode != 0 and "rank 1 failed on purpose" in res.stderr


def test_multi_node_command_lines() -> None:
    args = run._parser().parse_args(["--nnodes", "2", "--nproc-per-node", "4", "--hostfile",
                                     "hosts", "-m", "pkg.train", "--x"])
    cmd = run.command(args)
    assert cmd[1:5] == ["-n", "8", "-ppn", "4"] and cmd[5:7] == ["-f", "hosts"]
    assert cmd[-4:] == ["gputensor.distributed._bootstrap", "--module", "pkg.train", "--x"]
    with pytest.raises(SystemExit, match="name the nodes"):
        run.command(run._parser().parse_args(["--nnodes", "2", "t.py"]))
    with pytest.raises(SystemExit, match="run the launcher once"):
        run.command(run._parser().parse_args(["--node-rank", "1", "t.py"]))


def test_launcher_variables_from_mpich_and_open_mpi() -> None:
    env = launcher_environment({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1",
                                "MPI_LOCALNRANKS": "2"})
    assert env["RANK"] == "3" and env["WORLD_SIZE"] == "4" and env["LOCAL_RANK"] == "1"
    assert env["LOCAL_WORLD_SIZE"] == "2" and env["GROUP_RANK"] == "1"
    env = launcher_environment({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
                                "MASTER_PORT": "7"})
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_PORT"]) == ("0", "2", "7")
