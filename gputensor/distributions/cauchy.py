"""Cauchy (Lorentz) distribution."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions._loc_scale import LocScaleMixin
from gputensor.distributions.distribution import Distribution

__all__ = ["Cauchy"]


class Cauchy(LocScaleMixin, Distribution):
    """Cauchy distribution with median ``loc`` and half width ``scale``."""


    @property
    def mean(self):
        return gt.full(self._extended_shape(), float("nan"), dtype=self.loc.dtype,
                       device=self.loc.device)

    @property
    def variance(self):
        return gt.full(self._extended_shape(), float("inf"), dtype=self.loc.dtype,
                       device=self.loc.device)

    def rsample(self, sample_shape=()):
        eps = self.loc.new_empty(self._extended_shape(sample_shape)).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return gt.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return gt.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
