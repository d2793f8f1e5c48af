"""Inverse gamma distribution: 1 / X for X ~ Gamma(concentration, rate)."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.gamma import Gamma
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.transforms import PowerTransform

__all__ = ["InverseGamma"]

_INF = float("inf")


class InverseGamma(TransformedDistribution):
    """InverseGamma(concentration, rate); mean and variance are infinite where they do not
    exist (concentration <= 1, <= 2)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        return gt.where(self.concentration > 1, self.rate / (self.concentration - 1), _INF)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        c = self.concentration
        return gt.where(c > 2, self.rate.square() / ((c - 1).square() * (c - 2)), _INF)

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + gt.lgamma(c) - (1 + c) * gt.digamma(c)
