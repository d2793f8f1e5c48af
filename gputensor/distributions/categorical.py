"""Categorical distribution over {0, ..., K-1}."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions._probs_logits import ProbsLogitsMixin
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import _require_one_of

__all__ = ["Categorical"]


class Categorical(ProbsLogitsMixin, Distribution):
    """Categorical distribution over the last dim of ``probs`` (normalised to sum to one) or
    ``logits`` (unnormalised log-probabilities); the other dims are batch dims."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True
    _binary = False

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        _require_one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.size()[-1]
        super().__init__(self._param.size()[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_probs_or_logits(Categorical, batch_shape,
                                            copied=("_num_events",), _instance=_instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    def _nan_like_batch(self):
        return gt.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype,
                       device=self.probs.device)

    @property
    def mean(self):
        return self._nan_like_batch()

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return self._nan_like_batch()

    def sample(self, sample_shape=()):
        sample_shape = gt.Size(sample_shape)
        probs_2d = self.probs.reshape(-1, self._num_events)
        with gt.no_grad():
            samples_2d = gt.multinomial(probs_2d, sample_shape.numel(), True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = gt.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        # -inf logits (zero probabilities) would give 0 * -inf = nan; clamp them to finite.
        logits = gt.clamp(self.logits, min=gt.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = gt.arange(self._num_events, dtype=gt.long, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class _CategoricalEvents:
    """Mixin for distributions over vectors of the categories of a wrapped ``Categorical``
    (``self._categorical``): event shape (K,), parameters read from the categorical."""

    def _init_categorical(self, probs, logits):
        """Wrap ``Categorical(probs, logits)``; return (batch_shape, event_shape)."""
        self._categorical = Categorical(probs, logits)
        return self._categorical.batch_shape, self._categorical.param_shape[-1:]

    def _expand_categorical(self, cls, batch_shape, copied=(), _instance=None):
        new = self._get_checked_instance(cls, _instance)
        batch_shape = gt.Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        for name in copied:
            new.__dict__[name] = self.__dict__[name]
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._categorical._new(*args, **kwargs)

    @property
    def _param(self):
        return self._categorical._param

    @property
    def param_shape(self) -> gt.Size:
        return self._categorical.param_shape

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits
