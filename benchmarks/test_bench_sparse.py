"""Sparse benchmark: spmm of a 10,000 x 10,000 COO matrix at 1% density (1M entries) by a
10,000 x 64 dense matrix, float32, gputensor side by side with scipy.sparse and PyTorch.

One pytest-benchmark group; the ``numpy`` variant of the ``lib`` fixture runs scipy.sparse
(CSR @ dense: NumPy has no sparse type), so benchmarks/report.py's "vs NumPy" column is the
ratio against scipy (target >= 1.0x). The sparse matrix is built and coalesced once, outside
the timing, in every library (gputensor also builds its cached CSR row offsets on the warm-up
call, as scipy's CSR has them built in). No timing is asserted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import gputensor as gt

if TYPE_CHECKING:  # benchmarks/ is not a package; conftest is only needed for the types
    from conftest import Lib

N = 10_000
COLS = 64
DENSITY = 0.01
F32 = 4


def _coo() -> tuple[np.ndarray, np.ndarray]:
    """Seeded (indices [2, nnz], values) of a random N x N matrix with DENSITY (no duplicates)."""
    rng = np.random.default_rng(0)
    nnz = int(N * N * DENSITY)
    flat = np.unique(rng.integers(0, N * N, size=int(nnz * 1.01)))[:nnz]
    rng.shuffle(flat)
    idx = np.stack([flat // N, flat % N]).astype(np.int64)
    return idx, rng.random(idx.shape[1], dtype=np.float32) + np.float32(0.5)


_CACHE: dict[str, Any] = {}


def _operands(lib_name: str) -> tuple[Any, Any]:
    if lib_name not in _CACHE:
        idx, vals = _coo()
        dense = np.random.default_rng(1).random((N, COLS), dtype=np.float32)
        if lib_name == "gputensor":
            a = gt.sparse_coo_tensor(gt.from_numpy(idx), gt.from_numpy(vals), (N, N)).coalesce()
            _CACHE[lib_name] = (a, gt.from_numpy(dense))
        elif lib_name == "numpy":
            sp = pytest.importorskip("scipy.sparse")
            _CACHE[lib_name] = (sp.coo_matrix((vals, (idx[0], idx[1])), shape=(N, N)).tocsr(),
                                dense)
        else:
            import torch
            a = torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(vals),
                                        (N, N)).coalesce()
            _CACHE[lib_name] = (a, torch.from_numpy(dense))
    return _CACHE[lib_name]


def test_spmm(benchmark: Any, lib: Lib) -> None:
    a, b = _operands(lib.name)
    if lib.name == "gputensor":
        def fn() -> Any:
            return gt.sparse.mm(a, b)
    elif lib.name == "numpy":
        def fn() -> Any:
            return a @ b
    else:
        import torch

        def fn() -> Any:
            return torch.sparse.mm(a, b)
    nnz = int(N * N * DENSITY)
    benchmark.group = "spmm 10k x 10k (1%) @ 10k x 64 f32"
    benchmark.extra_info.update(lib=lib.name, bytes=nnz * (F32 + 16) + 2 * N * COLS * F32,
                                flops=2 * nnz * COLS, target_vs_numpy=1.0,
                                numpy_is="scipy.sparse CSR")
    fn()   # warm-up: Numba compile/load, the CSR row offsets
    benchmark(fn)


def test_spmm_results_agree(lib: Lib) -> None:
    """The three libraries compute the same product (checked once, untimed)."""
    a, b = _operands(lib.name)
    ref_a, ref_b = _operands("numpy")
    got = gt.sparse.mm(a, b).numpy() if lib.name == "gputensor" else \
        np.asarray(a @ b if lib.name == "numpy" else __import__("torch").sparse.mm(a, b))
    np.testing.assert_allclose(got, ref_a @ ref_b, rtol=2e-4, atol=1e-3)
