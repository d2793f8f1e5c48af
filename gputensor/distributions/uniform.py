"""Uniform distribution on the half-open interval [low, high)."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """Uniform distribution on ``[low, high)``."""

    has_rsample = True

    def __init__(self, low, high, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.size(), validate_args=validate_args)

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high),
                "high": constraints.greater_than(self.low)}

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Uniform, batch_shape, ("low", "high"), _instance=_instance)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return float("nan") * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rand = gt.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = self.low.le(value).type_as(self.low) * self.high.gt(value).type_as(self.low)
        return gt.log(inside) - gt.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return gt.log(self.high - self.low)
