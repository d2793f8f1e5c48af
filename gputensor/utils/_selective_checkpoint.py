"""Selective activation checkpointing (PyTorch's SAC, ``torch.utils.checkpoint``).

``create_selective_checkpoint_contexts(policy)`` gives the ``context_fn`` pair of a
non-reentrant :func:`~gputensor.utils.checkpoint.checkpoint`: a caching context entered around
the forward and a cached context entered around its recomputation in backward. Both are op hook
handlers (gputensor/_op_hook.py): each op of the region reaches them below autograd as the aten
overload it stands for (gputensor/_aten.py). In the forward, the op runs, then the policy is
asked about it (``policy_fn(ctx, op, *args, **kwargs)``, ``ctx.op_output`` its result); a save
policy caches a detached alias of the output per (op, call index), anything else marks the call
for recomputation. In the recomputation each op takes its call index again: a cached call
returns the cached output without running (autograd still records the op's node around it, so
the tensors it saves come from the recomputation), the others run. The policy is given the
arguments of the gputensor op that computed the call (``linear``'s where it reports ``addmm``).
As in PyTorch, the policy
is only called in the forward (``ctx.is_recompute`` is always False), a cached entry is used
once, and a cached tensor mutated since it was cached raises unless
``allow_cache_entry_mutation``.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from gputensor._aten import OpOverload, OpOverloadPacket, aten, reported_op
from gputensor._op_hook import OP_HOOK
from gputensor._tensor import Tensor

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts", "SAC_IGNORED_OPS"]


class SelectiveCheckpointContext:
    """What the policy function is given besides the op and its arguments.

    The policy is only called in the forward: in the recomputation cached values are taken by
    call index, so ``is_recompute`` (kept for compatibility) is always False. ``op_output`` is
    the op's result."""

    def __init__(self, *, is_recompute: bool, op_output: Any = None) -> None:
        self.is_recompute = is_recompute
        self.op_output = op_output


class CheckpointPolicy(enum.Enum):
    """Whether an op's output is saved in the forward (``*_SAVE``: not recomputed in backward)
    or recomputed (``*_RECOMPUTE``). ``MUST_*`` asks that no other subsystem override it. The
    ``*_CPU_OFFLOAD`` policies are torch.compile's; outside it (always, here) they recompute, as
    in PyTorch's eager mode."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


def _policy_from_bool(b: bool) -> CheckpointPolicy:
    # Policies returning a bool predate the enum: True saves.
    return CheckpointPolicy.MUST_SAVE if b else CheckpointPolicy.PREFER_RECOMPUTE


_SAVE = (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)

# Ops never cached nor counted: detach (checkpointing may detach a different number of times
# in the forward and the recomputation) and the metadata queries (its determinism check runs
# extra ones in the forward); the device query is ``get_device`` here (PyTorch's prim.device).
SAC_IGNORED_OPS: set[Any] = {
    aten.detach.default, aten.get_device.default, aten.size.default, aten.stride.default,
    aten.dim.default, aten.numel.default, aten.storage_offset.default,
    aten.is_contiguous.default}

_RECOMPUTE = object()
_CONSUMED = object()
_SAC_MISMATCH_MSG = ("This can happen if the operations in the checkpointed region are "
                     "nondeterministic or depend on global state that changed between forward "
                     "and backward.")


class _VersionWrapper:
    """A cached value and, for a tensor, its version when cached (mutations are caught)."""

    __slots__ = ("val", "version")

    def __init__(self, val: Any) -> None:
        self.val = val
        self.version = val._version if isinstance(val, Tensor) else None

    def get_val(self, allow_cache_entry_mutation: bool) -> Any:
        if self.version is not None and not allow_cache_entry_mutation \
                and self.val._version != self.version:
            raise RuntimeError("Tensor cached during selective activation checkpoint has been "
                               "mutated")
        return self.val


def _tree_map(fn: Callable[[Any], Any], x: Any) -> Any:
    """``fn`` over the leaves of an op's output (tuples, named tuples, lists, dicts)."""
    if isinstance(x, tuple):
        items = [_tree_map(fn, v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, list):
        return [_tree_map(fn, v) for v in x]
    if isinstance(x, dict):
        return {k: _tree_map(fn, v) for k, v in x.items()}
    return fn(x)


def _detach(x: Any) -> Any:
    # A detached alias: no autograd history (no reference cycle, and autograd gives it the
    # recomputation's node when it is handed out); the version counter is shared.
    return x.detach() if isinstance(x, Tensor) else x


class _Handler:
    """An op hook handler usable as a context manager (one entry at a time per thread)."""

    def __enter__(self) -> _Handler:
        OP_HOOK.push(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        OP_HOOK.pop(self)

    def __call__(self, op: Any, args: tuple, kwargs: dict, compute: Callable[[], Any]) -> Any:
        raise NotImplementedError


class _CachingMode(_Handler):
    """The forward: run each op, ask the policy, cache the outputs of the ops it saves."""

    def __init__(self, policy_fn: Callable[..., Any], storage: dict[Any, dict[int, Any]]
                 ) -> None:
        self.policy_fn = policy_fn
        self.storage = storage
        self.func_counter: dict[Any, int] = defaultdict(int)

    def __call__(self, op: Any, args: tuple, kwargs: dict, compute: Callable[[], Any]) -> Any:
        func = reported_op(op, args, kwargs)
        if func in SAC_IGNORED_OPS:
            return compute()
        out = compute()
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out),
                                func, *args, **kwargs)
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)
        self.storage[func][idx] = _tree_map(lambda x: _VersionWrapper(_detach(x)), out) \
            if policy in _SAVE else _RECOMPUTE
        return out


class _CachedMode(_Handler):
    """The recomputation: cached calls return their forward output, the rest run."""

    def __init__(self, storage: dict[Any, dict[int, Any]],
                 allow_cache_entry_mutation: bool = False) -> None:
        self.storage = storage
        self.allow_cache_entry_mutation = allow_cache_entry_mutation
        self.func_counter: dict[Any, int] = defaultdict(int)

    def __enter__(self) -> _CachedMode:
        # Each recomputation counts calls from zero (a second one then finds consumed entries).
        self.func_counter.clear()
        OP_HOOK.push(self)
        return self

    def __call__(self, op: Any, args: tuple, kwargs: dict, compute: Callable[[], Any]) -> Any:
        func = reported_op(op, args, kwargs)
        if func in SAC_IGNORED_OPS:
            return compute()
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        func_storage = self.storage.get(func)
        if func_storage is None:
            raise RuntimeError(f"{func} encountered during backward but not found in storage. "
                               f"{_SAC_MISMATCH_MSG}")
        entry = func_storage.get(idx)
        if entry is None:
            raise RuntimeError(f"{func} invocation index {idx} encountered during backward but "
                               f"not found in storage. {_SAC_MISMATCH_MSG}")
        if entry is _CONSUMED:
            raise RuntimeError("Trying to backward an extra time. You are only allowed to "
                               "backward once on any region computed under selective activation "
                               "checkpoint.")
        if entry is _RECOMPUTE:
            return compute()
        func_storage[idx] = _CONSUMED
        return _tree_map(lambda x: x.get_val(self.allow_cache_entry_mutation), entry)


def _is_op_overload(op: Any) -> bool:
    from gputensor.library import CustomOpDef  # a custom op is its own ``.default``
    return isinstance(op, OpOverload | CustomOpDef)


def create_selective_checkpoint_contexts(policy_fn_or_list: Callable[..., Any] | list[Any],
                                         allow_cache_entry_mutation: bool = False
                                         ) -> tuple[_CachingMode, _CachedMode]:
    """The ``context_fn`` pair of a non-reentrant checkpoint that does not recompute the ops
    the policy saves (see the module docstring).

    ``policy_fn_or_list``: ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy`` (or a
    bool, True saving), ``op`` an overload such as ``gt.ops.aten.mm.default``; or a list of
    overloads, saved (``MUST_SAVE``) while every other op is recomputed
    (``PREFER_RECOMPUTE``). ``allow_cache_entry_mutation`` turns off the error raised when a
    cached tensor was modified in place before its use in the recomputation.
    """
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if not _is_op_overload(op):
                extra = ("Please update the OpOverloadPacket to a specific OpOverload.For "
                         "example, if you have `torch.ops.aten.mm`, change it to "
                         "`torch.ops.aten.mm.default`.") \
                    if isinstance(op, OpOverloadPacket) else ""
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} "
                                 f"of type {type(op)}. {extra}")
        ops = policy_fn_or_list

        def policy_fn(ctx: SelectiveCheckpointContext, op: Any, *args: Any,
                      **kwargs: Any) -> CheckpointPolicy:
            return CheckpointPolicy.MUST_SAVE if op in ops \
                else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    storage: dict[Any, dict[int, Any]] = defaultdict(dict)
    return _CachingMode(policy_fn, storage), _CachedMode(storage, allow_cache_entry_mutation)
