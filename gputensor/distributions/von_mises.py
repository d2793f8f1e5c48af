"""Von Mises distribution: a circular normal on angles (radians, modulo 2 pi)."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _log_bessel_i0(x):
    """log I0(x) for x > 0, from the exponentially scaled i0e (no overflow for large x)."""
    return gt.special.i0e(x).log() + x


def _log_bessel_i1(x):
    return gt.special.i1e(x).log() + x


def _rejection_sample(loc, concentration, proposal_r, shape):
    """Best and Fisher's (1979) wrapped-Cauchy rejection sampler, run for every element at
    once: each round draws three uniforms per element and keeps the proposals accepted where
    none was yet, so the host loops once per round (rarely more than a few), never per
    sample."""
    x = gt.zeros(shape, dtype=loc.dtype, device=loc.device)
    done = gt.zeros(shape, dtype=gt.bool, device=loc.device)
    while not bool(done.all()):
        u1, u2, u3 = gt.rand((3,) + tuple(shape), dtype=loc.dtype, device=loc.device).unbind()
        z = gt.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        accept = accept & ~done
        x = gt.where(accept, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    """VonMises(loc, concentration); ``loc`` and values may be any real angle. ``mean`` and
    ``variance`` are the circular ones."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, gt.Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(VonMises, batch_shape, ("loc", "concentration"),
                                   _instance=_instance)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * gt.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_bessel_i0(self.concentration))

    @lazy_property
    def _proposal_r(self):
        """The wrapped-Cauchy envelope's parameter, in float64 (float32 rounding makes the
        acceptance test hang for concentrations near 1e-4)."""
        kappa = self.concentration.to(gt.float64)
        tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        # second-order Taylor expansion around 0, where the closed form cancels
        return gt.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho.pow(2)) / (2 * rho))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with gt.no_grad():
            return _rejection_sample(self.loc.to(gt.float64), self.concentration.to(gt.float64),
                                     self._proposal_r, shape).to(self.loc.dtype)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        kappa = self.concentration
        return 1 - (_log_bessel_i1(kappa) - _log_bessel_i0(kappa)).exp()
