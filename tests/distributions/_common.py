"""Shared helpers for the distribution tests: the same parameters in gputensor and PyTorch,
and comparisons of every statistic both libraries implement."""
from __future__ import annotations

import numpy as np
import torch

import gputensor as gt
from tests.helpers import assert_close

STATISTICS = ("mean", "mode", "variance", "stddev")


def params_pair(params: dict, device: str, dtype=np.float32, requires_grad=False):
    """Parameters as (gputensor kwargs on ``device``, torch kwargs); numbers stay numbers."""
    g_kwargs, t_kwargs = {}, {}
    for name, value in params.items():
        if isinstance(value, (int, float)) or value is None:
            g_kwargs[name] = t_kwargs[name] = value
            continue
        arr = np.asarray(value, dtype=dtype)
        g_kwargs[name] = gt.tensor(arr, device=device, requires_grad=requires_grad)
        t_kwargs[name] = torch.tensor(arr, requires_grad=requires_grad)
    return g_kwargs, t_kwargs


def to_gt(t: torch.Tensor, device: str) -> gt.Tensor:
    return gt.tensor(t.detach().numpy(), device=device)


def _call(fn):
    """(result, None) or (None, exception type) when the method is not implemented."""
    try:
        return fn(), None
    except NotImplementedError as exc:
        return None, type(exc)


def assert_same_statistics(g_dist, t_dist, atol=1e-5, rtol=1e-5) -> None:
    """mean/mode/variance/stddev/entropy agree, or both raise NotImplementedError."""
    for name in STATISTICS:
        expected, t_err = _call(lambda n=name: getattr(t_dist, n))
        actual, g_err = _call(lambda n=name: getattr(g_dist, n))
        assert g_err == t_err, f"{name}: gputensor raised {g_err}, torch {t_err}"
        if t_err is None:
            assert_close(actual, expected, atol=atol, rtol=rtol)
    expected, t_err = _call(t_dist.entropy)
    actual, g_err = _call(g_dist.entropy)
    assert g_err == t_err, f"entropy: gputensor raised {g_err}, torch {t_err}"
    if t_err is None:
        assert_close(actual, expected, atol=atol, rtol=rtol)


def assert_same_scores(g_dist, t_dist, t_values, device, atol=1e-5, rtol=1e-5) -> None:
    """log_prob and cdf at ``t_values`` agree, or both raise NotImplementedError."""
    g_values = to_gt(t_values, device)
    for name in ("log_prob", "cdf"):
        expected, t_err = _call(lambda n=name: getattr(t_dist, n)(t_values))
        actual, g_err = _call(lambda n=name: getattr(g_dist, n)(g_values))
        assert g_err == t_err, f"{name}: gputensor raised {g_err}, torch {t_err}"
        if t_err is None:
            assert actual.device == gt.device(device)
            assert_close(actual, expected, atol=atol, rtol=rtol)


def assert_same_shapes(g_dist, t_dist) -> None:
    assert tuple(g_dist.batch_shape) == tuple(t_dist.batch_shape)
    assert tuple(g_dist.event_shape) == tuple(t_dist.event_shape)
    assert g_dist.has_rsample == t_dist.has_rsample
    assert g_dist.has_enumerate_support == t_dist.has_enumerate_support
    for shape in ((), (3,), (2, 1)):
        sample = g_dist.sample(shape)
        assert tuple(sample.shape) == tuple(t_dist.sample(shape).shape)
        if g_dist.has_rsample:
            assert tuple(g_dist.rsample(shape).shape) == tuple(sample.shape)


def assert_moments(samples: gt.Tensor, mean, variance, n_se: float = 5.0) -> None:
    """Sample mean within ``n_se`` standard errors of ``mean`` (along dim 0), and the sample
    variance within ``n_se`` standard errors of ``variance`` (its SE from the fourth moment of
    the samples themselves)."""
    x = samples.detach().cpu().double().numpy()
    n = x.shape[0]
    mean, variance = np.asarray(mean, np.float64), np.asarray(variance, np.float64)
    mean_se = np.sqrt(variance / n)
    assert np.all(np.abs(x.mean(0) - mean) <= n_se * mean_se + 1e-6), (x.mean(0), mean)
    centred = (x - x.mean(0)) ** 2
    var_se = np.sqrt(np.maximum(centred.var(0), 1e-12) / n)
    assert np.all(np.abs(centred.mean(0) - variance) <= n_se * var_se + 1e-6), \
        (centred.mean(0), variance)

