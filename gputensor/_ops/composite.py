"""Ops whose frontends pick among elementwise declarations: div modes, clamp, where, fill_."""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

from ._core import kernel, op, result_type

_DIV_MODES = {None: "true_divide", "trunc": "_div_trunc", "floor": "floor_divide"}


def _div_op(rounding_mode: str | None) -> Any:
    try:
        return OPS[_DIV_MODES[rounding_mode]]
    except KeyError:
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                         f"found '{rounding_mode}'") from None


@op(inplace=True, aliases=("divide",))
def div(input: Any, other: Any, *, rounding_mode: str | None = None,
        out: Tensor | None = None) -> Tensor:
    """input / other; rounding_mode 'trunc' or 'floor' rounds the quotient."""
    return _div_op(rounding_mode).frontend(input, other, out=out)


def div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    return _div_op(rounding_mode).extra["inplace_fn"](self, other)


def _clamp_bounds(input: Tensor, min: Any, max: Any) -> tuple[Any, Any]:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None"
                           .replace("torch", "gputensor"))
    dt = result_type(input, *(b for b in (min, max) if b is not None))
    if dt.category >= D.FLOATING:
        lo, hi = -float("inf"), float("inf")
    else:
        info = D.iinfo(dt)
        lo, hi = info.min, info.max
    return (lo if min is None else min), (hi if max is None else max)


@op(inplace=True, aliases=("clip",))
def clamp(input: Tensor, min: Any = None, max: Any = None, *, out: Tensor | None = None) -> Tensor:
    """Limit values to [min, max]; NaN stays NaN; min > max gives max everywhere."""
    lo, hi = _clamp_bounds(input, min, max)
    return OPS["_clamp"].frontend(input, lo, hi, out=out)


def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    lo, hi = _clamp_bounds(self, min, max)
    return OPS["_clamp"].extra["inplace_fn"](self, lo, hi)


@op(inplace=True)
def clamp_min(input: Tensor, min: Any) -> Tensor:
    return clamp(input, min=min)


@op(inplace=True)
def clamp_max(input: Tensor, max: Any) -> Tensor:
    return clamp(input, max=max)


@op()
def where(condition: Tensor, input: Any = None, other: Any = None, *,
          out: Tensor | None = None) -> Any:
    """Elements of input where condition holds, else of other; where(cond) = nonzero(as_tuple)."""
    if input is None and other is None:
        from .shape import nonzero
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() needs both input and other (or neither)")
    if not isinstance(condition, Tensor) or condition.dtype is not D.bool:
        got = condition.dtype if isinstance(condition, Tensor) else type(condition).__name__
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {got}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        from .creation import scalar_tensor
        dt = result_type(input, other)
        input = scalar_tensor(input, dt, condition.device)
    return OPS["_where"].frontend(condition, input, other, out=out)


@op(method=False)
def float_power(input: Any, exponent: Any) -> Tensor:
    dt = D.complex128 if result_type(input, exponent).is_complex else D.float64
    a = input.to(dt) if isinstance(input, Tensor) else input
    b = exponent.to(dt) if isinstance(exponent, Tensor) else exponent
    return OPS["pow"].frontend(a, b)


def fill_(self: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.dim()} dimensions.")
        value = value.item()
    kernel(self, "_copy")(self, [value], (), self._dtype)
    self._storage._version += 1
    return self


def zero_(self: Tensor) -> Tensor:
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
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    return OPS["_isclose"].frontend(input, other, rtol=rtol, atol=atol,
                                    equal_nan=1 if equal_nan else 0)


@op(method=True)
def equal(input: Tensor, other: Tensor) -> bool:
    """True if both have the same size and elements."""
    if input.shape != other.shape:
        return False
    return bool(OPS["eq"].frontend(input, other).all().item())


Tensor.div_ = div_
Tensor.divide_ = div_
Tensor.clamp_ = clamp_
Tensor.clip_ = clamp_
Tensor.fill_ = fill_
Tensor.zero_ = zero_
