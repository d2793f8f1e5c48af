"""PyTorch's ``ProcessGroup`` methods (``pg.allreduce(tensors, opts)`` ...): the collectives
called on a group object with an option holder (``options.py``), returning a ``Work``.

They take PyTorch's overloads: a list of tensors (this build has one tensor per process, so
the list holds one) with an options object, or a tensor with the plain arguments (``op``,
``root``). Roots in options are ranks inside the group, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from . import options as O
from .reduce_op import ReduceOp


def _one(tensors: Any, fn: str) -> Any:
    """The tensor of a one-element list (PyTorch's per-device lists; one device here)."""
    if isinstance(tensors, (list, tuple)):
        if len(tensors) != 1:
            raise ValueError(f"ProcessGroup.{fn}: expected one tensor per process (one device "
                             f"per process), got {len(tensors)}")
        return tensors[0]
    return tensors


def _inner(lists: Any) -> list[Any]:
    """The one per-device list of PyTorch's list-of-lists arguments (or a flat list)."""
    if lists and isinstance(lists[0], (list, tuple)):
        return list(lists[0])
    return list(lists)


def _opts(opts: Any, kind: type, fn: str, **plain: Any) -> Any:
    """``opts`` when it is an option holder, else one built from the plain arguments."""
    if isinstance(opts, kind):
        return opts
    if opts is not None and not isinstance(opts, (ReduceOp, ReduceOp.RedOpType, int)):
        raise TypeError(f"ProcessGroup.{fn}: expected {kind.__name__}, got "
                        f"{type(opts).__name__}")
    built = kind()
    for k, v in plain.items():
        if v is not None:
            setattr(built, k, v)
    return built


class ProcessGroupMethods:
    """Mixed into ``ProcessGroup``: each method runs the module-level collective on this
    group with ``async_op=True``."""

    def allreduce(self, tensors: Any, opts: Any = None, timeout: Any = None) -> Any:
        from .collectives import all_reduce
        o = _opts(opts, O.AllreduceOptions, "allreduce",
                  reduceOp=opts if not isinstance(opts, O.AllreduceOptions) else None)
        return all_reduce(_one(tensors, "allreduce"), o.reduceOp, self, True)

    def allreduce_coalesced(self, tensors: list[Any], opts: Any = None) -> Any:
        from .coalesced import all_reduce_coalesced
        o = _opts(opts, O.AllreduceCoalescedOptions, "allreduce_coalesced")
        return all_reduce_coalesced(list(tensors), o.reduceOp, self, True)

    def broadcast(self, tensors: Any, opts: Any = None, timeout: Any = None) -> Any:
        from .collectives import broadcast
        o = _opts(opts, O.BroadcastOptions, "broadcast",
                  rootRank=opts if isinstance(opts, int) else None)
        return broadcast(_one(tensors, "broadcast"), group=self, async_op=True,
                         group_src=o.rootRank)

    def reduce(self, tensors: Any, opts: Any = None, op: Any = ReduceOp.SUM,
               timeout: Any = None) -> Any:
        from .collectives import reduce
        o = _opts(opts, O.ReduceOptions, "reduce",
                  rootRank=opts if isinstance(opts, int) else None, reduceOp=op)
        return reduce(_one(tensors, "reduce"), op=o.reduceOp, group=self, async_op=True,
                      group_dst=o.rootRank)

    def allgather(self, output_tensors: list[Any], input_tensors: Any, opts: Any = None) -> Any:
        from .collectives import all_gather
        outs = _inner(output_tensors)
        return all_gather(outs, _one(input_tensors, "allgather"), self, True)

    def allgather_coalesced(self, output_lists: list[list[Any]], input_list: list[Any],
                            opts: Any = None) -> Any:
        from .coalesced import all_gather_coalesced
        return all_gather_coalesced(output_lists, input_list, self, True)

    def _allgather_base(self, output: Any, input: Any, opts: Any = None) -> Any:  # noqa: A002
        from .collectives import all_gather_into_tensor
        return all_gather_into_tensor(output, input, self, True)

    def gather(self, output_tensors: list[Any], input_tensors: Any, opts: Any = None) -> Any:
        from .collectives import gather
        o = _opts(opts, O.GatherOptions, "gather",
                  rootRank=opts if isinstance(opts, int) else None)
        outs = _inner(output_tensors)
        mine = self.rank() == o.rootRank
        return gather(_one(input_tensors, "gather"), outs if mine else None,
                      group=self, async_op=True, group_dst=o.rootRank)

    def scatter(self, output_tensors: Any, input_tensors: list[Any], opts: Any = None) -> Any:
        from .collectives import scatter
        o = _opts(opts, O.ScatterOptions, "scatter",
                  rootRank=opts if isinstance(opts, int) else None)
        ins = _inner(input_tensors)
        mine = self.rank() == o.rootRank
        return scatter(_one(output_tensors, "scatter"), ins if mine else None,
                       group=self, async_op=True, group_src=o.rootRank)

    def reduce_scatter(self, output_tensors: Any, input_tensors: list[Any],
                       opts: Any = None) -> Any:
        from .collectives import reduce_scatter
        o = _opts(opts, O.ReduceScatterOptions, "reduce_scatter",
                  reduceOp=opts if not isinstance(opts, O.ReduceScatterOptions) else None)
        ins = _inner(input_tensors)
        return reduce_scatter(_one(output_tensors, "reduce_scatter"), ins, o.reduceOp,
                              self, True)

    def _reduce_scatter_base(self, output: Any, input: Any,  # noqa: A002
                             opts: Any = None) -> Any:
        from .collectives import reduce_scatter_tensor
        o = _opts(opts, O.ReduceScatterOptions, "_reduce_scatter_base")
        return reduce_scatter_tensor(output, input, o.reduceOp, self, True)

    def alltoall_base(self, output: Any, input: Any, output_split_sizes: list[int],  # noqa: A002
                      input_split_sizes: list[int], opts: Any = None) -> Any:
        from .collectives import all_to_all_single
        return all_to_all_single(output, input, output_split_sizes, input_split_sizes, self,
                                 True)

    def alltoall(self, output_tensors: list[Any], input_tensors: list[Any],
                 opts: Any = None) -> Any:
        from .collectives import all_to_all
        return all_to_all(output_tensors, input_tensors, self, True)

    def barrier(self, opts: Any = None) -> Any:
        from .collectives import barrier
        return barrier(self, True)

    def send(self, tensors: Any, dstRank: int, tag: int = 0) -> Any:  # noqa: N803
        from .collectives import isend
        return isend(_one(tensors, "send"), group=self, tag=tag, group_dst=dstRank)

    def recv(self, tensors: Any, srcRank: int, tag: int = 0) -> Any:  # noqa: N803
        from .collectives import irecv
        return irecv(_one(tensors, "recv"), group=self, tag=tag, group_src=srcRank)
