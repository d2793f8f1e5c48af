"""float32 transcendentals that LLVM vectorises (the PyPI llvmlite has no SVML, so Numba's
``np.exp``/``np.tanh``/``math.erf`` call libm one element at a time).

Each is branch-free inline arithmetic over float32 (a select picks between two ranges) with
2^n built from its bits, accurate to within 1.6 ulp of the exact value over the whole float32
range, subnormal results included (tests/kernels/test_fast_math.py measures it against
float64 references):
- ``exp_f32``: Cephes' expf polynomial on |r| <= ln2/2, exp(x) = 2^n p(r) with 2^n applied as
  two normal factors (so n may reach -150 and 128);
- ``tanh_f32``: Cephes' tanhf odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above;
- ``sigmoid_f32``: 1 / (1 + e) or e / (1 + e) with e = exp(-|x|) <= 1, the sum and quotient
  in float64 (one rounding at the end, so the tails stay within 1.5 ulp, subnormals too);
- ``erf_f32``: Cephes' erff polynomial (evaluated in float64) below 1, and above it
  1 - erfc with Numerical Recipes' erfc approximation (fractional error < 1.2e-7).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .scalar_fns import float_from_bits

_F = np.float32


@njit(inline="always", error_model="numpy")
def exp_f32(x):
    xc = min(max(x, _F(-104.0)), _F(88.72284))
    n = np.floor(xc * _F(1.442695040888963) + _F(0.5))
    r = xc - n * _F(0.693359375) + n * _F(2.12194440e-4)
    p = _F(1.9875691500e-4)
    p = p * r + _F(1.3981999507e-3)
    p = p * r + _F(8.3334519073e-3)
    p = p * r + _F(4.1665795894e-2)
    p = p * r + _F(1.6666665459e-1)
    p = p * r + _F(5.0000001201e-1)
    p = p * r * r + r + _F(1.0)
    # 2^n = 2^h * 2^(n-h), h = n // 2: both factors are normal floats for n in [-150, 128].
    ni = np.int32(n)
    h = ni >> np.int32(1)
    e = p * float_from_bits((h + np.int32(127)) << np.int32(23), p) \
        * float_from_bits((ni - h + np.int32(127)) << np.int32(23), p)
    if x < _F(-104.0):
        e = _F(0.0)
    if x > _F(88.72284):
        e = _F(np.inf)
    return x if x != x else e


@njit(inline="always", error_model="numpy")
def tanh_f32(x):
    a = abs(x)
    z = x * x
    small = x * (((((_F(-5.70498872745e-3) * z + _F(2.06390887954e-2)) * z
                    + _F(-5.37397155531e-2)) * z + _F(1.33314422036e-1)) * z
                  + _F(-3.33332819422e-1)) * z + _F(1.0))  # x * (...): tanh(-0) is -0
    big = _F(1.0) - _F(2.0) / (exp_f32(a + a) + _F(1.0))
    big = -big if x < 0 else big
    return small if a < _F(0.625) else big


@njit(inline="always", error_model="numpy")
def sigmoid_f32(x):
    e = np.float64(exp_f32(-abs(x)))  # <= 1: no overflow, subnormal tails kept
    return _F((1.0 if x >= 0 else e) / (1.0 + e))


@njit(inline="always", error_model="numpy")
def erf_f32(x):
    a = abs(x)
    z = x * x
    zd = np.float64(z)
    small = _F(np.float64(x) * ((((((7.853861353153693e-5 * zd - 8.010193625184903e-4) * zd
                                   + 5.188327685732524e-3) * zd - 2.685381193529856e-2) * zd
                                 + 1.128358514861418e-1) * zd - 3.761262582423300e-1) * zd
                               + 1.128379165726710))
    t = _F(1.0) / (_F(1.0) + _F(0.5) * a)
    poly = _F(-1.26551223) + t * (_F(1.00002368) + t * (_F(0.37409196) + t * (
        _F(0.09678418) + t * (_F(-0.18628806) + t * (_F(0.27886807) + t * (
            _F(-1.13520398) + t * (_F(1.48851587) + t * (_F(-0.82215223)
                                                          + t * _F(0.17087277)))))))))
    big = _F(1.0) - t * exp_f32(-z + poly)
    big = -big if x < 0 else big
    return small if a < _F(1.0) else big
