"""Multinomial distribution: category counts of ``total_count`` categorical draws."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.binomial import Binomial
from gputensor.distributions.categorical import Categorical
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Counts over the categories of ``probs``/``logits`` (last dim); ``total_count`` is one
    int for the whole batch (only ``log_prob`` works without it, e.g. ``total_count=1`` for
    any counts)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = gt.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = self._binomial.expand(batch_shape + self.event_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._categorical._new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self) -> gt.Size:
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        sample_shape = gt.Size(sample_shape)
        # total_count category draws per sample, moved last and counted per category
        draws = self._categorical.sample(gt.Size((self.total_count,)) + sample_shape)
        draws = draws.permute(*range(1, draws.dim()), 0)
        counts = gt.zeros(self._extended_shape(sample_shape), dtype=draws.dtype,
                          device=draws.device)
        counts.scatter_add_(-1, draws, gt.ones_like(draws))
        return counts.type_as(self.probs)

    def entropy(self):
        n = self.total_count
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        # E[sum_i log(x_i!)] from each category's Binomial(n, p_i) marginal
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = gt.exp(self._binomial.log_prob(support))
        term2 = (binomial_probs * gt.lgamma(support + 1)).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # a category of probability 0 drawn 0 times contributes 0 (not 0 * -inf)
        logits = gt.where((value == 0) & (logits == float("-inf")), 0.0, logits)
        log_factorial_n = gt.lgamma(value.sum(-1) + 1)
        log_factorial_xs = gt.lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
