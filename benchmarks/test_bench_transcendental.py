"""float32 transcendental elementwise ops (issue 14): gputensor beside PyTorch (CPU) and
NumPy/SciPy on the same contiguous data, 64K and 1M elements, out-of-place (each library
allocates its result, as a model's forward does). Each op and size is one pytest-benchmark
group; no timing is asserted. The target is PyTorch's time / gputensor's >= 0.9."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import scipy.special as sp
from test_bench_core import F32, run

if TYPE_CHECKING:
    from conftest import Data, Lib

SIZES = {"64K": 1 << 16, "1M": 1 << 20}


def _np_gelu(x: np.ndarray) -> np.ndarray:
    return x * sp.ndtr(x)


def _np_silu(x: np.ndarray) -> np.ndarray:
    return x * sp.expit(x)


def _np_softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0), x)


# op: (input range, NumPy/SciPy function, name in gputensor/torch or under nn.functional)
OPS: dict[str, tuple[tuple[float, float], Callable, str]] = {
    "exp": ((-6.0, 6.0), np.exp, "exp"),
    "expm1": ((-6.0, 6.0), np.expm1, "expm1"),
    "tanh": ((-6.0, 6.0), np.tanh, "tanh"),
    "log": ((0.01, 10.0), np.log, "log"),
    "log1p": ((-0.9, 10.0), np.log1p, "log1p"),
    "log2": ((0.01, 10.0), np.log2, "log2"),
    "log10": ((0.01, 10.0), np.log10, "log10"),
    "sigmoid": ((-6.0, 6.0), sp.expit, "sigmoid"),
    "erf": ((-4.0, 4.0), sp.erf, "erf"),
    "gelu": ((-6.0, 6.0), _np_gelu, "nn.functional.gelu"),
    "silu": ((-6.0, 6.0), _np_silu, "nn.functional.silu"),
    "softplus": ((-6.0, 6.0), _np_softplus, "nn.functional.softplus"),
}


def _input(data: Data, n: int, lo: float, hi: float) -> np.ndarray:
    """The shared [0.5, 1.5) data mapped affinely onto [lo, hi)."""
    base = data.get("a", (n,))
    return (base - np.float32(0.5)) * np.float32(hi - lo) + np.float32(lo)


def _lookup(mod: Any, path: str) -> Callable:
    for part in path.split("."):
        mod = getattr(mod, part)
    return mod


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("op", list(OPS))
def test_transcendental(benchmark: Any, lib: Lib, data: Data, op: str, size: str) -> None:
    n = SIZES[size]
    (lo, hi), np_fn, path = OPS[op]
    x = lib.wrap(_input(data, n, lo, hi))
    fn = np_fn if lib.name == "numpy" else _lookup(lib.xp, path)
    run(benchmark, lib, f"{op} {size} f32", lambda: fn(x), nbytes=2 * n * F32)
