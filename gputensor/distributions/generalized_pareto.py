"""Generalized Pareto distribution."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """Generalized Pareto distribution with location ``loc``, scale ``scale`` and shape
    ``concentration`` (0 gives the exponential, negative a bounded support)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(GeneralizedPareto, batch_shape,
                                   ("loc", "scale", "concentration"), _instance=_instance)

    def _safe_concentration(self):
        """(concentration == 0 mask, concentration with the zeros replaced by 1)."""
        conc = self.concentration
        eq_zero = gt.isclose(conc, gt.zeros_like(conc))
        return eq_zero, gt.where(eq_zero, gt.ones_like(conc), conc)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(gt.rand(shape, dtype=self.loc.dtype, device=self.loc.device))

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + gt.ones_like(z)
        where_nonzero = gt.where(y == 0, y, y * gt.log1p(safe_conc * z))
        return -self.scale.log() - gt.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        """log(1 - cdf(value))."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        return gt.where(eq_zero, -z, -gt.log1p(safe_conc * z) / safe_conc)

    def log_cdf(self, value):
        """log(cdf(value))."""
        return gt.log1p(-gt.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return gt.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe_conc = self._safe_concentration()
        logu = gt.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * gt.expm1(-safe_conc * logu)
        return gt.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = gt.where(valid, self.concentration, gt.full_like(self.concentration, 0.5))
        result = self.loc + self.scale / (1 - safe_conc)
        return gt.where(valid, result, gt.full_like(result, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = gt.where(valid, self.concentration, gt.full_like(self.concentration, 0.25))
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return gt.where(valid, result, gt.full_like(result, math.nan))

    def entropy(self):
        return gt.broadcast_to(gt.log(self.scale) + self.concentration + 1, self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = gt.where(self.concentration < 0, lower - self.scale / self.concentration,
                         gt.full_like(lower, math.inf))
        return constraints.interval(lower, upper)
