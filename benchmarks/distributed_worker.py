"""Run under ``mpiexec -n 2``: gt.distributed's all_reduce against mpi4py's own Allreduce on
the same NumPy buffer, and a DDP training step against the same step in one process. Rank 0
prints one JSON line of seconds and ratios (benchmarks/test_bench_distributed.py runs it)."""

from __future__ import annotations

import json
import time

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn
from gputensor.demo import build_model
from gputensor.nn.parallel import DistributedDataParallel as DDP


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    from mpi4py import MPI
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    n = 64 * 2 ** 20 // 4  # 64 MiB of float32
    arr = np.ones(n, np.float32)
    t = gt.ones(n)
    raw = best(lambda: comm.Allreduce(MPI.IN_PLACE, arr, MPI.SUM), 5)
    ours = best(lambda: dist.all_reduce(t), 5)
    x, y = gt.randn(64, 1, 8, 8), gt.randint(0, 10, (64,))

    def step(model: nn.Module, opt: gt.optim.Optimizer) -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    single = build_model()
    s_opt = gt.optim.SGD(single.parameters(), lr=0.01)
    ddp = DDP(build_model())
    d_opt = gt.optim.SGD(ddp.parameters(), lr=0.01)
    for _ in range(3):
        step(single, s_opt)
        step(ddp, d_opt)
    one = best(lambda: step(single, s_opt), 20)
    many = best(lambda: step(ddp, d_opt), 20)
    if dist.get_rank() == 0:
        print(json.dumps({"allreduce_64MiB_mpi4py_s": raw, "allreduce_64MiB_gt_s": ours,
                          "allreduce_bandwidth_ratio": raw / ours, "step_single_s": one,
                          "step_ddp_s": many, "ddp_step_overhead": many / one}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
