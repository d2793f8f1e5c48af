"""kl_divergence: every closed form registered for this package's distributions against
torch.distributions, and the dispatch rules of register_kl."""
from __future__ import annotations

import warnings

import pytest
import torch

import gputensor as gt
from gputensor import distributions as D
from gputensor.distributions import kl as gkl
from tests.distributions._common import to_gt
from tests.helpers import assert_close

T = torch.distributions


def _t(values):
    return torch.tensor(values, dtype=torch.float64)


# Two parameter sets per family, so that KL(p || q) is computed between different members.
FAMILIES = {
    "Normal": [lambda lib, c: lib.Normal(c(_t([0.3, -1.0])), c(_t([1.0, 0.5]))),
               lambda lib, c: lib.Normal(c(_t([1.0, 0.0])), c(_t([2.0, 0.7])))],
    "Exponential": [lambda lib, c: lib.Exponential(c(_t([0.5, 2.0]))),
                    lambda lib, c: lib.Exponential(c(_t([1.5, 0.3])))],
    "Laplace": [lambda lib, c: lib.Laplace(c(_t([0.3, -1.0])), c(_t([1.0, 0.5]))),
                lambda lib, c: lib.Laplace(c(_t([1.0, 0.0])), c(_t([2.0, 0.7])))],
    "Cauchy": [lambda lib, c: lib.Cauchy(c(_t([0.3, -1.0])), c(_t([1.0, 0.5]))),
               lambda lib, c: lib.Cauchy(c(_t([1.0, 0.0])), c(_t([2.0, 0.7])))],
    "Uniform": [lambda lib, c: lib.Uniform(c(_t([0.2, 1.5])), c(_t([0.7, 3.0]))),
                lambda lib, c: lib.Uniform(c(_t([0.0, 1.0])), c(_t([1.0, 2.0])))],
    "Gumbel": [lambda lib, c: lib.Gumbel(c(_t([0.3, -1.0])), c(_t([1.0, 0.5]))),
               lambda lib, c: lib.Gumbel(c(_t([1.0, 0.0])), c(_t([2.0, 0.7])))],
    "HalfNormal": [lambda lib, c: lib.HalfNormal(c(_t([1.0, 0.5]))),
                   lambda lib, c: lib.HalfNormal(c(_t([2.0, 0.7])))],
    "Pareto": [lambda lib, c: lib.Pareto(c(_t([1.0, 2.0])), c(_t([3.0, 1.5]))),
               lambda lib, c: lib.Pareto(c(_t([0.5, 2.5])), c(_t([2.5, 4.0])))],
    "Bernoulli": [lambda lib, c: lib.Bernoulli(c(_t([0.2, 0.0, 0.6]))),
                  lambda lib, c: lib.Bernoulli(c(_t([0.5, 0.3, 0.0])))],
    "Geometric": [lambda lib, c: lib.Geometric(c(_t([0.2, 0.7]))),
                  lambda lib, c: lib.Geometric(c(_t([0.5, 0.3])))],
    "ContinuousBernoulli": [lambda lib, c: lib.ContinuousBernoulli(c(_t([0.2, 0.5]))),
                            lambda lib, c: lib.ContinuousBernoulli(c(_t([0.7, 0.4])))],
    "Categorical": [lambda lib, c: lib.Categorical(c(_t([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5]]))),
                    lambda lib, c: lib.Categorical(c(_t([[0.6, 0.3, 0.1], [0.3, 0.7, 0.0]])))],
    "OneHotCategorical": [lambda lib, c: lib.OneHotCategorical(c(_t([[0.2, 0.3, 0.5]]))),
                          lambda lib, c: lib.OneHotCategorical(c(_t([[0.6, 0.3, 0.1]])))],
    "MultivariateNormal": [
        lambda lib, c: lib.MultivariateNormal(c(_t([[0.0, 1.0], [1.0, 0.5]])),
                                              c(_t([[2.0, 0.5], [0.5, 1.0]]))),
        lambda lib, c: lib.MultivariateNormal(c(_t([1.0, -1.0])),
                                              scale_tril=c(_t([[1.5, 0.0], [0.3, 0.8]])))],
    "LowRankMultivariateNormal": [
        lambda lib, c: lib.LowRankMultivariateNormal(
            c(_t([[0.0, 1.0], [1.0, 0.5]])), c(_t([[1.0], [0.5]])), c(_t([0.5, 1.0]))),
        lambda lib, c: lib.LowRankMultivariateNormal(
            c(_t([1.0, -1.0])), c(_t([[[0.2, 1.0], [0.5, -0.3]]])), c(_t([1.0, 2.0])))],
    "Independent": [lambda lib, c: lib.Independent(lib.Normal(c(_t([0.3, -1.0])),
                                                              c(_t([1.0, 0.5]))), 1),
                    lambda lib, c: lib.Independent(lib.Normal(c(_t([1.0, 0.0])),
                                                              c(_t([2.0, 0.7]))), 1)],
    "LogNormal": [lambda lib, c: lib.LogNormal(c(_t([0.3, -1.0])), c(_t([1.0, 0.5]))),
                  lambda lib, c: lib.LogNormal(c(_t([1.0, 0.0])), c(_t([2.0, 0.7])))],
}

# Every pair this package registers whose two families are both its own.
PAIRS = sorted({(p.__name__, q.__name__) for p, q in gkl._KL_REGISTRY
                if p.__name__ in FAMILIES and q.__name__ in FAMILIES} | {
    ("LogNormal", "LogNormal"), ("Bernoulli", "Bernoulli")})


def _build(name, index, lib, device=None):
    convert = (lambda t: to_gt(t, device)) if lib is D else (lambda t: t)
    return FAMILIES[name][index](lib, convert)


@pytest.mark.parametrize(("p_name", "q_name"), PAIRS, ids=[f"{p}-{q}" for p, q in PAIRS])
def test_kl_matches_torch(p_name, q_name, device):
    for i, j in ((0, 1), (1, 0)):
        t_p, t_q = _build(p_name, i, T), _build(q_name, j, T)
        expected = T.kl_divergence(t_p, t_q)
        got = D.kl_divergence(_build(p_name, i, D, device), _build(q_name, j, D, device))
        assert got.device == gt.device(device)
        assert_close(got, expected, atol=1e-10, rtol=1e-9)


def test_registered_pairs_cover_torchs_pairs_among_these_families():
    from torch.distributions import kl as tkl
    theirs = {(p.__name__, q.__name__) for p, q in tkl._KL_REGISTRY
              if p.__name__ in FAMILIES and q.__name__ in FAMILIES}
    ours = {(p.__name__, q.__name__) for p, q in gkl._KL_REGISTRY}
    assert theirs <= ours, theirs - ours
    assert ("ExponentialFamily", "ExponentialFamily") in ours
    assert ("TransformedDistribution", "TransformedDistribution") in ours


def test_kl_gradients_by_gradcheck(device):
    loc = gt.tensor([0.3, -1.0], dtype=gt.float64, device=device, requires_grad=True)
    tril = gt.tensor([[1.5, 0.0], [0.3, 0.8]], dtype=gt.float64, device=device,
                     requires_grad=True)
    q = D.MultivariateNormal(gt.zeros(2, dtype=gt.float64, device=device),
                             gt.eye(2, dtype=gt.float64, device=device) * 2)

    def mvn_kl(loc, tril):
        return D.kl_divergence(D.MultivariateNormal(loc, scale_tril=tril.tril(),
                                                    validate_args=False), q)

    assert gt.autograd.gradcheck(mvn_kl, [loc, tril])
    scale = gt.tensor([1.0, 0.5], dtype=gt.float64, device=device, requires_grad=True)
    q_normal = D.Normal(gt.tensor([1.0, 0.0], dtype=gt.float64, device=device),
                        gt.tensor([2.0, 0.7], dtype=gt.float64, device=device))
    assert gt.autograd.gradcheck(
        lambda loc, scale: D.kl_divergence(D.Laplace(loc, scale), q_normal), [loc, scale])


def test_exponential_family_bregman_kl_matches_closed_form(device):
    # The generic ExponentialFamily pair, reached directly, equals the Normal closed form.
    p = _build("Normal", 0, D, device)
    q = _build("Normal", 1, D, device)
    generic = gkl._KL_REGISTRY[D.ExponentialFamily, D.ExponentialFamily](p, q)
    assert_close(generic, D.kl_divergence(p, q), atol=1e-10, rtol=1e-9)
    with pytest.raises(NotImplementedError, match="different exponential families"):
        gkl._KL_REGISTRY[D.ExponentialFamily, D.ExponentialFamily](
            p, _build("Exponential", 0, D, device))


def test_unregistered_pair_raises_torch_error():
    with pytest.raises(NotImplementedError) as want:
        T.kl_divergence(T.Cauchy(0.0, 1.0), T.Normal(0.0, 1.0))
    with pytest.raises(NotImplementedError) as got:
        D.kl_divergence(D.Cauchy(0.0, 1.0), D.Normal(0.0, 1.0))
    assert str(got.value) == str(want.value)
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Independent(D.Normal(gt.zeros(2, 2), gt.ones(2, 2)), 1),
                        D.Independent(D.Normal(gt.zeros(2, 2), gt.ones(2, 2)), 2))


def test_most_specific_match_and_ambiguity_warning():
    class P1(D.Normal):
        pass

    class P2(P1):
        pass

    class Q1(D.Normal):
        pass

    def base_pair(p, q):
        return "base"

    def left(p, q):
        return "left"

    def right(p, q):
        return "right"

    try:
        D.register_kl(P1, D.Normal)(base_pair)
        p2, q1 = P2(0.0, 1.0), Q1(0.0, 1.0)
        assert D.kl_divergence(p2, q1) == "base"  # (P1, Normal) beats (Normal, Normal)
        D.register_kl(P2, D.Normal)(left)
        D.register_kl(P1, Q1)(right)
        with pytest.warns(RuntimeWarning, match=r"Ambiguous kl_divergence\(P2, Q1\)"):
            assert D.kl_divergence(p2, q1) == "left"
        D.register_kl(P2, Q1)(right)  # registering the derived pair breaks the tie
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert D.kl_divergence(p2, q1) == "right"
    finally:
        for key in [(P1, D.Normal), (P2, D.Normal), (P1, Q1), (P2, Q1)]:
            gkl._KL_REGISTRY.pop(key, None)
        gkl._KL_MEMOIZE.clear()
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(int, D.Normal)


@pytest.mark.parametrize("name", ["Normal", "Exponential", "Bernoulli", "ContinuousBernoulli"])
def test_exponential_family_bregman_entropy_matches_closed_form(name, device):
    # (Bernoulli's natural parameter is infinite at probs 0, as in torch: keep it inside.)
    dist = (D.Bernoulli(to_gt(_t([0.2, 0.6]), device)) if name == "Bernoulli"
            else _build(name, 0, D, device))
    generic = D.ExponentialFamily.entropy(dist)
    assert generic.device == gt.device(device)
    assert_close(generic, dist.entropy(), atol=1e-10, rtol=1e-9)
