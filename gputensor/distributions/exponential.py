"""Exponential distribution."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.utils import broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """Exponential distribution with rate ``rate`` (mean ``1 / rate``)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Exponential, batch_shape, ("rate",), _instance=_instance)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return gt.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.rate.new_empty(shape).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - gt.exp(-self.rate * value)

    def icdf(self, value):
        return -gt.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - gt.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -gt.log(-x)
