"""Run under ``mpiexec -n N``: every collective of gt.distributed against a NumPy reference
built from what each rank contributes (rank r contributes values derived from r). Prints one
"ok <case>" line per case on rank 0; any mismatch raises (and aborts the job)."""

from __future__ import annotations

import sys

import numpy as np

import gputensor as gt
import gputensor.distributed as dist

DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool", "float16", "bfloat16",
          "complex64"]


def contribution(rank: int, dtype: str, n: int = 6) -> np.ndarray:
    base = np.arange(n) + 3 * rank + 1
    if dtype == "bool":
        return (base % (rank + 2)) == 0
    if dtype.startswith("complex"):
        return (base + 1j * rank).astype(dtype)
    return base.astype("float32" if dtype == "bfloat16" else dtype)


def reference(op: dist.ReduceOp, stacked: np.ndarray) -> np.ndarray:
    """What the reduction over ranks gives, in the tensors' dtype (integers wrap as MPI's
    do)."""
    if op == dist.ReduceOp.SUM:
        return np.sum(stacked, 0, dtype=stacked.dtype)
    if op == dist.ReduceOp.PRODUCT:
        return np.prod(stacked, 0, dtype=stacked.dtype)
    return np.max(stacked, 0) if op == dist.ReduceOp.MAX else np.min(stacked, 0)


def tensor(a: np.ndarray, dtype: str, device: str) -> gt.Tensor:
    return gt.tensor(a, device=device).to(getattr(gt, dtype))


def check(name: str, got: gt.Tensor, want: np.ndarray, rank: int) -> None:
    g = got.float() if got.dtype in (gt.bfloat16, gt.float16) else got
    np.testing.assert_allclose(g.cpu().numpy().astype(want.dtype), want, rtol=1e-2 if
                               got.dtype in (gt.bfloat16, gt.float16) else 1e-6,
                               err_msg=f"{name} on rank {rank}")


def main(device: str) -> None:
    dist.init_process_group("gloo" if device == "cpu" else "mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    everyone = [r for r in range(size)]
    done = []
    for dt in DTYPES:
        parts = [contribution(r, dt) for r in everyone]
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
        for op in ops:
            if dt.startswith("complex") and op in (dist.ReduceOp.MAX, dist.ReduceOp.MIN):
                continue
            t = tensor(parts[rank], dt, device)
            dist.all_reduce(t, op)
            want = reference(op, np.stack(parts))
            if dt == "bool":
                want = {dist.ReduceOp.SUM: np.any, dist.ReduceOp.MAX: np.any,
                        dist.ReduceOp.MIN: np.all, dist.ReduceOp.PRODUCT: np.all}[op](
                    np.stack(parts), axis=0)
            check(f"all_reduce {op.name} {dt}", t, want, rank)
        done.append(f"all_reduce {dt}")
        t = tensor(parts[rank], dt, device)
        dist.broadcast(t, src=size - 1)
        check(f"broadcast {dt}", t, parts[-1], rank)
        outs = [tensor(np.zeros_like(parts[0]), dt, device) for _ in everyone]
        dist.all_gather(outs, tensor(parts[rank], dt, device))
        for r in everyone:
            check(f"all_gather {dt}", outs[r], parts[r], rank)
        flat = tensor(np.zeros(size * parts[0].size, parts[0].dtype), dt, device)
        dist.all_gather_into_tensor(flat, tensor(parts[rank], dt, device))
        check(f"all_gather_into_tensor {dt}", flat, np.concatenate(parts), rank)
    # async all_reduce with AVG, reduce to a root, reduce_scatter, scatter/gather, all_to_all
    t = gt.tensor(contribution(rank, "float64"), device=device)
    work = dist.all_reduce(t, dist.ReduceOp.AVG, async_op=True)
    work.wait()
    assert work.is_completed()
    check("all_reduce AVG async", t, np.mean([contribution(r, "float64") for r in everyone], 0),
          rank)
    t = gt.tensor(contribution(rank, "int64"), device=device)
    dist.reduce(t, dst=0)
    if rank == 0:
        check("reduce", t, np.sum([contribution(r, "int64") for r in everyone], 0), rank)
    else:
        check("reduce leaves others", t, contribution(rank, "int64"), rank)
    chunks = [gt.full((2,), float(rank * 10 + i), device=device) for i in everyone]
    out = gt.empty(2, device=device)
    dist.reduce_scatter(out, chunks)
    check("reduce_scatter", out, np.full(2, sum(r * 10 + rank for r in everyone), np.float32),
          rank)
    big = gt.arange(2 * size, dtype=gt.float32, device=device) + rank
    out = gt.empty(2, device=device)
    dist.reduce_scatter_tensor(out, big)
    check("reduce_scatter_tensor", out,
          np.sum([np.arange(2 * size) + r for r in everyone], 0)[2 * rank:2 * rank + 2], rank)
    got = gt.empty(3, device=device)
    dist.scatter(got, [gt.full((3,), float(i), device=device) for i in everyone]
                 if rank == 0 else None, src=0)
    check("scatter", got, np.full(3, float(rank), np.float32), rank)
    gathered = [gt.empty(3, device=device) for _ in everyone] if rank == size - 1 else None
    dist.gather(gt.full((3,), float(rank), device=device), gathered, dst=size - 1)
    if rank == size - 1:
        for r in everyone:
            check("gather", gathered[r], np.full(3, float(r), np.float32), rank)
    ins = [gt.full((r + 1,), float(rank * 100 + r), device=device) for r in everyone]
    outs = [gt.empty(rank + 1, device=device) for _ in everyone]
    dist.all_to_all(outs, ins)
    for r in everyone:
        check("all_to_all", outs[r], np.full(rank + 1, float(r * 100 + rank), np.float32), rank)
    single_in = gt.arange(size * 2, dtype=gt.float32, device=device) + 100 * rank
    single_out = gt.empty(size * 2, device=device)
    dist.all_to_all_single(single_out, single_in)
    want = np.concatenate([np.arange(size * 2)[2 * rank:2 * rank + 2] + 100 * r for r in everyone])
    check("all_to_all_single", single_out, want.astype(np.float32), rank)
    # point to point, in a ring
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    recv_buf = gt.empty(4, device=device)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, gt.full((4,), float(rank),
                                                                   device=device), nxt),
                                    dist.P2POp(dist.irecv, recv_buf, prv)])
    for w in works:
        w.wait()
    check("ring isend/irecv", recv_buf, np.full(4, float(prv), np.float32), rank)
    if rank == 0:
        dist.send(gt.ones(2, device=device), dst=1)
    elif rank == 1:
        buf = gt.zeros(2, device=device)
        assert dist.recv(buf) == 0
        check("send/recv", buf, np.ones(2, np.float32), rank)
    # objects
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in everyone], objs
    lst = [f"from {rank}", rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == ["from 0", 0], lst
    # a subgroup of the first two ranks
    sub = dist.new_group([0, 1])
    t = gt.tensor([float(rank)], device=device)
    if rank in (0, 1):
        dist.all_reduce(t, group=sub)
        check("subgroup all_reduce", t, np.array([1.0], np.float32), rank)
        assert dist.get_world_size(sub) == 2 and dist.get_rank(sub) == rank
    else:
        assert sub is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(sub) == -1
    dist.monitored_barrier()
    dist.barrier()
    # errors
    for bad, msg in ((lambda: dist.all_reduce(gt.ones(2, 2, device=device).t()),
                      "must be contiguous"),
                     (lambda: dist.all_reduce(gt.ones(2, dtype=gt.complex64, device=device),
                                              dist.ReduceOp.MAX), "on complex tensors"),
                     (lambda: dist.all_reduce(gt.ones(2, dtype=gt.int64, device=device),
                                              dist.ReduceOp.AVG), "ReduceOp.AVG"),
                     (lambda: dist.broadcast(gt.ones(1, device=device), src=size),
                      "is not part of group")):
        try:
            bad()
        except (ValueError, RuntimeError) as e:
            assert msg in str(e), (msg, str(e))
        else:
            raise AssertionError(f"expected an error containing {msg!r}")
    dist.destroy_process_group()
    if rank == 0:
        print(f"ok {len(done)} dtypes, world size {size}, device {device}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
