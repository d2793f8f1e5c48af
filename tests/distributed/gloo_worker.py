"""Run as one of N processes with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and INIT_FILE (a path for file://): the gloo backend joined through each
rendezvous (file://, tcp://, an explicit TCPStore, env://), then every collective
(tests/distributed/mpi_worker.py's checks) and DDP against a single process
(tests/distributed/ddp_worker.py's checks) over it."""

from __future__ import annotations

import datetime
import os
import sys

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from tests.distributed import ddp_worker, mpi_worker


def joined(expect_rank: int, expect_size: int) -> None:
    assert (dist.get_rank(), dist.get_world_size()) == (expect_rank, expect_size)
    assert dist.get_backend() == "gloo" and dist.group.WORLD.engine.__name__.endswith("_gloo")
    t = gt.tensor([float(expect_rank + 1)])
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert work.is_completed()
    assert t.item() == expect_size * (expect_size + 1) / 2, t.item()
    dist.destroy_process_group()
    assert not dist.is_initialized()


def main() -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE")}
    # file:// and tcp:// take rank and world size as arguments or in the URL
    dist.init_process_group("gloo", init_method=f"file://{os.environ['INIT_FILE']}",
                            rank=rank, world_size=size)
    joined(rank, size)
    port = int(os.environ["MASTER_PORT"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}?rank={rank}"
                            f"&world_size={size}")
    joined(rank, size)
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # the test serves it
    store = dist.TCPStore("127.0.0.1", port, size, rank == 0 and not agent,
                          timeout=datetime.timedelta(seconds=60), multi_tenant=True)
    dist.init_process_group("gloo", store=dist.PrefixStore("explicit", store), rank=rank,
                            world_size=size)
    joined(rank, size)
    os.environ.update(env)
    # env:// (the default): every collective, then DDP
    mpi_worker.main("cpu")
    ddp_worker.main("cpu")
    # the engines agree with NumPy bit for bit on integer sums across a ring of any length
    dist.init_process_group("gloo")
    t = gt.arange(1001, dtype=gt.int64) * (rank + 1)
    dist.all_reduce(t)
    np.testing.assert_array_equal(t.numpy(), np.arange(1001) * (size * (size + 1) // 2))
    if gt.cuda.is_available():  # CUDA tensors travel through host memory on this engine
        t = gt.full((5,), float(rank + 1), device="cuda")
        dist.all_reduce(t, dist.ReduceOp.MAX)
        outs = [gt.empty(5, device="cuda") for _ in range(size)]
        dist.all_gather(outs, t * (rank + 1))
        assert t.device.type == "cuda" and t.cpu().tolist() == [float(size)] * 5
        assert [o.cpu().tolist() for o in outs] == [[size * (r + 1.0)] * 5 for r in range(size)]
    dist.destroy_process_group()
    if rank == 0:
        print(f"gloo ok, world size {size}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
