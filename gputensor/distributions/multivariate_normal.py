"""Multivariate normal distribution, parametrised by a covariance, precision or scale_tril."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _as_columns(bmat, bvec):
    """When ``bvec``'s batch ends with ``bmat``'s (samples of a batched distribution), its
    extra leading dims as right-hand-side columns: shape (*B, n, S). Else None.

    One product or solve per matrix then replaces one per vector (and copies of the matrix).
    """
    m_batch, v_batch = bmat.shape[:-2], bvec.shape[:-1]
    n_outer = len(v_batch) - len(m_batch)
    if n_outer < 0 or v_batch[n_outer:] != m_batch:
        return None
    return bvec.reshape((-1,) + tuple(m_batch) + (bvec.size(-1),)).movedim(0, -1)


def _from_columns(columns, batch_shape):
    """Inverse of ``_as_columns`` for a result of shape (*B, k, S)."""
    return columns.movedim(-1, 0).reshape(tuple(batch_shape) + (columns.size(-2),))


def _batch_mv(bmat, bvec):
    """Batched matrix-vector product, broadcasting the batch dims."""
    columns = _as_columns(bmat, bvec)
    if columns is not None:
        return _from_columns(gt.matmul(bmat, columns), bvec.shape[:-1])
    return gt.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """|L^-1 x|^2 = x^T (L L^T)^-1 x for lower-triangular L, broadcasting batch dims."""
    n = bx.size(-1)
    l_batch, x_batch = bL.shape[:-2], bx.shape[:-1]
    columns = _as_columns(bL, bx)
    if columns is not None:
        solved = gt.linalg.solve_triangular(bL, columns, upper=False)
        return solved.pow(2).sum(-2).movedim(-1, 0).reshape(x_batch)
    batch = gt.broadcast_shapes(l_batch, x_batch)
    solved = gt.linalg.solve_triangular(bL.expand(batch + (n, n)),
                                        bx.expand(batch + (n,)).unsqueeze(-1), upper=False)
    return solved.squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    """A lower-triangular L with L L^T = precision^-1, without inverting precision.

    Reversing rows and columns turns the Cholesky factor of the reversed precision into an
    upper-triangular U with U U^T = precision; then L = (U^T)^-1.
    """
    flipped_factor = gt.linalg.cholesky(gt.flip(precision, (-2, -1)))
    l_inv = gt.transpose(gt.flip(flipped_factor, (-2, -1)), -2, -1)
    eye = gt.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return gt.linalg.solve_triangular(l_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    """Multivariate normal with mean ``loc`` and exactly one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (lower Cholesky factor of the covariance)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix,
                 "precision_matrix": precision_matrix}
        given = {name: value for name, value in given.items() if value is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        ((name, matrix),) = given.items()
        if matrix.dim() < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{what} must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        batch_shape = gt.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = gt.linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(
            MultivariateNormal, batch_shape,
            ("loc", "covariance_matrix", "scale_tril", "precision_matrix"),
            copied=("_unbroadcasted_scale_tril",), _instance=_instance)

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        tril = self._unbroadcasted_scale_tril
        return gt.matmul(tril, tril.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return gt.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (self._unbroadcasted_scale_tril.pow(2).sum(-1)
                .expand(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return (-0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m)
                - self._half_log_det())

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
