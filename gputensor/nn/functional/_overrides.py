"""The ``__torch_function__`` protocol helpers torch.nn.functional re-exports
(has_torch_function*, handle_torch_function), ``boolean_dispatch`` and the small argument
helpers (assert_int_or_pair, the grid_sample mode tables).

gputensor's Tensor does not define ``__torch_function__`` and its ops never consult it, so for
gputensor's own types (Tensor, Parameter and subclasses that do not add the method) these
report False, as PyTorch does for its plain Tensor and Parameter. Any other object whose type
defines ``__torch_function__`` is overloaded: ``handle_torch_function`` then dispatches to it
with PyTorch's protocol (subclasses before superclasses, else left to right; one call per
distinct type; the first result that is not NotImplemented wins), so library code written in
PyTorch's style (``if has_torch_function(...): return handle_torch_function(...)``) runs the
same here. PyTorch's torch-function modes are not modelled (gputensor has none).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES", "assert_int_or_pair",
           "boolean_dispatch", "handle_torch_function", "has_torch_function",
           "has_torch_function_unary", "has_torch_function_variadic"]

GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def _disabled_torch_function_impl(cls: type, func: Callable, types: Any, args: Any = (),
                                  kwargs: Any = None) -> Any:
    """Assign as ``__torch_function__`` to opt a class out of the protocol (PyTorch's
    ``torch._C._disabled_torch_function_impl``): runs ``func`` unchanged."""
    return func(*args, **(kwargs or {}))


def _overloads(arg_type: type) -> bool:
    method = getattr(arg_type, "__torch_function__", None)
    if method is None:
        return False
    return getattr(method, "__func__", method) is not _disabled_torch_function_impl


def has_torch_function(relevant_args: Sequence[Any]) -> bool:
    """True when any of ``relevant_args`` has a type that overrides ``__torch_function__``."""
    if not isinstance(relevant_args, Sequence) or isinstance(relevant_args, str):
        raise TypeError("expected a sequence")
    return any(_overloads(type(arg)) for arg in relevant_args)


def has_torch_function_unary(arg: Any) -> bool:
    """``has_torch_function((arg,))`` without building the tuple."""
    return _overloads(type(arg))


def has_torch_function_variadic(*args: Any) -> bool:
    """``has_torch_function(args)`` with the arguments passed directly."""
    return any(_overloads(type(arg)) for arg in args)


def _overloaded_args(relevant_args: Iterable[Any]) -> list[Any]:
    """One argument per distinct overloading type, subclasses before their superclasses,
    otherwise in argument order (NEP-18's precedence, as PyTorch's)."""
    seen: set[type] = set()
    ordered: list[Any] = []
    for arg in relevant_args:
        arg_type = type(arg)
        if arg_type in seen or not _overloads(arg_type):
            continue
        seen.add(arg_type)
        index = next((i for i, old in enumerate(ordered) if issubclass(arg_type, type(old))),
                     len(ordered))
        ordered.insert(index, arg)
    return ordered


def handle_torch_function(public_api: Callable, relevant_args: Iterable[Any], *args: Any,
                          **kwargs: Any) -> Any:
    """Call ``__torch_function__(public_api, types, args, kwargs)`` of each overloaded argument
    in precedence order and return the first result that is not NotImplemented; TypeError when
    every override declines."""
    overloaded = _overloaded_args(relevant_args)
    types = tuple(type(arg) for arg in overloaded)
    for arg in overloaded:
        method = arg.__torch_function__
        if getattr(method, "__self__", None) is arg:
            warnings.warn("Defining your `__torch_function__ as a plain method is deprecated "
                          "and will be an error in future, please define it as a classmethod.",
                          DeprecationWarning, stacklevel=2)
        result = method(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    name = f"{public_api.__module__}.{public_api.__name__}"
    raise TypeError(f"no implementation found for '{name}' on types that implement "
                    f"__torch_function__: {[type(arg) for arg in overloaded]}")


# Which implementation each boolean-dispatched function picks from (PyTorch keeps the same
# table in torch._jit_internal for TorchScript).
boolean_dispatched: dict[Callable, dict[str, Any]] = {}


def boolean_dispatch(arg_name: str, arg_index: int, default: bool, if_true: Callable,
                     if_false: Callable, module_name: str | None,
                     func_name: str | None) -> Callable:
    """A function that calls ``if_true`` or ``if_false`` by the boolean argument ``arg_name``
    (keyword, else position ``arg_index``, else ``default``), as PyTorch's max_pool2d picks
    its ``_with_indices`` form. The docstring comes from whichever of the two has one."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        flag = default
        if arg_name in kwargs:
            flag = kwargs[arg_name]
        elif arg_index < len(args):
            flag = args[arg_index]
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    if if_true.__doc__ is not None and if_false.__doc__ is not None:
        raise RuntimeError("only one function can have a docstring")
    fn.__doc__ = if_true.__doc__ if if_true.__doc__ is not None else if_false.__doc__
    if if_true.__doc__ is None:
        if_true.__doc__ = fn.__doc__
    else:
        if_false.__doc__ = fn.__doc__
    if module_name is not None:
        fn.__module__ = module_name
    if func_name is not None:
        fn.__name__ = fn.__qualname__ = func_name
    boolean_dispatched[fn] = {"if_true": if_true, "if_false": if_false, "index": arg_index,
                              "default": default, "arg_name": arg_name}
    return fn


def assert_int_or_pair(arg: Any, arg_name: str, message: str) -> None:
    """AssertionError(``message.format(arg_name)``) unless ``arg`` is an int or has two
    items."""
    if not (isinstance(arg, int) or len(arg) == 2):
        raise AssertionError(message.format(arg_name))
