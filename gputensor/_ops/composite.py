"""Ops whose frontends wrap elementwise declarations with PyTorch's extra rules: div modes,
clamp, where, lerp and square dtype checks, float_power, closeness tests, fill_."""

from __future__ import annotations

import warnings
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.autograd.forward_ad import _state as _fw_state
from gputensor.autograd.jvp import fill_tangent
from gputensor.kernels.registry import OPS

from ._core import kernel, op, result_type, tensor_method
from ._scalar_range import checked_fill_value

_DIV_MODES = {None: "true_divide", "trunc": "_div_trunc", "floor": "_div_floor"}


def _div_op(rounding_mode: str | None) -> Any:
    try:
        return OPS[_DIV_MODES[rounding_mode]]
    except KeyError:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'") from None


@op(inplace=True, aliases=("divide",))
def div(input: Any, other: Any, *, rounding_mode: str | None = None,
        out: Tensor | None = None) -> Tensor:
    """input / other; rounding_mode 'trunc' or 'floor' rounds the quotient."""
    return _div_op(rounding_mode).frontend(input, other, out=out)


@tensor_method("div_", "divide_")
def div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    return _div_op(rounding_mode).inplace_fn(self, other)


def _clamp_bounds(input: Tensor, min: Any, max: Any) -> tuple[Any, Any]:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None"
                           .replace("torch", "gputensor"))
    bounds = [b for b in (min, max) if b is not None]
    if any(isinstance(b, Tensor) for b in bounds) and \
            any(not isinstance(b, Tensor) for b in bounds):
        # PyTorch binds a 0-dim tensor next to a number to its Scalar overload (the value)
        min, max = (b.item() if isinstance(b, Tensor) and not b.dim() else b
                    for b in (min, max))
        bounds = [b for b in (min, max) if b is not None]
    dt = result_type(input, *bounds)
    tensors = sum(isinstance(b, Tensor) for b in bounds)
    if dt is D.bool and not (tensors == 1 and len(bounds) == 1):
        # PyTorch's bool kernels clamp by one tensor bound only (clamp_min/clamp_max.Tensor)
        which = "clamp" if len(bounds) == 2 else "clamp_min" if max is None else "clamp_max"
        raise NotImplementedError(f'"{which}{"" if tensors else "_scalar"}_'
                                  f'{input.device.type}" not implemented for \'Bool\'')
    if not tensors:  # the Scalar overload converts them
        for b in bounds:
            checked_fill_value(b, dt)
    # The missing bound must not take part in promotion: use a value of the result's category.
    if dt.category >= D.FLOATING:
        lo, hi = -float("inf"), float("inf")
    elif dt is D.bool:
        lo, hi = False, True
    else:
        info = D.iinfo(dt)
        lo, hi = info.min, info.max
    return (lo if min is None else min), (hi if max is None else max)


@op(inplace=True, aliases=("clip",))
def clamp(input: Tensor, min: Any = None, max: Any = None, *, out: Tensor | None = None) -> Tensor:
    """Limit values to [min, max]; NaN stays NaN; min > max gives max everywhere."""
    lo, hi = _clamp_bounds(input, min, max)
    return OPS["_clamp"].frontend(input, lo, hi, out=out)


@tensor_method("clamp_", "clip_")
def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    lo, hi = _clamp_bounds(self, min, max)
    return OPS["_clamp"].inplace_fn(self, lo, hi)


@op(inplace=True)
def clamp_min(input: Tensor, min: Any) -> Tensor:
    return clamp(input, min=min)


@tensor_method()
def clamp_min_(self: Tensor, min: Any) -> Tensor:
    return clamp_(self, min=min)


@op(inplace=True)
def clamp_max(input: Tensor, max: Any) -> Tensor:
    return clamp(input, max=max)


@tensor_method()
def clamp_max_(self: Tensor, max: Any) -> Tensor:
    return clamp_(self, max=max)


@op(method=False)
def where(condition: Tensor, input: Any = None, other: Any = None, *,
          out: Tensor | None = None) -> Any:
    """Elements of input where condition holds, else of other; where(cond) = nonzero(as_tuple)."""
    if input is None and other is None:
        from .sort import nonzero
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() needs both input and other (or neither)")
    if isinstance(condition, Tensor) and condition.dtype is D.uint8:
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and "
                      "will be removed in a future version. Use a boolean condition instead.",
                      UserWarning, stacklevel=2)
        condition = condition.bool()
    if not isinstance(condition, Tensor) or condition.dtype is not D.bool:
        got = (condition.dtype.legacy_name if isinstance(condition, Tensor)
               else type(condition).__name__)
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {got}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        from .creation import scalar_tensor
        dt = result_type(input, other)
        input = scalar_tensor(input, dt, condition.device)
    return OPS["_where"].frontend(condition, input, other, out=out)


@tensor_method("where")
def _where_method(self: Tensor, condition: Tensor, other: Any) -> Tensor:
    """x.where(condition, y) is where(condition, x, y): the method's self is the input."""
    return where(condition, self, other)


def _float_power_dtype(input: Any, exponent: Any) -> D.dtype:
    return D.complex128 if result_type(input, exponent).is_complex else D.float64


@op(inplace=True)
def float_power(input: Any, exponent: Any, *, out: Tensor | None = None) -> Tensor:
    """pow computed in double precision (complex128 if either side is complex)."""
    dt = _float_power_dtype(input, exponent)
    if out is not None and out.dtype is not dt:
        raise RuntimeError(f"the output given to float_power has dtype {out.dtype.legacy_name} "
                           f"but the operation's result requires dtype {dt.legacy_name}")
    a = input.to(dt) if isinstance(input, Tensor) else input
    b = exponent.to(dt) if isinstance(exponent, Tensor) else exponent
    return OPS["pow"].frontend(a, b, out=out)


@tensor_method()
def float_power_(self: Tensor, exponent: Any) -> Tensor:
    dt = _float_power_dtype(self, exponent)
    if self.dtype is not dt:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype.legacy_name} "
                           f"but the operation's result requires dtype {dt.legacy_name}")
    b = exponent.to(dt) if isinstance(exponent, Tensor) else exponent
    return OPS["pow"].inplace_fn(self, b)


@op(inplace=True)
def square(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """input * input; bool squares to int64, as in PyTorch (where it is pow(input, 2))."""
    if isinstance(input, Tensor) and input.dtype is D.bool:
        input = input.to(D.int64)
    return OPS["_square"].frontend(input, out=out)


@tensor_method()
def square_(self: Tensor) -> Tensor:
    if self.dtype is D.bool:
        raise RuntimeError("result type Long can't be cast to the desired output type Bool")
    return OPS["_square"].inplace_fn(self)


def _check_lerp(input: Tensor, end: Any, weight: Any) -> None:
    if not isinstance(input, Tensor) or not isinstance(end, Tensor):
        raise TypeError("lerp(): input and end must be Tensors")
    if input.dtype.category <= D.INTEGRAL:
        raise RuntimeError(f"lerp: not implemented for '{input.dtype.legacy_name}' tensors")
    # A 0-dim weight may differ in dtype (it promotes like a scalar); others must match.
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not input.dtype and (name == "end" or t.dim()):
            raise RuntimeError(f"expected dtype {input.dtype.legacy_name} for `{name}` but got "
                               f"dtype {t.dtype.legacy_name}")


@op(inplace=True)
def lerp(input: Tensor, end: Tensor, weight: Any, *, out: Tensor | None = None) -> Tensor:
    """input + weight * (end - input), with PyTorch's rounding-friendly form for weight >= 0.5."""
    _check_lerp(input, end, weight)
    return OPS["_lerp"].frontend(input, end, weight, out=out)


@tensor_method()
def lerp_(self: Tensor, end: Tensor, weight: Any) -> Tensor:
    _check_lerp(self, end, weight)
    return OPS["_lerp"].inplace_fn(self, end, weight)


@tensor_method()
def fill_(self: Tensor, value: Any) -> Tensor:
    if type(self._dtype) is D._LimitedDtype:  # uint16, float8, ... (gputensor/_limited.py)
        from gputensor._limited import fill
        return fill(self, value)
    source = value
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.dim()} dimensions.")
        value = value.item()
    else:  # a Python number is range-checked (a 0-dim tensor's value converts unchecked)
        # PyTorch fills a one-element tensor through a double: a 16-bit float rounds to inf
        half = self._dtype.itemsize == 2 and self._dtype.is_floating_point and \
            self.numel() == 1
        value = checked_fill_value(value, D.float64 if half else self._dtype)
    kernel(self, "_copy")(self, [value], (), self._dtype)
    self._storage._version += 1
    if _fw_state.active:   # forward AD: the tangent becomes the value's (or zeros)
        fill_tangent(self, source)
    return self


@tensor_method()
def zero_(self: Tensor) -> Tensor:
    if type(self._dtype) is D._LimitedDtype:  # zero bits, which even the shell dtypes take
        from gputensor._limited import fill
        return fill(self, 0, zero=True)
    return fill_(self, 0)


@op(method=True)
def conj(input: Tensor) -> Tensor:
    """The complex conjugate (the input itself for real tensors, as in PyTorch)."""
    return OPS["_conj"].frontend(input) if input.is_complex() else input


@op(method=True)
def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


@op(method=True)
def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype.legacy_name} did not match {other.dtype.legacy_name}")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if tol < 0:
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got {tol}")
    return OPS["_isclose"].frontend(input, other, rtol=rtol, atol=atol,
                                    equal_nan=1 if equal_nan else 0)


@op(method=True)
def equal(input: Tensor, other: Tensor) -> bool:
    """True if both have the same size and elements."""
    if input.shape != other.shape:
        return False
    return bool(OPS["eq"].frontend(input, other).all().item())
