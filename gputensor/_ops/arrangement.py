"""Ops that arrange values into new shapes (torch's atleast_1d/2d/3d, block_diag, vander,
combinations, unravel_index) and small predicates and spellings around existing ops
(isposinf, isneginf, positive, rsub, logaddexp2, ldexp, is_nonzero, is_same_size,
is_conj, is_neg, resolve_conj, resolve_neg), composed of existing ops."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

from ._core import op, result_type, tensor_method
from .elementwise import _check_tensor_operands


def _atleast(tensors: tuple, ndim: int) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        return tuple(_atleast((t,), ndim) for t in tensors[0])
    out = []
    for t in tensors:
        if t.dim() >= ndim:
            out.append(t)
        elif ndim == 3 and t.dim() == 2:
            out.append(t.unsqueeze(-1))  # (M, N) -> (M, N, 1), as numpy and PyTorch
        elif ndim == 3 and t.dim() == 1:
            out.append(t.reshape(1, -1, 1))
        else:
            out.append(t.reshape((1,) * (ndim - t.dim()) + tuple(t.shape)))
    return out[0] if len(out) == 1 else tuple(out)


@op(method=False)
def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one dim (a 0-d one becomes shape (1,))."""
    return _atleast(tensors, 1)


@op(method=False)
def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least two dims (leading size-1 dims added)."""
    return _atleast(tensors, 2)


@op(method=False)
def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least three dims ((N,) -> (1, N, 1), (M, N) -> (M, N, 1))."""
    return _atleast(tensors, 3)


@op(method=False)
def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the given matrices (a 0-d tensor is 1x1, a 1-d one 1xN),
    in their promoted dtype."""
    mats = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.dim()} dimensions".replace("torch", "gputensor"))
        mats.append(t.reshape(1, 1) if t.dim() == 0 else (t.reshape(1, -1) if t.dim() == 1
                                                         else t))
    if not mats:
        return gt.empty(1, 0)
    dt = result_type(*tensors)   # before the reshape: a 0-d tensor promotes as a 0-d one
    cols = sum(m.shape[1] for m in mats)
    pieces, c = [], 0
    for m in mats:  # each block padded with zeros left and right to the full width
        pieces.append(gt.nn.functional.pad(m.to(dt), (c, cols - c - m.shape[1])))
        c += m.shape[1]
    return gt.cat(pieces, 0)


@op(method=False)
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of a 1-D ``x``: columns x^(N-1) ... x^0 (or increasing)."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dt = D.promote_types(x.dtype, D.int64) if not (x.is_floating_point() or x.is_complex()) \
        else x.dtype
    xs = x.to(dt)
    if n == 0:
        return gt.empty(x.shape[0], 0, dtype=dt, device=x.device)
    # PyTorch's cumprod of the expanded x: its accumulator (double for float32/complex64 on
    # the CPU) decides where a power overflows, e.g. (1e30 + 1e30j)^2 = 2e60j, not nan
    out = gt.ones(x.shape[0], 1, dtype=dt, device=x.device)
    if n > 1:
        out = gt.cat([out, xs.unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1)], 1)
    return out if increasing else out.flip(1)


@op(method=False)
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of a 1-D tensor's elements, as rows (itertools' order)."""
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return gt.empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return gt.empty(0, r, dtype=input.dtype, device=input.device)
    idx = gt.tensor(rows, dtype=D.int64, device=input.device)
    return input[idx]


@op(method=False, differentiable=False)
def unravel_index(indices: Any, shape: Sequence[int] | int) -> tuple[Tensor, ...]:
    """The coordinates in ``shape`` of flat ``indices`` (one tensor per dim)."""
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not isinstance(indices, Tensor):
        indices = gt.tensor(indices)
    if indices.is_floating_point() or indices.is_complex() or indices.dtype is D.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if any(d < 0 for d in dims):
        raise ValueError(f"'shape' cannot have negative values, but got {dims}")
    # PyTorch's formula, with no range check: (indices // prod(shape[i+1:])) % shape[i], so an
    # index out of range wraps, and a 0 in shape divides by zero (its ZeroDivisionError).
    coefs = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    dev = indices.device
    res = indices.unsqueeze(-1).floor_divide(gt.tensor(coefs, dtype=D.int64, device=dev)) \
        % gt.tensor(list(dims), dtype=D.int64, device=dev)
    return res.unbind(-1)


@op(differentiable=False)
def isposinf(input: Tensor) -> Tensor:
    """Where ``input`` is +inf (never, for integers)."""
    if input.is_complex():
        raise RuntimeError("isposinf does not support complex inputs.")
    if not input.is_floating_point():
        return gt.zeros_like(input, dtype=D.bool)
    return input == float("inf")


@op(differentiable=False)
def isneginf(input: Tensor) -> Tensor:
    """Where ``input`` is -inf (never, for integers)."""
    if input.is_complex():
        raise RuntimeError("isneginf does not support complex inputs.")
    if not input.is_floating_point():
        return gt.zeros_like(input, dtype=D.bool)
    return input == float("-inf")


@op()
def positive(input: Tensor) -> Tensor:
    """``input`` itself (unary plus); refused for bool, as PyTorch's ``+``."""
    if input.dtype is D.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@op(method=False)
def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``other - alpha * input``."""
    return gt.sub(other, input, alpha=alpha)  # a Python number stays a weakly typed scalar


@op()
def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """log2(2^input + 2^other), without overflow."""
    _check_tensor_operands("logaddexp2", (input, other))
    dt = result_type(input, other)
    if dt.category <= D.INTEGRAL or dt.is_complex:   # PyTorch's kernel has only real floats
        raise NotImplementedError(f"\"logaddexp2_{input.device.type}\" not implemented for "
                                  f"'{dt.legacy_name}'")
    hi = gt.maximum(input, other)
    lo = gt.minimum(input, other)
    both_inf = (hi == lo) & hi.isinf()
    out = hi + gt.log2(1 + gt.exp2(lo - hi))
    return gt.where(both_inf, hi, out)


# ldexp's exponents past these give the same result as these (0 or inf) for every float dtype.
_LDEXP_CLAMP = 2200


def _ldexp_int_exponent(input: Tensor, other: Any) -> bool:
    """PyTorch's std::ldexp path: a floating input with integer (or bool) exponents."""
    return (isinstance(other, Tensor) and input.is_floating_point()
            and not (other.is_floating_point() or other.is_complex()))


def _ldexp_power(input: Tensor, other: Any) -> Any:
    """PyTorch's _pow2: 2**other for an integral or float32 input, else 2 in the input's
    dtype raised to other (so a float16 exponent of a float64 input is rounded in float16)."""
    if not input.is_floating_point() and not input.is_complex() or input.dtype is gt.float32:
        return gt.pow(2.0, other)
    return gt.full((), 2.0, dtype=input.dtype, device=input.device).pow(other)


def _wrapped_exponent(other: Tensor) -> Tensor:
    if other.dtype is gt.bool:  # PyTorch's kernel dispatches on integer types only
        raise NotImplementedError('"ldexp_cpu_exp" not implemented for \'Bool\'')
    # C's int conversion: int64 exponents keep their low 32 bits, as PyTorch's std::ldexp call.
    return other.to(gt.int32).clamp(-_LDEXP_CLAMP, _LDEXP_CLAMP)


@op(inplace=True)
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2**other`` as PyTorch computes it: exactly (C's ldexp, in the input's dtype)
    for a floating input with integer exponents, else ``mul(input, _pow2(input, other))``."""
    if _ldexp_int_exponent(input, other):
        return OPS["_ldexp_int"].frontend(input, _wrapped_exponent(other))
    power = _ldexp_power(input, other)
    dt = gt.result_type(input, power)
    # The input goes to the result dtype first because mul computes float16 in float32: an
    # int32 input past float16's range is inf there, and inf * 2**-inf is NaN, as in PyTorch.
    return gt.mul(input.to(dt) if dt.is_floating_point or dt.is_complex else input, power)


@tensor_method()
def ldexp_(self: Tensor, other: Tensor) -> Tensor:
    if not (self.is_floating_point() or self.is_complex()):
        raise RuntimeError(f"ldexp can't be cast to the desired output type "
                           f"{self.dtype.legacy_name}")
    if _ldexp_int_exponent(self, other):
        return OPS["_ldexp_int"].inplace_fn(self, _wrapped_exponent(other))
    return self.mul_(_ldexp_power(self, other))


@op(differentiable=False)
def is_nonzero(input: Tensor) -> bool:
    """Whether a one-element tensor is nonzero."""
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item() != 0)


@op(method=False, differentiable=False)
def get_device(input: Tensor) -> int:
    """The CUDA device index of ``input``, -1 for a CPU tensor."""
    return input.get_device()


@op(differentiable=False)
def is_same_size(input: Tensor, other: Tensor) -> bool:
    return tuple(input.shape) == tuple(other.shape)


@op(differentiable=False)
def is_conj(input: Tensor) -> bool:
    """Always False: gputensor conjugates eagerly, never through a lazy bit."""
    return False


@op(differentiable=False)
def is_neg(input: Tensor) -> bool:
    """Always False: gputensor negates eagerly, never through a lazy bit."""
    return False


@op()
def resolve_conj(input: Tensor) -> Tensor:
    """``input``: there is no lazy conjugate bit to materialise."""
    return input


@op()
def resolve_neg(input: Tensor) -> Tensor:
    """``input``: there is no lazy negative bit to materialise."""
    return input
