"""Poisson distribution (``rate``), sampled by gt.poisson on the rate's device."""
from __future__ import annotations

from numbers import Number

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """Counts with ``P(k) = rate^k exp(-rate) / k!``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = gt.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, ("rate",), _instance=_instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with gt.no_grad():
            return gt.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return gt.xlogy(value, rate) - rate - gt.lgamma(value + 1)

    @property
    def _natural_params(self):
        return (gt.log(self.rate),)

    def _log_normalizer(self, x):
        return gt.exp(x)
