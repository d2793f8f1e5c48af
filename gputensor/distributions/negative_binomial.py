"""Negative binomial distribution: successes before ``total_count`` failures, each trial a
success with probability ``probs``; sampled as a Gamma-Poisson mixture."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._counted_trials import CountedTrials
from gputensor.distributions.gamma import Gamma
from gputensor.distributions.utils import lazy_property
from gputensor.nn.functional import logsigmoid

__all__ = ["NegativeBinomial"]


class NegativeBinomial(CountedTrials):
    """Negative binomial distribution; ``total_count`` may be any non-negative real."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        super().__init__(total_count, probs, logits, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_trials(NegativeBinomial, batch_shape, _instance)

    @property
    def mean(self):
        return self.total_count * gt.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / gt.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self) -> Gamma:
        return Gamma(concentration=self.total_count, rate=gt.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=()):
        with gt.no_grad():
            return gt.poisson(self._gamma.sample(sample_shape=sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_unnormalized = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = -gt.lgamma(n + value) + gt.lgamma(1.0 + value) + gt.lgamma(n)
        # P(0) = 1 when total_count = 0: the lgamma terms are inf - inf there
        log_normalization = log_normalization.masked_fill(n + value == 0.0, 0.0)
        return log_unnormalized - log_normalization
