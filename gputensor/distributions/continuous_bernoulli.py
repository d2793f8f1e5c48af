"""Continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem & Cunningham, 2019)."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._probs_logits import ProbsLogitsMixin
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.utils import (
    _require_one_of,
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
)
from gputensor.nn.functional import binary_cross_entropy_with_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ProbsLogitsMixin, ExponentialFamily):
    """Continuous Bernoulli distribution, parametrised by ``probs`` or ``logits``.

    Its normaliser is 0/0 at probs = 0.5; inside ``lims`` the closed forms are replaced by
    their Taylor expansions around 0.5.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        _require_one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None:
                if not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        self._lims = lims
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_probs_or_logits(ContinuousBernoulli, batch_shape,
                                            copied=("_lims",), _instance=_instance)

    def _outside_unstable_region(self):
        return gt.le(self.probs, self._lims[0]) | gt.gt(self.probs, self._lims[1])

    def _cut_probs(self):
        """probs, with those in the unstable region moved to a safe stand-in."""
        return gt.where(self._outside_unstable_region(), self.probs,
                        self._lims[0] * gt.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        cut = self._cut_probs()
        below_half = gt.where(gt.le(cut, 0.5), cut, gt.zeros_like(cut))
        above_half = gt.where(gt.ge(cut, 0.5), cut, gt.ones_like(cut))
        log_norm = gt.log(gt.abs(gt.log1p(-cut) - gt.log(cut))) - gt.where(
            gt.le(cut, 0.5), gt.log1p(-2.0 * below_half), gt.log(2.0 * above_half - 1.0))
        x = gt.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return gt.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (gt.log1p(-cut) - gt.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * gt.pow(x, 2)) * x
        return gt.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return gt.sqrt(self.variance)

    @property
    def variance(self):
        cut = self._cut_probs()
        variances = (cut * (cut - 1.0) / gt.pow(1.0 - 2.0 * cut, 2)
                     + 1.0 / gt.pow(gt.log1p(-cut) - gt.log(cut), 2))
        x = gt.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return gt.where(self._outside_unstable_region(), variances, taylor)

    @lazy_property
    def probs(self):
        # Clamped: the normaliser is infinite at exactly 0 and 1.
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def sample(self, sample_shape=()):
        with gt.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = gt.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (-binary_cross_entropy_with_logits(logits, value, reduction="none")
                + self._cont_bern_log_norm())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = ((gt.pow(cut, value) * gt.pow(1.0 - cut, 1.0 - value) + cut - 1.0)
                / (2.0 * cut - 1.0))
        unbounded = gt.where(self._outside_unstable_region(), cdfs, value)
        return gt.where(gt.le(value, 0.0), gt.zeros_like(value),
                        gt.where(gt.ge(value, 1.0), gt.ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        inverted = ((gt.log1p(-cut + value * (2.0 * cut - 1.0)) - gt.log1p(-cut))
                    / (gt.log(cut) - gt.log1p(-cut)))
        return gt.where(self._outside_unstable_region(), inverted, value)

    def entropy(self):
        log_probs0 = gt.log1p(-self.probs)
        log_probs1 = gt.log(self.probs)
        return (self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm()
                - log_probs0)

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        outside = gt.le(x, self._lims[0] - 0.5) | gt.gt(x, self._lims[1] - 0.5)
        cut = gt.where(outside, x, (self._lims[0] - 0.5) * gt.ones_like(x))
        log_norm = gt.log(gt.abs(gt.special.expm1(cut))) - gt.log(gt.abs(cut))
        taylor = 0.5 * x + gt.pow(x, 2) / 24.0 - gt.pow(x, 4) / 2880.0
        return gt.where(outside, log_norm, taylor)
