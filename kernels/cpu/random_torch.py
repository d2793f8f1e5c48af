"""CPU sampling kernels for mt19937 generators: PyTorch's CPU samplers, number for number.

Each is registered as ``mt19937.<op>`` with the signature of its Philox counterpart in
random.py; the frontends pick that name for an mt19937 generator. Other backends have no such
kernel, so their tensors get these host samples copied over.

What decides PyTorch's numbers, from its sources (``aten/src/ATen/core/DistributionsHelper.h``,
``TransformationHelper.h``, ``native/cpu/DistributionTemplates.h``, ``TensorFactories.cpp``):

- uniform floats take 32-bit words for float/half/bfloat16 and 64-bit words for double, keep
  the mantissa's bits (24, 11, 8 or 53) and scale them by 2**-bits; ``from + x * (to - from)``
  is one fused multiply-add in the dtype's precision (float for half/bfloat16).
- integers in [from, to) are ``word % range + from``, with 64-bit words once the range
  reaches 2**28 (public builds; Meta's internal ones switch at 2**32), any dtype. ``random_()``
  without bounds takes 64-bit words for int64 and double only.
- normals: 16 or more contiguous float/double elements are drawn as that many uniforms, then
  transformed 16 at a time (Box-Muller, element j paired with j + 8); a ragged tail redraws 16
  uniforms for the last 16 slots. Anything else is drawn one element at a time from the
  double-precision Box-Muller that caches its second value in the generator.
- every other sampler draws one double uniform (64-bit word) per element, in the order the
  output's memory is laid out; bernoulli with float probabilities draws float uniforms.
- randperm(n) swaps forward with ``word32 % (n - i)`` below n = 2**32 / 20, and above runs
  the inside-out shuffle on 64-bit words.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ..registry import CPU
from . import random_torch_math as M
from .random import _check_distribution

_MANT = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}
_SMALL_RANDPERM = 0xFFFFFFFF // 20  # PyTorch keeps its old 32-bit shuffle below this n
_FILL_MIN = 16                       # contiguous normals from this size on use the 16-wide fill


def _register(name: str) -> Any:
    return CPU.register(f"mt19937.{name}")


# -- words and unit uniforms -------------------------------------------------------------------
def _unit(eng: Any, n: int, real: D.dtype) -> np.ndarray:
    """n uniforms on [0, 1) as PyTorch's uniform_real_distribution<real> draws them: float64
    for double, else float32 holding the dtype's mantissa bits."""
    bits = _MANT[real]
    if real is D.float64:
        return (eng.words64(n) & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0 ** -53
    w = eng.words32(n) & np.uint64((1 << bits) - 1)
    return w.astype(np.float32) * np.float32(2.0 ** -bits)


def _unit_f64(eng: Any, n: int) -> np.ndarray:
    return _unit(eng, n, D.float64)


# -- element order -----------------------------------------------------------------------------
def _real_view(arr: np.ndarray) -> np.ndarray:
    """A complex array as (..., 2) reals (PyTorch's view_as_real); any strides."""
    real = arr.real
    return np.lib.stride_tricks.as_strided(real, arr.shape + (2,),
                                           arr.strides + (real.itemsize,))


def _in_memory_order(arr: np.ndarray) -> np.ndarray:
    """``arr`` with its dims ordered as TensorIterator visits them (outermost = largest
    stride), so a row-major walk of the result follows the serial kernels."""
    if arr.flags.c_contiguous or arr.ndim < 2:
        return arr
    order = sorted(range(arr.ndim), key=lambda d: -abs(arr.strides[d]))
    return arr.transpose(order)


def _store(arr: np.ndarray, values: np.ndarray) -> None:
    """Store samples drawn in iteration order into ``arr`` (any strides), cast to its dtype."""
    dest = _in_memory_order(arr)
    with np.errstate(all="ignore"):
        dest[...] = values.reshape(dest.shape)


def _write(out: Tensor, values: np.ndarray) -> None:
    _store(out._host, values)


def _target(out: Tensor) -> tuple[np.ndarray, D.dtype]:
    """The real-valued host array the samplers fill, and its real dtype."""
    arr = out._host
    if out._dtype.is_complex:
        return _real_view(arr), out._dtype.to_real()
    return arr, out._dtype


# -- uniform -----------------------------------------------------------------------------------
def _uniform_values(eng: Any, n: int, real: D.dtype, low: float, high: float) -> np.ndarray:
    """``n`` samples of U[low, high) in PyTorch's arithmetic: double for float64, float
    (24 bits, from and to rounded to float) for the other float dtypes."""
    x = _unit(eng, n, D.float64 if real is D.float64 else D.float32)
    if real is D.float64:
        lo, span = low, high - low
    else:
        lo, span = float(np.float32(low)), float(np.float32(high) - np.float32(low))
    out = np.empty_like(x)
    M.affine(x, span, lo, out)
    return out


@_register("uniform_")
def uniform_(out: Tensor, gen: Any, low: float, high: float) -> None:
    arr, real = _target(out)
    _store(arr, _uniform_values(gen.mt, arr.size, real, low, high))


# -- normal ------------------------------------------------------------------------------------
def _serial_normals(eng: Any, n: int) -> np.ndarray:
    """n standard normals from the cached Box-Muller (PyTorch's normal_distribution<double>)."""
    z = np.empty(n)
    start = 0
    if n and eng.next_double_normal is not None:
        z[0], eng.next_double_normal = eng.next_double_normal, None
        start = 1
    fresh = n - start
    pairs = (fresh + 1) // 2
    vals = np.empty(2 * pairs)
    M.box_muller_pairs(_unit_f64(eng, 2 * pairs), vals)
    z[start:] = vals[:fresh]
    if fresh % 2:
        eng.next_double_normal = float(vals[-1])
    return z


def _serial(eng: Any, n: int, mean: float, std: float) -> np.ndarray:
    z = _serial_normals(eng, n)
    out = np.empty_like(z)
    M.affine(z, std, mean, out)
    return out


def _fill(eng: Any, n: int, real: D.dtype, mean: float, std: float) -> np.ndarray:
    """PyTorch's normal_fill: n uniforms transformed 16 at a time; a ragged tail redraws the
    last 16 uniforms and transforms them again. Half and bfloat16 are computed in float."""
    work = D.float64 if real is D.float64 else D.float32
    if real is D.float64:
        blocks, m, s = M.fill_blocks_f64, mean, std
    else:
        blocks = M.fill_blocks_f32 if real is D.float32 else M.fill_blocks_f32_scalar
        m, s = np.float32(mean), np.float32(std)
    d = _unit(eng, n, work)
    blocks(d, 0, m, s)
    if n % 16:
        d[n - 16:] = _unit(eng, 16, work)
        blocks(d, n - 16, m, s)
    return d


def _normal_values(eng: Any, arr: np.ndarray, real: D.dtype, mean: float,
                   std: float) -> np.ndarray:
    n = arr.size
    if n >= _FILL_MIN and arr.flags.c_contiguous:
        return _fill(eng, n, real, mean, std)
    return _serial(eng, n, mean, std)


def _normal_scalar(out: Tensor, gen: Any, mean: Any, std: float) -> None:
    arr, real = _target(out)
    if out._dtype.is_complex:  # each part gets variance std**2 / 2, as PyTorch does
        mean, std = complex(mean).real, std / math.sqrt(2.0)
    _store(arr, _normal_values(gen.mt, arr, real, float(mean), float(std)))


@_register("normal_")
def normal_(out: Tensor, gen: Any, mean: Any, std: Any) -> None:
    """normal_(mean, std); with tensor parameters PyTorch draws N(0, 1) (or N(0, std)) first
    and then scales and shifts with separate elementwise ops, in the output's dtype."""
    if isinstance(std, Tensor):
        if not (std._host >= 0).all():
            raise RuntimeError("normal expects all elements of std >= 0.0")
        _normal_scalar(out, gen, 0.0, 1.0)
        host = out._host
        _assign(host, host * _operand(std, host))
        shift = _operand(mean, host) if isinstance(mean, Tensor) else host.dtype.type(mean)
        _assign(host, host + shift)
    elif isinstance(mean, Tensor):
        _normal_scalar(out, gen, 0.0, std)
        host = out._host
        _assign(host, host + _operand(mean, host))
    else:
        _normal_scalar(out, gen, mean, std)


def _operand(param: Tensor, out: np.ndarray) -> np.ndarray:
    """A tensor parameter as PyTorch's in-place mul_/add_ sees it: a 0-dim one takes the
    output's dtype (a dimensioned operand wins type promotion)."""
    v = param._host
    return v.astype(out.dtype) if v.ndim == 0 and out.ndim else v


def _assign(dest: np.ndarray, values: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        dest[...] = values


@_register("log_normal_")
def log_normal_(out: Tensor, gen: Any, mean: float, std: float) -> None:
    vals = _serial(gen.mt, out.numel(), mean, std)
    M.exp_inplace(vals)
    _write(out, vals)


# -- one double uniform per element --------------------------------------------------------
def _per_uniform(out: Tensor, gen: Any, transform: Any, *params: float) -> None:
    u = _unit_f64(gen.mt, out.numel())
    vals = np.empty_like(u)
    transform(u, *params, vals)
    _write(out, vals)


@_register("exponential_")
def exponential_(out: Tensor, gen: Any, lambd: float) -> None:
    _per_uniform(out, gen, M.exponential, lambd)


@_register("cauchy_")
def cauchy_(out: Tensor, gen: Any, median: float, sigma: float) -> None:
    _per_uniform(out, gen, M.cauchy, median, sigma)


@_register("geometric_")
def geometric_(out: Tensor, gen: Any, p: float) -> None:
    _per_uniform(out, gen, M.geometric, p)


@_register("bernoulli")
def bernoulli(out: Tensor, gen: Any, p: Any) -> None:
    """1 with probability p (a number, or a host tensor broadcastable to out), else 0."""
    n = out.numel()
    if not isinstance(p, Tensor):
        _write(out, _unit_f64(gen.mt, n) < p)
        return
    p_v = p._host
    ok = (p_v >= 0) & (p_v <= 1)
    if not ok.all():
        bad = p_v[~ok].reshape(-1)[0]
        raise RuntimeError(f"bernoulli: expected all probabilities p to be in [0, 1], but found "
                           f"p={bad} (Expected p_in >= 0 && p_in <= 1)")
    # Double probabilities compare with double uniforms, any other float with float ones.
    real = D.float64 if p.dtype is D.float64 else D.float32
    probs = _in_memory_order(np.broadcast_to(p_v, out._shape)).reshape(-1)
    _write(out, _unit(gen.mt, n, real) < probs.astype(np.float64 if real is D.float64
                                                          else np.float32))


# -- integers ----------------------------------------------------------------------------------
def _as_float_int(x: int, real: D.dtype) -> int:
    """int64 -> the float dtype -> int64, as C++ static_casts round it (via float for the
    16-bit types)."""
    if real is D.float64:
        return int(np.float64(x))
    return int(real.np_dtype.type(np.float32(x)))


def _bit_length_below(x: int) -> int:
    return abs(x).bit_length() - 1  # PyTorch's ``while (x >>= 1) ++n``


def _float_range(low: int, high: int, real: D.dtype) -> tuple[int, int]:
    """PyTorch's update_from / update_to: move [low, high) inwards until its ends survive a
    round trip through the float dtype."""
    digits = _MANT[real]
    lo1 = _as_float_int(low + 1, real)
    if lo1 < low:
        low = lo1 + (1 << (_bit_length_below(low + 1) - digits + 1))
    hi1 = _as_float_int(high - 1, real)
    if hi1 >= high:
        high = hi1 - (1 << (_bit_length_below(high - 1) - digits + 1))
    return low, high


def _from_to(eng: Any, n: int, low: int, span: int) -> np.ndarray:
    """``word % span + low`` (wrapping like C++'s uint64), 64-bit words from span 2**28 on."""
    w = eng.words64(n) if span >= 1 << 28 else eng.words32(n)
    return ((w % np.uint64(span)) + np.uint64(low % (1 << 64))).view(np.int64)


@_register("random_")
def random_(out: Tensor, gen: Any, low: int, high: int) -> None:
    """Integers on [low, high); float dtypes first shrink the range to representable ends."""
    n = out.numel()
    if high - low == 1 << 64:  # from=int64 min, to=None: the word itself
        _write(out, gen.mt.words64(n).view(np.int64))
        return
    if out._dtype.category == D.FLOATING:
        low, high = _float_range(low, high, out._dtype)
    _write(out, _from_to(gen.mt, n, low, high - low))


@_register("random_bits")
def random_bits(out: Tensor, gen: Any) -> None:
    """``random_()`` without bounds: PyTorch's uniform_int_distribution, which takes 64-bit
    words for int64 and double only (whatever the range) and masks bool to the low bit."""
    dt, n = out._dtype, out.numel()
    if dt is D.bool:
        _write(out, (gen.mt.words32(n) & np.uint64(1)).astype(bool))
        return
    if dt.category == D.FLOATING:
        span = (1 << _MANT[dt]) + 1
    else:
        span = D.iinfo(dt).max + 1
    w = gen.mt.words64(n) if dt in (D.int64, D.float64) else gen.mt.words32(n)
    _write(out, (w % np.uint64(span)).view(np.int64))


@numba.njit(cache=True)
def _shuffle_forward(words: np.ndarray, perm: np.ndarray) -> None:
    n = perm.size
    for i in range(n - 1):
        z = np.int64(words[i] % np.uint64(n - i))
        perm[i], perm[i + z] = perm[i + z], perm[i]


@numba.njit(cache=True)
def _shuffle_inside_out(words: np.ndarray, perm: np.ndarray) -> None:
    for i in range(perm.size):
        z = np.int64(words[i] % np.uint64(i + 1))
        perm[i] = perm[z]
        perm[z] = i


@_register("randperm")
def randperm(out: Tensor, gen: Any, n: int) -> None:
    if n < _SMALL_RANDPERM:
        perm = np.arange(n, dtype=np.int64)
        _shuffle_forward(gen.mt.words32(max(n - 1, 0)), perm)
    else:
        perm = np.empty(n, dtype=np.int64)
        _shuffle_inside_out(gen.mt.words64(n), perm)
    _write(out, perm)


# -- multinomial, poisson ----------------------------------------------------------------------
def _exponential_like(gen: Any, probs: np.ndarray) -> np.ndarray:
    """``empty_like(probs).exponential_(1)``: Exp(1) samples rounded to probs' dtype."""
    u = _unit_f64(gen.mt, probs.size)
    q = np.empty_like(u)
    M.exponential(u, 1.0, q)
    return q.reshape(probs.shape).astype(probs.dtype)


@_register("multinomial")
def multinomial(out: Tensor, gen: Any, probs: Tensor, num_samples: int,
                replacement: bool) -> None:
    """PyTorch's CPU multinomial: without replacement (or one sample) the largest
    p / Exp(1) keys; with replacement an inverse-CDF search per sample."""
    p = np.atleast_2d(probs._host)
    _check_distribution(p.astype(np.float64))
    if not replacement or num_samples == 1:
        with np.errstate(divide="ignore"):
            keys = p / _exponential_like(gen, p)
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    else:
        idx = np.empty((p.shape[0], num_samples), dtype=np.int64)
        for r, row in enumerate(p):
            cum = np.cumsum(row)  # sequential, in the row's dtype
            cum /= cum[-1]
            cum[-1] = 1
            u = _unit_f64(gen.mt, num_samples)
            idx[r] = np.searchsorted(cum.astype(np.float64), u, side="left")
    _write(out, idx.reshape(out._shape))


@_register("poisson")
def poisson(out: Tensor, gen: Any, rates: Tensor) -> None:
    """PyTorch's sample_poisson per element (a rejection sampler: it takes a variable number
    of double uniforms, so they are drawn ahead and the unused ones given back)."""
    lam = np.ascontiguousarray(_in_memory_order(np.broadcast_to(rates._host, out._shape)),
                               dtype=np.float64).reshape(-1)
    if not (lam >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    eng = gen.mt
    snap = eng.snapshot()
    vals = np.empty(lam.size)
    u = _unit_f64(eng, 2 * lam.size + 64)
    done, pos, used = 0, 0, 0
    while True:
        done, pos = M.poisson_run(lam, u, pos, done, vals)
        if done == lam.size:
            break
        used += pos  # an element ran out of uniforms: keep the unused tail, draw more
        u = np.concatenate([u[pos:], _unit_f64(eng, max(u.size, 64))])
        pos = 0
    eng.rewind(snap, 2 * (used + pos))
    _write(out, vals)
