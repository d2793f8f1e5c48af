"""Fisher-Snedecor (F) distribution: the ratio of two scaled chi-squared variables."""
from __future__ import annotations

from numbers import Number

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.gamma import Gamma
from gputensor.distributions.utils import broadcast_all

__all__ = ["FisherSnedecor"]

_NAN = float("nan")


class FisherSnedecor(Distribution):
    """F(df1, df2); mean, mode and variance are NaN where they do not exist (df2 <= 2,
    df1 <= 2, df2 <= 4)."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        if isinstance(df1, Number) and isinstance(df2, Number):
            batch_shape = gt.Size()
        else:
            batch_shape = self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(FisherSnedecor, batch_shape, ("df1", "df2"),
                                  _instance=_instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = gt.where(self.df2 <= 2, _NAN, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return gt.where(self.df1 <= 2, _NAN, mode)

    @property
    def variance(self):
        df1, df2 = self.df1, gt.where(self.df2 <= 4, _NAN, self.df2)
        return 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        tiny = gt.finfo(self.df1.dtype).tiny
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        log_norm = gt.lgamma(half1 + half2) - gt.lgamma(half1) - gt.lgamma(half2)
        return (log_norm + half1 * ratio.log() + (half1 - 1) * gt.log(value)
                - (half1 + half2) * gt.log1p(ratio * value))
