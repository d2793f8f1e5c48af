"""gt.library: user-defined ops, shaped like ``torch.library``.

    @gt.library.custom_op("mylib::scale", mutates_args=(), cost=lambda inputs, out: (...))
    def scale(x: gt.Tensor, a: float) -> gt.Tensor:
        return x * a                          # the default implementation, any device

    @scale.register_kernel("cuda")            # a device-specific implementation
    def _(x, a):
        out = gt.empty_like(x)
        KERNEL(grid, block, (x, out, a, x.numel()))   # a gt.cuda.compile_kernel kernel
        return out

    scale.register_autograd(lambda ctx, g: (g * ctx.a, None),
                            setup_context=lambda ctx, inputs, output: setattr(ctx, "a", inputs[1]))
    scale.register_fake(lambda x, a: gt.empty_like(x))
    gt.ops.mylib.scale(x, 2.0)                # the same op, like torch.ops

How an op runs (one call):
- its arguments are bound to the function's signature (defaults filled in);
- the device-specific implementations live in the backend kernel tables
  (``kernels/registry.py`` BACKENDS) under the op's qualified name, like every built-in kernel:
  the op dispatches on its tensors' device type (CUDA when any tensor is on CUDA, else the
  first tensor's; an op without tensors uses its ``device`` argument, else the default
  device), so the profiler records it as a kernel event named ``"ns::name"`` with the cost
  model given by ``cost=``/``register_cost`` (``cost(inputs, output) -> (bytes moved, flops)``,
  the contract of the built-in ops' models: ``inputs`` are the arguments in signature order,
  ``output`` what the implementation returned; without one, bytes of every tensor touched),
  and user kernel launches inside it nest under that event;
- with ``register_autograd``, a call whose tensor inputs need gradients records one node built
  on ``gt.autograd.Function`` (``setup_context(ctx, inputs, output)`` in the forward pass,
  ``backward(ctx, *grads)`` returning one gradient per positional input); without it, the op
  is opaque to autograd (the implementation runs under no_grad) and backward through its
  outputs raises, naming the op;
- outputs must be new tensors (never an input or a view of one), and the tensors named in
  ``mutates_args`` get their version counters bumped after the call, so autograd sees the
  in-place write even when a CUDA kernel made it.

``register_fake``: gputensor has no meta or fake tensors and never runs a fake implementation on
its own (no tracing or compiling stage needs one); :func:`opcheck` uses it, checking that the
shapes, dtypes, devices and strides it promises are what the real implementation returns.
"""

from __future__ import annotations

import collections.abc
import inspect
import numbers
import re
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from gputensor._op_hook import OP_HOOK
from gputensor._tensor import Tensor
from gputensor.autograd import grad_mode
from gputensor.autograd.derivatives import NotImplementedNode, attach_raising_node
from gputensor.autograd.function import Function
from gputensor.autograd.graph import edge_of
from gputensor.kernels import registry
from gputensor.kernels.registry import memory_cost

__all__ = ["CustomOpDef", "OpCheckError", "custom_op", "infer_schema", "memory_cost", "opcheck",
           "ops", "register_autograd", "register_cost", "register_fake", "register_kernel"]

DEVICE_TYPES = ("cpu", "cuda")
_NAME = re.compile(r"([A-Za-z_]\w*)::([A-Za-z_]\w*)")
_REGISTRY: dict[str, CustomOpDef] = {}

CostFn = Callable[[tuple, Any], tuple[int, int]]


# ---- schema inference (torch.library.infer_schema) ----------------------------------------------
def _is_union(ann: Any) -> bool:
    return typing.get_origin(ann) in (typing.Union, types.UnionType)


def _scalar_type(ann: Any) -> str | None:
    from gputensor._device import device as Device
    from gputensor._dtype import dtype as Dtype

    if isinstance(ann, type) and issubclass(ann, Tensor):
        return "Tensor"
    simple = {int: "SymInt", float: "float", bool: "bool", str: "str", Dtype: "ScalarType",
              Device: "Device", numbers.Number: "Scalar", complex: "complex"}
    if ann in simple:
        return simple[ann]
    if _is_union(ann) and set(typing.get_args(ann)) <= {int, float, bool, complex}:
        return "Scalar"
    return None


def _param_type(ann: Any) -> str | None:
    """The schema type of an argument annotation, None when unsupported."""
    if _is_union(ann):
        args = typing.get_args(ann)
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) < len(args):  # Optional[...]
            inner = rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007
            t = _param_type(inner)
            return None if t is None or t.endswith("?") else t + "?"
    origin = typing.get_origin(ann)
    if origin in (list, collections.abc.Sequence):
        (item,) = typing.get_args(ann) or (None,)
        t = _scalar_type(item)
        return None if t in (None, "str", "Device", "ScalarType") else t + "[]"
    return _scalar_type(ann)


def _return_type(ann: Any) -> tuple[str, str, int] | None:
    """(schema text, kind, count) of a return annotation: kind is "none", "tensor", "tuple",
    "list" or "scalar"."""
    if ann is None or ann is type(None):
        return "()", "none", 0
    if typing.get_origin(ann) is tuple:
        items = typing.get_args(ann)
        parts = [_param_type(a) for a in items]
        if not items or any(p is None or p.endswith("?") for p in parts):
            return None
        return f"({', '.join(parts)})", "tuple", len(items)
    t = _param_type(ann)
    if t is None or t.endswith("?"):
        return None
    if t == "Tensor":
        return t, "tensor", 1
    return t, ("list" if t == "Tensor[]" else "scalar"), 1


def _default_text(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(fn, eval_str=True)
    except (NameError, TypeError):
        return inspect.signature(fn)


def _mutated_names(mutates_args: str | Iterable[str], sig: inspect.Signature) -> frozenset[str]:
    if mutates_args == "unknown":
        return frozenset()  # _infer: every Tensor argument
    if isinstance(mutates_args, str):
        raise ValueError(f"mutates_args must be a collection of argument names or 'unknown', "
                         f"got the string {mutates_args!r} (write ({mutates_args!r},))")
    names = frozenset(mutates_args)
    unknown = sorted(names - set(sig.parameters))
    if unknown:
        raise ValueError(f"mutates_args names {unknown}, which are not parameters of the "
                         f"function ({', '.join(sig.parameters)})")
    return names


def _infer(fn: Callable[..., Any], mutates_args: str | Iterable[str]
           ) -> tuple[str, frozenset[str], str, int]:
    """(schema, mutated names, return kind, return count) from ``fn``'s annotations."""
    sig = _signature(fn)
    mutated = _mutated_names(mutates_args, sig)
    parts: list[str] = []
    star = False
    for index, p in enumerate(sig.parameters.values()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"infer_schema(func): Parameter {p.name} is *args or **kwargs, "
                             f"which a custom op cannot take. Got func with signature {sig}")
        if p.annotation is p.empty:
            raise ValueError(f"infer_schema(func): Parameter {p.name} must have a type "
                             f"annotation. Got func with signature {sig}")
        t = _param_type(p.annotation)
        if t is None:
            raise ValueError(f"infer_schema(func): Parameter {p.name} has unsupported type "
                             f"{p.annotation}. The valid types are: Tensor, int, float, bool, "
                             f"str, dtype, device, Number, Optional and list of those (no "
                             f"Optional[str]/list[str]). Got func with signature {sig}")
        if mutates_args == "unknown" and t.startswith("Tensor"):
            mutated |= {p.name}
        if p.name in mutated:
            if not t.startswith("Tensor"):
                raise ValueError(f"mutates_args names {p.name!r}, which is a {t}: only Tensor "
                                 f"arguments can be mutated")
            t = f"Tensor(a{index}!){t[6:]}"
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = f"{t} {p.name}"
        if p.default is not p.empty:
            text += f"={_default_text(p.default)}"
        parts.append(text)
    if sig.return_annotation is sig.empty:
        raise ValueError(f"infer_schema(func): the return type must be annotated (-> Tensor, "
                         f"-> None, -> tuple[Tensor, Tensor], ...). Got func with signature "
                         f"{sig}")
    ret = _return_type(sig.return_annotation)
    if ret is None:
        raise ValueError(f"infer_schema(func): Return has unsupported type "
                         f"{sig.return_annotation}. The valid types are: Tensor, list[Tensor], "
                         f"tuple[Tensor, ...], int, float, bool, None")
    return f"({', '.join(parts)}) -> {ret[0]}", mutated, ret[1], ret[2]


def infer_schema(prototype_function: Callable[..., Any], /, *,
                 mutates_args: str | Iterable[str], op_name: str | None = None) -> str:
    """The schema of a function from its type annotations, as ``torch.library.infer_schema``
    writes it: ``"(Tensor x, float a) -> Tensor"`` (``op_name`` prefixed when given)."""
    schema = _infer(prototype_function, mutates_args)[0]
    return f"{op_name}{schema}" if op_name else schema


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _parse_schema(schema: str, sig: inspect.Signature) -> tuple[str, frozenset[str], str, int]:
    """A given schema string: its argument names must be the function's, in order; the ones
    annotated ``(a!)`` are the mutated ones."""
    m = re.fullmatch(r"\s*\((.*)\)\s*->\s*(.+?)\s*", schema, re.S)
    if m is None:
        raise ValueError(f"schema {schema!r} is not of the form '(Type name, ...) -> Return'")
    names, mutated = [], set()
    for part in _split_top(m.group(1)):
        if part == "*":
            continue
        decl = part.split("=", 1)[0].strip()
        pm = re.fullmatch(r"(.+?)\s+([A-Za-z_]\w*)", decl)
        if pm is None:
            raise ValueError(f"schema {schema!r}: cannot read the argument {part!r}")
        names.append(pm.group(2))
        if "!" in pm.group(1):
            mutated.add(pm.group(2))
    if names != list(sig.parameters):
        raise ValueError(f"schema {schema!r} names the arguments {names}; the function takes "
                         f"{list(sig.parameters)}")
    ret = m.group(2).strip()
    if ret == "()":
        kind, count = "none", 0
    elif ret.startswith("("):
        kind, count = "tuple", len(_split_top(ret[1:-1]))
    elif ret.startswith("Tensor") and ret.endswith("[]"):
        kind, count = "list", 1
    elif ret.startswith("Tensor"):
        kind, count = "tensor", 1
    else:
        kind, count = "scalar", 1
    return f"({m.group(1).strip()}) -> {ret}", frozenset(mutated), kind, count


# ---- helpers -------------------------------------------------------------------------------------
def _tensors_of(value: Any) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for t in value if isinstance(t, Tensor)]
    return []


def _device_types(device_types: str | Sequence[str] | None) -> tuple[str | None, ...]:
    if device_types is None:
        return (None,)
    items = (device_types,) if isinstance(device_types, str) else tuple(device_types)
    for d in items:
        if d not in DEVICE_TYPES:
            raise ValueError(f"unknown device type {d!r}: gputensor has {', '.join(DEVICE_TYPES)}")
    return items


class _NoAutogradNode(NotImplementedNode):
    """On the outputs of a custom op without ``register_autograd`` that was called with inputs
    needing gradients: backward raises, naming the op, only if it reaches the node."""

    __slots__ = ()

    def apply(self, grads: list[Any]) -> list[Any]:
        raise RuntimeError(f"Trying to backward through {self.op_name} but no autograd formula "
                           f"was registered. Please use register_autograd to add one.")


def _mark_no_autograd(qualname: str, out: Any, inputs: Sequence[Any]) -> None:
    outputs = out if isinstance(out, tuple | list) else (out,)
    pending = [t for t in outputs if isinstance(t, Tensor) and t.grad_fn is None
               and (t._dtype.is_floating_point or t._dtype.is_complex)]
    edges = [edge_of(t) for x in inputs for t in _tensors_of(x) if t._requires_grad]
    if not pending or not edges:
        return
    attach_raising_node(_NoAutogradNode, qualname, pending, edges)


# ---- the op --------------------------------------------------------------------------------------
class CustomOpDef:
    """A custom op made by :func:`custom_op` (``torch.library.CustomOpDef``): call it like the
    function it wraps; register implementations, autograd, a fake and a cost on it."""

    def __init__(self, namespace: str, name: str, fn: Callable[..., Any], schema: str,
                 mutated: frozenset[str], ret_kind: str, ret_count: int) -> None:
        self._namespace = namespace
        self._name = name
        self._qualname = f"{namespace}::{name}"
        self._init_fn = fn
        self._schema = schema
        self._mutated = mutated
        self._ret_kind = ret_kind
        self._ret_count = ret_count
        self._sig = _signature(fn)
        params = list(self._sig.parameters.values())
        self._names = tuple(p.name for p in params)
        self._kw_names = tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY)
        self._n_pos = len(params) - len(self._kw_names)
        self._impls: dict[str | None, Callable[..., Any]] = {}
        self._backward_fn: Callable[..., Any] | None = None
        self._setup_context_fn: Callable[..., Any] | None = None
        self._autograd_cls: type[Function] | None = None
        self._fake_fn: Callable[..., Any] | None = None
        self._cost: CostFn | None = None
        self.__name__ = getattr(fn, "__name__", name)
        self.__qualname__ = getattr(fn, "__qualname__", name)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    @property
    def schema(self) -> str:
        """``"ns::name(Tensor x, float a) -> Tensor"``."""
        return f"{self._qualname}{self._schema}"

    @property
    def default(self) -> CustomOpDef:
        """The op itself (``torch.ops.ns.name.default``)."""
        return self

    # -- registrations ---------------------------------------------------------------------------
    def register_kernel(self, device_types: str | Sequence[str] | None,
                        fn: Callable[..., Any] | None = None, /) -> Any:
        """Use ``fn`` for tensors of ``device_types`` ("cpu", "cuda"; None: every device type
        without its own); a decorator when ``fn`` is omitted."""
        keys = _device_types(device_types)

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            if not callable(func):
                raise TypeError(f"register_kernel: expected a function, got {func!r}")
            for key in keys:
                self._impls[key] = func
            self._install()
            return func

        return register if fn is None else register(fn)

    def register_autograd(self, backward: Callable[..., Any], /, *,
                          setup_context: Callable[..., Any] | None = None) -> None:
        """Make the op differentiable: ``setup_context(ctx, inputs, output)`` (with
        ``keyword_only_inputs`` before ``output`` when the op has keyword-only arguments) runs
        in the forward pass, ``backward(ctx, *grads)`` returns one gradient (or None) per
        positional input. ``ctx`` is ``gt.autograd.Function``'s (``save_for_backward``,
        ``saved_tensors``, ``needs_input_grad``, attributes)."""
        if self._mutated:
            raise RuntimeError(f"Cannot register autograd formula for non-functional operator "
                               f"{self!r} with schema {self.schema}. Please create a functional "
                               f"operator and register an autograd formula for that.")
        if not callable(backward):
            raise TypeError(f"register_autograd: backward must be callable, got {backward!r}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"register_autograd: setup_context must be callable or None, got "
                            f"{setup_context!r}")
        self._backward_fn = backward
        self._setup_context_fn = setup_context
        self._autograd_cls = self._make_autograd()

    def register_fake(self, fn: Callable[..., Any], /) -> Callable[..., Any]:
        """The op's fake implementation: given the op's arguments, return outputs with the
        metadata (shape, dtype, device, strides) the real one would, without reading data.
        :func:`opcheck` checks it against the real implementation."""
        if not callable(fn):
            raise TypeError(f"register_fake: expected a function, got {fn!r}")
        self._fake_fn = fn
        return fn

    def register_cost(self, fn: CostFn | None = None, /) -> Any:
        """``fn(inputs, output) -> (bytes moved, flops)`` for the profiler's GB/s, GFLOP/s and
        roofline columns (``inputs``: the arguments in signature order); a decorator when
        ``fn`` is omitted."""
        def register(cost: CostFn) -> CostFn:
            if not callable(cost):
                raise TypeError(f"register_cost: expected a function, got {cost!r}")
            self._cost = cost
            qualname = self._qualname

            def model(args: Sequence[Any], result: Any, kw: dict[str, Any]) -> tuple[int, int]:
                try:
                    moved, flops = cost(tuple(args), result)
                except Exception as exc:
                    raise RuntimeError(f"the cost model of {qualname} failed: {exc}") from exc
                return int(moved), int(flops)

            registry.KERNEL_COSTS[qualname] = model
            return cost

        return register if fn is None else register(fn)

    def _install(self) -> None:
        """Put each backend's implementation (its device type's, else the default) into its
        kernel table under the qualified name (wrapped by the profiler while one runs)."""
        for (device_type, _layout), backend in registry.BACKENDS.items():
            impl = self._impls.get(device_type, self._impls.get(None))
            if impl is None:
                backend.kernels.pop(self._qualname, None)
            else:
                backend.register(self._qualname)(self._adapt(impl))

    def _adapt(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        """The backend kernel: every argument positional, in signature order."""
        if not self._kw_names:
            return impl
        n, kw = self._n_pos, self._kw_names

        def kernel(*inputs: Any) -> Any:
            return impl(*inputs[:n], **dict(zip(kw, inputs[n:], strict=True)))

        kernel.__name__ = getattr(impl, "__name__", self._name)
        kernel.__qualname__ = getattr(impl, "__qualname__", self._name)
        return kernel

    def _destroy(self) -> None:
        """Remove the op (its kernels, cost and name), so the name can be defined again."""
        for backend in registry.BACKENDS.values():
            backend.kernels.pop(self._qualname, None)
        from gputensor.profiler import hooks

        for table in hooks._saved_tables.values():
            table.pop(self._qualname, None)
        registry.KERNEL_COSTS.pop(self._qualname, None)
        _REGISTRY.pop(self._qualname, None)

    # -- calling ---------------------------------------------------------------------------------
    def _bind(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._qualname}{self._schema}: {exc}") from None
        bound.apply_defaults()
        arguments = bound.arguments
        return tuple(arguments[n] for n in self._names)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        inputs = self._bind(args, kwargs)
        if grad_mode.is_grad_enabled() and any(
                t._requires_grad for x in inputs for t in _tensors_of(x)):
            return self._call_with_grad(inputs)
        return self._run(inputs)

    def _call_with_grad(self, inputs: tuple) -> Any:
        for name, value in zip(self._names, inputs, strict=True):
            if name in self._mutated and any(t._requires_grad for t in _tensors_of(value)):
                raise RuntimeError(f"{self._qualname} mutates '{name}', which requires grad: a "
                                   f"custom op that mutates its inputs is not differentiable "
                                   f"(make a functional op that returns a new tensor)")
        cls = self._autograd_cls
        if cls is None:
            with grad_mode.no_grad():
                out = self._run(inputs)
            _mark_no_autograd(self._qualname, out, inputs)
            return out
        for name, value in zip(self._names, inputs, strict=True):
            if not isinstance(value, Tensor) and any(t._requires_grad
                                                     for t in _tensors_of(value)):
                raise NotImplementedError(f"{self._qualname}: gradients for the tensors in the "
                                          f"list argument '{name}' are not supported; pass them "
                                          f"as separate Tensor arguments")
        out = cls.apply(*inputs)
        return list(out) if self._ret_kind == "list" else out

    def _device_type(self, inputs: tuple) -> tuple[str, str]:
        device_type = layout = None
        for x in inputs:
            for t in _tensors_of(x):
                dt = t._storage.device.type
                if device_type is None or (dt == "cuda" and device_type != "cuda"):
                    device_type = dt
                    layout = "sparse_coo" if t.is_sparse else "strided"
        if device_type is not None:
            return device_type, layout or "strided"
        from gputensor._device import device as Device
        from gputensor._device import get_default_device

        for name, x in zip(self._names, inputs, strict=True):
            if isinstance(x, Device) or (name == "device" and isinstance(x, str)):
                return Device(x).type, "strided"
        return get_default_device().type, "strided"

    def _run(self, inputs: tuple) -> Any:
        if OP_HOOK.active:   # selective checkpointing sees the op (gputensor/_op_hook.py)
            return OP_HOOK.call(self, inputs, {}, lambda: self._run_kernel(inputs))
        return self._run_kernel(inputs)

    def _run_kernel(self, inputs: tuple) -> Any:
        device_type, layout = self._device_type(inputs)
        backend = registry.BACKENDS.get((device_type, layout))
        kernel = backend.kernels.get(self._qualname) if backend is not None else None
        if kernel is None:
            have = sorted(k or "default" for k in self._impls)
            raise NotImplementedError(
                f"{self._qualname} has no implementation for device type '{device_type}' "
                f"(registered: {', '.join(have) or 'none'}); add one with "
                f"@{self.__name__}.register_kernel('{device_type}')")
        out = kernel(*inputs)
        self._check_output(out, inputs)
        for name, value in zip(self._names, inputs, strict=True):
            if name in self._mutated:
                for t in _tensors_of(value):
                    t._storage._version += 1
        return out

    def _check_output(self, out: Any, inputs: tuple) -> None:
        q, kind = self._qualname, self._ret_kind
        if kind == "none" and out is not None:
            raise RuntimeError(f"{q}: the schema returns nothing ({self._schema}), the "
                               f"implementation returned a {type(out).__name__}")
        if kind == "tensor" and not isinstance(out, Tensor):
            raise RuntimeError(f"{q}: the schema returns a Tensor ({self._schema}), the "
                               f"implementation returned a {type(out).__name__}")
        if kind == "tuple" and (not isinstance(out, tuple | list) or len(out) != self._ret_count):
            raise RuntimeError(f"{q}: the schema returns {self._ret_count} values "
                               f"({self._schema}), the implementation returned {out!r:.80}")
        if kind == "list" and not isinstance(out, list | tuple):
            raise RuntimeError(f"{q}: the schema returns a list of tensors ({self._schema}), "
                               f"the implementation returned a {type(out).__name__}")
        outs = _tensors_of(out) if kind != "tensor" else [out]
        if not outs:
            return
        for name, value in zip(self._names, inputs, strict=True):
            for t in _tensors_of(value):
                for i, o in enumerate(outs):
                    if o._storage is t._storage:
                        raise RuntimeError(
                            f"{q}: output {i} {'is' if o is t else 'aliases'} the input "
                            f"'{name}'; a custom op's outputs must be new tensors (return a "
                            f".clone() of it)")

    def _make_autograd(self) -> type[Function]:
        op = self
        n_pos, kw = self._n_pos, self._kw_names

        def forward(ctx: Any, *inputs: Any) -> Any:
            out = op._run(inputs)
            setup = op._setup_context_fn
            if setup is not None:
                if kw:
                    setup(ctx, inputs[:n_pos], dict(zip(kw, inputs[n_pos:], strict=True)), out)
                else:
                    setup(ctx, inputs, out)
            return tuple(out) if isinstance(out, list) else out

        def backward(ctx: Any, *grads: Any) -> Any:
            result = op._backward_fn(ctx, *grads)
            if not isinstance(result, tuple | list):
                result = (result,)
            if len(result) != n_pos:
                raise RuntimeError(f"{op._qualname}: backward returned {len(result)} "
                                   f"gradient(s); expected {n_pos}, one per positional input "
                                   f"(None for an input without a gradient)")
            return (*result, *([None] * len(kw)))

        name = f"GeneratedBackwardFor_{self._namespace}_{self._name}"
        return type(name, (Function,), {"forward": staticmethod(forward),
                                        "backward": staticmethod(backward)})


# ---- torch.library's functions -------------------------------------------------------------------
def custom_op(name: str, fn: Callable[..., Any] | None = None, /, *,
              mutates_args: str | Iterable[str], device_types: str | Sequence[str] | None = None,
              schema: str | None = None, cost: CostFn | None = None) -> Any:
    """Wrap a function into a custom op named ``"namespace::name"`` (``torch.library.
    custom_op``). The function must annotate its parameters and return (the schema is
    inferred from them, or given as ``schema``); ``mutates_args`` names the tensor arguments
    it writes ("unknown": all of them); ``device_types`` restricts it to "cpu" or "cuda" (None:
    every device type, unless a device-specific kernel is registered); ``cost`` (a gputensor
    addition) is the profiler's cost model, as :meth:`CustomOpDef.register_cost`."""
    m = _NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"Expected there to be a namespace in {name!r}, i.e. The operator name "
                         f"should look something like ns::foo")

    def wrap(func: Callable[..., Any]) -> CustomOpDef:
        if name in _REGISTRY:
            raise RuntimeError(f"custom op {name} already exists; pick another name (or "
                               f"._destroy() the old op first)")
        if schema is None:
            text, mutated, kind, count = _infer(func, mutates_args)
        else:
            sig = _signature(func)
            text, mutated, kind, count = _parse_schema(schema, sig)
            if mutates_args != "unknown" and frozenset(mutates_args) != mutated:
                raise ValueError(f"schema {schema!r} mutates {sorted(mutated)}, mutates_args "
                                 f"says {sorted(mutates_args)}")
        op = CustomOpDef(m.group(1), m.group(2), func, text, mutated, kind, count)
        op.register_kernel(device_types, func)
        if cost is not None:
            op.register_cost(cost)
        _REGISTRY[name] = op
        return op

    return wrap if fn is None else wrap(fn)


def _op(op: str | CustomOpDef) -> CustomOpDef:
    if isinstance(op, CustomOpDef):
        return op
    found = _REGISTRY.get(op) if isinstance(op, str) else None
    if found is None:
        raise ValueError(f"{op!r} is not a custom op made by gt.library.custom_op (only those "
                         f"take registrations)")
    return found


def register_kernel(op: str | CustomOpDef, device_types: str | Sequence[str] | None,
                    func: Callable[..., Any] | None = None, /) -> Any:
    """``torch.library.register_kernel``: see :meth:`CustomOpDef.register_kernel`."""
    return _op(op).register_kernel(device_types, func)


def register_autograd(op: str | CustomOpDef, backward: Callable[..., Any], /, *,
                      setup_context: Callable[..., Any] | None = None) -> None:
    """``torch.library.register_autograd``: see :meth:`CustomOpDef.register_autograd`."""
    _op(op).register_autograd(backward, setup_context=setup_context)


def register_fake(op: str | CustomOpDef, func: Callable[..., Any] | None = None, /) -> Any:
    """``torch.library.register_fake``: see :meth:`CustomOpDef.register_fake`."""
    target = _op(op)
    return target.register_fake if func is None else target.register_fake(func)


def register_cost(op: str | CustomOpDef, func: CostFn | None = None, /) -> Any:
    """The profiler's cost model of a custom op: see :meth:`CustomOpDef.register_cost`."""
    return _op(op).register_cost(func)


# ---- gt.ops.<namespace>.<name> -------------------------------------------------------------------
class _OpNamespace:
    def __init__(self, namespace: str) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> CustomOpDef:
        if name.startswith("__"):
            raise AttributeError(name)
        op = _REGISTRY.get(f"{self._namespace}::{name}")
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._namespace}' object has no attribute "
                                 f"'{name}'")
        return op

    def __dir__(self) -> list[str]:
        prefix = f"{self._namespace}::"
        return sorted(q[len(prefix):] for q in _REGISTRY if q.startswith(prefix))

    def __repr__(self) -> str:
        return f"<gputensor.ops.{self._namespace}>"


class _Ops:
    """``gt.ops``: every custom op as ``gt.ops.<namespace>.<name>`` (like ``torch.ops``), and
    the built-in ops as ``gt.ops.aten.<name>.<overload>``."""

    def __getattr__(self, namespace: str) -> Any:
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        if namespace == "aten":   # the registry's built-in ops (gputensor/_aten.py)
            from gputensor._aten import aten
            return aten
        return _OpNamespace(namespace)

    def __dir__(self) -> list[str]:
        return sorted({"aten"} | {q.split("::")[0] for q in _REGISTRY})

    def __repr__(self) -> str:
        return "<gputensor.ops>"


ops = _Ops()


# ---- opcheck -------------------------------------------------------------------------------------
class OpCheckError(Exception):
    """An :func:`opcheck` test failed."""


DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor")


def _clone(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _bytes(t: Tensor) -> np.ndarray:
    if t.is_sparse:
        t = t.to_dense()
    return np.ascontiguousarray(t.detach().cpu().numpy()).view(np.uint8).copy()


def _check_schema(op: CustomOpDef, args: tuple, kwargs: dict[str, Any]) -> None:
    """No tensor the op writes is missing from mutates_args."""
    inputs = op._bind(_clone(tuple(args)), _clone(kwargs))
    before = [[_bytes(t) for t in _tensors_of(x)] for x in inputs]
    with grad_mode.no_grad():
        op(*inputs[:op._n_pos], **dict(zip(op._kw_names, inputs[op._n_pos:], strict=True)))
    for name, x, old in zip(op._names, inputs, before, strict=True):
        if name in op._mutated:
            continue
        for t, b in zip(_tensors_of(x), old, strict=True):
            if not np.array_equal(_bytes(t), b):
                raise OpCheckError(f"{op._qualname} wrote to the argument '{name}', which is "
                                   f"not in mutates_args (schema {op.schema})")


def _check_autograd_registration(op: CustomOpDef, args: tuple, kwargs: dict[str, Any]) -> None:
    """With register_autograd, backward gives every float input a gradient of its own shape,
    dtype and device; without it, differentiating an output raises instead of being wrong."""
    import gputensor as gt

    inputs = list(op._bind(_clone(tuple(args)), _clone(kwargs)))
    diff = []
    for i, (name, x) in enumerate(zip(op._names, inputs, strict=True)):
        if isinstance(x, Tensor) and name not in op._mutated and \
                (x._dtype.is_floating_point or x._dtype.is_complex):
            inputs[i] = x.requires_grad_(True)
            diff.append(inputs[i])
    if not diff:
        return
    out = op(*inputs[:op._n_pos], **dict(zip(op._kw_names, inputs[op._n_pos:], strict=True)))
    outs = [o for o in _tensors_of(out if not isinstance(out, Tensor) else [out])
            if o._dtype.is_floating_point or o._dtype.is_complex]
    if not outs:
        return
    if op._autograd_cls is None:
        for o in outs:
            if not isinstance(o.grad_fn, _NoAutogradNode):
                raise OpCheckError(f"{op._qualname}: an output without autograd support has "
                                   f"grad_fn {o.grad_fn!r}")
        return
    grads = gt.autograd.grad(outs, diff, [gt.ones_like(o) for o in outs], allow_unused=True)
    for x, g in zip(diff, grads, strict=True):
        if g is not None and (tuple(g.shape) != tuple(x.shape) or g.dtype != x.dtype
                              or g.device != x.device):
            raise OpCheckError(f"{op._qualname}: backward gave a gradient of shape "
                               f"{tuple(g.shape)}, {g.dtype} on {g.device} for an input of "
                               f"shape {tuple(x.shape)}, {x.dtype} on {x.device}")


def _check_faketensor(op: CustomOpDef, args: tuple, kwargs: dict[str, Any]) -> None:
    """The fake implementation promises the real outputs' shapes, dtypes, devices, strides."""
    if op._fake_fn is None:
        raise OpCheckError(f"There was no fake impl registered for {op!r}. Please use "
                           f"`{op.__name__}.register_fake` to add one.")
    with grad_mode.no_grad():
        real = op(*_clone(tuple(args)), **_clone(kwargs))
        fake = op._fake_fn(*_clone(tuple(args)), **_clone(kwargs))
    reals = [real] if not isinstance(real, tuple | list) else list(real)
    fakes = [fake] if not isinstance(fake, tuple | list) else list(fake)
    if len(reals) != len(fakes):
        raise OpCheckError(f"{op._qualname}: the fake returned {len(fakes)} outputs, the real "
                           f"implementation {len(reals)}")
    for i, (r, f) in enumerate(zip(reals, fakes, strict=True)):
        if isinstance(r, Tensor) != isinstance(f, Tensor):
            raise OpCheckError(f"{op._qualname}: output {i} is a {type(r).__name__}, the fake "
                               f"returned a {type(f).__name__}")
        if not isinstance(r, Tensor):
            continue
        got = (tuple(f.shape), f.dtype, f.device, tuple(f.stride()))
        want = (tuple(r.shape), r.dtype, r.device, tuple(r.stride()))
        if got != want:
            raise OpCheckError(f"{op._qualname}: output {i} of the fake has (shape, dtype, "
                               f"device, strides) {got}, the real one {want}")


_CHECKS = {"test_schema": _check_schema,
           "test_autograd_registration": _check_autograd_registration,
           "test_faketensor": _check_faketensor}


def opcheck(op: str | CustomOpDef, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None,
            *, test_utils: str | Sequence[str] = DEFAULT_TEST_UTILS,
            raise_exception: bool = True) -> dict[str, Any]:
    """Check a custom op on sample arguments, as ``torch.library.opcheck``: ``test_schema``
    (every tensor it writes is in mutates_args), ``test_autograd_registration`` (backward
    works, or raises when no autograd is registered) and ``test_faketensor`` (the fake
    implementation matches the real one's output metadata). Runs on copies of the arguments.
    Returns {test: "SUCCESS" or the exception (raise_exception=False)}."""
    target = _op(op)
    tests = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    unknown = [t for t in tests if t not in _CHECKS]
    if unknown:
        raise ValueError(f"opcheck: unknown test_utils {unknown} (known: {', '.join(_CHECKS)})")
    results: dict[str, Any] = {}
    for name in tests:
        try:
            _CHECKS[name](target, tuple(args), dict(kwargs or {}))
            results[name] = "SUCCESS"
        except Exception as exc:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {exc}") from exc
            results[name] = exc
    return results
