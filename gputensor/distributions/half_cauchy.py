"""Half-Cauchy distribution: |X| for X ~ Cauchy(0, scale)."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions.cauchy import Cauchy
from gputensor.distributions.half_normal import _Folded
from gputensor.distributions.transforms import AbsTransform

__all__ = ["HalfCauchy"]


class HalfCauchy(_Folded):
    """Half-Cauchy distribution with scale ``scale``."""

    def __init__(self, scale, validate_args: bool | None = None) -> None:
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return gt.full(self._extended_shape(), math.inf, dtype=self.scale.dtype,
                       device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
