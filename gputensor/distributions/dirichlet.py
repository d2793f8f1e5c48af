"""Dirichlet distribution over the probability simplex."""
from __future__ import annotations

import gputensor as gt
from gputensor.autograd import Function
from gputensor.distributions import constraints
from gputensor.distributions.exp_family import ExponentialFamily

__all__ = ["Dirichlet"]


class _Dirichlet(Function):
    """Dirichlet samples with the implicit reparameterisation gradient (gt._dirichlet_grad)."""

    @staticmethod
    def forward(ctx, concentration):
        x = gt._sample_dirichlet(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        x, concentration = ctx.saved_tensors
        total = concentration.sum(-1, True).expand_as(concentration)
        grad = gt._dirichlet_grad(x, concentration, total)
        return grad * (grad_output - (x * grad_output).sum(-1, True))


class Dirichlet(ExponentialFamily):
    """Dirichlet distribution with concentrations along the last dim."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Dirichlet, batch_shape, ("concentration",),
                                   _instance=_instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _Dirichlet.apply(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (gt.xlogy(c - 1.0, value).sum(-1) + gt.lgamma(c.sum(-1))
                - gt.lgamma(c).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        # all concentrations below 1: the density peaks at the corner of the largest one
        corner = gt.nn.functional.one_hot(mode.argmax(dim=-1), cm1.shape[-1]).to(mode)
        below = (self.concentration < 1).all(dim=-1, keepdim=True)
        return gt.where(below, corner, mode)

    @property
    def variance(self):
        c0 = self.concentration.sum(-1, True)
        return self.concentration * (c0 - self.concentration) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return (gt.lgamma(c).sum(-1) - gt.lgamma(a0) - (k - a0) * gt.digamma(a0)
                - ((c - 1.0) * gt.digamma(c)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return gt.lgamma(x).sum(-1) - gt.lgamma(x.sum(-1))
