"""Shared builders for the sparse tests: the same random COO tensor in gputensor and PyTorch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")


def coo_parts(shape: Sequence[int], sparse_dim: int, nnz: int, seed: int = 0,
              duplicates: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Random (indices [sparse_dim, nnz], values [nnz, *dense]) in a random (unsorted) order;
    with ``duplicates`` the last entry repeats the first one's position."""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(0, shape[d], nnz) for d in range(sparse_dim)]).astype(np.int64) \
        if nnz else np.zeros((sparse_dim, 0), np.int64)
    if duplicates and nnz >= 2:
        idx[:, -1] = idx[:, 0]
    vals = rng.uniform(-2, 2, size=(nnz, *shape[sparse_dim:]))
    return idx, vals


def pair(shape: Sequence[int], sparse_dim: int, nnz: int, device: str, dtype: Any = gt.float64,
         seed: int = 0, duplicates: bool = True, requires_grad: bool = False) -> tuple[Any, Any]:
    """The same sparse tensor as (gputensor on ``device``, torch on the CPU)."""
    idx, vals = coo_parts(shape, sparse_dim, nnz, seed, duplicates)
    g = gt.sparse_coo_tensor(gt.tensor(idx), gt.tensor(vals, dtype=dtype), tuple(shape),
                             device=device, requires_grad=requires_grad)
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals).to(getattr(torch,
                                dtype.name)), tuple(shape), requires_grad=requires_grad,
                                check_invariants=False)
    return g, t


def dense_pair(shape: Sequence[int], device: str, dtype: Any = gt.float64, seed: int = 1,
               requires_grad: bool = False) -> tuple[Any, Any]:
    arr = np.random.default_rng(seed).uniform(-2, 2, size=tuple(shape))
    g = gt.tensor(arr, dtype=dtype, device=device, requires_grad=requires_grad)
    t = torch.tensor(arr).to(getattr(torch, dtype.name)).requires_grad_(requires_grad)
    return g, t


def np_of(x: Any) -> np.ndarray:
    """A NumPy copy of a gputensor or torch tensor (sparse ones densified)."""
    if isinstance(x, gt.Tensor):
        x = x.detach()
        if x.is_sparse:
            x = x.to_dense()
        return np.asarray(x.cpu().float().numpy() if x.dtype in (gt.float16, gt.bfloat16)
                          else x.cpu().numpy())
    x = x.detach()
    if x.is_sparse:
        x = x.to_dense()
    return x.float().numpy() if x.dtype in (torch.float16, torch.bfloat16) else x.numpy()


def assert_same(a: Any, b: Any, rtol: float = 1e-10, atol: float = 1e-10) -> None:
    """Same values (densified), same shape; layouts must agree too."""
    assert a.is_sparse == b.is_sparse, f"layouts differ: {a.layout} vs {b.layout}"
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(np_of(a), np_of(b), rtol=rtol, atol=atol)


def assert_same_coalesced(a: Any, b: Any, rtol: float = 1e-10, atol: float = 1e-10) -> None:
    """Both coalesced with identical indices and close values."""
    a, b = a.coalesce(), b.coalesce()
    np.testing.assert_array_equal(a.indices().cpu().numpy(), b.indices().numpy())
    np.testing.assert_allclose(np_of(a.values()), np_of(b.values()), rtol=rtol, atol=atol)
