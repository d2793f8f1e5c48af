"""torch.special benchmarks (issue 17): erfinv and gammaln of 16M float32, gputensor beside
PyTorch (CPU) and SciPy (the ``numpy`` variant runs scipy.special) on the same data, out= in
each. Each op's variants share one pytest-benchmark group; no timing is asserted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from test_bench_core import F32, N16M, run

if TYPE_CHECKING:
    from conftest import Data, Lib

_INPUTS: dict[str, np.ndarray] = {}


def _input(data: Data, key: str, lo: float, hi: float) -> np.ndarray:
    """The shared [0.5, 1.5) data mapped affinely onto [lo, hi) (made once per session)."""
    if key not in _INPUTS:
        base = data.get("a", (N16M,))
        _INPUTS[key] = ((base - np.float32(0.5)) * np.float32(hi - lo) + np.float32(lo))
    return _INPUTS[key]


def test_erfinv_16m(benchmark: Any, lib: Lib, data: Data) -> None:
    x = lib.wrap(_input(data, "erfinv", -0.99, 0.99))
    c = lib.wrap(data.get("out", (N16M,)))
    if lib.name == "numpy":
        from scipy.special import erfinv
        fn = lambda: erfinv(x, out=c)  # noqa: E731
    elif lib.name == "torch":
        fn = lambda: lib.xp.erfinv(x, out=c)  # noqa: E731
    else:
        fn = lambda: lib.xp.special.erfinv(x, out=c)  # noqa: E731
    run(benchmark, lib, "erfinv 16M f32, out=", fn, nbytes=2 * N16M * F32, target=0.9)


def test_gammaln_16m(benchmark: Any, lib: Lib, data: Data) -> None:
    x = lib.wrap(_input(data, "gammaln", 0.01, 50.0))
    c = lib.wrap(data.get("out", (N16M,)))
    if lib.name == "numpy":
        from scipy.special import gammaln
        fn = lambda: gammaln(x, out=c)  # noqa: E731
    else:
        fn = lambda: lib.xp.special.gammaln(x, out=c)  # noqa: E731
    run(benchmark, lib, "gammaln 16M f32, out=", fn, nbytes=2 * N16M * F32, target=0.9)
