"""Geometric distribution: the number of failures before the first success."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._probs_logits import ProbsLogitsMixin
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import broadcast_all
from gputensor.nn.functional import binary_cross_entropy_with_logits

__all__ = ["Geometric"]


class Geometric(ProbsLogitsMixin, Distribution):
    """Geometric distribution on {0, 1, 2, ...} with success probability ``probs`` (or
    ``logits``), which must be positive."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        batch_shape = self._set_probs_or_logits(probs, logits)
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            valid = self.probs > 0
            if not bool(valid.all()):
                raise ValueError(
                    f"Expected parameter probs ({type(self.probs).__name__} of shape "
                    f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but "
                    f"found invalid values:\n{self.probs.detach()[~valid]}")

    def expand(self, batch_shape, _instance=None):
        return self._expand_probs_or_logits(Geometric, batch_shape, _instance=_instance)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return gt.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        tiny = gt.finfo(self.probs.dtype).tiny
        with gt.no_grad():
            # Inversion: floor(log U / log(1 - p)).
            u = self.probs.new_empty(shape).uniform_(tiny, 1)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 puts all mass at 0: make 0 * log(1 - 1) read 0, not nan.
        probs = gt.where((probs == 1) & (value == 0), gt.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return (binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
                / self.probs)
