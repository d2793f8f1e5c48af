"""``NestedIOFunction``: the legacy instance-style custom Function with nested inputs/outputs.

A subclass defines ``forward_extended(self, *inputs)`` and ``backward_extended(self,
*grad_outputs)`` as *instance* methods; an instance is called like a function with arguments
that may nest tensors in lists, tuples and dicts. ``forward_extended`` sees the inputs'
detached data in the same structure and may return nested tensors; ``backward_extended``
receives the outputs' gradients in the output structure and returns gradients in the input
structure. ``save_for_backward``, ``saved_tensors``, ``mark_dirty`` and
``mark_non_differentiable`` take nested arguments too.

In PyTorch 2.13 the class is kept "for backward compatibility" but its ``__call__`` relies on
``Function._do_forward``, which no longer exists, so calling an instance fails there. Here
the documented contract works: each call runs through one node of the ordinary
``Function`` machinery (flat tensors in, flat tensors out), with the nesting undone and
redone around the user's methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .function import Function


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "_storage") and hasattr(x, "grad_fn")


def _nesting_error(obj: Any, accepted: str) -> ValueError:
    import gputensor as gt
    return ValueError(f"Auto nesting doesn't know how to process an input object of type "
                      f"{gt.typename(obj)}. Accepted types: {accepted}, or lists/tuples of them")


def _leaves(obj: Any, keep: Callable[[Any], bool], accepted: str | None = None
            ) -> Iterator[Any]:
    """Depth-first leaves of lists/tuples/dicts for which ``keep`` holds; None is skipped and,
    when ``accepted`` is given, any other object is an error (else it is a leaf too)."""
    if keep(obj):
        yield obj
    elif obj is None:
        return
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from _leaves(item, keep, accepted)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _leaves(item, keep, accepted)
    elif accepted is not None:
        raise _nesting_error(obj, accepted)


def _tensors(obj: Any) -> tuple[Any, ...]:
    return tuple(_leaves(obj, _is_tensor, "Tensors"))


def _map_data(obj: Any) -> Any:
    """The structure of ``obj`` with each tensor replaced by its detached data."""
    if _is_tensor(obj):
        return obj.detach()
    if obj is None:
        return None
    if isinstance(obj, list | tuple):
        mapped = [_map_data(x) for x in obj]
        return type(obj)(*mapped) if hasattr(obj, "_fields") else type(obj)(mapped)
    if isinstance(obj, dict):
        return {k: _map_data(v) for k, v in obj.items()}
    raise _nesting_error(obj, "Tensors")


def _unflatten(flat: tuple[Any, ...], proto: Any) -> Any:
    """``flat`` put back into the list/tuple structure of ``proto`` (None entries stay)."""
    def build(items: tuple[Any, ...], proto: Any) -> tuple[Any, tuple[Any, ...]]:
        if not isinstance(proto, list | tuple):
            return items[0], items[1:]
        out = []
        for entry in proto:
            if entry is None:
                out.append(None)
            else:
                value, items = build(items, entry)
                out.append(value)
        return type(proto)(out), items
    return build(tuple(flat), proto)[0]


class _Node(Function):
    """The node that carries one call of a NestedIOFunction instance (passed as ``fn``)."""

    @staticmethod
    def forward(ctx: Any, fn: NestedIOFunction, *flat_inputs: Any) -> Any:
        flat = fn.forward(*flat_inputs)
        ctx.fn = fn
        fn._ctx = ctx
        if getattr(fn, "to_save", None) is not None:
            ctx.save_for_backward(*fn.to_save)
        if getattr(fn, "dirty_tensors", None):
            ctx.mark_dirty(*fn.dirty_tensors)
        if getattr(fn, "non_differentiable", None):
            ctx.mark_non_differentiable(*fn.non_differentiable)
        return flat

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None, *ctx.fn.backward(*grads))


class NestedIOFunction(Function):
    """Legacy custom Function (kept, as in PyTorch, for backward compatibility; use
    :class:`Function` for new code): override ``forward_extended`` and ``backward_extended``
    and call an instance on (nested) inputs."""

    _node: type[_Node] = _Node

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # One node class per subclass, so its grad_fn is named "<Subclass>Backward".
        cls._node = type(cls.__name__, (_Node,), {})

    def _do_forward(self, *input: Any) -> Any:
        self._nested_input = input
        flat_inputs = _tensors(input)
        flat_outputs = type(self)._node.apply(self, *flat_inputs)
        if not isinstance(flat_outputs, tuple):
            flat_outputs = (flat_outputs,)
        return _unflatten(flat_outputs, self._nested_output)

    __call__ = _do_forward

    def _do_backward(self, gradients: tuple[Any, ...], retain_variables: bool) -> Any:
        """The input gradients (flat) for the output gradients ``gradients`` (flat); the
        nested bookkeeping is dropped afterwards unless ``retain_variables``."""
        self.retain_variables = retain_variables
        result = self.backward(*gradients)
        if not retain_variables:
            del self._nested_output
            del self._to_save_nested
        return result

    def forward(self, *args: Any) -> tuple[Any, ...]:
        """Shared forward: calls ``forward_extended`` on the nested inputs' data and returns
        the flat output tensors."""
        nested = _map_data(self._nested_input)
        result = self.forward_extended(*nested)
        del self._nested_input
        self._nested_output = result
        return _tensors(result)

    def backward(self, *gradients: Any) -> tuple[Any, ...]:
        """Shared backward: calls ``backward_extended`` with the gradients in the output
        structure and returns the flat input gradients (None where there is none)."""
        nested = _unflatten(gradients, self._nested_output)
        # A single output tensor gets a single gradient (not unpacked along its first dim).
        result = self.backward_extended(*nested) if isinstance(nested, list | tuple) else \
            self.backward_extended(nested)
        return tuple(_leaves(result, lambda x: x is None or _is_tensor(x),
                             "Tensors or None"))

    def save_for_backward(self, *args: Any) -> None:
        """Keep the (nested) tensors ``args`` for ``backward_extended``."""
        self.to_save = _tensors(args)
        self._to_save_nested = args

    @property
    def saved_tensors(self) -> Any:
        """What ``save_for_backward`` kept, in its nesting."""
        return _unflatten(self._ctx.saved_tensors, self._to_save_nested)

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return self._ctx.needs_input_grad[1:]

    def mark_dirty(self, *args: Any, **kwargs: Any) -> None:
        """Declare the (nested) tensors that ``forward_extended`` modified in place."""
        self.dirty_tensors = _tensors((args, kwargs))

    def mark_non_differentiable(self, *args: Any, **kwargs: Any) -> None:
        """Declare (nested) outputs that have no gradient."""
        self.non_differentiable = _tensors((args, kwargs))

    def forward_extended(self, *input: Any) -> Any:
        """User defined forward."""
        raise NotImplementedError

    def backward_extended(self, *grad_output: Any) -> Any:
        """User defined backward."""
        raise NotImplementedError
