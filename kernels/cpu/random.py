"""CPU sampling kernels: draw from a gt.Generator's Philox stream into (possibly strided) tensors.

Each kernel is ``kernel(out, generator, *params)``. Scalar parameters arrive validated by the
frontend; checks that depend on tensor values (probabilities in [0, 1], std >= 0...) run here
before anything is written. Floats are drawn in the target precision (float32 for float16 and
bfloat16; uniform ones as k-bit fractions so they never round up to 1) and cast on assignment
into ``out``'s NumPy view, which may be strided.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor

from ..registry import CPU

# Mantissa digits: uniform floats are k random bits scaled by 2**-k, so they stay below 1.
_DIGITS = {D.float16: 11, D.bfloat16: 8, D.float32: 24, D.float64: 53}


def _real(dt: D.dtype) -> D.dtype:
    return dt.to_real()


def _work_dtype(dt: D.dtype) -> type:
    return np.float64 if _real(dt) is D.float64 else np.float32


def _store(out: Tensor, values: Any) -> None:
    with np.errstate(all="ignore"):
        out._host[...] = values


def _value(x: Any) -> Any:
    """A parameter as a NumPy operand: host tensors become float64/complex128 arrays."""
    if not isinstance(x, Tensor):
        return x
    return x._host.astype(np.complex128 if x._dtype.is_complex else np.float64)


def _pairs_to_complex(pairs: np.ndarray) -> np.ndarray:
    return pairs[..., 0] + 1j * pairs[..., 1]


def _unit_uniform(rng: np.random.Generator, shape: tuple[int, ...], dt: D.dtype) -> np.ndarray:
    """Uniform [0, 1) with the target type's precision (never rounds up to 1)."""
    real = _real(dt)
    if real is D.float64:
        return rng.random(shape)
    if real is D.float32:
        return rng.random(shape, dtype=np.float32)
    bits = _DIGITS[real]
    return rng.integers(0, 1 << bits, size=shape, dtype=np.int64) * (1.0 / (1 << bits))


def _fast_host(out: Tensor) -> np.ndarray | None:
    """out's host array when NumPy's samplers can write into it directly (float32/64, dense)."""
    if out._dtype not in (D.float32, D.float64):
        return None
    arr = out._host
    return arr if arr.flags.c_contiguous else None


def _clip_below(vals: np.ndarray, low: float, high: float) -> None:
    """Rounding to the target type may land on ``high``; keep [low, high) half-open."""
    if low < high:
        top = np.asarray(high, dtype=vals.dtype)
        np.putmask(vals, vals >= top, np.nextafter(top, np.asarray(low, dtype=vals.dtype)))


@CPU.register("uniform_")
def uniform_(out: Tensor, gen: Any, low: float, high: float) -> None:
    """U[low, high); complex tensors get independent real and imaginary parts."""
    arr = _fast_host(out)
    if arr is not None:  # sample in place, in the target precision (as PyTorch does)
        gen._rng.random(out=arr, dtype=arr.dtype)
        if (low, high) != (0.0, 1.0):
            arr *= high - low
            arr += low
            _clip_below(arr, low, high)
        return
    shape = out._shape + (2,) if out._dtype.is_complex else out._shape
    u = _unit_uniform(gen._rng, shape, out._dtype)
    # asarray: for a 0-d shape NumPy's arithmetic returns a scalar, which putmask refuses
    vals = np.asarray(low + u * (high - low)).astype(_real(out._dtype).np_dtype)
    _clip_below(vals, low, high)
    _store(out, _pairs_to_complex(vals) if out._dtype.is_complex else vals)


@CPU.register("normal_")
def normal_(out: Tensor, gen: Any, mean: Any, std: Any) -> None:
    """mean + std * N(0, 1); mean/std are numbers or host tensors broadcastable to out.

    For complex tensors N(0, 1) is complex with variance 1/2 in each part, as in PyTorch.
    """
    std_v = _value(std)
    if isinstance(std, Tensor) and not (std_v >= 0).all():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    work = _work_dtype(out._dtype)
    arr = _fast_host(out)
    if arr is not None and not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        gen._rng.standard_normal(out=arr, dtype=arr.dtype)
        if std != 1.0:
            arr *= std
        if mean != 0.0:
            arr += mean
        return
    if out._dtype.is_complex:
        pairs = gen._rng.standard_normal(out._shape + (2,), dtype=work)
        z = _pairs_to_complex(pairs) * work(1 / math.sqrt(2.0))
    else:
        z = gen._rng.standard_normal(out._shape, dtype=work)
    _store(out, _value(mean) + std_v * z)


@CPU.register("log_normal_")
def log_normal_(out: Tensor, gen: Any, mean: float, std: float) -> None:
    z = gen._rng.standard_normal(out._shape, dtype=_work_dtype(out._dtype))
    with np.errstate(over="ignore"):
        _store(out, np.exp(mean + std * z))


@CPU.register("exponential_")
def exponential_(out: Tensor, gen: Any, lambd: float) -> None:
    e = gen._rng.standard_exponential(out._shape, dtype=_work_dtype(out._dtype))
    _store(out, e / lambd)


@CPU.register("cauchy_")
def cauchy_(out: Tensor, gen: Any, median: float, sigma: float) -> None:
    _store(out, median + sigma * gen._rng.standard_cauchy(out._shape))


@CPU.register("geometric_")
def geometric_(out: Tensor, gen: Any, p: float) -> None:
    """Number of Bernoulli(p) trials up to and including the first success (>= 1)."""
    _store(out, gen._rng.geometric(p, size=out._shape))


@CPU.register("random_")
def random_(out: Tensor, gen: Any, low: int, high: int) -> None:
    """Integers uniform on [low, high); the frontend checked the range fits out's dtype."""
    vals = gen._rng.integers(low, high - 1, size=out._shape, dtype=np.int64, endpoint=True)
    _store(out, vals)


@CPU.register("randperm")
def randperm(out: Tensor, gen: Any, n: int) -> None:
    _store(out, gen._rng.permutation(n))


@CPU.register("bernoulli")
def bernoulli(out: Tensor, gen: Any, p: Any) -> None:
    """1 with probability p (a number, or a host tensor broadcastable to out), else 0."""
    p_v = _value(p)
    if isinstance(p, Tensor) and not ((p_v >= 0) & (p_v <= 1)).all():
        bad = p_v[~((p_v >= 0) & (p_v <= 1))].reshape(-1)[0]
        raise RuntimeError(f"bernoulli: expected all probabilities p to be in [0, 1], but found "
                           f"p={bad} (Expected p_in >= 0 && p_in <= 1)")
    _store(out, gen._rng.random(out._shape) < p_v)


@CPU.register("poisson")
def poisson(out: Tensor, gen: Any, rates: Tensor) -> None:
    lam = _value(rates)
    if not (lam >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    if lam.size and lam.max() > 1e18:
        raise RuntimeError(f"poisson: rate {lam.max()} is too large to sample")
    _store(out, gen._rng.poisson(np.broadcast_to(lam, out._shape)))


def _check_distribution(probs: np.ndarray) -> None:
    if not (np.isfinite(probs) & (probs >= 0)).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if not (probs.sum(axis=-1) > 0).all():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


@numba.njit(cache=True)
def _inverse_cdf(cdf: np.ndarray, u: np.ndarray, out: np.ndarray) -> None:
    """out[r, j] = first category whose cumulative weight exceeds u[r, j] * total."""
    rows, cats = cdf.shape
    for r in range(rows):
        total = cdf[r, cats - 1]
        last = cats - 1
        while last > 0 and cdf[r, last] == cdf[r, last - 1]:
            last -= 1  # the last category with non-zero weight
        for j in range(u.shape[1]):
            v = u[r, j] * total
            lo, hi = 0, cats
            while lo < hi:
                mid = (lo + hi) // 2
                if cdf[r, mid] > v:
                    hi = mid
                else:
                    lo = mid + 1
            out[r, j] = min(lo, last)


@CPU.register("multinomial")
def multinomial(out: Tensor, gen: Any, probs: Tensor, num_samples: int,
                replacement: bool) -> None:
    """Category indices drawn from each row of ``probs`` (1-d or 2-d, validated shapes)."""
    p = np.atleast_2d(_value(probs))
    _check_distribution(p)
    rows = p.shape[0]
    if replacement:
        idx = np.empty((rows, num_samples), dtype=np.int64)
        if rows:
            _inverse_cdf(np.cumsum(p, axis=1), gen._rng.random((rows, num_samples)), idx)
    else:
        # The k largest p / Exp(1) keys are a weighted sample without replacement (as PyTorch).
        keys = p / gen._rng.standard_exponential(p.shape)
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    _store(out, idx.reshape(out._shape))


# The mt19937 generators' samplers (PyTorch's CPU numbers) register alongside these.
from . import random_torch  # noqa: E402, F401
