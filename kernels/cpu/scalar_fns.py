"""The scalar function vocabulary of elementwise expressions, for Numba.

Elementwise ops are declared as one expression over these names (plus Python arithmetic,
comparisons, ``and/or/not`` and ``x if c else y``). The CUDA backend maps the same names to
device functions in its common header. Type-dependent behaviour (ints vs floats vs complex,
bool) is chosen at compile time with Numba overloads.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

# Plain NumPy ufuncs work on Numba scalars (float, complex) and keep float32 as float32.
exp = np.exp
exp2 = np.exp2
expm1 = np.expm1
log = np.log
log2 = np.log2
log10 = np.log10
log1p = np.log1p
sqrt = np.sqrt
sin = np.sin
cos = np.cos
tan = np.tan
asin = np.arcsin
acos = np.arccos
atan = np.arctan
atan2 = np.arctan2
sinh = np.sinh
cosh = np.cosh
tanh = np.tanh
floor = np.floor
ceil = np.ceil
trunc = np.trunc
rint = np.rint  # round half to even, like torch.round


def _overloaded(py_impl):
    """Declare a Numba-callable function whose typed implementation is chosen by overload."""
    def stub(*args):  # pragma: no cover - only Numba calls it
        return py_impl(*args)
    stub.__name__ = py_impl.__name__
    return stub


def isnan(a):  # noqa: D103 - overloaded below
    raise NotImplementedError  # pragma: no cover  (the Numba overload is the implementation)


def _real_or_int(t) -> bool:
    return isinstance(t, types.Integer | types.Boolean)


@overload(isnan)
def _isnan(a):
    if _real_or_int(a):
        return lambda a: False
    return lambda a: np.isnan(a)


def isinf(a):
    raise NotImplementedError  # pragma: no cover


@overload(isinf)
def _isinf(a):
    if _real_or_int(a):
        return lambda a: False
    return lambda a: np.isinf(a)


def isfinite(a):
    raise NotImplementedError  # pragma: no cover


@overload(isfinite)
def _isfinite(a):
    if _real_or_int(a):
        return lambda a: True
    return lambda a: np.isfinite(a)


def bitnot(a):
    raise NotImplementedError  # pragma: no cover


@overload(bitnot)
def _bitnot(a):
    if isinstance(a, types.Boolean):
        return lambda a: not a
    return lambda a: ~a


def sign(a):
    raise NotImplementedError  # pragma: no cover


@overload(sign)
def _sign(a):
    if isinstance(a, types.Boolean):
        return lambda a: a
    if isinstance(a, types.Complex):  # torch.sgn: z / |z|
        return lambda a: a / abs(a) if a != 0 else a * 0
    if isinstance(a, types.Integer):
        return lambda a: (a > 0) - (a < 0)
    return lambda a: a if np.isnan(a) else (a > 0) - (a < 0) + a * 0


def ipow(a, b):
    raise NotImplementedError  # pragma: no cover


@overload(ipow)
def _ipow(a, b):
    if isinstance(a, types.Integer | types.Boolean) and isinstance(b, types.Integer |
                                                                   types.Boolean):
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
    return lambda a, b: a ** b


def fmod(a, b):
    raise NotImplementedError  # pragma: no cover


@overload(fmod)
def _fmod(a, b):
    if isinstance(a, types.Float) or isinstance(b, types.Float):
        return lambda a, b: math.fmod(a, b) if b != 0 else math.nan
    def impl(a, b):  # C's truncated remainder for integers
        r = a % b
        if r != 0 and (r < 0) != (a < 0):
            r -= b
        return r
    return impl


def tdiv(a, b):
    raise NotImplementedError  # pragma: no cover


@overload(tdiv)
def _tdiv(a, b):
    if isinstance(a, types.Float) or isinstance(b, types.Float):
        return lambda a, b: np.trunc(a / b)
    def impl(a, b):  # C's truncated integer division
        q = a // b
        if q < 0 and q * b != a:
            q += 1
        return q
    return impl


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


@njit(cache=True)
def rsqrt(a):
    return 1.0 / np.sqrt(a)


@njit(cache=True)
def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


@njit(cache=True)
def erf(a):
    return math.erf(a)


@njit(cache=True)
def softplus(a, beta, threshold):
    return a if a * beta > threshold else np.log1p(np.exp(a * beta)) / beta


@njit(cache=True)
def gelu_erf(a):
    return 0.5 * a * (1.0 + math.erf(a * 0.7071067811865476))


@njit(cache=True)
def gelu_tanh(a):
    return 0.5 * a * (1.0 + np.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))


@njit(cache=True)
def nan_to_num(a, nan, posinf, neginf):
    if isnan(a):
        return nan
    if isinf(a):
        return posinf if a > 0 else neginf
    return a
