"""Collectives and point-to-point ops over a process group's communicator (MPI's, or the gloo
engine's with the same API: ``pg.engine`` names the engine), PyTorch's signatures.
``async_op=True`` returns a :class:`Work` (the engine's non-blocking call underneath);
otherwise the call returns once this rank's part is done (None, as PyTorch's)."""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gputensor._tensor import Tensor
from gputensor.futures import Future

from . import _mpi
from .debug import check_collective
from .errors import DistBackendError
from .process_group import ProcessGroup, resolve
from .reduce_op import ReduceOp


class Work:
    """A collective in flight: ``wait()`` blocks until it is done (staged results are written
    back then), ``is_completed()`` asks without blocking."""

    def __init__(self, requests: Sequence[Any], finish: Callable[[], None],
                 result: list[Tensor] | None = None, limit_s: float | None = None) -> None:
        self._requests, self._finish, self._result = list(requests), finish, result or []
        self._limit_s = limit_s  # the group's timeout (MPI requests are polled against it)
        self._done = False

    def _complete(self) -> None:
        if not self._done:
            self._done = True
            self._finish()

    def wait(self, timeout: Any = None) -> bool:
        """Wait for the work: up to ``timeout`` (a timedelta) or the group's timeout on MPI,
        whose own waits have no limit (the gloo engine enforces its own)."""
        if self._requests:  # the engine's Request class (mpi4py's, or _gloo's)
            kind = type(self._requests[0])
            limit = timeout.total_seconds() if timeout is not None else self._limit_s
            if limit is not None and kind.__module__.startswith("mpi4py"):
                _wait_bounded(kind, self._requests, limit)
            else:
                kind.Waitall(self._requests)
        self._complete()
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if not self._requests or type(self._requests[0]).Testall(self._requests):
            self._complete()
            return True
        return False

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self) -> list[Tensor]:
        self.wait()
        return self._result

    def synchronize(self) -> None:
        self.wait()

    def get_future(self) -> Future:
        """A Future of ``result()`` (the output tensors), done when this work is: waiting
        on it, or on a future chained to it with ``then``, waits for the work."""
        return _WorkFuture(self)

    def __repr__(self) -> str:
        return f"<Work {'done' if self._done else 'in flight'}>"


def _wait_bounded(kind: Any, requests: list[Any], limit_s: float) -> None:
    """MPI's Waitall, with a limit: Testall spins as Waitall does (MPI progresses inside its
    calls), and the clock is read every few hundred tests."""
    deadline = time.monotonic() + limit_s
    spins = 0
    while not kind.Testall(requests):
        spins += 1
        if spins % 256 == 0 and time.monotonic() > deadline:
            from .process_group import get_rank
            raise DistBackendError(f"rank {get_rank()} timed out after {limit_s:g} s waiting "
                                   f"for a collective: a peer did not reach it (has one "
                                   f"failed, or do the ranks run different collectives?)")


class _WorkFuture(Future):
    """The Future of a Work. Nothing runs in the background to complete it: ``done()``
    polls the work and ``wait()`` waits for it, here or through a chained future."""

    def __init__(self, work: Work) -> None:
        super().__init__()
        self._root = self
        self._work = work

    def _settle(self, block: bool) -> None:
        root = self._root
        if Future.done(root):
            return
        try:
            finished = root._work.wait() if block else root._work.is_completed()
        except Exception as e:  # noqa: BLE001 - delivered through the future
            root.set_exception(e)
            return
        if finished and not Future.done(root):
            root.set_result(root._work._result)

    def done(self) -> bool:
        self._settle(False)
        return super().done()

    def wait(self) -> Any:
        self._settle(True)
        return super().wait()

    def value(self) -> Any:
        self._settle(False)
        return super().value()

    def then(self, callback: Callable[[Future], Any]) -> Future:
        child = super().then(callback)
        # The chained future is completed by this one's callbacks; make it drive the same
        # work when it is waited on.
        child.__class__ = _WorkFuture
        child._root = self._root  # type: ignore[attr-defined]
        return child


class _StreamWork(Work):
    """An NCCL call queued on a CUDA stream: ``wait()`` makes the current stream wait for it
    (the host does not block), ``is_completed()`` asks its event."""

    def __init__(self, event: Any, result: list[Tensor] | None = None) -> None:
        super().__init__([], lambda: None, result)
        self._event = event

    def wait(self, timeout: Any = None) -> bool:
        from gputensor import cuda
        cuda.current_stream().wait_event(self._event)
        return True

    def is_completed(self) -> bool:
        return bool(self._event.query())

    def synchronize(self) -> None:
        self._event.synchronize()

    def get_future(self) -> Future:
        """Done at once: work queued after a wait on the current stream sees the result."""
        self.wait()
        fut: Future = Future()
        fut.set_result(self._result)
        return fut


def _queued(event: Any, async_op: bool, result: list[Tensor] | None = None) -> Work | None:
    return _StreamWork(event, result) if async_op else None


def _run(pg: ProcessGroup, requests: list[Any], finish: Callable[[], None], async_op: bool,
         result: list[Tensor] | None = None) -> Work | None:
    work = Work(requests, finish, result, pg.timeout_s())
    if async_op:
        return work
    work.wait()
    return None


def _finish_all(*steps: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        for step in steps:
            step()
    return run


def _peer(pg: ProcessGroup, global_rank: int | None, group_rank: int | None, what: str,
          default: int | None = None) -> int:
    """A peer's rank inside ``pg`` from PyTorch's pair of (global rank, group rank) args."""
    if global_rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {what} and group_{what}")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"group_{what} {group_rank} is out of range for a group of size "
                             f"{pg.size()}")
        return int(group_rank)
    if global_rank is None:
        if default is None:
            raise ValueError(f"Must specify either {what} or group_{what}")
        return default
    return pg.group_rank(global_rank, what)


def _same_shapes(ts: Sequence[Tensor], like: Tensor, fn: str) -> None:
    for t in ts:
        if tuple(t.shape) != tuple(like.shape) or t.dtype is not like.dtype:
            raise ValueError(f"{fn}: every tensor must have shape {list(like.shape)} and dtype "
                             f"{like.dtype}, got {list(t.shape)} {t.dtype}")


# -- reductions ------------------------------------------------------------------------------
def all_reduce(tensor: Tensor, op: Any = ReduceOp.SUM, group: Any = None,  # noqa: A002
               async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across the group in place: every rank gets the result."""
    pg = resolve(group)
    check_collective(pg, f"all_reduce {ReduceOp.name(op)}", [tensor])
    nccl = pg.nccl_for(tensor)
    if nccl is not None:
        return _queued(nccl.all_reduce(tensor, op), async_op, [tensor])
    buf = _mpi.Buffer(tensor, "all_reduce")
    mop = pg.engine.reduction(op, tensor.dtype, "all_reduce")
    req = pg.comm.Iallreduce(pg.engine.IN_PLACE, buf.array, mop)
    return _run(pg, [req], _finish_all(_mpi.averaging(op, buf, pg.size()), buf.finish), async_op,
                [tensor])


def reduce(tensor: Tensor, dst: int | None = None, op: Any = ReduceOp.SUM,
           group: Any = None, async_op: bool = False,  # noqa: A002
           group_dst: int | None = None) -> Work | None:
    """Reduce into ``tensor`` on rank ``dst`` (other ranks' tensors are left as they are)."""
    pg = resolve(group)
    root = _peer(pg, dst, group_dst, "dst")
    check_collective(pg, f"reduce {ReduceOp.name(op)} to {root}", [tensor])
    nccl = pg.nccl_for(tensor)
    if nccl is not None:
        return _queued(nccl.reduce(tensor, op, root), async_op, [tensor])
    buf = _mpi.Buffer(tensor, "reduce", writes=pg.rank() == root)
    mop = pg.engine.reduction(op, tensor.dtype, "reduce")
    if pg.rank() == root:
        req = pg.comm.Ireduce(pg.engine.IN_PLACE, buf.array, mop, root)
        finish = _finish_all(_mpi.averaging(op, buf, pg.size()), buf.finish)
    else:
        req = pg.comm.Ireduce(buf.array, None, mop, root)
        finish = _finish_all()
    return _run(pg, [req], finish, async_op, [tensor])


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: Any = ReduceOp.SUM,  # noqa: A002
                          group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``input`` (``group size`` equal chunks along dim 0) and give rank i chunk i."""
    pg = resolve(group)
    n = pg.size()
    if input.numel() != output.numel() * n or input.dtype is not output.dtype:
        raise ValueError(f"reduce_scatter_tensor: input ({list(input.shape)}, {input.dtype}) "
                         f"must hold world size ({n}) x output ({list(output.shape)}, "
                         f"{output.dtype}) elements of the output's dtype")
    check_collective(pg, f"reduce_scatter {ReduceOp.name(op)}", [output, input])
    nccl = pg.nccl_for(input)
    if nccl is not None:
        return _queued(nccl.reduce_scatter(output, input, op), async_op, [output])
    src = _mpi.Buffer(input, "reduce_scatter_tensor", writes=False)
    out = _mpi.Buffer(output, "reduce_scatter_tensor")
    mop = pg.engine.reduction(op, output.dtype, "reduce_scatter_tensor")
    req = pg.comm.Ireduce_scatter_block(src.array, out.array, mop)
    return _run(pg, [req], _finish_all(_mpi.averaging(op, out, n), out.finish), async_op, [output])


def reduce_scatter_single(output: Tensor, input: Tensor, op: Any = ReduceOp.SUM,  # noqa: A002
                          group: Any = None, async_op: bool = False) -> Work | None:
    """PyTorch 2.13's name for ``reduce_scatter_tensor``: ``input`` holds group size times
    ``output`` (concatenated or stacked along dim 0); rank i gets the reduced chunk i."""
    return reduce_scatter_tensor(output, input, op, group, async_op)


def reduce_scatter(output: Tensor, input_list: Sequence[Tensor], op: Any = ReduceOp.SUM,
                   group: Any = None, async_op: bool = False) -> Work | None:  # noqa: A002
    """Reduce the i-th tensors of every rank's ``input_list`` into rank i's ``output``."""
    import gputensor as gt
    pg = resolve(group)
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list must have world size ({pg.size()}) "
                         f"tensors, got {len(input_list)}")
    _same_shapes(input_list, output, "reduce_scatter")
    return reduce_scatter_tensor(output, gt.cat([t.reshape(-1) for t in input_list]), op,
                                 group, async_op)


# -- broadcast, gathers, scatters ---------------------------------------------------------------
def broadcast(tensor: Tensor, src: int | None = None, group: Any = None,  # noqa: A002
              async_op: bool = False, group_src: int | None = None) -> Work | None:
    """Copy ``tensor`` from rank ``src`` into every rank's ``tensor``."""
    pg = resolve(group)
    root = _peer(pg, src, group_src, "src")
    check_collective(pg, f"broadcast from {root}", [tensor])
    nccl = pg.nccl_for(tensor)
    if nccl is not None:
        return _queued(nccl.broadcast(tensor, root), async_op, [tensor])
    buf = _mpi.Buffer(tensor, "broadcast", writes=pg.rank() != root)
    req = pg.comm.Ibcast(buf.array, root)
    return _run(pg, [req], buf.finish, async_op, [tensor])


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Work | None:  # noqa: A002
    """Every rank's ``input_tensor``, concatenated along dim 0 (or stacked) in rank order."""
    pg = resolve(group)
    n = pg.size()
    if output_tensor.numel() != input_tensor.numel() * n or \
            output_tensor.dtype is not input_tensor.dtype:
        raise ValueError(f"all_gather_into_tensor: output ({list(output_tensor.shape)}, "
                         f"{output_tensor.dtype}) must hold world size ({n}) x input "
                         f"({list(input_tensor.shape)}, {input_tensor.dtype}) elements")
    check_collective(pg, "all_gather_into_tensor", [output_tensor, input_tensor])
    nccl = pg.nccl_for(input_tensor)
    if nccl is not None:
        return _queued(nccl.all_gather(output_tensor, input_tensor), async_op, [output_tensor])
    src = _mpi.Buffer(input_tensor, "all_gather_into_tensor", writes=False)
    out = _mpi.Buffer(output_tensor, "all_gather_into_tensor")
    req = pg.comm.Iallgather(src.array, out.array)
    return _run(pg, [req], out.finish, async_op, [output_tensor])


def all_gather_single(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                      async_op: bool = False) -> Work | None:  # noqa: A002
    """PyTorch 2.13's name for ``all_gather_into_tensor``: every rank's ``input_tensor``,
    concatenated or stacked along dim 0 of ``output_tensor`` in rank order."""
    return all_gather_into_tensor(output_tensor, input_tensor, group, async_op)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None,  # noqa: A002
               async_op: bool = False) -> Work | None:
    """``tensor_list[i]`` := rank i's ``tensor``."""
    import gputensor as gt
    pg = resolve(group)
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list must have world size ({pg.size()}) "
                         f"tensors, got {len(tensor_list)}")
    _same_shapes(tensor_list, tensor, "all_gather")
    flat = gt.empty(pg.size() * tensor.numel(), dtype=tensor.dtype, device=tensor.device)
    work = all_gather_into_tensor(flat, tensor.contiguous(), group, True)

    def scatter_back() -> None:
        with gt.no_grad():
            for i, t in enumerate(tensor_list):
                t.copy_(flat[i * tensor.numel():(i + 1) * tensor.numel()].reshape(t.shape))
    if isinstance(work, _StreamWork):  # queued: the copies queue behind it on the stream
        scatter_back()
        return work if async_op else None
    return _run(pg, work._requests, _finish_all(work._finish, scatter_back), async_op,
                list(tensor_list))


def gather(tensor: Tensor, gather_list: list[Tensor] | None = None, dst: int | None = None,
           group: Any = None, async_op: bool = False,  # noqa: A002
           group_dst: int | None = None) -> Work | None:
    """``gather_list[i]`` on rank ``dst`` := rank i's ``tensor``."""
    import gputensor as gt
    pg = resolve(group)
    root = _peer(pg, dst, group_dst, "dst", default=0)
    src = _mpi.Buffer(tensor.contiguous(), "gather", writes=False)
    if pg.rank() != root:
        if gather_list:
            raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                             "ranks.")
        return _run(pg, [pg.comm.Igather(src.array, None, root)], lambda: None, async_op)
    if gather_list is None or len(gather_list) != pg.size():
        raise ValueError(f"gather: gather_list on the destination rank must have world size "
                         f"({pg.size()}) tensors")
    _same_shapes(gather_list, tensor, "gather")
    flat = np.empty(pg.size() * src.array.size, src.array.dtype)
    req = pg.comm.Igather(src.array, flat, root)

    def scatter_back() -> None:
        n = src.array.size
        with gt.no_grad():
            for i, t in enumerate(gather_list):
                part = gt.from_numpy(flat[i * n:(i + 1) * n].reshape(tuple(t.shape)))
                t.copy_(part)
    return _run(pg, [req], scatter_back, async_op)


def scatter(tensor: Tensor, scatter_list: list[Tensor] | None = None, src: int | None = None,
            group: Any = None, async_op: bool = False,  # noqa: A002
            group_src: int | None = None) -> Work | None:
    """Rank i's ``tensor`` := ``scatter_list[i]`` of rank ``src``."""
    import gputensor as gt
    pg = resolve(group)
    root = _peer(pg, src, group_src, "src", default=0)
    out = _mpi.Buffer(tensor, "scatter")
    if pg.rank() != root:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source "
                             "ranks.")
        return _run(pg, [pg.comm.Iscatter(None, out.array, root)], out.finish, async_op)
    if scatter_list is None or len(scatter_list) != pg.size():
        raise ValueError(f"scatter: scatter_list on the source rank must have world size "
                         f"({pg.size()}) tensors")
    _same_shapes(scatter_list, tensor, "scatter")
    flat = _mpi.Buffer(gt.cat([t.reshape(-1) for t in scatter_list]), "scatter", writes=False)
    return _run(pg, [pg.comm.Iscatter(flat.array, out.array, root)], out.finish, async_op)


def all_to_all_single(output: Tensor, input: Tensor,  # noqa: A002
                      output_split_sizes: Sequence[int] | None = None,
                      input_split_sizes: Sequence[int] | None = None, group: Any = None,
                      async_op: bool = False) -> Work | None:
    """Split ``input`` along dim 0 (equally, or by ``input_split_sizes``), send piece i to
    rank i, and concatenate what arrives into ``output``."""
    pg = resolve(group)
    n = pg.size()
    row_in = input[0].numel() if input.dim() and input.shape[0] else 0
    row_out = output[0].numel() if output.dim() and output.shape[0] else 0
    in_rows = _splits(input, input_split_sizes, n, "input")
    out_rows = _splits(output, output_split_sizes, n, "output")
    src = _mpi.Buffer(input, "all_to_all_single", writes=False)
    out = _mpi.Buffer(output, "all_to_all_single")
    counts_in = [r * row_in for r in in_rows]
    counts_out = [r * row_out for r in out_rows]
    req = pg.comm.Ialltoallv([src.array, (counts_in, _offsets(counts_in))],
                             [out.array, (counts_out, _offsets(counts_out))])
    return _run(pg, [req], out.finish, async_op, [output])


def _splits(t: Tensor, sizes: Sequence[int] | None, n: int, what: str) -> list[int]:
    rows = t.shape[0] if t.dim() else 1
    if not sizes:
        if rows % n:
            raise ValueError(f"all_to_all_single: {what} dim 0 ({rows}) must divide evenly by "
                             f"the world size ({n}) when no split sizes are given")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or sum(sizes) != rows:
        raise ValueError(f"all_to_all_single: {what}_split_sizes {sizes} must have world size "
                         f"({n}) entries summing to {what} dim 0 ({rows})")
    return sizes


def _offsets(counts: list[int]) -> list[int]:
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []


def all_to_all(output_tensor_list: list[Tensor], input_tensor_list: list[Tensor],
               group: Any = None, async_op: bool = False) -> Work | None:  # noqa: A002
    """Rank r's ``output_tensor_list[i]`` := rank i's ``input_tensor_list[r]``."""
    import gputensor as gt
    pg = resolve(group)
    n = pg.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: both lists must have world size ({n}) tensors")
    flat_in = gt.cat([t.reshape(-1) for t in input_tensor_list])
    flat_out = gt.empty(sum(t.numel() for t in output_tensor_list),
                        dtype=output_tensor_list[0].dtype, device=output_tensor_list[0].device)
    work = all_to_all_single(flat_out, flat_in, [t.numel() for t in output_tensor_list],
                             [t.numel() for t in input_tensor_list], group, True)

    def scatter_back() -> None:
        start = 0
        with gt.no_grad():
            for t in output_tensor_list:
                t.copy_(flat_out[start:start + t.numel()].reshape(t.shape))
                start += t.numel()
    return _run(pg, work._requests, _finish_all(work._finish, scatter_back), async_op)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None,  # noqa: A002
            timeout: Any = None) -> Work | None:
    pg = resolve(group)
    check_collective(pg, "barrier", [])
    return _run(pg, [pg.comm.Ibarrier()], lambda: None, async_op)


def monitored_barrier(group: Any = None, timeout: Any = None,  # noqa: A002
                      wait_all_ranks: bool = False) -> None:
    """A barrier that fails on rank 0, naming the ranks that did not arrive within
    ``timeout`` (instead of hanging)."""
    from .process_group import default_pg_timeout
    pg = resolve(group)
    limit = (timeout or default_pg_timeout).total_seconds()
    tag = 0x6D62  # a tag of its own, apart from user point-to-point traffic
    if pg.rank() != 0:
        pg.comm.send(None, 0, tag)
        pg.comm.recv(source=0, tag=tag)
        return
    pending = {r: pg.comm.irecv(source=r, tag=tag) for r in range(1, pg.size())}
    deadline = time.monotonic() + limit
    while pending and time.monotonic() < deadline:
        for r in [r for r, req in pending.items() if req.Test()]:
            del pending[r]
        time.sleep(0.001)
    if pending:
        missing = sorted(pg.ranks[r] for r in pending)
        if wait_all_ranks:
            raise RuntimeError(f"Ranks {', '.join(map(str, missing))} failed to pass "
                               f"monitoredBarrier in {limit:g} s")
        raise RuntimeError(f"Rank {missing[0]} failed to pass monitoredBarrier in {limit:g} s")
    for r in range(1, pg.size()):
        pg.comm.send(None, r, tag)


# -- point to point ----------------------------------------------------------------------------
def isend(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0,  # noqa: A002
          group_dst: int | None = None) -> Work:
    pg = resolve(group)
    peer = _peer(pg, dst, group_dst, "dst")
    nccl = pg.nccl_for(tensor)
    if nccl is not None:
        return _StreamWork(nccl.send(tensor, peer))
    buf = _mpi.Buffer(tensor, "isend", writes=False)
    return Work([pg.comm.Isend(buf.array, peer, tag)], lambda: None, None, pg.timeout_s())


def irecv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0,  # noqa: A002
          group_src: int | None = None) -> Work:
    pg = resolve(group)
    peer = pg.engine.ANY_SOURCE if src is None and group_src is None else \
        _peer(pg, src, group_src, "src")
    nccl = pg.nccl_for(tensor)
    if nccl is not None:
        if peer == pg.engine.ANY_SOURCE:
            raise RuntimeError("irecv from any source is not supported by NCCL: name src")
        return _StreamWork(nccl.recv(tensor, peer))
    buf = _mpi.Buffer(tensor, "irecv")
    return Work([pg.comm.Irecv(buf.array, peer, tag)], buf.finish, None, pg.timeout_s())


def send(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0,  # noqa: A002
         group_dst: int | None = None) -> None:
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0,  # noqa: A002
         group_src: int | None = None) -> int:
    """Receive into ``tensor``; returns the sender's global rank."""
    pg = resolve(group)
    peer = pg.engine.ANY_SOURCE if src is None and group_src is None else \
        _peer(pg, src, group_src, "src")
    if pg.nccl_for(tensor) is not None:
        irecv(tensor, src, group, tag, group_src).wait()
        return pg.ranks[peer]
    buf = _mpi.Buffer(tensor, "recv")
    status = pg.engine.Status()
    pg.comm.Recv(buf.array, peer, tag, status)
    buf.finish()
    return pg.ranks[status.Get_source()]


class P2POp:
    """One send or receive for ``batch_isend_irecv``: ``P2POp(isend, tensor, peer)``."""

    def __init__(self, op: Callable, tensor: Tensor, peer: int | None = None,
                 group: Any = None, tag: int = 0, group_peer: int | None = None) -> None:
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group
        self.tag, self.group_peer = tag, group_peer


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    return [p.op(p.tensor, p.peer, p.group, p.tag, p.group_peer) for p in p2p_op_list]


# -- Python objects (pickled) -------------------------------------------------------------------
def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:  # noqa: A002
    pg = resolve(group)
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must have world size ({pg.size()}) "
                         f"entries, got {len(object_list)}")
    object_list[:] = pg.comm.allgather(obj)


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                          device: Any = None, group_src: int | None = None) -> None:  # noqa: A002
    pg = resolve(group)
    root = _peer(pg, src, group_src, "src", default=0)
    object_list[:] = pg.comm.bcast(list(object_list) if pg.rank() == root else None, root)


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int | None = None,
                  group: Any = None, group_dst: int | None = None) -> None:  # noqa: A002
    pg = resolve(group)
    root = _peer(pg, dst, group_dst, "dst", default=0)
    got = pg.comm.gather(obj, root)
    if pg.rank() == root:
        if object_gather_list is None or len(object_gather_list) != pg.size():
            raise ValueError(f"gather_object: object_gather_list on the destination must have "
                             f"world size ({pg.size()}) entries")
        object_gather_list[:] = got


def scatter_object_list(scatter_object_output_list: list[Any],
                        scatter_object_input_list: list[Any] | None = None,
                        src: int | None = None, group: Any = None,  # noqa: A002
                        group_src: int | None = None) -> None:
    pg = resolve(group)
    root = _peer(pg, src, group_src, "src", default=0)
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at "
                         "least 1.")
    scatter_object_output_list[0] = pg.comm.scatter(
        list(scatter_object_input_list) if pg.rank() == root else None, root)


def send_object_list(object_list: list[Any], dst: int | None = None, group: Any = None,
                     device: Any = None, group_dst: int | None = None,  # noqa: A002
                     use_batch: bool = False) -> None:
    pg = resolve(group)
    pg.comm.send(pickle.dumps(list(object_list)), _peer(pg, dst, group_dst, "dst"))


def recv_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                     device: Any = None, group_src: int | None = None,  # noqa: A002
                     use_batch: bool = False) -> int:
    pg = resolve(group)
    peer = pg.engine.ANY_SOURCE if src is None and group_src is None else \
        _peer(pg, src, group_src, "src")
    status = pg.engine.Status()
    data = pickle.loads(pg.comm.recv(source=peer, status=status))
    object_list[:len(data)] = data
    return pg.ranks[status.Get_source()]
