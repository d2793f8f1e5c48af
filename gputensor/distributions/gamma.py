"""Gamma distribution (shape ``concentration``, inverse scale ``rate``)."""
from __future__ import annotations

from numbers import Number

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.utils import broadcast_all

__all__ = ["Gamma"]


def _standard_gamma(concentration):
    """Differentiable Gamma(concentration, 1) samples (gt._standard_gamma's implicit gradient)."""
    return gt._standard_gamma(concentration)


class Gamma(ExponentialFamily):
    """Gamma distribution with density ``rate^c x^(c-1) exp(-rate x) / Gamma(c)``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = gt.Size()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gamma, batch_shape, ("concentration", "rate"),
                                   _instance=_instance)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        value.detach().clamp_(min=gt.finfo(value.dtype).tiny)  # never 0, as in PyTorch
        return value

    def log_prob(self, value):
        value = gt.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (gt.xlogy(self.concentration, self.rate) + gt.xlogy(self.concentration - 1, value)
                - self.rate * value - gt.lgamma(self.concentration))

    def entropy(self):
        c = self.concentration
        return c - gt.log(self.rate) + gt.lgamma(c) + (1.0 - c) * gt.digamma(c)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return gt.lgamma(x + 1) + (x + 1) * gt.log(-y.reciprocal())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return gt.special.gammainc(self.concentration, self.rate * value)
