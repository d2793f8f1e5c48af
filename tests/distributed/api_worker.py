"""Run as one of 4 processes (``mpiexec -n 4 ... mpi`` or ``gputensor-run --standalone
--nproc-per-node 4 ... gloo``): the coalesced and ``_single`` collectives, Work futures, the
ProcessGroup methods with option holders, new_subgroups / by_enumeration / split_group /
shrink_group, DeviceMesh (1-D and 2-D), DETAIL collective checks and DDP communication hooks,
each against values computed from what every rank contributes. Prints "ok api ..." on rank 0.
"""

from __future__ import annotations

import sys

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn
from gputensor.nn.parallel import DistributedDataParallel as DDP


def expect_error(kind: type, text: str, fn: object) -> None:
    try:
        fn()  # type: ignore[operator]
    except kind as e:
        assert text in str(e), (text, str(e))
    else:
        raise AssertionError(f"expected {kind.__name__} containing {text!r}")


def coalesced(rank: int, n: int) -> None:
    total = n * (n - 1) / 2
    ts = [gt.full((3,), float(rank)), gt.arange(4.0).reshape(2, 2) * (rank + 1),
          gt.tensor([complex(rank, 1)], dtype=gt.complex64)]
    assert dist.all_reduce_coalesced(ts) is None
    assert ts[0].tolist() == [total] * 3
    assert ts[1].tolist() == (np.arange(4.0).reshape(2, 2) * n * (n + 1) / 2).tolist()
    assert ts[2].tolist() == [complex(total, n)]
    fut = dist.all_reduce_coalesced([gt.ones(2, dtype=gt.int64)], dist.ReduceOp.MAX,
                                    async_op=True)
    assert isinstance(fut, gt.futures.Future) and fut.wait()[0].tolist() == [1, 1]
    expect_error(ValueError, "does not support RedOpType.MAX on complex tensors",
                 lambda: dist.all_reduce_coalesced([gt.ones(1, dtype=gt.complex64)],
                                                   dist.ReduceOp.MAX))
    expect_error(ValueError, "Invalid usage of tensors with different dtypes",
                 lambda: dist.all_reduce_coalesced([gt.ones(1), gt.ones(1, dtype=gt.int64)]))
    outs = [[gt.zeros(2, 2), gt.zeros(1)] for _ in range(n)]
    fut = dist.all_gather_coalesced(outs, [gt.full((2, 2), float(rank)),
                                           gt.tensor([10.0 + rank])], async_op=True)
    fut.wait()
    for r in range(n):
        assert outs[r][0].tolist() == [[float(r)] * 2] * 2 and outs[r][1].tolist() == [10.0 + r]
    # the _single forms: stacked output / input
    out = gt.zeros(n, 2, dtype=gt.int32)
    dist.all_gather_single(out, gt.tensor([rank, -rank], dtype=gt.int32))
    assert out.tolist() == [[r, -r] for r in range(n)]
    got = gt.zeros(2)
    dist.reduce_scatter_single(got, gt.arange(2.0 * n).reshape(n, 2) + rank)
    assert got.tolist() == [n * 2.0 * rank + total, n * (2.0 * rank + 1) + total]
    # a Work's future, chained
    t = gt.full((2,), float(rank))
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] + 1)
    assert fut.wait().tolist() == [total + 1] * 2 and fut.done()


def group_methods(rank: int, n: int) -> None:
    pg = dist.group.WORLD
    t = gt.tensor([float(rank)])
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    pg.allreduce([t], opts).wait()
    assert t.item() == n - 1
    b = gt.tensor([float(rank)])
    bo = dist.BroadcastOptions()
    bo.rootRank = 1
    pg.broadcast([b], bo).wait()
    assert b.item() == 1.0
    r = gt.tensor([rank + 1.0])
    ro = dist.ReduceOptions()
    ro.rootRank, ro.reduceOp = n - 1, dist.ReduceOp.PRODUCT
    pg.reduce([r], ro).wait()
    assert r.item() == (float(np.prod(np.arange(1, n + 1))) if rank == n - 1 else rank + 1.0)
    gathered = [[gt.zeros(1) for _ in range(n)]] if rank == 0 else []
    pg.gather(gathered, [gt.tensor([rank * 2.0])], dist.GatherOptions()).wait()
    if rank == 0:
        assert [g.item() for g in gathered[0]] == [2.0 * i for i in range(n)]
    mine = gt.zeros(1)
    so = dist.ScatterOptions()
    so.rootRank = n - 1
    pieces = [[gt.tensor([i * 3.0]) for i in range(n)]] if rank == n - 1 else []
    pg.scatter([mine], pieces, so).wait()
    assert mine.item() == rank * 3.0
    pg.barrier(dist.BarrierOptions()).wait()


def subgroups(rank: int, n: int) -> None:
    mine, every = dist.new_subgroups(2)
    assert len(every) == n // 2 and dist.get_process_group_ranks(mine) == \
        [rank - rank % 2, rank - rank % 2 + 1]
    t = gt.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    assert t.item() == 2 * (rank - rank % 2) + 1
    evens = list(range(0, n, 2))
    mine, every = dist.new_subgroups_by_enumeration([evens, list(range(1, n, 2))])
    assert dist.get_process_group_ranks(mine) == (evens if rank % 2 == 0 else
                                                  list(range(1, n, 2)))
    t = gt.tensor([1.0])
    dist.all_reduce(t, group=mine)
    assert t.item() == len(evens)
    expect_error(ValueError, "has appeared in both subgroup",
                 lambda: dist.new_subgroups_by_enumeration([[0, 1], [1, 2]]))
    expect_error(ValueError, "must be divisible", lambda: dist.new_subgroups(n - 1))
    # split_group: blocks of the parent's ranks; a rank in none gets None
    sub = dist.split_group(split_ranks=[[0, n - 1], [1]])
    if rank in (0, n - 1):
        assert dist.get_process_group_ranks(sub) == [0, n - 1]
        t = gt.tensor([float(rank)])
        dist.all_reduce(t, group=sub)
        assert t.item() == n - 1
    elif rank == 1:
        assert dist.get_process_group_ranks(sub) == [1] and dist.get_world_size(sub) == 1
    else:
        assert sub is None
    expect_error(ValueError, "split_ranks cannot be None or empty",
                 lambda: dist.split_group(split_ranks=[]))
    # shrink_group: the last rank leaves a group; the others build the smaller one alone
    whole = dist.new_group(list(range(n)))
    if rank != n - 1:
        expect_error(RuntimeError, "is in the exclusion list",
                     lambda: dist.shrink_group([rank], whole))
        small = dist.shrink_group([n - 1], whole)
        assert dist.get_process_group_ranks(small) == list(range(n - 1))
        t = gt.tensor([1.0])
        dist.all_reduce(t, group=small)
        assert t.item() == n - 1
        dist.destroy_process_group(small)


def meshes(rank: int, n: int) -> None:
    mesh = dist.init_device_mesh("cpu", (2, n // 2), mesh_dim_names=("dp", "tp"))
    row, col = divmod(rank, n // 2)
    assert mesh.shape == (2, n // 2) and mesh.ndim == 2 and mesh.size() == n
    assert mesh.get_coordinate() == (row, col) and mesh.mesh.tolist() == \
        np.arange(n).reshape(2, n // 2).tolist()
    assert repr(mesh) == f"DeviceMesh((dp=2, tp={n // 2}), 'cpu', stride=({n // 2}, 1))"
    tp, dp = mesh["tp"], mesh["dp"]
    assert dist.get_process_group_ranks(mesh.get_group("tp")) == \
        [row * (n // 2) + c for c in range(n // 2)]
    assert dist.get_process_group_ranks(dp.get_group()) == [col, col + n // 2]
    assert tp.mesh.tolist() == [row * (n // 2) + c for c in range(n // 2)]
    assert mesh.get_local_rank("dp") == row and mesh.get_local_rank(1) == col
    assert dp.get_local_rank() == row and tp.get_coordinate() == (col,)
    t = gt.tensor([float(rank)])
    dist.all_reduce(t, group=mesh.get_group("dp"))
    assert t.item() == 2 * col + n // 2
    expect_error(RuntimeError, "Optional kwarg `mesh_dim` needs to be specified",
                 lambda: mesh.get_group())
    expect_error(KeyError, "Mesh dim indices should be in ascending order",
                 lambda: mesh["tp", "dp"])
    flat = dist.init_device_mesh("cpu", (n,))
    assert flat.get_group() is dist.group.WORLD and flat.get_local_rank() == rank
    again = dist.DeviceMesh.from_group(mesh.get_group("tp"), "cpu", mesh_dim_names=("tp",))
    assert again.get_group() is mesh.get_group("tp") and again.mesh.tolist() == tp.mesh.tolist()
    # DDP over the mesh's data-parallel dimension
    gt.manual_seed(rank)
    model = DDP(nn.Linear(3, 1), device_mesh=dp)
    model(gt.full((2, 3), float(rank))).sum().backward()
    assert model.module.weight.grad.tolist() == [[2.0 * (col + col + n // 2) / 2] * 3]


def detail_checks(rank: int, n: int) -> None:
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        expect_error(RuntimeError, "Detected mismatch between collectives on ranks",
                     lambda: dist.all_reduce(gt.ones(2 if rank == 0 else 3)))
        t = gt.ones(2)
        dist.all_reduce(t)  # matching collectives still run
        assert t.tolist() == [float(n)] * 2
    finally:
        dist.set_debug_level(dist.DebugLevel.OFF)


def comm_hooks(rank: int, n: int) -> None:
    def run(register: object) -> list[float]:
        gt.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2)), bucket_cap_mb=0.00002)
        if register is not None:
            register(model)  # type: ignore[operator]
        model(gt.full((2, 4), rank + 1.0)).pow(2).sum().backward()
        return [v for p in model.module.parameters() for v in p.grad.reshape(-1).tolist()]

    seen: list[tuple[int, bool, int]] = []

    def hook(state: object, bucket: dist.GradBucket) -> gt.futures.Future:
        seen.append((bucket.index(), bucket.is_last(), len(bucket.parameters())))
        assert sum(g.numel() for g in bucket.gradients()) == bucket.buffer().numel()
        buf = bucket.buffer().div_(n)
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

    plain = run(None)
    hooked = run(lambda m: m.register_comm_hook(None, hook))
    np.testing.assert_allclose(hooked, plain, rtol=1e-6)
    assert len(seen) > 1 and seen[-1][1] and [s[0] for s in seen] == list(range(len(seen)))
    fp16 = run(lambda m: m._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS))
    np.testing.assert_allclose(fp16, plain, rtol=2e-3, atol=1e-3)


def main(backend: str) -> None:
    dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    assert n % 2 == 0 and n >= 4, "run on 4 processes"
    for step in (coalesced, group_methods, subgroups, meshes, detail_checks, comm_hooks):
        step(rank, n)
    # shrinking the default group: the last rank leaves, the others carry on renumbered
    if rank != n - 1:
        world = dist.shrink_group([n - 1])
        assert world is dist.group.WORLD and dist.get_world_size() == n - 1
        t = gt.tensor([1.0])
        dist.all_reduce(t)
        assert t.item() == n - 1 and dist.get_rank() == rank
    dist.destroy_process_group()
    if rank == 0:
        print(f"ok api world size {n}, backend {backend}")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gloo")
