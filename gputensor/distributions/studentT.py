"""Student's t distribution (``df`` degrees of freedom, location ``loc``, scale ``scale``):
a normal over the square root of an independent Chi2(df) / df."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.chi2 import Chi2
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]

_NAN, _INF = float("nan"), float("inf")


class StudentT(Distribution):
    """Student's t distribution; the mean is NaN for df <= 1 and the variance infinite for
    1 < df <= 2 (NaN for df <= 1), as in PyTorch."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(StudentT, batch_shape, ("df", "loc", "scale"),
                                  _instance=_instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return gt.where(self.df <= 1, _NAN, self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return gt.where(df > 2, finite, gt.where(df > 1, _INF, _NAN))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * gt.rsqrt(z / self.df))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        log_norm = (self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi)
                    + gt.lgamma(0.5 * df) - gt.lgamma(0.5 * (df + 1.0)))
        return -0.5 * (df + 1.0) * gt.log1p(y.pow(2) / df) - log_norm

    def entropy(self):
        df = self.df
        log_beta = gt.lgamma(0.5 * df) + math.lgamma(0.5) - gt.lgamma(0.5 * (df + 1))
        return (self.scale.log()
                + 0.5 * (df + 1) * (gt.digamma(0.5 * (df + 1)) - gt.digamma(0.5 * df))
                + 0.5 * df.log() + log_beta)
