"""The arithmetic of PyTorch's CPU samplers, rounding step for rounding step (Numba).

PyTorch builds its CPU kernels once per CPU capability and x86-64 machines run the AVX2 (or
AVX512) build, where GCC contracts every ``a * b + c`` into one fused multiply-add. The
transforms here do the same with an explicit ``fma`` (one rounding) and call the C library's
log/sin/cos as PyTorch does. Float32 normals of 16 or more contiguous elements come from an
AVX2 kernel with its own polynomial log and sincos (Cephes' single-precision ones, as in Julien
Pommier's ``avx_mathfun``); ``_log_ps`` and ``_sincos_ps`` evaluate those polynomials in
float32 in the same order, with the same contractions, so the results agree bit for bit.
PyTorch's generic build (``ATEN_CPU_CAPABILITY=default``) rounds without FMA and takes a
scalar path for those normals, so its numbers differ from its own AVX2 build's; these follow
the AVX2 build. linspace's ramp (``ramp_from_both_ends``) is here for the same reason: its
kernel's ``start + step * i`` is one fused multiply-add in that build."""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

f32 = np.float32


@intrinsic
def fma(typingctx, a, b, c):  # noqa: ANN001, ANN201 - Numba intrinsic signature
    """a * b + c rounded once (LLVM's llvm.fma: the FMA instruction, or libm's fma)."""
    if not (a == b == c and isinstance(a, types.Float)):
        return None

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        return builder.fma(*args)
    return a(a, b, c), codegen


@numba.njit(cache=True)
def affine(x: np.ndarray, scale: float, shift: float, out: np.ndarray) -> None:
    """out = fma(x, scale, shift), in x's precision (scale and shift already rounded to it)."""
    s = x.dtype.type(scale)
    t = x.dtype.type(shift)
    for i in range(x.size):
        out[i] = fma(x[i], s, t)


@numba.njit(cache=True)
def ramp_from_both_ends(first: float, last: float, step: float, out: np.ndarray) -> None:
    """PyTorch's linspace kernel: the first half fma(step, i, first), the second half
    fma(-step, n - 1 - i, last) (GCC contracts ``end - step * k``), in out's precision."""
    n = out.size
    f = out.dtype.type
    a, b, s = f(first), f(last), f(step)
    for i in range(n):
        if i < n // 2:
            out[i] = fma(s, f(i), a)
        else:
            out[i] = fma(-s, f(n - 1 - i), b)


@numba.njit(cache=True)
def box_muller_pairs(u: np.ndarray, out: np.ndarray) -> None:
    """PyTorch's scalar ``normal_distribution<double>``: each (u1, u2) gives the pair
    r cos(theta), r sin(theta), r = sqrt(-2 log1p(-u2)), theta = 2 pi u1; the sine is the one
    PyTorch caches for the next draw."""
    for k in range(u.size // 2):
        r = math.sqrt(-2.0 * math.log1p(-u[2 * k + 1]))
        theta = 2.0 * math.pi * u[2 * k]
        out[2 * k] = r * math.cos(theta)
        out[2 * k + 1] = r * math.sin(theta)


@numba.njit(cache=True)
def normal_fill_f64(d: np.ndarray, start: int, mean: float, std: float) -> None:
    """PyTorch's ``normal_fill_16<double>`` on d[start:start+16] (uniforms in, normals out):
    the first 8 values pair with the next 8."""
    for j in range(8):
        u1 = 1.0 - d[start + j]
        u2 = d[start + j + 8]
        radius = math.sqrt(-2.0 * math.log(u1))
        theta = 2.0 * math.pi * u2
        d[start + j] = fma(radius * math.cos(theta), std, mean)
        d[start + j + 8] = fma(radius * math.sin(theta), std, mean)


# Cephes' single-precision log and sin/cos constants (float32, as the AVX2 kernel holds them).
_SQRTHF = f32(0.707106781186547524)
_LOG_P = (f32(7.0376836292e-2), f32(-1.1514610310e-1), f32(1.1676998740e-1),
          f32(-1.2420140846e-1), f32(1.4249322787e-1), f32(-1.6668057665e-1),
          f32(2.0000714765e-1), f32(-2.4999993993e-1), f32(3.3333331174e-1))
_LOG_Q1, _LOG_Q2 = f32(-2.12194440e-4), f32(0.693359375)
_FLT_MIN = f32(1.17549435e-38)
_FOPI = f32(1.27323954473516)  # 4 / pi
_DP1, _DP2, _DP3 = f32(-0.78515625), f32(-2.4187564849853515625e-4), \
    f32(-3.77489497744594108e-8)
_SIN_P = (f32(-1.9515295891e-4), f32(8.3321608736e-3), f32(-1.6666654611e-1))
_COS_P = (f32(2.443315711809948e-005), f32(-1.388731625493765e-003),
          f32(4.166664568298827e-002))
_ONE, _HALF, _MHALF, _MTWO = f32(1.0), f32(0.5), f32(-0.5), f32(-2.0)
_TWO_PI = f32(2.0 * math.pi)


@numba.njit(cache=True)
def _log_ps(x: np.float32) -> np.float32:
    """avx_mathfun's log256_ps for one positive float32 lane."""
    m, ex = math.frexp(max(x, _FLT_MIN))  # x = m 2**ex, m in [0.5, 1): its bit twiddling
    x = f32(m)
    e = f32(ex)
    if x < _SQRTHF:  # keep x - 1 in [sqrt(1/2) - 1, sqrt(2) - 1)
        e = e - _ONE
        x = (x - _ONE) + x
    else:
        x = x - _ONE
    z = x * x
    y = _LOG_P[0]
    y = fma(y, x, _LOG_P[1])
    y = fma(y, x, _LOG_P[2])
    y = fma(y, x, _LOG_P[3])
    y = fma(y, x, _LOG_P[4])
    y = fma(y, x, _LOG_P[5])
    y = fma(y, x, _LOG_P[6])
    y = fma(y, x, _LOG_P[7])
    y = fma(y, x, _LOG_P[8])
    y = y * x
    y = fma(y, z, e * _LOG_Q1)
    y = fma(z, _MHALF, y)
    return fma(e, _LOG_Q2, x + y)


@numba.njit(cache=True)
def _sincos_ps(x: np.float32) -> tuple[np.float32, np.float32]:
    """avx_mathfun's sincos256_ps for one non-negative float32 lane."""
    j = np.int32(x * _FOPI)
    j = (j + 1) & ~1  # round the octant up to even
    y = f32(j)
    neg_sin = (j & 4) != 0
    sine_poly = (j & 2) == 0  # which polynomial gives the sine
    neg_cos = ((~(j - 2)) & 4) != 0
    x = fma(y, _DP1, x)  # x - y pi/4 in three exact-ish steps
    x = fma(y, _DP2, x)
    x = fma(y, _DP3, x)
    z = x * x
    c = fma(_COS_P[0], z, _COS_P[1])
    c = fma(c, z, _COS_P[2])
    c = c * z
    c = fma(c, z, -(z * _HALF))
    c = c + _ONE
    s = fma(_SIN_P[0], z, _SIN_P[1])
    s = fma(s, z, _SIN_P[2])
    s = s * z
    s = fma(s, x, x)
    sin, cos = (s, c) if sine_poly else (c, s)
    return (-sin if neg_sin else sin), (-cos if neg_cos else cos)


@numba.njit(cache=True)
def normal_fill_f32_avx2(d: np.ndarray, start: int, mean: np.float32, std: np.float32) -> None:
    """PyTorch's ``normal_fill_16_AVX2`` on d[start:start+16] (float32 uniforms in)."""
    for j in range(8):
        u1 = _ONE - d[start + j]
        u2 = d[start + j + 8]
        radius = math.sqrt(_MTWO * _log_ps(u1))
        sin, cos = _sincos_ps(_TWO_PI * u2)
        d[start + j] = fma(radius * cos, std, mean)
        d[start + j + 8] = fma(radius * sin, std, mean)


@numba.njit(cache=True)
def fill_blocks_f32(d: np.ndarray, first: int, mean: np.float32, std: np.float32) -> None:
    """normal_fill_f32_avx2 on the whole 16-blocks of d[first:]."""
    for start in range(first, d.size - 15, 16):
        normal_fill_f32_avx2(d, start, mean, std)


@numba.njit(cache=True)
def fill_blocks_f64(d: np.ndarray, first: int, mean: float, std: float) -> None:
    """normal_fill_f64 on the whole 16-blocks of d[first:]."""
    for start in range(first, d.size - 15, 16):
        normal_fill_f64(d, start, mean, std)


# -- the per-element transforms of a double uniform (libm, like PyTorch; not NumPy's SIMD) --
@numba.njit(cache=True)
def exponential(u: np.ndarray, lambd: float, out: np.ndarray) -> None:
    scale = -1.0 / lambd
    for i in range(u.size):
        out[i] = scale * math.log1p(-u[i])


@numba.njit(cache=True)
def cauchy(u: np.ndarray, median: float, sigma: float, out: np.ndarray) -> None:
    for i in range(u.size):
        out[i] = fma(sigma, math.tan(math.pi * (u[i] - 0.5)), median)


@numba.njit(cache=True)
def geometric(u: np.ndarray, p: float, out: np.ndarray) -> None:
    denom = math.log(1.0 - p)
    for i in range(u.size):
        out[i] = math.ceil(math.log(u[i]) / denom)


@numba.njit(cache=True)
def exp_inplace(x: np.ndarray) -> None:
    for i in range(x.size):
        x[i] = math.exp(x[i])


@numba.njit(cache=True)
def fill_blocks_f32_scalar(d: np.ndarray, first: int, mean: np.float32,
                           std: np.float32) -> None:
    """PyTorch's scalar ``normal_fill_16<float>`` (libm logf/cosf/sinf) on the whole
    16-blocks of d[first:]: its half and bfloat16 normals, computed in float."""
    for s in range(first, d.size - 15, 16):
        for j in range(8):
            u1 = _ONE - d[s + j]
            u2 = d[s + j + 8]
            radius = math.sqrt(_MTWO * math.log(u1))
            theta = f32(2.0 * math.pi * np.float64(u2))  # computed in double, kept as float
            d[s + j] = fma(radius * math.cos(theta), std, mean)
            d[s + j + 8] = fma(radius * math.sin(theta), std, mean)


# -- Poisson (PyTorch's sample_poisson, compiled without FMA: it is not a per-CPU kernel) --
@numba.njit(cache=True)
def poisson_run(lam: np.ndarray, u: np.ndarray, pos: int, first: int, out: np.ndarray
                ) -> tuple[int, int]:
    """Sample out[first:] from the uniforms u[pos:], one element at a time: Hoermann's
    transformed rejection for rates >= 10, Knuth's product of uniforms below. Returns (the
    next element, the next uniform); an element whose uniforms ran out is left for a retry."""
    for i in range(first, lam.size):
        rate = lam[i]
        start = pos
        if rate >= 10.0:
            slam = math.sqrt(rate)
            loglam = math.log(rate)
            b = 0.931 + 2.53 * slam
            a = -0.059 + 0.02483 * b
            invalpha = 1.1239 + 1.1328 / (b - 3.4)
            vr = 0.9277 - 3.6224 / (b - 2.0)
            while True:
                if pos + 2 > u.size:
                    return i, start
                big_u = u[pos] - 0.5
                v = u[pos + 1]
                pos += 2
                us = 0.5 - abs(big_u)
                k = math.floor((2.0 * a / us + b) * big_u + rate + 0.43)
                if us >= 0.07 and v <= vr:
                    break
                if k < 0 or (us < 0.013 and v > us):
                    continue
                if (math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b)
                        <= -rate + k * loglam - math.lgamma(k + 1.0)):
                    break
            out[i] = k
        elif rate == 0.0:
            out[i] = 0.0
        else:
            enlam = math.exp(-rate)
            x = 0.0
            prod = 1.0
            while True:
                if pos >= u.size:
                    return i, start
                prod *= u[pos]
                pos += 1
                if prod > enlam:
                    x += 1.0
                else:
                    break
            out[i] = x
    return lam.size, pos
