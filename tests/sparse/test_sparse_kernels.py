"""The sparse backends' six kernels (gputensor/sparse's kernel interface) called directly on
each device and compared with NumPy: _coalesce, _csr_rowptr, _spmm, _sddmm, _segment_softmax
and _segment_softmax_backward, including nnz = 0, duplicates, hybrid values and beta = 0."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.registry import BACKENDS


def _k(device: str, name: str):
    return BACKENDS[gt.device(device).type, "sparse_coo"].kernel(name)


def _t(arr, device, dtype=None):
    return gt.tensor(np.ascontiguousarray(arr), device=device, dtype=dtype)


def _h(t):
    return t.cpu().float().numpy() if t.dtype in (gt.float16, gt.bfloat16) else t.cpu().numpy()


def _np_coalesce(idx, vals, size):
    keys = np.ravel_multi_index(tuple(idx), size[: idx.shape[0]]) if idx.shape[1] else \
        np.zeros(0, np.int64)
    uniq, inv = np.unique(keys, return_inverse=True)
    out = np.zeros((len(uniq), *vals.shape[1:]), np.float64)
    np.add.at(out, inv, vals.astype(np.float64))
    return np.stack(np.unravel_index(uniq, size[: idx.shape[0]])).reshape(idx.shape[0], -1), out


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.float16, gt.int64, gt.int32])
@pytest.mark.parametrize("size,sparse_dim,nnz", [((5, 6), 2, 20), ((4, 3, 2), 2, 9),
                                                 ((7,), 1, 12), ((3, 3), 2, 0)])
def test_coalesce_kernel(device, dtype, size, sparse_dim, nnz):
    rng = np.random.default_rng(0)
    idx = np.stack([rng.integers(0, size[d], nnz) for d in range(sparse_dim)]).reshape(
        sparse_dim, nnz).astype(np.int64)
    vals = rng.integers(-4, 5, size=(nnz, *size[sparse_dim:]))
    oi, ov = _k(device, "_coalesce")(_t(idx, device), _t(vals, device, dtype), size)
    ei, ev = _np_coalesce(idx, vals, size)
    assert oi.dtype is gt.int64 and ov.dtype is dtype
    assert oi.device == gt.device(device) and ov.device == gt.device(device)
    np.testing.assert_array_equal(_h(oi), ei)
    np.testing.assert_allclose(_h(ov), ev)


def test_coalesce_kernel_duplicates_sum_in_order(device):
    # float32 sums of 1e8 + 1 + ... depend on the order: the stable sort keeps input order.
    idx = np.array([[1, 0, 1, 1]])
    vals = np.array([1e8, 5.0, 1.0, -1e8], np.float32)
    oi, ov = _k(device, "_coalesce")(_t(idx, device), _t(vals, device), (2,))
    expected = (np.float32(1e8) + np.float32(1.0)) - np.float32(1e8)
    assert _h(oi).tolist() == [[0, 1]]
    assert _h(ov).tolist() == [5.0, float(expected)]


@pytest.mark.parametrize("nrows,rows", [(5, [0, 0, 2, 2, 2, 4]), (3, []), (4, [3])])
def test_csr_rowptr_kernel(device, nrows, rows):
    rowptr = gt.empty(nrows + 1, dtype=gt.int64, device=device)
    _k(device, "_csr_rowptr")(rowptr, _t(np.array(rows, np.int64), device), nrows)
    expected = np.searchsorted(np.array(rows, np.int64), np.arange(nrows + 1))
    np.testing.assert_array_equal(_h(rowptr), expected)


def _csr(m, k, nnz, seed=0):
    rng = np.random.default_rng(seed)
    flat = np.sort(rng.choice(m * k, size=nnz, replace=False)) if nnz else np.zeros(0, int)
    rows, cols = flat // k, flat % k
    return (np.searchsorted(rows, np.arange(m + 1)).astype(np.int64), rows.astype(np.int64),
            cols.astype(np.int64), rng.uniform(-1, 1, nnz))


@pytest.mark.parametrize("dtype,tol", [(gt.float32, 1e-5), (gt.float64, 1e-12),
                                       (gt.float16, 1e-2), (gt.bfloat16, 5e-2)])
@pytest.mark.parametrize("m,k,n,nnz,alpha,beta", [(6, 5, 3, 11, 1.0, 0.0), (7, 4, 33, 9, 0.5, 2.0),
                                                  (3, 3, 2, 0, 1.0, 1.0), (9, 8, 1, 30, -1, 0)])
def test_spmm_kernel(device, dtype, tol, m, k, n, nnz, alpha, beta):
    rowptr, rows, cols, vals = _csr(m, k, nnz)
    dense = np.random.default_rng(1).uniform(-1, 1, (k, n))
    old = np.random.default_rng(2).uniform(-1, 1, (m, n))
    if beta == 0:
        old[0, 0] = np.nan    # beta == 0 ignores out's old content
    out = _t(old, device, dtype)
    _k(device, "_spmm")(out, _t(rowptr, device), _t(cols, device), _t(vals, device, dtype),
                        _t(dense, device, dtype), alpha, beta)
    a = np.zeros((m, k))
    a[rows, cols] = vals
    expected = alpha * (a @ dense) + (beta * old if beta else 0)
    np.testing.assert_allclose(_h(out), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", [(gt.float32, 1e-5), (gt.float64, 1e-12)])
@pytest.mark.parametrize("nnz,n", [(13, 4), (0, 3), (5, 40)])
def test_sddmm_kernel(device, dtype, tol, nnz, n):
    rng = np.random.default_rng(3)
    rows, cols = rng.integers(0, 6, nnz), rng.integers(0, 5, nnz)
    a, b = rng.uniform(-1, 1, (6, n)), rng.uniform(-1, 1, (5, n))
    out = gt.empty(nnz, dtype=dtype, device=device)
    _k(device, "_sddmm")(out, _t(rows, device), _t(cols, device), _t(a, device, dtype),
                         _t(b, device, dtype))
    np.testing.assert_allclose(_h(out), np.einsum("in,in->i", a[rows], b[cols]), rtol=tol,
                               atol=tol)


def _np_segment_softmax(vals, order, segptr, log):
    out = np.empty_like(vals)
    for s in range(len(segptr) - 1):
        members = order[segptr[s]:segptr[s + 1]]
        x = vals[members]
        e = np.exp(x - x.max(0))
        sm = e / e.sum(0)
        out[members] = np.log(sm) if log else sm
    return out


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype,tol", [(gt.float32, 1e-5), (gt.float64, 1e-12)])
@pytest.mark.parametrize("nnz,f", [(10, 1), (9, 3), (0, 2)])
def test_segment_softmax_kernels(device, log, dtype, tol, nnz, f):
    rng = np.random.default_rng(4)
    vals = rng.uniform(-3, 3, (nnz, f))
    order = rng.permutation(nnz).astype(np.int64)
    cuts = np.sort(rng.choice(np.arange(1, nnz), size=min(3, max(nnz - 1, 0)), replace=False)) \
        if nnz > 1 else np.zeros(0, int)
    segptr = np.concatenate([[0], cuts, [nnz]]).astype(np.int64) if nnz else \
        np.zeros(1, np.int64)
    out = gt.empty((nnz, f), dtype=dtype, device=device)
    o, sp = _t(order, device), _t(segptr, device)
    _k(device, "_segment_softmax")(out, _t(vals, device, dtype), o, sp, log)
    expected = _np_segment_softmax(vals, order, segptr, log)
    np.testing.assert_allclose(_h(out), expected, rtol=tol, atol=tol)
    grad_out = rng.uniform(-1, 1, (nnz, f))
    gi = gt.empty((nnz, f), dtype=dtype, device=device)
    _k(device, "_segment_softmax_backward")(gi, _t(grad_out, device, dtype), out, o, sp, log)
    ref = np.empty_like(grad_out)
    for s in range(len(segptr) - 1):
        m = order[segptr[s]:segptr[s + 1]]
        y, g = expected[m], grad_out[m]
        ref[m] = g - np.exp(y) * g.sum(0) if log else y * (g - (g * y).sum(0))
    np.testing.assert_allclose(_h(gi), ref, rtol=10 * tol, atol=10 * tol)
