"""biject_to and transform_to: from a constraint to a transform onto it from the reals.

``biject_to(c)`` returns a bijective transform (for reparametrising a constrained parameter
with an unconstrained one, e.g. in HMC); ``transform_to(c)`` may return a non-bijective one
that is cheaper or better conditioned (e.g. softmax onto the simplex), for optimisation.
Both dispatch on the constraint's class and can be extended with ``register``.
"""
from __future__ import annotations

import numbers

from gputensor.distributions import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Maps constraint classes to factories ``factory(constraint) -> Transform``."""

    def __init__(self) -> None:
        self._registry: dict[type, object] = {}
        super().__init__()

    def register(self, constraint, factory=None):
        """Register ``factory`` for a constraint class (or an instance's class); usable as
        a decorator: ``@biject_to.register(my_constraint)``."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not (isinstance(constraint, type)
                and issubclass(constraint, constraints.Constraint)):
            raise TypeError("Expected constraint to be either a Constraint subclass or "
                            f"instance, but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint) -> transforms.Transform:
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(
                f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _register_both(*constraint_types):
    """Register one factory in both registries for each of ``constraint_types``."""
    def decorator(factory):
        for constraint in constraint_types:
            biject_to.register(constraint, factory)
            transform_to.register(constraint, factory)
        return factory
    return decorator


@_register_both(constraints.real)
def _transform_to_real(constraint):
    return transforms.identity_transform


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint):
    return transforms.IndependentTransform(biject_to(constraint.base_constraint),
                                           constraint.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint):
    return transforms.IndependentTransform(transform_to(constraint.base_constraint),
                                           constraint.reinterpreted_batch_ndims)


@_register_both(constraints.positive, constraints.nonnegative)
def _transform_to_positive(constraint):
    return transforms.ExpTransform()


@_register_both(constraints.greater_than, constraints.greater_than_eq)
def _transform_to_greater_than(constraint):
    return transforms.ComposeTransform(
        [transforms.ExpTransform(), transforms.AffineTransform(constraint.lower_bound, 1)])


@_register_both(constraints.less_than)
def _transform_to_less_than(constraint):
    return transforms.ComposeTransform(
        [transforms.ExpTransform(), transforms.AffineTransform(constraint.upper_bound, -1)])


@_register_both(constraints.interval, constraints.half_open_interval)
def _transform_to_interval(constraint):
    lower, upper = constraint.lower_bound, constraint.upper_bound
    if (isinstance(lower, numbers.Number) and lower == 0
            and isinstance(upper, numbers.Number) and upper == 1):
        return transforms.SigmoidTransform()
    return transforms.ComposeTransform(
        [transforms.SigmoidTransform(), transforms.AffineTransform(lower, upper - lower)])


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint):
    return transforms.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint):
    return transforms.SoftmaxTransform()


@transform_to.register(constraints.lower_cholesky)
def _transform_to_lower_cholesky(constraint):
    return transforms.LowerCholeskyTransform()


@transform_to.register(constraints.positive_definite)
@transform_to.register(constraints.positive_semidefinite)
def _transform_to_positive_definite(constraint):
    return transforms.PositiveDefiniteTransform()


@_register_both(constraints.corr_cholesky)
def _transform_to_corr_cholesky(constraint):
    return transforms.CorrCholeskyTransform()


@biject_to.register(constraints.cat)
def _biject_to_cat(constraint):
    return transforms.CatTransform([biject_to(c) for c in constraint.cseq], constraint.dim,
                                   constraint.lengths)


@transform_to.register(constraints.cat)
def _transform_to_cat(constraint):
    return transforms.CatTransform([transform_to(c) for c in constraint.cseq],
                                   constraint.dim, constraint.lengths)


@biject_to.register(constraints.stack)
def _biject_to_stack(constraint):
    return transforms.StackTransform([biject_to(c) for c in constraint.cseq], constraint.dim)


@transform_to.register(constraints.stack)
def _transform_to_stack(constraint):
    return transforms.StackTransform([transform_to(c) for c in constraint.cseq],
                                     constraint.dim)
