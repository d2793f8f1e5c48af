"""StudentT, FisherSnedecor, InverseGamma, Kumaraswamy, VonMises, Poisson, Binomial,
NegativeBinomial and Multinomial against torch.distributions on cpu and emulated cuda:
statistics, log_prob/cdf, shapes and expand, validation errors, sample moments, and gradients
(gradcheck in float64; the implicit gamma gradients by their average over many draws)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor import distributions as D
from tests.distributions._common import (
    assert_moments,
    assert_same_scores,
    assert_same_shapes,
    assert_same_statistics,
    params_pair,
    to_gt,
)
from tests.distributions.test_univariate import make, torch_values
from tests.helpers import assert_close

T = torch.distributions
PROBS3 = [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]

# name, parameters, parameters that fail validation (None: nothing invalid to try)
CASES = [
    ("StudentT", {"df": [0.8, 1.5, 4.0], "loc": [0.1, -1.0, 2.0], "scale": [1.0, 2.0, 0.5]},
     {"df": [-1.0], "loc": [0.0], "scale": [1.0]}),
    ("FisherSnedecor", {"df1": [1.5, 3.0, 7.0], "df2": [1.5, 3.0, 9.0]},
     {"df1": [0.0], "df2": [1.0]}),
    ("InverseGamma", {"concentration": [0.5, 1.5, 3.0], "rate": [1.0, 2.0, 0.5]},
     {"concentration": [-1.0], "rate": [1.0]}),
    ("Kumaraswamy", {"concentration1": [0.5, 1.5, 3.0], "concentration0": [0.7, 2.0, 0.5]},
     {"concentration1": [1.0], "concentration0": [0.0]}),
    ("VonMises", {"loc": [0.3, -2.0, 3.0], "concentration": [0.5, 2.0, 30.0]},
     {"loc": [0.0], "concentration": [-1.0]}),
    ("Poisson", {"rate": [0.5, 3.0, 20.0]}, {"rate": [-1.0]}),
    ("Binomial", {"total_count": [5.0, 10.0, 30.0], "probs": [0.3, 0.6, 0.9]},
     {"total_count": [5.0], "probs": [1.5]}),
    ("Binomial", {"total_count": 10, "logits": [-1.0, 0.5, 2.0]},
     {"total_count": -1, "logits": [0.0]}),
    ("NegativeBinomial", {"total_count": [2.0, 5.5, 10.0], "probs": [0.3, 0.6, 0.1]},
     {"total_count": [2.0], "probs": [1.0]}),
    ("NegativeBinomial", {"total_count": [2.0, 5.5, 10.0], "logits": [-1.0, 0.5, 2.0]},
     {"total_count": [-2.0], "logits": [0.0]}),
    ("Multinomial", {"total_count": 6, "probs": PROBS3},
     {"total_count": 6, "probs": [[0.5, -0.5, 1.0]]}),
    ("Multinomial", {"total_count": 6, "logits": [[0.1, -1.0, 2.0], [0.0, 0.0, 0.0]]}, None),
]
IDS = [f"{name}-{'-'.join(params)}" for name, params, _ in CASES]


@pytest.mark.parametrize(("name", "params", "invalid"), CASES, ids=IDS)
def test_statistics_scores_and_expand_match_torch(name, params, invalid, device):
    g_dist, t_dist, _ = make(name, params, device, np.float64)
    # PyTorch's VonMises log I0 is a polynomial fit (~1e-8), ours is i0e's; its Multinomial
    # entropy takes lgamma(total_count + 1) in float32
    tol = 1e-6 if name in ("VonMises", "Multinomial") else 1e-9
    assert_same_statistics(g_dist, t_dist, atol=tol, rtol=tol)
    assert_same_scores(g_dist, t_dist, torch_values(t_dist), device, atol=tol, rtol=tol)
    assert_same_shapes(g_dist, t_dist)
    assert g_dist.sample().device == gt.device(device)
    assert repr(g_dist.support) == repr(t_dist.support) or name == "Binomial"
    batch = (4,) + tuple(t_dist.batch_shape)
    g_big, t_big = g_dist.expand(batch), t_dist.expand(batch)
    if name == "Multinomial":  # PyTorch's expanded Multinomial loses its entropy's Binomial
        t_big = T.Multinomial(t_dist.total_count, probs=t_dist.probs.expand(batch + (3,)))
    assert type(g_big) is type(g_dist) and tuple(g_big.batch_shape) == batch
    assert tuple(g_big.sample((2,)).shape) == tuple(t_big.sample((2,)).shape)
    assert_same_statistics(g_big, t_big, atol=tol, rtol=tol)
    assert_same_scores(g_big, t_big, torch_values(t_big, 2), device, atol=tol, rtol=tol)


@pytest.mark.parametrize(("name", "params", "invalid"),
                         [c for c in CASES if c[2] is not None],
                         ids=[i for i, c in zip(IDS, CASES, strict=True) if c[2] is not None])
def test_invalid_parameters_raise_torch_error(name, params, invalid, device):
    g_kwargs, t_kwargs = params_pair(invalid, device, np.float64)
    with pytest.raises(ValueError) as want:
        getattr(T, name)(**t_kwargs, validate_args=True)
    with pytest.raises(ValueError) as got:
        getattr(D, name)(**g_kwargs, validate_args=True)
    assert str(got.value).split(" of distribution")[0] == \
        str(want.value).split(" of distribution")[0].replace("torch.", "gputensor.")


@pytest.mark.parametrize(("name", "params", "bad"), [
    ("Poisson", {"rate": [1.0]}, [1.5]),
    ("Binomial", {"total_count": [3.0], "probs": [0.5]}, [4.0]),
    ("NegativeBinomial", {"total_count": [3.0], "probs": [0.5]}, [-1.0]),
    ("Multinomial", {"total_count": 2, "probs": [[0.5, 0.5]]}, [[2.0, 1.0]]),
    ("Kumaraswamy", {"concentration1": [1.0], "concentration0": [2.0]}, [1.5]),
    ("InverseGamma", {"concentration": [1.0], "rate": [2.0]}, [-0.5]),
    ("FisherSnedecor", {"df1": [1.0], "df2": [2.0]}, [0.0]),
])
def test_values_outside_support_raise_torch_error(name, params, bad):
    g_dist, t_dist, _ = make(name, params, "cpu", np.float64, validate_args=True)
    with pytest.raises(ValueError) as want:
        t_dist.log_prob(torch.tensor(bad, dtype=torch.float64))
    with pytest.raises(ValueError) as got:
        g_dist.log_prob(gt.tensor(bad, dtype=gt.float64))
    assert str(got.value).split(" of distribution")[0] == \
        str(want.value).split(" of distribution")[0].replace("torch.", "gputensor.")


def test_argument_errors_match_torch():
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(gt.tensor(3), probs=gt.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Binomial(3, probs=gt.tensor([0.5]), logits=gt.tensor([0.0]))
    b = D.Binomial(gt.tensor([3.0, 4.0]), probs=gt.tensor([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by "
                                                  "`enumerate_support`"):
        b.enumerate_support()
    with pytest.raises(NotImplementedError, match="by `entropy`"):
        b.entropy()
    with pytest.raises(NotImplementedError, match="FisherSnedecor does not implement entropy"):
        D.FisherSnedecor(2.0, 3.0).entropy()


def test_binomial_enumerate_support_matches_torch(device):
    g_dist, t_dist, _ = make("Binomial", {"total_count": [3.0, 3.0], "probs": [0.2, 0.9]},
                             device, np.float64)
    for expand in (True, False):
        assert_close(g_dist.enumerate_support(expand), t_dist.enumerate_support(expand))


# parameters with finite fourth moments, so the sample variance has a standard error
MOMENT_CASES = [
    ("StudentT", {"df": [9.0, 14.0], "loc": [0.5, -1.0], "scale": [1.0, 2.0]}),
    ("FisherSnedecor", {"df1": [3.0, 8.0], "df2": [14.0, 20.0]}),
    ("InverseGamma", {"concentration": [6.0, 9.0], "rate": [1.0, 3.0]}),
    ("Kumaraswamy", {"concentration1": [0.5, 3.0], "concentration0": [0.7, 2.0]}),
    ("Poisson", {"rate": [0.5, 3.0, 40.0]}),
    # n * p below 10 takes the inversion sampler, above it BTRS
    ("Binomial", {"total_count": [5.0, 40.0, 200.0], "probs": [0.3, 0.6, 0.05]}),
    ("NegativeBinomial", {"total_count": [2.0, 5.5], "probs": [0.3, 0.6]}),
    ("Multinomial", {"total_count": 7, "probs": PROBS3}),
]


@pytest.mark.parametrize(("name", "params"), MOMENT_CASES, ids=[c[0] for c in MOMENT_CASES])
def test_sample_moments(name, params, device):
    g_dist, t_dist, _ = make(name, params, device, np.float64)
    gt.manual_seed(1234)
    samples = g_dist.sample((20000,))
    assert samples.device == gt.device(device) and samples.dtype == gt.float64
    assert bool(g_dist.support.check(samples).all())
    assert_moments(samples, t_dist.mean.numpy(), t_dist.variance.numpy())


def test_von_mises_circular_moments(device):
    """With r = I1(k) / I0(k) (1 - the circular variance): E[cos(x - loc)] = r,
    Var[cos(x - loc)] = 1 - r / k - r^2, E[sin(x - loc)] = 0, Var[sin(x - loc)] = r / k
    (from I2 = I0 - 2 I1 / k). Samples lie in [-pi, pi), also for a concentration of 1e-6
    (where a float32 rejection test would never accept)."""
    loc, kappa = [0.3, -2.0, 3.0, 1.0], np.array([0.5, 2.0, 30.0, 1e-6])
    g_dist = D.VonMises(gt.tensor(loc, device=device, dtype=gt.float64),
                        gt.tensor(kappa, device=device, dtype=gt.float64))
    gt.manual_seed(5)
    x = g_dist.sample((20000,))
    assert bool(((x >= -math.pi) & (x < math.pi)).all())
    r = 1 - T.VonMises(torch.tensor(loc), torch.tensor(kappa)).variance.numpy()
    d = x - g_dist.loc
    assert_moments(gt.cos(d), r, 1 - r / kappa - r ** 2)
    assert_moments(gt.sin(d), np.zeros(4), r / kappa)
    small = D.VonMises(gt.zeros(3, device=device), gt.full((3,), 1e-6, device=device))
    assert small.sample((5,)).dtype == gt.float32


def _float_params(g_kwargs):
    return [name for name, v in g_kwargs.items() if isinstance(v, gt.Tensor)
            and name != "total_count"]


@pytest.mark.parametrize(("name", "params", "invalid"), CASES[:-1], ids=IDS[:-1])
def test_log_prob_gradcheck(name, params, invalid, device):
    g_dist, t_dist, g_kwargs = make(name, params, device, np.float64)
    names = _float_params(g_kwargs)
    values = to_gt(torch_values(t_dist), device)
    leaves = [g_kwargs[n].detach().requires_grad_() for n in names]

    def log_prob(*tensors):
        return getattr(D, name)(**{**g_kwargs, **dict(zip(names, tensors, strict=True))}) \
            .log_prob(values)

    assert gt.autograd.gradcheck(log_prob, leaves, atol=1e-5)


@pytest.mark.parametrize(("name", "params", "wrt"), [
    ("Kumaraswamy", {"concentration1": [0.5, 3.0], "concentration0": [0.7, 2.0]},
     ("concentration1", "concentration0")),
    ("StudentT", {"df": [3.0, 6.0], "loc": [0.5, -1.0], "scale": [1.0, 2.0]}, ("loc", "scale")),
    ("InverseGamma", {"concentration": [2.0, 4.0], "rate": [1.0, 3.0]}, ("rate",)),
])
def test_rsample_gradcheck(name, params, wrt, device):
    """The parameters a sample depends on smoothly at fixed draws (the others enter through
    the implicit gamma gradient, checked below)."""
    _, _, g_kwargs = make(name, params, device, np.float64)
    leaves = [g_kwargs[n].detach().requires_grad_() for n in wrt]

    def draw(*tensors):
        gt.manual_seed(0)
        return getattr(D, name)(**{**g_kwargs, **dict(zip(wrt, tensors, strict=True))}) \
            .rsample((3,))

    assert gt.autograd.gradcheck(draw, leaves, atol=1e-5)


@pytest.mark.parametrize(("name", "params", "wrt", "statistic", "exact"), [
    # d/d df of E[T^2] = df / (df - 2)
    ("StudentT", {"df": [9.0], "loc": [0.0], "scale": [1.0]}, "df",
     lambda x: x.pow(2), lambda df: -2 / (df - 2) ** 2),
    # d/d df2 of E[X] = df2 / (df2 - 2); E[X] does not depend on df1
    ("FisherSnedecor", {"df1": [5.0], "df2": [12.0]}, "df2", lambda x: x,
     lambda df2: -2 / (df2 - 2) ** 2),
    ("FisherSnedecor", {"df1": [5.0], "df2": [12.0]}, "df1", lambda x: x, lambda df1: 0.0),
    # d/dc of E[X] = rate / (c - 1)
    ("InverseGamma", {"concentration": [6.0], "rate": [2.0]}, "concentration", lambda x: x,
     lambda c: -2.0 / (c - 1) ** 2),
])
def test_implicit_rsample_gradients_average_to_the_statistic_gradient(
        name, params, wrt, statistic, exact, device):
    _, _, g_kwargs = make(name, params, device, np.float64)
    leaf = g_kwargs[wrt].detach().requires_grad_()
    gt.manual_seed(11)
    x = getattr(D, name)(**{**g_kwargs, wrt: leaf}).rsample((40000,))
    per_sample = gt.autograd.grad(statistic(x).sum(), leaf)[0] / x.shape[0]
    np.testing.assert_allclose(per_sample.cpu().numpy(), exact(params[wrt][0]), atol=4e-3)
