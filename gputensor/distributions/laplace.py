"""Laplace (double exponential) distribution."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions._loc_scale import LocScaleMixin
from gputensor.distributions.distribution import Distribution

__all__ = ["Laplace"]


class Laplace(LocScaleMixin, Distribution):
    """Laplace distribution with location ``loc`` and scale ``scale``."""


    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        # u in (-1, 1): its sign picks the side, |u| the exponential tail by inversion.
        u = self.loc.new_empty(shape).uniform_(gt.finfo(self.loc.dtype).eps - 1, 1)
        return self.loc - self.scale * u.sign() * gt.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -gt.log(2 * self.scale) - gt.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        return 0.5 - 0.5 * diff.sign() * gt.expm1(-diff.abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * gt.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + gt.log(2 * self.scale)
