"""``gt.distributed.ReduceOp``: the reductions collectives apply (PyTorch's names)."""

from __future__ import annotations

import enum
from typing import Any


class ReduceOp:
    """``ReduceOp.SUM`` ... are ``ReduceOp.RedOpType`` values; ``ReduceOp(op)`` wraps one."""

    class RedOpType(enum.IntEnum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7
        PREMUL_SUM = 8

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM

    def __init__(self, op: Any) -> None:
        self.op = ReduceOp.code(op)

    def __eq__(self, other: object) -> bool:
        try:
            return self.op == ReduceOp.code(other)
        except TypeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.op)

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.op.name}>"

    @staticmethod
    def code(op: Any) -> ReduceOp.RedOpType:
        if isinstance(op, ReduceOp):
            return op.op
        if isinstance(op, ReduceOp.RedOpType):
            return op
        raise TypeError(f"expected a ReduceOp (e.g. ReduceOp.SUM), got {op!r}")

    @staticmethod
    def name(op: Any) -> str:
        return ReduceOp.code(op).name


# torch.distributed.reduce_op: the deprecated alias.
reduce_op = ReduceOp
