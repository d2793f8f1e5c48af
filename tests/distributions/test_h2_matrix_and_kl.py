"""LKJCholesky and Wishart against torch.distributions (statistics, log_prob, expand,
validation, sample moments, rsample gradients), and every KL pair PyTorch registers for the
gamma family, on cpu and emulated cuda."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor import distributions as D
from tests.distributions._common import assert_moments, assert_same_statistics, to_gt
from tests.helpers import assert_close

T = torch.distributions
COV = np.array([[[2.0, 0.5, 0.1], [0.5, 1.0, -0.2], [0.1, -0.2, 0.8]],
                [[1.0, -0.3, 0.0], [-0.3, 0.7, 0.2], [0.0, 0.2, 1.5]]])
MATRIX_PARAMS = {"covariance_matrix": COV, "precision_matrix": np.linalg.inv(COV),
                 "scale_tril": np.linalg.cholesky(COV)}


def _wishart(device, param, df=(4.5, 7.0)):
    value = MATRIX_PARAMS[param]
    g = D.Wishart(gt.tensor(df, dtype=gt.float64, device=device),
                  **{param: gt.tensor(value, device=device)})
    t = T.Wishart(torch.tensor(df, dtype=torch.float64), **{param: torch.tensor(value)})
    return g, t


@pytest.mark.parametrize("param", list(MATRIX_PARAMS))
def test_wishart_matches_torch(param, device):
    g, t = _wishart(device, param)
    assert_same_statistics(g, t, atol=1e-9, rtol=1e-9)
    for name in MATRIX_PARAMS:
        assert_close(getattr(g, name), getattr(t, name), atol=1e-9, rtol=1e-9)
    torch.manual_seed(0)
    values = t.sample((3,))
    assert_close(g.log_prob(to_gt(values, device)), t.log_prob(values), atol=1e-9, rtol=1e-9)
    big_g, big_t = g.expand((4, 2)), t.expand((4, 2))
    assert tuple(big_g.batch_shape) == (4, 2) and tuple(big_g.event_shape) == (3, 3)
    assert_close(big_g.log_prob(to_gt(values[0], device)), big_t.log_prob(values[0]),
                 atol=1e-9, rtol=1e-9)
    assert tuple(big_g.rsample((2,)).shape) == (2, 4, 2, 3, 3)
    assert_close(D.kl_divergence(g, _wishart(device, "scale_tril", (5.0, 3.5))[0]),
                 T.kl_divergence(t, _wishart(device, "scale_tril", (5.0, 3.5))[1]),
                 atol=1e-9, rtol=1e-9)  # the exponential-family KL through the log normalizer


def test_wishart_argument_errors_match_torch():
    eye = gt.eye(2, dtype=gt.float64)
    with pytest.raises(AssertionError, match="Exactly one of covariance_matrix"):
        D.Wishart(3.0, covariance_matrix=eye, scale_tril=eye)
    with pytest.raises(ValueError, match="at least two-dimensional"):
        D.Wishart(3.0, covariance_matrix=gt.ones(2))
    with pytest.raises(ValueError, match=r"df=0.5 expected to be greater than ndim - 1 = 1"):
        D.Wishart(0.5, covariance_matrix=eye)
    with pytest.warns(UserWarning, match="Low df values detected"):
        D.Wishart(1.5, covariance_matrix=eye)
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.Wishart(3.0, covariance_matrix=-eye, validate_args=True)
    with pytest.raises(ValueError, match="support"):
        D.Wishart(3.0, covariance_matrix=eye, validate_args=True).log_prob(-eye)


def test_wishart_sample_moments_and_no_singular_warning(device):
    g, t = _wishart(device, "covariance_matrix")
    gt.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # well-conditioned draws need no correction
        x = g.rsample((6000,))  # (small batched products are slow in the emulator)
    assert bool(g.support.check(x).all())
    assert_moments(x, t.mean.numpy(), t.variance.numpy())


def test_wishart_rsample_gradients(device):
    """At fixed draws a sample is L B B^T L^T: gradcheck in the scale; the df gradient (the
    implicit chi-squared one) averages to d E[X] / d df = covariance."""
    tril = gt.tensor(MATRIX_PARAMS["scale_tril"], device=device).requires_grad_()
    df = gt.tensor([4.5, 7.0], dtype=gt.float64, device=device)

    def draw(scale_tril):
        gt.manual_seed(0)
        return D.Wishart(df, scale_tril=scale_tril.tril()).rsample((2,))  # stays lower

    assert gt.autograd.gradcheck(draw, (tril,), atol=1e-6)
    df_leaf = df.clone().requires_grad_()
    gt.manual_seed(4)
    x = D.Wishart(df_leaf, covariance_matrix=gt.tensor(COV, device=device)).rsample((6000,))
    (grad,) = gt.autograd.grad(x[..., 0, 0].sum() / x.shape[0], df_leaf)
    # the average's spread over seeds is 0.4% here: 3% is about 7 standard errors
    np.testing.assert_allclose(grad.cpu().numpy(), COV[:, 0, 0], rtol=0.03)


@pytest.mark.parametrize("dim", [2, 4])
def test_lkj_cholesky_matches_torch(dim, device):
    conc = [0.5, 2.0]
    g = D.LKJCholesky(dim, gt.tensor(conc, dtype=gt.float64, device=device))
    t = T.LKJCholesky(dim, torch.tensor(conc, dtype=torch.float64))
    assert tuple(g.batch_shape) == (2,) and tuple(g.event_shape) == (dim, dim)
    torch.manual_seed(0)
    values = t.sample((3,))
    assert_close(g.log_prob(to_gt(values, device)), t.log_prob(values), atol=1e-9, rtol=1e-9)
    big = g.expand((5, 2))
    assert_close(big.log_prob(to_gt(values[0], device)), t.expand((5, 2)).log_prob(values[0]),
                 atol=1e-9, rtol=1e-9)
    assert tuple(big.sample((3,)).shape) == (3, 5, 2, dim, dim)
    conc_leaf = gt.tensor(conc, dtype=gt.float64, device=device).requires_grad_()
    assert gt.autograd.gradcheck(
        lambda c: D.LKJCholesky(dim, c).log_prob(to_gt(values, device)), (conc_leaf,))


def test_lkj_cholesky_samples(device):
    """Samples are Cholesky factors of correlation matrices whose off-diagonal entries, all
    alike, have variance 1 / (2 eta + dim - 1) (each marginal is a Beta(eta - 1 + dim / 2,
    same) on [-1, 1]). PyTorch's sampler fails this from the third row on (see
    lkj_cholesky.py), so the check is against the distribution, not against it."""
    dim, conc = 4, np.array([0.5, 2.0])
    g = D.LKJCholesky(dim, gt.tensor(conc, dtype=gt.float64, device=device))
    gt.manual_seed(2)
    x = g.sample((20000,))
    assert x.device == gt.device(device) and bool(g.support.check(x).all())
    corr = x @ x.mT
    for i, j in ((1, 0), (2, 0), (2, 1), (3, 0), (3, 2)):
        assert_moments(corr[..., i, j], np.zeros(2), 1 / (2 * conc + dim - 1))


def test_lkj_cholesky_errors_match_torch():
    with pytest.raises(ValueError, match="Found dim=1"):
        D.LKJCholesky(1, 1.0)
    with pytest.raises(ValueError, match="concentration"):
        D.LKJCholesky(3, gt.tensor([-1.0]), validate_args=True)
    with pytest.raises(ValueError, match="support"):
        D.LKJCholesky(2, 1.0, validate_args=True).log_prob(gt.eye(2) * 2)


# -- KL ----------------------------------------------------------------------------------------
def _params(name, variant):
    """Two parameter sets per family (float64 lists): p's and q's."""
    table = {
        "Beta": ([[0.4, 2.0, 7.5], [1.3, 0.5, 2.0]], [[1.1, 0.9, 3.0], [0.7, 2.0, 1.0]]),
        "Gamma": ([[0.4, 2.0, 7.5], [1.3, 0.5, 2.0]], [[1.1, 0.9, 3.0], [0.7, 2.0, 1.0]]),
        "Chi2": ([[0.7, 3.0, 12.0]], [[1.5, 2.0, 5.0]]),
        "Exponential": ([[0.8, 1.5, 3.0]], [[1.2, 0.4, 2.0]]),
        "Poisson": ([[0.8, 1.5, 3.0]], [[1.2, 0.4, 2.0]]),
        "Bernoulli": ([[0.2, 0.5, 0.9]], [[0.7, 0.1, 0.4]]),
        "ContinuousBernoulli": ([[0.2, 0.5, 0.9]], [[0.7, 0.1, 0.4]]),
        "Normal": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.0]], [[0.0, 1.0, -1.0], [2.0, 1.5, 0.7]]),
        "Gumbel": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.0]], [[0.0, 1.0, -1.0], [2.0, 1.5, 0.7]]),
        "Laplace": ([[0.3, -1.0, 2.0], [1.0, 0.5, 2.0]], [[0.0, 1.0, -1.0], [2.0, 1.5, 0.7]]),
        # the second alpha (0.8) gives p an infinite mean: KL(Pareto || Gamma) = inf
        "Pareto": ([[1.0, 0.5, 2.0], [2.5, 0.8, 4.0]], [[1.0, 0.5, 2.0], [3.0, 2.0, 5.0]]),
        # the third interval leaves the unit interval / the positive reals
        "Uniform": ([[0.1, 0.3, -0.5], [0.6, 0.9, 0.5]], [[0.0, 0.2, 0.1], [1.0, 0.9, 1.5]]),
    }
    return table[name][variant]


def _dists(name, variant, device):
    values = _params(name, variant)
    g_args = [gt.tensor(v, dtype=gt.float64, device=device) for v in values]
    t_args = [torch.tensor(v, dtype=torch.float64) for v in values]
    if name in ("Bernoulli", "ContinuousBernoulli"):
        return getattr(D, name)(probs=g_args[0]), getattr(T, name)(probs=t_args[0])
    return getattr(D, name)(*g_args), getattr(T, name)(*t_args)


KL_PAIRS = [
    ("Beta", "Beta"), ("Gamma", "Gamma"), ("Chi2", "Chi2"), ("Poisson", "Poisson"),
    ("Bernoulli", "Poisson"), ("Beta", "ContinuousBernoulli"), ("Beta", "Pareto"),
    ("Beta", "Exponential"), ("Beta", "Gamma"), ("Beta", "Normal"), ("Beta", "Uniform"),
    ("Exponential", "Beta"), ("Exponential", "Gamma"), ("Gamma", "Beta"),
    ("Gamma", "ContinuousBernoulli"), ("Gamma", "Pareto"), ("Gamma", "Uniform"),
    ("Gamma", "Exponential"), ("Gamma", "Gumbel"), ("Gamma", "Normal"), ("Gumbel", "Beta"),
    ("Gumbel", "Gamma"), ("Laplace", "Beta"), ("Laplace", "Gamma"), ("Normal", "Beta"),
    ("Normal", "Gamma"), ("Pareto", "Beta"), ("Pareto", "Gamma"), ("Poisson", "Bernoulli"),
    ("Uniform", "Beta"), ("Uniform", "Gamma"), ("Chi2", "Normal"),
]


@pytest.mark.parametrize("pair", KL_PAIRS, ids=["-".join(p) for p in KL_PAIRS])
def test_kl_matches_torch(pair, device):
    gp, tp = _dists(pair[0], 0, device)
    gq, tq = _dists(pair[1], 1, device)
    got, want = D.kl_divergence(gp, gq), T.kl_divergence(tp, tq)
    assert got.device == gt.device(device)
    assert_close(got, want, atol=1e-9, rtol=1e-9)


def test_kl_binomial_pairs_match_torch(device):
    def binomial(lib, counts, probs):
        to = (lambda v: gt.tensor(v, dtype=gt.float64, device=device)) if lib is D else \
            (lambda v: torch.tensor(v, dtype=torch.float64))
        return lib.Binomial(to(counts), probs=to(probs))

    args_p, args_q = ([5.0, 8.0], [0.3, 0.6]), ([5.0, 6.0], [0.5, 0.2])
    assert_close(D.kl_divergence(binomial(D, *args_p), binomial(D, *args_q)),
                 T.kl_divergence(binomial(T, *args_p), binomial(T, *args_q)))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(binomial(D, *args_q), binomial(D, *args_p))
    poisson = D.Poisson(gt.tensor([1.0, 2.0], dtype=gt.float64, device=device))
    assert bool(gt.isinf(D.kl_divergence(poisson, binomial(D, *args_p))).all())
