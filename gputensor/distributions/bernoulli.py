"""Bernoulli distribution."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._probs_logits import ProbsLogitsMixin
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.utils import broadcast_all
from gputensor.nn.functional import binary_cross_entropy_with_logits

__all__ = ["Bernoulli"]


class Bernoulli(ProbsLogitsMixin, ExponentialFamily):
    """Bernoulli distribution over {0, 1}, parametrised by ``probs`` or ``logits`` (one of)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        batch_shape = self._set_probs_or_logits(probs, logits)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_probs_or_logits(Bernoulli, batch_shape, _instance=_instance)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs)
        return gt.where(self.probs == 0.5, gt.full_like(mode, float("nan")), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with gt.no_grad():
            return gt.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = gt.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        return (gt.logit(self.probs),)

    def _log_normalizer(self, x):
        return gt.log1p(gt.exp(x))
