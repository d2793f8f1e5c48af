"""Relaxed (Concrete / Gumbel-softmax) categorical distributions (Maddison et al., 2017)."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.categorical import _CategoricalEvents
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.relaxed_bernoulli import _RelaxedParameters
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.transforms import ExpTransform
from gputensor.distributions.utils import broadcast_all, clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(_CategoricalEvents, Distribution):
    """The log of a RelaxedOneHotCategorical sample: log-softmax((logits + Gumbel) / T)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector  # really a submanifold of it (logsumexp = 0)
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        batch_shape, event_shape = self._init_categorical(probs, logits)
        self.temperature = temperature
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_categorical(ExpRelaxedCategorical, batch_shape,
                                        copied=("temperature",), _instance=_instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(gt.rand(shape, dtype=self.logits.dtype,
                                       device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = (gt.full_like(self.temperature, float(k)).lgamma()
                     - self.temperature.log().mul(-(k - 1)))
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_RelaxedParameters, TransformedDistribution):
    """A continuous relaxation of OneHotCategorical on the simplex, reparameterisable."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)
