"""A compiled callable: guards, the cache of captured graphs, replay, and autograd.

The first call with a given guard key runs the function eagerly inside a ``Capture`` (that
call's results are the eager results). When outputs need gradients, the backward pass the
engine would run is captured right after, with placeholder output gradients, so forward and
backward form one joint program on the same private buffers. Later calls with that key copy
their tensor arguments into the graph's static inputs and replay: without grad, just the
forward steps; with grad, through one autograd node whose backward replays the backward steps.

A graph is busy from a replay whose outputs need gradients until that backward ran or its
node died (the forward buffers hold what backward reads), so overlapping calls capture a
second instance. Keys that cannot be captured (a graph break) run eagerly from then on, with
one warning; ``fullgraph=True`` raises at the break instead.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.amp import autocast_mode
from gputensor.autograd import grad_mode
from gputensor.autograd.engine import grad as autograd_grad
from gputensor.autograd.function import Function
from gputensor.autograd.graph import AccumulateGrad, edge_of
from gputensor.kernels.allocation import strided_copy

from . import state
from .capture import Capture
from .fusion import fuse
from .program import CannotReplay, GuardFailure, Program, Retarget

_ALL: weakref.WeakSet = weakref.WeakSet()  # every CompiledFunction, for gt.compiler.reset()


# -- argument structure --------------------------------------------------------------------------
def flatten(obj: Any, leaves: list[Any]) -> Any:
    """Append ``obj``'s leaves (lists, tuples, named tuples and dicts are containers) and
    return its structure."""
    if isinstance(obj, list | tuple):
        kind = type(obj)
        return (kind, tuple(flatten(v, leaves) for v in obj))
    if isinstance(obj, dict):
        return (dict, tuple((k, flatten(v, leaves)) for k, v in obj.items()))
    leaves.append(obj)
    return None


def unflatten(spec: Any, leaves: Any) -> Any:
    if spec is None:
        return next(leaves)
    kind, items = spec
    if kind is dict:
        return {k: unflatten(s, leaves) for k, s in items}
    values = [unflatten(s, leaves) for s in items]
    if kind is list:
        return values
    if kind is tuple:
        return tuple(values)
    return kind(*values) if hasattr(kind, "_fields") else kind(values)


_CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None), D.dtype)


def _global_state() -> tuple:
    return (grad_mode.is_grad_enabled(), D.get_default_dtype(),
            tuple(sorted(autocast_mode._state.enabled.items())),
            tuple(sorted((k, v) for k, v in autocast_mode._state.dtype.items())))


# -- one captured graph ----------------------------------------------------------------------
class Graph:
    """One capture's programs and buffers."""

    def __init__(self) -> None:
        self.statics: list[Tensor | None] = []  # per flat argument: its static input
        self.copy_back: list[int] = []           # inputs the function writes in place
        self.forward: Program = Program(())
        self.backward: Program | None = None
        self.out_spec: Any = None
        self.outs: list[tuple[str, Any]] = []    # per flat output: how to produce it
        self.diff: list[int] = []                # outputs that carry gradients
        self.placeholders: list[Tensor] = []     # their incoming gradients, per diff output
        self.boundary: list[tuple[str, Any]] = []  # ("arg", position) / ("leaf", tensor)
        self.grads: list[Tensor | None] = []     # the backward's result per boundary entry
        self.externals: list[tuple[Tensor, Any, Any]] = []
        self.written: list[Any] = []             # external storages the function writes
        self.pending: weakref.ref | None = None

    def busy(self) -> bool:
        ctx = self.pending() if self.pending is not None else None
        return ctx is not None and not ctx._released

    def valid(self) -> bool:
        """The externals still have the storage they had at capture."""
        for t, st, buf in self.externals:
            if t._storage is not st or st._buf is not buf:
                return False
        return True

    # -- replay ------------------------------------------------------------------------------
    def load(self, flat: Sequence[Any]) -> None:
        for static, x in zip(self.statics, flat, strict=True):
            if static is not None:
                strided_copy(static, x)

    def run_forward(self, flat: Sequence[Any]) -> list[Any]:
        self.forward.run()
        for i in self.copy_back:
            strided_copy(flat[i], self.statics[i])
            flat[i]._bump_version()
        for st in self.written:
            st._version += 1
        out = []
        for kind, v in self.outs:
            if kind == "new":
                out.append(v.clone())
            elif kind == "arg":
                out.append(flat[v])
            else:
                out.append(v)
        return out

    def run_backward(self, grads: Sequence[Any]) -> list[Any]:
        for ph, g in zip(self.placeholders, grads, strict=True):
            if g is None:
                ph.zero_()
            else:
                strided_copy(ph, g)
        assert self.backward is not None
        self.backward.run()
        return [None if g is None else g.clone() for g in self.grads]


class _Replay(Function):
    """The autograd node of a replayed call: forward replays the forward steps, backward the
    backward steps (the boundary tensors are the node's inputs)."""

    @staticmethod
    def forward(ctx: Any, graph: Graph, flat: list[Any], results: list[Any],
                *boundary: Tensor) -> Any:
        results.extend(graph.run_forward(flat))  # all outputs, for the caller (no ctx cycle)
        ctx.graph = graph
        graph.pending = weakref.ref(ctx)
        return tuple(results[i] for i in graph.diff)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if grad_mode.is_grad_enabled():
            raise RuntimeError("gt.compile: double backward (create_graph=True) through a "
                               "compiled function is not supported")
        return (None, None, None, *ctx.graph.run_backward(grads))


# -- building a graph from a capture ----------------------------------------------------------
def _boundary(outputs: Sequence[Tensor], flat: Sequence[Any],
              first_seq: int) -> list[tuple[str, Any]]:
    """What the captured graph's gradients flow out to: arguments that require grad, and the
    leaves (parameters) it reaches. A gradient that would flow into history made before the
    call (a non-leaf read from outside the arguments) cannot be replayed."""
    arg_edges = {}
    for i, x in enumerate(flat):
        if isinstance(x, Tensor) and x._requires_grad:
            e = edge_of(x)
            arg_edges.setdefault((id(e[0]), e[1]), i)
    found: list[tuple[str, Any]] = [("arg", i) for i in sorted(set(arg_edges.values()))]
    leaves: dict[int, Tensor] = {}
    stack = [o.grad_fn for o in outputs]
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for nxt in node.next_functions:
            if nxt is None or nxt[0] is None:
                continue
            fn, nr = nxt
            if (id(fn), nr) in arg_edges:
                continue
            if isinstance(fn, AccumulateGrad):
                leaves.setdefault(id(fn.variable), fn.variable)
            elif fn._seq < first_seq:
                raise CannotReplay("a gradient flows into a graph built before the call (a "
                                   "tensor with history that is not an argument)")
            else:
                stack.append(fn)
    return found + [("leaf", t) for t in leaves.values()]


def build(fn_result: Any, flat: Sequence[Any], cap: Capture, versions: list[int | None],
          fullgraph: bool) -> Graph:
    """Turn a finished forward capture into a Graph (capturing the backward if needed)."""
    graph = Graph()
    out_leaves: list[Any] = []
    graph.out_spec = flatten(fn_result, out_leaves)
    tensors = [x for x in flat if isinstance(x, Tensor)]
    arg_ids = {id(x): i for i, x in enumerate(flat) if isinstance(x, Tensor)}
    for x in tensors:
        if x.is_sparse:
            raise CannotReplay("a sparse tensor argument")
    created = cap.created
    diff_outputs = []
    for i, o in enumerate(out_leaves):
        if isinstance(o, Tensor) and o.grad_fn is not None and o.grad_fn._seq >= cap.first_seq:
            diff_outputs.append((i, o))
    needs_backward = bool(diff_outputs) and grad_mode.is_grad_enabled()
    bcap = None
    boundary: list[tuple[str, Any]] = []
    if needs_backward:
        boundary = _boundary([o for _, o in diff_outputs], flat, cap.first_seq)
        targets = [flat[v] if kind == "arg" else v for kind, v in boundary]
        bcap = Capture(fullgraph)
        with bcap:
            bcap.recording = False
            placeholders = [o.new_ones(o.shape) for _, o in diff_outputs]
            bcap.recording = True
            results = autograd_grad([o for _, o in diff_outputs], targets, placeholders,
                                    retain_graph=True, allow_unused=True) if targets else ()
        if bcap.broken:
            raise CannotReplay(f"the backward pass: {bcap.broken}")
        created = {**created, **bcap.created}
    retarget = Retarget(created, tensors)
    graph.statics = [retarget.tensor(x) if isinstance(x, Tensor) else None for x in flat]
    graph.copy_back = [i for i, x in enumerate(flat) if isinstance(x, Tensor)
                       and versions[i] is not None and x._storage._version != versions[i]]
    graph.forward = Program([retarget.step(s) for s in cap.steps])
    for o in out_leaves:
        if not isinstance(o, Tensor):
            graph.outs.append(("value", o))
        elif id(o) in arg_ids:
            graph.outs.append(("arg", arg_ids[id(o)]))
        elif id(o._storage) in retarget.storages:
            graph.outs.append(("new", retarget.tensor(o)))
        else:
            graph.outs.append(("value", o))  # an external tensor (a parameter) returned as is
    if needs_backward:
        assert bcap is not None
        graph.diff = [i for i, _ in diff_outputs]
        graph.placeholders = [retarget.tensor(p) for p in placeholders]
        graph.backward = Program([retarget.step(s) for s in bcap.steps])
        graph.boundary = boundary
        graph.grads = [None if g is None else retarget.tensor(g) for g in results]
    if state.config.fuse:
        pinned = {id(t._storage) for t in graph.statics if t is not None}
        pinned |= {id(v._storage) for kind, v in graph.outs if kind == "new"}
        pinned |= {id(t._storage) for t in (*graph.placeholders, *graph.grads) if t is not None}
        backward = graph.backward.steps if graph.backward is not None else []
        fwd, bwd = fuse([graph.forward.steps, backward], pinned)
        graph.forward = Program(fwd)
        if graph.backward is not None:
            graph.backward = Program(bwd)
    seen_versions = {**cap.seen_versions, **(bcap.seen_versions if bcap else {})}
    graph.written = [st for key, (st, v) in seen_versions.items()
                     if key not in retarget.storages and st._version != v]
    graph.externals = [(t, t._storage, t._storage._buf) for t in retarget.externals.values()]
    return graph


# -- the compiled callable ---------------------------------------------------------------------
class _Entry:
    __slots__ = ("graphs", "eager", "warned")

    def __init__(self) -> None:
        self.graphs: list[Graph] = []
        self.eager: str | None = None
        self.warned = False


class CompiledFunction:
    """``gt.compile(fn)``: calls with the same guard key replay one captured graph."""

    def __init__(self, fn: Callable[..., Any], *, fullgraph: bool = False,
                 modules: Sequence[Any] = (), mode: str | None = None) -> None:
        self.fn = fn
        self.fullgraph = fullgraph
        self.cuda_graphs = mode == "reduce-overhead"  # replay CUDA programs as CUDA graphs
        self.modules = list(modules)
        self.cache: dict[Any, _Entry] = {}
        self.captures = 0
        self._limit_warned = False
        functools.update_wrapper(self, fn, updated=())
        _ALL.add(self)

    def reset(self) -> None:
        self.cache.clear()
        self.captures = 0
        self._limit_warned = False

    def _key(self, flat: Sequence[Any], spec: Any) -> Any:
        parts: list[Any] = [spec, _global_state(), tuple(m.training for m in self.modules)]
        storages: dict[int, int] = {}
        for i, x in enumerate(flat):
            if isinstance(x, Tensor):
                alias = storages.setdefault(id(x._storage), i)
                parts.append((type(x), x._shape, x._stride, x._offset if alias != i else 0,
                              x._dtype, x._storage.device, x._requires_grad, alias))
            elif isinstance(x, _CONSTANT_TYPES):
                parts.append((type(x), x))
            else:
                try:
                    hash(x)
                except TypeError:
                    return None
                parts.append((type(x), x))
        return tuple(parts)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if state.TRACE is not None:
            return self.fn(*args, **kwargs)  # inside another capture: its steps are recorded
        flat: list[Any] = []
        spec = flatten((args, kwargs), flat)
        key = self._key(flat, spec)
        if key is None:
            return self.fn(*args, **kwargs)
        entry = self.cache.get(key)
        if entry is None:
            entry = self.cache[key] = _Entry()
        if entry.eager is not None:
            return self.fn(*args, **kwargs)
        for graph in entry.graphs:
            if not graph.busy():
                if graph.valid():
                    return self._replay(graph, flat, entry, args, kwargs)
                entry.graphs.remove(graph)  # a parameter got new storage: capture again
                self.captures -= 1
                break
        if self.captures >= state.config.cache_size_limit:
            if not self._limit_warned:
                self._limit_warned = True
                warnings.warn(f"gt.compile: {self._name()} reached the cache size limit "
                              f"({state.config.cache_size_limit} captures); further new call "
                              "signatures run eagerly", stacklevel=2)
            return self.fn(*args, **kwargs)
        return self._capture(entry, flat, spec)

    def _name(self) -> str:
        return getattr(self.fn, "__qualname__", type(self.fn).__name__)

    def _capture(self, entry: _Entry, flat: list[Any], spec: Any) -> Any:
        args, kwargs = unflatten(spec, iter(flat))
        versions = [x._storage._version if isinstance(x, Tensor) else None for x in flat]
        cap = Capture(self.fullgraph)
        with cap:
            result = self.fn(*args, **kwargs)
        reason = cap.broken
        if reason is None:
            try:
                graph = build(result, flat, cap, versions, self.fullgraph)
            except CannotReplay as e:
                if self.fullgraph:
                    raise RuntimeError(f"gt.compile(fullgraph=True): {e}") from None
                reason = str(e)
            else:
                if self.cuda_graphs:
                    for program in (graph.forward, graph.backward):
                        if program is not None:
                            program.use_cuda_graph = True
                entry.graphs.append(graph)
                self.captures += 1
                return result
        entry.eager = reason
        warnings.warn(f"gt.compile: graph break in {self._name()}: {reason}; calls like this "
                      "one run eagerly", stacklevel=3)
        return result

    def _replay(self, graph: Graph, flat: list[Any], entry: _Entry, args: Any,
                kwargs: Any) -> Any:
        graph.load(flat)
        try:
            if graph.diff and grad_mode.is_grad_enabled():
                inputs = [flat[v] if kind == "arg" else v for kind, v in graph.boundary]
                outs: list[Any] = []
                diff = _Replay.apply(graph, flat, outs, *inputs)
                diff = diff if isinstance(diff, tuple) else (diff,)
                for i, t in zip(graph.diff, diff, strict=True):
                    outs[i] = t
            else:
                outs = graph.run_forward(flat)
        except GuardFailure as e:
            if graph.written or graph.copy_back:
                raise RuntimeError(f"gt.compile: {e}, after the compiled function had "
                                   "already updated state; call gt.compiler.reset()") from None
            entry.eager = str(e)
            return self.fn(*args, **kwargs)
        return unflatten(graph.out_spec, iter(outs))
