"""Custom differentiable ops: subclass ``gt.autograd.Function`` with static ``forward(ctx, ...)``
and ``backward(ctx, *grads)``, then call ``.apply``. The ctx is the op's backward node."""

from __future__ import annotations

from typing import Any

from . import forward_ad, grad_mode
from .graph import Node, SavedTensor, edge_of
from .jvp import _FUNCTION_BASE_JVP, function_jvp


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "_storage") and hasattr(x, "grad_fn")


class FunctionCtx(Node):
    """The ``ctx`` of a custom Function and the node its outputs point to."""

    __slots__ = ("_saved", "_non_differentiable", "_dirty", "materialize_grads",
                 "needs_input_grad", "_input_slots", "_forward_cls")

    def save_for_backward(self, *tensors: Any) -> None:
        self._saved = tuple(SavedTensor(t) if _is_tensor(t) else t for t in tensors)

    def save_for_forward(self, *tensors: Any) -> None:
        """Keep tensors for ``jvp``, where ``ctx.saved_tensors`` returns them."""
        if not all(t is None or _is_tensor(t) for t in tensors):
            raise ValueError("save_for_forward expects all arguments to be tensors; you should "
                             "save non-tensors as attributes on ctx.")
        self.__dict__["_saved_forward"] = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self.__dict__.get("_in_jvp"):
            return tuple(self.__dict__.get("_saved_forward", ()))
        self.check_not_released()
        return tuple(s.unpack(self) if isinstance(s, SavedTensor) else s
                     for s in getattr(self, "_saved", ()))

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self._non_differentiable = {id(t) for t in tensors}

    def mark_dirty(self, *tensors: Any) -> None:
        self._dirty = {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def apply(self, grads: list[Any]) -> list[Any]:
        self.check_not_released()
        import gputensor as gt
        if self.materialize_grads:
            grads = [gt.zeros(m[0], dtype=m[1], device=m[2]) if g is None and m is not None
                     else g for g, m in zip(grads, self.out_meta, strict=False)]
        result = self._forward_cls.backward(self, *grads)
        result = result if isinstance(result, tuple) else (result,)
        n_inputs = len(self.needs_input_grad)
        if len(result) < n_inputs:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {n_inputs}, got {len(result)})")
        from .formulas import fit_grad
        out = []
        for arg_index, shape, dtype in self._input_slots:
            g = result[arg_index]
            if g is not None and not _is_tensor(g):
                raise TypeError(f"{self.name()}.backward returned a {type(g).__name__} for "
                                f"input {arg_index}; expected a Tensor or None")
            if g is not None and g.numel() != 0 and tuple(g.shape) != tuple(shape):
                try:
                    g = fit_grad(g, shape, dtype)
                except RuntimeError:
                    raise RuntimeError(f"Function {self.name()} returned an invalid gradient at "
                                       f"index {arg_index} - got {list(g.shape)} but expected "
                                       f"shape compatible with {list(shape)}") from None
            out.append(fit_grad(g, shape, dtype))
        return out

    def release(self) -> None:
        self._released = True
        self._saved = ()


class _FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple, ns: dict) -> None:
        super().__init__(name, bases, ns)
        cls._backward_cls = type(f"{name}Backward", (FunctionCtx,), {"__slots__": ()})


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable ops (PyTorch's ``torch.autograd.Function``)."""

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a Function subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise RuntimeError("this Function defines no backward(ctx, *grad_outputs)")

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        """Forward-mode rule: the outputs' tangents from the inputs' (None where an input has
        none), reading what ``ctx.save_for_forward`` kept."""
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        """Overridden to split the ctx work from ``forward(*args)`` (which then takes no ctx)."""
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = cls._backward_cls.__new__(cls._backward_cls)
        needs = tuple(_is_tensor(a) and a._requires_grad for a in args)
        record = grad_mode.is_grad_enabled() and any(needs)
        edges, slots = [], []
        for i, a in enumerate(args):
            if needs[i] and record:
                edges.append(edge_of(a))
                slots.append((i, a._shape, a._dtype))
        ctx._init(tuple(edges))
        ctx._forward_cls = cls
        ctx.needs_input_grad = needs
        ctx._input_slots = slots
        ctx.materialize_grads = True
        ctx._non_differentiable = set()
        ctx._dirty = set()
        with grad_mode.no_grad(), forward_ad.suspended():
            if cls.setup_context is Function.setup_context:
                result = cls.forward(ctx, *args, **kwargs)
            else:
                result = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, result)
        outputs = result if isinstance(result, tuple) else (result,)
        if forward_ad._state.active:
            ctx.__dict__["_in_jvp"] = True
            try:
                function_jvp(cls, ctx, args, outputs)
            finally:
                ctx.__dict__["_in_jvp"] = False
        ctx.out_meta = [(o.shape, o.dtype, o.device) if _is_tensor(o) else None
                         for o in outputs]
        if record:
            for i, o in enumerate(outputs):
                if not _is_tensor(o) or id(o) in ctx._non_differentiable:
                    continue
                if not (o.dtype.is_floating_point or o.dtype.is_complex):
                    continue
                if any(o is a for a in args) and id(o) not in ctx._dirty:
                    # An input returned as is: the output is a new view of it (PyTorch does
                    # the same), so the input keeps its own history.
                    o = o.detach()
                    outputs = outputs[:i] + (o,) + outputs[i + 1:]
                if id(o) in ctx._dirty and o.grad_fn is None and o._requires_grad:
                    raise RuntimeError("a leaf Variable that requires grad is being used in an "
                                       "in-place operation.")
                o.grad_fn = ctx
                o._requires_grad = True
                o._output_nr = i
        return outputs if isinstance(result, tuple) else outputs[0]


def once_differentiable(fn: Any) -> Any:
    """Decorator for ``backward``: it runs without building a graph (no double backward)."""
    import functools

    @functools.wraps(fn)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with grad_mode.no_grad():
            return fn(ctx, *grads)
    return wrapper


_FUNCTION_BASE_JVP[0] = Function.jvp
