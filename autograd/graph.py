"""Graph nodes: the backward functions that ops attach to their outputs as ``grad_fn``.

Each node holds edges ``(node, input_nr)`` to the nodes of its inputs (``next_functions``); a
leaf that requires grad gets an ``AccumulateGrad`` node. Saved tensors remember the version of
their storage when saved, so an in-place edit before backward is caught and named.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from . import anomaly_mode, grad_mode

Edge = tuple["Node", int]
_sequence = itertools.count()


class RemovableHandle:
    """Returned by ``register_hook``: ``handle.remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks: dict) -> None:
        self._hooks = hooks
        self.id = next(self._ids)

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


class Node:
    """A backward function in the graph (PyTorch's ``torch.autograd.graph.Node``)."""

    __slots__ = ("next_functions", "_seq", "_released", "_hooks", "_pre_hooks",
                 "_tensor_pre_hooks", "_trace", "out_meta", "__weakref__",
                 "__dict__")

    def __init__(self, next_functions: tuple = ()) -> None:
        self._init(next_functions)

    def _init(self, next_functions: tuple) -> None:
        self.next_functions = next_functions
        self._seq = next(_sequence)
        self._released = False
        self._hooks = self._pre_hooks = self._tensor_pre_hooks = None
        self.out_meta = None   # (shape, dtype, device) per output, to materialize zero grads
        self._trace = anomaly_mode.forward_trace() if anomaly_mode.enabled else None

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    # -- the backward computation ----------------------------------------------------------
    def apply(self, grads: list[Any]) -> Sequence[Any]:
        """Gradients for each edge in ``next_functions`` from the gradients of the outputs."""
        raise RuntimeError(f"{self.name()} has no backward")

    def release(self) -> None:
        """Free what backward needs (saved tensors), after a backward without retain_graph."""
        self._released = True

    def check_not_released(self) -> None:
        if self._released:
            raise RuntimeError(
                f"Trying to backward through the graph a second time (or directly access saved "
                f"tensors after they have already been freed) in {self.name()}. Saved "
                f"intermediate values of the graph are freed when you call .backward() or "
                f"autograd.grad(). Specify retain_graph=True if you need to backward through "
                f"the graph a second time or if you need to access saved tensors after calling "
                f"backward.")

    # -- hooks --------------------------------------------------------------------------------
    def register_hook(self, fn: Callable) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after this node runs; may return new grad_inputs."""
        if self._hooks is None:
            self._hooks = {}
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = fn
        return handle

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """``fn(grad_outputs)`` before this node runs; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        handle = RemovableHandle(self._pre_hooks)
        self._pre_hooks[handle.id] = fn
        return handle

    def _register_tensor_hook(self, output_nr: int, fn: Callable) -> RemovableHandle:
        """A hook of the tensor that is output ``output_nr`` of this node."""
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        hooks = self._tensor_pre_hooks.setdefault(output_nr, {})
        handle = RemovableHandle(hooks)
        hooks[handle.id] = fn
        return handle


class AccumulateGrad(Node):
    """The node of a leaf tensor: adds the incoming gradient into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable: Any) -> None:
        self._init(())
        self.variable = variable

    def apply(self, grads: list[Any]) -> Sequence[Any]:
        return ()


def grad_accumulator(t: Any) -> AccumulateGrad:
    """The (cached) AccumulateGrad node of leaf ``t``; the tensor holds it weakly (no cycle)."""
    ref = t.__dict__.get("_grad_acc")
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_acc = weakref.ref(acc)
    return acc


def edge_of(t: Any) -> Edge | None:
    """The edge a gradient for ``t`` flows along, or None when ``t`` needs no gradient."""
    fn = t.grad_fn
    if fn is not None:
        base = t._base
        if base is not None and base.grad_fn is not t.__dict__.get("_base_fn", base.grad_fn):
            fn = _regenerate_view_history(t, base)
        return (fn, t._output_nr)
    if t._requires_grad:
        return (grad_accumulator(t), 0)
    return None


def _regenerate_view_history(view: Any, base: Any) -> Node:
    """A view whose base took a new history after the view was made (an in-place op through
    another view, or on the base itself) becomes an ``as_strided`` of the base's current
    history, as PyTorch regenerates a view's grad_fn when its base changes."""
    if not base.is_contiguous() or base._offset != 0:
        return view.grad_fn  # the as_strided formula needs a contiguous base; keep the old one
    from gputensor.kernels.registry import OPS
    geometry = (tuple(view._shape), tuple(view._stride), view._offset)
    view.grad_fn = None
    view._requires_grad = False
    view._output_nr = 0
    OPS["as_strided"].derivative.record_call(view, (base, *geometry), {})
    return view.grad_fn


class SavedTensor:
    """A tensor saved for backward, with the version its storage had when it was saved.

    An op's own output is saved as a detached alias (the output holds its grad_fn, so a strong
    reference back would make a cycle); unpacking re-attaches the node for double backward.
    While :class:`saved_tensors_hooks` are active, the tensor is handed to the pack hook and
    only what it returns is kept, with the autograd metadata needed to rebuild the tensor
    from what the unpack hook gives back (PyTorch's ``SavedVariable`` with hooks).
    """

    __slots__ = ("tensor", "version", "is_output", "output_nr", "hooks", "meta")

    def __init__(self, t: Any, is_output: bool = False, output_nr: int = 0) -> None:
        self.tensor = t.detach() if is_output else t
        self.version = t._storage._version
        self.is_output = is_output
        self.output_nr = output_nr
        self.hooks = None
        if _hooks_active:   # one global read when no hooks are in use anywhere
            hooks = _hook_stack()
            if hooks:
                self._pack(t, hooks[-1])

    def _pack(self, t: Any, hooks: tuple[Callable, Callable]) -> None:
        pack, unpack = hooks
        if not self.is_output:  # PyTorch keeps the grad_fn of an input, the leaf's accumulator
            if t.grad_fn is not None:
                self.meta = (t.grad_fn, t._output_nr, None)
            elif t._requires_grad:
                self.meta = (None, 0, weakref.ref(grad_accumulator(t)))
            else:
                self.meta = None
        with grad_mode.no_grad():
            packed = pack(self.tensor)
        if t._storage._version != self.version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook cannot be modified by in-place operations as this can lead "
                "to unexpected side-effects. Please open an issue if you need to perform "
                "in-place operations on the input to a pack hook.")
        self.tensor = packed
        self.hooks = unpack

    def unpack(self, node: Node) -> Any:
        if self.hooks is not None:
            return self._unpack_hooked(node)
        t = self.tensor
        if t._storage._version != self.version:
            kind = "its output" if self.is_output else "an input"
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{t.type()} {list(t.shape)}] ({kind} saved by "
                f"{node.name()}) is at version {t._storage._version}; expected version "
                f"{self.version} instead. Hint: the forward op was {node.name()}; avoid "
                f"modifying this tensor in place until backward has run.")
        if self.is_output:
            alias = t.detach()
            alias._requires_grad = True
            alias.grad_fn = node
            alias._output_nr = self.output_nr
            return alias
        return t

    def _unpack_hooked(self, node: Node) -> Any:
        # No version check: what the hooks keep is theirs (as in PyTorch).
        data = self.hooks(self.tensor)
        if not (hasattr(data, "_storage") and hasattr(data, "grad_fn")):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type(data).__name__}")
        if self.is_output:
            fn, nr, acc = node, self.output_nr, None
        elif self.meta is None:
            return data.detach() if data._requires_grad else data
        else:
            fn, nr, acc = self.meta
        alias = data.detach()
        alias._requires_grad = True
        if fn is not None:
            alias.grad_fn = fn
            alias._output_nr = nr
        else:  # a leaf: gradients still reach the original's AccumulateGrad
            alias._grad_acc = acc
        return alias


# -- saved tensor hooks (torch.autograd.graph.saved_tensors_hooks) ---------------------------
_hooks_active = 0   # how many hook contexts are open in any thread: SavedTensor's fast test
_hook_state = threading.local()
_count_lock = threading.Lock()


def _hook_stack() -> list[tuple[Callable, Callable]]:
    stack = getattr(_hook_state, "stack", None)
    if stack is None:
        stack = _hook_state.stack = []
    return stack


class saved_tensors_hooks:  # noqa: N801 (PyTorch's name)
    """Context manager: every tensor an autograd node saves while it is active goes through
    ``pack_hook(tensor) -> Any``, and backward reads it back as ``unpack_hook(packed)``, which
    must return a tensor with the original's contents. Innermost context wins; hooks run with
    grad disabled and must not modify their input in place."""

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]
                 ) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        global _hooks_active
        _hook_stack().append((self.pack_hook, self.unpack_hook))
        with _count_lock:
            _hooks_active += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        global _hooks_active
        _hook_stack().pop()
        with _count_lock:
            _hooks_active -= 1


class save_on_cpu(saved_tensors_hooks):  # noqa: N801 (PyTorch's name)
    """Saved tensors live in CPU memory (pinned when ``pin_memory``) until backward copies
    them back to their device: activation memory on the accelerator is traded for copies."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        import gputensor as gt

        def pack_to_cpu(tensor: Any) -> tuple[Any, Any]:
            if not pin_memory:
                return tensor.device, tensor.cpu()
            packed = gt.empty(tuple(tensor.shape), dtype=tensor.dtype,
                              pin_memory=getattr(gt, device_type).is_available())
            packed.copy_(tensor)
            return tensor.device, packed

        def unpack_from_cpu(packed: tuple[Any, Any]) -> Any:
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)
