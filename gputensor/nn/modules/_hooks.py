"""Hook plumbing for Module: removable handles and full backward hooks.

Full backward hooks work like PyTorch's: the module's tensor inputs and outputs pass through an
identity ``gt.autograd.Function``. Its backward at the outputs captures ``grad_output`` (and runs
the backward pre-hooks); its backward at the inputs then calls each hook with
``(module, grad_input, grad_output)`` and lets it replace ``grad_input``. The Function class is
looked up (and built once) on first use rather than at import, which keeps gputensor.nn free of
an import-time dependency on the engine; without ``gt.autograd.Function`` hooks are stored but
have no graph to fire from.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from gputensor._tensor import Tensor

_next_id = itertools.count()


class RemovableHandle:
    """Returned by ``register_*_hook``: ``remove()`` (or leaving a ``with`` block) unregisters."""

    def __init__(self, hooks_dict: OrderedDict, *,
                 extra_dict: OrderedDict | Sequence[OrderedDict] | None = None) -> None:
        # Weak references: a handle kept by the caller must not keep a dead module's hooks alive.
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(_next_id)
        if extra_dict is None:
            extra = ()
        elif isinstance(extra_dict, OrderedDict | dict):
            extra = (extra_dict,)
        else:
            extra = tuple(extra_dict)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __getstate__(self) -> tuple:
        return (self.hooks_dict_ref(), self.id,
                tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state: tuple) -> None:
        hooks, self.id, extra = state
        self.hooks_dict_ref = weakref.ref(OrderedDict() if hooks is None else hooks)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra if d is not None)


_function_cls: Any = None


def hook_function() -> Any:
    """The identity autograd Function used by backward hooks, or None before autograd lands."""
    global _function_cls
    if _function_cls is not None:
        return _function_cls
    from gputensor import autograd
    base = getattr(autograd, "Function", None)
    if base is None:
        return None

    class BackwardHookFunction(base):
        # forward(ctx, on_grads, *tensors): identity views; backward routes the incoming
        # gradients through on_grads, which may replace them.
        @staticmethod
        def forward(ctx: Any, on_grads: Callable, *tensors: Tensor) -> tuple:
            ctx.on_grads = on_grads
            outs = tuple(t.view_as(t) for t in tensors)
            # Tensors that needed no grad stay that way (their hook slot gets zeros/None).
            ctx.mark_non_differentiable(*(o for o, t in zip(outs, tensors, strict=True)
                                          if not t.requires_grad))
            return outs

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> tuple:
            return (None, *ctx.on_grads(grads))

    _function_cls = BackwardHookFunction
    return _function_cls


class BackwardHook:
    """One forward call's link between output gradients and input gradients."""

    def __init__(self, module: Any, hooks: list[Callable], pre_hooks: list[Callable]) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_inputs = 0
        self.input_index: list[int] | None = None
        self.n_outputs = 0
        self.output_index: list[int] | None = None

    # -- forward-time wiring ---------------------------------------------------------------
    def _wrap(self, values: tuple, on_grads: Callable) -> tuple[tuple, list[int] | None]:
        from gputensor.autograd import is_grad_enabled
        index = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
        fn = hook_function()
        if fn is None or not is_grad_enabled() or \
                not any(values[i].requires_grad for i in index):
            return values, None
        wrapped = fn.apply(on_grads, *(values[i] for i in index))
        if isinstance(wrapped, Tensor):
            wrapped = (wrapped,)
        out = list(values)
        for i, w in zip(index, wrapped, strict=True):
            out[i] = w
        return tuple(out), index

    def setup_inputs(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        args, self.input_index = self._wrap(args, self.on_input_grads)
        return args

    def setup_outputs(self, result: Any) -> Any:
        single = not isinstance(result, tuple)
        values = (result,) if single else result
        self.n_outputs = len(values)
        values, self.output_index = self._wrap(values, self.on_output_grads)
        return values[0] if single else values

    # -- backward-time callbacks -----------------------------------------------------------
    @staticmethod
    def _pack(index: list[int] | None, values: Sequence[Any], size: int) -> tuple:
        out: list[Any] = [None] * size
        for i, v in zip(index or (), values, strict=False):
            out[i] = v
        return tuple(out)

    def on_output_grads(self, grads: tuple) -> tuple:
        """Gradients w.r.t. the outputs arrived: run pre-hooks, remember them for the hooks."""
        grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            new = hook(self.module, grad_outputs)
            if new is None:
                continue
            if not isinstance(new, tuple):
                new = (new,)
            if len(new) != len(grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(new)}, but expected "
                                   f"{len(grad_outputs)}")
            grad_outputs = new
        self.grad_outputs = grad_outputs
        if self.input_index is None:
            # No input requires grad: the hooks fire here, with grad_input all None.
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients.",
                          stacklevel=2)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, grad_outputs)
                if res is not None and not (isinstance(res, tuple)
                                            and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return tuple(grad_outputs[i] for i in (self.output_index or ()))

    def on_input_grads(self, grads: tuple) -> tuple:
        """Gradients w.r.t. the inputs arrived: call the hooks, which may replace them."""
        if self.grad_outputs is None:
            return grads  # the gradient reached the inputs without passing the outputs
        grad_inputs = self._pack(self.input_index, grads, self.n_inputs)
        for hook in self.hooks:
            new = hook(self.module, grad_inputs, self.grad_outputs)
            if new is None:
                continue
            if not isinstance(new, tuple):
                new = (new,)
            if len(new) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                   f"got {len(new)}, but expected {len(grad_inputs)}")
            grad_inputs = new
        self.grad_outputs = None
        return tuple(grad_inputs[i] for i in (self.input_index or ()))
