"""float32 transcendentals that LLVM vectorises (the PyPI llvmlite has no SVML, so Numba's
``np.exp``/``np.log``/``math.erf`` call libm one element at a time).

Each is branch-free inline float32 arithmetic: where a function has two ranges, both are
computed and a select picks one per element; 2^n is built from its bits and polynomials are
evaluated with ``fmuladd`` (one FMA instruction where the CPU has them). Accuracy against
float64 references (tests/kernels/test_fast_math.py measures it), special values and
subnormal inputs and results as PyTorch's:
- ``exp_f32``/``expm1_f32``: x = n ln2 + r, |r| <= ln2/2; exp is 2^n P(r) with P a degree-6
  polynomial (x clamped to [-104, 89] first, where the result is already 0 or inf), 2^n one
  VSCALEFPS on AVX-512 CPUs, else two normal factors (n reaches -150 and 128): within 0.85
  ulp; expm1(r) = r + r^2 Q(r) and expm1 is 2^n expm1(r) + (2^n - 1) (exact for the n where
  it matters): within 1 ulp;
- ``log_f32``/``log1p_f32``/``log2_f32``/``log10_f32``: u = 2^k (1 + f) with f in
  [sqrt(1/2) - 1, sqrt 2 - 1), log1p(f) = f - f^2/2 + f^3 P(f); log1p adds the rounding
  error c of 1 + x as c / u; log2/log10 scale the pieces in float64; within 1 ulp;
- ``tanh_f32``: an odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above: within 1.35 ulp;
- ``sigmoid_f32``: 1 / (1 + e^-x) with e^-x = 2^n (1 + t) kept unrounded inside the sum
  (0 below -88.72, where PyTorch's exp(-x) overflows float32); within 1.5 ulp;
- ``erf_f32``: x + x q(x^2) below 0.625, 1 - exp(P(|x|)) above, P fitted to log erfc;
- ``gelu_f32``/``gelu_grad_f32``: x Phi(x) and Phi(x) + x phi(x), with Phi(x) = 1/2 + x g(x^2)
  below 0.75 and Phi(-|x|) = exp(P(|x|)) above (no cancellation in the left tail);
- ``softplus_f32``: log1p(e^z) = max(z, 0) + log1p(e^-|z|), 1 + e^-|z| with its rounding
  error carried into the log.
The polynomials are near-minimax fits (Lawson's weighted least squares in float64, each
coefficient rounded to float32 and the rest refitted), relative to the result's size.
Each public function asks for 512-bit vectors on AVX-512 CPUs (``vector_width``).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .vector_width import has_scalef, prefer_wide_vectors

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


@intrinsic
def bits_from_float(typingctx, x):
    """The bits of a float32 (float64) as an int32 (int64)."""
    if x not in (types.float32, types.float64):
        return None
    out = types.int64 if x == types.float64 else types.int32

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(out.bitwidth))
    return out(x), codegen


# llvm.ldexp is one VSCALEFPS/PD on AVX-512 CPUs; elsewhere LLVM calls libm's ldexp per element
# (no vector loop), so 2^n is built from bits there.
SCALEF = has_scalef()


@intrinsic
def ldexp(typingctx, x, n):
    """x 2^n rounded once, subnormal and overflowing results included (LLVM's llvm.ldexp; use
    it where ``SCALEF``). ``n`` is taken as an int32 (truncated: Numba widens int32 sums)."""
    if x not in (types.float32, types.float64) or not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i32 = llvm_ir.IntType(32)
        exponent = args[1]
        if n.bitwidth > 32:
            exponent = builder.trunc(exponent, i32)
        elif n.bitwidth < 32:
            exponent = builder.sext(exponent, i32)
        ty = args[0].type
        name = "llvm.ldexp.f64.i32" if x == types.float64 else "llvm.ldexp.f32.i32"
        fn = cgutils.get_or_insert_function(builder.module,
                                            llvm_ir.FunctionType(ty, [ty, i32]), name)
        return builder.call(fn, [args[0], exponent])
    return x(x, n), codegen


@intrinsic
def fmuladd(typingctx, a, b, c):
    """a * b + c, fused into one FMA where the CPU has it (LLVM's llvm.fmuladd): polynomials
    take half the instructions. Results may differ in the last bit between CPUs with and
    without FMA; the accuracy bounds hold for both."""
    if not (a == b == c and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, signature, args):
        ty = args[0].type
        fn = cgutils.get_or_insert_function(
            builder.module, llvm_ir.FunctionType(ty, [ty, ty, ty]),
            "llvm.fmuladd.f64" if a == types.float64 else "llvm.fmuladd.f32")
        return builder.call(fn, args)
    return a(a, b, c), codegen


def _coefs(*values: float) -> tuple:
    """A polynomial's float32 coefficients, highest degree first."""
    return tuple(_F(v) for v in values)


def _horner(x, c):
    """c[0] x^(n-1) + ... + c[n-1] (Numba only)."""
    raise TypeError("_horner runs inside Numba code")


@overload(_horner, inline="always")
def _horner_unrolled(x, c):
    # Straight-line code, no loop: a loop inlined twice into one kernel (silu's backward
    # calls sigmoid twice) trips Numba's SSA checks.
    body = "".join(f"    p = fmuladd(p, x, c[{i}])\n" for i in range(1, c.count))
    scope = {"fmuladd": fmuladd}
    exec(f"def impl(x, c):\n    p = c[0]\n{body}    return p\n", scope)
    return scope["impl"]


# expm1(r) = r + r^2 Q(r) on |r| <= ln2/2
_EXPM1_Q = _coefs(1.9762525334954262e-4, 1.393232960253954e-3, 8.333545178174973e-3,
                  4.166649281978607e-2, 0.1666666567325592, 0.5)
# exp(r) = 1 + r + r^2 (c2 + c3 r + ... + c6 r^4) on |r| <= ln2/2, within 0.03 ulp
_EXP_P = _coefs(0.0013820661697536707, 0.008368674665689468, 0.04166826605796814,
                0.1666652113199234, 0.4999999403953552, 1.0, 1.0)
# log1p(f) = f - f^2/2 + f^3 P(f) on [sqrt(1/2) - 1, sqrt 2 - 1]
_LOG1P_P = _coefs(-7.645149528980255e-2, 0.12778355181217194, -0.13164228200912476,
                  0.1419983208179474, -0.16622774302959442, 0.20001284778118134,
                  -0.25000837445259094, 0.3333333134651184)
# tanh(x) / x on |x| < 0.625, in x^2
_TANH_SMALL = _coefs(-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                     1.33314422036e-1, -3.33332819422e-1, 1.0)
# erf(x) = x + x q(x^2) for |x| < 0.625; log erfc(a) on [0.625, 3.93]
_ERF_MID = _coefs(4.435705952346325e-3, -2.659551613032818e-2, 0.11279930174350739,
                  -0.37612444162368774, 0.12837915122509003)
_LOG_ERFC = _coefs(2.212109393440187e-4, -3.276440780609846e-3, 2.309829369187355e-2,
                   -0.10562006384134293, -0.6353907585144043, -1.1286637783050537,
                   2.6038376745418645e-5)
# Phi(x) = 1/2 + x g(x^2) for |x| < 1 and Phi(x) + x phi(x) = 1/2 + x G(x^2) for |x| < 0.75
# (Phi, phi: the standard normal CDF and density); log Phi(-a) on [0.75, 5.5]
_PHI_MID = _coefs(-8.171795343514532e-6, 1.1502396955620497e-4, -1.1880238307639956e-3,
                  9.974163956940174e-3, -6.6490538418293e-2, 0.3989422917366028)
_GELU_GRAD_MID = _coefs(-1.2497692659962922e-4, 1.1874259216710925e-3, -9.52081847935915e-3,
                        5.984748527407646e-2, -0.2659622132778168, 0.7978845834732056)
_LOG_PHI = _coefs(1.2840195573460278e-8, -2.8303867338763666e-7, 9.361977504340757e-7,
                  3.770968032767996e-5, -6.719191442243755e-4, 6.103024818003178e-3,
                  -3.79607267677784e-2, -0.31704676151275635, -0.7984421849250793,
                  -0.6930414438247681)

_LOG2E = _F(1.442695040888963)
_LN2_HI = _F(0.693359375)       # 9 bits: n * _LN2_HI is exact for |n| < 2^15
_LN2_LO = _F(-2.12194440e-4)    # ln2 - _LN2_HI
_LOG2E_LO = _F(1.92596298909109e-8)       # log2(e) - _LOG2E
_LOG10E = _F(0.4342944819032518)
_LOG10E_LO = _F(-1.010305006321488e-8)   # log10(e) - _LOG10E
_LG2_HI = _F(0.3010254)                   # log10(2) to 14 bits: k * _LG2_HI is exact
_LG2_LO = _F(4.6050389811980175e-6)       # log10(2) - _LG2_HI
_EXP_HI = _F(88.72284)          # exp overflows float32 above
_ROUNDER = _F(12582912.0)       # 1.5 2^23: x + it rounds x to an integer, kept in its low bits
_ROUNDER_BITS = np.int32(0x4B400000)
_SQRT_HALF_BITS = np.int32(0x3F3504F3)
_MANTISSA = np.int32(0x007FFFFF)
_MAX_BITS = np.int32(0x7F7FFFFF)   # the largest finite float32's bits
_MIN_NORMAL = _F(1.17549435e-38)
_INF = _F(np.inf)
_NAN = _F(np.nan)


@njit(inline="always", error_model="numpy")
def _pow2(n):
    """2^n for an integer n in [-126, 127]."""
    return float_from_bits((n + np.int32(127)) << np.int32(23), _F(0.0))


@njit(inline="always", error_model="numpy")
def _pow2f(n):
    """2^n for an integral float32 n in [-126, 127]."""
    return float_from_bits(np.int32(n + _F(127.0)) << np.int32(23), n)


@njit(inline="always", error_model="numpy")
def _exp_reduce(x):
    """(n, ni, t) with x = n ln2 + r, |r| <= ln2/2, n an integral float32, ni the same integer
    and t = expm1(r), for |x| < 2^21. n is rounded by adding 1.5 2^23, whose sum keeps n in
    its low bits (no round or convert instruction)."""
    k = fmuladd(x, _LOG2E, _ROUNDER)
    n = k - _ROUNDER
    r = fmuladd(n, -_LN2_LO, fmuladd(n, -_LN2_HI, x))
    return n, bits_from_float(k) - _ROUNDER_BITS, fmuladd(r * r, _horner(r, _EXPM1_Q), r)


@njit(inline="always", error_model="numpy")
def _scale(ni, m):
    """2^ni m for an integer ni in [-151, 128] and m in [0.7, 1.5], rounded once (a subnormal
    result too): one VSCALEFPS where ``SCALEF``, else 2^ni = 2^h 2^(ni-h), h = ni // 2, two
    normal factors."""
    if SCALEF:
        return ldexp(m, ni)
    h = ni >> np.int32(1)
    return m * _pow2(h) * _pow2(ni - h)


@njit(inline="always", error_model="numpy")
def _exp_parts(x):
    """(n, exp(r)) with x = n ln2 + r, |r| <= ln2/2, n an int32, for |x| < 2^21: n rounded as
    in _exp_reduce, exp(r) one polynomial."""
    k = fmuladd(x, _LOG2E, _ROUNDER)
    n = k - _ROUNDER
    r = fmuladd(n, -_LN2_LO, fmuladd(n, -_LN2_HI, x))
    return bits_from_float(k) - _ROUNDER_BITS, _horner(r, _EXP_P)


@njit(inline="always", error_model="numpy")
def _exp_core(x):
    """exp(x) for a non-NaN x (infinities included): x clamped to [-104, 89], where the result
    is already 0 or inf, then 2^n exp(r); the scaling rounds once, so subnormal results are
    exact to half an ulp and 2^128 overflows to inf. No NaN rule."""
    ni, p = _exp_parts(min(max(x, _F(-104.0)), _F(89.0)))
    return _scale(ni, p)


@njit(inline="always", error_model="numpy")
def exp_f32(x):
    prefer_wide_vectors()
    e = _exp_core(x)
    return x if x != x else e


@njit(inline="always", error_model="numpy")
def _exp_normal(x):
    """exp(x) for x in [-87, 88] (a normal result), NaN-free."""
    ni, p = _exp_parts(x)
    return p * _pow2(ni)


@njit(inline="always", error_model="numpy")
def expm1_f32(x):
    prefer_wide_vectors()
    n, _, t = _exp_reduce(min(max(x, _F(-25.0)), _EXP_HI))  # expm1(-25) rounds to -1
    s = _pow2f(min(n, _F(127.0)))
    e = fmuladd(s, t, s - _F(1.0))     # 2^n - 1 is exact for -24 <= n <= 24
    e = e + e if n > _F(127.0) else e
    e = _INF if x > _EXP_HI else e
    return x if (x != x) | (x == _F(0.0)) else e   # x == 0 keeps -0


@njit(inline="always", error_model="numpy")
def tanh_f32(x):
    prefer_wide_vectors()
    a = abs(x)
    small = x * _horner(x * x, _TANH_SMALL)   # x * (...): tanh(-0) is -0
    big = _F(1.0) - _F(2.0) / (_exp_core(a + a) + _F(1.0))
    big = -big if x < 0 else big
    t = small if a < _F(0.625) else big
    return x if x != x else t


@njit(inline="always", error_model="numpy")
def sigmoid_f32(x):
    """1 / (1 + e^-x) = 2^-n / (2^-n + 1 + t) for e^-x = 2^n (1 + t): (t + 2^-n) + 1 for n > 0,
    t + (2^-n + 1) (exact inner sum) for n <= 0, so one rounding in the sum and one in the
    quotient; 2^-n reaches 2^-128 (two factors: subnormal results round once). PyTorch's
    float32 sigmoid is 0 below -88.72, where its exp(-x) overflows."""
    prefer_wide_vectors()
    n, _, t = _exp_reduce(min(max(-x, _F(-30.0)), _EXP_HI))   # sigmoid(30) rounds to 1
    inv = _pow2f(-min(n, _F(126.0))) * _pow2f(_F(126.0) - max(n, _F(126.0)))
    pos = n > _F(0.0)
    d = (t + (inv if pos else _F(0.0))) + (_F(1.0) if pos else inv + _F(1.0))
    r = inv / d
    r = _F(0.0) if x < -_EXP_HI else r
    return x if x != x else r


@njit(inline="always", error_model="numpy")
def erf_f32(x):
    prefer_wide_vectors()
    a = abs(x)
    small = fmuladd(x, _horner(x * x, _ERF_MID), x)
    big = _F(1.0) - _exp_normal(_horner(min(a, _F(3.93)), _LOG_ERFC))  # erf(3.93) rounds to 1
    big = -big if x < 0 else big
    e = small if a < _F(0.625) else big
    return x if x != x else e


@njit(inline="always", error_model="numpy")
def _phi_tail(a):
    """Phi(-a) = exp(P(a)) for a in [0.75, 5.5] (a clamped at 5.5)."""
    return _exp_normal(_horner(min(a, _F(5.5)), _LOG_PHI))


@njit(inline="always", error_model="numpy")
def gelu_f32(x):
    """x Phi(x): x (1/2 + x g(x^2)) in the middle; x Phi(-|x|) below -1 and x - x Phi(-x)
    above 1, so the left tail has no cancellation. Below -5.5 the result is -0 (PyTorch's
    float32 gelu is -0 from about -5.7, its 1 + erf having rounded to 0)."""
    prefer_wide_vectors()
    a = abs(x)
    mid = fmuladd(x, x * _horner(x * x, _PHI_MID), _F(0.5) * x)
    e = _phi_tail(a)
    tail = x * e if x < 0 else (x if x > _F(5.5) else fmuladd(-x, e, x))
    tail = x * _F(0.0) if x < _F(-5.5) else tail   # -0, and NaN at -inf as PyTorch's
    g = mid if a < _F(1.0) else tail
    return x if (x != x) | (x == _F(0.0)) else g   # gelu(-0) is -0


@njit(inline="always", error_model="numpy")
def gelu_grad_f32(x):
    """Phi(x) + x phi(x): 1/2 + x G(x^2) in the middle; in the tails Phi from exp(P) and
    phi(x) = exp(-x^2/2) / sqrt(2 pi) with -x^2/2 split into a rounded part and its (FMA-exact)
    error, so that the rounding of x^2 does not grow with x."""
    prefer_wide_vectors()
    a = abs(x)
    mid = fmuladd(x, _horner(x * x, _GELU_GRAD_MID), _F(0.5))
    hx = _F(-0.5) * min(a, _F(13.0))
    sq = hx * min(a, _F(13.0))
    pdf = _exp_normal(sq) * fmuladd(fmuladd(hx, min(a, _F(13.0)), -sq),
                                    _F(0.3989422804014327), _F(0.3989422804014327))
    pdf = _F(0.0) if a > _F(13.0) else pdf
    e = _phi_tail(a)
    e = _F(0.0) if a > _F(5.5) else e
    tail = fmuladd(x, pdf, e if x < 0 else _F(1.0) - e)
    g = mid if a < _F(0.75) else tail
    return x if x != x else g


@njit(inline="always", error_model="numpy")
def _log_reduce(u):
    """(k, f, y) with u = 2^k (1 + f), f in [sqrt(1/2) - 1, sqrt 2 - 1) and log1p(f) = f + y,
    for a positive, normal, finite u (k an int)."""
    i = np.int32(bits_from_float(u) - _SQRT_HALF_BITS)   # int32: LLVM keeps 16 lanes
    f = float_from_bits((i & _MANTISSA) + _SQRT_HALF_BITS, u) - _F(1.0)
    y = (f * f) * fmuladd(f, _horner(f, _LOG1P_P), _F(-0.5))
    return i >> np.int32(23), f, y


@njit(inline="always", error_model="numpy")
def _ln_join(k, f, y):
    """k ln2 + f + y, the small terms first (k ln2_hi + f is the only large sum)."""
    return fmuladd(k, _LN2_HI, f + fmuladd(k, _LN2_LO, y))


@njit(inline="always", error_model="numpy")
def _log_valid(x, r):
    """r for a positive finite x; -inf at 0, NaN below, x itself at +inf and NaN."""
    special = -_INF if x == _F(0.0) else (_NAN if x < _F(0.0) else x)
    below = bits_from_float(x) - np.int32(1)   # in [0, bits(max) - 1] iff 0 < x < inf:
    return r if (below >= np.int32(0)) & (below < _MAX_BITS) else special  # one compare


@njit(inline="always", error_model="numpy")
def _log_normalized(x):
    """(k, f, y) of x > 0 as _log_reduce, subnormal x scaled by 2^23 first."""
    sub = x < _MIN_NORMAL
    k, f, y = _log_reduce(x * _F(8388608.0) if sub else x)
    return _F(k) - (_F(23.0) if sub else _F(0.0)), f, y


@njit(inline="always", error_model="numpy")
def log_f32(x):
    prefer_wide_vectors()
    k, f, y = _log_normalized(x)
    return _log_valid(x, _ln_join(k, f, y))


@njit(inline="always", error_model="numpy")
def log2_f32(x):
    """k + (f + y) log2(e), with log2(e) split in two so f's product keeps its low bits."""
    prefer_wide_vectors()
    k, f, y = _log_normalized(x)
    r = k + fmuladd(f, _LOG2E, fmuladd(f, _LOG2E_LO, y * _LOG2E))
    return _log_valid(x, r)


@njit(inline="always", error_model="numpy")
def log10_f32(x):
    """k log10(2) + (f + y) log10(e), both constants split in two (k times the high part of
    log10(2) is exact)."""
    prefer_wide_vectors()
    k, f, y = _log_normalized(x)
    low = fmuladd(k, _LG2_LO, fmuladd(f, _LOG10E_LO, y * _LOG10E))
    return _log_valid(x, fmuladd(k, _LG2_HI, fmuladd(f, _LOG10E, low)))


@njit(inline="always", error_model="numpy")
def _log_with_error(u, c):
    """log(u + c) for u in [2^-24, 2^128) and |c| <= ulp(u): log(u) + c / u, with
    c / u = c 2^-k / (1 + f) ~ c 2^-k (1 - f + f^2) (c is at most half an ulp of u)."""
    k, f, y = _log_reduce(u)
    kf = _F(k)
    corr = (c * _pow2f(-min(kf, _F(126.0)))) * fmuladd(f, f - _F(1.0), _F(1.0))
    return fmuladd(kf, _LN2_HI, f + (fmuladd(kf, _LN2_LO, y) + corr))


@njit(inline="always", error_model="numpy")
def log1p_f32(x):
    prefer_wide_vectors()
    u = _F(1.0) + x
    r = _log_with_error(u, x - (u - _F(1.0)))   # 1 + x's rounding error (u - 1 is exact)
    special = -_INF if x == _F(-1.0) else (_NAN if x < _F(-1.0) else x)
    return r if (x > _F(-1.0)) & (x < _INF) & (x != _F(0.0)) else special


@njit(inline="always", error_model="numpy")
def softplus_f32(z):
    """log1p(e^z) = max(z, 0) + log1p(w), w = e^-|z|; 1 + w is split into its rounded value
    and (Fast2Sum, 1 >= w) its exact error."""
    prefer_wide_vectors()
    w = _exp_core(-abs(z))
    u = _F(1.0) + w
    lp = _log_with_error(u, (_F(1.0) - u) + w)
    return max(z, _F(0.0)) + lp if z == z else z
