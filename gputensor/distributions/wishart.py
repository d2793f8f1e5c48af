"""Wishart distribution over positive definite matrices, sampled by the Bartlett
decomposition."""
from __future__ import annotations

import math
import warnings
from numbers import Number

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.chi2 import Chi2
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.multivariate_normal import _precision_to_scale_tril
from gputensor.distributions.utils import lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2)
_MATRIX_PARAMS = ("covariance_matrix", "precision_matrix", "scale_tril")


def _mvdigamma(x, p: int):
    """The multivariate digamma function: sum_i digamma(x - i / 2), i < p."""
    if not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    halves = gt.arange(p, dtype=x.dtype, device=x.device).div(2)
    return gt.digamma(x.unsqueeze(-1) - halves.expand(x.shape + (-1,))).sum(-1)


class Wishart(ExponentialFamily):
    """Wishart(df, covariance_matrix | precision_matrix | scale_tril): the distribution of
    sum_i x_i x_i^T over df normal vectors x_i of that covariance (df may be fractional)."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        given = [p is not None for p in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or "
                                 "scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril)
                     if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = gt.Size(param.shape[:-2])
            self.df = gt.tensor(df, dtype=param.dtype, device=param.device)
        else:
            batch_shape = gt.broadcast_shapes(param.shape[:-2], df.shape)
            self.df = df.expand(batch_shape)
        event_shape = param.shape[-2:]
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = "
                             f"{event_shape[-1] - 1}.")
        name = _MATRIX_PARAMS[given.index(True)]
        setattr(self, name, param.expand(batch_shape + (-1, -1)))
        if bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to "
                          "occur for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = gt.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._bartlett_chi2()

    def _bartlett_chi2(self) -> Chi2:
        """The squared diagonal of the Bartlett factor: Chi2(df - i) in row i."""
        tril = self._unbroadcasted_scale_tril
        rows = gt.arange(self._event_shape[-1], dtype=tril.dtype, device=tril.device)
        return Chi2(df=self.df.unsqueeze(-1) - rows.expand(self._batch_shape + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = gt.Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(matrix_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in _MATRIX_PARAMS:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._bartlett_chi2()
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        tril = self._unbroadcasted_scale_tril
        return (tril @ tril.transpose(-2, -1)).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        tril = self._unbroadcasted_scale_tril
        eye = gt.eye(self._event_shape[-1], device=tril.device, dtype=tril.dtype)
        return gt.cholesky_solve(eye, tril).expand(self._batch_shape + self._event_shape)

    def _df_as_matrix(self, value):
        return value.view(self._batch_shape + (1, 1))

    @property
    def mean(self):
        return self._df_as_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = gt.where(factor <= 0, float("nan"), factor)  # no mode for df <= p + 1
        return self._df_as_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        cov = self.covariance_matrix
        diag = cov.diagonal(dim1=-2, dim2=-1)
        return self._df_as_matrix(self.df) * (cov.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        sample_shape = gt.Size(sample_shape)
        eps = gt.finfo(self._unbroadcasted_scale_tril.dtype).eps
        diag = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=eps)
        below = gt.randn(sample_shape + self._batch_shape + (p * (p - 1) // 2,),
                         dtype=diag.dtype, device=diag.device)
        i, j = gt.tril_indices(p, p, offset=-1, device=diag.device)
        noise = gt.zeros(sample_shape + self._batch_shape + (p, p), dtype=diag.dtype,
                         device=diag.device)
        noise = noise.index_put((..., i, j), below) + gt.diag_embed(diag)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.transpose(-2, -1)

    def _singular(self, sample):
        """Per sample (over the batch too): whether a matrix is not positive definite."""
        singular = ~self.support.check(sample)
        return singular.amax(self._batch_dims) if self._batch_shape else singular

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Bartlett samples; the rare singular ones (low df, rounding) are drawn again up to
        ``max_try_correction`` (default 10) times, with a warning, and may stay singular
        (log_prob -inf then)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample = self._bartlett_sampling(sample_shape)
        singular = self._singular(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                redraw = self._bartlett_sampling((int(singular.sum()),))
                sample = sample.index_put((singular,), redraw)
                still = self._singular(redraw)
                singular = singular.index_put((singular.clone(),), still)
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        log_det_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace_term = gt.cholesky_solve(value, self._unbroadcasted_scale_tril)
        return (-nu * (p * _LOG_2 / 2 + log_det_scale) - gt.mvlgamma(nu / 2, p=p)
                + (nu - p - 1) / 2 * gt.linalg.slogdet(value).logabsdet
                - trace_term.diagonal(dim1=-2, dim2=-1).sum(dim=-1) / 2)

    def entropy(self):
        nu, p = self.df, self._event_shape[-1]
        log_det_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + log_det_scale) + gt.mvlgamma(nu / 2, p=p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p) + nu * p / 2)

    @property
    def _natural_params(self):
        return -self.precision_matrix / 2, (self.df - self._event_shape[-1] - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-gt.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + gt.mvlgamma(y + (p + 1) / 2, p=p))
