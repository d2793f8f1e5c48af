"""Coalesced collectives: many tensors in one call, fused into one flat buffer so the group
runs a single all-reduce / all-gather (``all_reduce_coalesced``, ``all_gather_coalesced``).
Complex tensors travel as pairs of reals (so they may be mixed with their real dtype), as in
PyTorch. With ``async_op=True`` they return a Future (PyTorch's ``work.get_future()``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor._tensor import Tensor

from .collectives import Work, all_gather_into_tensor, all_reduce
from .options import supports_complex
from .process_group import GroupMember, resolve
from .reduce_op import ReduceOp


def _check_tensor_list(param: Any, name: str) -> None:
    if not isinstance(param, list):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"List[torch.Tensor] but got {type(param)} instead.")
    if not all(isinstance(p, Tensor) for p in param):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"List[torch.Tensor] but got {type(param)} with elements of type "
                        f"{[type(p) for p in param]}.")


def _real(t: Tensor) -> Tensor:
    import gputensor as gt
    return gt.view_as_real(t) if t.is_complex() else t


def _same_dtype(tensors: list[Tensor]) -> None:
    """One dtype once complex tensors are seen as their reals (PyTorch's check)."""
    last = None
    for t in tensors:
        dt = _real(t).dtype
        if last is not None and dt is not last:
            raise ValueError(f"Invalid usage of tensors with different dtypesFound {last} and "
                             f" {t.dtype}")
        last = dt


def _flat(tensors: list[Tensor]) -> Tensor:
    import gputensor as gt
    return gt.cat([_real(t).reshape(-1) for t in tensors])


def _unflatten_into(flat: Tensor, tensors: list[Tensor], start: int = 0) -> int:
    """Copy consecutive pieces of ``flat`` into ``tensors``; returns the end offset."""
    import gputensor as gt
    with gt.no_grad():
        for t in tensors:
            real = _real(t)
            real.copy_(flat[start:start + real.numel()].reshape(real.shape))
            start += real.numel()
    return start


def _finish(work: Work, after: Callable[[], None], async_op: bool,
            result: list[Tensor]) -> Any:
    """Run ``after`` once ``work`` is done; the blocking form waits, the async one returns
    a Future of ``result``."""
    chained = Work(work._requests, lambda: (work._complete(), after()), result, work._limit_s)
    if async_op:
        return chained.get_future()
    chained.wait()
    return None


def all_reduce_coalesced(tensors: Any, op: Any = ReduceOp.SUM, group: Any = None,  # noqa: A002
                         async_op: bool = False) -> Any:
    """Reduce every tensor of ``tensors`` across the group in place, as one all-reduce of
    their concatenation."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    _check_tensor_list(tensors, "tensor")
    _same_dtype(tensors)
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if any(t.is_complex() for t in tensors) and not supports_complex(op):
        raise ValueError(f"all_reduce does not support RedOpType.{ReduceOp.name(op)} on "
                         f"complex tensors")
    pg = resolve(group)
    flat = _flat(tensors)
    work = all_reduce(flat, op, pg, async_op=True)
    return _finish(work, lambda: _unflatten_into(flat, tensors), async_op, list(tensors))


def all_gather_coalesced(output_tensor_lists: list[list[Tensor]], input_tensor_list: list[Tensor],
                         group: Any = None, async_op: bool = False) -> Any:  # noqa: A002
    """``output_tensor_lists[r][i]`` := rank r's ``input_tensor_list[i]``, as one all-gather
    of the concatenated inputs."""
    import gputensor as gt
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    _check_tensor_list(input_tensor_list, "input_tensor_list")
    _same_dtype(input_tensor_list)
    if not isinstance(output_tensor_lists, list):
        raise TypeError("Invalid function argument: output_tensor_lists should be a list")
    for outs in output_tensor_lists:
        _check_tensor_list(outs, "output_tensor_lists")
        _same_dtype(outs)
    pg = resolve(group)
    if len(output_tensor_lists) != pg.size():
        raise ValueError(f"all_gather_coalesced: output_tensor_lists must have world size "
                         f"({pg.size()}) lists, got {len(output_tensor_lists)}")
    flat_in = _flat(input_tensor_list)
    for outs in output_tensor_lists:
        if sum(_real(t).numel() for t in outs) != flat_in.numel():
            raise RuntimeError(f"all_gather_coalesced: each output list must hold as many "
                               f"elements as the inputs ({flat_in.numel()})")
    flat_out = gt.empty(pg.size() * flat_in.numel(), dtype=flat_in.dtype,
                        device=flat_in.device)
    work = all_gather_into_tensor(flat_out, flat_in, pg, async_op=True)

    def scatter_back() -> None:
        for r, outs in enumerate(output_tensor_lists):
            _unflatten_into(flat_out, outs, r * flat_in.numel())
    return _finish(work, scatter_back, async_op,
                   [t for outs in output_tensor_lists for t in outs])
