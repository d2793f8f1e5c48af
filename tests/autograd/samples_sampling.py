"""Derivative samples for test_every_derivative.py (same contract as its SAMPLES): the
gamma-family samplers (gputensor/_ops/sampling.py).

A sampler's gradient is not the derivative of its own algorithm at fixed random draws:
``_standard_gamma``'s is the implicit reparameterisation gradient, dx/dalpha along the curve
that keeps the sample's quantile ``u = P(alpha, x)`` fixed. The sample therefore returns that
curve, ``x*(alpha) = P^-1(alpha, u)`` (SciPy's gammaincinv), in the forward while the gradient
flows through ``_standard_gamma``: at the drawn alpha both agree, so gradcheck compares the
op's gradient with finite differences of the exact quantile curve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scipy import special as sps

import gputensor as gt

SAMPLES: dict[str, Callable[[str], Any]] = {}

_SEED = 5


def _gamma_draw(alpha: gt.Tensor) -> gt.Tensor:
    gen = gt.Generator(device=alpha.device).manual_seed(_SEED)
    return gt._standard_gamma(alpha, generator=gen)


def _standard_gamma(device: str) -> tuple:
    alpha = gt.tensor([0.4, 1.0, 2.5, 7.0], dtype=gt.float64, device=device, requires_grad=True)
    quantile = sps.gammainc(alpha.detach().cpu().numpy(),
                            _gamma_draw(alpha.detach()).cpu().numpy())

    def on_quantile_curve(a: gt.Tensor) -> gt.Tensor:
        x = _gamma_draw(a)
        exact = gt.tensor(sps.gammaincinv(a.detach().cpu().numpy(), quantile),
                          dtype=gt.float64, device=a.device)
        return x + (exact - x).detach()

    return on_quantile_curve, (alpha,), "grad"


SAMPLES["_standard_gamma"] = _standard_gamma
