"""The gamma-family samplers (gt._standard_gamma, gt._sample_dirichlet, gt.binomial, gt.poisson)
and the reparameterisation gradients (gt._standard_gamma_grad, gt._dirichlet_grad), on cpu and
emulated cuda.

Samples are checked statistically with fixed seeds: means within 5 standard errors, variances
within 5 standard errors of the sample variance, and Kolmogorov-Smirnov distances below the
p = 1e-4 critical value for the sample size. Gradients are checked against the exact
implicit-reparameterisation derivative (mpmath, 30 digits) to 1e-10 and against PyTorch, whose
kernels use fitted approximations with about 1e-3 relative error, to 5e-3.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch
from scipy import stats

import gputensor as gt

N = 20000
KS_CRIT = 1.95 / math.sqrt(N)  # Kolmogorov distribution, p = 1e-4


def _gen(device: str, seed: int = 1234) -> gt.Generator:
    return gt.Generator(device=device).manual_seed(seed)


def _check_moments(samples: np.ndarray, dist: object) -> None:
    """Sample mean and variance against a scipy distribution's, within 5 standard errors."""
    mean, var, kurt = (float(v) for v in dist.stats(moments="mvk"))
    n = samples.size
    assert abs(samples.mean() - mean) < 5 * math.sqrt(var / n), (samples.mean(), mean)
    mu4 = (kurt + 3.0) * var * var  # the variance of the sample variance is (mu4 - var^2) / n
    assert abs(samples.var() - var) < 5 * math.sqrt((mu4 - var * var) / n), (samples.var(), var)


# -- _standard_gamma ---------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.05, 0.7, 1.0, 4.5, 300.0])
def test_standard_gamma_matches_the_gamma_distribution(device, alpha):
    a = gt.full((N,), alpha, dtype=gt.float64, device=device)
    s = gt._standard_gamma(a, generator=_gen(device))
    assert s.device == a.device and s.dtype is gt.float64 and s.shape == (N,)
    x = s.cpu().numpy()
    _check_moments(x, stats.gamma(alpha))
    assert stats.kstest(x, stats.gamma(alpha).cdf).statistic < KS_CRIT


def test_standard_gamma_float32_broadcast_parameters_and_tiny_floor(device):
    a = gt.tensor([[0.5, 2.0], [1e-3, 8.0]], device=device).expand(3, 2, 2)
    s = gt._standard_gamma(a, generator=_gen(device))
    assert s.dtype is gt.float32 and s.shape == (3, 2, 2)
    assert (s > 0).all().item()
    # alpha <= 0 or NaN gives the smallest normal float, as PyTorch does
    edge = gt._standard_gamma(gt.tensor([-1.0, 0.0, float("nan")], device=device))
    ref = torch._standard_gamma(torch.tensor([-1.0, 0.0, float("nan")]))
    np.testing.assert_array_equal(edge.cpu().numpy(), ref.numpy())


def test_standard_gamma_seeds_generators_and_devices(device):
    a = gt.tensor([0.3, 1.0, 5.0, 50.0] * 8, dtype=gt.float64, device=device)
    s1 = gt._standard_gamma(a, generator=_gen(device, 7))
    s2 = gt._standard_gamma(a, generator=_gen(device, 7))
    s3 = gt._standard_gamma(a, generator=_gen(device, 8))
    np.testing.assert_array_equal(s1.cpu().numpy(), s2.cpu().numpy())
    assert not np.array_equal(s1.cpu().numpy(), s3.cpu().numpy())
    gt.manual_seed(5)
    d1 = gt._standard_gamma(a)
    gt.manual_seed(5)
    np.testing.assert_array_equal(d1.cpu().numpy(), gt._standard_gamma(a).cpu().numpy())
    # the same seed gives the same samples on every device (one stream per element)
    on_cpu = gt._standard_gamma(a.cpu(), generator=_gen("cpu", 7))
    np.testing.assert_allclose(s1.cpu().numpy(), on_cpu.numpy(), rtol=1e-12)
    # an mt19937 generator draws the call's key from its own stream
    mt = gt.Generator(algorithm="mt19937").manual_seed(7)
    assert gt._standard_gamma(a, generator=mt).device == a.device


def test_standard_gamma_errors(device):
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        gt._standard_gamma(gt.tensor([1, 2], device=device))
    with pytest.raises(TypeError, match="generator must be a gputensor.Generator"):
        gt._standard_gamma(gt.tensor([1.0], device=device), generator=3)
    with pytest.raises(TypeError, match="must be Tensor"):
        gt._standard_gamma([1.0])


# -- _standard_gamma_grad and the gradient of _standard_gamma --------------------------------
def _exact_gamma_grad(alpha: float, x: float) -> float:
    mp.mp.dps = 30
    a, xx = mp.mpf(alpha), mp.mpf(x)
    dp = mp.diff(lambda t: mp.gammainc(t, 0, xx, regularized=True), a)
    return float(-dp / (xx ** (a - 1) * mp.e ** (-xx) / mp.gamma(a)))


_GAMMA_POINTS = [(0.05, 1e-8), (0.3, 0.02), (0.3, 2.5), (1.0, 0.7), (2.5, 3.4), (2.5, 9.0),
                 (7.0, 4.0), (30.0, 31.0), (30.0, 45.0), (500.0, 470.0), (500.0, 530.0)]


def test_standard_gamma_grad_is_the_exact_implicit_derivative(device):
    a = gt.tensor([p[0] for p in _GAMMA_POINTS], dtype=gt.float64, device=device)
    x = gt.tensor([p[1] for p in _GAMMA_POINTS], dtype=gt.float64, device=device)
    got = gt._standard_gamma_grad(a, x).cpu().numpy()
    exact = np.array([_exact_gamma_grad(*p) for p in _GAMMA_POINTS])
    np.testing.assert_allclose(got, exact, rtol=1e-10)
    ref = torch._standard_gamma_grad(torch.tensor(a.cpu().numpy()), torch.tensor(x.cpu().numpy()))
    np.testing.assert_allclose(got, ref.numpy(), rtol=5e-3)


def test_standard_gamma_grad_on_samples_edges_and_dtypes(device):
    rng = np.random.default_rng(0)
    alpha = rng.uniform(0.1, 20.0, 400)
    x = np.maximum(rng.gamma(alpha), 1e-30).astype(np.float32)
    got = gt._standard_gamma_grad(gt.tensor(alpha.astype(np.float32), device=device),
                                  gt.tensor(x, device=device))
    ref = torch._standard_gamma_grad(torch.tensor(alpha.astype(np.float32)), torch.tensor(x))
    assert got.dtype is gt.float32
    np.testing.assert_allclose(got.cpu().numpy(), ref.numpy(), rtol=5e-3, atol=1e-6)
    edge = gt._standard_gamma_grad(gt.tensor([1.0, 2.0], device=device),
                                   gt.tensor([0.0, -1.0], device=device))
    np.testing.assert_array_equal(edge.cpu().numpy(), [0.0, 0.0])
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        gt._standard_gamma_grad(gt.tensor([1.0], device=device),
                                gt.tensor([1.0], dtype=gt.float64, device=device))


def test_standard_gamma_backward_uses_the_reparameterisation_gradient(device):
    alpha = gt.tensor([0.4, 1.0, 3.0, 12.0], dtype=gt.float64, device=device,
                      requires_grad=True)
    s = gt._standard_gamma(alpha, generator=_gen(device))
    w = gt.tensor([1.0, -2.0, 0.5, 3.0], dtype=gt.float64, device=device)
    (s * w).sum().backward()
    expect = w * gt._standard_gamma_grad(alpha.detach(), s.detach())
    np.testing.assert_allclose(alpha.grad.cpu().numpy(), expect.cpu().numpy(), rtol=1e-14)
    # the gradient is exact for the drawn samples, and its mean is d E[x] / d alpha = 1
    exact = [_exact_gamma_grad(a, x) for a, x in zip([0.4, 1.0, 3.0, 12.0],
                                                     s.detach().cpu().numpy(), strict=True)]
    np.testing.assert_allclose((alpha.grad / w).cpu().numpy(), exact, rtol=1e-10)
    a = gt.full((N,), 3.0, dtype=gt.float64, device=device, requires_grad=True)
    gt._standard_gamma(a, generator=_gen(device)).sum().backward()
    assert abs(a.grad.mean().item() - 1.0) < 0.02


# -- _sample_dirichlet and _dirichlet_grad ---------------------------------------------------
def test_sample_dirichlet_moments_and_simplex(device):
    conc = np.array([0.3, 1.0, 2.5, 6.0])
    a = gt.tensor(np.tile(conc, (N, 1)), dtype=gt.float64, device=device)
    x = gt._sample_dirichlet(a, generator=_gen(device)).cpu().numpy()
    assert x.shape == (N, 4)
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    total = conc.sum()
    for j in range(4):
        _check_moments(x[:, j], stats.beta(conc[j], total - conc[j]))
        assert stats.kstest(x[:, j], stats.beta(conc[j], total - conc[j]).cdf).statistic < \
            KS_CRIT


def test_sample_dirichlet_edges_match_pytorch(device):
    for vals in ([0.0, 0.0], [-1.0, 1.0], 2.0):
        got = gt._sample_dirichlet(gt.tensor(vals, device=device), generator=_gen(device))
        ref = torch._sample_dirichlet(torch.tensor(vals))
        np.testing.assert_array_equal(got.cpu().numpy(), ref.numpy())
    tiny = gt._sample_dirichlet(gt.tensor([[1e-3] * 3] * 50, device=device))
    assert tiny.dtype is gt.float32 and (tiny >= gt.finfo(gt.float32).tiny).all().item()
    with pytest.raises(NotImplementedError, match='"dirichlet" not implemented for \'Long\''):
        gt._sample_dirichlet(gt.tensor([1, 2], device=device))


def _exact_dirichlet_grad(x: float, a: float, total: float) -> float:
    mp.mp.dps = 30
    xx, aa, b = mp.mpf(x), mp.mpf(a), mp.mpf(total) - mp.mpf(a)
    di = mp.diff(lambda t: mp.betainc(t, b, 0, xx, regularized=True), aa)
    pdf = xx ** (aa - 1) * (1 - xx) ** (b - 1) / mp.beta(aa, b)
    return float(-di / pdf / (1 - xx))


def test_dirichlet_grad_exact_and_against_pytorch(device):
    pts = [(0.2, 1.0, 3.0), (0.3, 2.0, 3.0), (0.05, 0.4, 5.0), (0.9, 0.5, 4.0),
           (0.45, 12.0, 26.0), (0.87, 17.0, 18.0), (0.999, 3.0, 3.2)]
    x, a, t = (gt.tensor([p[i] for p in pts], dtype=gt.float64, device=device) for i in range(3))
    got = gt._dirichlet_grad(x, a, t).cpu().numpy()
    np.testing.assert_allclose(got, [_exact_dirichlet_grad(*p) for p in pts], rtol=1e-10)
    ref = torch._dirichlet_grad(*(torch.tensor(v.cpu().numpy()) for v in (x, a, t)))
    np.testing.assert_allclose(got, ref.numpy(), rtol=5e-3)
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        gt._dirichlet_grad(gt.tensor([0.2], device=device),
                           gt.tensor([1.0], dtype=gt.float64, device=device),
                           gt.tensor([3.0], device=device))
    with pytest.raises(RuntimeError, match="same shape"):
        gt._dirichlet_grad(gt.tensor([0.2, 0.3], device=device), gt.tensor([1.0], device=device),
                           gt.tensor([3.0], device=device))


# -- binomial ------------------------------------------------------------------------------
@pytest.mark.parametrize("n,p", [(5.0, 0.3), (40.0, 0.1), (20.0, 0.8), (1000.0, 0.5),
                                 (300.0, 0.97), (1e6, 0.001)])
def test_binomial_matches_the_binomial_distribution(device, n, p):
    count = gt.full((N,), n, device=device, dtype=gt.float64)
    prob = gt.tensor([p], device=device, dtype=gt.float64)
    s = gt.binomial(count, prob, generator=_gen(device))
    assert s.dtype is gt.float64 and s.device == count.device and s.shape == (N,)
    x = s.cpu().numpy()
    assert (x == np.round(x)).all() and x.min() >= 0 and x.max() <= n
    _check_moments(x, stats.binom(n, p))
    # discrete KS: the empirical CDF at each integer against the exact one
    ks = np.arange(x.min(), x.max() + 1)
    emp = np.searchsorted(np.sort(x), ks, side="right") / x.size
    assert np.abs(emp - stats.binom(n, p).cdf(ks)).max() < KS_CRIT


def test_binomial_edges_and_errors_match_pytorch(device):
    cases = [([5.0, 6.0], [0.0, 1.5]), ([-5.0, 6.0], [0.5, -0.5]),
             ([5.0, 6.0], [float("nan"), 0.0]), ([5.5, 3.0], [1.0, 0.0])]
    for c, p in cases:
        got = gt.binomial(gt.tensor(c, device=device), gt.tensor(p, device=device))
        ref = torch.binomial(torch.tensor(c), torch.tensor(p))
        np.testing.assert_array_equal(got.cpu().numpy(), ref.numpy())
    assert gt.binomial(gt.tensor([[5.0], [7.0]], device=device),
                       gt.tensor([0.2, 0.5, 0.9], device=device)).shape == (2, 3)
    with pytest.raises(ValueError, match="floating-point dtypes for count, got: Long"):
        gt.binomial(gt.tensor([5, 6], device=device), gt.tensor([0.5, 0.5], device=device))
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        gt.binomial(gt.tensor([5.0], device=device),
                    gt.tensor([0.5], dtype=gt.float64, device=device))


def test_poisson_on_each_device(device):
    rates = gt.tensor([0.5, 4.0, 30.0, 2000.0] * (N // 4), dtype=gt.float64, device=device)
    s = gt.poisson(rates, generator=_gen(device))
    assert s.device == rates.device and s.dtype is gt.float64
    x = s.cpu().numpy().reshape(-1, 4)
    for j, lam in enumerate([0.5, 4.0, 30.0, 2000.0]):
        _check_moments(x[:, j], stats.poisson(lam))


def test_nvrtc_compiles_the_gamma_source():
    from gputensor.kernels.cuda import nvrtc
    from gputensor.kernels.cuda.ops.random_gamma import SRC

    ok, why = nvrtc.availability()
    if not ok:
        pytest.skip(f"NVRTC wheel not installed: {why}")
    prog = SRC.nvrtc_check("sm_80")
    assert all(name in prog.ptx for name in SRC.kernel_names)
