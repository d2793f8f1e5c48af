"""float64 transcendental benchmarks (issue 14): gputensor beside PyTorch (CPU) and NumPy/SciPy
on the same contiguous float64 data, 64K and 1M elements (each call allocates its result, in
every library). Each op and size's variants share one pytest-benchmark group; no timing is
asserted. The target is PyTorch's time / gputensor's >= 0.9."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import scipy.special as sp
from test_bench_core import run

if TYPE_CHECKING:
    from conftest import Lib

F64 = 8
SIZES = {"64K": 1 << 16, "1M": 1 << 20}


def _numpy_ops() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    return {
        "exp": np.exp, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
        "sigmoid": sp.expit, "erf": sp.erf,
        "gelu": lambda x: x * sp.ndtr(x),
        "silu": lambda x: x * sp.expit(x),
        "softplus": lambda x: np.logaddexp(0.0, x),
    }


# op: (input range, whether the op lives in nn.functional)
OPS = {
    "exp": ((-20.0, 20.0), False), "log": ((0.01, 100.0), False),
    "log1p": ((-0.5, 100.0), False), "tanh": ((-5.0, 5.0), False),
    "sigmoid": ((-10.0, 10.0), False), "erf": ((-3.0, 3.0), False),
    "gelu": ((-5.0, 5.0), True), "silu": ((-10.0, 10.0), True),
    "softplus": ((-10.0, 10.0), True),
}
_INPUTS: dict[tuple[str, int], np.ndarray] = {}


def _input(op: str, n: int) -> np.ndarray:
    key = (op, n)
    if key not in _INPUTS:
        lo, hi = OPS[op][0]
        _INPUTS[key] = np.random.default_rng(0).uniform(lo, hi, n)
    return _INPUTS[key]


def _function(lib: Lib, op: str) -> Callable[[Any], Any]:
    if lib.name == "numpy":
        return _numpy_ops()[op]
    functional = OPS[op][1]
    return getattr(lib.xp.nn.functional if functional else lib.xp, op)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("op", list(OPS))
def test_transcendental_f64(benchmark: Any, lib: Lib, op: str, size: str) -> None:
    n = SIZES[size]
    x = lib.wrap(_input(op, n))
    fn = _function(lib, op)
    run(benchmark, lib, f"{op} {size} f64", lambda: fn(x), nbytes=2 * n * F64, target=0.9)


@pytest.mark.parametrize("op", ["sigmoid", "tanh", "gelu", "silu", "softplus"])
def test_activation_backward_f64(benchmark: Any, lib: Lib, op: str) -> None:
    """The backward pass of each activation at 1M float64 (autograd libraries only)."""
    if lib.name == "numpy":
        pytest.skip("NumPy has no autograd")
    n = SIZES["1M"]
    x = lib.wrap(_input(op, n).copy()).requires_grad_()
    y = _function(lib, op)(x)
    g = lib.wrap(np.ones(n))

    def backward() -> None:
        y.backward(g, retain_graph=True)
        x.grad = None
    run(benchmark, lib, f"{op} backward 1M f64", backward, nbytes=3 * n * F64, target=0.9)
