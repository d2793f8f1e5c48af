"""Binomial distribution: successes in ``total_count`` trials of probability ``probs``."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._counted_trials import CountedTrials

__all__ = ["Binomial"]


def _relu_with_half_slope_at_zero(x):
    """max(x, 0), whose gradient at x = 0 is 1/2 (log(1 + e^x)'s there)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(CountedTrials):
    """Binomial distribution; ``total_count`` may vary over the batch (a float tensor of whole
    numbers)."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        super().__init__(total_count, probs, logits, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_trials(Binomial, batch_shape, _instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with gt.no_grad():
            return gt.binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        # n * log(1 + e^logits), stable for logits of either sign
        log_normalizer = (n * _relu_with_half_slope_at_zero(logits)
                          + n * gt.log1p(gt.exp(-logits.abs())) - gt.lgamma(n + 1))
        return (value * logits - gt.lgamma(value + 1) - gt.lgamma(n - value + 1)
                - log_normalizer)

    def _homogeneous_count(self, what: str) -> int:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(gt.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        total_count = self._homogeneous_count("enumerate_support")
        values = gt.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values
