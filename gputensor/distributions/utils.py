"""Helpers shared by the distributions: broadcasting, logits/probs, lazy properties, tril."""
from __future__ import annotations

import numbers
from collections.abc import Callable
from functools import update_wrapper
from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant

__all__ = [
    "broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits", "lazy_property",
    "tril_matrix_to_vec", "vec_to_tril_matrix",
]


def broadcast_all(*values) -> tuple[Tensor, ...]:
    """Broadcast tensors and numbers together.

    Numbers become tensors with the dtype and device of the first tensor (the default dtype
    when all values are numbers).
    """
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    first_tensor = next((v for v in values if isinstance(v, Tensor)), None)
    if first_tensor is None:
        options: dict[str, Any] = {"dtype": gt.get_default_dtype()}
    else:
        options = {"dtype": first_tensor.dtype, "device": first_tensor.device}
    tensors = [v if isinstance(v, Tensor) else gt.tensor(v, **options) for v in values]
    return tuple(gt.broadcast_tensors(*tensors))


def _standard_normal(shape, dtype, device) -> Tensor:
    return gt.empty(shape, dtype=dtype, device=device).normal_()


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or unnormalised log-probabilities (last dim) to probabilities."""
    if is_binary:
        return gt.sigmoid(logits)
    return gt.nn.functional.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Clamp probabilities into ``[eps, 1 - eps]`` with ``eps`` the dtype's machine epsilon."""
    eps = gt.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities to log-odds (binary) or log-probabilities (last dim)."""
    clamped = clamp_probs(probs)
    if is_binary:
        return gt.log(clamped) - gt.log1p(-clamped)
    return gt.log(clamped)


class lazy_property:
    """A property computed on first access, then stored on the instance.

    It is computed with grad enabled, so a parameter derived lazily keeps its graph even
    when first read under ``no_grad``.
    """

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        self.wrapped = wrapped
        update_wrapper(self, wrapped)  # type: ignore[arg-type]

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with gt.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """What a lazy property reads as on the class: a property and a lazy_property at once."""

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        property.__init__(self, wrapped)


def _tril_mask(n: int, diag: int, device) -> Tensor:
    arange = gt.arange(n, device=device)
    return arange < arange.view(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular entries (below diagonal ``diag``) of ``mat`` in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag, mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of :func:`tril_matrix_to_vec`: a lower-triangular ``D x D`` matrix."""
    # The positive root of D**2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 len = 0.
    b = 1 + 2 * diag
    n = (-b + (b ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > gt.finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be "
                         "expressed as the lower triangular part of a square D x D matrix.")
    n = round(n)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., _tril_mask(n, diag, vec.device)] = vec
    return mat


def _require_one_of(probs, logits) -> None:
    """Distributions parametrised by probabilities or logits take exactly one of them."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
