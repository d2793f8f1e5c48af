"""Run as one of 2 processes: DDP without ``join()`` on uneven inputs. Rank 1 stops after one
step and idles (alive, in no collective); rank 0 goes on and must fail within the group's
timeout (argv[1] seconds) with an error naming the cause, instead of waiting forever. With
argv[2] == "buffers" the model has BatchNorm buffers and rank 0 is the one that stops, so the
wait that fails is rank 1's receipt of the forward's buffer broadcast rather than backward's
gradient all-reduce."""

from __future__ import annotations

import datetime
import sys
import time

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn
from gputensor.nn.parallel import DistributedDataParallel as DDP


def main(timeout_s: float, buffers: bool) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    rank = dist.get_rank()
    layers = [nn.Linear(4, 4), nn.BatchNorm1d(4)] if buffers else [nn.Linear(4, 4)]
    ddp = DDP(nn.Sequential(*layers, nn.Linear(4, 1)))
    stopping = 0 if buffers else 1
    start = time.monotonic()
    for _ in range(1 if rank == stopping else 3):
        ddp(gt.randn(5, 4)).sum().backward()
        print(f"rank {rank} step done", flush=True)
    if rank == stopping:
        time.sleep(120)  # out of data: no more collectives, but the process stays alive
    print(f"rank {rank} finished after {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), len(sys.argv) > 2 and sys.argv[2] == "buffers")
