"""The launcher without MPI (torchrun's way): this node's ``--nproc-per-node`` processes with
PyTorch's env:// variables, the rendezvous store served by the launcher of node 0.

The store is the launcher's (``TORCHELASTIC_USE_AGENT_STORE=True`` tells rank 0 to join it as
a client); ``--standalone`` serves it on a free port of this machine. When one process fails
the others are terminated and the launcher exits with the failed process's code.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from .store import TCPStore

_GRACE_S = 5.0


def _worker_command(args: argparse.Namespace) -> list[str]:
    if args.no_python:
        return [args.target, *args.args]
    if args.module:
        return [sys.executable, "-u", "-m", args.target, *args.args]
    return [sys.executable, "-u", args.target, *args.args]


def _environment(args: argparse.Namespace, local_rank: int, port: int) -> dict[str, str]:
    world = args.nproc_per_node * args.nnodes
    return dict(os.environ, RANK=str(args.node_rank * args.nproc_per_node + local_rank),
                LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world),
                LOCAL_WORLD_SIZE=str(args.nproc_per_node), GROUP_RANK=str(args.node_rank),
                MASTER_ADDR=args.master_addr, MASTER_PORT=str(port),
                TORCHELASTIC_USE_AGENT_STORE="True",
                TORCHELASTIC_RUN_ID=os.environ.get("TORCHELASTIC_RUN_ID", "none"))


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + _GRACE_S
    for p in procs:
        try:
            p.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def launch(args: argparse.Namespace) -> int:
    """Run this node's processes; the exit code of the first that failed, else 0."""
    if args.nproc_per_node < 1 or args.nnodes < 1:
        raise SystemExit("--nproc-per-node and --nnodes must be at least 1")
    if not 0 <= args.node_rank < args.nnodes:
        raise SystemExit(f"--node-rank {args.node_rank} must be in [0, {args.nnodes})")
    if args.standalone and args.nnodes > 1:
        raise SystemExit("--standalone runs on one node: drop --nnodes or --standalone")
    store = None
    port = args.master_port
    if args.node_rank == 0:
        if args.standalone:
            args.master_addr, port = "127.0.0.1", 0
        store = TCPStore(args.master_addr, port, None, is_master=True, multi_tenant=False)
        port = store.port
    procs = [subprocess.Popen(_worker_command(args), env=_environment(args, i, port))
             for i in range(args.nproc_per_node)]

    def forward(signum: int, frame: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                index, code = failed[0]
                print(f"gputensor-run: local rank {index} exited with code {code}; stopping "
                      f"the other processes", file=sys.stderr, flush=True)
                _stop(procs)
                return code if code > 0 else 128 - code
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    finally:
        if store is not None:
            store.close()
