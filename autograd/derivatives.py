"""Derivative formulas declared with each op, and the nodes that run them in backward.

An op declares one formula per differentiable input, written with differentiable gputensor
ops (so ``create_graph=True`` gives higher-order gradients): a short expression string, e.g.
``mul``'s ``("g * cj(b)", "g * cj(a)")`` (``cj`` conjugates complex values, as PyTorch's conjugate
Wirtinger convention asks, and is the identity on real ones), or, where it calls a helper, a
function whose parameters are the names it reads, e.g. ``prod``'s
``lambda g, input, out, dim, keepdim: _prod_grad(g, input, out, dim, keepdim)``: the helper
is then code that tools see, and a parameter that names nothing the op binds is an error at
declaration. Names a formula may use:

- ``g``: the gradient of the (first) output; ``grads``: the gradients of all outputs
- ``out``: the (first) output; ``outs``: all outputs; ``out1`` etc.: one of them
- any argument of the op by name (tensors are saved with their version), and
  ``<arg>_shape`` / ``<arg>_dtype`` / ``<arg>_device`` / ``<arg>_strides`` for a tensor
  argument's metadata
  (cheaper than saving the tensor)
- in expression strings, every public ``gputensor`` function and the helpers in
  ``autograd.formulas``

Only the names the formulas of the inputs that need a gradient use are saved. Gradients are
summed back to each input's shape (broadcasting) and cast to its dtype by the node, so formulas
can ignore both.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from gputensor._dtype import FLOATING as _FLOATING
from gputensor._op_hook import OP_HOOK as _OP_HOOK
from gputensor._tensor import Tensor as _Tensor
from gputensor.func._state import VMAP as _VMAP

from . import formulas, grad_mode
from .forward_ad import _state as _fw_state
from .graph import Node, SavedTensor, edge_of, grad_accumulator
from .jvp import JvpRule, check_tangents, dual_call

_SPECIAL = ("g", "grads", "out", "outs")
# Ops whose PyTorch node is named after another op (``a / b`` is DivBackward0).
_NODE_NAMES = {"true_divide": "Div"}
_META_SUFFIXES = ("_shape", "_dtype", "_device", "_strides")
# the tensor attribute each metadata suffix reads (``<arg>_strides``: its strides, in elements)
_META_ATTRS = {"_shape": "shape", "_dtype": "dtype", "_device": "device", "_strides": "_stride"}
_namespace: dict[str, Any] | None = None


def _formula_namespace() -> dict[str, Any]:
    global _namespace
    if _namespace is None:
        import gputensor
        from gputensor.kernels.registry import OPS

        from . import formulas
        ns = {k: getattr(gputensor, k) for k in dir(gputensor) if not k.startswith("__")}
        ns.update({name: op.frontend for name, op in OPS.items() if name.isidentifier()})
        ns.update({k: v for k, v in vars(formulas).items() if not k.startswith("__")})
        _namespace = ns
    return _namespace


Formula = str | Callable[..., Any]


def _formula_names(formula: Formula) -> list[str]:
    """The names a formula reads: a function's parameters, or an expression's free names."""
    if callable(formula):
        return list(inspect.signature(formula).parameters)
    return _names_in(formula)


def _names_in(expr: str) -> list[str]:
    """The free variable names an expression reads (attributes and calls' callees excluded
    only when they are namespace functions, which are resolved later)."""
    tree = ast.parse(expr, mode="eval")
    lambda_args = {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                   for a in n.args.args}
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - lambda_args)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.strip("_").split("_"))


def _is_tensor(x: Any) -> bool:
    return isinstance(x, _Tensor)


def _tensor_list(x: Any) -> bool:
    return isinstance(x, list | tuple) and len(x) > 0 and all(_is_tensor(t) for t in x)


class Derivative:
    """The derivative of one op: formulas keyed by argument name."""

    _kw_names: tuple[str, ...] = ()

    def __init__(self, op_name: str, formulas: dict[str, Formula | None],
                 arg_names: Sequence[str] | None = None, varargs: str | None = None,
                 defaults: dict[str, Any] | None = None, output_differentiable:
                 Sequence[bool] | None = None, jvp: Any = None) -> None:
        self.op_name = op_name
        # The forward (JVP) rule beside the backward formulas (autograd/jvp.py).
        self.jvp = JvpRule(op_name, jvp) if jvp is not None else None
        self.formulas = {k: v for k, v in formulas.items()}
        self.arg_names = tuple(arg_names or ())
        self.varargs = varargs
        self.defaults = defaults or {}
        self.output_differentiable = output_differentiable
        self.node_class = type(f"{_NODE_NAMES.get(op_name) or _camel(op_name)}Backward0",
                               (OpNode,), {"__slots__": ()})
        self._compiled: dict[str, tuple[Callable, tuple[str, ...]]] = {}
        self._names: dict[str, list[str]] = {k: _formula_names(v)
                                             for k, v in self.formulas.items() if v is not None}
        self._save_cache: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._save_kinds: dict[str, tuple] = {}
        self._missing_defaults: dict[int, dict[str, Any]] = {}   # by positional count
        # the arguments a gradient can flow to (a None formula: not differentiable there)
        self._differentiable_args = tuple(k for k, v in self.formulas.items() if v is not None)

    @classmethod
    def for_function(cls, op_name: str, fn: Callable, formulas: dict[str, Formula | None],
                     output_differentiable: Sequence[bool] | None = None,
                     jvp: Any = None) -> Derivative:
        """A derivative for an op whose frontend is ``fn``: arguments bound by its signature."""
        names, varargs, defaults = [], None, {}
        for p in inspect.signature(fn).parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                varargs = p.name
                continue
            if p.kind is p.VAR_KEYWORD:
                continue
            if p.kind is not p.KEYWORD_ONLY:
                names.append(p.name)
            if p.default is not p.empty:
                defaults[p.name] = p.default
        unknown = set(formulas) - set(names) - ({varargs} if varargs else set())
        if unknown:
            raise RuntimeError(f"derivative of {op_name} names unknown arguments {unknown}")
        d = cls(op_name, formulas, names, varargs, defaults, output_differentiable, jvp)
        d._kw_names = tuple(p.name for p in inspect.signature(fn).parameters.values()
                       if p.kind is p.KEYWORD_ONLY)
        d.check_functions()
        return d

    def check_functions(self) -> None:
        """Function formulas read only names the op binds (checked at declaration)."""
        bound = self._bound_names()
        for arg, formula in self.formulas.items():
            if callable(formula):
                unknown = [n for n in self._names[arg] if n not in bound]
                if unknown:
                    raise RuntimeError(f"the derivative formula of {self.op_name} for {arg!r} "
                                       f"reads {unknown}, which the op does not bind")

    # -- compiling formulas ---------------------------------------------------------------------
    def compiled(self, arg: str) -> tuple[Callable, tuple[str, ...]]:
        c = self._compiled.get(arg)
        if c is None and callable(self.formulas[arg]):
            self.check_functions()
            c = self._compiled[arg] = (self.formulas[arg], tuple(self._names[arg]))
        if c is None:
            expr = self.formulas[arg]
            ns = _formula_namespace()
            bound = self._bound_names()
            unknown = [n for n in self._names[arg]
                       if n not in bound and n not in ns and not hasattr(builtins, n)]
            if unknown:
                raise RuntimeError(f"the derivative formula of {self.op_name} for {arg!r} "
                                   f"uses unknown names {unknown}: {expr}")
            params = tuple(n for n in self._names[arg] if n in bound)
            src = f"lambda {', '.join(params)}: ({expr})"
            c = self._compiled[arg] = (eval(src, ns), params)  # noqa: S307 (our own formulas)
        return c

    def _bound_names(self) -> set[str]:
        names = set(_SPECIAL) | set(self.arg_names) | set(self.defaults)
        names |= {f"out{i}" for i in range(8)}   # one output of a multi-output op
        names |= set(self._kw_names)
        if self.varargs:
            names.add(self.varargs)
        return names | {a + s for a in names for s in _META_SUFFIXES}

    def _saved_names(self, needed: tuple[str, ...]) -> tuple[str, ...]:
        s = self._save_cache.get(needed)
        if s is None:
            bound = self._bound_names()
            s = tuple(sorted({n for a in needed for n in self._names.get(a, ())
                              if n in bound and n not in ("g", "grads")}))
            self._save_cache[needed] = s
        return s

    # -- recording ------------------------------------------------------------------------------
    def record(self, result: Any, args: Sequence[Any], params: Sequence[Any] = ()) -> None:
        """Attach a node to ``result`` of an elementwise op called as (a, b, c, *params).

        The hot path of every differentiable elementwise call, so it avoids the generic
        binding of ``_attach``."""
        edges = []
        slots = []
        names = self.arg_names
        for i, x in enumerate(args):
            if isinstance(x, _Tensor) and x._requires_grad:
                fn = x.grad_fn
                if fn is None:
                    edges.append((grad_accumulator(x), 0))
                elif x._base is not None:   # a view: its history may need regenerating
                    edges.append(edge_of(x))
                else:
                    edges.append((fn, x._output_nr))
                slots.append((names[i], -1, x._shape, x._dtype))
        if not edges:
            return
        needed = tuple(s[0] for s in slots)
        saved_names = self._save_cache.get(needed)
        if saved_names is None:
            saved_names = self._saved_names(needed)
        saved = {}
        if saved_names:
            n_args = len(args)
            for name in saved_names:
                if name == "out":
                    saved[name] = SavedTensor(result, is_output=True)
                    continue
                i = names.index(name) if name in names else -1
                if 0 <= i < n_args:
                    x = args[i]
                    # a number operand is a saved (wrapped-number) tensor in PyTorch: freed
                    # by backward like one
                    saved[name] = SavedTensor(x) if isinstance(x, _Tensor) else _SavedNumber(x)
                elif i >= n_args:
                    saved[name] = params[i - n_args]
                else:
                    values = dict(zip(names, (*args, *params), strict=False))
                    saved[name] = self._save(name, values, (result,))
        node = self.node_class.__new__(self.node_class)
        node._init(tuple(edges))
        node.derivative = self
        node.slots = slots
        node.saved = saved
        result.grad_fn = node
        result._requires_grad = True

    def lane_recorder(self, params: tuple) -> Callable[[Any, Any, Any], None]:
        """``record(result, a, b)`` for a binary op's one-pass calls (the CPU lane of
        kernels/cpu/elementwise.py): ``a`` a tensor, ``b`` a tensor of a's shape and dtype or
        a Python number, the op's default ``params``; ``record.unary(result, a)`` for a unary
        op's (the unary lane). It attaches what :meth:`record` would,
        with the plan (edge slots, where each saved name comes from) made once for each set
        of operands needing grad and kept for the last shape and dtype; saved names of other
        kinds (metadata) take :meth:`record`."""
        names = self.arg_names
        node_class = self.node_class
        plans: list[Any] = [None, None, None, None]   # by 2 * (a needs grad) + (b needs grad)
        grad_state = grad_mode._state
        saved_input = SavedTensor.of_input

        def plan_for(mask: int, shape: tuple, dtype: Any) -> Any:
            needed = tuple(n for n, g in zip(names, (mask & 2, mask & 1), strict=False) if g)
            sources = []   # (name, 0 for a / 1 for b / "out" / (a param's value,))
            for name in self._saved_names(needed):
                if name == "out":
                    sources.append((name, "out"))
                elif name in names[:2]:
                    sources.append((name, names.index(name)))
                elif name in names:
                    sources.append((name, (params[names.index(name) - 2],)))
                else:
                    return None
            p = plans[mask] = (shape, dtype, tuple((n, -1, shape, dtype) for n in needed),
                               tuple(sources))
            return p

        def attach(result: Any, a: Any, b: Any, mask: int) -> None:
            shape, dtype = a._shape, a._dtype
            plan = plans[mask]
            if (plan is None or plan[0] != shape or plan[1] is not dtype) and \
                    (plan := plan_for(mask, shape, dtype)) is None:
                self.record(result, (a,) if mask == 2 and b is None else (a, b), params)
                return
            # The edges first: they hold a leaf's AccumulateGrad, which a saved-tensor pack
            # hook then finds alive (it keeps only a weak reference to it).
            node = node_class.__new__(node_class)
            if mask == 3:
                node._init((edge_of(a), edge_of(b)))
            else:
                x = a if mask == 2 else b
                fn = x.grad_fn   # (edge_of's common case inline: a non-view with a history)
                node._init(((fn, x._output_nr),) if fn is not None and x._base is None
                           else (edge_of(x),))
            saved = {}
            for name, src in plan[3]:
                if src == 0 or src == 1:
                    x = b if src else a
                    saved[name] = _SavedNumber(x) if type(x) is int or type(x) is float \
                        else saved_input(x)
                elif src == "out":
                    saved[name] = SavedTensor(result, is_output=True)
                else:
                    saved[name] = src[0]
            node.derivative = self
            node.slots = plan[2]
            node.saved = saved
            result.grad_fn = node
            result._requires_grad = True

        def record(result: Any, a: Any, b: Any) -> None:
            if not grad_state.enabled:
                return
            ga = a._requires_grad
            gb = type(b) is not int and type(b) is not float and b._requires_grad
            attach(result, a, b, 2 * ga + gb)

        def record_unary(result: Any, a: Any) -> None:
            """``record`` for a unary op's one-pass call (``a`` requires grad)."""
            if grad_state.enabled:
                attach(result, a, None, 2)

        record.unary = record_unary  # type: ignore[attr-defined]
        return record

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        n = len(args)
        missing = self._missing_defaults.get(n)
        if missing is None:   # the defaults of the names n positional arguments leave unset
            missing = self._missing_defaults[n] = {
                k: v for k, v in self.defaults.items() if k not in self.arg_names[:n]}
        values = dict(zip(self.arg_names, args, strict=False))
        if self.varargs:
            values[self.varargs] = tuple(args[len(self.arg_names):])
        values.update(missing)
        if kwargs:
            values.update(kwargs)
        return values

    def record_call(self, result: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        self._attach(result, self.bind(args, kwargs))

    def _attach(self, result: Any, values: dict[str, Any]) -> None:
        edges: list = []
        slots: list = []   # per edge: (arg name, index in a tensor list or -1, shape, dtype)
        needed = []
        for arg in self._differentiable_args:
            x = values.get(arg)
            if isinstance(x, _Tensor):
                if x._requires_grad:
                    fn = x.grad_fn   # (edge_of's common case inline: a non-view with a history)
                    edges.append((fn, x._output_nr) if fn is not None and x._base is None
                                 else edge_of(x))
                    slots.append((arg, -1, x._shape, x._dtype))
                    needed.append(arg)
            elif _tensor_list(x):
                used = False
                for i, t in enumerate(x):
                    if t._requires_grad:
                        edges.append(edge_of(t))
                        slots.append((arg, i, t._shape, t._dtype))
                        used = True
                if used:
                    needed.append(arg)
        if not edges:
            return
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        node = self.node_class.__new__(self.node_class)
        node._init(tuple(edges))
        node.derivative = self
        node.slots = slots
        save = self._save
        node.saved = {name: save(name, values, outputs)
                      for name in self._saved_names(tuple(needed))}
        diff = self.output_differentiable
        if len(outputs) > 1:
            # Zero gradients are materialized only for outputs that can have one.
            node.out_meta = [(t._shape, t._dtype, t.device) if isinstance(t, _Tensor) and
                             (diff is None or diff[i]) and t._dtype.category >= _FLOATING
                             else None for i, t in enumerate(outputs)]
        for i, t in enumerate(outputs):
            if isinstance(t, _Tensor) and (diff is None or diff[i]) and \
                    t._dtype.category >= _FLOATING:   # floating or complex
                t.grad_fn = node
                t._requires_grad = True
                if i:
                    t._output_nr = i
                if t._base is not None:  # a view: remember which history of its base it saw
                    t._base_fn = t._base.grad_fn

    def _save_kind(self, name: str) -> tuple:
        """How a saved name is found, worked out once per name: ("out",), ("outs",),
        ("meta", argument, attribute), ("outn", i) or ("value",)."""
        kind = self._save_kinds.get(name)
        if kind is None:
            bound = set(self.arg_names) | set(self.defaults) | set(self._kw_names)
            kind = ("value",)
            if name in ("out", "outs"):
                kind = (name,)
            elif name[:3] == "out" and name[3:].isdigit():
                kind = ("outn", int(name[3:]))
            elif name not in bound and name != self.varargs:
                for suffix in _META_SUFFIXES:
                    if name.endswith(suffix):
                        kind = ("meta", name[: -len(suffix)], _META_ATTRS[suffix])
                        break
            self._save_kinds[name] = kind
        return kind

    def _save(self, name: str, values: dict[str, Any], outputs: Sequence[Any]) -> Any:
        kind = self._save_kinds.get(name) or self._save_kind(name)
        how = kind[0]
        if how == "value":
            x = values.get(name)
            if isinstance(x, _Tensor):
                return SavedTensor(x)
            if _tensor_list(x):
                return type(x)(SavedTensor(t) for t in x)
            return x
        if how == "out":
            return SavedTensor(outputs[0], is_output=True)
        if how == "meta":
            x = values.get(kind[1])
            if isinstance(x, list | tuple):
                return [getattr(t, kind[2]) for t in x]
            return getattr(x, kind[2]) if x is not None else None
        if how == "outs":
            return [SavedTensor(t, is_output=True, output_nr=i) if _is_tensor(t) else t
                    for i, t in enumerate(outputs)]
        i = kind[1]  # an op whose call gave fewer outputs reads None (max() vs max(d))
        return SavedTensor(outputs[i], is_output=True, output_nr=i) if i < len(outputs) else None


class _SavedNumber:
    """A Python number operand saved for backward (released with the saved tensors)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def unpack(self, node: Node) -> Any:
        return self.value


def _freed_by_backward(value: Any) -> bool:
    return isinstance(value, SavedTensor | _SavedNumber) or (
        isinstance(value, list | tuple) and bool(value) and isinstance(value[0], SavedTensor))


def _unpack(value: Any, node: Node) -> Any:
    if isinstance(value, SavedTensor | _SavedNumber):
        return value.unpack(node)
    if isinstance(value, list | tuple) and value and isinstance(value[0], SavedTensor):
        return type(value)(v.unpack(node) for v in value)
    return value


class OpNode(Node):
    """The backward node of an op declared with a :class:`Derivative`."""

    __slots__ = ("derivative", "slots", "saved")

    def apply(self, grads: list[Any]) -> list[Any]:
        # A released node still runs when its formulas need no saved tensor (PyTorch's rule:
        # a second backward through x + 1 works, through x * y raises).
        if self.out_meta:
            grads = list(grads)
            for i, g in enumerate(grads):
                if g is None and self.out_meta[i] is not None:
                    shape, dtype, device = self.out_meta[i]
                    grads[i] = formulas.zeros_grad(shape, dtype, device)
        env = {"g": grads[0], "grads": grads}
        results: dict[str, Any] = {}
        out = []
        for arg, index, shape, dtype in self.slots:
            r = results.get(arg)
            if r is None and arg not in results:
                fn, names = self.derivative.compiled(arg)
                vals = []
                for n in names:
                    v = env.get(n, _MISSING)
                    if v is _MISSING:
                        sv = self.saved.get(n, _MISSING)
                        if sv is _MISSING:
                            self.check_not_released()
                        # once per node, as PyTorch: a checkpoint's hook hands a tensor out once
                        v = env[n] = _unpack(sv, self)
                    vals.append(v)
                r = results[arg] = fn(*vals)
            gi = r[index] if index >= 0 and r is not None else r
            if gi is not None and (gi._shape != shape or gi._dtype is not dtype):
                gi = formulas.fit_grad(gi, shape, dtype)
            out.append(gi)
        return out

    def release(self) -> None:
        self._released = True  # parameters (alpha, dims...) stay: they are not tensors
        self.saved = {k: v for k, v in self.saved.items() if not _freed_by_backward(v)}



_MISSING = object()


class NotImplementedNode(Node):
    """Attached when an op without a derivative produced a float output from inputs that need
    gradients: backward raises, naming the op, only if a gradient is actually needed."""

    __slots__ = ("op_name",)

    def apply(self, grads: list[Any]) -> list[Any]:
        raise RuntimeError(f"the derivative for '{self.op_name}' is not implemented")


def mark_not_implemented(op_name: str, result: Any, args: Sequence[Any],
                         kwargs: dict[str, Any]) -> None:
    """After an op without a derivative ran with grad enabled: outputs it computed from inputs
    that need gradients get a node that raises if backward reaches it."""
    if not _any_requires_grad(args, kwargs):
        return   # the common case: nothing to attach
    outputs = result if isinstance(result, tuple | list) else (result,)
    inputs = [t for x in (*args, *kwargs.values()) for t in (x if _tensor_list(x) else (x,))
              if _is_tensor(t)]
    # An input handed back as an output keeps its own history.
    pending = [t for t in outputs if _is_tensor(t) and t.grad_fn is None
               and (t._dtype.is_floating_point or t._dtype.is_complex)
               and not any(t is x for x in inputs)]
    if not pending:
        return
    edges = [edge_of(t) for t in inputs if t._requires_grad]
    if edges:
        attach_raising_node(NotImplementedNode, op_name, pending, edges)


def attach_raising_node(node_cls: type, op_name: str, outputs: Sequence[Any],
                        edges: Sequence[Any]) -> None:
    """Make one ``node_cls`` (a NotImplementedNode) with ``edges`` the history of ``outputs``:
    backward raises, naming ``op_name``, only if it reaches them."""
    node = node_cls.__new__(node_cls)
    node._init(tuple(edges))
    node.op_name = op_name
    for i, t in enumerate(outputs):
        t.grad_fn = node
        t._requires_grad = True
        t._output_nr = i


class NoDerivative:
    """The derivative slot of an elementwise op without formulas: float outputs computed from
    inputs that need gradients get a node that raises in backward."""

    def __init__(self, op_name: str) -> None:
        self.op_name = op_name

    def record(self, result: Any, args: Sequence[Any], params: Sequence[Any] = ()) -> None:
        if result._dtype.is_floating_point or result._dtype.is_complex:
            mark_not_implemented(self.op_name, result, args, {})


def differentiable(fn: Callable, derivative: Derivative | None, op_name: str,
                   renames: dict[str, str] | None = None) -> Callable:
    """Wrap an op frontend so calls record the op's node (or a not-implemented node).
    ``renames`` maps keyword aliases to the frontend's names (NumPy's ``axis``/``keepdims``
    for ``dim``/``keepdim``, as PyTorch accepts them)."""
    import functools

    state = grad_mode._state
    fw_state = _fw_state
    vmap = _VMAP
    hook = _OP_HOOK   # below autograd: the op's computation may go to an op hook handler
    if derivative is None:
        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if kwargs and renames:
                kwargs = rename_keywords(kwargs, renames, op_name)
            if vmap.depth:   # gt.func.vmap: batched arguments go to the op's batching rule
                result = vmap.dispatch(op_name, checked, args, kwargs)
                if result is not NotImplemented:
                    return result
            # No op hook here: a composite is not seen (PyTorch's CompositeImplicitAutograd);
            # the ops it calls are, and record its graph.
            result = fn(*args, **kwargs)
            if state.enabled:
                mark_not_implemented(op_name, result, args, kwargs)
            if fw_state.active:   # built from differentiable ops, whose tangents it must have
                check_tangents(op_name, result, args, kwargs)
            return result
        return checked

    @functools.wraps(fn)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        if kwargs and renames:
            kwargs = rename_keywords(kwargs, renames, op_name)
        if vmap.depth:   # gt.func.vmap: batched arguments go to the op's batching rule
            result = vmap.dispatch(op_name, recorded, args, kwargs)
            if result is not NotImplemented:
                return result
        if fw_state.active:   # forward AD: the primal call (this wrapper again), then the rule
            return dual_call(derivative, recorded, args, kwargs)
        if not state.enabled or not _any_requires_grad(args, kwargs):
            try:
                return fn(*args, **kwargs) if not hook.active else \
                    hook.call(op_name, args, kwargs, lambda: fn(*args, **kwargs))
            except Exception as exc:  # PyTorch's error for a limited dtype (uint16, float8...)
                raise limited_error(op_name, args, kwargs, exc) from None
        if kwargs.get("out") is not None:
            raise RuntimeError(f"{op_name}(): functions with out=... arguments don't support "
                               f"automatic differentiation, but one of the arguments requires "
                               f"grad.")
        state.enabled = False
        try:
            result = fn(*args, **kwargs) if not hook.active else \
                hook.call(op_name, args, kwargs, lambda: fn(*args, **kwargs))
        finally:
            state.enabled = True
        derivative.record_call(result, args, kwargs)
        return result
    return recorded


def limited_error(op_name: str, args: Sequence[Any], kwargs: dict[str, Any],
                  exc: Exception) -> Exception:
    """``exc``, or PyTorch's NotImplementedError when an operand has a limited dtype that the
    op has no kernel for (gputensor/_limited.py); a cheap path taken only on failure."""
    from gputensor import _limited
    return _limited.translate(op_name, (*args, *kwargs.values()), exc)


def rename_keywords(kwargs: dict[str, Any], renames: dict[str, str], op_name: str
                    ) -> dict[str, Any]:
    """``kwargs`` with each alias in ``renames`` under the name it stands for."""
    for alias, name in renames.items():
        if alias in kwargs:
            if name in kwargs:
                raise TypeError(f"{op_name}() got both '{name}' and its alias '{alias}'")
            kwargs[name] = kwargs.pop(alias)
    return kwargs


def _any_requires_grad(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    # Inline isinstance checks against a plain tuple: this runs on every op call.
    for x in args:
        if isinstance(x, _Tensor):
            if x._requires_grad:
                return True
        elif isinstance(x, _SEQUENCES):
            for t in x:
                if isinstance(t, _Tensor) and t._requires_grad:
                    return True
    if kwargs:
        for x in kwargs.values():
            if isinstance(x, _Tensor):
                if x._requires_grad:
                    return True
            elif isinstance(x, _SEQUENCES):
                for t in x:
                    if isinstance(t, _Tensor) and t._requires_grad:
                        return True
    return False


_SEQUENCES = (list, tuple)
