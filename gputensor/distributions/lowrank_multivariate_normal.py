"""Multivariate normal with a low-rank plus diagonal covariance W W^T + diag(D)."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.multivariate_normal import _batch_mahalanobis, _batch_mv
from gputensor.distributions.utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _add_identity(matrix):
    return matrix + gt.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)


def _batch_capacitance_tril(W, D):
    """Cholesky factor of the m x m capacitance matrix I + W^T D^-1 W."""
    wt_dinv = W.mT / D.unsqueeze(-2)
    return gt.linalg.cholesky(_add_identity(gt.matmul(wt_dinv, W)))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """log det(W W^T + D) by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """x^T (W W^T + D)^-1 x by the Woodbury identity."""
    wt_dinv_x = _batch_mv(W.mT / D.unsqueeze(-2), x)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, wt_dinv_x)


class LowRankMultivariateNormal(Distribution):
    """Multivariate normal with covariance ``cov_factor @ cov_factor.T + diag(cov_diag)``;
    log_prob and entropy cost O(n m^2) instead of O(n^3)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(
                f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = gt.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                             f"{cov_factor.shape}, cov_diag {cov_diag.shape}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(
            LowRankMultivariateNormal, batch_shape, ("loc", "cov_diag", "cov_factor"),
            copied=("_unbroadcasted_cov_factor", "_unbroadcasted_cov_diag",
                    "_capacitance_tril"), _instance=_instance)

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag
                ).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        # W W^T + D = D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2: factor the middle term.
        diag_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / diag_sqrt
        inner = _add_identity(gt.matmul(dinvsqrt_w, dinvsqrt_w.mT))
        return (diag_sqrt * gt.linalg.cholesky(inner)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        cov = gt.matmul(w, w.mT) + gt.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        # Woodbury: D^-1 - D^-1 W C^-1 W^T D^-1 with C = L L^T the capacitance.
        wt_dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        a = gt.linalg.solve_triangular(self._capacitance_tril, wt_dinv, upper=False)
        precision = gt.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - a.mT @ a
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        w_shape = shape[:-1] + self.cov_factor.shape[-1:]
        eps_w = _standard_normal(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                     self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, value - self.loc,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + m)

    def entropy(self):
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
