"""CPU kernels of the gamma-family samplers and their reparameterisation gradients.

Samplers (``_standard_gamma``, ``_sample_dirichlet``, ``binomial``) run one element per
``prange`` iteration on the element's own Philox4x32-10 stream (kernels/sample_keys.py), the
same streams kernels/cuda/random_gamma.cu reads, so both devices give the same samples:

- gamma: Marsaglia and Tsang's squeeze/rejection method with the alpha < 1 boost
  ``G(alpha) = G(alpha + 1) * U**(1/alpha)``, as PyTorch samples it;
- binomial: inversion by summing geometric waiting times when ``n * min(p, 1-p) < 10``, else
  Hormann's BTRS (transformed rejection with squeeze); PyTorch's algorithm family.

Each draw of an element consumes one Philox block (four 32-bit words): a uniform takes its
first two words (53 bits), a normal all four (Box-Muller).

Gradients (``_standard_gamma_grad``, ``_dirichlet_grad``) are the implicit reparameterisation
gradients ``dx/dalpha = -(dF/dalpha) / (dF/dx)`` of the CDF F, computed to double precision:
the regularised incomplete gamma / beta functions by their series or continued fraction, with
the alpha-derivative carried alongside (forward-mode dual numbers through Lentz's algorithm).
PyTorch evaluates the same quantities with fitted approximations (about 1e-3 relative error).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ..registry import CPU
from ..sample_keys import draw_key
from .scalar_special import digamma

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_EPS = 1e-16
_MAX_TERMS = 100000


# -- per-element streams --------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _philox(c0: Any, c1: Any, c2: Any, c3: Any, k0: Any, k1: Any) -> tuple:
    for _ in range(10):
        p0 = _M0 * c0
        p1 = _M1 * c2
        c0, c1, c2, c3 = ((p1 >> _S32) ^ c1 ^ k0) & _MASK, p1 & _MASK, \
            ((p0 >> _S32) ^ c3 ^ k1) & _MASK, p0 & _MASK
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return c0, c1, c2, c3


@njit(cache=True, inline="always")
def _block(k0: Any, k1: Any, elem: int, blk: int) -> tuple:
    e, b = np.uint64(elem), np.uint64(blk)
    return _philox(b & _MASK, b >> _S32, e & _MASK, e >> _S32, k0, k1)


@njit(cache=True, inline="always")
def _u53(hi: Any, lo: Any) -> float:
    """A uniform double in [0, 1) from two 32-bit words (53 bits)."""
    return float((hi >> np.uint64(5)) * np.uint64(67108864) + (lo >> np.uint64(6))) * \
        (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def _uniform(k0: Any, k1: Any, elem: int, blk: int) -> float:
    w = _block(k0, k1, elem, blk)
    return _u53(w[0], w[1])


@njit(cache=True, inline="always")
def _normal(k0: Any, k1: Any, elem: int, blk: int) -> float:
    w = _block(k0, k1, elem, blk)
    u1 = _u53(w[0], w[1])
    u2 = _u53(w[2], w[3])
    return math.sqrt(-2.0 * math.log1p(-u1)) * math.cos(2.0 * math.pi * u2)


# -- samplers -------------------------------------------------------------------------------------
@njit(cache=True)
def _gamma_one(alpha: float, k0: Any, k1: Any, elem: int) -> float:
    """One Gamma(alpha, 1) sample (0 for alpha <= 0 or NaN; the caller clamps to tiny)."""
    if not alpha > 0.0:
        return 0.0
    blk = 0
    scale = 1.0
    if alpha < 1.0:
        scale = (1.0 - _uniform(k0, k1, elem, blk)) ** (1.0 / alpha)
        blk += 1
        alpha += 1.0
    d = alpha - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = _normal(k0, k1, elem, blk)
        blk += 1
        y = 1.0 + c * x
        if y <= 0.0:
            continue
        v = y * y * y
        u = 1.0 - _uniform(k0, k1, elem, blk)
        blk += 1
        xsq = x * x
        if u < 1.0 - 0.0331 * xsq * xsq or math.log(u) < 0.5 * xsq + d * (1.0 - v + math.log(v)):
            return scale * d * v


@njit(cache=True, parallel=True)
def _gamma_kernel(alpha: np.ndarray, out: np.ndarray, k0: Any, k1: Any, tiny: float) -> None:
    for i in prange(alpha.size):
        out[i] = max(_gamma_one(alpha[i], k0, k1, i), tiny)


@njit(cache=True, parallel=True)
def _dirichlet_kernel(alpha: np.ndarray, out: np.ndarray, k0: Any, k1: Any, tiny: float,
                      top: float) -> None:
    """Rows of ``alpha`` (rows, k) -> normalised gamma samples in [tiny, top] (top: the largest
    value below 1); a row whose gammas are all 0 (no positive concentration) is uniform."""
    rows, k = alpha.shape
    for r in prange(rows):
        total = 0.0
        for j in range(k):
            g = _gamma_one(alpha[r, j], k0, k1, r * k + j)
            out[r, j] = g
            total += g
        for j in range(k):
            x = out[r, j] / total if total > 0.0 else 1.0 / k
            out[r, j] = min(max(x, tiny), top)


@njit(cache=True)
def _binomial_inversion(n: float, p: float, k0: Any, k1: Any, elem: int) -> float:
    """Successes counted as geometric waiting times summing to at most n (small n * p)."""
    logq = math.log1p(-p)
    total = 0.0
    k = 0.0
    blk = 0
    while True:
        u = 1.0 - _uniform(k0, k1, elem, blk)
        blk += 1
        total += math.ceil(math.log(u) / logq)
        if total > n:
            return k
        k += 1.0


@njit(cache=True)
def _binomial_btrs(n: float, p: float, k0: Any, k1: Any, elem: int) -> float:
    """Hormann's BTRS for n * p >= 10 and p <= 1/2."""
    q = 1.0 - p
    spq = math.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / q)
    m = math.floor((n + 1.0) * p)
    h = math.lgamma(m + 1.0) + math.lgamma(n - m + 1.0)
    blk = 0
    while True:
        u = _uniform(k0, k1, elem, blk) - 0.5
        v = _uniform(k0, k1, elem, blk + 1)
        blk += 2
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0.0 or k > n:
            continue
        if us >= 0.07 and v <= vr:
            return k
        lv = math.log(v * alpha / (a / (us * us) + b))
        if lv <= h - math.lgamma(k + 1.0) - math.lgamma(n - k + 1.0) + (k - m) * lpq:
            return k


@njit(cache=True)
def _binomial_one(n: float, p: float, k0: Any, k1: Any, elem: int) -> float:
    if math.isnan(n) or math.isnan(p) or math.isinf(n):
        return math.nan
    if n <= 0.0 or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return n
    flip = p > 0.5
    pp = 1.0 - p if flip else p
    if n * pp >= 10.0:
        k = _binomial_btrs(n, pp, k0, k1, elem)
    else:
        k = _binomial_inversion(n, pp, k0, k1, elem)
    return n - k if flip else k


@njit(cache=True, parallel=True)
def _binomial_kernel(count: np.ndarray, prob: np.ndarray, out: np.ndarray, k0: Any,
                     k1: Any) -> None:
    for i in prange(count.size):
        out[i] = _binomial_one(count[i], prob[i], k0, k1, i)


# -- reparameterisation gradients -----------------------------------------------------------------
@njit(cache=True)
def _lentz_step(a: float, a_a: float, b: float, b_a: float, c: float, c_a: float, d: float,
                d_a: float, h: float, h_a: float) -> tuple:
    """One step of Lentz's method for the continued fraction b0 + a1/(b1 + a2/(b2 + ...)),
    carrying each quantity's derivative (the ``_a`` twins) along: returns the new
    (c, c_a, d, d_a, h, h_a) and the step's factor (delta, delta_a)."""
    tiny = 1e-300
    d_a = a_a * d + a * d_a + b_a
    d = a * d + b
    if abs(d) < tiny:
        d = tiny
    c_a = b_a + (a_a * c - a * c_a) / (c * c)
    c = b + a / c
    if abs(c) < tiny:
        c = tiny
    d = 1.0 / d
    d_a = -d_a * d * d
    delta, delta_a = d * c, d_a * c + d * c_a
    return c, c_a, d, d_a, h * delta, h_a * delta + h * delta_a, delta, delta_a


@njit(cache=True)
def _gamma_grad_one(alpha: float, x: float) -> float:
    """dx/dalpha for x ~ Gamma(alpha, 1): -(dP(alpha, x)/dalpha) / pdf(x)."""
    if not x > 0.0 or math.isinf(x):
        return 0.0 if x == x else x
    if x <= alpha + 1.0:
        # P = x^a e^-x / Gamma(a+1) * S, S = sum_n prod_{k<=n} x / (a + k); S_a = dS/da.
        s, s_a, t, h = 1.0, 0.0, 1.0, 0.0
        for n in range(1, _MAX_TERMS):
            t *= x / (alpha + n)
            h += 1.0 / (alpha + n)
            s += t
            s_a -= t * h
            if t < _EPS * s and t * h < _EPS * abs(s_a):
                break
        return -(x / alpha) * ((math.log(x) - digamma(alpha + 1.0)) * s + s_a)
    # Q = x^a e^-x / Gamma(a) * C with C Legendre's continued fraction; Lentz with C_a alongside.
    tiny = 1e-300
    b, b_a = x + 1.0 - alpha, -1.0
    c, c_a = 1.0 / tiny, 0.0
    d = 1.0 / b
    d_a = -b_a * d * d
    h, h_a = d, d_a
    for i in range(1, _MAX_TERMS):
        b += 2.0
        c, c_a, d, d_a, h, h_a, delta, delta_a = _lentz_step(
            -i * (i - alpha), float(i), b, b_a, c, c_a, d, d_a, h, h_a)
        if abs(delta - 1.0) < _EPS and abs(delta_a) < _EPS * (1.0 + abs(h_a / h)):
            break
    return x * ((math.log(x) - digamma(alpha)) * h + h_a)


@njit(cache=True)
def _beta_cf(p: float, q: float, y: float, dp: float, dq: float) -> tuple:
    """The continued fraction of I_y(p, q) (Numerical Recipes' betacf by Lentz) and its
    derivative in the direction (dp, dq) of (p, q)."""
    tiny = 1e-300
    c, c_a = 1.0, 0.0
    den = 1.0 - (p + q) * y / (p + 1.0)
    den_a = -(((dp + dq) * (p + 1.0) - (p + q) * dp) * y) / ((p + 1.0) * (p + 1.0))
    if abs(den) < tiny:
        den = tiny
    d = 1.0 / den
    d_a = -den_a * d * d
    h, h_a = d, d_a
    for m in range(1, _MAX_TERMS):
        for odd in range(2):
            if odd == 0:  # m (q - m) y / ((p + 2m - 1)(p + 2m))
                num, num_a = m * (q - m) * y, m * dq * y
                r1, r2 = p + 2.0 * m - 1.0, p + 2.0 * m
            else:  # -(p + m)(p + q + m) y / ((p + 2m)(p + 2m + 1))
                num = -(p + m) * (p + q + m) * y
                num_a = -(dp * (p + q + m) + (p + m) * (dp + dq)) * y
                r1, r2 = p + 2.0 * m, p + 2.0 * m + 1.0
            den = r1 * r2
            aa_a = (num_a * den - num * dp * (r1 + r2)) / (den * den)
            c, c_a, d, d_a, h, h_a, delta, delta_a = _lentz_step(
                num / den, aa_a, 1.0, 0.0, c, c_a, d, d_a, h, h_a)
        if abs(delta - 1.0) < _EPS and abs(delta_a) < _EPS * (1.0 + abs(h_a / h)):
            break
    return h, h_a


@njit(cache=True)
def _dirichlet_grad_one(x: float, alpha: float, total: float) -> float:
    """PyTorch's _dirichlet_grad: (dx/dalpha of x ~ Beta(alpha, total - alpha)) / (1 - x)."""
    b = total - alpha
    if not (x > 0.0 and x < 1.0):
        return 0.0 if x == x else x
    common = digamma(total) - digamma(alpha) + math.log(x)
    if x < (alpha + 1.0) / (total + 2.0):
        h, h_a = _beta_cf(alpha, b, x, 1.0, 0.0)
        return -(x / alpha) * ((common - 1.0 / alpha) * h + h_a)
    h, h_a = _beta_cf(b, alpha, 1.0 - x, 0.0, 1.0)
    return (x / b) * (common * h + h_a)


@njit(cache=True, parallel=True)
def _gamma_grad_kernel(alpha: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    for i in prange(out.size):
        out[i] = _gamma_grad_one(alpha[i], x[i])


@njit(cache=True, parallel=True)
def _dirichlet_grad_kernel(x: np.ndarray, alpha: np.ndarray, total: np.ndarray,
                           out: np.ndarray) -> None:
    for i in prange(out.size):
        out[i] = _dirichlet_grad_one(x[i], alpha[i], total[i])


# -- registered kernels ---------------------------------------------------------------------------
def _flat64(t: Tensor, shape: tuple[int, ...]) -> np.ndarray:
    """A host tensor broadcast to ``shape`` as a contiguous flat float64 array."""
    return np.ascontiguousarray(np.broadcast_to(t._host, shape), dtype=np.float64).reshape(-1)


def _store(out: Tensor, values: np.ndarray) -> None:
    out._host[...] = values.reshape(out._shape)


def _tiny(dt: D.dtype) -> float:
    return float(D.finfo(dt).tiny)


def _below_one(dt: D.dtype) -> float:
    """The largest value of ``dt`` below 1 (Dirichlet components stay inside the simplex)."""
    return float(np.nextafter(np.array(1, dtype=dt.np_dtype), 0))


@CPU.register("_standard_gamma")
def standard_gamma(out: Tensor, gen: Any, alpha: Tensor) -> None:
    k0, k1 = draw_key(gen)
    vals = np.empty(out.numel(), dtype=np.float64)
    _gamma_kernel(_flat64(alpha, out._shape), vals, np.uint64(k0), np.uint64(k1),
                  _tiny(out._dtype))
    _store(out, vals)


@CPU.register("_sample_dirichlet")
def sample_dirichlet(out: Tensor, gen: Any, alpha: Tensor) -> None:
    k0, k1 = draw_key(gen)
    k = out._shape[-1] if out._shape else 1
    a = _flat64(alpha, out._shape).reshape(-1, k)
    vals = np.empty(a.shape, dtype=np.float64)
    _dirichlet_kernel(a, vals, np.uint64(k0), np.uint64(k1), _tiny(out._dtype),
                      _below_one(out._dtype))
    _store(out, vals)


@CPU.register("binomial")
def binomial(out: Tensor, gen: Any, count: Tensor, prob: Tensor) -> None:
    k0, k1 = draw_key(gen)
    vals = np.empty(out.numel(), dtype=np.float64)
    _binomial_kernel(_flat64(count, out._shape), _flat64(prob, out._shape), vals,
                     np.uint64(k0), np.uint64(k1))
    _store(out, vals)


@CPU.register("_standard_gamma_grad")
def standard_gamma_grad(out: Tensor, alpha: Tensor, x: Tensor) -> None:
    vals = np.empty(out.numel(), dtype=np.float64)
    _gamma_grad_kernel(_flat64(alpha, out._shape), _flat64(x, out._shape), vals)
    _store(out, vals)


@CPU.register("_dirichlet_grad")
def dirichlet_grad(out: Tensor, x: Tensor, alpha: Tensor, total: Tensor) -> None:
    vals = np.empty(out.numel(), dtype=np.float64)
    _dirichlet_grad_kernel(_flat64(x, out._shape), _flat64(alpha, out._shape),
                           _flat64(total, out._shape), vals)
    _store(out, vals)
