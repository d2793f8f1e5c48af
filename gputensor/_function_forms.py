"""Function spellings PyTorch's namespace has for what gputensor offers as methods and views:

- the in-place functions, ``torch.exp_(x)`` for ``x.exp_()``, and a few other methods
  (``torch.detach(x)``, ``torch.is_signed(x)``);
- the ``*_copy`` variants of the view ops (``torch.transpose_copy``...), which return the view's
  values in a new, contiguous tensor of their own (PyTorch's functionalization uses them).

Each is a thin function over the method or view it names, so gradients and both devices
follow; the lists are PyTorch's (2.13) names for which gputensor has the method or view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputensor import _memory_format as MF
from gputensor._tensor import Tensor

# torch.<name> in-place functions whose Tensor method gputensor has.
INPLACE_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_", "ceil_",
    "clamp_", "clamp_max_", "clamp_min_", "clip_", "conj_physical_", "cos_", "cosh_",
    "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_",
    "floor_", "frac_", "gcd_", "i0_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_",
    "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_",
    "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_",
    "tanh_", "trunc_", "xlogy_", "zero_")

# torch.<name>(t, ...) spellings of other methods: t.<name>(...).
METHOD_FUNCTIONS = ("detach", "is_signed")

# torch.<view>_copy: the view op each copies.
COPY_VARIANTS = (
    "alias", "as_strided", "detach", "diagonal", "expand", "permute", "select",
    "slice", "split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unfold",
    "unsqueeze", "view")


def _check_tensor(name: str, input: Any) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")


def _method_function(name: str, what: str = "the method") -> Callable[..., Any]:
    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        _check_tensor(name, input)
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input.{name}(...)``: torch.{name}, {what} as a function."
    return fn


def _own(t: Tensor) -> Tensor:
    return t.clone(memory_format=MF.contiguous_format)


def _view(name: str, input: Tensor, args: tuple, kwargs: dict) -> Any:
    if name == "alias":
        return input
    if name == "slice":  # torch.slice_copy(input, dim=0, start=None, end=None, step=1)
        dim, start, end, step = (*args, *(None,) * 4)[:4]
        dim = kwargs.get("dim", 0 if dim is None else dim)
        start, end = kwargs.get("start", start), kwargs.get("end", end)
        step = kwargs.get("step", 1 if step is None else step)
        index = [slice(None)] * input.dim()
        index[dim] = slice(start, end, step)
        return input[tuple(index)]
    if name == "split_with_sizes":
        return input.split(*args, **kwargs)
    if name == "expand":
        kwargs = {k: v for k, v in kwargs.items() if k != "implicit"}  # a tracing flag
    return getattr(input, name)(*args, **kwargs)


def _copy_variant(view: str) -> Callable[..., Any]:
    name = f"{view}_copy"

    def fn(input: Tensor, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        _check_tensor(name, input)
        result = _view(view, input, args, kwargs)
        copied = [_own(t) for t in result] if isinstance(result, tuple | list) else \
            _own(result)
        if out is None:
            return tuple(copied) if isinstance(copied, list) else copied
        if isinstance(copied, list):
            for o, c in zip(out, copied, strict=True):
                o.resize_(c.shape).copy_(c)
            return out
        return out.resize_(copied.shape).copy_(copied)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"torch.{name}: the values of ``input.{view}(...)`` in a new contiguous "
                  f"tensor (no storage shared with ``input``).")
    return fn


def function_forms() -> dict[str, Callable[..., Any]]:
    """name -> function, for the gputensor namespace."""
    forms: dict[str, Callable[..., Any]] = {n: _method_function(n, "the in-place form")
                                            for n in INPLACE_FUNCTIONS}
    forms.update({n: _method_function(n) for n in METHOD_FUNCTIONS})
    forms.update({f"{v}_copy": _copy_variant(v) for v in COPY_VARIANTS})
    return forms
