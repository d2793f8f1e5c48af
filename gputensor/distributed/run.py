"""The launcher: torchrun's flags, MPI's launcher underneath (or none: ``--standalone``).

    python -m gputensor.distributed.run --nproc-per-node 2 train.py --lr 0.1
    gputensor-run --nnodes 2 --nproc-per-node 4 --hostfile hosts train.py
    gputensor-run --standalone --nproc-per-node 2 train.py     # no MPI: env:// and gloo

Without MPI (``--standalone``, ``--no-mpi``, or no ``mpiexec`` installed) it starts this node's
processes itself, as torchrun does (``_local_launch.py``: a TCPStore for the rendezvous, one
launch per node with ``--node-rank``); the rest of this text is the MPI launch.

It starts ``nnodes x nproc-per-node`` processes with ``mpiexec`` (from the MPICH wheel), each
running the script with PyTorch's launcher variables set (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so scripts written for torchrun run unchanged
and ``init_process_group`` joins them. Several machines: one launch, naming them with
``--hostfile`` (MPICH's format: ``host:slots`` per line) or ``--hosts a,b``; MPI's own launcher
reaches them (ssh). A rank that fails aborts the job; the launcher exits with its code;
SIGINT/SIGTERM are forwarded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gputensor-run", description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=29500)
    p.add_argument("--hostfile", help="MPICH host file (host:slots per line)")
    p.add_argument("--hosts", help="comma-separated host names, one per node")
    p.add_argument("--standalone", action="store_true",
                   help="one node, no MPI: local processes with env:// (torchrun's flag)")
    p.add_argument("--no-mpi", "--no_mpi", action="store_true",
                   help="start the processes without MPI (env://; one launch per node)")
    p.add_argument("-m", "--module", action="store_true", help="run TARGET as a module")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="TARGET is an executable, not a Python script")
    p.add_argument("target")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _find_mpiexec() -> str | None:
    exe = shutil.which("mpiexec") or str(Path(sys.executable).with_name("mpiexec"))
    return exe if Path(exe).exists() else None


def mpiexec() -> str:
    exe = _find_mpiexec()
    if exe is None:
        raise SystemExit("gputensor-run needs MPI's launcher: pip install 'gputensor"
                         "[distributed]' (mpi4py and mpich)")
    return exe


def command(args: argparse.Namespace) -> list[str]:
    """The mpiexec command line for the parsed arguments."""
    if args.nproc_per_node < 1 or args.nnodes < 1:
        raise SystemExit("--nproc-per-node and --nnodes must be at least 1")
    if args.node_rank != 0:
        raise SystemExit("--node-rank: MPI starts every node from one launch; run the launcher "
                         "once, on one node, with --hostfile or --hosts naming the nodes")
    cmd = [mpiexec(), "-n", str(args.nproc_per_node * args.nnodes)]
    if args.nnodes > 1:
        if not (args.hostfile or args.hosts):
            raise SystemExit(f"--nnodes {args.nnodes}: name the nodes with --hostfile or "
                             f"--hosts")
        cmd += ["-ppn", str(args.nproc_per_node)]
    if args.hostfile:
        cmd += ["-f", args.hostfile]
    if args.hosts:
        cmd += ["-hosts", args.hosts]
    cmd += ["-genv", "MASTER_ADDR", args.master_addr, "-genv", "MASTER_PORT",
            str(args.master_port)]
    if args.no_python:
        return cmd + [args.target, *args.args]
    boot = [sys.executable, "-m", "gputensor.distributed._bootstrap"]
    return cmd + boot + (["--module"] if args.module else []) + [args.target, *args.args]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.standalone or args.no_mpi or _find_mpiexec() is None:
        from ._local_launch import launch
        return launch(args)
    proc = subprocess.Popen(command(args), env=dict(os.environ))

    def forward(signum: int, frame: object) -> None:
        proc.send_signal(signum)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
