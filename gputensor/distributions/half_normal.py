"""Half-normal distribution: |X| for X ~ Normal(0, scale)."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.normal import Normal
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.transforms import AbsTransform

__all__ = ["HalfNormal"]


class _Folded(TransformedDistribution):
    """|X| for X symmetric around 0 with scale ``scale``: the density doubles on [0, inf)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return gt.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = gt.as_tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return gt.where(value >= 0, log_prob, gt.full_like(log_prob, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    """Half-normal distribution with scale ``scale``."""

    def __init__(self, scale, validate_args: bool | None = None) -> None:
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)
