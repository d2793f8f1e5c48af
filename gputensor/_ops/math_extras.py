"""Number-theoretic and floating-point frontends: gcd, lcm, nextafter, frexp, conj_physical.

Their kernels are elementwise registry ops (``_gcd``, ``_lcm``, ``_nextafter``,
``_frexp_mantissa``, ``_frexp_exponent``, ``_conj`` in elementwise.py); these frontends add
PyTorch's operand rules (tensor-only operands, the dtypes each kernel exists for, raised as
its NotImplementedError), the float16/bfloat16 nextafter that float32 compute cannot give, and
derivatives.yaml's formulas.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor
from gputensor.autograd.inplace import apply_inplace, needs_graph
from gputensor.kernels.registry import OPS

from ._core import check_out, common_device, op, result_type


def _check_tensor_other(name: str, other: Any) -> None:
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")


def _not_implemented(name: str, device: Any, dtype: D.dtype) -> NotImplementedError:
    # PyTorch names the kernel by device type: "gcd_cpu", "nextafter_cuda".
    return NotImplementedError(f'"{name}_{device.type}" not implemented for '
                               f"'{dtype.legacy_name}'")


def _integer_operands(name: str, input: Tensor, other: Any) -> None:
    _check_tensor_other(name, other)
    dt = result_type(input, other)
    if dt.category != D.INTEGRAL:
        raise _not_implemented(name, input.device, dt)


# -- gcd, lcm ----------------------------------------------------------------------------------
def gcd_(self: Tensor, other: Tensor) -> Tensor:
    _integer_operands("gcd", self, other)
    return OPS["_gcd"].inplace_fn(self, other)


def lcm_(self: Tensor, other: Tensor) -> Tensor:
    _integer_operands("lcm", self, other)
    return OPS["_lcm"].inplace_fn(self, other)


@op(differentiable=False, inplace=True, inplace_fn=gcd_)
def gcd(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The greatest common divisor of integer tensors, elementwise (non-negative, except that
    INT_MIN's absolute value wraps to itself, as in PyTorch)."""
    _integer_operands("gcd", input, other)
    return OPS["_gcd"].frontend(input, other, out=out)


@op(differentiable=False, inplace=True, inplace_fn=lcm_)
def lcm(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The least common multiple of integer tensors, elementwise (0 where either is 0; a result
    past the dtype's range wraps, as in PyTorch)."""
    _integer_operands("lcm", input, other)
    return OPS["_lcm"].frontend(input, other, out=out)


# -- nextafter ---------------------------------------------------------------------------------
def _float_operands(input: Tensor, other: Any) -> D.dtype:
    _check_tensor_other("nextafter", other)
    dt = result_type(input, other)
    if not dt.is_floating_point:
        raise _not_implemented("nextafter", input.device, dt)
    return dt


def _nextafter_16bit(x: Tensor, y: Tensor) -> Tensor:
    """nextafter for float16/bfloat16 on the bits (the float32 kernel would step in float32):
    the int16 pattern moves by one towards ``y`` (sign-magnitude order), 0 steps to the
    smallest subnormal of ``y``'s sign, equal operands give ``y`` and NaN propagates."""
    x, y = gt.broadcast_tensors(x, y)
    bits = x.contiguous().view(D.int16)
    up = (y > x) == (x > 0)
    moved = bits + gt.where(up, 1, -1).to(D.int16)
    tiny = gt.where(y.signbit(), -32767, 1).to(D.int16)   # 0x8001 / 0x0001
    stepped = gt.where(x == 0, tiny, moved).view(x.dtype)
    result = gt.where(x == y, y, stepped)
    return gt.where(x.isnan() | y.isnan(), x + y, result)


def nextafter_(self: Tensor, other: Tensor) -> Tensor:
    _float_operands(self, other)
    if self.dtype not in (D.float16, D.bfloat16) and not needs_graph(self, (other,), {}):
        return OPS["_nextafter"].inplace_fn(self, other)
    if not needs_graph(self, (other,), {}):
        return self.copy_(nextafter(self, other))
    return apply_inplace(self, lambda: nextafter(self, other))


@op(inplace=True, inplace_fn=nextafter_,
    grad={"input": "masked(g, input != other)", "other": "g * 0"},
    jvp="masked(input_t, input != other)")
def nextafter(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The next float after ``input`` towards ``other``, elementwise (C's nextafter in the
    promoted floating dtype)."""
    dt = _float_operands(input, other)
    if dt not in (D.float16, D.bfloat16):
        return OPS["_nextafter"].frontend(input, other, out=out)
    dev = common_device(input, other, op_name="nextafter")
    result = _nextafter_16bit(input.to(dtype=dt), other.to(device=dev, dtype=dt))
    if out is None:
        return result
    check_out(out, tuple(result.shape), dt, result.device, "nextafter")
    return out.copy_(result)


# -- frexp -------------------------------------------------------------------------------------
@op(output_differentiable=(True, False),
    grad={"input": lambda g, outs: g / outs[1].to(g.dtype).exp2()},
    jvp=(lambda input_t, outs: input_t / outs[1].to(input_t.dtype).exp2(), None))
def frexp(input: Tensor, *, out: tuple[Tensor, Tensor] | list[Tensor] | None = None
          ) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with ``input = mantissa * 2**exponent``, |mantissa| in [0.5, 1)
    (C's frexp: zeros, infinities and NaN keep their value with exponent 0); the exponent is
    int32."""
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    if out is None:
        return return_types.frexp(OPS["_frexp_mantissa"].frontend(input),
                                  OPS["_frexp_exponent"].frontend(input))
    mantissa, exponent = out
    if mantissa.dtype is not input.dtype:
        raise RuntimeError(f"torch.frexp() expects mantissa to have dtype {input.dtype.name} "
                           f"but got {mantissa.dtype.name}")
    if exponent.dtype is not D.int32:
        raise RuntimeError(f"torch.frexp() expects exponent to have int dtype but got "
                           f"{exponent.dtype.name}")
    OPS["_frexp_mantissa"].frontend(input, out=mantissa)
    OPS["_frexp_exponent"].frontend(input, out=exponent)
    return return_types.frexp(mantissa, exponent)


# -- conj_physical (its derivative is _conj's) -------------------------------------------------
def conj_physical_(self: Tensor) -> Tensor:
    """In place; a real tensor is returned as it is."""
    if not self.is_complex():
        return self
    if not needs_graph(self, (), {}):
        return OPS["_conj"].frontend(self, out=self)
    return apply_inplace(self, lambda: conj_physical(self))


@op(inplace=True, inplace_fn=conj_physical_)
def conj_physical(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The complex conjugate computed into new memory (PyTorch returns a real ``input`` itself,
    and copies it into ``out=``)."""
    if out is not None:
        if input.is_complex():
            return OPS["_conj"].frontend(input, out=out)
        check_out(out, tuple(input.shape), input.dtype, input.device, "conj_physical")
        return out.copy_(input)
    return OPS["_conj"].frontend(input) if input.is_complex() else input
