"""OneHotCategorical: a categorical distribution whose samples are one-hot vectors."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.categorical import _CategoricalEvents
from gputensor.distributions.distribution import Distribution
from gputensor.nn.functional import one_hot

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


class OneHotCategorical(_CategoricalEvents, Distribution):
    """Categorical distribution with one-hot samples of size ``probs.size(-1)``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        batch_shape, event_shape = self._init_categorical(probs, logits)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_categorical(OneHotCategorical, batch_shape, _instance=_instance)

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return one_hot(probs.argmax(dim=-1), num_classes=probs.shape[-1]).to(probs)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(gt.Size(sample_shape))
        return one_hot(indices, self._categorical._num_events).to(self._categorical.probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        n = self.event_shape[0]
        values = gt.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose ``rsample`` passes gradients straight through to ``probs``
    (Bengio et al., 2013): the value is the one-hot sample, the gradient that of probs."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
