"""The scalar function vocabulary of elementwise expressions, for Numba.

Elementwise ops are declared as one expression over these names (plus Python arithmetic,
comparisons, ``and/or/not`` and ``x if c else y``). The CUDA backend maps the same names to
device functions in its common header. Type-dependent behaviour (ints vs floats vs complex,
bool) is chosen at compile time with Numba overloads; where C/LLVM leaves a case undefined
(integer overflow in division, out-of-range shifts, complex division by zero), the functions
here give PyTorch's answer.
"""

from __future__ import annotations

import cmath
import math
import warnings
from collections.abc import Callable

import numpy as np
from numba import njit, types
from numba.core.errors import NumbaIRAssumptionWarning as _IRAssumptionWarning
from numba.extending import overload

from .fast_math import erf_f32 as _erf_f32
from .fast_math import exp_f32 as _exp_f32
from .fast_math import expm1_f32 as _expm1_f32
from .fast_math import gelu_f32 as _gelu_f32
from .fast_math import gelu_grad_f32 as _gelu_grad_f32
from .fast_math import log1p_f32 as _log1p_f32
from .fast_math import log2_f32 as _log2_f32
from .fast_math import log10_f32 as _log10_f32
from .fast_math import log_f32 as _log_f32
from .fast_math import sigmoid_f32 as _sigmoid_f32
from .fast_math import softplus_f32 as _softplus_f32
from .fast_math import tanh_f32 as _tanh_f32
from .fast_math64 import erf_f64 as _erf_f64
from .fast_math64 import exp_f64 as _exp_f64
from .fast_math64 import gelu_f64 as _gelu_f64
from .fast_math64 import gelu_grad_f64 as _gelu_grad_f64
from .fast_math64 import log1p_f64 as _log1p_f64
from .fast_math64 import log_f64 as _log_f64
from .fast_math64 import sigmoid_f64 as _sigmoid_f64
from .fast_math64 import softplus_f64 as _softplus_f64
from .fast_math64 import softplus_grad_f64 as _softplus_grad_f64
from .fast_math64 import tanh_f64 as _tanh_f64
from .scalar_special import *  # noqa: F403  (torch.special's functions, same vocabulary)

# Inlining a vocabulary function whose body has conditional expressions into a kernel with
# several loops (the fused recurrences' gates) makes Numba's pedantic SSA check report the
# inlined phi variables as "not in scope" and ask for a bug report, a page of text at the
# first compile; the compiled code is unaffected (the kernels are tested against NumPy).
warnings.filterwarnings("ignore", category=_IRAssumptionWarning,
                        message=r"[^']*variable '_\w+__locals___lambda__[\w.]*' is not in scope")

# Plain NumPy ufuncs work on Numba scalars (float, complex) and keep float32 as float32.
sqrt = np.sqrt
atan2 = np.arctan2
hypot = np.hypot
copysign = np.copysign
floor = np.floor
ceil = np.ceil
trunc = np.trunc
rint = np.rint  # round half to even, like torch.round


def _vocab(name: str) -> Callable:
    """A vocabulary name whose typed implementations are the Numba overloads below."""
    def fn(*args: object) -> object:
        raise TypeError(f"{name}() is an elementwise-kernel function; it runs inside Numba code")
    fn.__name__ = fn.__qualname__ = name
    return fn


# -- complex inverse functions: cmath's for finite values (Numba's np.arccosh loses the sign of
# a zero imaginary part), C99 Annex G's (PyTorch's) for infinite and NaN parts, where Numba's
# differ (acosh(inf i) is inf + i pi/2, not NaN) ----------------------------------------------
_PI2, _PI4 = math.pi / 2, math.pi / 4


@njit(cache=True)
def _asinh_c99(x, y):
    if math.isinf(x):
        return complex(x, math.copysign(_PI4, y) if math.isinf(y) else y if y != y
                       else math.copysign(0.0, y))
    if math.isinf(y):
        return complex(abs(y), x) if x != x else complex(math.copysign(y, x),
                                                         math.copysign(_PI2, y))
    if x != x and y == 0:
        return complex(x, y)
    return complex(math.nan, math.nan)


@njit(cache=True)
def _acosh_c99(x, y):
    if math.isinf(x):
        if y != y:
            return complex(math.inf, y)
        return complex(math.inf, math.copysign((_PI4 if x > 0 else 3 * _PI4) if math.isinf(y)
                                               else (0.0 if x > 0 else math.pi), y))
    if math.isinf(y):
        return complex(math.inf, x if x != x else math.copysign(_PI2, y))
    if x == 0:
        return complex(y, _PI2)
    return complex(math.nan, math.nan)


@njit(cache=True)
def _atanh_c99(x, y):
    if math.isinf(x) or math.isinf(y):
        return complex(math.copysign(0.0, x if x == x else 1.0),
                       y if y != y else math.copysign(_PI2, y))
    if x == 0:
        return complex(x, y)
    return complex(math.nan, math.nan)


@njit(inline="always")
def _finite(z):
    return math.isfinite(z.real) and math.isfinite(z.imag)


@njit(cache=True)
def _casin(z):
    if _finite(z):
        return cmath.asin(z)
    if math.isinf(z.real) and z.imag != z.imag:
        return complex(z.imag, abs(z.real))
    r = _asinh_c99(-z.imag, z.real)
    return complex(r.imag, -r.real)


@njit(cache=True)
def _cacos(z):
    if _finite(z):
        return cmath.acos(z)
    h = _acosh_c99(z.real, z.imag)
    return complex(abs(h.imag) if h.imag == h.imag else h.imag,
                   -math.copysign(h.real, z.imag if z.imag == z.imag else 1.0))


@njit(cache=True)
def _catan(z):
    if _finite(z):
        return cmath.atan(z)
    r = _atanh_c99(-z.imag, z.real)
    return complex(r.imag, -r.real)


def _inverse(name: str, numpy_fn: Callable, complex_fn: Callable) -> Callable:
    """A vocabulary function: NumPy's ``numpy_fn`` for real numbers, ``complex_fn`` for
    complex ones."""
    stub = _vocab(name)

    @overload(stub, inline="always")
    def impl(a):
        if isinstance(a, types.Complex):
            return lambda a: complex_fn(a)
        return lambda a: numpy_fn(a)
    return stub


asin = _inverse("asin", np.arcsin, _casin)
acos = _inverse("acos", np.arccos, _cacos)
atan = _inverse("atan", np.arctan, _catan)
@njit(cache=True)
def _casinh(z):
    return cmath.asinh(z) if _finite(z) else _asinh_c99(z.real, z.imag)


@njit(cache=True)
def _cacosh(z):
    return cmath.acosh(z) if _finite(z) else _acosh_c99(z.real, z.imag)


@njit(cache=True)
def _catanh(z):
    return cmath.atanh(z) if _finite(z) else _atanh_c99(z.real, z.imag)


asinh = _inverse("asinh", np.arcsinh, _casinh)
acosh = _inverse("acosh", np.arccosh, _cacosh)
atanh = _inverse("atanh", np.arctanh, _catanh)


isnan = _vocab("isnan")
isinf = _vocab("isinf")
isfinite = _vocab("isfinite")
bitnot = _vocab("bitnot")
sign = _vocab("sign")
ipow = _vocab("ipow")
fmod = _vocab("fmod")
mod = _vocab("mod")
floordiv = _vocab("floordiv")
tdiv = _vocab("tdiv")
truediv = _vocab("truediv")
lshift = _vocab("lshift")
rshift = _vocab("rshift")
real = _vocab("real")
abs2 = _vocab("abs2")
round_decimals = _vocab("round_decimals")
nan_to_num = _vocab("nan_to_num")
logaddexp = _vocab("logaddexp")
# float32 (and float64) through kernels/cpu/fast_math.py (fast_math64.py): vectorisable.
tanh = _vocab("tanh")
sigmoid = _vocab("sigmoid")
erf = _vocab("erf")
gelu_erf = _vocab("gelu_erf")
gelu_erf_grad = _vocab("gelu_erf_grad")
def _fast_unary(name: str, numpy_fn: Callable, f32: Callable, f64: Callable | None = None
                ) -> Callable:
    """A vocabulary function: the vectorisable polynomial of kernels/cpu/fast_math.py for
    float32 (and fast_math64.py for float64 where given), NumPy's ``numpy_fn`` otherwise;
    inlined, so the generated loops stay vectorisable."""
    stub = _vocab(name)

    @overload(stub, inline="always")
    def impl(a):
        if a == types.float32:
            return lambda a: f32(a)
        if f64 is not None and a == types.float64:
            return lambda a: f64(a)
        if name == "exp" and isinstance(a, types.Complex):
            return lambda a: _cexp(a)
        if name == "log1p" and isinstance(a, types.Complex):
            return lambda a: _clog1p(a)
        return lambda a: numpy_fn(a)
    return stub


@njit(cache=True)
def _cexp(a):
    # C99's cexp(x + 0i) = exp(x) + 0i (PyTorch's): exp(1e30) * sin(0) would be NaN
    return complex(np.exp(a.real), a.imag) if a.imag == 0 else np.exp(a)


@njit(cache=True)
def _clog1p(a):
    # PyTorch's complex log1p is NaN + NaN i once a part is NaN; Numba's keeps an infinite
    # part's inf (log1p(inf + NaN i) would be inf + NaN i)
    if math.isnan(a.real) or math.isnan(a.imag):
        return type(a)(complex(math.nan, math.nan))
    return np.log1p(a)


exp = _fast_unary("exp", np.exp, _exp_f32, _exp_f64)
exp2 = _vocab("exp2")


@overload(exp2, inline="always")
def _exp2(a):
    if isinstance(a, types.Complex):  # 2 ** (x + 0i) is real, as C99's cexp keeps it
        return lambda a: complex(np.exp2(a.real), a.imag) if a.imag == 0 else np.exp2(a)
    return lambda a: np.exp2(a)
log = _fast_unary("log", np.log, _log_f32, _log_f64)
log1p = _fast_unary("log1p", np.log1p, _log1p_f32, _log1p_f64)
expm1 = _fast_unary("expm1", np.expm1, _expm1_f32)
log2 = _fast_unary("log2", np.log2, _log2_f32)
log10 = _fast_unary("log10", np.log10, _log10_f32)


@njit(inline='always')
def _complex_tanh(z):
    """tanh of a complex number without overflow (Kahan's form, as C99's ctanh): Numba's
    np.tanh divides infinities and gives NaN once the real part passes ~355."""
    x, y = z.real, z.imag
    if math.isnan(x):
        return type(z)(complex(x, y if y == 0 else x))
    if math.isinf(x):
        im = math.sin(y) * math.cos(y) if math.isfinite(y) else 0.0
        return type(z)(complex(math.copysign(1.0, x), math.copysign(0.0, im)))
    if not math.isfinite(y):
        return type(z)(complex(x if x == 0 else y - y, y - y))
    if abs(x) > 22.0:   # tanh(x) rounds to +-1; the imaginary part decays as exp(-2|x|)
        e = math.exp(-abs(x))
        return type(z)(complex(math.copysign(1.0, x), 4.0 * math.sin(y) * math.cos(y) * e * e))
    t = math.tan(y)
    beta = 1.0 + t * t
    s = math.sinh(x)
    rho = math.sqrt(1.0 + s * s)
    den = 1.0 + beta * s * s
    return type(z)(complex(beta * rho * s / den, t / den))


# sinh/cosh (and sin z = -i sinh(iz), cos z = cosh(iz), tan z = -i tanh(iz)) of complex numbers
# with C99 Annex G's values (PyTorch's) where a part is zero, infinite or NaN: Numba's formulas
# give sinh(1e30 + 0i) = inf + NaN i (cosh(x) sin(0) = inf * 0) and NaNs for infinite parts.
@njit(cache=True)
def _complex_sinh(z):
    x, y = z.real, z.imag
    if y == 0:
        return complex(math.sinh(x) if x == x else x, y)
    if x == 0 and math.isfinite(y):
        return complex(x, math.sin(y))
    if x == 0:
        return complex(x, math.nan)
    if math.isinf(x):
        if math.isfinite(y):
            return complex(x * math.cos(y), math.inf * math.sin(y))
        return complex(math.inf, math.nan)     # (C99 leaves the sign to the library)
    if not (math.isfinite(x) and math.isfinite(y)):
        return complex(math.nan, math.nan)
    return complex(np.sinh(complex(x, y)))


@njit(cache=True)
def _complex_cosh(z):
    x, y = z.real, z.imag
    if y == 0:
        return complex(math.cosh(x), y * math.copysign(1.0, x)) if x == x else complex(x, y)
    if x == 0 and math.isfinite(y):
        return complex(math.cos(y), x * math.sin(y))
    if x == 0:
        return complex(math.nan, x)
    if math.isinf(x):
        if math.isfinite(y):
            return complex(math.inf * math.cos(y), x * math.sin(y))
        return complex(math.inf, math.nan)
    if not (math.isfinite(x) and math.isfinite(y)):
        return complex(math.nan, math.nan)
    return complex(np.cosh(complex(x, y)))


@njit(cache=True)
def _complex_sin(z):
    s = _complex_sinh(complex(-z.imag, z.real))
    if math.isinf(s.real) and s.imag != s.imag:
        return complex(s.imag, math.inf)       # NaN + i inf, the sign as PyTorch's
    return complex(s.imag, -s.real)


@njit(cache=True)
def _complex_cos(z):
    return _complex_cosh(complex(-z.imag, z.real))


@njit(cache=True)
def _complex_tan(z):
    t = _complex_tanh(complex(-z.imag, z.real))
    return complex(t.imag, -t.real)


sin = _inverse("sin", np.sin, _complex_sin)
cos = _inverse("cos", np.cos, _complex_cos)
tan = _inverse("tan", np.tan, _complex_tan)
sinh = _inverse("sinh", np.sinh, _complex_sinh)
cosh = _inverse("cosh", np.cosh, _complex_cosh)


@overload(tanh, inline="always")
def _tanh(a):
    if a == types.float32:
        return lambda a: _tanh_f32(a)
    if a == types.float64:
        return lambda a: _tanh_f64(a)
    if isinstance(a, types.Complex):
        return lambda a: _complex_tanh(a)
    return lambda a: np.tanh(a)


@overload(sigmoid, inline="always")
def _sigmoid(a):
    if a == types.float32:
        return lambda a: _sigmoid_f32(a)
    if a == types.float64:
        return lambda a: _sigmoid_f64(a)
    return lambda a: 1.0 / (1.0 + np.exp(-a))


@overload(erf, inline="always")
def _erf(a):
    if a == types.float32:
        return lambda a: _erf_f32(a)
    if a == types.float64:
        return lambda a: _erf_f64(a)
    return lambda a: math.erf(a)


@overload(gelu_erf, inline="always")
def _gelu_erf(a):
    if a == types.float32:
        return lambda a: _gelu_f32(a)
    if a == types.float64:
        return lambda a: _gelu_f64(a)
    return lambda a: 0.5 * a * (1.0 + math.erf(a * 0.7071067811865476))


@overload(gelu_erf_grad, inline="always")
def _gelu_erf_grad(a):
    if a == types.float32:
        return lambda a: _gelu_grad_f32(a)
    if a == types.float64:
        return lambda a: _gelu_grad_f64(a)

    def impl(a):
        cdf = 0.5 * (1.0 + math.erf(a * 0.7071067811865476))
        return cdf + a * 0.3989422804014327 * np.exp(-0.5 * a * a)
    return impl


def _int_or_bool(t: types.Type) -> bool:
    return isinstance(t, types.Integer | types.Boolean)


def _any_float(*ts: types.Type) -> bool:
    return any(isinstance(t, types.Float) for t in ts)


def _any_complex(*ts: types.Type) -> bool:
    return any(isinstance(t, types.Complex) for t in ts)


# -- predicates ------------------------------------------------------------------------------
@overload(isnan)
def _isnan(a):
    if _int_or_bool(a):
        return lambda a: False
    return lambda a: np.isnan(a)


@overload(isinf)
def _isinf(a):
    if _int_or_bool(a):
        return lambda a: False
    return lambda a: np.isinf(a)


@overload(isfinite)
def _isfinite(a):
    if _int_or_bool(a):
        return lambda a: True
    return lambda a: np.isfinite(a)


@overload(real)
def _real(a):
    # Scalar params arrive in the compute dtype; real() lets one expression serve complex too.
    if isinstance(a, types.Complex):
        return lambda a: a.real
    return lambda a: a


@overload(abs2)
def _abs2(a):
    # |a| ** 2 without the square root: re * re + im * im for complex (norm2's terms), inf
    # when a part is infinite (|nan + inf i| is inf, as hypot has it)
    if isinstance(a, types.Complex):
        return lambda a: (a.real * a.real if math.isinf(a.real) else a.imag * a.imag
                          if math.isinf(a.imag) else a.real * a.real + a.imag * a.imag)
    return lambda a: a * a


# -- sign and bits ---------------------------------------------------------------------------
@overload(bitnot)
def _bitnot(a):
    if isinstance(a, types.Boolean):
        return lambda a: not a
    return lambda a: ~a


@overload(sign)
def _sign(a):
    if isinstance(a, types.Boolean):
        return lambda a: a
    if isinstance(a, types.Complex):  # torch.sgn: z / |z|
        return lambda a: a / abs(a) if a != 0 else a * 0
    # PyTorch's (0 < a) - (a < 0) for ints and floats alike: sign(nan) = 0, sign(-inf) = -1.
    return lambda a: (a > 0) - (a < 0)


@overload(lshift)
def _lshift(a, b):
    def impl(a, b):
        # Shifts outside [0, 64) are undefined in LLVM; PyTorch defines them as 0. The 64-bit
        # result is truncated on store, which matches a narrower type's own bit width.
        return np.int64(a) << np.int64(b) if 0 <= b < 64 else np.int64(0)
    return impl


@overload(rshift)
def _rshift(a, b):
    def impl(a, b):
        # Out-of-range shifts keep only the sign bits, as in PyTorch.
        x = np.int64(a)
        return x >> np.int64(b) if 0 <= b < 64 else x >> np.int64(63)
    return impl


# -- powers ----------------------------------------------------------------------------------
@overload(ipow)
def _ipow(a, b):
    if _int_or_bool(a) and _int_or_bool(b):
        def impl(a, b):
            # Exponentiation by squaring with wrap-around, like C++ integer pow.
            result = a - a + 1
            base = a
            e = b
            if e < 0:
                return 0 if abs(a) != 1 else (1 if a == 1 or e % 2 == 0 else -1)
            while e:
                if e & 1:
                    result = result * base
                base = base * base
                e >>= 1
            return result
        return impl
    if _any_complex(a, b):
        return lambda a, b: _complex_pow(a, b)
    return lambda a, b: a ** b


ipow_scalar = _vocab("ipow_scalar")


@overload(ipow_scalar)
def _ipow_scalar(a, b):
    """``a ** b`` for a Python-number exponent ``b`` (pow's Tensor-Scalar form). PyTorch
    special-cases complex exponents 0 (ones), 1 (a copy), 2, 3, -2 (plain products), 0.5,
    -0.5 and -1 (sqrt, rsqrt, reciprocal), which differ from exp(b log a) at zero, infinite
    and NaN bases (0j ** 0 is 1 here, NaN for a tensor exponent)."""
    if not _any_complex(a, b):
        return lambda a, b: ipow(a, b)

    def impl(a, b):
        bc = complex(b)
        if bc.imag == 0:
            e = bc.real
            if e == 0:
                return type(a)(complex(1.0, 0.0))
            if e == 1:
                return a
            if e == 2:
                return a * a
            if e == 3:
                return a * a * a
            if e == 0.5:
                return type(a)(sqrt(a))
            if e == -0.5:
                return type(a)(rsqrt(a))
            if e == -1:
                return type(a)(truediv(1, a))
            if e == -2:
                return type(a)(truediv(1, a * a))
        return ipow(a, b)
    return impl


ipow_scalar_base = _vocab("ipow_scalar_base")


@overload(ipow_scalar_base)
def _ipow_scalar_base(a, b):
    """``a ** b`` for a Python-number base ``a`` (pow's Scalar-Tensor form): PyTorch fills
    ones for a base 1 (1 ** (inf + 0j) is 1, exp(b log 1) NaN); any other base is ipow's."""
    if not _any_complex(a, b):
        return lambda a, b: ipow(a, b)
    return lambda a, b: type(b)(complex(1.0, 0.0)) if a == 1 else ipow(a, b)


@njit(cache=True)
def _complex_pow(a, b):
    # A small integer power by repeated squaring (exact where exp(b log a) is not: 1j ** 1
    # would be 6e-17+1j), as NumPy, PyTorch's CPU kernel and the CUDA backend compute it.
    # Only where it stays finite: an infinite base or an overflow takes exp(b log a), whose
    # special values PyTorch's tensor-exponent pow gives ((-inf) ** 0 is NaN, 2 ** 255 in
    # complex64 is inf+0j, not the inf+nanj that squaring inf+0j makes).
    bc = complex(b)
    if (bc.imag == 0 and bc.real == math.trunc(bc.real) and abs(bc.real) <= 64 and a != 0
            and math.isfinite(a.real) and math.isfinite(a.imag)):
        n = int(abs(bc.real))
        r = a - a + 1
        x = a
        while n:
            if n & 1:
                r = r * x
            x = x * x
            n >>= 1
        if bc.real < 0:
            r = type(a)(_complex_div(complex(1.0, 0.0), complex(r), 1.0))
        if math.isfinite(r.real) and math.isfinite(r.imag):
            return r
    # PyTorch's exp(b * log(a)), with C99's complex product, log and exp (their special
    # values): a zero base has log -inf + i arg(a), so 0 ** 0 is NaN, 0 ** 2 is 0 and
    # 0 ** -1 is inf + NaN i, as glibc's cpow gives them
    la = complex(-math.inf, math.atan2(a.imag, a.real)) if a == 0 else cmath.log(a)
    re, im = _mul_c99(b.real, b.imag, la.real, la.imag)
    if im == 0 and not math.isnan(re):
        # C99's cexp(x + 0i) is exp(x) + 0i; Numba's exp * (cos 0 + i sin 0) makes inf * 0 NaN
        return type(a)(complex(math.exp(re), im))
    return cmath.exp(type(a)(complex(re, im)))


@njit(cache=True)
def _mul_c99(a, b, c, d):
    """(a + bi)(c + di) as C99 Annex G's __muldc3: a NaN result with an infinite factor is
    recovered as the infinity the product tends to ((-inf + inf i) * 0.7 is -inf + inf i)."""
    x, y = a * c - b * d, a * d + b * c
    if not (math.isnan(x) and math.isnan(y)):
        return x, y
    recalc = False
    if math.isinf(a) or math.isinf(b):
        a = math.copysign(1.0 if math.isinf(a) else 0.0, a)
        b = math.copysign(1.0 if math.isinf(b) else 0.0, b)
        c = math.copysign(0.0, c) if math.isnan(c) else c
        d = math.copysign(0.0, d) if math.isnan(d) else d
        recalc = True
    if math.isinf(c) or math.isinf(d):
        c = math.copysign(1.0 if math.isinf(c) else 0.0, c)
        d = math.copysign(1.0 if math.isinf(d) else 0.0, d)
        a = math.copysign(0.0, a) if math.isnan(a) else a
        b = math.copysign(0.0, b) if math.isnan(b) else b
        recalc = True
    if not recalc and (math.isinf(a * c) or math.isinf(b * d) or math.isinf(a * d)
                       or math.isinf(b * c)):
        a = math.copysign(0.0, a) if math.isnan(a) else a
        b = math.copysign(0.0, b) if math.isnan(b) else b
        c = math.copysign(0.0, c) if math.isnan(c) else c
        d = math.copysign(0.0, d) if math.isnan(d) else d
        recalc = True
    if recalc:
        return math.inf * (a * c - b * d), math.inf * (a * d + b * c)
    return x, y


# -- division --------------------------------------------------------------------------------
@overload(truediv)
def _truediv(a, b):
    if _any_complex(a, b):
        if types.complex128 in (a, b):
            return lambda a, b: _complex_div(complex(a), complex(b), 1.0)
        # complex64 divides in float, as PyTorch does (a real operand is a literal that takes
        # the compute type): in double, 1 / z would round differently
        return lambda a, b: _complex_div(np.complex64(a), np.complex64(b), np.float32(1.0))
    return lambda a, b: a / b


@njit(cache=True)
def _complex_div(x, y, one):
    # Smith's algorithm, as PyTorch and NumPy divide complex numbers, in the precision of
    # ``one``. Numba's own complex division raises ZeroDivisionError for a zero divisor where
    # PyTorch gives inf/nan.
    a, b, c, d = x.real, x.imag, y.real, y.imag
    if abs(c) >= abs(d):
        if c == 0 and d == 0:
            return complex(a / abs(c), b / abs(d))
        rat = d / c
        scl = one / (c + d * rat)
        return complex((a + b * rat) * scl, (b - a * rat) * scl)
    rat = c / d
    scl = one / (d + c * rat)
    return complex((a * rat + b) * scl, (b * rat - a) * scl)


@overload(floordiv)
def _floordiv(a, b):
    if _int_or_bool(a) and _int_or_bool(b):
        # INT_MIN // -1 traps in hardware; PyTorch wraps it to INT_MIN, which negation gives.
        return lambda a, b: -a if b == -1 else a // b
    return lambda a, b: a // b


@overload(tdiv)
def _tdiv(a, b):
    if _any_float(a, b):
        return lambda a, b: np.trunc(a / b)

    def impl(a, b):  # C's truncated integer division
        if b == -1:
            return -a  # INT_MIN / -1 wraps, as in PyTorch
        q = a // b
        if q < 0 and q * b != a:
            q += 1
        return q
    return impl


@overload(fmod)
def _fmod(a, b):
    if _any_float(a, b):
        return lambda a, b: np.fmod(a, b)

    def impl(a, b):  # C's truncated remainder for integers
        r = a % b
        if r != 0 and (r < 0) != (a < 0):
            r -= b
        return r
    return impl


@overload(mod)
def _mod(a, b):
    if _any_float(a, b):
        def impl(a, b):  # PyTorch's remainder: fmod, moved to the divisor's sign
            r = np.fmod(a, b)
            if r != 0 and (b < 0) != (r < 0):
                r += b
            return r
        return impl
    return lambda a, b: a % b


# -- logaddexp -------------------------------------------------------------------------------
@overload(logaddexp)
def _logaddexp(a, b):
    if _any_complex(a, b):
        def impl(a, b):
            # PyTorch's _log_add_exp_helper: the operands ordered by real part (a NaN operand
            # first), NaN in either part infectious, equal infinite real parts without inf - inf.
            lo, hi = b, a
            if isnan(b):
                lo, hi = b, b
            elif isnan(a):
                lo, hi = a, a
            elif a.real < b.real:
                lo, hi = a, b
            if isnan(lo):
                return hi - hi + complex(math.nan, math.nan)
            if not math.isfinite(lo.real) and lo.real == hi.real:
                return lo if lo.real < 0 else np.log(np.exp(lo) + np.exp(hi))
            return np.log1p(np.exp(lo - hi)) + hi
        return impl
    # Equal operands (infinities included) give a + log 2.
    return lambda a, b: (a + 0.6931471805599453 if a == b
                         else maximum(a, b) + np.log1p(np.exp(-abs(a - b))))


# -- min/max ---------------------------------------------------------------------------------
@njit(cache=True)
def maximum(a, b):
    # NaN-propagating, like torch.maximum.
    if isnan(a):
        return a
    if isnan(b):
        return b
    return a if a >= b else b


@njit(cache=True)
def minimum(a, b):
    if isnan(a):
        return a
    if isnan(b):
        return b
    return a if a <= b else b


# -- rounding --------------------------------------------------------------------------------
@overload(round_decimals)
def _round_decimals(a, decimals):
    if _int_or_bool(a):
        return lambda a, decimals: a  # integers are already round
    ty = a  # PyTorch scales in the input's own precision

    def impl(a, decimals):
        if decimals == 0:
            return np.rint(a)  # half to even
        if decimals > 0:
            p = ty(10.0 ** decimals)
            return np.rint(a * p) / p
        p = ty(10.0 ** -decimals)
        return np.rint(a / p) * p
    return impl


# -- gcd, lcm, nextafter, angle, frexp --------------------------------------------------------
gcd = _vocab("gcd")
lcm = _vocab("lcm")
angle = _vocab("angle")
frexp_mantissa = _vocab("frexp_mantissa")
frexp_exponent = _vocab("frexp_exponent")
nextafter = np.nextafter


@njit(inline="always")
def _sext(x, bits):
    # x's low ``bits`` bits as a signed number (a store into the operand's own type); bits 0
    # (uint8 operands) or 64 keep x.
    if bits <= 0 or bits >= 64:
        return x
    m = np.int64(1) << (bits - 1)
    return ((x & ((m << 1) - 1)) ^ m) - m


@njit(inline="always")
def _in_type(x, bits):
    # An operand converted into the compute type: a signed one of ``bits`` bits, or uint8 (the
    # one unsigned integer dtype) for 0.
    if bits == 0:
        return x & 255
    return _sext(x, bits)


@njit(inline="always")
def _gcd64(x, y, bits):
    # PyTorch's calc_gcd in the operands' width: std::abs of INT_MIN wraps to INT_MIN, and the
    # loop takes C's truncated remainder (x == -1 only ever divides without remainder here).
    x = _sext(abs(_in_type(x, bits)), bits)
    y = _sext(abs(_in_type(y, bits)), bits)
    while x != 0:
        r = np.int64(0)
        if x != -1:
            r = y % x
            if r != 0 and (r < 0) != (y < 0):
                r -= x
        y = x
        x = r
    return y


@overload(gcd)
def _gcd(a, b, bits):
    return lambda a, b, bits: _gcd64(np.int64(a), np.int64(b), np.int64(bits))


@overload(lcm)
def _lcm(a, b, bits):
    def impl(a, b, bits):
        # |a / gcd * b|: operands narrower than int (bits 8, 16, unsigned) compute in C's int,
        # where nothing overflows, and truncate on store; int32 and int64 wrap before the abs.
        n = np.int64(bits)
        x, y = _in_type(np.int64(a), n), _in_type(np.int64(b), n)
        g = _gcd64(x, y, n)
        if g == 0:
            return np.int64(0)
        q = -x if g == -1 else x // g
        if g != -1 and q < 0 and q * g != x:
            q += 1   # C's truncated division
        r = q * y
        if n >= 32:
            r = _sext(r, n)
        return abs(r)
    return impl


@overload(angle)
def _angle(a):
    if isinstance(a, types.Complex):
        return lambda a: np.arctan2(a.imag, a.real)
    # real: pi for negatives, 0 otherwise (-0.0 included), NaN kept (PyTorch's angle_impl)
    return lambda a: a if np.isnan(a) else (3.141592653589793 if a < 0 else 0.0)


@overload(frexp_mantissa)
def _frexp_mantissa(a):
    # C's frexp; infinities and NaN are returned as they are (as glibc does).
    return lambda a: math.frexp(a)[0] if np.isfinite(a) else a


@overload(frexp_exponent)
def _frexp_exponent(a):
    return lambda a: math.frexp(a)[1] if np.isfinite(a) else 0


# -- activations and special functions ------------------------------------------------------
@njit(cache=True)
def relu(a):
    # 0 for negatives, else the input: keeps NaN and -0.0 (a * 0 would turn -inf into NaN).
    return 0 if a < 0 else a


@njit(cache=True)
def ldexp_int(a, b):
    # a * 2**b exactly, rounded once (C's ldexp); b holds an integer the caller clamped (the
    # clamp here only keeps the conversion defined for any value).
    return math.ldexp(a, 0 if b != b else int(min(max(b, -2200.0), 2200.0)))


@njit(cache=True)
def rsqrt(a):
    # truediv: Numba's own complex division raises ZeroDivisionError at 0 (PyTorch: inf+nanj)
    return truediv(1.0, np.sqrt(a))


softplus = _vocab("softplus")


@overload(softplus, inline="always")
def _softplus(a, beta, threshold):
    if a == types.float32:
        return lambda a, beta, threshold: (a if a * beta > threshold
                                           else _softplus_f32(a * beta) / beta)
    if a == types.float64:
        return lambda a, beta, threshold: _softplus_f64(a, beta, threshold)
    return lambda a, beta, threshold: (a if a * beta > threshold
                                       else np.log1p(np.exp(a * beta)) / beta)


@njit(cache=True, inline="always")
def gelu_tanh(a):
    # computed in float64 (the literals are), through the vocabulary's vectorisable tanh
    return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))


@njit(cache=True)
def _nan_to_num_real(a, nan, posinf, neginf):
    if isnan(a):
        return nan
    if isinf(a):
        return posinf if a > 0 else neginf
    return a


@overload(nan_to_num)
def _nan_to_num(a, nan, posinf, neginf):
    if isinstance(a, types.Complex):  # real and imaginary parts separately, like PyTorch
        def impl(a, nan, posinf, neginf):
            return complex(_nan_to_num_real(a.real, nan.real, posinf.real, neginf.real),
                           _nan_to_num_real(a.imag, nan.real, posinf.real, neginf.real))
        return impl
    return lambda a, nan, posinf, neginf: _nan_to_num_real(a, nan, posinf, neginf)


# -- derivatives of activations (the fused backward ops use these) ---------------------------
@njit(cache=True, inline="always")
def gelu_tanh_grad(a):
    inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
    t = tanh(inner)
    d_inner = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * a * a)
    return 0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * d_inner


softplus_grad = _vocab("softplus_grad")


@overload(softplus_grad, inline="always")
def _softplus_grad(a, beta, threshold):
    # d/da log1p(exp(beta*a))/beta = sigmoid(beta*a); the linear region has slope 1.
    if a == types.float32:
        # (NaN takes the sigmoid branch and stays NaN, as PyTorch's `y > threshold ? 1 : ...`)
        return lambda a, beta, threshold: (np.float32(1.0) if a * beta > threshold
                                           else _sigmoid_f32(a * beta))
    if a == types.float64:
        return lambda a, beta, threshold: _softplus_grad_f64(a, beta, threshold)
    return lambda a, beta, threshold: (1.0 if a * beta > threshold
                                       else 1.0 / (1.0 + np.exp(-a * beta)))


# -- an exp that vectorises ------------------------------------------------------------------
# The softmax kernels' exp: ``exp`` itself now that float32 exp vectorises (fast_math.py).
fast_exp = _vocab("fast_exp")


@njit(inline="always")
def ordered_bits(v, shift, mask):
    """A float's bits (as a signed int) mapped so that integer order is float order (-0 < +0;
    NaNs land outside the infinities): integer max/min reductions vectorise where float ones
    with NaN semantics don't. The map is its own inverse."""
    return v ^ ((v >> shift) & mask)


@overload(fast_exp, inline="always")
def _fast_exp(x):
    if x == types.float32:
        return lambda x: _exp_f32(x)
    if x == types.float64:
        return lambda x: _exp_f64(x)
    return lambda x: np.exp(x)
