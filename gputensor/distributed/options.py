"""PyTorch's per-collective option holders (``AllreduceOptions`` ...), read by the
``ProcessGroup`` methods (``pg.allreduce(tensors, opts)``), and the small typing names of
``torch.distributed`` (``GroupName``, ``RankType``, ``BuiltinCommHookType``,
``supports_complex``).

As in PyTorch the holders are plain mutable records: ``asyncOp`` defaults to True and
``timeout`` to PyTorch's "unset" value (-1 ms: the group's own timeout applies).
"""

from __future__ import annotations

import datetime
import enum
from typing import Any, NewType

from .reduce_op import ReduceOp

# torch.distributed.GroupName / RankType: a group's name, and a rank (an int; PyTorch also
# admits a SymInt, which this build does not have).
GroupName = NewType("GroupName", str)
RankType = int

_UNSET_TIMEOUT = datetime.timedelta(milliseconds=-1)


class _Options:
    """Fields shared by every holder; subclasses add theirs in ``_fields``."""

    _fields: dict[str, Any] = {}

    def __init__(self) -> None:
        self.asyncOp: bool = True  # noqa: N815 - PyTorch's field names
        self.timeout: datetime.timedelta = _UNSET_TIMEOUT
        for name, default in self._fields.items():
            setattr(self, name, default() if callable(default) else default)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def _sum() -> ReduceOp:
    return ReduceOp(ReduceOp.SUM)


class AllreduceOptions(_Options):
    _fields = {"reduceOp": _sum}


class AllreduceCoalescedOptions(AllreduceOptions):
    pass


class ReduceOptions(_Options):
    _fields = {"reduceOp": _sum, "rootRank": 0, "rootTensor": 0}


class BroadcastOptions(_Options):
    _fields = {"rootRank": 0, "rootTensor": 0}


class GatherOptions(_Options):
    _fields = {"rootRank": 0}


class ScatterOptions(_Options):
    _fields = {"rootRank": 0}


class ReduceScatterOptions(_Options):
    _fields = {"reduceOp": _sum}


class AllToAllOptions(_Options):
    pass


class BarrierOptions(_Options):
    _fields = {"device_ids": list, "device": None}


class _IntLikeEnum(enum.Enum):
    """A pybind-style enum: ``str`` is ``Name.MEMBER``, ``int()`` gives the value, and it is
    not equal to its int (as PyTorch's C++ enums)."""

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)


class BuiltinCommHookType(_IntLikeEnum):
    """DDP's built-in communication hooks (``ddp._register_builtin_comm_hook``)."""

    ALLREDUCE = 1
    FP16_COMPRESS = 2


def supports_complex(reduceOp: Any) -> bool:  # noqa: N803 - PyTorch's argument name
    """Whether ``reduceOp`` is defined on complex tensors (complex values travel as pairs of
    reals, so only the sum-like reductions mean anything)."""
    return ReduceOp(reduceOp) not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT,
                                      ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
