"""The vectorisable float32 transcendentals (kernels/cpu/fast_math.py) against float64
references: within 1.6 ulp everywhere tested, special values exact."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp
from numba import njit

from gputensor.kernels.cpu import fast_math as fm

CASES = {
    "exp": (fm.exp_f32, np.exp, [(-110.0, 90.0), (-104.0, -87.0), (88.0, 88.8), (-1.0, 1.0)]),
    "tanh": (fm.tanh_f32, np.tanh, [(-12.0, 12.0), (-0.7, 0.7), (-1e-4, 1e-4)]),
    # PyTorch's sigmoid is 0 below -88.72, where exp(-x) overflows float32 (tested below)
    "sigmoid": (fm.sigmoid_f32, sp.expit, [(-88.7, 110.0), (-30.0, 30.0), (-1.0, 1.0)]),
    "erf": (fm.erf_f32, sp.erf, [(-6.0, 6.0), (-1.2, 1.2), (-1e-3, 1e-3)]),
}


def _kernel(f):
    @njit(error_model="numpy")
    def run(out, x):
        for i in range(x.size):
            out[i] = f(x[i])
    return run


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    spacing = np.maximum(spacing, float(np.spacing(np.float32(0))))  # subnormal spacing
    return np.abs(got.astype(np.float64) - ref) / spacing


@pytest.mark.parametrize("name", sorted(CASES))
def test_within_1_6_ulp_of_float64(name: str) -> None:
    f, ref, ranges = CASES[name]
    run = _kernel(f)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(lo, hi, 200_000) for lo, hi in ranges]).astype(np.float32)
    out = np.empty_like(x)
    run(out, x)
    expect = ref(x.astype(np.float64))
    finite = np.isfinite(expect) & (np.abs(expect) < float(np.finfo(np.float32).max))
    assert _ulps(out[finite], expect[finite]).max() <= 1.6
    assert np.array_equal(np.isinf(out), np.isinf(expect.astype(np.float32)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values(name: str) -> None:
    f, ref, _ = CASES[name]
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38],
                 np.float32)
    out = np.empty_like(x)
    _kernel(f)(out, x)
    with np.errstate(over="ignore"):
        expect = ref(x.astype(np.float64)).astype(np.float32)
    assert np.isnan(out[0])
    np.testing.assert_array_equal(out[1:3], expect[1:3])
    np.testing.assert_allclose(out[3:], expect[3:], rtol=2e-7, atol=float(np.spacing(
        np.float32(0))))
    assert np.signbit(out[4]) == np.signbit(expect[4])


def test_gelu_and_its_gradient() -> None:
    """gelu within 2 ulp where x >= -1.4, and within 8 ulp in the left tail (erfc there, so no
    cancellation: PyTorch's float32 gelu loses all digits below about -5); the gradient,
    Phi(x) + x phi(x), within 3 ulp of its larger term (it crosses zero near -0.75)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-12, 12, 300_000), rng.uniform(-2, 2, 300_000),
                        rng.uniform(-1e-3, 1e-3, 10_000)]).astype(np.float32)
    xd = x.astype(np.float64)
    out = np.empty_like(x)
    _kernel(fm.gelu_f32)(out, x)
    u = _ulps(out, xd * sp.ndtr(xd))
    assert u[x >= -1.4].max() <= 2.0 and u.max() <= 8.0
    _kernel(fm.gelu_grad_f32)(out, x)
    cdf, pdf = sp.ndtr(xd), xd * np.exp(-0.5 * xd * xd) / np.sqrt(2 * np.pi)
    scale = np.spacing(np.maximum(np.abs(cdf), np.abs(pdf)).astype(np.float32))
    assert (np.abs(out - (cdf + pdf)) / scale).max() <= 3.0


def test_sigmoid_tail_is_pytorchs() -> None:
    x = np.array([-100.0, -88.8, -88.0, 100.0], np.float32)
    out = np.empty_like(x)
    _kernel(fm.sigmoid_f32)(out, x)
    assert out[0] == out[1] == 0.0 and 0 < out[2] < 1e-38 and out[3] == 1.0
