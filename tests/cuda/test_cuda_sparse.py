"""The SparseCUDA backend's kernels (kernels/cuda/sparse.cu), called directly on CUDA tensors and
compared with PyTorch / NumPy: coalescing (duplicates, hybrid values, every value dtype, nnz 0,
no sparse dims, sizes past int64), CSR offsets, SpMM (alpha/beta, NaN-safe beta = 0), SDDMM and
segment (log-)softmax with its backward.

Sizes cross the kernels' internal boundaries while staying small: sort tiles of 1024 keys, scan
chunks of 2048 flags, 8 warps per block, column blocks of 32 lanes and groups of G < 32 lanes.
"""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not gt.cuda.is_available(),
                                reason="no CUDA runtime (set GPUTENSOR_CUDA_EMULATOR=1)")

CUDA = "cuda:0"
FLOATS = [gt.float32, gt.float64, gt.float16, gt.bfloat16]
# Relative tolerances of results computed in float32 (16-bit) / float64 against float64 math.
RTOL = {gt.float32: 1e-5, gt.float64: 1e-12, gt.float16: 2e-3, gt.bfloat16: 1.6e-2}


def _kernel(name: str):
    from gputensor.kernels.registry import SPARSE_CUDA

    return SPARSE_CUDA.kernel(name)


def _dev(arr: np.ndarray, dtype: gt.dtype | None = None) -> gt.Tensor:
    """``arr`` on the CUDA device as ``dtype`` (16-bit floats converted from float32)."""
    if dtype in (gt.float16, gt.bfloat16):
        return gt.tensor(np.asarray(arr, np.float32)).to(CUDA).to(dtype)
    return gt.tensor(arr, dtype=dtype).to(CUDA)


def _host(t: gt.Tensor) -> np.ndarray:
    t = t.cpu()
    if t.dtype in (gt.float16, gt.bfloat16):
        t = t.float()
    return t.numpy()


def _rounded(arr: np.ndarray, dtype: gt.dtype) -> np.ndarray:
    """``arr`` rounded to ``dtype`` and back to float64 (the inputs the kernel actually sees)."""
    return _host(_dev(arr, dtype)).astype(np.float64)


def _close(got: gt.Tensor, want: np.ndarray, dtype: gt.dtype) -> None:
    rtol = RTOL[dtype]
    scale = max(1.0, float(np.nanmax(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(_host(got).astype(np.float64), want, rtol=rtol,
                               atol=rtol * scale)


# -- coalesce ----------------------------------------------------------------------------------
def _coalesce_ref(idx: np.ndarray, val: np.ndarray):
    """Reference by NumPy: lexicographic stable order, duplicate rows summed in float64."""
    nnz = idx.shape[1]
    order = np.lexsort(idx[::-1]) if idx.shape[0] else np.arange(nnz)
    s = idx[:, order]
    head = np.ones(nnz, bool)
    if nnz > 1:
        head[1:] = np.any(s[:, 1:] != s[:, :-1], axis=0)
    starts = np.flatnonzero(head)
    sums = np.add.reduceat(val[order].astype(np.float64), starts, axis=0) if nnz else \
        np.zeros((0, *val.shape[1:]))
    return s[:, starts], sums


def _random_coo(rng, sparse_size, dense_size, nnz):
    idx = np.stack([rng.integers(0, n, size=nnz) for n in sparse_size]) if sparse_size else \
        np.zeros((0, nnz), np.int64)
    val = rng.standard_normal((nnz, *dense_size))
    return idx.astype(np.int64), val


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dense_size", [(), (3,), (2, 5)])
def test_coalesce_matches_torch(dtype, dense_size):
    rng = np.random.default_rng(1)
    sparse_size = (5, 4)
    idx, val = _random_coo(rng, sparse_size, dense_size, 60)  # 20 cells: many duplicates
    val = _rounded(val, dtype)
    i, v = _kernel("_coalesce")(_dev(idx), _dev(val, dtype), sparse_size + dense_size)
    assert i.device == gt.device(CUDA) and v.dtype is dtype
    assert tuple(v.shape)[1:] == dense_size and i.is_contiguous() and v.is_contiguous()
    ref = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val),
                                  sparse_size + dense_size).coalesce()
    np.testing.assert_array_equal(_host(i), ref.indices().numpy())
    _close(v, ref.values().numpy(), dtype)


@pytest.mark.parametrize("dtype", [gt.int64, gt.int32, gt.int16, gt.uint8])
def test_coalesce_integers_exact(dtype):
    rng = np.random.default_rng(2)
    idx, _ = _random_coo(rng, (6, 3, 2), (), 80)
    val = rng.integers(0, 50, size=(80, 2))
    i, v = _kernel("_coalesce")(_dev(idx), _dev(val, dtype), (6, 3, 2, 2))
    ref = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (6, 3, 2, 2)).coalesce()
    np.testing.assert_array_equal(_host(i), ref.indices().numpy())
    want = ref.values().numpy().astype(dtype.np_dtype)  # integer sums wrap like the dtype
    np.testing.assert_array_equal(_host(v), want)


def test_coalesce_bool_is_logical_or():
    idx = np.array([[0, 2, 0, 1, 2]], np.int64)
    val = np.array([True, False, False, False, False])
    i, v = _kernel("_coalesce")(_dev(idx), _dev(val, gt.bool), (3,))
    np.testing.assert_array_equal(_host(i), [[0, 1, 2]])
    np.testing.assert_array_equal(_host(v), [True, False, False])


def test_coalesce_keeps_explicit_zeros_and_sums_in_input_order():
    # In float32 (1e8 + 1) - 1e8 == 0 (input order) while 1e8 - 1e8 + 1 == 1 (another order).
    idx = np.array([[1, 0, 1, 1, 2]], np.int64)
    val = np.array([1e8, 0.0, 1.0, -1e8, 0.0], np.float32)
    i, v = _kernel("_coalesce")(_dev(idx), _dev(val), (3,))
    np.testing.assert_array_equal(_host(i), [[0, 1, 2]])
    np.testing.assert_array_equal(_host(v), np.float32([0.0, 0.0, 0.0]))


def test_coalesce_empty():
    i, v = _kernel("_coalesce")(_dev(np.zeros((2, 0), np.int64)), _dev(np.zeros((0, 4))),
                                (3, 3, 4))
    assert tuple(i.shape) == (2, 0) and tuple(v.shape) == (0, 4)
    assert i.dtype is gt.int64 and v.dtype is gt.float64 and v.device == gt.device(CUDA)


def test_coalesce_without_sparse_dims_sums_everything():
    val = np.arange(6.0).reshape(3, 2)
    i, v = _kernel("_coalesce")(_dev(np.zeros((0, 3), np.int64)), _dev(val), (2,))
    assert tuple(i.shape) == (0, 1)
    np.testing.assert_array_equal(_host(v), [[6.0, 9.0]])


def test_coalesce_large_crosses_tiles_and_scan_chunks():
    rng = np.random.default_rng(3)
    sparse_size, nnz = (40, 30, 7), 6000  # 8400 cells: duplicates and gaps both
    idx, val = _random_coo(rng, sparse_size, (), nnz)
    i, v = _kernel("_coalesce")(_dev(idx), _dev(val), sparse_size)
    ri, rv = _coalesce_ref(idx, val)
    np.testing.assert_array_equal(_host(i), ri)
    np.testing.assert_allclose(_host(v), rv, rtol=1e-12, atol=1e-12)


def test_coalesce_sizes_past_int64_sort_lexicographically():
    rng = np.random.default_rng(4)
    big = 2**40
    sparse_size = (big, 3, big)  # linear index would need 2**81
    base = np.array([[0, big - 1, 5, big - 1], [2, 0, 1, 2], [big - 2, 7, 0, 3]], np.int64)
    idx = base[:, rng.integers(0, 4, size=50)]
    val = rng.standard_normal((50, 2))
    i, v = _kernel("_coalesce")(_dev(idx), _dev(val), sparse_size + (2,))
    ri, rv = _coalesce_ref(idx, val)
    np.testing.assert_array_equal(_host(i), ri)
    np.testing.assert_allclose(_host(v), rv, rtol=1e-12)


# -- CSR row offsets -------------------------------------------------------------------------------
@pytest.mark.parametrize("nrows,nnz", [(1, 0), (7, 0), (9, 40), (600, 3000)])
def test_csr_rowptr(nrows, nnz):
    rng = np.random.default_rng(nrows)
    rows = np.sort(rng.integers(0, nrows, size=nnz)).astype(np.int64)
    rowptr = gt.empty((nrows + 1,), dtype=gt.int64, device=CUDA)
    _kernel("_csr_rowptr")(rowptr, _dev(rows), nrows)
    np.testing.assert_array_equal(_host(rowptr),
                                  np.searchsorted(rows, np.arange(nrows + 1), side="left"))


# -- SpMM ------------------------------------------------------------------------------------------
def _csr(rng, M, K, density, dtype):
    mask = rng.random((M, K)) < density
    mask[M // 2] = False  # an empty row
    dense_a = np.where(mask, rng.standard_normal((M, K)), 0.0)
    dense_a = _rounded(dense_a, dtype)
    rows, cols = np.nonzero(mask)
    rowptr = np.searchsorted(rows, np.arange(M + 1)).astype(np.int64)
    return dense_a, rowptr, cols.astype(np.int64), dense_a[rows, cols]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("M,K,N", [(5, 4, 1), (19, 13, 3), (300, 40, 32), (33, 70, 70)])
def test_spmm_matches_numpy(dtype, M, K, N):
    rng = np.random.default_rng(M * N)
    a, rowptr, cols, vals = _csr(rng, M, K, 0.3, dtype)
    b = _rounded(rng.standard_normal((K, N)), dtype)
    c = _rounded(rng.standard_normal((M, N)), dtype)
    out = _dev(c, dtype)
    _kernel("_spmm")(out, _dev(rowptr), _dev(cols), _dev(vals, dtype), _dev(b, dtype), 1.5, 0.5)
    _close(out, 0.5 * c + 1.5 * (a @ b), dtype)


def test_spmm_beta_zero_ignores_nan_in_out():
    rng = np.random.default_rng(5)
    a, rowptr, cols, vals = _csr(rng, 40, 9, 0.4, gt.float32)
    b = rng.standard_normal((9, 6)).astype(np.float32)
    out = _dev(np.full((40, 6), np.nan, np.float32))
    _kernel("_spmm")(out, _dev(rowptr), _dev(cols), _dev(vals.astype(np.float32)), _dev(b), 1, 0)
    got = _host(out)
    assert not np.isnan(got).any()  # the empty row too: zeros, never NaN * 0
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_spmm_alpha_zero_scales_out_and_keeps_nan_of_the_product():
    """alpha == 0 multiplies like PyTorch's sparse addmm: finite products vanish, inf gives NaN
    (beta == 0 alone is NaN-safe)."""
    rowptr, cols = np.array([0, 1, 1], np.int64), np.array([0], np.int64)
    vals, b = np.array([np.inf]), np.array([[2.0, 1.0]])
    out = _dev(np.array([[1.0, 2.0], [3.0, 4.0]]))
    _kernel("_spmm")(out, _dev(rowptr), _dev(cols), _dev(vals), _dev(b), 0.0, 2.0)
    np.testing.assert_array_equal(_host(out), [[np.nan, np.nan], [6.0, 8.0]])
    out = _dev(np.array([[1.0, 2.0], [3.0, 4.0]]))
    _kernel("_spmm")(out, _dev(rowptr), _dev(cols), _dev(np.array([5.0])), _dev(b), 0.0, 2.0)
    np.testing.assert_array_equal(_host(out), [[2.0, 4.0], [6.0, 8.0]])


def test_spmm_without_nonzeros_scales_out():
    out = _dev(np.ones((3, 4)))
    _kernel("_spmm")(out, _dev(np.zeros(4, np.int64)), _dev(np.zeros(0, np.int64)),
                     _dev(np.zeros(0)), _dev(np.ones((2, 4))), 1.0, 3.0)
    np.testing.assert_array_equal(_host(out), np.full((3, 4), 3.0))


def test_spmm_long_row_splits_across_lanes():
    """One row with 2000 nonzeros, N = 1: every lane of the warp takes its share (G = 1)."""
    rng = np.random.default_rng(6)
    K = 2000
    vals, b = rng.standard_normal(K), rng.standard_normal((K, 1))
    out = gt.empty((1, 1), dtype=gt.float64, device=CUDA)
    _kernel("_spmm")(out, _dev(np.array([0, K], np.int64)), _dev(np.arange(K, dtype=np.int64)),
                     _dev(vals), _dev(b), 1.0, 0.0)
    np.testing.assert_allclose(_host(out), [[vals @ b[:, 0]]], rtol=1e-12)


# -- SDDMM -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("N", [0, 1, 5, 32, 45])
def test_sddmm_matches_numpy(dtype, N):
    rng = np.random.default_rng(N)
    M, K, nnz = 30, 20, 333
    rows, cols = rng.integers(0, M, size=nnz), rng.integers(0, K, size=nnz)
    a, b = _rounded(rng.standard_normal((M, N)), dtype), _rounded(rng.standard_normal((K, N)),
                                                                  dtype)
    out = _dev(np.full(nnz, np.nan), dtype)
    _kernel("_sddmm")(out, _dev(rows), _dev(cols), _dev(a, dtype), _dev(b, dtype))
    _close(out, np.einsum("in,in->i", a[rows], b[cols]), dtype)


def test_sddmm_empty():
    out = gt.empty((0,), dtype=gt.float32, device=CUDA)
    empty_idx = _dev(np.zeros(0, np.int64))
    _kernel("_sddmm")(out, empty_idx, empty_idx, _dev(np.ones((2, 3), np.float32)),
                      _dev(np.ones((2, 3), np.float32)))
    assert tuple(out.shape) == (0,)


# -- segment softmax -------------------------------------------------------------------------------
def _segments(rng, lengths, F):
    """values [nnz, F], a shuffled order grouping entries into segments of ``lengths``."""
    nnz = int(sum(lengths))
    order = rng.permutation(nnz).astype(np.int64)
    segptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return rng.standard_normal((nnz, F)) * 3, order, segptr


def _torch_segment(values, order, segptr, log, grad_out=None):
    """Per segment, torch's dense (log_)softmax over its entries; and the values' gradient."""
    v = torch.tensor(values, requires_grad=True)
    out = torch.empty_like(v)
    for s in range(len(segptr) - 1):
        ent = torch.tensor(order[segptr[s]:segptr[s + 1]])
        if len(ent):
            fn = torch.log_softmax if log else torch.softmax
            out = out.index_put((ent,), fn(v[ent], dim=0))
    if grad_out is None:
        return out.detach().numpy(), None
    out.backward(torch.tensor(grad_out))
    return out.detach().numpy(), v.grad.numpy()


_LENGTHS = [[3, 0, 1, 5], [40, 1, 100, 0, 2] + [3] * 40]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("F", [1, 3, 40])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("lengths", _LENGTHS, ids=["short", "long"])
def test_segment_softmax_and_backward(dtype, F, log, lengths):
    rng = np.random.default_rng(F + len(lengths))
    values, order, segptr = _segments(rng, lengths, F)
    values = _rounded(values, dtype)
    grad_out = _rounded(rng.standard_normal(values.shape), dtype)
    want, want_grad = _torch_segment(values, order, segptr, log, grad_out)
    out = _dev(np.full(values.shape, np.nan), dtype)
    _kernel("_segment_softmax")(out, _dev(values, dtype), _dev(order), _dev(segptr), log)
    _close(out, want, dtype)
    grad_in = _dev(np.full(values.shape, np.nan), dtype)
    _kernel("_segment_softmax_backward")(grad_in, _dev(grad_out, dtype), out, _dev(order),
                                         _dev(segptr), log)
    # The backward reads the (rounded) forward result: compare against exact math on it.
    o, g = _host(out).astype(np.float64), grad_out
    seg_of = np.empty(len(order), np.int64)
    for s in range(len(segptr) - 1):
        seg_of[order[segptr[s]:segptr[s + 1]]] = s
    if log:
        sums = np.stack([g[seg_of == s].sum(0) for s in range(len(segptr) - 1)])
        exact = g - np.exp(o) * sums[seg_of]
    else:
        sums = np.stack([(g * o)[seg_of == s].sum(0) for s in range(len(segptr) - 1)])
        exact = o * (g - sums[seg_of])
    _close(grad_in, exact, dtype)
    if dtype is gt.float64:  # and against torch's autograd of the dense per-segment softmax
        np.testing.assert_allclose(_host(grad_in), want_grad, rtol=1e-10, atol=1e-12)


def test_segment_softmax_matches_torch_sparse_softmax():
    """Rows of a hybrid sparse [R, C, F] tensor as segments: torch.sparse.(log_)softmax(dim=1)."""
    rng = np.random.default_rng(7)
    R, C, F, nnz = 9, 12, 2, 50
    idx, val = _random_coo(rng, (R, C), (F,), nnz)
    x = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (R, C, F)).coalesce()
    ci, cv = x.indices().numpy(), x.values().numpy()
    order = np.argsort(ci[0], kind="stable").astype(np.int64)
    segptr = np.searchsorted(ci[0][order], np.arange(R + 1)).astype(np.int64)
    for log, fn in ((False, torch.sparse.softmax), (True, torch.sparse.log_softmax)):
        out = gt.empty(cv.shape, dtype=gt.float64, device=CUDA)
        _kernel("_segment_softmax")(out, _dev(cv), _dev(order), _dev(segptr), log)
        np.testing.assert_allclose(_host(out), fn(x, 1).coalesce().values().numpy(),
                                   rtol=1e-12, atol=1e-12)


def test_segment_softmax_nan_and_inf_like_torch():
    """[nnz] values (no dense dims): NaN spreads over its segment, a segment of only -inf is NaN
    and -inf beside finite entries gives 0 / -inf, as torch.sparse.(log_)softmax does."""
    inf = np.inf
    values = np.array([1.0, np.nan, -inf, -inf, 2.0, -inf, 0.5])
    order = np.arange(7, dtype=np.int64)
    segptr = np.array([0, 2, 4, 7], np.int64)
    e = np.exp([0.0, 0.5 - 2.0])
    for log, want in ((False, [np.nan, np.nan, np.nan, np.nan, e[0] / e.sum(), 0.0,
                               e[1] / e.sum()]),
                      (True, [np.nan, np.nan, np.nan, np.nan, -np.log(e.sum()), -inf,
                              -1.5 - np.log(e.sum())])):
        out = gt.empty((7,), dtype=gt.float64, device=CUDA)
        _kernel("_segment_softmax")(out, _dev(values), _dev(order), _dev(segptr), log)
        np.testing.assert_allclose(_host(out), want, rtol=1e-12)


def test_segment_softmax_hybrid_values_keep_their_shape():
    """values [nnz, 2, 3] normalise per dense element, like values [nnz, 6]."""
    rng = np.random.default_rng(8)
    values = rng.standard_normal((5, 2, 3))
    order, segptr = np.array([4, 0, 2, 1, 3], np.int64), np.array([0, 3, 5], np.int64)
    out = gt.empty((5, 2, 3), dtype=gt.float64, device=CUDA)
    _kernel("_segment_softmax")(out, _dev(values), _dev(order), _dev(segptr), False)
    want, _ = _torch_segment(values.reshape(5, 6), order, segptr, False)
    np.testing.assert_allclose(_host(out).reshape(5, 6), want, rtol=1e-12)


# -- grid-stride loops -----------------------------------------------------------------------------
def test_more_rows_nonzeros_and_segments_than_warps_in_the_grid():
    """9000 units > 1024 blocks x 8 warps: every warp loops to a second unit."""
    rng = np.random.default_rng(9)
    M, K, nnz = 9000, 50, 20000
    rows = np.sort(rng.integers(0, M, size=nnz)).astype(np.int64)
    cols = rng.integers(0, K, size=nnz).astype(np.int64)
    rowptr = np.searchsorted(rows, np.arange(M + 1)).astype(np.int64)
    vals, b = rng.standard_normal(nnz), rng.standard_normal((K, 1))
    out = gt.empty((M, 1), dtype=gt.float64, device=CUDA)
    _kernel("_spmm")(out, _dev(rowptr), _dev(cols), _dev(vals), _dev(b), 1.0, 0.0)
    want = np.zeros(M)
    np.add.at(want, rows, vals * b[cols, 0])
    np.testing.assert_allclose(_host(out)[:, 0], want, rtol=1e-12, atol=1e-12)

    a2, b2 = rng.standard_normal((M, 40)), rng.standard_normal((K, 40))
    sd = gt.empty((nnz,), dtype=gt.float64, device=CUDA)  # G = 32: a warp per nonzero
    _kernel("_sddmm")(sd, _dev(rows), _dev(cols), _dev(a2), _dev(b2))
    np.testing.assert_allclose(_host(sd), np.einsum("in,in->i", a2[rows], b2[cols]),
                               rtol=1e-12, atol=1e-12)

    sm = gt.empty((nnz,), dtype=gt.float64, device=CUDA)  # segments: the CSR rows
    _kernel("_segment_softmax")(sm, _dev(vals), _dev(np.arange(nnz, dtype=np.int64)),
                                _dev(rowptr), False)
    mx = np.full(M, -np.inf)
    np.maximum.at(mx, rows, vals)
    e = np.exp(vals - mx[rows])
    totals = np.zeros(M)
    np.add.at(totals, rows, e)
    np.testing.assert_allclose(_host(sm), e / totals[rows], rtol=1e-12)


# -- errors ----------------------------------------------------------------------------------
def test_errors_name_dtypes_and_devices():
    idx = _dev(np.zeros((1, 2), np.int64))
    with pytest.raises(TypeError, match="complex"):
        _kernel("_coalesce")(idx, gt.zeros(2, dtype=gt.complex64, device=CUDA), (3,))
    with pytest.raises(TypeError, match="int64"):
        _kernel("_sddmm")(gt.zeros(2, dtype=gt.int64, device=CUDA), _dev(np.zeros(2, np.int64)),
                          _dev(np.zeros(2, np.int64)), gt.zeros((1, 1), dtype=gt.int64,
                                                                device=CUDA),
                          gt.zeros((1, 1), dtype=gt.int64, device=CUDA))
    with pytest.raises(RuntimeError, match="cpu"):
        _kernel("_coalesce")(gt.zeros((1, 2), dtype=gt.int64), _dev(np.zeros(2)), (3,))
    with pytest.raises(ValueError, match=r"\(1, 2\)"):
        _kernel("_coalesce")(idx, _dev(np.zeros(3)), (3,))
    with pytest.raises(TypeError, match="int32"):
        _kernel("_csr_rowptr")(gt.zeros(3, dtype=gt.int64, device=CUDA),
                               gt.zeros(2, dtype=gt.int32, device=CUDA), 2)
