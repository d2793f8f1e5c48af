"""KL divergence dispatch: ``register_kl`` and ``kl_divergence``.

The closed forms live beside the distributions they pair (``_kl_pairs.py`` and the gamma-family
module); each registers itself here with ``@register_kl(TypeP, TypeQ)``.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.distributions.distribution import Distribution

__all__ = ["register_kl", "kl_divergence"]

# The registered (type_p, type_q) pairs, and the resolved lookups for concrete type pairs.
_KL_REGISTRY: dict[tuple[type, type], Callable] = {}
_KL_MEMOIZE: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type):
    """Decorator registering a function ``fn(p, q)`` computing KL(p || q) for the two types.

    Lookup picks the most specific registered pair (by subclassing); when the order by ``p``
    and the order by ``q`` disagree it warns (RuntimeWarning) that the pair is ambiguous, and
    registering the more derived pair breaks the tie.
    """
    for name, cls in (("type_p", type_p), ("type_q", type_q)):
        if not (isinstance(cls, type) and issubclass(cls, Distribution)):
            raise TypeError(f"Expected {name} to be a Distribution subclass but got {cls}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # a new pair may change the most specific match
        return fun

    return decorator


@functools.total_ordering
class _Match:
    """A registered type pair, ordered lexicographically by subclassing (smaller = more
    specific)."""

    __slots__ = ["types"]

    def __init__(self, *types: type):
        self.types = types

    def __eq__(self, other) -> bool:
        return self.types == other.types

    def __le__(self, other) -> bool:
        for mine, theirs in zip(self.types, other.types, strict=True):
            if not issubclass(mine, theirs):
                return False
            if mine is not theirs:
                break
        return True


def _dispatch_kl(type_p: type, type_q: type):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    if left_fun is not _KL_REGISTRY[right_p, right_q]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})",
                      RuntimeWarning, stacklevel=2)
    return left_fun


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q), batched over the distributions' batch shape.

    Raises NotImplementedError when no pair is registered for the two types.
    """
    key = (type(p), type(q))
    fun = _KL_MEMOIZE.get(key)
    if fun is None:
        fun = _KL_MEMOIZE[key] = _dispatch_kl(*key)
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fun(p, q)


# Small helpers shared by the closed forms.

def _infinite_like(tensor: Tensor) -> Tensor:
    return gt.full_like(tensor, float("inf"))


def _x_log_x(tensor: Tensor) -> Tensor:
    return gt.special.xlogy(tensor, tensor)  # 0 at x = 0


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """trace(X X^T) for a batch of matrices X."""
    n, m = bmat.size(-1), bmat.size(-2)
    return bmat.reshape(-1, m * n).pow(2).sum(-1).reshape(bmat.shape[:-2])
