"""gputensor.nn.init: gains, fan rules, value statistics, deterministic fills and seeding."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.nn import init

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().cpu().numpy()


def test_calculate_gain_matches_torch():
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        assert init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    for slope in (0, 0.2, 3, math.sqrt(5)):
        assert init.calculate_gain("leaky_relu", slope) == \
            torch.nn.init.calculate_gain("leaky_relu", slope)
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_fan_rules_match_torch():
    for shape in [(3, 5), (4, 2, 3), (8, 4, 3, 3), (2, 3, 1, 2, 2)]:
        assert init._calculate_fan_in_and_fan_out(gt.empty(shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(gt.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(gt.empty(3, 3), mode="fan_avg")


@pytest.mark.parametrize("shape", [(256, 512), (64, 32, 3, 3)])
def test_scheme_statistics(device, shape):
    gt.manual_seed(0)
    t = gt.empty(shape, device=device)
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
    checks = [
        (lambda: init.xavier_uniform_(t, gain=2.0),
         2.0 * math.sqrt(6.0 / (fan_in + fan_out)), "uniform"),
        (lambda: init.xavier_normal_(t, gain=0.5),
         0.5 * math.sqrt(2.0 / (fan_in + fan_out)), "normal"),
        (lambda: init.kaiming_uniform_(t, a=0.1, nonlinearity="leaky_relu"),
         math.sqrt(3.0) * math.sqrt(2.0 / (1 + 0.01)) / math.sqrt(fan_in), "uniform"),
        (lambda: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"),
         math.sqrt(3.0) * math.sqrt(2.0) / math.sqrt(fan_out), "uniform"),
        (lambda: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
         math.sqrt(2.0) / math.sqrt(fan_out), "normal"),
        (lambda: init.uniform_(t, -0.3, 0.7), None, "range"),
        (lambda: init.normal_(t, 1.5, 0.25), 0.25, "normal_mean"),
    ]
    for fill, scale, kind in checks:
        assert fill() is t
        v = _np(t)
        if kind == "uniform":  # U(-b, b): max |v| just under b, std b / sqrt(3)
            assert np.abs(v).max() <= scale and np.abs(v).max() > 0.99 * scale
            assert abs(v.std() - scale / math.sqrt(3)) < 0.03 * scale
        elif kind == "normal":
            assert abs(v.mean()) < 0.03 * scale and abs(v.std() - scale) < 0.03 * scale
        elif kind == "normal_mean":
            assert abs(v.mean() - 1.5) < 0.02 and abs(v.std() - scale) < 0.03 * scale
        else:
            assert v.min() >= -0.3 and v.max() < 0.7 and abs(v.mean() - 0.2) < 0.01


def test_kaiming_zero_element_warns():
    t = gt.empty(0, 3)
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        assert init.kaiming_uniform_(t) is t
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        init.kaiming_normal_(t)


def test_constant_fills_match_torch(device):
    t = gt.empty(3, 4, device=device)
    assert init.constant_(t, 2.5) is t and (_np(t) == 2.5).all()
    assert (_np(init.ones_(t)) == 1).all() and (_np(init.zeros_(t)) == 0).all()
    for shape in [(3, 3), (2, 5), (5, 2)]:
        np.testing.assert_array_equal(_np(init.eye_(gt.empty(shape, device=device))),
                                      torch.nn.init.eye_(torch.empty(shape)).numpy())
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.eye_(gt.empty(2, 2, 2, device=device))


@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 2, 3, 3), 2), ((4, 6, 1, 3, 5), 1),
                                          ((8, 2, 3, 3), 4)])
def test_dirac_matches_torch(shape, groups):
    g = init.dirac_(gt.full(shape, 7.0), groups)
    t = torch.nn.init.dirac_(torch.full(shape, 7.0), groups)
    np.testing.assert_array_equal(_np(g), t.numpy())


def test_dirac_errors():
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        init.dirac_(gt.empty(3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(gt.empty(5, 2, 3), groups=2)


def test_trunc_normal_bounds_and_moments():
    from scipy.stats import truncnorm

    gt.manual_seed(3)
    t = gt.empty(200, 300)
    mean, std, a, b = 0.5, 2.0, -1.0, 3.0
    assert init.trunc_normal_(t, mean, std, a, b) is t
    v = _np(t)
    assert v.min() >= a and v.max() <= b
    dist = truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
    assert abs(v.mean() - dist.mean()) < 0.02 and abs(v.std() - dist.std()) < 0.02
    half = init.trunc_normal_(gt.empty(1000, dtype=gt.float16), std=0.02)
    assert half.dtype is gt.float16 and abs(_np(half).astype(np.float32).std() - 0.02) < 0.003
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        init.trunc_normal_(gt.empty(10), mean=10.0)


@pytest.mark.parametrize("shape", [(20, 10), (10, 20), (6, 4, 3, 3), (5, 5)])
def test_orthogonal(device, shape):
    t = init.orthogonal_(gt.empty(shape, dtype=gt.float64, device=device), gain=2.0)
    flat = _np(t).reshape(shape[0], -1)
    rows, cols = flat.shape
    gram = flat.T @ flat if rows >= cols else flat @ flat.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(rows, cols)), atol=1e-10)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(gt.empty(3, device=device))
    assert init.orthogonal_(gt.empty(0, 3, device=device)).shape == (0, 3)


def test_sparse():
    gt.manual_seed(0)
    t = init.sparse_(gt.empty(10, 40), sparsity=0.3, std=0.5)
    v = _np(t)
    zeros_per_col = (v == 0).sum(axis=0)
    assert (zeros_per_col == 3).all()
    assert abs(v[v != 0].std() - 0.5) < 0.1
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.sparse_(gt.empty(3), 0.1)


FILLS = [
    lambda t, g: init.uniform_(t, -1, 1, generator=g),
    lambda t, g: init.normal_(t, 0, 1, generator=g),
    lambda t, g: init.xavier_uniform_(t, generator=g),
    lambda t, g: init.xavier_normal_(t, generator=g),
    lambda t, g: init.kaiming_uniform_(t, generator=g),
    lambda t, g: init.kaiming_normal_(t, generator=g),
    lambda t, g: init.trunc_normal_(t, generator=g),
    lambda t, g: init.orthogonal_(t, generator=g),
    lambda t, g: init.sparse_(t, 0.5, generator=g),
]


@pytest.mark.parametrize("fill", FILLS)
def test_seeded_reproducibility(fill):
    a = _np(fill(gt.empty(8, 6), gt.Generator().manual_seed(42))).copy()
    b = _np(fill(gt.empty(8, 6), gt.Generator().manual_seed(42))).copy()
    c = _np(fill(gt.empty(8, 6), gt.Generator().manual_seed(7))).copy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    gt.manual_seed(5)
    d = _np(fill(gt.empty(8, 6), None)).copy()
    gt.manual_seed(5)
    np.testing.assert_array_equal(_np(fill(gt.empty(8, 6), None)), d)


def test_init_on_parameters_records_no_graph():
    p = nn.Parameter(gt.empty(4, 4))
    for fn in (init.xavier_uniform_, init.kaiming_normal_, init.orthogonal_, init.trunc_normal_,
               init.zeros_, init.eye_):
        out = fn(p)
        assert out is p and p.grad_fn is None and p.requires_grad and p.is_leaf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        init.dirac_(nn.Parameter(gt.empty(2, 2, 3)))
