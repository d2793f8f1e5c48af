"""Closed-form KL divergences between the distributions of this package (the gamma-family
ones live with those distributions). Each registers itself with ``register_kl``."""
from __future__ import annotations

import math

import gputensor as gt
from gputensor.distributions.bernoulli import Bernoulli
from gputensor.distributions.categorical import Categorical
from gputensor.distributions.cauchy import Cauchy
from gputensor.distributions.continuous_bernoulli import ContinuousBernoulli
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.exponential import Exponential
from gputensor.distributions.geometric import Geometric
from gputensor.distributions.gumbel import Gumbel
from gputensor.distributions.half_normal import HalfNormal
from gputensor.distributions.independent import Independent
from gputensor.distributions.kl import (
    _batch_trace_XXT,
    _infinite_like,
    _x_log_x,
    kl_divergence,
    register_kl,
)
from gputensor.distributions.laplace import Laplace
from gputensor.distributions.lowrank_multivariate_normal import (
    LowRankMultivariateNormal,
    _batch_lowrank_logdet,
    _batch_lowrank_mahalanobis,
)
from gputensor.distributions.multivariate_normal import MultivariateNormal, _batch_mahalanobis
from gputensor.distributions.normal import Normal
from gputensor.distributions.one_hot_categorical import OneHotCategorical
from gputensor.distributions.pareto import Pareto
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.uniform import Uniform
from gputensor.distributions.utils import _sum_rightmost, euler_constant
from gputensor.nn.functional import softplus

_LOG_2PI = math.log(2 * math.pi)


def _set_where(mask, values, fill: float):
    """``values`` with ``fill`` where ``mask`` holds (an out-of-place masked fill)."""
    return gt.where(mask, gt.full_like(values, fill), values)


# Same family.

@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _set_where(p.probs == 0, _set_where(q.probs == 0, t1, math.inf), 0.0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _set_where(p.probs == 1, _set_where(q.probs == 1, t2, math.inf), 0.0)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _set_where((q.probs == 0).expand_as(t), t, math.inf)
    t = _set_where((p.probs == 0).expand_as(t), t, 0.0)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + gt.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - gt.log1p(-q.probs)
    return t1 + t2 + t3


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """Bregman divergence of the log normaliser between the natural parameters."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences")
    p_params = [param.detach().requires_grad_() for param in p._natural_params]
    q_params = q._natural_params
    p_log_norm = p._log_normalizer(*p_params)
    grads = gt.autograd.grad(p_log_norm.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - p_log_norm
    for p_param, q_param, grad in zip(p_params, q_params, grads, strict=True):
        result = result - _sum_rightmost((q_param - p_param) * grad, len(q.event_shape))
    return result


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * euler_constant
    t3 = gt.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - gt.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return (-scale_ratio.log() + loc_abs_diff / q.scale
            + scale_ratio * gt.exp(-loc_abs_diff / p.scale) - 1)


def _check_event_shapes(p, q, what: str) -> None:
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {what} with different event shapes "
                         "cannot be computed")


def _lowrank_q_solve(q):
    """A = L_C^-1 W_q^T D_q^-1, so that Sigma_q^-1 = D_q^-1 - A^T A (Woodbury)."""
    qwt_qdinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return gt.linalg.solve_triangular(q._capacitance_tril, qwt_qdinv, upper=False)


def _lowrank_logdet(d):
    return _batch_lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag,
                                 d._capacitance_tril)


def _lowrank_mahalanobis(q, diff):
    return _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor,
                                      q._unbroadcasted_cov_diag, diff, q._capacitance_tril)


def _tril_logdet(d):
    return 2 * d._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


# KL(N_p || N_q) = 0.5 (log det S_q - log det S_p + tr(S_q^-1 S_p) + m^T S_q^-1 m - n);
# the pairs below differ in how they compute each term from their factorisations.

@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event_shapes(p, q, "Low Rank Multivariate Normals")
    term1 = _lowrank_logdet(q) - _lowrank_logdet(p)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    a = _lowrank_q_solve(q)
    term21 = (p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
    term22 = _batch_trace_XXT(p._unbroadcasted_cov_factor
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(a * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(a.matmul(p._unbroadcasted_cov_factor))
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event_shapes(p, q, "(Low Rank) Multivariate Normals")
    term1 = _lowrank_logdet(q) - _tril_logdet(p)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    a = _lowrank_q_solve(q)
    term21 = _batch_trace_XXT(p._unbroadcasted_scale_tril
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(a.matmul(p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    _check_event_shapes(p, q, "(Low Rank) Multivariate Normals")
    term1 = _tril_logdet(q) - _lowrank_logdet(p)
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    batch = gt.broadcast_shapes(q._unbroadcasted_scale_tril.shape[:-2],
                                p._unbroadcasted_cov_factor.shape[:-2])
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_cov_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_diag_sqrt = gt.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term21 = _batch_trace_XXT(gt.linalg.solve_triangular(q_scale_tril, p_cov_factor,
                                                         upper=False))
    term22 = _batch_trace_XXT(gt.linalg.solve_triangular(q_scale_tril, p_diag_sqrt,
                                                         upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    _check_event_shapes(p, q, "Multivariate Normals")
    half_term1 = 0.5 * (_tril_logdet(q) - _tril_logdet(p))
    batch = gt.broadcast_shapes(q._unbroadcasted_scale_tril.shape[:-2],
                                p._unbroadcasted_scale_tril.shape[:-2])
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(batch + (n, n))
    term2 = _batch_trace_XXT(gt.linalg.solve_triangular(q_scale_tril, p_scale_tril,
                                                        upper=False))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _set_where(p.support.lower_bound < q.support.lower_bound, result, math.inf)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions needs equal transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError(
            "KL between TransformedDistributions needs equal event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _set_where((q.low > p.low) | (q.high < p.high), result, math.inf)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "KL between Independent distributions needs equal reinterpreted_batch_ndims")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


# Different families; pairs whose supports do not nest are infinite.

@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p, q):
    return _infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - gt.log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (_LOG_2PI + gt.square(q.loc / q.scale)) + gt.log(q.scale)
    t3 = (p.variance + gt.square(p.mean) - 2.0 * q.loc * p.mean) / (2.0 * gt.square(q.scale))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    outside = gt.ge(q.low, p.support.lower_bound) | gt.le(q.high, p.support.upper_bound)
    return _set_where(outside, result, math.inf)


@register_kl(Exponential, ContinuousBernoulli)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = gt.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    return t1 - loc_scale_ratio + t2 + scale_rate_prod.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * gt.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * euler_constant - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (euler_constant + 1)


@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * gt.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, ContinuousBernoulli)
@register_kl(Normal, Exponential)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = gt.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + _LOG_2PI))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = gt.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * gt.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * gt.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    return _set_where(p.alpha <= 1, t1 - t2 + t3 - 1, math.inf)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return _set_where(p.alpha <= 2, t1 - t2 + (t3 + t4) / var_normal - 1, math.inf)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - gt.log1p(-q.probs) - q._cont_bern_log_norm()
    outside = gt.ge(p.high, q.support.upper_bound) | gt.le(p.low, q.support.lower_bound)
    return _set_where(outside, result, math.inf)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _set_where(p.low < q.support.lower_bound, result, math.inf)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (gt.exp(-high_loc_diff) - gt.exp(-low_loc_diff))
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    result = t2 * (q.alpha + 1) - t1
    return _set_where(p.low < q.support.lower_bound, result, math.inf)
