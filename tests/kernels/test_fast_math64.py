"""The vectorisable float64 transcendentals (kernels/cpu/fast_math64.py) against
high-precision references (NumPy's 80-bit long double where the platform has it, else mpmath;
mpmath for erf and gelu): error bounds in ulps over wide ranges, special values exact."""

from __future__ import annotations

from collections.abc import Callable

import mpmath as mp
import numpy as np
import pytest
from numba import njit

from gputensor.kernels.cpu import fast_math64 as fm

LD = np.longdouble
EXTENDED = np.finfo(LD).nmant >= 63  # x87 80-bit long double: ~11 more bits than float64


def _kernel(f: Callable) -> Callable:
    @njit(error_model="numpy")
    def run(out, x):
        for i in range(x.size):
            out[i] = f(x[i])
    return run


def _apply(f: Callable, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _kernel(f)(out, x)
    return out


def _mp(fn: Callable, x: np.ndarray) -> np.ndarray:
    """fn at each float64 of x in 40-digit arithmetic, rounded to long double."""
    with mp.workdps(40):
        return np.array([LD(mp.nstr(fn(mp.mpf(float(v))), 25)) for v in x], dtype=LD)


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the float64 spacing at ref (2^-1074 for subnormals)."""
    spacing = np.maximum(np.spacing(np.abs(ref.astype(np.float64))), 5e-324).astype(LD)
    return (np.abs(got.astype(LD) - ref) / spacing).astype(np.float64)


def _sample(ranges: list[tuple[float, float]], n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(lo, hi, n) for lo, hi in ranges])


def _log_uniform(lo_exp: int, hi_exp: int, n: int) -> np.ndarray:
    """Positive floats spread evenly over the binades 2^lo_exp .. 2^hi_exp."""
    rng = np.random.default_rng(1)
    return np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(lo_exp, hi_exp, n))


def _sigmoid_ld(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# name: (function, long-double reference, mpmath reference, inputs, max ulps)
CASES = {
    "exp": (fm.exp_f64, np.exp, mp.exp,
            lambda: _sample([(-746.0, 710.0), (-1.0, 1.0), (-745.2, -707.0), (700.0, 709.8)],
                            100_000), 1.0),
    "log": (fm.log_f64, np.log, mp.log,
            lambda: np.concatenate([_log_uniform(-1074, 1024, 200_000),
                                    _sample([(0.6, 1.5), (0.0, 2.0)], 100_000)]), 1.0),
    "log1p": (fm.log1p_f64, np.log1p, mp.log1p,
              lambda: np.concatenate([_sample([(-1.0, 1.0), (-0.3, 0.5), (0.3, 3.0)], 100_000),
                                      _log_uniform(-80, 1024, 100_000),
                                      -_log_uniform(-80, 0, 100_000)]), 1.0),
    "tanh": (fm.tanh_f64, np.tanh, mp.tanh,
             lambda: _sample([(-25.0, 25.0), (-0.7, 0.7), (0.55, 0.7), (-1e-6, 1e-6)],
                             100_000), 1.5),
    # 1 / (1 + e) rounds three times (e, the sum, the quotient): about 2 ulp, as PyTorch's
    "sigmoid": (fm.sigmoid_f64, _sigmoid_ld, lambda v: 1 / (1 + mp.exp(-v)),
                lambda: _sample([(-709.0, 750.0), (-40.0, 40.0), (-1.0, 1.0)], 100_000), 2.2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_within_bound_of_high_precision(name: str) -> None:
    f, ref_ld, ref_mp, inputs, bound = CASES[name]
    x = inputs()
    if EXTENDED:
        with np.errstate(divide="ignore", over="ignore"):
            ref = ref_ld(x.astype(LD))
    else:
        x = x[::50]
        ref = _mp(ref_mp, x)
    out = _apply(f, x)
    finite = np.abs(ref) <= LD(np.finfo(np.float64).max)
    assert _ulps(out[finite], ref[finite]).max() <= bound
    assert np.all(np.isinf(out[~finite]))


def test_erf_within_1_ulp() -> None:
    x = _sample([(-7.0, 7.0), (-1.2, 1.2), (0.9, 2.5), (-1e-3, 1e-3)], 4000)
    assert _ulps(_apply(fm.erf_f64, x), _mp(mp.erf, x)).max() <= 1.0


def test_gelu_bounds() -> None:
    """Within 2 ulp for x >= 0; the left half, 1 + erf with cancellation near -1.4 and
    erfc (Cephes' rationals, several roundings) in the tail, within 6 ulp, subnormal results
    included (PyTorch's float64 gelu returns -0 below about -8)."""
    x = _sample([(-40.0, 10.0), (-3.0, 3.0), (-1e-3, 1e-3)], 4000)
    u = _ulps(_apply(fm.gelu_f64, x), _mp(lambda v: v * mp.ncdf(v), x))
    assert u[x >= 0].max() <= 2.0 and u.max() <= 6.0


def test_gelu_grad_bounds() -> None:
    """Phi(x) + x phi(x) crosses zero near -0.75: measured against its larger term there."""
    x = _sample([(-40.0, 10.0), (-3.0, 3.0)], 4000)
    ref = _mp(lambda v: mp.ncdf(v) + v * mp.npdf(v), x)
    big = _mp(lambda v: max(mp.ncdf(v), abs(v * mp.npdf(v))), x)
    got = _apply(fm.gelu_grad_f64, x)
    assert _ulps(got, ref)[x >= 0].max() <= 2.0
    assert (np.abs(got.astype(LD) - ref) / np.spacing(big.astype(np.float64))).max() <= 4.0


def test_softplus_and_its_gradient() -> None:
    @njit(error_model="numpy")
    def run(out, grad, x, beta, threshold):
        for i in range(x.size):
            out[i] = fm.softplus_f64(x[i], beta, threshold)
            grad[i] = fm.softplus_grad_f64(x[i], beta, threshold)
    x = _sample([(-60.0, 30.0), (-2.0, 2.0)], 2000)
    out, grad = np.empty_like(x), np.empty_like(x)
    run(out, grad, x, 2.0, 20.0)
    y = 2 * x
    ref = _mp(lambda v: mp.log1p(mp.exp(2 * v)) / 2, x)
    linear = y > 20
    assert _ulps(out[~linear], ref[~linear]).max() <= 2.0
    np.testing.assert_array_equal(out[linear], x[linear])
    gref = _mp(lambda v: 1 / (1 + mp.exp(-2 * v)), x)
    assert _ulps(grad[~linear], gref[~linear]).max() <= 2.2
    assert np.all(grad[linear] == 1.0)


TINY = 5e-324
SPECIAL = {
    # name: (inputs, expected), compared bit for bit (NaN to NaN)
    "exp": ([np.nan, np.inf, -np.inf, 0.0, -0.0, TINY, 709.782712893384, 709.7827128933841,
             -745.1332191019411, -745.1332191019412, -800.0],
            [np.nan, np.inf, 0.0, 1.0, 1.0, 1.0, 1.7976931348622732e308, np.inf, TINY, 0.0, 0.0]),
    "log": ([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0, TINY, 1.7976931348623157e308],
            [np.nan, np.inf, np.nan, -np.inf, -np.inf, np.nan, 0.0, -744.4400719213812,
             709.782712893384]),
    "log1p": ([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -2.0, TINY, -TINY, 1e-300],
              [np.nan, np.inf, np.nan, 0.0, -0.0, -np.inf, np.nan, TINY, -TINY, 1e-300]),
    "tanh": ([np.nan, np.inf, -np.inf, 0.0, -0.0, TINY, -TINY, 1000.0, -1000.0],
             [np.nan, 1.0, -1.0, 0.0, -0.0, TINY, -TINY, 1.0, -1.0]),
    # PyTorch's 0 where exp(-x) overflows (below -709.78)
    "sigmoid": ([np.nan, np.inf, -np.inf, 0.0, -0.0, -710.0, 40.0],
                [np.nan, 1.0, 0.0, 0.5, 0.5, 0.0, 1.0]),
    "erf": ([np.nan, np.inf, -np.inf, 0.0, -0.0, TINY, -TINY, 6.0, -6.0],
            [np.nan, 1.0, -1.0, 0.0, -0.0, TINY, -TINY, 1.0, -1.0]),
    # PyTorch's gelu(-inf) is NaN (-inf * 0); far left it underflows to -0
    "gelu": ([np.nan, np.inf, -np.inf, 0.0, -0.0, -40.0, 40.0],
             [np.nan, np.inf, np.nan, 0.0, -0.0, -0.0, 40.0]),
    "gelu_grad": ([np.nan, 0.0, -0.0, -40.0, 40.0], [np.nan, 0.5, 0.5, 0.0, 1.0]),
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_values(name: str) -> None:
    inputs, expected = SPECIAL[name]
    got = _apply(getattr(fm, f"{name}_f64"), np.array(inputs))
    want = np.array(expected)
    np.testing.assert_array_equal(got, want)
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))
