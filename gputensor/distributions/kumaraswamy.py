"""Kumaraswamy distribution on (0, 1): U ~ Uniform(0, 1) pushed through
``(1 - U^(1/b))^(1/a)`` with a = concentration1, b = concentration0."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.transforms import AffineTransform, PowerTransform
from gputensor.distributions.uniform import Uniform
from gputensor.distributions.utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moment(a, b, n: int):
    """E[X^n] = b * B(1 + n / a, b)."""
    shifted = 1 + n / a
    return b * gt.exp(gt.lgamma(shifted) + gt.lgamma(b) - gt.lgamma(shifted + b))


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(concentration1, concentration0), density ``a b x^(a-1) (1 - x^a)^(b-1)``;
    the mode is NaN where either concentration is below 1."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(gt.full_like(self.concentration0, 0),
                            gt.full_like(self.concentration0, 1), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return gt.where((b < 1) | (a < 1), float("nan"), log_mode).exp()

    @property
    def variance(self):
        return _moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t1, t0 = 1 - a.reciprocal(), 1 - b.reciprocal()
        harmonic = gt.digamma(b + 1) + euler_constant
        return t0 + t1 * harmonic - gt.log(a) - gt.log(b)
