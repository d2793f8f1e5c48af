"""The NCCL engine for CUDA tensors: CuPy's ``cupy.cuda.nccl`` (the NCCL wheel's library).

One communicator per process group, bootstrapped over the group's MPI communicator (rank 0's
``ncclGetUniqueId`` is broadcast, then every rank calls ``ncclCommInitRank`` with its device
current). Calls take the tensors' device pointers and are queued on the current stream, as
PyTorch's NCCL backend does; ``async_op`` returns a Work whose ``wait()`` makes the current
stream wait for an event recorded after the call (the host does not block).

NCCL has no complex or bool types: complex tensors reduce as pairs of reals (SUM/AVG only),
bool tensors as uint8 (SUM/MAX are logical or, PRODUCT/MIN logical and).
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from .reduce_op import ReduceOp


def module() -> Any:
    from cupy.cuda import nccl
    return nccl


def available() -> bool:
    """NCCL through CuPy, with a real GPU runtime (the emulator has no NCCL)."""
    try:
        nccl = module()
    except ImportError:
        return False
    if not getattr(nccl, "available", False):
        return False
    from gputensor import cuda
    if not cuda.is_available():
        return False
    from gputensor.kernels.cuda import device as _kdevice
    return not _kdevice.runtime_of(None).is_emulated


def _types() -> dict[D.dtype, int]:
    nccl = module()
    types = {D.int8: nccl.NCCL_INT8, D.uint8: nccl.NCCL_UINT8, D.bool: nccl.NCCL_UINT8,
             D.int32: nccl.NCCL_INT32, D.int64: nccl.NCCL_INT64, D.float16: nccl.NCCL_FLOAT16,
             D.float32: nccl.NCCL_FLOAT32, D.float64: nccl.NCCL_FLOAT64,
             D.complex64: nccl.NCCL_FLOAT32, D.complex128: nccl.NCCL_FLOAT64}
    if hasattr(nccl, "NCCL_BFLOAT16"):
        types[D.bfloat16] = nccl.NCCL_BFLOAT16
    return types


class Communicator:
    """An NCCL communicator over the ranks of an MPI communicator, on one CUDA device."""

    def __init__(self, mpi_comm: Any, device_index: int) -> None:
        import cupy
        nccl = module()
        uid = nccl.get_unique_id() if mpi_comm.Get_rank() == 0 else None
        uid = mpi_comm.bcast(uid, root=0)
        self.device_index = device_index
        with cupy.cuda.Device(device_index):
            self.comm = nccl.NcclCommunicator(mpi_comm.Get_size(), uid, mpi_comm.Get_rank())
        self.size = mpi_comm.Get_size()

    # -- argument checks -------------------------------------------------------------------------
    def _count_type(self, t: Tensor, fn: str) -> tuple[int, int]:
        if not t.is_contiguous():
            raise ValueError(f"{fn}: Tensors must be contiguous")
        if t.device.index != self.device_index:
            raise ValueError(f"{fn}: the tensor is on {t.device} but this process group's NCCL "
                             f"communicator is on cuda:{self.device_index}")
        types = _types()
        if t.dtype not in types:
            raise RuntimeError(f"{fn}: NCCL has no type for {t.dtype}")
        count = t.numel() * (2 if t.dtype.is_complex else 1)
        return count, types[t.dtype]

    def _op(self, op: Any, dt: D.dtype, fn: str) -> tuple[int, bool]:
        """(NCCL op, whether to divide by the group size afterwards)."""
        nccl = module()
        code = ReduceOp.code(op)
        if dt.is_complex and code not in (ReduceOp.SUM, ReduceOp.AVG):
            raise ValueError(f"{fn} does not support {code.name} on complex tensors")
        if code in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR, ReduceOp.PREMUL_SUM):
            raise ValueError(f"Cannot use ReduceOp.{code.name} with NCCL")
        if dt is D.bool:
            return {ReduceOp.SUM: nccl.NCCL_MAX, ReduceOp.AVG: nccl.NCCL_MAX,
                    ReduceOp.MAX: nccl.NCCL_MAX, ReduceOp.MIN: nccl.NCCL_MIN,
                    ReduceOp.PRODUCT: nccl.NCCL_MIN}[code], False
        if code == ReduceOp.AVG:
            if not (dt.is_floating_point or dt.is_complex):
                raise ValueError(f"{fn}: ReduceOp.AVG needs floating point tensors, got {dt}")
            return nccl.NCCL_SUM, True
        return {ReduceOp.SUM: nccl.NCCL_SUM, ReduceOp.PRODUCT: nccl.NCCL_PROD,
                ReduceOp.MAX: nccl.NCCL_MAX, ReduceOp.MIN: nccl.NCCL_MIN}[code], False

    @staticmethod
    def _stream(t: Tensor) -> int:
        from gputensor import cuda
        return cuda.current_stream(t.device.index).cuda_stream

    def _after(self, t: Tensor, out: Tensor | None = None, divide: bool = False) -> Any:
        """Queue the AVG division, then record an event the Work waits on."""
        from gputensor import cuda
        if divide:
            target = t if out is None else out
            target.div_(self.size)
        event = cuda.Event()
        event.record(cuda.current_stream(t.device.index))
        return event

    # -- collectives -----------------------------------------------------------------------------
    def all_reduce(self, t: Tensor, op: Any) -> Any:
        count, kind = self._count_type(t, "all_reduce")
        nop, divide = self._op(op, t.dtype, "all_reduce")
        self.comm.allReduce(t.data_ptr(), t.data_ptr(), count, kind, nop, self._stream(t))
        return self._after(t, divide=divide)

    def reduce(self, t: Tensor, op: Any, root: int) -> Any:
        count, kind = self._count_type(t, "reduce")
        nop, divide = self._op(op, t.dtype, "reduce")
        self.comm.reduce(t.data_ptr(), t.data_ptr(), count, kind, nop, root, self._stream(t))
        return self._after(t, divide=divide and self.comm.rank_id() == root)

    def broadcast(self, t: Tensor, root: int) -> Any:
        count, kind = self._count_type(t, "broadcast")
        self.comm.broadcast(t.data_ptr(), t.data_ptr(), count, kind, root, self._stream(t))
        return self._after(t)

    def all_gather(self, out: Tensor, t: Tensor) -> Any:
        count, kind = self._count_type(t, "all_gather_into_tensor")
        self._count_type(out, "all_gather_into_tensor")
        self.comm.allGather(t.data_ptr(), out.data_ptr(), count, kind, self._stream(t))
        return self._after(t)

    def reduce_scatter(self, out: Tensor, t: Tensor, op: Any) -> Any:
        count, kind = self._count_type(out, "reduce_scatter_tensor")
        self._count_type(t, "reduce_scatter_tensor")
        nop, divide = self._op(op, t.dtype, "reduce_scatter_tensor")
        self.comm.reduceScatter(t.data_ptr(), out.data_ptr(), count, kind, nop,
                                self._stream(t))
        return self._after(t, out, divide=divide)

    def send(self, t: Tensor, peer: int) -> Any:
        count, kind = self._count_type(t, "send")
        self.comm.send(t.data_ptr(), count, kind, peer, self._stream(t))
        return self._after(t)

    def recv(self, t: Tensor, peer: int) -> Any:
        count, kind = self._count_type(t, "recv")
        self.comm.recv(t.data_ptr(), count, kind, peer, self._stream(t))
        return self._after(t)

    def destroy(self) -> None:
        self.comm.destroy()


__all__ = ["Communicator", "available"]
