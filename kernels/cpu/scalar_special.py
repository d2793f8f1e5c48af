"""Special functions of the elementwise vocabulary (torch.special), for Numba.

scalar_fns.py re-exports these names, so op expressions use them like ``exp`` or ``erf``. Where
SciPy has the function, the kernels call SciPy's compiled Cephes routines
(``scipy.special.cython_special``) through their C entry points, registered with LLVM as
external symbols so Numba's disk cache keeps working; Hurwitz zeta, trigamma, the orthogonal
polynomials and the edge cases where PyTorch's answer differs from SciPy's are written here,
following the algorithms of PyTorch's ATen/native/Math.h. Everything computes in float64 (a
float32 result is rounded once on store).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic, overload

from ..temme_gamma import COEFFICIENTS as _TEMME_D
from ..temme_gamma import ORDER_MIN as _TEMME_ORDER_MIN
from ..temme_gamma import RATIO_MAX as _TEMME_RATIO_MAX
from .fast_math64 import log_f64

__all__ = [
    "lgamma", "digamma", "trigamma", "polygamma", "zeta", "mvlgamma", "erfc", "erfinv",
    "erfcx", "igamma", "igammac", "bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e",
    "bessel_k0", "bessel_k0e", "bessel_k1", "bessel_k1e",
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "ndtr", "ndtri", "log_ndtr", "entr",
    "xlog1py", "spherical_j0", "airy_ai", "cheb_t", "cheb_u", "cheb_v", "cheb_w", "hermite_h",
    "hermite_he", "laguerre_l", "legendre_p",
]


def _cython(name: str, nargs: int) -> types.ExternalFunction:
    """SciPy's compiled ``double f(double..., int skip_dispatch)`` as an external symbol."""
    addr = get_cython_function_address("scipy.special.cython_special", name)
    symbol = "gputensor_special_" + name.replace("__pyx_fuse_", "f")
    llvm.add_symbol(symbol, addr)
    return types.ExternalFunction(symbol, types.float64(*(types.float64,) * nargs, types.intc))


_psi = _cython("__pyx_fuse_1psi", 1)
_erfinv_f64 = _cython("__pyx_fuse_0erfinv", 1)
_erfcx = _cython("__pyx_fuse_1erfcx", 1)
_gammainc = _cython("gammainc", 2)
_gammaincc = _cython("gammaincc", 2)
_i0 = _cython("i0", 1)
_i0e = _cython("i0e", 1)
_i1 = _cython("i1", 1)
_i1e = _cython("i1e", 1)
_k0 = _cython("k0", 1)
_k0e = _cython("k0e", 1)
_k1 = _cython("k1", 1)
_k1e = _cython("k1e", 1)
_j0 = _cython("j0", 1)
_j1 = _cython("j1", 1)
_y0 = _cython("y0", 1)
_y1 = _cython("y1", 1)
_ndtr = _cython("__pyx_fuse_1ndtr", 1)
_ndtri = _cython("ndtri", 1)
_log_ndtr = _cython("__pyx_fuse_1log_ndtr", 1)
_entr = _cython("entr", 1)
_xlog1py = _cython("__pyx_fuse_1xlog1py", 2)
_airy_sig = types.void(types.float64, *(types.CPointer(types.float64),) * 4)
llvm.add_symbol("gputensor_special_airy",
                get_cython_function_address("scipy.special.cython_special", "__pyx_fuse_1airy"))
_airy = types.ExternalFunction("gputensor_special_airy", _airy_sig)

# libm's reentrant lgamma_r / lgammaf_r (float64 lgamma is PyTorch's std::lgamma; float32 has
# the vectorisable function further down): plain lgamma also stores the sign in the global
# signgam, which threads writing it at once turn into cache-line ping-pong that undoes the
# parallel loop.
_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
for _fn in ("lgammaf_r", "lgamma_r"):
    llvm.add_symbol(f"gputensor_special_{_fn}",
                    ctypes.cast(getattr(_LIBM, _fn), ctypes.c_void_p).value)


@intrinsic
def _lgamma_r(typingctx, x):
    """libm's lgamma_r (float64) or lgammaf_r (float32), the sign left in a stack slot."""
    if x not in (types.float32, types.float64):
        return None
    single = x == types.float32

    def codegen(context, builder, signature, args):
        ft = llvm_ir.FloatType() if single else llvm_ir.DoubleType()
        i32 = llvm_ir.IntType(32)
        fnty = llvm_ir.FunctionType(ft, [ft, i32.as_pointer()])
        name = "gputensor_special_lgammaf_r" if single else "gputensor_special_lgamma_r"
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        sign = cgutils.alloca_once(builder, i32)
        return builder.call(fn, [args[0], sign])
    return x(x), codegen

_PI = 3.141592653589793
# NumPy's error model: x / 0 gives inf or NaN, as in the generated kernels, not an exception.
_jit = njit(cache=True, error_model="numpy")


def _vocab(name: str):  # noqa: ANN202
    """A vocabulary name with per-type implementations (the overloads below)."""
    def fn(*args: object) -> object:
        raise TypeError(f"{name}() is an elementwise-kernel function; it runs inside Numba code")
    fn.__name__ = fn.__qualname__ = name
    return fn


lgamma = _vocab("lgamma")
erfinv = _vocab("erfinv")


# -- float32 lgamma, vectorisable -------------------------------------------------------------
# libm's lgammaf_r costs ~14 ns an element, one at a time; PyTorch's CPU kernel (vectorised)
# ~7 ns. Here, in float64 and branch-free (so the elementwise loops vectorise): Lanczos'
# approximation (g = 7, n = 9, the classic coefficients) with its partial-fraction sum folded
# into one ratio of degree-8 polynomials, and the reflection formula below 1/2 with sin(pi x)
# from its Taylor series on [-1/2, 1/2]. Rounded once to float32: within 0.5 ulp of
# scipy.special.gammaln over (-5e8, 3.4e38) (libm's lgammaf: 5 ulp, PyTorch's: 300 ulp near the
# negative roots); +inf at the poles and at +-inf, as PyTorch.
_LANCZOS_G = 7.0
_LANCZOS_C = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
              -176.61502916214059, 12.507343278686905, -0.13857109526572012,
              9.9843695780195716e-6, 1.5056327351493116e-7)


def _lanczos_ratio() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """c0 + sum_i c_i / (z + i) as P(z) / Q(z), Q = prod_i (z + i) (coefficients from the
    highest degree down, summed exactly before rounding)."""
    from fractions import Fraction

    def times(p: list, q: list) -> list:
        r = [Fraction(0)] * (len(p) + len(q) - 1)
        for i, a in enumerate(p):
            for j, b in enumerate(q):
                r[i + j] += a * b
        return r

    c = [Fraction(v) for v in _LANCZOS_C]
    q = [Fraction(1)]
    for i in range(1, 9):
        q = times(q, [Fraction(i), Fraction(1)])
    p = [c[0] * v for v in q]
    for i in range(1, 9):
        rest = [Fraction(1)]
        for j in range(1, 9):
            rest = rest if j == i else times(rest, [Fraction(j), Fraction(1)])
        for k, v in enumerate(rest):
            p[k] += c[i] * v
    return tuple(float(v) for v in reversed(p)), tuple(float(v) for v in reversed(q))


_LANCZOS_P, _LANCZOS_Q = _lanczos_ratio()
_HALF_LOG_2PI = 0.9189385332046727
_LOG_PI = 1.1447298858494002
_SINPI = tuple((-1) ** k * math.pi ** (2 * k + 1) / math.factorial(2 * k + 1) for k in range(12))


@njit(inline="always", error_model="numpy")
def _lgamma_lanczos(y):
    """lgamma(y) = head + log(ratio) for y >= 1/2, float64, as (head, ratio)."""
    z = y - 1.0
    zc = min(z, 1e15)  # beyond, the ratio is c0 to double precision
    p = _LANCZOS_P[0]
    q = _LANCZOS_Q[0]
    for k in range(1, 9):
        p = p * zc + _LANCZOS_P[k]
        q = q * zc + _LANCZOS_Q[k]
    t = z + _LANCZOS_G + 0.5
    return _HALF_LOG_2PI + (z + 0.5) * log_f64(t) - t, p / q


@njit(inline="always", error_model="numpy")
def _abs_sinpi(x):
    r = x - np.round(x)
    r2 = r * r
    s = _SINPI[11]
    for k in range(10, -1, -1):
        s = s * r2 + _SINPI[k]
    return abs(r * s)


@njit(inline="always", error_model="numpy")
def _lgamma_float32(a):
    z = np.float64(a)
    left = z < 0.5
    head, ratio = _lgamma_lanczos(1.0 - z if left else z)
    # reflection: lgamma(z) = log(pi) - log|sin(pi z)| - lgamma(1 - z), the two logs of
    # ratio and sine taken as one (-log 0 = inf at the poles)
    tail = log_f64(ratio * _abs_sinpi(z) if left else ratio)
    r = _LOG_PI - head - tail if left else head + tail
    r = 0.0 if (z == 1.0) | (z == 2.0) else r
    r = np.inf if abs(z) == np.inf else r
    return np.float32(r)


@overload(lgamma, jit_options={"cache": True}, inline="always")
def _lgamma(a):
    if a == types.float32:
        return lambda a: _lgamma_float32(a)
    return lambda a: _lgamma_r(np.float64(a))  # libm's, as PyTorch (std::lgamma)


@_jit
def digamma(a):
    return _psi(np.float64(a), 0)


@_jit
def erfc(a):
    return math.erfc(np.float64(a))


@intrinsic
def _f32_to_bits(typingctx, x):
    """A float32's bits as an int32."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(32))
    return types.int32(x), codegen


@intrinsic
def _bits_to_f32(typingctx, bits):
    """The float32 whose bits are the low 32 of the integer ``bits`` (Numba widens int32
    arithmetic to int64)."""
    if not isinstance(bits, types.Integer):
        return None
    width = bits.bitwidth

    def codegen(context, builder, signature, args):
        value = args[0]
        if width > 32:
            value = builder.trunc(value, llvm_ir.IntType(32))
        elif width < 32:
            value = builder.sext(value, llvm_ir.IntType(32))
        return builder.bitcast(value, llvm_ir.FloatType())
    return types.float32(bits), codegen


@njit(inline="always")
def _log_float32(x):
    # log of a positive normal float32 in inline arithmetic LLVM can vectorise (libm's logf is
    # a call per element): x = m 2^e, m in [sqrt(1/2), sqrt(2)), Cephes' logf polynomial in
    # m - 1; within 1 ulp.
    bits = _f32_to_bits(x)
    e = np.float32(((bits >> np.int32(23)) & np.int32(0xFF)) - np.int32(126))
    m = _bits_to_f32((bits & np.int32(0x7FFFFF)) | np.int32(0x3F000000))  # [0.5, 1)
    small = m < np.float32(0.707106781186547524)
    e = e - np.float32(1.0) if small else e
    m = (m + m - np.float32(1.0)) if small else (m - np.float32(1.0))
    z = m * m
    y = np.float32(7.0376836292e-2)
    y = y * m - np.float32(1.1514610310e-1)
    y = y * m + np.float32(1.1676998740e-1)
    y = y * m - np.float32(1.2420140846e-1)
    y = y * m + np.float32(1.4249322787e-1)
    y = y * m - np.float32(1.6668057665e-1)
    y = y * m + np.float32(2.0000714765e-1)
    y = y * m - np.float32(2.4999993993e-1)
    y = y * m + np.float32(3.3333331174e-1)
    y = y * m * z
    y = y + np.float32(-2.12194440e-4) * e - np.float32(0.5) * z
    return m + y + np.float32(0.693359375) * e


@njit(inline="always")
def _erfinv_float32(x):
    # Giles' single-precision approximation ("Approximating the erfinv function", GPU Gems
    # 2010, the algorithm of CUDA's erfinvf): within a few ulp of float32. Both branches are
    # computed and one selected, so the loop vectorises.
    ax = abs(x)
    inside = ax < np.float32(1.0)
    t = (np.float32(1.0) - x) * (np.float32(1.0) + x)
    w = -_log_float32(t if inside else np.float32(0.5))
    c = w - np.float32(2.5)
    p = np.float32(2.81022636e-08)
    p = np.float32(3.43273939e-07) + p * c
    p = np.float32(-3.5233877e-06) + p * c
    p = np.float32(-4.39150654e-06) + p * c
    p = np.float32(0.00021858087) + p * c
    p = np.float32(-0.00125372503) + p * c
    p = np.float32(-0.00417768164) + p * c
    p = np.float32(0.246640727) + p * c
    p = np.float32(1.50140941) + p * c
    d = np.sqrt(w) - np.float32(3.0)
    q = np.float32(-0.000200214257)
    q = np.float32(0.000100950558) + q * d
    q = np.float32(0.00134934322) + q * d
    q = np.float32(-0.00367342844) + q * d
    q = np.float32(0.00573950773) + q * d
    q = np.float32(-0.0076224613) + q * d
    q = np.float32(0.00943887047) + q * d
    q = np.float32(1.00167406) + q * d
    q = np.float32(2.83297682) + q * d
    r = (p if w < np.float32(5.0) else q) * x
    edge = np.float32(np.inf) * x if ax == np.float32(1.0) else x + np.float32(np.nan)
    return r if inside else edge


@overload(erfinv, jit_options={"cache": True}, inline="always")
def _erfinv(a):
    if a == types.float32:
        return lambda a: _erfinv_float32(a)
    return lambda a: _erfinv_f64(np.float64(a), 0)  # SciPy's (Boost's rational fits)


@_jit
def erfcx(a):
    return _erfcx(np.float64(a), 0)


@_jit
def _t_minus_log1p(t):
    """t - log(1 + t); for small |t| as t u - 2 (u^3/3 + u^5/5 + ...) with u = t / (2 + t)."""
    if abs(t) > 0.3:
        return t - math.log1p(t)
    u = t / (2.0 + t)
    u2 = u * u
    power = u * u2
    total = 0.0
    for j in range(3, 61, 2):
        term = power / j
        total += term
        if abs(term) <= abs(total) * 1.1102230246251565e-16:
            break
        power *= u2
    return t * u - 2.0 * total


@_jit
def _igamma_temme(a, x, upper):
    """Temme's uniform expansion (kernels/temme_gamma.py): Q(a, x) if upper, else P(a, x).
    SciPy's Cephes uses it only for |x - a| < 4.5 sqrt(a) once a > 200; past that its series
    stops after 2000 terms and is wrong by up to 100% for a >= 1e8 (mpmath agrees with this)."""
    mu = _t_minus_log1p((x - a) / a)
    eta = math.copysign(math.sqrt(2.0 * mu), x - a)
    inv_a = 1.0 / a
    total = 0.0
    for k in range(_TEMME_D.shape[0] - 1, -1, -1):
        ck = 0.0
        for n in range(_TEMME_D.shape[1] - 1, -1, -1):
            ck = ck * eta + _TEMME_D[k, n]
        total = total * inv_a + ck
    r = math.exp(-a * mu) / (2.5066282746310002 * math.sqrt(a)) * total
    y = eta * math.sqrt(0.5 * a)
    return 0.5 * math.erfc(y) + r if upper else 0.5 * math.erfc(-y) - r


@_jit
def _igamma_uses_temme(a, x):
    return a > _TEMME_ORDER_MIN and abs(x - a) < _TEMME_RATIO_MAX * a


# PyTorch's order of edge cases (before NaN propagation: igamma(nan, 0) is 0), then Temme's
# expansion for large orders near x = a (as the CUDA kernels), else SciPy.
@_jit
def igamma(a, x):
    a = np.float64(a)
    x = np.float64(x)
    if x < 0 or a < 0:
        return np.nan
    if a == 0:
        return 1.0 if x > 0 else np.nan
    if x == 0:
        return 0.0
    if np.isinf(a):
        return np.nan if np.isinf(x) else 0.0
    if np.isinf(x):
        return 1.0
    if _igamma_uses_temme(a, x):
        return _igamma_temme(a, x, False)
    return _gammainc(a, x, 0)


@_jit
def igammac(a, x):
    a = np.float64(a)
    x = np.float64(x)
    if x < 0 or a < 0:
        return np.nan
    if a == 0:
        return 0.0 if x > 0 else np.nan
    if x == 0:
        return 1.0
    if np.isinf(a):
        return np.nan if np.isinf(x) else 1.0
    if np.isinf(x):
        return 0.0
    if _igamma_uses_temme(a, x):
        return _igamma_temme(a, x, True)
    return _gammaincc(a, x, 0)


@_jit
def bessel_i0(a):
    return _i0(np.float64(a), 0)


@_jit
def bessel_i0e(a):
    return _i0e(np.float64(a), 0)


@_jit
def bessel_i1(a):
    return _i1(np.float64(a), 0)


@_jit
def bessel_i1e(a):
    return _i1e(np.float64(a), 0)


# K0/K1 are real only for x >= 0; PyTorch gives NaN below 0 and inf at 0 (as Cephes does).
@_jit
def bessel_k0(a):
    return _k0(np.float64(a), 0)


@_jit
def bessel_k0e(a):
    return _k0e(np.float64(a), 0)


@_jit
def bessel_k1(a):
    return _k1(np.float64(a), 0)


@_jit
def bessel_k1e(a):
    return _k1e(np.float64(a), 0)


@_jit
def bessel_j0(a):
    return _j0(np.float64(a), 0)


@_jit
def bessel_j1(a):
    return _j1(np.float64(a), 0)


@_jit
def bessel_y0(a):
    return _y0(np.float64(a), 0)


@_jit
def bessel_y1(a):
    return _y1(np.float64(a), 0)


@_jit
def ndtr(a):
    return _ndtr(np.float64(a), 0)


@_jit
def ndtri(a):
    return _ndtri(np.float64(a), 0)


@_jit
def log_ndtr(a):
    return _log_ndtr(np.float64(a), 0)


@_jit
def entr(a):
    return _entr(np.float64(a), 0)


@_jit
def xlog1py(a, b):
    return _xlog1py(np.float64(a), np.float64(b), 0)


@_jit
def spherical_j0(a):
    x = np.float64(a)
    if np.isinf(x):
        return 0.0
    if abs(x) < 0.5:  # the series, where sin(x)/x would cancel
        x2 = x * x
        return 1.0 + x2 * (-1.0 / 6 + x2 * (1.0 / 120 + x2 * (-1.0 / 5040 + x2 * (
            1.0 / 362880 + x2 * (-1.0 / 39916800 + x2 / 6227020800.0)))))
    return math.sin(x) / x


@_jit
def airy_ai(a):
    out = np.empty(4)
    _airy(np.float64(a), out.ctypes, out[1:].ctypes, out[2:].ctypes, out[3:].ctypes)
    return out[0]


# -- Hurwitz zeta, trigamma, polygamma, mvlgamma ------------------------------------------------
# (2k)! / B_2k, k = 1..12: the Euler-Maclaurin tail's coefficients.
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)
_MACHEP = 1.11022302462515654042e-16


@_jit
def zeta(x, q):
    """sum_k (k + q)^-x, by Euler-Maclaurin summation (Cephes' algorithm, as PyTorch)."""
    x = np.float64(x)
    q = np.float64(q)
    if x == 1.0:
        return np.inf
    if x < 1.0:
        return np.nan
    if q <= 0.0:
        if q == math.floor(q):
            return np.inf
        if x != math.floor(x):
            return np.nan  # q^-x is not real
    s = q ** -x
    a = q
    i = 0
    b = 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -x
        s += b
        if abs(b / s) < _MACHEP:
            return s
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    aa = 1.0
    k = 0.0
    for j in range(12):
        aa *= x + k
        b /= w
        t = aa * b / _ZETA_A[j]
        s = s + t
        if abs(t / s) < _MACHEP:
            return s
        k += 1.0
        aa *= x + k
        b /= w
        k += 1.0
    return s


@_jit
def trigamma(a):
    """psi'(x): reflection below 1/2, six recurrence steps, then the asymptotic series."""
    x = np.float64(a)
    sign = 1.0
    result = 0.0
    if x < 0.5:
        sign = -1.0
        s = math.sin(_PI * x)
        result -= _PI * _PI / (s * s)
        x = 1.0 - x
    for _ in range(6):
        result += 1.0 / (x * x)
        x += 1.0
    ixx = 1.0 / (x * x)
    result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return sign * result


@_jit
def polygamma(n, a):
    n = np.int64(n)
    if n == 0:
        return digamma(a)
    if n == 1:
        return trigamma(a)
    sign = 1.0 if n % 2 == 1 else -1.0  # (-1)^(n+1)
    return sign * math.exp(math.lgamma(n + 1.0)) * zeta(n + 1.0, a)


@_jit
def mvlgamma(a, p):
    """log of the multivariate gamma function of dimension p."""
    x = np.float64(a)
    s = p * (p - 1) * 0.25 * 1.1447298858494002  # log(pi)
    for j in range(np.int64(p)):
        s += math.lgamma(x - j * 0.5)
    return s


# -- orthogonal polynomials (PyTorch's edge cases and closed forms, then the recurrences) ------
@_jit
def cheb_t(x, n):
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if abs(x) == 1.0:
        return 1.0 if x > 0 or n % 2 == 0 else -1.0
    if n > 6 and abs(x) < 1.0:
        return math.cos(n * math.acos(x))
    if n == 0:
        return 1.0
    if n == 1:
        return x
    p, q = 1.0, x
    r = q
    for _ in range(2, n + 1):
        r = (x + x) * q - p
        p, q = q, r
    return r


@_jit
def cheb_u(x, n):
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if abs(x) == 1.0:
        return n + 1.0 if x > 0 or n % 2 == 0 else -(n + 1.0)
    if n > 8 and abs(x) < 1.0:
        t = math.acos(x)
        if math.sin(t) != 0.0:
            return math.sin((n + 1) * t) / math.sin(t)
        return (n + 1) * math.cos((n + 1) * t) / x
    if n == 0:
        return 1.0
    if n == 1:
        return x + x
    p, q = 1.0, x + x
    r = q
    for _ in range(2, n + 1):
        r = (x + x) * q - p
        p, q = q, r
    return r


@_jit
def cheb_v(x, n):
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if abs(x) == 1.0:
        if x > 0:
            return 1.0
        return n + n + 1.0 if n % 2 == 0 else -(n + n + 1.0)
    if n > 8 and abs(x) < 1.0:
        t = math.acos(x)
        if math.sin(t / 2) != 1.0:
            return math.cos((n + 0.5) * t) / math.cos(t / 2)
        return n + n + 1.0 if n % 2 == 0 else -(n + n + 1.0)
    if n == 0:
        return 1.0
    if n == 1:
        return x + x - 1.0
    p, q = 1.0, x + x - 1.0
    r = q
    for _ in range(2, n + 1):
        r = (x + x) * q - p
        p, q = q, r
    return r


@_jit
def cheb_w(x, n):
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if abs(x) == 1.0:
        if x > 0:
            return n + n + 1.0
        return 1.0 if n % 2 == 0 else -1.0
    if n > 8 and abs(x) < 1.0:
        t = math.acos(x)
        if math.cos(t / 2) != 1.0:
            return math.sin((n + 0.5) * t) / math.sin(t / 2)
        if x > 0:
            return n + n + 1.0
        return 1.0 if n % 2 == 0 else -1.0
    if n == 0:
        return 1.0
    if n == 1:
        return x + x + 1.0
    p, q = 1.0, x + x + 1.0
    r = q
    for _ in range(2, n + 1):
        r = (x + x) * q - p
        p, q = q, r
    return r


@_jit
def hermite_h(x, n):
    """Physicists' Hermite: H_k = 2x H_(k-1) - 2(k-1) H_(k-2)."""
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if n == 0:
        return 1.0
    p, q = 1.0, x + x
    for k in range(2, n + 1):
        p, q = q, (x + x) * q - 2.0 * (k - 1) * p
    return q


@_jit
def hermite_he(x, n):
    """Probabilists' Hermite: He_k = x He_(k-1) - (k-1) He_(k-2)."""
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if n == 0:
        return 1.0
    p, q = 1.0, x
    for k in range(2, n + 1):
        p, q = q, x * q - (k - 1.0) * p
    return q


@_jit
def laguerre_l(x, n):
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if abs(x) == 0.0 or n == 0:
        return 1.0
    p, q = 1.0, 1.0 - x
    for k in range(1, n):
        p, q = q, ((k + k + 1.0 - x) * q - k * p) / (k + 1.0)
    return q


@_jit
def legendre_p(x, n):
    x = np.float64(x)
    n = np.int64(n)
    if n < 0:
        return 0.0
    if abs(x) == 1.0:
        return 1.0 if x > 0 or n % 2 == 0 else -1.0
    if n == 0:
        return 1.0
    p, q = 1.0, x
    for k in range(1, n):
        p, q = q, ((k + k + 1.0) * x * q - k * p) / (k + 1.0)
    return q
