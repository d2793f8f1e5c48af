"""Forward (JVP) rules, declared beside each op's backward formulas, and the code that runs them.

An op's ``jvp=`` slot (``@op(grad=..., jvp=...)``, ``elementwise(..., jvp=...)``) takes, as
PyTorch's derivatives.yaml does:

- ``"auto_element_wise"``: a pointwise op whose backward formulas are linear in ``g``: the
  tangent is ``sum_i conj(formula_i(g=conj(<arg_i>_t)))`` (the conjugations turn PyTorch's
  conjugate-Wirtinger gradient back into a JVP). Elementwise ops with a ``grad`` default to it.
- ``"auto_linear"``: the op is linear in its differentiable inputs: the op itself applied to
  their tangents (zeros for inputs without one; a differentiable Python-number argument, such
  as ``masked_fill``'s value, becomes 0).
- ``"transpose"``: the JVP is the transpose of the op's own VJP: with ``v`` a free output
  cotangent, ``J t = d/dv Re<J^H v, t>``, computed by differentiating the backward formulas
  (which are written with differentiable ops) once more, as TensorFlow's ForwardAccumulator
  does for ops without a forward function. Costs one extra backward per call: kept only for
  the LU-based linalg ops and ``scatter_reduce``.
- an expression string, or a function whose parameters are the names it reads, giving the
  output's tangent (a tuple, one entry per output, for multi-output ops; None for an output
  without one). Names: ``<arg>_t``, the tangent of a differentiable tensor argument (zeros when
  it has none; a list for a tensor-list argument); every argument by name (primals);
  ``out``/``outs``/``out0``...; ``<arg>_shape``/``_dtype``/``_device``; in expressions the
  public ``gputensor`` functions and op frontends, the ``autograd.formulas`` helpers and the
  public functions of ``autograd.jvp_formulas``, ``jvp_reductions``, ``jvp_nn``,
  ``jvp_linalg`` and ``jvp_sparse``.

Rules run on the primals with propagation suspended (``forward_ad.suspended``) but with grad
mode as the caller has it, so a tangent that requires grad gets a backward graph (double
differentiation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gputensor._tensor import Tensor

from . import grad_mode
from .forward_ad import _state, set_tangent, suspended, tangent_of

AUTO_ELEMENT_WISE = "auto_element_wise"
AUTO_LINEAR = "auto_linear"
TRANSPOSE = "transpose"
_KINDS = (AUTO_ELEMENT_WISE, AUTO_LINEAR, TRANSPOSE)
_META_SUFFIXES = ("_shape", "_dtype", "_device")

JvpSpec = str | Callable[..., Any] | tuple[Any, ...]


class JvpRule:
    """One op's forward rule (see the module docstring for the forms ``spec`` takes)."""

    __slots__ = ("op_name", "spec", "kind", "_compiled", "_names")

    def __init__(self, op_name: str, spec: JvpSpec) -> None:
        self.op_name = op_name
        self.spec = spec
        self.kind = spec if isinstance(spec, str) and spec in _KINDS else "formula"
        self._compiled: list[tuple[Callable, tuple[str, ...]] | None] | None = None
        formulas = spec if isinstance(spec, tuple) else (spec,)
        from .derivatives import _formula_names
        self._names: list[list[str] | None] = [] if self.kind != "formula" else \
            [None if f is None else _formula_names(f) for f in formulas]

    def names(self) -> set[str]:
        """Every name the explicit formulas read (for the declaration-time checks)."""
        return {n for ns in self._names if ns for n in ns}

    def compiled(self, bound: set[str]) -> list[tuple[Callable, tuple[str, ...]] | None]:
        """The formulas as (function, names it reads), compiled on first use."""
        if self._compiled is None:
            formulas = self.spec if isinstance(self.spec, tuple) else (self.spec,)
            self._compiled = [None if f is None else _compile(self.op_name, f, names, bound)
                              for f, names in zip(formulas, self._names, strict=True)]
        return self._compiled


_namespace: dict[str, Any] | None = None


def _jvp_namespace() -> dict[str, Any]:
    global _namespace
    if _namespace is None:
        from . import jvp_formulas, jvp_linalg, jvp_nn, jvp_reductions, jvp_sparse
        from .derivatives import _formula_namespace
        ns = dict(_formula_namespace())
        for module in (jvp_formulas, jvp_linalg, jvp_nn, jvp_reductions, jvp_sparse):
            ns.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
        _namespace = ns
    return _namespace


def _compile(op_name: str, formula: Any, names: list[str], bound: set[str]
             ) -> tuple[Callable, tuple[str, ...]]:
    if callable(formula):
        unknown = [n for n in names if n not in bound]
        if unknown:
            raise RuntimeError(f"the jvp formula of {op_name} reads {unknown}, which the op "
                               f"does not bind")
        return formula, tuple(names)
    import builtins
    ns = _jvp_namespace()
    unknown = [n for n in names if n not in bound and n not in ns and not hasattr(builtins, n)]
    if unknown:
        raise RuntimeError(f"the jvp formula of {op_name} uses unknown names {unknown}: "
                           f"{formula}")
    params = tuple(n for n in names if n in bound)
    fn = eval(f"lambda {', '.join(params)}: ({formula})", ns)  # noqa: S307 (our own formulas)
    return fn, params


def bound_names(derivative: Any) -> set[str]:
    """The names a jvp formula of ``derivative``'s op may read."""
    names = derivative._bound_names()
    return names | {a + "_t" for a in derivative.arg_names} | \
        ({derivative.varargs + "_t"} if derivative.varargs else set())


# -- the entry points the op wrapper and the elementwise frontend call ------------------------
def dual_call(derivative: Any, call: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run an op that has a derivative while a level is active: the primal op with
    propagation suspended, then its rule for the outputs' tangents."""
    values = derivative.bind(args, kwargs)
    tangents = _input_tangents(derivative, values)
    with suspended():
        result = call(*args, **kwargs)
        if tangents:
            _attach(derivative, result, values, tangents)
    return result


def elementwise_jvp(op: Any, result: Tensor, args: Sequence[Any], params: Sequence[Any]) -> None:
    """The tangent of an elementwise op's ``result`` (called by the elementwise frontend)."""
    derivative = op.derivative
    if getattr(derivative, "jvp", None) is None:
        check_tangents(op.name, result, args, {})
        return
    values = dict(zip(derivative.arg_names, (*args, *params), strict=False))
    tangents = _input_tangents(derivative, values)
    if tangents:
        with suspended():
            _attach(derivative, result, values, tangents)


def check_tangents(op_name: str, result: Any, args: Sequence[Any], kwargs: dict) -> None:
    """After an op without a derivative ran: float outputs computed from dual inputs must
    have got tangents from the differentiable ops the op is built from."""
    inputs = [t for x in (*args, *kwargs.values())
              for t in (x if isinstance(x, list | tuple) else (x,))]
    if not any(tangent_of(t) is not None for t in inputs):
        return
    outputs = result if isinstance(result, list | tuple) else (result,)
    for t in outputs:
        if isinstance(t, Tensor) and (t._dtype.is_floating_point or t._dtype.is_complex) \
                and tangent_of(t) is None and not any(t is x for x in inputs):
            raise RuntimeError(f"Trying to use forward AD with {op_name} that does not support "
                               f"it because it has not been implemented yet.")


def function_jvp(cls: type, ctx: Any, args: tuple, outputs: tuple) -> None:
    """Tangents of a custom Function's outputs from its ``jvp(ctx, *input_tangents)``."""
    tangents = [tangent_of(a) for a in args]
    if all(t is None for t in tangents):
        return
    if getattr(cls.jvp, "__func__", cls.jvp) is _FUNCTION_BASE_JVP[0]:
        raise NotImplementedError(f"You must implement the jvp function for custom "
                                  f"autograd.Function to use it with forward mode AD "
                                  f"({cls.__name__}).")
    with suspended():
        result = cls.jvp(ctx, *tangents)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(outputs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(result)} tangents for "
                           f"{len(outputs)} outputs")
    for o, t in zip(outputs, result, strict=True):
        if isinstance(o, Tensor) and t is not None and (o._dtype.is_floating_point or
                                                        o._dtype.is_complex):
            if tuple(t._shape) != tuple(o._shape):
                raise RuntimeError(f"{cls.__name__}.jvp returned a tangent of shape "
                                   f"{list(t._shape)} for an output of shape {list(o._shape)}")
            set_tangent(o, _fit(t, o))


_FUNCTION_BASE_JVP: list[Any] = [None]   # Function.jvp itself (set by autograd.function)


# -- evaluating rules -----------------------------------------------------------------------
def _input_tangents(derivative: Any, values: dict[str, Any]) -> dict[str, Any]:
    """arg name -> its tangent (a list with None holes for tensor lists), for the inputs
    that carry one."""
    found: dict[str, Any] = {}
    for name, formula in derivative.formulas.items():
        if formula is None:   # not differentiable there (an index, a mask, a target)
            continue
        x = values.get(name)
        if isinstance(x, Tensor):
            t = tangent_of(x)
            if t is not None:
                found[name] = t
        elif isinstance(x, list | tuple) and x and isinstance(x[0], Tensor):
            ts = [tangent_of(e) for e in x]
            if any(t is not None for t in ts):
                found[name] = ts
    return found


def _attach(derivative: Any, result: Any, values: dict[str, Any],
            tangents: dict[str, Any]) -> None:
    outputs = result if isinstance(result, tuple | list) else (result,)
    rule = derivative.jvp
    if rule is None:
        raise RuntimeError(f"Trying to use forward AD with {derivative.op_name} that does not "
                           f"support it because it has not been implemented yet.")
    kind = rule.kind
    if kind == AUTO_ELEMENT_WISE:
        out_t = (_auto_element_wise(derivative, values, tangents, outputs[0]),)
    elif kind == AUTO_LINEAR:
        out_t = _auto_linear(derivative, values, tangents)
    elif kind == TRANSPOSE:
        out_t = _transpose(derivative, values, tangents, outputs)
    else:
        out_t = _formula(derivative, rule, values, tangents, outputs)
    if not isinstance(out_t, tuple | list):
        out_t = (out_t,)
    for o, t in zip(outputs, out_t, strict=False):
        if isinstance(o, Tensor) and t is not None and (o._dtype.is_floating_point or
                                                        o._dtype.is_complex):
            t = _fit(t, o)
            set_tangent(o, t)
            _share_with_saved_output(o, t)


def _share_with_saved_output(out: Tensor, tangent: Tensor) -> None:
    """The alias of ``out`` its node saved gets ``out``'s tangent too, so a backward run
    inside the level (forward-over-reverse) sees it, as PyTorch's SavedVariable keeps it."""
    from .graph import SavedTensor
    saved = getattr(out.grad_fn, "saved", None)
    if not isinstance(saved, dict):
        return
    for value in saved.values():
        for sv in (value if isinstance(value, list) else (value,)):
            if isinstance(sv, SavedTensor) and sv.is_output and sv.hooks is None and \
                    sv.output_nr == out._output_nr:
                set_tangent(sv.tensor, tangent)


def _fit(t: Tensor, out: Tensor) -> Tensor:
    """A tangent in its output's dtype and shape (the real part for a real output, as
    PyTorch's handle_r_to_c)."""
    if t._dtype.is_complex and not out._dtype.is_complex:
        t = t.real
    if t._dtype is not out._dtype:
        t = t.to(out._dtype)
    if t._shape != out._shape:
        t = t.expand(out._shape).clone()
    return t


def _zeros_like(x: Tensor) -> Tensor:
    import gputensor as gt
    return gt.zeros(x._shape, dtype=x._dtype, device=x.device)


def _full_tangent(x: Any, t: Any) -> Any:
    """The tangent of argument ``x`` with zeros for missing ones (lists element by element)."""
    if isinstance(x, Tensor):
        return t if t is not None else _zeros_like(x)
    if isinstance(x, list | tuple) and x and isinstance(x[0], Tensor):
        ts = t if t is not None else [None] * len(x)
        return type(x)(ti if ti is not None else _zeros_like(xi) for xi, ti in zip(x, ts,
                                                                                   strict=True))
    return 0 if isinstance(x, int | float | complex) and not isinstance(x, bool) else x


def _differentiable(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x._dtype.is_floating_point or x._dtype.is_complex
    if isinstance(x, list | tuple) and x and isinstance(x[0], Tensor):
        return _differentiable(x[0])
    return isinstance(x, float | complex)


def _lookup(name: str, values: dict[str, Any], outputs: Sequence[Any]) -> Any:
    if name == "out":
        return outputs[0]
    if name == "outs":
        return tuple(outputs)
    if name in values:
        return values[name]
    if name[:3] == "out" and name[3:].isdigit():
        i = int(name[3:])
        return outputs[i] if i < len(outputs) else None
    for suffix in _META_SUFFIXES:
        if name.endswith(suffix):
            x = values.get(name[: -len(suffix)])
            attr = suffix[1:]
            if isinstance(x, list | tuple):
                return [getattr(t, attr) for t in x]
            return getattr(x, attr) if x is not None else None
    return None


def _auto_element_wise(derivative: Any, values: dict[str, Any], tangents: dict[str, Any],
                       out: Tensor) -> Any:
    from .formulas import cj
    total = None
    for arg, t in tangents.items():
        fn, names = derivative.compiled(arg)
        env = {"g": cj(t), "grads": [cj(t)]}
        term = cj(fn(*[env[n] if n in env else _lookup(n, values, (out,)) for n in names]))
        total = term if total is None else total + term
    return total


def _auto_linear(derivative: Any, values: dict[str, Any], tangents: dict[str, Any]) -> Any:
    from gputensor.kernels.registry import OPS
    call_values = dict(values)
    for arg in derivative.formulas:
        if derivative.formulas[arg] is not None and _differentiable(values.get(arg)):
            call_values[arg] = _full_tangent(values.get(arg), tangents.get(arg))
    names = derivative.arg_names
    args = [call_values[n] for n in names if n in call_values]
    if derivative.varargs:
        args.extend(call_values.get(derivative.varargs, ()))
    kwargs = {k: call_values[k] for k in derivative._kw_names if k in call_values}
    return OPS[derivative.op_name].frontend(*args, **kwargs)


def _formula(derivative: Any, rule: JvpRule, values: dict[str, Any], tangents: dict[str, Any],
             outputs: Sequence[Any]) -> tuple:
    compiled = rule.compiled(bound_names(derivative))
    env: dict[str, Any] = {}
    results = []
    for c in compiled:
        if c is None:
            results.append(None)
            continue
        fn, names = c
        vals = []
        for n in names:
            v = env.get(n, _MISSING)
            if v is _MISSING:
                if n[-2:] == "_t" and n[:-2] in values:
                    v = _full_tangent(values[n[:-2]], tangents.get(n[:-2]))
                else:
                    v = _lookup(n, values, outputs)
                env[n] = v
            vals.append(v)
        r = fn(*vals)
        if len(compiled) == 1 and isinstance(r, tuple | list):
            return tuple(r)
        results.append(r)
    return tuple(results)


_MISSING = object()


def _transpose(derivative: Any, values: dict[str, Any], tangents: dict[str, Any],
               outputs: Sequence[Any]) -> tuple:
    """``J t`` as the gradient, with respect to a free cotangent ``v``, of Re<vjp(v), t>."""
    import gputensor as gt

    from .engine import grad as autograd_grad
    from .formulas import cj, fit_grad
    diff = derivative.output_differentiable
    cots = [gt.zeros(o._shape, dtype=o._dtype, device=o.device).requires_grad_()
            if isinstance(o, Tensor) and (diff is None or diff[i]) and
            (o._dtype.is_floating_point or o._dtype.is_complex) else None
            for i, o in enumerate(outputs)]
    live = [v for v in cots if v is not None]
    keep_graph = grad_mode.is_grad_enabled() and _any_requires_grad(values, tangents)
    with grad_mode.enable_grad():
        total = None
        for arg, t in tangents.items():
            fn, names = derivative.compiled(arg)
            env = {"g": cots[0], "grads": cots}
            w = fn(*[env[n] if n in env else _lookup(n, values, outputs) for n in names])
            pairs = zip(w, t, values[arg], strict=True) if isinstance(t, list) else \
                ((w, t, values[arg]),)
            for wi, ti, xi in pairs:
                if wi is None or ti is None:
                    continue
                wi = fit_grad(wi, xi._shape, xi._dtype)
                term = (cj(wi) * ti).sum()
                term = term.real if term._dtype.is_complex else term
                total = term if total is None else total + term
        if total is None or not total._requires_grad:
            return tuple(None if v is None else _zeros_like(v) for v in cots)
        got = autograd_grad(total, live, create_graph=keep_graph, allow_unused=True)
    it = iter(got)
    out = []
    for v in cots:
        if v is None:
            out.append(None)
            continue
        gi = next(it)
        out.append(_zeros_like(v) if gi is None else gi)
    return tuple(out)


def _any_requires_grad(values: dict[str, Any], tangents: dict[str, Any]) -> bool:
    def req(x: Any) -> bool:
        if isinstance(x, Tensor):
            return x._requires_grad
        return isinstance(x, list | tuple) and any(req(e) for e in x)
    return any(req(v) for v in values.values()) or any(req(t) for t in tangents.values())


def active() -> bool:
    """Whether ops propagate tangents right now."""
    return _state.active


def take_tangent(self: Tensor, result: Tensor) -> None:
    """After an in-place op wrote ``result`` into ``self``: ``self``'s tangent becomes
    ``result``'s, written in place so that views of ``self`` (and its base) see it. A view of
    a base without a tangent gives the base a zero tangent first, as PyTorch does."""
    _write_tangent(self, tangent_of(result))


def fill_tangent(self: Tensor, value: Any = None) -> None:
    """After ``fill_``/``zero_`` or an in-place sampler overwrote ``self`` with values that
    do not depend on it: its tangent becomes ``value``'s (a 0-dim tensor of ``fill_``), or
    zeros, as PyTorch's ``self_t.fill_(value_t)`` / ``self_t.zero_()``."""
    _write_tangent(self, tangent_of(value))


def _write_tangent(self: Tensor, new: Tensor | None) -> None:
    old = tangent_of(self)
    if new is None and old is None:
        return
    with suspended():
        if new is None:
            new = _zeros_like(self)
        if old is None and self._base is not None:
            if not _has_own_tangent(self._base):
                set_tangent(self._base, _strided_zeros(self._base))
            old = tangent_of(self)   # the view's region of the base's tangent
        if old is None:   # a copy: the result's tangent may be an input's own
            set_tangent(self, _fit(new, self).clone())
        elif old is not new:
            old.copy_(_fit(new, self))


def _has_own_tangent(x: Tensor) -> bool:
    fg = x.__dict__.get("_fw_grad")
    return fg is not None and fg[0] is _state.token


def _strided_zeros(x: Tensor) -> Tensor:
    """Zeros with ``x``'s strides (so views of ``x`` map onto views of them)."""
    import gputensor as gt
    z = gt.empty_strided(x._shape, x._stride, dtype=x._dtype, device=x.device)
    return z.zero_()
