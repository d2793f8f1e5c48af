"""What the launcher runs in each process: PyTorch's launcher variables from the MPI
launcher's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), then
the user's script (or module) as ``__main__``.

    python -m gputensor.distributed._bootstrap [--module] TARGET [ARGS...]
"""

from __future__ import annotations

import os
import runpy
import sys


def launcher_environment(env: dict[str, str]) -> dict[str, str]:
    """torchrun's variables from MPICH's (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, ...), or from
    mpi4py when the MPI sets none of them."""
    if "PMI_RANK" in env:
        rank, size = int(env["PMI_RANK"]), int(env["PMI_SIZE"])
    elif "OMPI_COMM_WORLD_RANK" in env:
        rank, size = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
    else:
        from mpi4py import MPI
        rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    local_rank = int(env.get("MPI_LOCALRANKID", env.get("OMPI_COMM_WORLD_LOCAL_RANK", rank)))
    local_size = int(env.get("MPI_LOCALNRANKS", env.get("OMPI_COMM_WORLD_LOCAL_SIZE", size)))
    return {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_size), "GROUP_RANK": str(rank // max(local_size, 1)),
            "MASTER_ADDR": env.get("MASTER_ADDR", "127.0.0.1"),
            "MASTER_PORT": env.get("MASTER_PORT", "29500"),
            # torchrun's rendezvous id (its default): is_torchelastic_launched() reads it
            "TORCHELASTIC_RUN_ID": env.get("TORCHELASTIC_RUN_ID", "none")}


def main(argv: list[str]) -> None:
    module = bool(argv) and argv[0] == "--module"
    if module:
        argv = argv[1:]
    if not argv:
        raise SystemExit("usage: python -m gputensor.distributed._bootstrap [--module] TARGET "
                         "[ARGS...]")
    os.environ.update(launcher_environment(dict(os.environ)))
    target, sys.argv = argv[0], list(argv)
    if module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
