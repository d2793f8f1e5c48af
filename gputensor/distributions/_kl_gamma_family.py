"""Closed-form KL divergences that involve the gamma-family distributions (Gamma, Chi2 through
Gamma, Beta, Dirichlet, Poisson, Binomial), registered with kl_divergence: the pairs PyTorch
registers, infinite where p's support reaches outside q's."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions.bernoulli import Bernoulli
from gputensor.distributions.beta import Beta
from gputensor.distributions.binomial import Binomial
from gputensor.distributions.continuous_bernoulli import ContinuousBernoulli
from gputensor.distributions.dirichlet import Dirichlet
from gputensor.distributions.exponential import Exponential
from gputensor.distributions.gamma import Gamma
from gputensor.distributions.gumbel import Gumbel
from gputensor.distributions.kl import _infinite_like, _x_log_x, register_kl
from gputensor.distributions.laplace import Laplace
from gputensor.distributions.normal import Normal
from gputensor.distributions.pareto import Pareto
from gputensor.distributions.poisson import Poisson
from gputensor.distributions.uniform import Uniform
from gputensor.distributions.utils import euler_constant as _EULER_GAMMA

_INF = float("inf")


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    return (q.concentration * gt.log(p.rate / q.rate)
            + gt.lgamma(q.concentration) - gt.lgamma(p.concentration)
            + (p.concentration - q.concentration) * gt.digamma(p.concentration)
            + (q.rate - p.rate) * (p.concentration / p.rate))


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    p1, p0, q1, q0 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    sum_p, sum_q = p1 + p0, q1 + q0
    return (gt.lgamma(q1) + gt.lgamma(q0) + gt.lgamma(sum_p)
            - gt.lgamma(p1) - gt.lgamma(p0) - gt.lgamma(sum_q)
            + (p1 - q1) * gt.digamma(p1) + (p0 - q0) * gt.digamma(p0)
            + (sum_q - sum_p) * gt.digamma(sum_p))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    cp, cq = p.concentration, q.concentration
    sum_p = cp.sum(-1)
    log_norms = gt.lgamma(sum_p) - gt.lgamma(cq.sum(-1)) - (gt.lgamma(cp) - gt.lgamma(cq)).sum(-1)
    return log_norms + ((cp - cq) * (gt.digamma(cp) - gt.digamma(sum_p).unsqueeze(-1))).sum(-1)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    # -H(p) - E_p[log q(x)] with E_p[x] = 1 / rate and E_p[log x] = -gamma - log(rate)
    c, r, lam = q.concentration, q.rate, p.rate
    return (gt.log(lam) - 1 - c * gt.log(r) + (c - 1) * (_EULER_GAMMA + gt.log(lam))
            + r / lam + gt.lgamma(c))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - gt.log(q.rate) + q.rate * p.concentration / p.rate



@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return gt.where(p.total_count > q.total_count, _INF, kl)  # p reaches counts q can't


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - gt.log1p(-q.probs) - q._cont_bern_log_norm()


def _beta_mean(p):
    return p.concentration1 / (p.concentration1 + p.concentration0)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * _beta_mean(p)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    # E_p[log x] = digamma(a) - digamma(a + b)
    mean_log = p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    return (-p.entropy() + q.concentration.lgamma() - q.concentration * q.rate.log()
            - (q.concentration - 1) * mean_log + q.rate * _beta_mean(p))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean = _beta_mean(p)
    var_normal = q.scale.pow(2)
    second_moment = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + mean.pow(2)
    return (-p.entropy() + 0.5 * (var_normal * 2 * math.pi).log()
            + (0.5 * second_moment - q.loc * mean + 0.5 * q.loc.pow(2)) / var_normal)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound)
    return gt.where(outside, _INF, result)


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    c = p.concentration
    rate_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = (c - 1) * c.digamma() - c.lgamma() - c
    t2 = rate_scale.log() + c / rate_scale
    t3 = gt.exp(loc_scale) * (1 + rate_scale.reciprocal()).pow(-c) - loc_scale
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    c = p.concentration
    var_normal = q.scale.pow(2)
    rate_sq = p.rate.pow(2)
    t1 = 0.5 * gt.log(rate_sq * var_normal * 2 * math.pi) - c - c.lgamma()
    t2 = 0.5 * (c.pow(2) + c) / rate_sq
    t3 = q.loc * c / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (c - 1) * c.digamma() + (t2 - t3 + t4) / var_normal


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return gt.where(p.alpha <= 1, _INF, t1 + t2 + t3 + t4 - 1)  # infinite mean


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    t1 = gt.log(width)
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = ((q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width)
          / width)
    t4 = (q.concentration1.lgamma() + q.concentration0.lgamma()
          - (q.concentration1 + q.concentration0).lgamma())
    outside = (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound)
    return gt.where(outside, _INF, t3 + t4 - t1 - t2)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t4 = q.rate * (p.high + p.low) / 2
    return gt.where(p.low < q.support.lower_bound, _INF, -width.log() + t2 + t3 + t4)


def _infinite_kl(batch_param: str):
    """KL(p || q) = inf, in p's batch shape (read from p's ``batch_param``): p puts mass
    where q has none."""
    def kl(p, q):
        return _infinite_like(getattr(p, batch_param))
    return kl


for _p, _qs, _param in ((Beta, (Pareto,), "concentration1"),
                        (Exponential, (Beta,), "rate"),
                        (Gamma, (Beta, ContinuousBernoulli, Pareto, Uniform), "concentration"),
                        (Gumbel, (Beta, Gamma), "loc"),
                        (Laplace, (Beta, Gamma), "loc"),
                        (Normal, (Beta, Gamma), "loc"),
                        (Pareto, (Beta,), "scale"),
                        (Poisson, (Bernoulli, Binomial), "rate")):
    for _q in _qs:
        register_kl(_p, _q)(_infinite_kl(_param))
