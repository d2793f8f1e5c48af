"""Constraints: regions over which a distribution's parameters and values are valid.

Each constraint's ``check(value)`` returns a bool tensor of shape ``value.shape[:-event_dim]``.
The private class names (``_Real``, ``_GreaterThan``...) match PyTorch's, because ``repr``
(used in validation messages) strips the leading underscore and ``biject_to`` dispatches on them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gputensor as gt

__all__ = [
    "Constraint", "boolean", "cat", "corr_cholesky", "dependent", "dependent_property",
    "greater_than", "greater_than_eq", "independent", "integer_interval", "interval",
    "half_open_interval", "is_dependent", "less_than", "lower_cholesky", "lower_triangular",
    "MixtureSameFamilyConstraint", "multinomial", "nonnegative", "nonnegative_integer",
    "one_hot", "positive", "positive_semidefinite", "positive_definite", "positive_integer",
    "real", "real_vector", "simplex", "square", "stack", "symmetric", "unit_interval",
]


class Constraint:
    """A region over which a variable is valid.

    ``is_discrete`` says whether the region is discrete; ``event_dim`` is how many rightmost
    dimensions form one event (``check`` reduces them away).
    """

    is_discrete = False
    event_dim = 0

    def check(self, value):
        """Bool tensor of ``sample_shape + batch_shape``: whether each event is valid."""
        raise NotImplementedError(f"{type(self).__name__} does not implement check")

    def __repr__(self) -> str:
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """Placeholder for a variable whose support depends on other variables."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        """``constraints.dependent(is_discrete=True, event_dim=1)`` fixes the static fields."""
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether ``constraint`` is a dependent (placeholder) constraint."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A ``property`` that reads as a dependent constraint on the class.

    ``@constraints.dependent_property(is_discrete=False, event_dim=0)`` on ``support``.
    """

    def __init__(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        is_discrete: bool | None = NotImplemented,
        event_dim: int | None = NotImplemented,
    ) -> None:
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn: Callable[..., Any]) -> _DependentProperty:  # type: ignore[override]
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


def _all_over_last(result, ndims: int):
    """``result.all()`` over its ``ndims`` rightmost dimensions."""
    if ndims == 0:
        return result
    return result.reshape(tuple(result.shape[: result.dim() - ndims]) + (-1,)).all(-1)


class _IndependentConstraint(Constraint):
    """Reinterprets ``reinterpreted_batch_ndims`` batch dims of a constraint as event dims."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(
                f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int):
            raise AssertionError("reinterpreted_batch_ndims must be an int, got "
                                 f"{type(reinterpreted_batch_ndims).__name__}")
        if reinterpreted_batch_ndims < 0:
            raise AssertionError(
                f"reinterpreted_batch_ndims must be >= 0, got {reinterpreted_batch_ndims}")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        return _all_over_last(result, self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return (f"{type(self).__name__[1:]}({self.base_constraint!r}, "
                f"{self.reinterpreted_batch_ndims})")


class MixtureSameFamilyConstraint(Constraint):
    """A component constraint checked with the mixture dimension added back."""

    def __init__(self, base_constraint: Constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(
                f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return self.base_constraint.event_dim

    def check(self, value):
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        return _all_over_last(result, result.dim() - (value.dim() - self.event_dim))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_constraint!r})"


class _Boolean(Constraint):
    """The two values ``{0, 1}``."""

    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """One-hot vectors."""

    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        return is_boolean.all(-1) & value.sum(-1).eq(1)


def _bounds_repr(self, **bounds) -> str:
    inner = ", ".join(f"{name}={bound}" for name, bound in bounds.items())
    return f"{type(self).__name__[1:]}({inner})"


class _LowerBounded(Constraint):
    """A region bounded below by ``lower_bound``."""

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def __repr__(self) -> str:
        return _bounds_repr(self, lower_bound=self.lower_bound)


class _UpperBounded(Constraint):
    """A region bounded above by ``upper_bound``."""

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def __repr__(self) -> str:
        return _bounds_repr(self, upper_bound=self.upper_bound)


class _Bounded(Constraint):
    """A region between ``lower_bound`` and ``upper_bound``."""

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def __repr__(self) -> str:
        return _bounds_repr(self, lower_bound=self.lower_bound, upper_bound=self.upper_bound)


class _IntegerInterval(_Bounded):
    """Integers in ``[lower_bound, upper_bound]``."""

    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _IntegerLessThan(_UpperBounded):
    """Integers in ``(-inf, upper_bound]``."""

    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (value <= self.upper_bound)


class _IntegerGreaterThan(_LowerBounded):
    """Integers in ``[lower_bound, inf)``."""

    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)


class _Real(Constraint):
    """The extended real line; only NaN is outside it."""

    def check(self, value):
        return value == value


class _GreaterThan(_LowerBounded):
    """The half line ``(lower_bound, inf]``."""

    def check(self, value):
        return self.lower_bound < value


class _GreaterThanEq(_LowerBounded):
    """The half line ``[lower_bound, inf)``."""

    def check(self, value):
        return self.lower_bound <= value


class _LessThan(_UpperBounded):
    """The half line ``[-inf, upper_bound)``."""

    def check(self, value):
        return value < self.upper_bound


class _Interval(_Bounded):
    """The closed interval ``[lower_bound, upper_bound]``."""

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)


class _HalfOpenInterval(_Bounded):
    """The interval ``[lower_bound, upper_bound)``."""

    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Simplex(Constraint):
    """Nonnegative vectors summing to one over the last dimension."""

    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    """Nonnegative integer vectors whose sum is at most ``upper_bound``."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


def _is_lower_triangular(value):
    return _all_over_last(value.tril() == value, 2)


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices."""

    event_dim = 2

    def check(self, value):
        return _is_lower_triangular(value)


class _LowerCholesky(Constraint):
    """Lower-triangular matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value):
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)
        return _is_lower_triangular(value) & positive_diagonal


class _CorrCholesky(Constraint):
    """Cholesky factors of correlation matrices: lower Cholesky with unit-norm rows."""

    event_dim = 2

    def check(self, value):
        # Tolerance grows with the row length; 10 is a fudge factor for rounding.
        tol = gt.finfo(value.dtype).eps * value.size(-1) * 10
        row_norm = gt.linalg.norm(value.detach(), dim=-1)
        unit_rows = (row_norm - 1.0).abs().le(tol).all(dim=-1)
        return _LowerCholesky().check(value) & unit_rows


class _Square(Constraint):
    """Square matrices."""

    event_dim = 2

    def check(self, value):
        return gt.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1],
                       dtype=gt.bool, device=value.device)


class _Symmetric(_Square):
    """Symmetric square matrices."""

    def check(self, value):
        square = super().check(value)
        if not bool(square.all()):
            return square
        return gt.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    """Positive-semidefinite matrices."""

    def check(self, value):
        symmetric = super().check(value)
        if not bool(symmetric.all()):
            return symmetric
        return gt.linalg.eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    """Positive-definite matrices."""

    def check(self, value):
        symmetric = super().check(value)
        if not bool(symmetric.all()):
            return symmetric
        return gt.linalg.cholesky_ex(value).info.eq(0)


class _Cat(Constraint):
    """Constraints applied to consecutive slices of ``dim`` (lengths ``lengths``), like cat."""

    def __init__(self, cseq, dim: int = 0, lengths=None):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(
                f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        _check_dim_in_range(self.dim, value)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths, strict=True):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return gt.cat(checks, self.dim)


def _check_dim_in_range(dim: int, value) -> None:
    if not -value.dim() <= dim < value.dim():
        raise AssertionError(f"dim {dim} out of range for value with {value.dim()} dimensions")


class _Stack(Constraint):
    """Constraints applied to the slices of ``dim``, like stack."""

    def __init__(self, cseq, dim: int = 0):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        _check_dim_in_range(self.dim, value)
        slices = [value.select(self.dim, i) for i in range(value.size(self.dim))]
        return gt.stack([c.check(v) for v, c in zip(slices, self.cseq, strict=False)], self.dim)


# Public interface: instances for fixed regions, classes for parametrised ones.
dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
