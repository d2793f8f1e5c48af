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


_new = object.__new__


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

    @classmethod
    def of_input(cls, t: Any) -> SavedTensor:
        """``SavedTensor(t)`` without the call's argument binding (the lane recorder's hot
        path); with saved-tensor hooks active it is the constructor."""
        if _hooks_active:
            return cls(t)
        self = _new(cls)
        self.tensor, self.version, self.is_output, self.output_nr, self.hooks = \
            t, t._storage._version, False, 0, None
        return self

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
            # PyTorch's label of a compressed tensor (whose .type() raises) is SparseCsr<type>
            label = t.type() if t.layout.name in ("strided", "sparse_coo") else \
                f"SparseCsrgputensor.{t.dtype.legacy_name}Tensor"
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{label} {list(t.shape)}] ({kind} saved by "
                f"{node.name()}) is at version {t._storage._version}; expected version "
                f"{self.version} instead. Hint: the forward op was {node.name()}; avoid "
                f"modifying this tensor in place until backward has run.")
        if self.is_output:
            alias = t.detach()
            alias._requires_grad = True
            alias.grad_fn = node
            alias._output_nr = self.output_nr
            fw_grad = t.__dict__.get("_fw_grad")
            if fw_grad is not None:   # forward AD over backward: the output's tangent
                alias._fw_grad = fw_grad
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
        disabled = getattr(_hook_state, "disabled", None)
        if disabled is not None:
            raise RuntimeError(disabled)
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


# -- gradient edges, version bumps, multi-tensor hooks (torch.autograd.graph's helpers) ----------
class GradientEdge(tuple):
    """Where a tensor's gradient enters the graph: ``(node, output_nr)``. ``autograd.grad`` and
    ``backward`` accept one in place of a tensor (as an input or an output)."""

    __slots__ = ()
    _fields = ("node", "output_nr", "ownership_token")

    def __new__(cls, node: Node, output_nr: int, ownership_token: Any = None) -> GradientEdge:
        return tuple.__new__(cls, (node, int(output_nr), ownership_token))

    node = property(lambda self: self[0])
    output_nr = property(lambda self: self[1])
    ownership_token = property(lambda self: self[2])

    def __repr__(self) -> str:
        return (f"GradientEdge(node={self.node!r}, output_nr={self.output_nr}, "
                f"ownership_token={self.ownership_token!r})")


def get_gradient_edge(tensor: Any) -> GradientEdge:
    """The edge ``tensor``'s gradient flows along (its grad_fn, or its AccumulateGrad)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does "
                           "not require gradients")
    node, nr = edge_of(tensor)
    return GradientEdge(node, nr)


def increment_version(tensor: Any) -> None:
    """Bump the version counter of ``tensor``'s storage (of each tensor in an iterable), as an
    in-place write would: what code that mutates memory behind autograd's back calls."""
    from gputensor._tensor import Tensor
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        t._storage._version += 1


class disable_saved_tensors_hooks:  # noqa: N801 (PyTorch's name)
    """Context manager: entering ``saved_tensors_hooks`` inside it raises RuntimeError with
    ``error_message`` (a feature that relies on saved tensors staying as saved)."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> None:
        self._prev = getattr(_hook_state, "disabled", None)
        _hook_state.disabled = self.error_message

    def __exit__(self, *exc: Any) -> None:
        _hook_state.disabled = self._prev


class _MultiHandle:
    """``register_multi_grad_hook``'s handle: removes the per-tensor hooks, and keeps their
    nodes (a leaf's AccumulateGrad is otherwise only weakly cached) alive until then."""

    def __init__(self, handles: list[RemovableHandle], nodes: list[Node]) -> None:
        self._handles, self._nodes = handles, nodes

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._nodes = []

    def __enter__(self) -> _MultiHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def register_multi_grad_hook(tensors: Sequence[Any], fn: Callable[..., Any], *,
                             mode: str = "all") -> _MultiHandle:
    """``mode="all"``: ``fn(grads)`` once per backward, after the gradients of every tensor in
    ``tensors`` that this backward computes (None for the others); ``mode="any"``: ``fn(grad)``
    with the first of them computed, once per backward."""
    from . import engine
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = list(tensors)
    edges = [edge_of(t) for t in tensors]
    if any(e is None for e in edges):
        raise RuntimeError("register_multi_grad_hook: every tensor must require grad")
    seen: dict[int, dict[int, Any]] = {}   # backward task -> {tensor index: grad}

    def make(i: int) -> Callable[[Any], None]:
        def hook(grad: Any) -> None:
            task = engine.current_task()
            if not task.will_execute(edges[i][0]):
                return  # a gradient this backward does not need
            got = seen.setdefault(task.id, {})
            if mode == "any":
                if not got:
                    got[i] = grad
                    fn(grad)
                return
            got[i] = grad
            expected = [j for j, (node, _) in enumerate(edges) if task.will_execute(node)]
            if all(j in got for j in expected):
                seen.pop(task.id, None)
                fn(tuple(got.get(j) for j in range(len(tensors))))
        return hook

    handles = [node._register_tensor_hook(nr, make(i)) for i, (node, nr) in enumerate(edges)]
    return _MultiHandle(handles, [node for node, _ in edges])


# The rest of torch.autograd.graph's API lives in graph_extras.py (it builds on the above).
from .graph_extras import (  # noqa: E402, F401 (re-exported)
    allow_mutation_on_saved_tensors,
    region_activation_memory_budget,
    set_override_stale_capture_stream,
    set_warn_on_accumulate_grad_stream_mismatch,
)
