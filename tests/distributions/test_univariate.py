"""Scalar-event and categorical distributions against torch.distributions: statistics,
scores, shapes, expand, validation, sampling moments and gradients, on every device."""
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
    params_pair,
    to_gt,
)
from tests.helpers import assert_close

T = torch.distributions
# Not exported at the top level (as in PyTorch): reached through their modules.
_SUBMODULE = {"LogitRelaxedBernoulli": "relaxed_bernoulli",
              "ExpRelaxedCategorical": "relaxed_categorical"}


def cls(lib, name):
    return getattr(getattr(lib, _SUBMODULE[name]) if name in _SUBMODULE else lib, name)
TEMP = np.array(0.7)
PROBS3 = [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]

# name, parameters, parameters that fail validation (None: no checkable constraint)
CASES = [
    ("Normal", {"loc": [0.3, -1.2], "scale": [1.0, 0.5]},
     {"loc": [0.0, 0.0], "scale": [-1.0, 1.0]}),
    ("Exponential", {"rate": [0.5, 2.0]}, {"rate": [0.0, 1.0]}),
    ("Laplace", {"loc": [0.3, -1.2], "scale": [1.0, 0.5]}, {"loc": [0.0], "scale": [0.0]}),
    ("Cauchy", {"loc": [0.3, -1.2], "scale": [1.0, 0.5]}, {"loc": [0.0], "scale": [-2.0]}),
    ("Uniform", {"low": [0.0, -1.0], "high": [1.0, 2.5]}, {"low": [2.0, 0.0], "high": [1.0, 2.0]}),
    ("HalfNormal", {"scale": [1.0, 0.5]}, {"scale": [-1.0]}),
    ("HalfCauchy", {"scale": [1.0, 0.5]}, {"scale": [0.0]}),
    ("LogNormal", {"loc": [0.3, -1.2], "scale": [1.0, 0.5]}, {"loc": [0.0], "scale": [-1.0]}),
    ("Gumbel", {"loc": [0.3, -1.2], "scale": [1.0, 0.5]}, {"loc": [0.0], "scale": [-1.0]}),
    ("Weibull", {"scale": [1.0, 2.0], "concentration": [1.5, 3.0]},
     {"scale": [1.0], "concentration": [-1.0]}),
    ("Pareto", {"scale": [1.0, 2.0], "alpha": [2.5, 4.5]}, {"scale": [1.0], "alpha": [0.0]}),
    ("GeneralizedPareto", {"loc": [0.0, 1.0], "scale": [1.0, 2.0], "concentration": [0.2, -0.3]},
     {"loc": [0.0], "scale": [-1.0], "concentration": [0.1]}),
    ("Bernoulli", {"probs": [0.2, 0.7]}, {"probs": [1.5, 0.5]}),
    ("Bernoulli", {"logits": [-0.5, 1.5]}, None),
    ("Geometric", {"probs": [0.2, 0.7]}, {"probs": [-0.1, 0.5]}),
    ("ContinuousBernoulli", {"probs": [0.2, 0.5, 0.8]}, {"probs": [1.2]}),
    ("ContinuousBernoulli", {"logits": [-0.5, 0.001, 1.5]}, None),
    ("Categorical", {"probs": PROBS3}, {"probs": [[0.5, -0.5, 1.0]]}),
    ("Categorical", {"logits": [[0.1, -1.0, 2.0], [0.0, 0.0, 0.0]]}, None),
    ("OneHotCategorical", {"probs": PROBS3}, None),
    ("OneHotCategoricalStraightThrough", {"logits": [[0.1, -1.0, 2.0]]}, None),
    ("RelaxedBernoulli", {"temperature": TEMP, "probs": [0.2, 0.7]}, {"temperature": TEMP,
                                                                      "probs": [2.0]}),
    ("LogitRelaxedBernoulli", {"temperature": TEMP, "logits": [-0.5, 1.5]}, None),
    ("RelaxedOneHotCategorical", {"temperature": TEMP, "probs": PROBS3}, None),
    ("ExpRelaxedCategorical", {"temperature": TEMP, "logits": [[0.1, -1.0, 2.0]]}, None),
    ("LogisticNormal", {"loc": [[0.3, -1.2], [0.0, 0.5]], "scale": [[1.0, 0.5], [0.2, 1.0]]},
     {"loc": [0.0], "scale": [-1.0]}),
]
IDS = [f"{name}-{'-'.join(params)}" for name, params, _ in CASES]


def make(name, params, device, dtype=np.float32, requires_grad=False, validate_args=None):
    g_kwargs, t_kwargs = params_pair(params, device, dtype, requires_grad)
    extra = {} if validate_args is None else {"validate_args": validate_args}
    return cls(D, name)(**g_kwargs, **extra), cls(T, name)(**t_kwargs, **extra), g_kwargs


def torch_values(t_dist, n=4):
    torch.manual_seed(0)
    return t_dist.sample((n,))


@pytest.mark.parametrize(("name", "params", "invalid"), CASES, ids=IDS)
def test_statistics_and_scores_match_torch(name, params, invalid, device):
    g_dist, t_dist, _ = make(name, params, device)
    assert_same_statistics(g_dist, t_dist)
    assert_same_scores(g_dist, t_dist, torch_values(t_dist), device)
    u = torch.tensor([0.1, 0.6, 0.95])
    u = u.reshape((3,) + (1,) * len(t_dist.batch_shape))
    try:
        expected = t_dist.icdf(u)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            g_dist.icdf(to_gt(u, device))
    else:
        assert_close(g_dist.icdf(to_gt(u, device)), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("name", "params", "invalid"), CASES, ids=IDS)
def test_shapes_support_and_expand(name, params, invalid, device):
    g_dist, t_dist, _ = make(name, params, device)
    assert_same_shapes(g_dist, t_dist)
    assert g_dist.sample().device == gt.device(device)
    assert repr(g_dist.support) == repr(t_dist.support) or name in ("Uniform", "Pareto",
                                                                   "GeneralizedPareto")
    batch = (4,) + tuple(t_dist.batch_shape)
    g_big, t_big = g_dist.expand(batch), t_dist.expand(batch)
    assert type(g_big) is type(g_dist)
    assert tuple(g_big.batch_shape) == batch
    assert tuple(g_big.sample((2,)).shape) == tuple(t_big.sample((2,)).shape)
    assert_same_statistics(g_big, t_big)
    assert_same_scores(g_big, t_big, torch_values(t_big, 2), device)


@pytest.mark.parametrize(("name", "params", "invalid"),
                         [c for c in CASES if c[2] is not None],
                         ids=[i for i, c in zip(IDS, CASES, strict=True) if c[2] is not None])
def test_invalid_parameters_raise_torch_error(name, params, invalid, device):
    g_kwargs, t_kwargs = params_pair(invalid, device)
    with pytest.raises(ValueError) as want:
        cls(T, name)(**t_kwargs, validate_args=True)
    with pytest.raises(ValueError) as got:
        cls(D, name)(**g_kwargs, validate_args=True)
    if device == "cpu":
        assert str(got.value) == str(want.value).replace("torch.", "gputensor.")
    else:
        assert str(got.value).split(":")[0] == str(want.value).split(":")[0]
    try:  # turned off, nothing is checked (torch's exceptions kept)
        cls(T, name)(**t_kwargs, validate_args=False)
    except ValueError as exc:
        with pytest.raises(ValueError) as got_off:
            cls(D, name)(**g_kwargs, validate_args=False)
        assert str(got_off.value).split(":")[0] == str(exc).split(":")[0]
    else:
        cls(D, name)(**g_kwargs, validate_args=False)


@pytest.mark.parametrize(("name", "params"), [
    ("Normal", {"loc": [0.0], "scale": [1.0]}),
    ("Exponential", {"rate": [1.0]}),
    ("Bernoulli", {"probs": [0.3]}),
    ("Categorical", {"probs": [[0.3, 0.7]]}),
    ("Pareto", {"scale": [1.0], "alpha": [2.0]}),
])
def test_values_outside_support_raise_torch_error(name, params):
    g_dist, t_dist, _ = make(name, params, "cpu", validate_args=True)
    bad = torch.tensor({"Categorical": [0.5], "Normal": [float("nan")]}.get(name, [-1.0]))
    with pytest.raises(ValueError) as want:
        t_dist.log_prob(bad)
    with pytest.raises(ValueError) as got:
        g_dist.log_prob(to_gt(bad, "cpu"))
    assert str(got.value) == str(want.value).replace("torch.", "gputensor.")


@pytest.mark.parametrize(("name", "params", "shape"), [
    ("Normal", {"loc": [0.0, 1.0], "scale": [1.0, 1.0]}, (3,)),
    ("OneHotCategorical", {"probs": [[0.3, 0.7]]}, (1, 3)),
])
def test_value_shape_errors_match_torch(name, params, shape):
    g_dist, t_dist, _ = make(name, params, "cpu", validate_args=True)
    with pytest.raises(ValueError) as want:
        t_dist.log_prob(torch.zeros(shape))
    with pytest.raises(ValueError) as got:
        g_dist.log_prob(gt.zeros(shape))
    assert str(got.value) == str(want.value).replace("torch.", "gputensor.")


def test_validation_default_follows_set_default_validate_args():
    bad = {"loc": gt.tensor([0.0]), "scale": gt.tensor([-1.0])}
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(**bad)  # accepted
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="GreaterThan"):
        D.Normal(**bad)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_number_parameters_give_scalar_default_dtype_distributions():
    d = D.Normal(0.0, 2.0)
    assert tuple(d.batch_shape) == () and d.loc.dtype == gt.get_default_dtype()
    assert_close(d.log_prob(gt.tensor(1.0)), T.Normal(0.0, 2.0).log_prob(torch.tensor(1.0)))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Bernoulli(probs=0.3, logits=0.1)
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Categorical(probs=gt.tensor(1.0))


MOMENT_CASES = [c for c in CASES if c[0] not in (
    "Cauchy", "HalfCauchy", "LogitRelaxedBernoulli", "ExpRelaxedCategorical",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "LogisticNormal", "Categorical")]


@pytest.mark.parametrize(("name", "params", "invalid"), MOMENT_CASES,
                         ids=[f"{c[0]}-{'-'.join(c[1])}" for c in MOMENT_CASES])
def test_sample_moments(name, params, invalid, device):
    g_dist, t_dist, _ = make(name, params, device, dtype=np.float64)
    gt.manual_seed(1234)
    samples = g_dist.sample((20000,))
    assert samples.device == gt.device(device)
    assert bool(g_dist.support.check(samples).all())
    assert_moments(samples, t_dist.mean.numpy(), t_dist.variance.numpy())


def test_categorical_sample_frequencies(device):
    probs = np.array(PROBS3)
    g_dist = D.Categorical(gt.tensor(probs, device=device))
    gt.manual_seed(7)
    samples = g_dist.sample((20000,))
    assert samples.dtype == gt.int64
    one_hot = np.eye(3)[samples.cpu().numpy()]
    assert_moments(gt.tensor(one_hot), probs, probs * (1 - probs))


def test_relaxed_samples_approach_one_hot_at_low_temperature(device):
    probs = gt.tensor(PROBS3, dtype=gt.float64, device=device)
    gt.manual_seed(3)
    temperature = gt.tensor(0.05, dtype=gt.float64, device=device)
    x = D.RelaxedOneHotCategorical(temperature, probs).sample((4000,))
    assert bool(D.constraints.simplex.check(x).all())
    counts = (x.max(-1)[0] > 0.9).double().mean()
    assert counts.item() > 0.9
    assert_moments(gt.nn.functional.one_hot(x.argmax(-1), 3).double(), PROBS3,
                   np.array(PROBS3) * (1 - np.array(PROBS3)), n_se=6)


GRAD_CASES = [c for c in CASES if c[0] in (
    "Normal", "Exponential", "Laplace", "Cauchy", "Uniform", "HalfNormal", "LogNormal",
    "Gumbel", "Weibull", "Pareto", "GeneralizedPareto", "ContinuousBernoulli",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "LogisticNormal", "Bernoulli",
    "Geometric", "Categorical")]


def _float_params(g_kwargs):
    return [name for name, v in g_kwargs.items() if isinstance(v, gt.Tensor)
            and name != "temperature"]


@pytest.mark.parametrize(("name", "params", "invalid"), GRAD_CASES,
                         ids=[f"{c[0]}-{'-'.join(c[1])}" for c in GRAD_CASES])
def test_log_prob_and_rsample_gradcheck(name, params, invalid, device):
    g_dist, t_dist, g_kwargs = make(name, params, device, dtype=np.float64)
    names = _float_params(g_kwargs)
    values = to_gt(torch_values(t_dist), device)
    leaves = [g_kwargs[n].detach().requires_grad_() for n in names]

    def build(*tensors):
        return cls(D, name)(**{**g_kwargs, **dict(zip(names, tensors, strict=True))})

    assert gt.autograd.gradcheck(lambda *p: build(*p).log_prob(values), leaves, atol=1e-5)
    if g_dist.has_rsample:
        def draw(*p):
            gt.manual_seed(0)
            return build(*p).rsample((3,))
        assert gt.autograd.gradcheck(draw, leaves, atol=1e-5)


def test_log_prob_gradients_match_torch(device):
    g_kwargs, t_kwargs = params_pair({"loc": [0.3, -1.2], "scale": [1.0, 0.5]}, device,
                                     requires_grad=True)
    x = [0.4, 2.0]
    D.Normal(**g_kwargs).log_prob(gt.tensor(x, device=device)).sum().backward()
    T.Normal(**t_kwargs).log_prob(torch.tensor(x)).sum().backward()
    for name in g_kwargs:
        assert_close(g_kwargs[name].grad, t_kwargs[name].grad)


def test_straight_through_gradient_matches_torch(device):
    g_kwargs, t_kwargs = params_pair({"probs": PROBS3}, device, requires_grad=True)
    sample = D.OneHotCategoricalStraightThrough(**g_kwargs).rsample()
    assert bool(D.constraints.one_hot.check(sample.detach()).all())
    (sample * gt.arange(3.0, device=device)).sum().backward()
    t_sample = T.OneHotCategoricalStraightThrough(**t_kwargs).rsample()
    (t_sample * torch.arange(3.0)).sum().backward()
    assert_close(g_kwargs["probs"].grad, t_kwargs["probs"].grad)


@pytest.mark.parametrize("name", ["Bernoulli", "Categorical", "OneHotCategorical"])
def test_enumerate_support(name, device):
    params = {"probs": PROBS3 if name != "Bernoulli" else [0.2, 0.7]}
    g_dist, t_dist, _ = make(name, params, device)
    for expand in (True, False):
        got = g_dist.enumerate_support(expand)
        assert got.device == gt.device(device)
        assert_close(got, t_dist.enumerate_support(expand))


def test_perplexity_and_sample_n(device):
    g_dist, t_dist, _ = make("Categorical", {"probs": PROBS3}, device)
    assert_close(g_dist.perplexity(), t_dist.perplexity())
    with pytest.warns(FutureWarning):
        assert tuple(g_dist.sample_n(5).shape) == (5, 2)
