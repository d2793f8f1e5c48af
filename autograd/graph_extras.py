"""The rest of ``torch.autograd.graph``: ``allow_mutation_on_saved_tensors`` and three switches
(``set_warn_on_accumulate_grad_stream_mismatch``, ``set_override_stale_capture_stream``,
``region_activation_memory_budget``); re-exported by ``graph.py``.

**allow_mutation_on_saved_tensors.** PyTorch clones a saved tensor just before an in-place op
writes to it (a dispatch mode sees every mutating op). This runtime's in-place writes have no
common pre-write point (kernels bump the storage version after writing), so the context keeps
the same contract by copying when a tensor is saved instead of when it is first mutated:
inside it, every tensor an autograd node saves is packed (saved-tensor hooks) as a private
copy, shared by the saves of the same tensor at the same version, and backward reads those
copies. Mutating the originals is then allowed and backward sees the values from the time of
saving. It costs a copy per saved tensor where PyTorch copies only the mutated ones.

**Stream switches.** PyTorch's engine runs each node on the stream its forward used, so the
gradient reaching a leaf's AccumulateGrad can come from another stream (the mismatch warning),
and during CUDA graph capture a node may still refer to a stream outside the capture (the
stale-stream override). This engine runs every node of a backward on the stream that is
current when backward is called and nodes record no forward stream, so neither situation can
arise: the two switches are PyTorch's process-wide settings, kept and readable
(``warn_on_accumulate_grad_stream_mismatch()``, ``override_stale_capture_stream()``), with
nothing for them to act on.

**region_activation_memory_budget** checks its argument as PyTorch does and, as there, raises
outside a compiled region. Inside ``gt.compile`` it annotates the region with the budget (read
back with ``current_activation_memory_budget()``); the compiler's backward saves what the
eager ops save (it has no min-cut partitioner that trades saving for recomputing), which is
PyTorch's behaviour at a budget of 1.0, so the annotation does not change what is saved.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from .graph import saved_tensors_hooks

_mutation_allowed = False   # process-wide, as PyTorch's module flag
_OUTSIDE = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
            "in which the graph was originally recorded.")


class _Handle:
    """What a saved tensor is packed into: its private copy (dropped when the context ends)."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor


class _AllowMutationOnSavedContext:
    """The state of one ``allow_mutation_on_saved_tensors`` context: the copies of the
    tensors saved inside it (by the id and version of the original)."""

    def __init__(self) -> None:
        self.handles: weakref.WeakSet[_Handle] = weakref.WeakSet()
        self.by_tensor: dict[int, tuple[weakref.ref, int, _Handle]] = {}

    def pack(self, tensor: Any) -> _Handle:
        version = tensor._storage._version
        entry = self.by_tensor.get(id(tensor))
        if entry is not None and entry[0]() is tensor and entry[1] == version and \
                entry[2].tensor is not None:
            return entry[2]   # the same tensor saved again, unchanged: one copy
        handle = _Handle(tensor.clone())
        self.handles.add(handle)
        self.by_tensor[id(tensor)] = (weakref.ref(tensor), version, handle)
        return handle

    def unpack(self, handle: _Handle) -> Any:
        if not _mutation_allowed or handle.tensor is None:
            raise AssertionError(_OUTSIDE)
        return handle.tensor

    def clear(self) -> None:
        for handle in list(self.handles):
            handle.tensor = None
        self.handles = weakref.WeakSet()
        self.by_tensor.clear()


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Iterator[_AllowMutationOnSavedContext]:
    """Context manager under which tensors saved for backward may be modified in place:
    backward uses their values from when they were saved. Run both the forward and the
    backward inside it; contexts cannot be nested."""
    global _mutation_allowed
    ctx = _AllowMutationOnSavedContext()
    with saved_tensors_hooks(ctx.pack, ctx.unpack):
        try:
            if _mutation_allowed:
                raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
            _mutation_allowed = True
            yield ctx
        finally:
            ctx.clear()
            _mutation_allowed = False


# -- stream switches (process-wide, as in PyTorch) -----------------------------------------
_switches = {"warn_stream_mismatch": True, "override_stale_capture_stream": False}


def _bool(enabled: Any) -> bool:
    if not isinstance(enabled, bool):
        raise RuntimeError(f"enabled must be a bool, but got {type(enabled).__name__}")
    return enabled


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """Whether to warn when a leaf's AccumulateGrad gets a gradient made on another stream
    (never the case in this engine; see the module docstring)."""
    _switches["warn_stream_mismatch"] = _bool(enabled)


def warn_on_accumulate_grad_stream_mismatch() -> bool:
    return _switches["warn_stream_mismatch"]


def set_override_stale_capture_stream(enabled: bool) -> None:
    """During CUDA graph capture, whether a node's stale non-capturing stream is replaced by
    the capturing one (nodes here have no stream of their own; see the module docstring)."""
    _switches["override_stale_capture_stream"] = _bool(enabled)


def override_stale_capture_stream() -> bool:
    return _switches["override_stale_capture_stream"]


# -- region_activation_memory_budget -------------------------------------------------------
_budget_state = threading.local()


def current_activation_memory_budget() -> float | None:
    """The budget of the innermost ``region_activation_memory_budget`` region (None: none)."""
    stack = getattr(_budget_state, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def _budget_region(budget: float) -> Iterator[None]:
    stack = getattr(_budget_state, "stack", None)
    if stack is None:
        stack = _budget_state.stack = []
    stack.append(budget)
    try:
        yield
    finally:
        stack.pop()


def region_activation_memory_budget(budget: float) -> contextlib.AbstractContextManager[None]:
    """Context manager that sets the activation memory budget (a ratio in [0, 1]) of the
    region of a compiled forward traced under it; raises RuntimeError outside compilation."""
    from gputensor import compiler
    name = "torch.autograd.graph.region_activation_memory_budget"
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise TypeError(f"{name}: expects a float, got {type(budget).__name__}")
    if not 0.0 <= budget <= 1.0:
        raise ValueError(f"{name}: must be in [0, 1], got {budget}")
    if not compiler.is_compiling():
        raise RuntimeError(f"{name} can only be used inside a torch.compile region; it has no "
                           f"effect in eager mode.")
    return _budget_region(float(budget))
