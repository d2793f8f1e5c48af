"""float64 transcendentals that LLVM vectorises (the float64 twin of fast_math.py: without SVML,
Numba's ``np.exp``/``np.log``/``math.erf`` call libm one element at a time).

Each is branch-free (both ranges' candidates are computed, a select picks one), reads and
writes exponents through the float's bits and evaluates polynomials with fused multiply-adds.
Coefficients are near-minimax fits made with mpmath.chebyfit (fit error below 2^-60), except
Cephes' rational tanh and erfc. Errors measured by tests/kernels/test_fast_math64.py against
80-bit/mpmath references:
- ``exp_f64``: 2^n (1 + r + r^2 g(r)), |r| <= ln2/2 by a Cody-Waite split of n ln2 in fused
  multiply-adds, the polynomial by Horner's rule, 2^n one VSCALEFPD on AVX-512 CPUs, else two
  normal factors (subnormal results rounded once): within 0.85 ulp;
- ``log_f64``/``log1p_f64``: fdlibm's scheme, x = 2^k (1 + f) with 1 + f in [sqrt 1/2, sqrt 2),
  log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f); log1p adds the rounding error
  of 1 + x back as c / (1 + x): within 0.85 ulp;
- ``tanh_f64``: Cephes' rational below 0.625, 1 - 2 / (exp(2|x|) + 1) above, one division for
  both: within 1.4 ulp;
- ``sigmoid_f64``: e / (1 + e) or 1 / (1 + e), e = exp(-|x|), and PyTorch's 0 below -709.78
  (where its 1 / (1 + exp(-x)) overflows): within 2.2 ulp (three roundings);
- ``erf_f64``: x + x q(x^2) below 1, 1 - erfc above with Cephes' erfc rational for [1, 8)
  (erf rounds to +-1 from 5.93): within 1 ulp;
- ``gelu_f64``/``gelu_grad_f64``: x Phi(x) and Phi(x) + x phi(x), 1 + erf as erfc in the left
  tail, exp(-x^2 / 2) from x itself (no rounded x^2, whose error exp would magnify): within
  2 ulp for x >= 0, a few ulp left of it (PyTorch's float64 gelu loses every digit below -8);
- ``softplus_f64``/``softplus_grad_f64``: log1p(exp(beta x)) / beta and its sigmoid.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .fast_math import SCALEF, _horner, bits_from_float, float_from_bits, fmuladd, ldexp
from .vector_width import prefer_wide_vectors

_ONE = 1.0  # typed float64 constant for float_from_bits

# ln 2 split so that n * _LN2_HI is exact for |n| < 2^21 (its low 21 bits are zero).
_LN2_HI = 0.6931471803691238
_LN2_LO = 1.9082149292705877e-10
_LOG2E = 1.4426950408889634
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_TWO_M64 = 5.421010862427522e-20  # 2^-64
_MANT = 0x000FFFFFFFFFFFFF
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD  # the bits of sqrt(1/2)

# exp(r) = 1 + r + r^2 g(r) on |r| <= ln2/2
_EXP_G = (2.0914686968086876e-09, 2.5105217004720745e-08, 2.75572736431103e-07,
          2.7557255400206422e-06, 2.4801587325547743e-05, 0.00019841269874820627,
          0.0013888888888883748, 0.008333333333326136, 0.04166666666666667, 0.1666666666666667,
          0.5)
_EXP_P = _EXP_G + (1.0, 1.0)   # 1 + r + r^2 g(r)
# 2 atanh(s) = 2 s + 2 s z w(z), z = s^2 <= (3 - 2 sqrt 2)^2
_LOG_W = (0.07308903576708663, 0.07665805861027504, 0.09091446216268435, 0.11111105544689748,
          0.14285714313126918, 0.19999999999949444, 0.3333333333333335)
# erf(x) = x + x q(x^2) on |x| <= 1 (the constant term is 2 / sqrt(pi) - 1)
_ERF_Q = (5.957176147748911e-11, -1.1372848856791674e-09, 1.4659775274047436e-08,
          -1.6350312701054695e-07, 1.6461000484121368e-06, -1.4925595266831182e-05,
          0.0001205533111164271, -0.000854832698083379, 0.0052239776248180145,
          -0.026866170645076792, 0.11283791670954879, -0.3761263890318375, 0.1283791670955126)
# erfc(a) exp(a^2) = P(a) / Q(a) on [1, 8), R(a) / S(a) above (Cephes)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)
_ERFC_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0,
           6.16021097993053585195e0, 7.40974269950448939160e0, 2.97886665372100240670e0)
_ERFC_S = (1.0, 2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1,
           1.70814450747565897222e1, 9.60896809063285878198e0, 3.36907645100081516050e0)


@njit(inline="always", error_model="numpy")
def _pow2(p, n):
    """p 2^n for n (a whole float64) in [-2100, 2046]: two normal factors, one rounding."""
    ni = np.int64(n)
    h = ni >> 1
    return p * float_from_bits((h + 1023) << 52, _ONE) \
        * float_from_bits((ni - h + 1023) << 52, _ONE)


@njit(inline="always", error_model="numpy")
def _exp_scaled(x, k):
    """exp(x) 2^k for finite x, k a whole float64 in [-64, 64]: 2^(n+k) P(r) with P(r) =
    1 + r + r^2 g(r) by Horner's rule in fused multiply-adds, the scaling one VSCALEFPD where
    ``SCALEF`` (else two normal factors), one rounding for subnormal results."""
    xc = min(max(x, -750.0), 710.0)  # exp is 0 / inf beyond; keeps n in _pow2's range
    n = np.rint(xc * _LOG2E)
    r = fmuladd(n, -_LN2_LO, fmuladd(n, -_LN2_HI, xc))
    p = _horner(r, _EXP_P)
    if SCALEF:
        return ldexp(p, np.int32(n + k))
    return _pow2(p, n + k)


@njit(inline="always", error_model="numpy")
def exp_f64(x):
    prefer_wide_vectors()
    e = _exp_scaled(x, 0.0)
    return x if x != x else e


@njit(inline="always", error_model="numpy")
def _log_reduced(v):
    """(k, f) with v = 2^k (1 + f), 1 + f in [sqrt 1/2, sqrt 2), for a positive normal v."""
    bits = bits_from_float(v) - _SQRT_HALF_BITS
    k = bits >> 52
    m = float_from_bits((bits & _MANT) + _SQRT_HALF_BITS, _ONE)
    return np.float64(k), m - 1.0


@njit(inline="always", error_model="numpy")
def _log_core(k, f, c):
    """k ln2 + log(1 + f) + c, for f in [sqrt 1/2 - 1, sqrt 2 - 1) and a small correction c."""
    s = f / (2.0 + f)
    z = s * s
    w = _horner(z, _LOG_W)
    r = 2.0 * z * w  # 2 atanh(s) = 2 s + s r
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + (k * _LN2_LO + c))) - f)


@njit(inline="always", error_model="numpy")
def log_f64(x):
    prefer_wide_vectors()
    sub = x < 2.2250738585072014e-308  # subnormal (or <= 0): scale by 2^54 first
    k, f = _log_reduced(x * 18014398509481984.0 if sub else x)
    y = _log_core(k - 54.0 if sub else k, f, 0.0)
    y = -np.inf if x == 0 else y
    y = x if x == np.inf else y
    return np.nan if not x >= 0 else y


@njit(inline="always", error_model="numpy")
def log1p_f64(x):
    prefer_wide_vectors()
    u = 1.0 + x
    k, f = _log_reduced(u)
    # the rounding error of 1 + x, exact (Fast2Sum with the larger operand first), over 1 + x
    c = ((1.0 - (u - x)) if x > 1.0 else (x - (u - 1.0))) / u
    y = _log_core(k, f, c)
    y = x if abs(x) < 5.551115123125783e-17 or x == np.inf else y  # log1p(x) rounds to x
    y = -np.inf if x == -1.0 else y
    return np.nan if not x >= -1.0 else y


@njit(inline="always", error_model="numpy")
def tanh_f64(x):
    prefer_wide_vectors()
    a = abs(x)
    z = x * x
    small = a < 0.625
    p = fmuladd(fmuladd(-9.64399179425052238628e-1, z, -9.92877231001918586564e1), z,
               -1.61468768441708447952e3)
    q = fmuladd(fmuladd(z + 1.12811678491632931402e2, z, 2.23548839060100448583e3), z,
               4.84406305325125486048e3)
    # x + x z p / q below 0.625, 1 - 2 / (exp(2|x|) + 1) above: one division for both
    d = (x * z * p if small else 2.0) / (q if small else exp_f64(a + a) + 1.0)
    big = 1.0 - d
    t = x + d if x != 0 else x  # tanh(-0) is -0
    return t if small else (-big if x < 0 else big)


@njit(inline="always", error_model="numpy")
def sigmoid_f64(x):
    prefer_wide_vectors()
    # e^x / (1 + e^x) for x < 0 (e = exp(-|x|) <= 1 keeps e's error damped); 0 below -709.78,
    # where PyTorch's 1 / (1 + exp(-x)) overflows.
    e = exp_f64(-abs(x))
    s = (e if x < 0 else 1.0) / (1.0 + e)
    return 0.0 if x < -709.782712893384 else s


@njit(inline="always", error_model="numpy")
def _erf_q(z):
    """q(z) with erf(x) = x + x q(x^2) for |x| <= 1."""
    return _horner(z, _ERF_Q)  # x + x q rounds once


@njit(inline="always", error_model="numpy")
def _erfc_ratio(a):
    """erfc(a) exp(a^2) for a >= 1 (Cephes' rationals: one for [1, 8), one above), as a
    numerator and denominator selected before the one division."""
    p = _horner(a, _ERFC_P)
    q = _horner(a, _ERFC_Q)
    r = _horner(a, _ERFC_R)
    s = _horner(a, _ERFC_S)
    return (p if a < 8.0 else r) / (q if a < 8.0 else s)


@njit(inline="always", error_model="numpy")
def erf_f64(x):
    prefer_wide_vectors()
    a = min(max(abs(x), 1.0), 6.0)  # erf rounds to +-1 beyond 5.93
    tail = 1.0 - exp_f64(-(a * a)) * (_horner(a, _ERFC_P) / _horner(a, _ERFC_Q))  # a < 8
    e = fmuladd(x, _erf_q(x * x), x) if abs(x) < 1.0 else (-tail if x < 0 else tail)
    return x if x != x else e


@njit(inline="always", error_model="numpy")
def _gelu_parts(x):
    """(1 + erf(x / sqrt 2), erfc(|x| / sqrt 2) 2^64, exp(-x^2 / 2) 2^64).

    exp(-x^2 / 2) is exp(-h^2 / 2) exp(-(|x| - h)(|x| + h) / 2), h = |x| rounded down to 2^-20
    (h^2 exact below 64, |x| - h exact): a rounded x^2 carries an error that exp turns into a
    relative one growing with x^2. The 2^64 keeps tails that end subnormal normal until the
    caller's last multiply. 1 + erf(u) for |u| < 1 is the exact sum 1 + u (Fast2Sum) plus the
    rest, with the rounding error of u = x / sqrt 2 added back through erf'(u)."""
    ax = min(abs(x), 38.72)  # beyond, gelu and its gradient round to 0 (and h^2 / 2 < 750)
    h = np.floor(ax * 1048576.0) * 9.5367431640625e-07
    e64 = _exp_scaled(-0.5 * (h * h), 64.0) * exp_f64(-0.5 * ((ax - h) * (ax + h)))
    e64 = 0.0 if abs(x) > 38.72 else e64
    erfc64 = e64 * _erfc_ratio(min(max(ax * _SQRT1_2, 1.0), 30.0))
    u = x * _SQRT1_2
    u_lo = fmuladd(x, _SQRT1_2, -u) + x * -4.833646656726457e-17  # x / sqrt 2 - u
    s = 1.0 + u
    err = (1.0 - s) + u
    rest = u * _erf_q(u * u) + u_lo * 1.1283791670955126 * (e64 * _TWO_M64)
    return s + (err + rest), erfc64, e64


@njit(inline="always", error_model="numpy")
def gelu_f64(x):
    """x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), erfc in the tails (PyTorch's NaN at -inf)."""
    prefer_wide_vectors()
    mid, erfc64, _ = _gelu_parts(x)
    u = abs(x) * _SQRT1_2
    g = 0.5 * x * (2.0 - erfc64 * _TWO_M64)
    g = (0.5 * x * erfc64) * _TWO_M64 if x < 0 else g
    g = 0.5 * x * mid if u < 1.0 else g
    return x if x != x else g


@njit(inline="always", error_model="numpy")
def gelu_grad_f64(x):
    """Phi(x) + x phi(x), the derivative of gelu."""
    prefer_wide_vectors()
    mid, erfc64, e64 = _gelu_parts(x)
    u = abs(x) * _SQRT1_2
    xphi64 = x * _INV_SQRT_2PI * e64
    g = (1.0 - 0.5 * erfc64 * _TWO_M64) + xphi64 * _TWO_M64
    g = (0.5 * erfc64 + xphi64) * _TWO_M64 if x < 0 else g
    g = 0.5 * mid + xphi64 * _TWO_M64 if u < 1.0 else g
    return x if x != x else g


@njit(inline="always", error_model="numpy")
def softplus_f64(x, beta, threshold):
    """PyTorch's softplus: x above the threshold (in beta x), else log1p(exp(beta x)) / beta."""
    prefer_wide_vectors()
    y = x * beta
    return x if y > threshold else log1p_f64(exp_f64(y)) / beta


@njit(inline="always", error_model="numpy")
def softplus_grad_f64(x, beta, threshold):
    """sigmoid(beta x), 1 in softplus's linear region."""
    prefer_wide_vectors()
    y = x * beta
    return 1.0 if y > threshold else sigmoid_f64(y)
