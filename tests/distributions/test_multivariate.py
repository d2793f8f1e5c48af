"""Multivariate, mixture and composed distributions against torch.distributions."""
from __future__ import annotations

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
    to_gt,
)
from tests.helpers import assert_close

T = torch.distributions


def _spd(batch, n, seed):
    a = torch.randn(batch + (n, n), generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)
    return a @ a.mT + n * torch.eye(n, dtype=torch.float64)


LOC = torch.tensor([[0.5, -1.0, 2.0], [0.0, 0.3, -0.2]], dtype=torch.float64)
COV = _spd((2,), 3, 0)
W = torch.tensor([[[1.0, 0.2], [0.3, -0.5], [0.0, 1.0]]], dtype=torch.float64)
DIAG = torch.tensor([[0.5, 1.0, 2.0], [1.5, 0.2, 1.0]], dtype=torch.float64)

MVN_CASES = {
    "covariance_matrix": lambda lib, c: lib.MultivariateNormal(c(LOC), covariance_matrix=c(COV)),
    "precision_matrix": lambda lib, c: lib.MultivariateNormal(c(LOC), precision_matrix=c(COV)),
    "scale_tril": lambda lib, c: lib.MultivariateNormal(
        c(LOC[0]), scale_tril=c(torch.linalg.cholesky(COV))),
    "lowrank": lambda lib, c: lib.LowRankMultivariateNormal(c(LOC), c(W), c(DIAG)),
}


def both(make, device):
    return make(D, lambda t: to_gt(t, device)), make(T, lambda t: t)


@pytest.mark.parametrize("name", list(MVN_CASES))
def test_multivariate_normal_matches_torch(name, device):
    g_dist, t_dist = both(MVN_CASES[name], device)
    assert_same_shapes(g_dist, t_dist)
    assert_same_statistics(g_dist, t_dist, atol=1e-10, rtol=1e-10)
    torch.manual_seed(0)
    values = t_dist.sample((4,))
    assert_same_scores(g_dist, t_dist, values, device, atol=1e-10, rtol=1e-10)
    assert_same_scores(g_dist, t_dist, values[:, :1], device, atol=1e-10, rtol=1e-10)
    for attr in ("scale_tril", "covariance_matrix", "precision_matrix"):
        assert_close(getattr(g_dist, attr), getattr(t_dist, attr), atol=1e-10, rtol=1e-8)
    g_big, t_big = g_dist.expand((5, 2)), t_dist.expand((5, 2))
    assert_same_statistics(g_big, t_big, atol=1e-10, rtol=1e-10)
    assert_same_scores(g_big, t_big, t_big.sample((2,)), device, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("name", list(MVN_CASES))
def test_multivariate_normal_sample_moments(name, device):
    g_dist, t_dist = both(MVN_CASES[name], device)
    gt.manual_seed(11)
    samples = g_dist.sample((10000,))
    assert samples.device == gt.device(device)
    assert_moments(samples, t_dist.mean.numpy(), t_dist.variance.numpy())
    x = samples.cpu().numpy().reshape(10000, -1, 3)[:, -1]
    cov = np.cov(x, rowvar=False)
    expected = t_dist.covariance_matrix.reshape(-1, 3, 3)[-1].numpy()
    assert np.allclose(cov, expected, atol=0.1 * np.abs(expected).max())


@pytest.mark.parametrize("name", ["covariance_matrix", "scale_tril", "lowrank"])
def test_multivariate_normal_gradcheck(name, device):
    g_dist, _ = both(MVN_CASES[name], device)
    loc = g_dist.loc.detach().clone().requires_grad_()
    value = to_gt(torch.tensor([[0.1, 0.2, -0.3]], dtype=torch.float64), device)
    if name == "lowrank":
        w = g_dist.cov_factor[0].detach().clone().requires_grad_()
        d = g_dist.cov_diag.detach().clone().requires_grad_()

        def build(loc, w, d):
            return D.LowRankMultivariateNormal(loc, w, d)
        params = [loc, w, d]
    else:
        tril = g_dist.scale_tril.detach().clone().requires_grad_()

        def build(loc, tril):
            return D.MultivariateNormal(loc, scale_tril=tril.tril(), validate_args=False)
        params = [loc, tril]

    def draw(*p):
        gt.manual_seed(0)
        return build(*p).rsample((2,))

    assert gt.autograd.gradcheck(lambda *p: build(*p).log_prob(value), params)
    assert gt.autograd.gradcheck(lambda *p: build(*p).entropy(), params)
    assert gt.autograd.gradcheck(draw, params)


def test_multivariate_normal_argument_errors():
    loc = gt.zeros(2)
    cases = [
        (lambda lib, m: lib.MultivariateNormal(m(torch.zeros(2))), None),
        (lambda lib, m: lib.MultivariateNormal(m(torch.tensor(0.0)), m(torch.eye(2))), None),
        (lambda lib, m: lib.MultivariateNormal(m(torch.zeros(2)), m(torch.ones(2))), None),
        (lambda lib, m: lib.MultivariateNormal(m(torch.zeros(2)), scale_tril=m(torch.ones(2))),
         None),
        (lambda lib, m: lib.MultivariateNormal(m(torch.zeros(2)),
                                               m(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))), None),
        (lambda lib, m: lib.LowRankMultivariateNormal(m(torch.zeros(2)), m(torch.ones(3, 1)),
                                                      m(torch.ones(2))), None),
        (lambda lib, m: lib.LowRankMultivariateNormal(m(torch.zeros(2)), m(torch.ones(2, 1)),
                                                      m(torch.ones(3))), None),
    ]
    for make, _ in cases:
        with pytest.raises(ValueError) as want:
            make(T, lambda t: t)
        with pytest.raises(ValueError) as got:
            make(D, lambda t: gt.tensor(t.numpy()))
        assert str(got.value).split("\n")[0] == \
            str(want.value).split("\n")[0].replace("torch.", "gputensor.")
    assert tuple(D.MultivariateNormal(loc, gt.eye(2)).batch_shape) == ()


MIXTURES = {
    "normal": lambda lib, c: lib.MixtureSameFamily(
        lib.Categorical(c(torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]))),
        lib.Normal(c(torch.tensor([[-1.0, 0.0, 2.0], [0.5, 0.1, -2.0]])),
                   c(torch.tensor([[0.5, 1.0, 0.3], [1.0, 2.0, 0.4]])))),
    "mvn": lambda lib, c: lib.MixtureSameFamily(
        lib.Categorical(c(torch.tensor([0.3, 0.7]))),
        lib.MultivariateNormal(c(LOC), c(COV))),
    "independent": lambda lib, c: lib.MixtureSameFamily(
        lib.Categorical(logits=c(torch.tensor([0.1, -0.4]))),
        lib.Independent(lib.Normal(c(LOC), c(DIAG)), 1)),
}


@pytest.mark.parametrize("name", list(MIXTURES))
def test_mixture_same_family_matches_torch(name, device):
    g_dist, t_dist = both(MIXTURES[name], device)
    assert_same_shapes(g_dist, t_dist)
    assert_same_statistics(g_dist, t_dist)
    torch.manual_seed(0)
    assert_same_scores(g_dist, t_dist, t_dist.sample((5,)), device)
    assert repr(g_dist.support) == repr(t_dist.support)
    g_big, t_big = g_dist.expand((3,) + tuple(g_dist.batch_shape)), \
        t_dist.expand((3,) + tuple(t_dist.batch_shape))
    assert_same_statistics(g_big, t_big)
    gt.manual_seed(5)
    samples = g_dist.sample((20000,))
    assert_moments(samples, t_dist.mean.numpy(), t_dist.variance.numpy())


def test_mixture_argument_errors():
    normal = D.Normal(gt.zeros(2, 3), gt.ones(2, 3))
    t_normal = T.Normal(torch.zeros(2, 3), torch.ones(2, 3))
    for g_args, t_args in (((normal, normal), (t_normal, t_normal)),
                           ((D.Categorical(gt.ones(3)), 1.0),
                            (T.Categorical(torch.ones(3)), 1.0))):
        with pytest.raises(ValueError) as want:
            T.MixtureSameFamily(*t_args)
        with pytest.raises(ValueError) as got:
            D.MixtureSameFamily(*g_args)
        assert str(got.value) == str(want.value).replace("torch.", "gputensor.")
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(gt.ones(4)), normal)
    with pytest.raises(ValueError, match="not compatible"):
        D.MixtureSameFamily(D.Categorical(gt.ones(5, 3)), normal)


def test_independent_matches_torch(device):
    def make(lib, c):
        return lib.Independent(lib.Normal(c(LOC), c(DIAG)), 1)
    g_dist, t_dist = both(make, device)
    assert_same_shapes(g_dist, t_dist)
    assert_same_statistics(g_dist, t_dist)
    assert_same_scores(g_dist, t_dist, t_dist.sample((3,)), device)
    assert repr(g_dist.support) == repr(t_dist.support)
    assert repr(g_dist) == repr(t_dist).replace("torch.", "gputensor.")
    assert tuple(g_dist.expand((4, 2)).batch_shape) == (4, 2)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(gt.zeros(2), gt.ones(2)), 2)
    bern = D.Independent(D.Bernoulli(gt.tensor([0.2, 0.5])), 1)
    with pytest.raises(NotImplementedError, match="cartesian product"):
        bern.enumerate_support()


def test_transformed_distribution_matches_torch(device):
    def make(lib, c):
        transforms = lib.transforms
        return lib.TransformedDistribution(
            lib.Normal(c(LOC), c(DIAG)),
            [transforms.AffineTransform(c(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)),
                                        -2.0), transforms.ExpTransform(),
             transforms.StickBreakingTransform()])
    g_dist, t_dist = both(make, device)
    assert_same_shapes(g_dist, t_dist)
    torch.manual_seed(0)
    assert_same_scores(g_dist, t_dist, t_dist.sample((3,)), device, atol=1e-8, rtol=1e-8)
    assert repr(g_dist.support) == repr(t_dist.support)
    g_big = g_dist.expand((4, 2))
    assert tuple(g_big.sample().shape) == tuple(t_dist.expand((4, 2)).sample().shape)


def test_transformed_distribution_cdf_of_decreasing_chain(device):
    def make(lib, c):
        return lib.TransformedDistribution(
            lib.Normal(c(torch.tensor([0.0, 1.0])), c(torch.tensor([1.0, 2.0]))),
            [lib.transforms.AffineTransform(1.0, -2.0)])
    g_dist, t_dist = both(make, device)
    x = torch.tensor([0.5, -1.0])
    assert_close(g_dist.cdf(to_gt(x, device)), t_dist.cdf(x))
    u = torch.tensor([0.2, 0.9])
    assert_close(g_dist.icdf(to_gt(u, device)), t_dist.icdf(u))
    with pytest.raises(ValueError, match="transforms must be"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), "exp")


def test_subclass_with_custom_init_must_define_expand():
    class Shifted(D.Normal):
        def __init__(self, shift):
            super().__init__(gt.tensor([shift]), gt.tensor([1.0]))

    with pytest.raises(NotImplementedError, match="must also define a custom .expand"):
        Shifted(1.0).expand((3,))
