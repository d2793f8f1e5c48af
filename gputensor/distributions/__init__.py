"""gputensor.distributions: probability distributions with PyTorch's API (torch.distributions).

The framework (Distribution, constraints, transforms, biject_to, kl_divergence) and the
distributions on top of it; every sampler runs on the device of its parameters.
"""
from gputensor.distributions import (
    _kl_gamma_family,  # noqa: E402, F401 (registers KLs)
    _kl_pairs,  # noqa: F401  (registers the KL closed forms)
    constraints,  # noqa: F401  (a public submodule, as in torch.distributions)
    transforms,
)
from gputensor.distributions.bernoulli import Bernoulli
from gputensor.distributions.beta import Beta
from gputensor.distributions.binomial import Binomial
from gputensor.distributions.categorical import Categorical
from gputensor.distributions.cauchy import Cauchy
from gputensor.distributions.chi2 import Chi2
from gputensor.distributions.constraint_registry import biject_to, transform_to
from gputensor.distributions.continuous_bernoulli import ContinuousBernoulli
from gputensor.distributions.dirichlet import Dirichlet
from gputensor.distributions.distribution import Distribution
from gputensor.distributions.exp_family import ExponentialFamily
from gputensor.distributions.exponential import Exponential
from gputensor.distributions.fishersnedecor import FisherSnedecor
from gputensor.distributions.gamma import Gamma
from gputensor.distributions.generalized_pareto import GeneralizedPareto
from gputensor.distributions.geometric import Geometric
from gputensor.distributions.gumbel import Gumbel
from gputensor.distributions.half_cauchy import HalfCauchy
from gputensor.distributions.half_normal import HalfNormal
from gputensor.distributions.independent import Independent
from gputensor.distributions.inverse_gamma import InverseGamma
from gputensor.distributions.kl import kl_divergence, register_kl
from gputensor.distributions.kumaraswamy import Kumaraswamy
from gputensor.distributions.laplace import Laplace
from gputensor.distributions.lkj_cholesky import LKJCholesky
from gputensor.distributions.log_normal import LogNormal
from gputensor.distributions.logistic_normal import LogisticNormal
from gputensor.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from gputensor.distributions.mixture_same_family import MixtureSameFamily
from gputensor.distributions.multinomial import Multinomial
from gputensor.distributions.multivariate_normal import MultivariateNormal
from gputensor.distributions.negative_binomial import NegativeBinomial
from gputensor.distributions.normal import Normal
from gputensor.distributions.one_hot_categorical import (
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
)
from gputensor.distributions.pareto import Pareto
from gputensor.distributions.poisson import Poisson
from gputensor.distributions.relaxed_bernoulli import RelaxedBernoulli
from gputensor.distributions.relaxed_categorical import RelaxedOneHotCategorical
from gputensor.distributions.studentT import StudentT
from gputensor.distributions.transformed_distribution import TransformedDistribution
from gputensor.distributions.transforms import *  # noqa: F403
from gputensor.distributions.uniform import Uniform
from gputensor.distributions.von_mises import VonMises
from gputensor.distributions.weibull import Weibull
from gputensor.distributions.wishart import Wishart

__all__ = [
    "Beta", "Binomial", "Chi2", "Dirichlet", "FisherSnedecor", "Gamma", "InverseGamma",
    "Kumaraswamy", "LKJCholesky", "Multinomial", "NegativeBinomial", "Poisson", "StudentT",
    "VonMises", "Wishart",
    "Bernoulli", "Categorical", "Cauchy", "ContinuousBernoulli", "Distribution",
    "Exponential", "ExponentialFamily", "GeneralizedPareto",
    "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "Laplace",
    "LogNormal", "LogisticNormal", "LowRankMultivariateNormal",
    "MixtureSameFamily", "MultivariateNormal", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "TransformedDistribution", "Uniform", "Weibull",
    "biject_to", "kl_divergence", "register_kl", "transform_to",
]
__all__.extend(transforms.__all__)
