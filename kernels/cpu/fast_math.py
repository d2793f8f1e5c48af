"""float32 transcendentals that LLVM vectorises (the PyPI llvmlite has no SVML, so Numba's
``np.exp``/``np.tanh``/``math.erf`` call libm one element at a time).

Each is branch-free inline arithmetic over float32 (a select picks between two ranges) with
2^n built from its bits, accurate to within 1.6 ulp of the exact value over the float32 range,
subnormal results included (tests/kernels/test_fast_math.py measures it against
float64 references):
- ``exp_f32``: Cephes' expf polynomial on |r| <= ln2/2, exp(x) = 2^n p(r) with 2^n applied as
  two normal factors (so n may reach -150 and 128);
- ``tanh_f32``: Cephes' tanhf odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above;
- ``sigmoid_f32``: PyTorch's 1 / (1 + exp(-x)) (0 where exp(-x) overflows float32, as
  PyTorch's), the sum and quotient in float64 (one rounding at the end: within 1.5 ulp);
- ``erf_f32``: Cephes' erff polynomial (evaluated in float64) below 1, and above it
  1 - erfc with Numerical Recipes' erfc approximation (fractional error < 1.2e-7);
- ``gelu_f32``/``gelu_grad_f32``: x Phi(x) and Phi(x) + x phi(x) with 1 + erf taken as
  erfc(-x) in the left tail (no cancellation there).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.extending import intrinsic

_F = np.float32


@intrinsic
def float_from_bits(typingctx, bits, like):
    """The float of ``like``'s type (float32/float64) whose bits are the integer ``bits``
    (truncated to that width: Numba widens int32 arithmetic to int64)."""
    if not isinstance(bits, types.Integer) or like not in (types.float32, types.float64):
        return None
    wide = like == types.float64

    def codegen(context, builder, signature, args):
        width = 64 if wide else 32
        value = args[0]
        if bits.bitwidth > width:
            value = builder.trunc(value, llvm_ir.IntType(width))
        elif bits.bitwidth < width:
            value = builder.sext(value, llvm_ir.IntType(width))
        return builder.bitcast(value, llvm_ir.DoubleType() if wide else llvm_ir.FloatType())
    return like(bits, like), codegen


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
    # PyTorch's 1 / (1 + exp(-x)): 0 below -88.7, where exp(-x) overflows in float32.
    return _F(1.0 / (1.0 + np.float64(exp_f32(-x))))


@njit(inline="always", error_model="numpy")
def _erf_small(u):
    """erf(u) for |u| < 1: Cephes' erff polynomial, evaluated in float64."""
    z = np.float64(u) * np.float64(u)
    return np.float64(u) * ((((((7.853861353153693e-5 * z - 8.010193625184903e-4) * z
                                + 5.188327685732524e-3) * z - 2.685381193529856e-2) * z
                              + 1.128358514861418e-1) * z - 3.761262582423300e-1) * z
                            + 1.128379165726710)


@njit(inline="always", error_model="numpy")
def _erfc_tail(u, x, half):
    """erfc(|u|) by Numerical Recipes' approximation (fractional error < 1.2e-7), where
    u^2 = x^2 / 2 if ``half`` else x^2 with x exact (see _exp_neg_sq)."""
    a = min(abs(u), _F(16.0))
    t = _F(1.0) / (_F(1.0) + _F(0.5) * a)
    poly = _F(-1.26551223) + t * (_F(1.00002368) + t * (_F(0.37409196) + t * (
        _F(0.09678418) + t * (_F(-0.18628806) + t * (_F(0.27886807) + t * (
            _F(-1.13520398) + t * (_F(1.48851587) + t * (_F(-0.82215223)
                                                          + t * _F(0.17087277)))))))))
    return t * _exp_neg_sq(x, _F(0.5) if half else _F(1.0), poly)


@njit(inline="always", error_model="numpy")
def _exp_neg_sq(x, c, extra):
    """exp(extra - c x^2) as exp(-c h^2) exp(extra - c (|x| - h)(|x| + h)), h = |x| rounded
    down to 1/64 (c h^2 is exact in float32 below 16; |x| - h is exact): a rounded x^2 would
    carry an error that exp turns into a relative one growing with x^2. |x| is clamped at 16,
    where the result is already 0."""
    ax = min(abs(x), _F(16.0))
    h = np.floor(ax * _F(64.0)) * _F(0.015625)
    return exp_f32(-(c * h * h)) * exp_f32(extra - c * (ax - h) * (ax + h))


@njit(inline="always", error_model="numpy")
def erf_f32(x):
    tail = _F(1.0) - _erfc_tail(x, x, False)
    e = _F(_erf_small(x)) if abs(x) < _F(1.0) else (-tail if x < 0 else tail)
    return x if x != x else e


@njit(inline="always", error_model="numpy")
def _one_plus_erf_scaled(x):
    """1 + erf(x / sqrt 2) in float64, without cancellation (erfc in the left tail)."""
    u = x * _F(0.70710677)
    tail = np.float64(_erfc_tail(u, x, True))
    return 1.0 + _erf_small(np.float64(x) * 0.7071067811865476) if abs(u) < _F(1.0) else \
        (tail if x < 0 else 2.0 - tail)


@njit(inline="always", error_model="numpy")
def gelu_f32(x):
    """x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))."""
    g = _F(0.5 * np.float64(x) * _one_plus_erf_scaled(x))
    return x if x != x else g


@njit(inline="always", error_model="numpy")
def gelu_grad_f32(x):
    """Phi(x) + x phi(x), the derivative of gelu."""
    xd = np.float64(x)
    g = _F(0.5 * _one_plus_erf_scaled(x)
           + xd * 0.3989422804014327 * np.float64(_exp_neg_sq(x, _F(0.5), _F(0.0))))
    return x if x != x else g
