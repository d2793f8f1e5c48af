"""The MPI engine under gt.distributed's CPU backend (mpi4py): buffers, datatypes, reductions.

A tensor travels as its NumPy view (contiguous CPU tensors: no copy). 16-bit floats have no
MPI datatype, so they are staged through float32 (exact for min/max, one rounding for sums);
CUDA tensors are staged through host memory (the MPI from PyPI is not CUDA-aware; NCCL is the
CUDA engine).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._layout import strided
from gputensor._tensor import Tensor

from .reduce_op import ReduceOp

_STAGED_FLOATS = (D.float16, D.bfloat16)


def mpi() -> Any:
    """The mpi4py MPI module (initialising MPI on first use)."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("gt.distributed's CPU backend needs mpi4py and an MPI library: "
                           "pip install 'gputensor[distributed]' (mpi4py and mpich)") from e
    return MPI


# The engine interface collectives.py reads from a group's engine (as _gloo.py's):
# reduction(op, dtype, fn), IN_PLACE, ANY_SOURCE, UNDEFINED, Status.
def __getattr__(name: str) -> Any:
    if name in ("IN_PLACE", "ANY_SOURCE", "UNDEFINED", "Status"):
        return getattr(mpi(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


class Buffer:
    """A tensor as an MPI buffer: its own memory when that is possible, else a staged host
    copy that ``finish`` writes back."""

    def __init__(self, t: Tensor, fn: str, writes: bool = True) -> None:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}(): expected a Tensor, got {type(t).__name__}")
        if not t.is_contiguous():
            raise ValueError(f"{fn}: Tensors must be contiguous (got a tensor of shape "
                             f"{list(t.shape)} with strides {t.stride()})")
        if t.layout is not strided:
            raise RuntimeError(f"{fn}: sparse tensors are not supported by the MPI backend")
        self.tensor, self.writes = t, writes
        self.staged = t.is_cuda or t.dtype in _STAGED_FLOATS
        if not self.staged:
            self.array = t._host.reshape(-1)
        else:
            host = t.detach().cpu()
            if t.dtype in _STAGED_FLOATS:
                host = host.float()
            self.array = np.ascontiguousarray(host._host.reshape(-1))

    def finish(self) -> None:
        """Write a staged result back into the tensor."""
        if self.staged and self.writes:
            import gputensor as gt
            result = gt.from_numpy(self.array.reshape(tuple(self.tensor.shape)))
            with gt.no_grad():
                self.tensor.copy_(result)


def check_op(op: Any, dt: D.dtype, fn: str, backend: str = "MPI") -> ReduceOp.RedOpType:
    """``op``'s code, after refusing what the CPU backends cannot do with ``dt``."""
    code = ReduceOp.code(op)
    if dt.is_complex and code in (ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND, ReduceOp.BOR,
                                  ReduceOp.BXOR):
        raise ValueError(f"{fn} does not support {ReduceOp.name(code)} on complex tensors")
    if code in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dt.is_floating_point:
        raise RuntimeError(f"{fn}: ReduceOp.{ReduceOp.name(code)} needs integer or bool "
                           f"tensors, got {dt}")
    if code == ReduceOp.PREMUL_SUM:
        raise ValueError(f"Cannot use ReduceOp.PREMUL_SUM with the {backend} backend ({fn})")
    if code == ReduceOp.AVG and not (dt.is_floating_point or dt.is_complex):
        raise ValueError(f"{fn}: ReduceOp.AVG needs floating point or complex tensors, got "
                         f"{dt}")
    return code


def mpi_op(op: Any, dt: D.dtype, fn: str) -> Any:
    """The MPI reduction for ``op`` on ``dt`` (bool: the logical ones, as PyTorch's bool
    reductions behave)."""
    MPI = mpi()
    code = check_op(op, dt, fn)
    if dt is D.bool:
        return {ReduceOp.SUM: MPI.LOR, ReduceOp.AVG: MPI.LOR, ReduceOp.PRODUCT: MPI.LAND,
                ReduceOp.MIN: MPI.LAND, ReduceOp.MAX: MPI.LOR, ReduceOp.BAND: MPI.LAND,
                ReduceOp.BOR: MPI.LOR, ReduceOp.BXOR: MPI.LXOR}[code]
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
            ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
            ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[code]


reduction = mpi_op


def averaging(op: Any, buf: Buffer, size: int) -> Callable[[], None]:
    """The post-step of ReduceOp.AVG (a sum divided by the group size), else nothing."""
    if ReduceOp.code(op) != ReduceOp.AVG:
        return lambda: None

    def divide() -> None:
        buf.array /= size
    return divide
