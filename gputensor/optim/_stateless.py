"""``swap_in_optimizer_params_and_state``: run an optimizer's API on other parameters and an
``optimizer.state_dict()``-shaped state for the length of a ``with`` block (PyTorch 2.13's
``torch.optim.swap_in_optimizer_params_and_state``), then restore the live optimizer.

``step()`` inside the block updates the swapped-in tensors in place; in-place edits of the
swapped-in state tensors reach the caller's dict, while new entries or reassigned tensors stay
local to the block (each per-parameter state dict is a shallow copy).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from gputensor._tensor import Tensor

from .optimizer import Optimizer

_NAME = "swap_in_optimizer_params_and_state"


def _checked_state(state: Any) -> dict[Any, Any]:
    if not isinstance(state, dict):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be a dict mapping "
                           f"packed parameter ids to per-param state dicts, got "
                           f"{type(state).__name__}.")
    if any(isinstance(k, Tensor) for k in state):
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style state keyed by "
                           f"packed parameter ids.")
    if any(isinstance(k, int) and not isinstance(v, dict) for k, v in state.items()):
        raise RuntimeError(f"{_NAME} requires per-parameter optimizer state entries to be "
                           f"dictionaries.")
    return state


def _checked_group_ids(idx: int, live: dict[str, Any], swapin: Any) -> list[int]:
    """The packed parameter ids of swap-in group ``idx``, which must have the live group's
    keys and number of params."""
    if not isinstance(swapin, dict):
        raise RuntimeError(f"{_NAME} requires each optimizer param group to be a dictionary.")
    ids = swapin.get("params")
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style "
                           f"param_groups[*]['params'] entries keyed by packed parameter ids.")
    if len(live["params"]) != len(ids):
        raise RuntimeError(f"swapin_optim_state param group {idx} has a different number of "
                           f"params than the live optimizer param group.")
    swapin_only = [k for k in swapin if k not in live]
    live_only = [k for k in live if k not in swapin]
    if swapin_only or live_only:
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param group keys "
                           f"to exactly match the live optimizer group keys for group {idx}. "
                           f"Keys only in swap-in: {swapin_only}. Keys only in live: "
                           f"{live_only}.")
    return ids


def _plan(optimizer: Optimizer, parameters: dict[str, Tensor], optim_state: dict[str, Any],
          ) -> tuple[dict[Any, Any], list[tuple[dict, dict, list[Tensor]]]]:
    """Validate; (packed state, [(live group, swap-in group, its swap-in params)])."""
    if not optimizer.state:
        raise RuntimeError(f"{_NAME} requires initialized optimizer state.")
    if not isinstance(optim_state, dict):
        raise RuntimeError(f"{_NAME} requires a DCP-style optimizer state_dict.")
    state = _checked_state(optim_state.get("state"))
    groups = optim_state.get("param_groups")
    if not isinstance(groups, list):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['param_groups'] to be a list "
                           f"of param-group dicts, got {type(groups).__name__}.")
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError("swapin_optim_state has a different number of parameter groups "
                           "than the live optimizer.")
    # Packed ids follow param_groups order, and so do the given parameters (by position).
    flat = list(parameters.values())
    offset, seen, plan = 0, set(), []
    for idx, (live, swapin) in enumerate(zip(optimizer.param_groups, groups, strict=True)):
        ids = _checked_group_ids(idx, live, swapin)
        seen.update(ids)
        if offset + len(ids) > len(flat):
            raise RuntimeError(f"{_NAME} requires the explicit parameter state to match "
                               f"optimizer.param_groups ordering.")
        plan.append((live, swapin, flat[offset:offset + len(ids)]))
        offset += len(ids)
    extra = [k for k in state if k not in seen]
    if extra:
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be keyed only by "
                           f"packed parameter ids from param_groups[*]['params']; got extra "
                           f"keys {extra!r}.")
    return state, plan


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer: Optimizer,
                                       swapin_parameters: dict[str, Tensor],
                                       swapin_optim_state: dict[str, Any]) -> Iterator[None]:
    """Inside the block, ``optimizer`` sees ``swapin_parameters`` (in param_groups order) and
    the state and hyper-parameters of ``swapin_optim_state``; the live ones come back on exit."""
    state, plan = _plan(optimizer, swapin_parameters, swapin_optim_state)
    live_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]  # keeps the params lists themselves
    try:
        swapped: defaultdict[Tensor, Any] = defaultdict(dict)
        for live, swapin, params in plan:
            live["params"] = params
            live.update({k: v for k, v in swapin.items() if k != "params"})
            for p, pid in zip(params, swapin["params"], strict=True):
                swapped[p] = dict(state.get(pid, {}))
        optimizer.state = swapped
        yield
    finally:
        for group, snapshot in zip(optimizer.param_groups, snapshots, strict=True):
            group.clear()
            group.update(snapshot)
        optimizer.state = live_state


__all__ = ["swap_in_optimizer_params_and_state"]
