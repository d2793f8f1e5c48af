"""Debugging aids of torch.distributed: ``DebugLevel`` (TORCH_DISTRIBUTED_DEBUG), the
``torch.distributed`` logger ``log``, ``record_comm`` and the rank-filtered ``breakpoint``.

At ``DebugLevel.DETAIL`` every collective first checks that all ranks of its group run the
same collective on tensors of the same shapes and dtypes (PyTorch's ProcessGroupWrapper): a
mismatch raises on every rank instead of hanging or mixing up data.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from .options import _IntLikeEnum

log = logging.getLogger("torch.distributed")


class DebugLevel(_IntLikeEnum):
    """TORCH_DISTRIBUTED_DEBUG's levels: OFF, INFO (DDP logs its construction and runtime
    statistics), DETAIL (collectives are also checked across ranks)."""

    OFF = 0
    INFO = 1
    DETAIL = 2


_level = DebugLevel.OFF


def get_debug_level() -> DebugLevel:
    return _level


def set_debug_level(level: DebugLevel) -> None:
    global _level
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level(): incompatible function arguments. The following "
                        f"argument types are supported:\n    1. (arg0: DebugLevel) -> None\n\n"
                        f"Invoked with: {level!r}")
    _level = level


def set_debug_level_from_env() -> None:
    """The level TORCH_DISTRIBUTED_DEBUG names (any case; unset: OFF)."""
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    if value is None:
        set_debug_level(DebugLevel.OFF)
        return
    try:
        set_debug_level(DebugLevel[value.upper()])
    except KeyError:
        raise ValueError("The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or "
                         "DETAIL.") from None


# -- DETAIL: collective fingerprints ----------------------------------------------------------
def _fingerprint(op: str, tensors: Sequence[Any]) -> tuple:
    return (op, tuple((tuple(t.shape), str(t.dtype), t.device.type) for t in tensors))


def _describe(fp: tuple) -> str:
    shapes = [list(s) for s, _, _ in fp[1]]
    dtypes = [d for _, d, _ in fp[1]]
    devices = [v for _, _, v in fp[1]]
    return (f"CollectiveFingerPrint(OpType={fp[0].upper()}, TensorShape={shapes}, "
            f"TensorDtypes={dtypes}, TensorDeviceTypes={devices})")


def check_collective(pg: Any, op: str, tensors: Sequence[Any]) -> None:
    """At DETAIL, compare this collective with the one every other rank of ``pg`` runs
    (an object all-gather before the real call); raise on the first difference."""
    if _level is not DebugLevel.DETAIL or pg.size() == 1:
        return
    mine = _fingerprint(op, tensors)
    everyone = pg.comm.allgather(mine)
    for r, theirs in enumerate(everyone):
        if theirs != mine:
            raise RuntimeError(f"Detected mismatch between collectives on ranks. Rank "
                               f"{pg.ranks[pg.rank()]} is running collective: "
                               f"{_describe(mine)}, but Rank {pg.ranks[r]} is running "
                               f"collective: {_describe(theirs)}.")


# -- record_comm, breakpoint --------------------------------------------------------------------
@contextlib.contextmanager
def record_comm(name: str) -> Iterator[None]:
    """Collectives issued inside are profiled under ``name`` (a profiler range around them,
    in place of their own names' grouping)."""
    from gputensor.profiler.session import record_function
    with record_function(name):
        yield


_breakpoint_counts: dict[int, int] = {}


def _distributed_pdb() -> Any:
    """A pdb that reads the terminal even in a launcher's child process (whose stdin is not
    the terminal)."""
    import pdb

    class _DistributedPdb(pdb.Pdb):
        def interaction(self, *args: Any, **kwargs: Any) -> None:
            saved = sys.stdin
            try:
                with open("/dev/stdin") as sys.stdin:
                    pdb.Pdb.interaction(self, *args, **kwargs)
            finally:
                sys.stdin = saved
    return _DistributedPdb()


def breakpoint(rank: int = 0, skip: int = 0, timeout_s: float | None = 3600) -> None:  # noqa: A001
    """Stop in pdb on ``rank`` only; the other ranks wait in a barrier until it continues.
    ``skip``: pass the first ``skip`` calls from the same place; ``timeout_s``: the groups'
    timeout while the session lasts (so a long session does not time the others out)."""
    from . import process_group as P
    from .collectives import barrier
    if skip > 0:
        key = hash(str(traceback.format_exc()))
        _breakpoint_counts[key] = count = _breakpoint_counts.get(key, 0) + 1
        if count <= skip:
            log.warning("Skip the breakpoint, counter=%d", count)
            return
    if timeout_s is not None:
        for pg in P._groups:
            P._set_pg_timeout(datetime.timedelta(seconds=timeout_s), pg)
    if P.get_rank() == rank:
        debugger = _distributed_pdb()
        debugger.message("\n!!! ATTENTION !!!\n\nType 'up' to get to the frame that called "
                         f"dist.breakpoint(rank={rank})\n")
        debugger.set_trace()
    barrier()


set_debug_level_from_env()  # as torch.distributed does at import
