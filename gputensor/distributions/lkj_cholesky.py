"""LKJ distribution over Cholesky factors of correlation matrices, sampled by the onion
method (Ghosh and Henderson, 2003; Lewandowski, Kurowicka and Joe, 2009)."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.beta import Beta
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """LKJCholesky(dim, concentration): L with L L^T ~ LKJ(concentration), density
    proportional to det(L L^T)^(concentration - 1)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        # The onion method: row i's squared off-diagonal norm is Beta(i / 2, marginal -
        # (i - 1) / 2). (PyTorch draws Beta(i - 1/2, .), which skews the correlations of rows
        # 2 and on away from the LKJ marginals for dim >= 3.) Row 0 has no off-diagonal part:
        # its draw, Beta(1/2, marginal), is masked out by the sampler.
        marginal = self.concentration + 0.5 * (dim - 2)
        rows = gt.arange(dim, dtype=self.concentration.dtype, device=self.concentration.device)
        self._beta = Beta((0.5 * rows).clamp(min=0.5),
                          marginal.unsqueeze(-1) - 0.5 * (rows - 1).clamp(min=0))
        super().__init__(self.concentration.size(), gt.Size((dim, dim)),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(LKJCholesky, batch_shape, ("concentration",),
                                  copied=("dim",), _instance=_instance)
        new._beta = self._beta.expand(gt.Size(batch_shape) + (self.dim,))
        return new

    def sample(self, sample_shape=()):
        with gt.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            normal = gt.randn(self._extended_shape(sample_shape), dtype=y.dtype,
                              device=y.device).tril(-1)
            direction = normal / normal.norm(dim=-1, keepdim=True)
            first_row = gt.arange(self.dim, device=y.device) == 0
            direction = gt.where(first_row.unsqueeze(-1), 0.0, direction)  # 0/0 there
            w = gt.sqrt(y) * direction
            tiny = gt.finfo(w.dtype).tiny
            diag = gt.clamp(1 - gt.sum(w.pow(2), dim=-1), min=tiny).sqrt()
            return w + gt.diag_embed(diag)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # log det(L L^T)^(eta - 1) and the Jacobian of L -> L L^T, over the diagonal of L
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = gt.arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = gt.sum(order * diag.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        log_norm = (0.5 * dm1 * math.log(math.pi) + gt.mvlgamma(alpha - 0.5, dm1)
                    - gt.lgamma(alpha) * dm1)
        return unnormalized - log_norm
