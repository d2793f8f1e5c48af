"""The NCCL engine's calls against a stand-in of CuPy's ``cupy.cuda.nccl`` (signatures as in
cupy_backends/cuda/libs/nccl.pyx: allReduce(sendbuf, recvbuf, count, datatype, op, stream),
...), on a one-process group over MPI's COMM_SELF: the device pointers, counts, types and
reductions gt.distributed passes, AVG as a sum then a division, complex as pairs of reals,
bool as uint8. (A real GPU runs the same calls in .ci/gpu_session.sh.)"""

from __future__ import annotations

import sys
import types

import pytest

import gputensor as gt
import gputensor.distributed as dist
from gputensor.distributed import _nccl
from gputensor.distributed.process_group import ProcessGroup

pytestmark = pytest.mark.skipif(not gt.cuda.is_available(),
                                reason="needs a CUDA runtime (the emulator in CI)")


def _standin(log: list) -> types.SimpleNamespace:
    consts = dict(NCCL_INT8=0, NCCL_UINT8=1, NCCL_INT32=2, NCCL_UINT32=3, NCCL_INT64=4,
                  NCCL_UINT64=5, NCCL_FLOAT16=6, NCCL_FLOAT32=7, NCCL_FLOAT64=8,
                  NCCL_BFLOAT16=9, NCCL_SUM=0, NCCL_PROD=1, NCCL_MAX=2, NCCL_MIN=3)

    class NcclCommunicator:
        def __init__(self, ndev: int, commId: tuple, rank: int) -> None:  # noqa: N803
            assert len(commId) == 128
            log.append(("init", ndev, rank))

        def rank_id(self) -> int:
            return 0

        def __getattr__(self, name: str):
            def call(*args):  # a one-rank group: every collective leaves the data as it is
                log.append((name, *args))
            return call

    return types.SimpleNamespace(available=True, get_unique_id=lambda: tuple(range(128)),
                                 NcclCommunicator=NcclCommunicator, **consts)


@pytest.fixture
def group(monkeypatch):
    from mpi4py import MPI
    log: list = []
    nccl = _standin(log)
    cupy = sys.modules.get("cupy") or types.SimpleNamespace()
    cuda = getattr(cupy, "cuda", None) or types.SimpleNamespace()
    monkeypatch.setattr(cuda, "nccl", nccl, raising=False)

    class Device:  # records which device the communicator is made on
        def __init__(self, index: int) -> None:
            log.append(("device", index))

        def __enter__(self) -> None:
            pass

        def __exit__(self, *a: object) -> None:
            pass
    monkeypatch.setattr(cuda, "Device", Device, raising=False)
    monkeypatch.setattr(cupy, "cuda", cuda, raising=False)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    pg = ProcessGroup(MPI.COMM_SELF.Dup(), [0], "nccl", nccl=True)
    yield pg, log
    pg.comm.Free()


def _device() -> str:
    return f"cuda:{gt.cuda.device_count() - 1}"


def test_collectives_pass_device_pointers_counts_and_types(group) -> None:
    pg, log = group
    dev = _device()
    x = gt.arange(6.0, device=dev)
    with gt.cuda.device(x.device):
        stream = gt.cuda.current_stream().cuda_stream
        dist.all_reduce(x, group=pg)
        # a one-rank communicator, made with x's device current
        assert log[:2] == [("device", x.device.index), ("init", 1, 0)]
        assert log[-1] == ("allReduce", x.data_ptr(), x.data_ptr(), 6, 7, 0, stream)
        z = gt.ones(3, dtype=gt.complex64, device=dev)
        dist.all_reduce(z, dist.ReduceOp.SUM, group=pg)
        assert log[-1][3:6] == (6, 7, 0)  # complex: 2 x 3 float32s
        b = gt.tensor([True, False], device=dev)
        dist.all_reduce(b, dist.ReduceOp.SUM, group=pg)
        assert log[-1][3:6] == (2, 1, 2)  # bool: uint8 with MAX (logical or)
        h = gt.ones(4, dtype=gt.float16, device=dev)
        dist.broadcast(h, src=0, group=pg)
        assert log[-1] == ("broadcast", h.data_ptr(), h.data_ptr(), 4, 6, 0, stream)
        out = gt.empty(6, device=dev)
        dist.all_gather_into_tensor(out, x, group=pg)
        assert log[-1] == ("allGather", x.data_ptr(), out.data_ptr(), 6, 7, stream)
        r = gt.empty(6, device=dev)
        dist.reduce_scatter_tensor(r, x, dist.ReduceOp.MAX, group=pg)
        assert log[-1] == ("reduceScatter", x.data_ptr(), r.data_ptr(), 6, 7, 2, stream)
        dist.reduce(x, dst=0, op=dist.ReduceOp.PRODUCT, group=pg)
        assert log[-1] == ("reduce", x.data_ptr(), x.data_ptr(), 6, 7, 1, 0, stream)
        assert sum(1 for e in log if e[0] == "init") == 1  # one communicator per group


def test_avg_is_a_sum_then_a_division_and_work_waits_on_the_stream(group) -> None:
    pg, log = group
    x = gt.full((4,), 6.0, device=_device())
    with gt.cuda.device(x.device):
        work = dist.all_reduce(x, dist.ReduceOp.AVG, group=pg, async_op=True)
        assert log[-1][5] == 0  # NCCL_SUM
        assert work.wait() and work.is_completed()
        assert x.tolist() == [6.0] * 4  # one rank: the average of one value


def test_nccl_refusals(group) -> None:
    pg, _ = group
    dev = _device()
    with gt.cuda.device(gt.device(dev)):
        with pytest.raises(ValueError, match="does not support MAX on complex tensors"):
            dist.all_reduce(gt.ones(2, dtype=gt.complex64, device=dev), dist.ReduceOp.MAX,
                            group=pg)
        with pytest.raises(ValueError, match="Cannot use ReduceOp.BXOR with NCCL"):
            dist.all_reduce(gt.ones(2, dtype=gt.int32, device=dev), dist.ReduceOp.BXOR,
                            group=pg)
        with pytest.raises(ValueError, match="Tensors must be contiguous"):
            dist.all_reduce(gt.ones(2, 2, device=dev).t(), group=pg)
        with pytest.raises(RuntimeError, match="irecv from any source"):
            dist.irecv(gt.ones(2, device=dev), group=pg)


def test_nccl_is_unavailable_on_the_emulator() -> None:
    assert not _nccl.available() and not dist.is_nccl_available()


def test_futures_and_coalesced_calls_queue_on_the_stream(group) -> None:
    pg, log = group
    dev = _device()
    x, y = gt.full((3,), 2.0, device=dev), gt.full((2, 2), 5.0, device=dev)
    with gt.cuda.device(x.device):
        fut = dist.all_reduce(x, group=pg, async_op=True).get_future()
        assert fut.done() and fut.wait() == [x]
        calls = len(log)
        fut = dist.all_reduce_coalesced([x, y], group=pg, async_op=True)
        assert len(log) == calls + 1 and log[-1][0] == "allReduce" and log[-1][3] == 7
        assert [t.tolist() for t in fut.wait()] == [[2.0] * 3, [[5.0] * 2] * 2]
