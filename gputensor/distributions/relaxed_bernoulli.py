"""Relaxed (Concrete / Gumbel-softmax) Bernoulli distributions (Maddison et al., 2017)."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._probs_logits import ProbsLogitsMixin
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.transforms import SigmoidTransform
from gputensor.distributions.utils import broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(ProbsLogitsMixin, Distribution):
    """The logit of a RelaxedBernoulli sample: (logit(U) + logits) / temperature."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        self.temperature = temperature
        batch_shape = self._set_probs_or_logits(probs, logits)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_probs_or_logits(LogitRelaxedBernoulli, batch_shape,
                                            copied=("temperature",), _instance=_instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(gt.rand(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()
                ) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class _RelaxedParameters:
    """The parameters of a relaxed distribution, read from its base distribution."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_RelaxedParameters, TransformedDistribution):
    """A continuous relaxation of Bernoulli on (0, 1), reparameterisable; ``temperature``
    sets how close samples are to {0, 1}."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)
