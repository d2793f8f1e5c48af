"""ProbsLogitsMixin: the probs/logits parametrisation shared by the Bernoulli-like and
categorical distributions."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions.utils import (
    _require_one_of,
    broadcast_all,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)


class ProbsLogitsMixin:
    """A distribution given by exactly one of ``probs`` and ``logits``; the other is derived
    lazily on first use. ``_binary`` says whether logits are log-odds (True) or
    log-probabilities over the last dimension (False)."""

    _binary = True

    def _set_probs_or_logits(self, probs, logits) -> gt.Size:
        """Store the given parameter (broadcast to a tensor); return its shape."""
        _require_one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        return self._param.size()

    def _expand_probs_or_logits(self, cls, batch_shape, copied=(), _instance=None):
        new = self._expand_params(cls, batch_shape, ("probs", "logits"), copied=copied,
                                  _instance=_instance)
        new._param = new.__dict__["probs" if "probs" in self.__dict__ else "logits"]
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=self._binary)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=self._binary)

    @property
    def param_shape(self) -> gt.Size:
        return self._param.size()
