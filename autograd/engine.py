"""The backward engine: an iterative walk of the graph in dependency order.

Dependencies are counted first (how many edges point at each node from the part of the graph
reachable from the roots), then nodes run when every gradient they will receive has arrived,
latest-created first, like PyTorch's ready queue. Nothing recurses, so deep graphs are fine.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Sequence
from typing import Any

from . import anomaly_mode, engine_modes, grad_mode
from .graph import AccumulateGrad, GradientEdge, Node, edge_of


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "_storage") and hasattr(x, "grad_fn")


def _as_tuple(x: Any) -> tuple:
    if x is None:
        return ()
    if _is_tensor(x) or isinstance(x, GradientEdge):
        return (x,)
    return tuple(x)


def _root_grads(tensors: Sequence[Any], grads: Sequence[Any], create_graph: bool) -> list:
    import gputensor as gt
    out = []
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(grads)} gradients for {len(tensors)} outputs")
    for i, (t, g) in enumerate(zip(tensors, grads, strict=True)):
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have "
                               f"a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(output {i} has shape {list(t.shape)})")
            g = gt.ones_like(t.detach())
        elif not _is_tensor(g):
            g = gt.tensor(g, dtype=t.dtype, device=t.device)
        else:
            if g.shape != t.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{tuple(g.shape)} and output[{i}] has a shape of "
                                   f"{tuple(t.shape)}.")
            if g.device != t.device:
                raise RuntimeError(f"grad_output[{i}] is on {g.device} but output[{i}] is on "
                                   f"{t.device}")
            if not create_graph:
                g = g.detach()
        out.append(g)
    return out


def _graph(roots: list[Node]) -> dict[Node, int]:
    """Number of incoming edges of every node reachable from ``roots``."""
    deps: dict[Node, int] = {}
    seen = set(roots)
    stack = list(roots)
    while stack:
        node = stack.pop()
        for edge in node.next_functions:
            if edge is None:
                continue
            child = edge[0]
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    for r in roots:
        deps.setdefault(r, 0)
    return deps


def _needed(deps: dict[Node, int], targets: set[Node]) -> set[Node]:
    """Nodes from which some target can be reached (the only ones worth running)."""
    parents: dict[Node, list[Node]] = {}
    for node in deps:
        for edge in node.next_functions:
            if edge is not None:
                parents.setdefault(edge[0], []).append(node)
    needed = set(targets)
    stack = list(targets)
    while stack:
        for p in parents.get(stack.pop(), ()):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    return needed


def _has_nan(g: Any) -> bool:
    if g is None or not (g.dtype.is_floating_point or g.dtype.is_complex):
        return False
    return bool(g.isnan().any())


def _anomaly_error(node: Node, index: int) -> RuntimeError:
    trace = "".join(node._trace or ["(no forward trace: enable detect_anomaly before the "
                                    "forward pass)\n"])
    return RuntimeError(f"Function '{node.name()}' returned nan values in its {index}th output."
                        f"\nThe forward call that created it:\n{trace}")


def _accumulate(var: Any, g: Any, shared: bool, create_graph: bool) -> None:
    hooks = var.__dict__.get("_leaf_hooks")
    if hooks:
        for hook in list(hooks.values()):
            r = hook(g)
            if r is not None:
                g, shared = r, True
    if var.grad is None:
        if g._sparse or var._sparse:   # COO or compressed (no strides to keep)
            if create_graph:
                var.grad = g
            else:
                var.grad = g.detach().clone() if shared or (
                    not g._sparse and not g.is_contiguous()) else g.detach()
        elif not create_graph and not shared and (
                not engine_modes.is_grad_layout_enforcement_enabled()
                or engine_modes.obeys_layout_contract(g, var)):
            var.grad = g.detach()   # stolen: nothing else refers to it
        else:   # a copy in the layout contract's strides (engine_modes)
            var.grad = engine_modes.clone_obey_contract(g if create_graph else g.detach(), var)
    elif create_graph or (var.grad.is_sparse and not g.is_sparse) or \
            (var.grad._sparse and not var.grad.is_sparse):   # a compressed .grad: out of place
        # A dense gradient joining a sparse .grad makes it dense (PyTorch's AccumulateGrad).
        var.grad = var.grad + g
        engine_modes.warn_if_breaks_contract(var.grad, var, "out-of-place")
    else:
        var.grad.add_(g.detach())
        engine_modes.warn_if_breaks_contract(var.grad, var, "in-place")
    post = var.__dict__.get("_post_accumulate_hooks")
    if post:
        for hook in list(post.values()):
            hook(var)


def run_backward(tensors: Sequence[Any], grad_tensors: Sequence[Any] | None,
                 retain_graph: bool | None, create_graph: bool,
                 inputs: Sequence[Any] | None = None, accumulate: bool = True,
                 allow_unused: bool = True) -> tuple[Any, ...] | None:
    """The engine behind ``Tensor.backward`` (accumulate=True) and ``autograd.grad``
    (accumulate=False: gradients of ``inputs`` are returned, no ``.grad`` is touched)."""
    tensors = _as_tuple(tensors)
    if not tensors:
        raise RuntimeError("backward() needs at least one output tensor")
    grad_tensors = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    root_grads = _root_grads(tensors, grad_tensors, create_graph)

    # Targets: where gradients are captured (autograd.grad) or restricted to (backward(inputs=)).
    inputs = _as_tuple(inputs)
    target_edges = []
    for i, t in enumerate(inputs):
        if isinstance(t, GradientEdge):
            target_edges.append((t.node, t.output_nr))
            continue
        if not _is_tensor(t):
            raise TypeError(f"inputs[{i}] must be a Tensor, got {type(t).__name__}")
        if not t._requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (inputs[{i}]) does not require "
                               f"grad")
        target_edges.append(edge_of(t))

    roots: list[tuple[tuple[Node, int], Any]] = []
    for t, g in zip(tensors, root_grads, strict=True):
        roots.append((edge_of(t), g))
    deps = _graph([e[0] for e, _ in roots])
    targets = {e[0] for e in target_edges}
    needed = _needed(deps, targets) if target_edges else None
    captured: dict[tuple[int, int], Any] = {}
    capture_keys = {(id(e[0]), e[1]) for e in target_edges}

    # node -> [gradients by output number, whether each may be referenced elsewhere]
    buffers: dict[Node, list[list]] = {}
    for (node, nr), g in roots:
        _add(buffers, node, nr, g, True)
    capturing = bool(capture_keys)

    prev_mode = grad_mode.is_grad_enabled()
    grad_mode._set_enabled(create_graph)
    prev_task = getattr(_tasks, "current", None)
    task = _tasks.current = _Task(deps, needed)
    try:
        ready = [(-n._seq, id(n), n) for n in {e[0] for e, _ in roots} if deps[n] == 0]
        heapq.heapify(ready)
        while ready:
            node = heapq.heappop(ready)[2]
            entry = buffers.pop(node, None)
            grads_in, shared_in = entry if entry is not None else ([None], [False])
            if node._tensor_pre_hooks:
                grads_in = _run_tensor_hooks(node, grads_in, shared_in)
            if type(node) is AccumulateGrad and grads_in[0] is not None:
                want = node.variable.__dict__.get("_grad_dtype")   # Tensor.grad_dtype, if set
                if want is not None and grads_in[0].dtype is not want:
                    grads_in = [grads_in[0].to(want)]
            if capturing:
                for nr, g in enumerate(grads_in):
                    key = (id(node), nr)
                    if key in capture_keys and g is not None:
                        captured[key] = g if captured.get(key) is None else captured[key] + g
            run = needed is None or node in needed
            outputs: Sequence[Any] = ()
            if type(node) is AccumulateGrad:
                if run and accumulate and (needed is None or node in targets) and \
                        grads_in[0] is not None:
                    _accumulate(node.variable, grads_in[0], shared_in[0], create_graph)
            elif run:
                for g in grads_in:
                    if g is not None:
                        outputs = _apply(node, grads_in, retain_graph)
                        break
            for i, edge in enumerate(node.next_functions):
                if edge is None:
                    continue
                child = edge[0]
                g = outputs[i] if i < len(outputs) else None
                if g is not None:
                    # A gradient passed through unchanged (or a view of one) may also reach
                    # another leaf: a leaf must not keep it without a copy.
                    shared = g._base is not None
                    if not shared:
                        for x in grads_in:
                            if x is g:
                                shared = True
                                break
                    _add(buffers, child, edge[1], g, shared)
                deps[child] -= 1
                if deps[child] == 0:
                    heapq.heappush(ready, (-child._seq, id(child), child))
        while task.callbacks:  # queued by hooks; a callback may queue more
            task.callbacks.pop(0)()
    finally:
        grad_mode._set_enabled(prev_mode)
        _tasks.current = prev_task

    if accumulate:
        if target_edges:
            for t, e in zip(inputs, target_edges, strict=True):
                if not isinstance(e[0], AccumulateGrad):   # non-leaf input: its .grad is set
                    g = captured.get((id(e[0]), e[1]))
                    if g is not None:
                        t.grad = g if t.grad is None else t.grad + g
        return None
    result = []
    for i, e in enumerate(target_edges):
        g = captured.get((id(e[0]), e[1]))
        if g is None and not allow_unused:
            raise RuntimeError(f"One of the differentiated Tensors (inputs[{i}]) appears to not "
                               f"have been used in the graph. Set allow_unused=True if this is "
                               f"the desired behavior.")
        result.append(g)
    return tuple(result)


class _Task:
    """The backward pass running in this thread: which nodes it will execute."""

    __slots__ = ("id", "deps", "needed", "callbacks")
    _ids = itertools.count()

    def __init__(self, deps: dict[Node, int], needed: set[Node] | None) -> None:
        self.id, self.deps, self.needed = next(self._ids), deps, needed
        self.callbacks: list[Any] = []

    def will_execute(self, node: Node) -> bool:
        return node in self.deps and (self.needed is None or node in self.needed)


_tasks = threading.local()


def queue_callback(callback: Any) -> None:
    """Run ``callback()`` when the backward pass now running in this thread has finished
    (PyTorch's ``Variable._execution_engine.queue_callback``; hooks use it)."""
    task = getattr(_tasks, "current", None)
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    task.callbacks.append(callback)


def current_task() -> _Task:
    """The backward pass this thread is running (hooks call this)."""
    task = getattr(_tasks, "current", None)
    if task is None:
        raise RuntimeError("no backward pass is running in this thread")
    return task


def _add(buffers: dict, node: Node, nr: int, g: Any, shared: bool) -> None:
    entry = buffers.get(node)
    if entry is None:
        n = max(nr + 1, len(node.out_meta or ()))
        entry = buffers[node] = [[None] * n, [False] * n]
    grads, flags = entry
    if nr >= len(grads):
        grads.extend([None] * (nr + 1 - len(grads)))
        flags.extend([False] * (nr + 1 - len(flags)))
    if grads[nr] is None:
        grads[nr], flags[nr] = g, shared
    else:
        grads[nr] = grads[nr] + g
        flags[nr] = False


def _run_tensor_hooks(node: Node, grads: list, shared: list) -> list:
    for nr, hooks in node._tensor_pre_hooks.items():
        if nr >= len(grads) or grads[nr] is None:
            continue
        for hook in list(hooks.values()):
            r = hook(grads[nr])
            if r is not None:
                grads[nr], shared[nr] = r, True
    return grads


def _apply(node: Node, grads_in: list, retain_graph: bool) -> Sequence[Any]:
    if node._pre_hooks:
        for hook in list(node._pre_hooks.values()):
            r = hook(tuple(grads_in))
            if r is not None:
                grads_in = list(r)
    outputs = node.apply(grads_in)
    if node._hooks:
        for hook in list(node._hooks.values()):
            r = hook(tuple(outputs), tuple(grads_in))
            if r is not None:
                outputs = list(r)
    if anomaly_mode.enabled and anomaly_mode.check_nan:
        for i, g in enumerate(outputs):
            if _has_nan(g):
                raise _anomaly_error(node, i)
    if not retain_graph:
        node.release()
    return outputs


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Any = None) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves (or of ``inputs``)."""
    run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs, accumulate=True)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool | None = None,
         materialize_grads: bool = False) -> tuple[Any, ...]:
    """The gradients of ``outputs`` with respect to ``inputs`` (nothing accumulated)."""
    inputs_t = _as_tuple(inputs)
    if not inputs_t:
        raise RuntimeError("grad requires non-empty inputs.")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads"
                         "=True, but got: allow_unused=False.")
    allow = bool(allow_unused) or materialize_grads
    result = run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs_t,
                          accumulate=False, allow_unused=allow)
    if materialize_grads:
        import gputensor as gt
        result = tuple(gt.zeros_like(t) if g is None else g
                       for t, g in zip(inputs_t, result, strict=True))
    return result

