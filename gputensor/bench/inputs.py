"""Seeded host data for the sweep: one NumPy array per input, in the dtype being swept.

Every library under comparison wraps (or copies to its device) these very arrays, so all of
them work on the same bytes. Values keep every catalogued op finite and away from denormals.
"""

from __future__ import annotations

import numpy as np

from gputensor import _dtype as D

SEED = 0


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded by ``key`` (kernel, dtype, size), so reruns use identical data."""
    return np.random.default_rng([SEED, _stable_hash(key)])


def _stable_hash(key: tuple) -> int:
    # Python's hash() of str is salted per process; a sum of code points is stable and enough.
    text = "|".join(str(k) for k in key)
    return sum((i + 1) * ord(ch) for i, ch in enumerate(text)) % (1 << 31)


def random_array(shape: tuple[int, ...], dtype: D.dtype,
                 rng: np.random.Generator) -> np.ndarray:
    """A C-contiguous array of ``dtype``: floats in [0.5, 1.5), integers in [1, 100), random
    booleans, complex numbers with both parts in [0.5, 1.5)."""
    if dtype is D.bool:
        return rng.random(shape) < 0.5
    if dtype.is_complex:
        real = rng.random(shape) + 0.5
        imag = rng.random(shape) + 0.5
        return (real + 1j * imag).astype(dtype.np_dtype)
    if dtype.is_floating_point:
        return (rng.random(shape, dtype=np.float32) + np.float32(0.5)).astype(dtype.np_dtype)
    return rng.integers(1, 100, size=shape).astype(dtype.np_dtype)
