"""Complex numbers as pairs of reals and back, as views (torch's view_as_real,
view_as_complex, real, imag, Tensor.real/.imag) and complex/polar constructors.

A complex64 element is two float32s in memory, so ``view_as_real`` reinterprets the storage:
shape (..., 2), every stride doubled, the last stride 1. Writes through the views change the
complex tensor. Gradients follow PyTorch: each view's backward is the other view of the
gradient, so real and imag (selects of view_as_real) route a real gradient into the real or
imaginary part.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import TENSOR_METHODS

from ._core import op

_COMPLEX_OF = {D.float32: D.complex64, D.float64: D.complex128}


@op(grad={"input": "view_as_complex(g.contiguous())"}, jvp="auto_linear")
def view_as_real(input: Tensor) -> Tensor:
    """A real view (..., 2) of a complex tensor: its real and imaginary parts side by side."""
    if not input.is_complex():
        raise RuntimeError("view_as_real is only supported for complex tensors")
    out = Tensor._make(input._storage, input.dtype.to_real(), (*input._shape, 2),
                       (*(2 * s for s in input._stride), 1), 2 * input._offset)
    out._base = input
    return out


@op(grad={"input": "view_as_real(g)"}, jvp="auto_linear")
def view_as_complex(input: Tensor) -> Tensor:
    """A complex view of a real (..., 2) tensor whose last dim holds (real, imaginary)."""
    dt = _COMPLEX_OF.get(input.dtype)
    if dt is None:
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {input.dtype.legacy_name}")
    if input.dim() == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if input.stride(-1) != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s, n in zip(input._stride[:-1], input._shape, strict=False) if n != 1):
        # (a size-1 dim's stride is never stepped, so PyTorch does not check it)
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                           "dimension")
    if input._offset % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    out = Tensor._make(input._storage, dt, tuple(input._shape[:-1]),
                       tuple(s // 2 for s in input._stride[:-1]), input._offset // 2)
    out._base = input
    return out


@op(method=False)
def real(input: Tensor) -> Tensor:
    """The real part of a complex tensor, as a view; a real tensor itself."""
    return view_as_real(input).select(-1, 0) if input.is_complex() else input


@op(method=False)
def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor, as a view."""
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return view_as_real(input).select(-1, 1)


def _set_part(part: str) -> Any:
    def setter(self: Tensor, value: Any) -> None:
        getattr(gt, part)(self).copy_(value)
    return setter


TENSOR_METHODS["real"] = property(lambda self: real(self), _set_part("real"))
TENSOR_METHODS["imag"] = property(lambda self: imag(self), _set_part("imag"))


@op(method=False)
def complex(real: Tensor, imag: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A001
    """The complex tensor ``real + i imag`` (float or double parts of one dtype, broadcast)."""
    if real.dtype is not imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {real.dtype.legacy_name} but got "
                           f"scalar type {imag.dtype.legacy_name} for second argument")
    if real.dtype not in _COMPLEX_OF:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{real.dtype.legacy_name} and {imag.dtype.legacy_name}")
    result = view_as_complex(gt.stack(gt.broadcast_tensors(real, imag), -1))
    return result if out is None else out.copy_(result)


@op(method=False)
def polar(abs: Tensor, angle: Tensor, *, out: Tensor | None = None) -> Tensor:  # noqa: A002
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``."""
    return complex(abs * gt.cos(angle), abs * gt.sin(angle), out=out)


@op(differentiable=False)
def isreal(input: Tensor) -> Tensor:
    """Where ``input`` has a zero imaginary part (everywhere, for a real dtype)."""
    if not input.is_complex():
        return gt.ones_like(input, dtype=D.bool)
    return imag(input) == 0
