"""gt.linalg benchmarks (issue 17), gputensor beside PyTorch and NumPy/SciPy (the ``numpy``
variant: NumPy's batched LAPACK gufuncs, SciPy where NumPy has no routine) on the same float32
data: solve, cholesky, qr, svd and eigh of one 512x512 matrix and of a batch of 256 8x8
matrices. Targets: >= 0.9x PyTorch for the single large cases, >= 1x for the batched small
ones. No timing is asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from test_bench_core import F32, run

if TYPE_CHECKING:
    from conftest import Data, Lib

CASES = {"512": (512,), "256x8": (256, 8)}  # (n,) one n x n matrix; (b, n) a batch


def _shape(case: str) -> tuple[int, ...]:
    dims = CASES[case]
    return (dims[0], dims[0]) if len(dims) == 1 else (dims[0], dims[1], dims[1])


def _spd(data: Data, shape: tuple[int, ...]) -> np.ndarray:
    """A well-conditioned symmetric positive-definite batch (made once, shared)."""
    key = ("spd", shape)
    cache = data._cache
    if key not in cache:
        a = data.get("m", shape)
        n = shape[-1]
        cache[key] = (a @ np.swapaxes(a, -1, -2) / n + np.eye(n, dtype=np.float32)).astype(
            np.float32)
    return cache[key]


def _linalg(lib: Lib) -> Any:
    return np.linalg if lib.name == "numpy" else lib.xp.linalg


def _flops(case: str, per_matrix: Callable[[int], float]) -> int:
    shape = _shape(case)
    batch = shape[0] if len(shape) == 3 else 1
    return int(batch * per_matrix(shape[-1]))


def _bytes(case: str, operands: int) -> int:
    return int(np.prod(_shape(case))) * F32 * operands


@pytest.mark.parametrize("case", list(CASES))
def test_solve(benchmark: Any, lib: Lib, data: Data, case: str) -> None:
    shape = _shape(case)
    a = lib.wrap(_spd(data, shape))
    b = lib.wrap(data.get("rhs", (*shape[:-1], 4)))
    la = _linalg(lib)
    run(benchmark, lib, f"linalg.solve {case} f32", lambda: la.solve(a, b),
        nbytes=_bytes(case, 1), flops=_flops(case, lambda n: 2 * n ** 3 / 3))


@pytest.mark.parametrize("case", list(CASES))
def test_cholesky(benchmark: Any, lib: Lib, data: Data, case: str) -> None:
    a = lib.wrap(_spd(data, _shape(case)))
    la = _linalg(lib)
    run(benchmark, lib, f"linalg.cholesky {case} f32", lambda: la.cholesky(a),
        nbytes=_bytes(case, 2), flops=_flops(case, lambda n: n ** 3 / 3))


@pytest.mark.parametrize("case", list(CASES))
def test_qr(benchmark: Any, lib: Lib, data: Data, case: str) -> None:
    a = lib.wrap(data.get("m", _shape(case)))
    la = _linalg(lib)
    run(benchmark, lib, f"linalg.qr {case} f32", lambda: la.qr(a),
        nbytes=_bytes(case, 3), flops=_flops(case, lambda n: 4 * n ** 3 / 3))


@pytest.mark.parametrize("case", list(CASES))
def test_svd(benchmark: Any, lib: Lib, data: Data, case: str) -> None:
    a = lib.wrap(data.get("m", _shape(case)))
    la = _linalg(lib)
    if lib.name == "torch":
        fn = lambda: la.svd(a, full_matrices=False)  # noqa: E731
    elif lib.name == "numpy":
        fn = lambda: la.svd(a, full_matrices=False)  # noqa: E731
    else:
        fn = lambda: la.svd(a, full_matrices=False)  # noqa: E731
    run(benchmark, lib, f"linalg.svd {case} f32", fn, nbytes=_bytes(case, 3),
        flops=_flops(case, lambda n: 22 * n ** 3))


@pytest.mark.parametrize("case", list(CASES))
def test_eigh(benchmark: Any, lib: Lib, data: Data, case: str) -> None:
    a = lib.wrap(_spd(data, _shape(case)))
    la = _linalg(lib)
    run(benchmark, lib, f"linalg.eigh {case} f32", lambda: la.eigh(a),
        nbytes=_bytes(case, 2), flops=_flops(case, lambda n: 9 * n ** 3))
