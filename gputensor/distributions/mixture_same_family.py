"""MixtureSameFamily: a mixture whose components are the batch of one distribution."""
from __future__ import annotations

import gputensor as gt
from gputensor.distributions import constraints
from gputensor.distributions.categorical import Categorical
from gputensor.distributions.distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """Mixture of the rightmost batch dim of ``component_distribution`` with weights from
    ``mixture_distribution`` (a Categorical over that dim)."""

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical,
                 component_distribution: Distribution,
                 validate_args: bool | None = None) -> None:
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of "
                             "gputensor.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of "
                             "gputensor.distributions.Distribution")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        mdbs = mixture_distribution.batch_shape
        cdbs = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs), strict=False):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not "
                                 f"compatible with `component_distribution.batch_shape`({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=cdbs, event_shape=event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = gt.Size(batch_shape)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(
            batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, batch_shape=batch_shape,
                              event_shape=new._component_distribution.event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self) -> Categorical:
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        return self._component_distribution

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return gt.sum(probs * self.component_distribution.mean, dim=-1 - self._event_ndims)

    @property
    def variance(self):
        # Law of total variance: E[Var(X | k)] + Var(E[X | k]).
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        component_dim = -1 - self._event_ndims
        mean_cond_var = gt.sum(probs * self.component_distribution.variance, dim=component_dim)
        var_cond_mean = gt.sum(
            probs * (self.component_distribution.mean - self._pad(self.mean)).pow(2.0),
            dim=component_dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        cdf_x = self.component_distribution.cdf(self._pad(x))
        return gt.sum(cdf_x * self.mixture_distribution.probs, dim=-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self.component_distribution.log_prob(self._pad(x))  # [S, B, k]
        log_mix_prob = gt.log_softmax(self.mixture_distribution.logits, dim=-1)  # [B, k]
        return gt.logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def sample(self, sample_shape=()):
        with gt.no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)
            es = self.event_shape
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = mix_sample.shape
            comp_samples = self.component_distribution.sample(sample_shape)
            # Index the component dim of every sample with its drawn component.
            index = mix_sample.reshape(mix_shape + gt.Size([1] * (len(es) + 1)))
            index = index.repeat(gt.Size([1] * len(mix_shape)) + gt.Size([1]) + es)
            return gt.gather(comp_samples, gather_dim, index).squeeze(gather_dim)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = x.shape
        return x.reshape(xs[:-1] + gt.Size(pad_ndims * [1]) + xs[-1:]
                         + gt.Size(self._event_ndims * [1]))

    def __repr__(self) -> str:
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},\n  "
                f"{self.component_distribution})")
