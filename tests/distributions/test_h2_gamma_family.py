"""Gamma, Chi2, Beta and Dirichlet against torch.distributions on cpu and emulated cuda:
log_prob, entropy, mean, mode, variance, cdf and KL on the same parameters, sample moments with
fixed seeds, and rsample gradients by gradcheck in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD

import gputensor as gt
import gputensor.distributions as GD
from gputensor.autograd import gradcheck

F64 = gt.float64


def _pair(device, *arrays):
    """The same float64 values as gputensor tensors (on device) and torch tensors."""
    return ([gt.tensor(np.asarray(a, dtype=np.float64), device=device) for a in arrays],
            [torch.tensor(np.asarray(a, dtype=np.float64)) for a in arrays])


def _close(got, ref, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(got.detach().cpu().numpy(), ref.detach().numpy(), rtol=rtol,
                               atol=atol)


def _make(name, g_args, t_args):
    return getattr(GD, name)(*g_args), getattr(TD, name)(*t_args)


CASES = {
    "Gamma": ([[0.4, 2.0, 7.5]], [[1.3, 0.5, 2.0]]),
    "Chi2": ([[0.7, 3.0, 12.0]],),
    "Beta": ([[0.4, 2.0, 7.5]], [[1.3, 0.5, 2.0]]),
    "Dirichlet": ([[0.4, 2.0, 7.5], [1.0, 1.0, 3.0]],),
}
VALUES = {"Gamma": [0.3, 1.7, 4.0], "Chi2": [0.3, 1.7, 4.0], "Beta": [0.1, 0.45, 0.93],
          "Dirichlet": [[0.2, 0.3, 0.5], [0.05, 0.15, 0.8]]}


@pytest.mark.parametrize("name", list(CASES))
def test_densities_and_moments_match_pytorch(device, name):
    g_args, t_args = _pair(device, *CASES[name])
    gd, td = _make(name, g_args, t_args)
    (gv,), (tv,) = _pair(device, VALUES[name])
    assert tuple(gd.batch_shape) == tuple(td.batch_shape)
    assert tuple(gd.event_shape) == tuple(td.event_shape)
    _close(gd.log_prob(gv), td.log_prob(tv))
    _close(gd.entropy(), td.entropy())
    _close(gd.mean, td.mean)
    _close(gd.variance, td.variance)
    _close(gd.mode, td.mode)
    if name in ("Gamma", "Chi2"):
        _close(gd.cdf(gv), td.cdf(tv), rtol=1e-8)
    assert gd.log_prob(gv).device == g_args[0].device


def test_dirichlet_mode_with_all_concentrations_below_one(device):
    (c,), (tc,) = _pair(device, [[0.3, 0.5, 0.2], [2.0, 3.0, 0.5]])
    _close(GD.Dirichlet(c).mode, TD.Dirichlet(tc).mode)


@pytest.mark.parametrize("pair", [("Gamma", "Gamma"), ("Beta", "Beta"),
                                  ("Dirichlet", "Dirichlet"), ("Chi2", "Chi2"),
                                  ("Gamma", "Exponential"), ("Exponential", "Gamma")])
def test_kl_divergence_matches_pytorch(device, pair):
    params = {"Gamma": ([0.4, 2.0, 7.5], [1.3, 0.5, 2.0]), "Chi2": ([0.7, 3.0, 12.0],),
              "Beta": ([0.4, 2.0, 7.5], [1.3, 0.5, 2.0]), "Exponential": ([0.8, 1.5, 3.0],),
              "Dirichlet": ([[0.4, 2.0, 7.5], [1.0, 1.0, 3.0]],)}
    other = {"Gamma": ([1.1, 0.9, 3.0], [0.7, 2.0, 1.0]), "Chi2": ([1.5, 2.0, 5.0],),
             "Beta": ([1.1, 0.9, 3.0], [0.7, 2.0, 1.0]), "Exponential": ([1.2, 0.4, 2.0],),
             "Dirichlet": ([[1.1, 0.9, 3.0], [0.7, 2.0, 1.0]],)}
    gp, tp = _make(pair[0], *_pair(device, *params[pair[0]]))
    gq, tq = _make(pair[1], *_pair(device, *other[pair[1]]))
    _close(GD.kl_divergence(gp, gq), TD.kl_divergence(tp, tq))


@pytest.mark.parametrize("name", list(CASES))
def test_sample_moments(device, name):
    g_args, _ = _pair(device, *CASES[name])
    gd = getattr(GD, name)(*g_args)
    gt.manual_seed(0)
    n = 20000
    s = gd.sample((n,))
    assert s.shape == (n, *gd.batch_shape, *gd.event_shape) and s.device == g_args[0].device
    x = s.cpu().numpy()
    mean, var = gd.mean.cpu().numpy(), gd.variance.cpu().numpy()
    se = np.sqrt(var / n)
    assert (np.abs(x.mean(0) - mean) < 5 * se).all()
    assert (np.abs(x.var(0) / var - 1) < 0.15).all()


@pytest.mark.parametrize("name", list(CASES))
def test_rsample_is_differentiable_in_every_parameter(device, name):
    g_args, _ = _pair(device, *CASES[name])
    leaves = [a.clone().requires_grad_() for a in g_args]
    gt.manual_seed(3)
    out = getattr(GD, name)(*leaves).rsample((4,))
    assert out.requires_grad
    grads = gt.autograd.grad(out.pow(2).sum(), leaves)  # (a simplex sums to a constant)
    assert all(bool(gt.isfinite(g).all()) and bool((g != 0).any()) for g in grads)


def test_gamma_rsample_rate_gradient_by_gradcheck(device):
    """With the draws fixed by a seed, the sample is x / rate: an exact gradcheck. (The
    concentration gradient is the implicit one, which a finite difference of the same draws
    does not give: Marsaglia-Tsang's map is not the inverse CDF; it is checked against the
    exact implicit gradient below.)"""
    (conc, rate), _ = _pair(device, [0.5, 2.0, 9.0], [1.0, 2.0, 0.5])

    def draw(r):
        gt.manual_seed(3)
        return GD.Gamma(conc, r).rsample((2,))

    assert gradcheck(draw, (rate.requires_grad_(),))


def test_gamma_rsample_gradient_is_the_implicit_gradient(device):
    (c, r), _ = _pair(device, [0.5, 2.0, 9.0], [1.0, 2.0, 0.5])
    c.requires_grad_()
    gt.manual_seed(1)
    x = GD.Gamma(c, r).rsample()
    (grad,) = gt.autograd.grad(x.sum(), c)
    expect = gt._standard_gamma_grad(c.detach(), (x * r).detach()) / r
    _close(grad, torch.tensor(expect.cpu().numpy()), rtol=1e-12)


def test_beta_and_dirichlet_rsample_gradients_average_to_the_mean_gradient(device):
    """E[d x / d alpha] = d E[x] / d alpha, checked over many pathwise gradients."""
    (c,), _ = _pair(device, [2.0, 3.0, 5.0])
    c.requires_grad_()
    gt.manual_seed(2)
    x = GD.Dirichlet(c).rsample((20000,))
    (grad,) = gt.autograd.grad(x[:, 0].mean(), c)
    total = 10.0
    exact = np.array([(total - 2.0) / total ** 2, -2.0 / total ** 2, -2.0 / total ** 2])
    np.testing.assert_allclose(grad.cpu().numpy(), exact, atol=3e-3)


def test_validation_errors_match_pytorch(device):
    (bad,), _ = _pair(device, [-1.0, 2.0])
    with pytest.raises(ValueError, match="concentration"):
        GD.Gamma(bad, gt.ones_like(bad))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        GD.Dirichlet(gt.tensor(1.0, device=device))
    g = GD.Gamma(gt.ones(2, device=device), gt.ones(2, device=device))
    with pytest.raises(ValueError, match="support"):
        g.log_prob(gt.tensor([-1.0, 1.0], device=device))
    assert math.isfinite(float(GD.Chi2(gt.tensor(3.0, device=device)).df))
