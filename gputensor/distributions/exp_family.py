"""ExponentialFamily: distributions of the form p(x; θ) = exp(<t(x), θ> - F(θ) + k(x))."""
from __future__ import annotations

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class for exponential-family distributions.

    A subclass gives its natural parameters θ (``_natural_params``), the log normalizer F
    (``_log_normalizer``) and the expected carrier measure E[k(x)] (``_mean_carrier_measure``);
    the entropy then follows from the Bregman divergence of F, H = F(θ) - <θ, ∇F(θ)> - E[k(x)]
    (Nielsen & Nock, "Entropies and cross-entropies of exponential families").
    """

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _natural_params")

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement _log_normalizer")

    @property
    def _mean_carrier_measure(self) -> float:
        raise NotImplementedError(
            f"{type(self).__name__} does not implement _mean_carrier_measure")

    def entropy(self) -> Tensor:
        """Entropy from the gradient of the log normalizer (differentiable in the params)."""
        params = [p.detach().requires_grad_() for p in self._natural_params]
        log_norm = self._log_normalizer(*params)
        grads = gt.autograd.grad(log_norm.sum(), params, create_graph=True)
        result = log_norm - self._mean_carrier_measure
        for param, grad in zip(params, grads, strict=True):
            result = result - (param * grad).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
