"""The parametrisation Binomial and NegativeBinomial share: a ``total_count`` and the success
probability as ``probs`` or ``logits`` (exactly one), broadcast together."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions._probs_logits import ProbsLogitsMixin
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import _require_one_of, broadcast_all


class CountedTrials(ProbsLogitsMixin, Distribution):
    """Base of the distributions over counts of Bernoulli trials."""

    def __init__(self, total_count, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        _require_one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self._param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self._param = self.logits
        self.total_count = self.total_count.type_as(self._param)
        super().__init__(self._param.size(), validate_args=validate_args)

    def _expand_trials(self, cls, batch_shape, _instance=None):
        """``expand`` for ``cls`` (a subclass with its own ``__init__`` must define its own)."""
        new = self._expand_probs_or_logits(cls, batch_shape, _instance=_instance)
        new.total_count = self.total_count.expand(gt.Size(batch_shape))
        return new
