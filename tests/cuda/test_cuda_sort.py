"""CUDA sorting, searching and data-dependent-size kernels (kernels/cuda/sort.cu) against the
CPU backend, bit for bit: what the shared device-parametrised suites don't reach.

Sizes cross the kernels' internal boundaries (shared-memory tiles of 1024 keys, global merge
passes, scan chunks of 2048 flags, packed short rows), layouts are strided, 16-bit floats and
complex values travel, and every instantiation compiles with NVRTC for sm_70/80/90.
"""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

pytestmark = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime")

CUDA = "cuda:0"
NAN = float("nan")


def _np(t: gt.Tensor) -> np.ndarray:
    """Host values of a result (16-bit floats widened exactly, for comparisons)."""
    t = t.cpu()
    if t.dtype in (gt.float16, gt.bfloat16):
        t = t.float()
    return t.numpy()


def _same(a, b) -> None:
    """Equal results (tensors or tuples of them): dtype, shape and every bit but NaN payloads."""
    if isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(_np(a), _np(b))


def _pair(arr: np.ndarray, dtype: gt.dtype | None = None) -> tuple[gt.Tensor, gt.Tensor]:
    c = gt.tensor(arr, dtype=dtype)
    return c, c.to(CUDA)


def _strided(t: gt.Tensor) -> gt.Tensor:
    """A transposed, non-contiguous view with the same logical values (as a new layout)."""
    return t.transpose(0, -1).contiguous().transpose(0, -1)


def _ties(shape: tuple[int, ...], seed: int = 0, dtype: np.dtype = np.float32) -> np.ndarray:
    """Values with many ties, some NaN and signed zeros (floats)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-20, 20, size=shape).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        flat = a.reshape(-1)
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 50))] = np.nan
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 50))] = -0.0
    return a


# -- sorting -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((100000,), 0), ((5, 3001), 1), ((3001, 3), 0),
                                       ((40, 7, 9), 1), ((2, 1025), -1)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_large_rows_match_cpu(shape, dim, descending) -> None:
    c, g = _pair(_ties(shape, seed=len(shape)))
    _same(tuple(gt.sort(g, dim, descending, stable=True)),
          tuple(gt.sort(c, dim, descending, stable=True)))


@pytest.mark.parametrize("dtype", [gt.float16, gt.bfloat16, gt.int8, gt.uint8, gt.int16,
                                   gt.int32, gt.bool, gt.float64, gt.int64])
def test_sort_dtypes_strided(dtype) -> None:
    arr = _ties((33, 70), seed=3, dtype=np.float64)
    c = gt.tensor(arr).to(dtype)
    g = c.to(CUDA)
    for dim in (0, 1):
        for desc in (False, True):
            _same(tuple(gt.sort(_strided(g), dim, desc)), tuple(gt.sort(c, dim, desc)))


def test_sort_int64_extremes_and_out_views() -> None:
    arr = np.array([2**63 - 1, -2**63, 0, -1, 1, 2**62, -2**62, 0], np.int64)
    c, g = _pair(arr)
    _same(tuple(gt.sort(g)), tuple(gt.sort(c)))
    _same(tuple(gt.sort(g, descending=True)), tuple(gt.sort(c, descending=True)))
    base_v = gt.zeros(8, 2, dtype=gt.int64, device=CUDA)
    base_i = gt.zeros(8, 2, dtype=gt.int64, device=CUDA)
    vo, io = base_v[:, 1], base_i[:, 0]  # strided out= tensors
    gt.sort(g, out=(vo, io))
    _same((vo, io), tuple(gt.sort(c)))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_kthvalue_large(largest) -> None:
    c, g = _pair(_ties((3, 5000), seed=5))
    for k in (1, 7, 1500, 5000):
        # With ties the CPU's partition picks any tied index; CUDA takes the stable sort's.
        r = gt.topk(g, k, 1, largest=largest)
        _same(r.values, gt.topk(c, k, 1, largest=largest).values)
        _same(tuple(r), tuple(x[:, :k] for x in gt.sort(c, 1, largest, stable=True)))
    c, g = _pair(np.random.default_rng(6).permutation(15000).reshape(3, 5000).astype(np.float32))
    for k in (1, 7, 1500, 5000):
        _same(tuple(gt.topk(g, k, 1, largest=largest)), tuple(gt.topk(c, k, 1, largest=largest)))
    ct, gtr = c.t(), g.t()  # dim 0 of a transposed view
    _same(tuple(gt.topk(gtr, 4, 0, largest=largest)), tuple(gt.topk(ct, 4, 0, largest=largest)))
    d, h = _pair(np.random.default_rng(1).permutation(30000).reshape(3, 10000).astype(np.float32))
    for k in (1, 5000, 10000):
        _same(tuple(gt.kthvalue(h, k, 1)), tuple(gt.kthvalue(d, k, 1)))
    _same(tuple(gt.kthvalue(h.t(), 2, 1, keepdim=True)), tuple(gt.kthvalue(d.t(), 2, 1, True)))


def test_sort_gradient_on_cuda() -> None:
    v = np.random.default_rng(3).permutation(20).reshape(4, 5) * 0.5
    w = np.random.default_rng(4).uniform(-1, 1, (4, 5))
    grads = []
    for dev in ("cpu", CUDA):
        x = gt.tensor(v, device=dev).requires_grad_()
        y = x.sort(0, descending=True)[0] + x.topk(5, 1)[0] + x.kthvalue(2, 0, keepdim=True)[0]
        (y * gt.tensor(w, device=dev)).sum().backward()
        grads.append(x.grad)
    _same(grads[1], grads[0])


# -- unique ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sorted_", [True, False])
def test_unique_large_and_nan(sorted_) -> None:
    arr = _ties((6000,), seed=7)
    arr[::3] = arr[1::3]  # consecutive runs for unique_consecutive
    c, g = _pair(arr)
    kw = {"return_inverse": True, "return_counts": True}
    fn = gt.unique if sorted_ else gt.unique_consecutive
    _same(fn(g, **kw), fn(c, **kw))
    _same(fn(_strided(g.reshape(60, 100)), **kw), fn(c.reshape(60, 100), **kw))


@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.int64, gt.uint8, gt.bool])
def test_unique_dim_rows(dtype) -> None:
    rng = np.random.default_rng(2)
    arr = rng.integers(0, 2, size=(300, 3, 2)).astype(np.float64)
    if dtype.is_floating_point:
        arr[5, 1, 0] = np.nan
        arr[6] = arr[5]  # equal rows holding NaN stay distinct
        arr[7, 0, 0] = -0.0
    c = gt.tensor(arr).to(dtype)
    g = c.to(CUDA)
    kw = {"return_inverse": True, "return_counts": True}
    for dim in (0, 1, 2):
        _same(gt.unique(g, dim=dim, **kw), gt.unique(c, dim=dim, **kw))
        _same(gt.unique_consecutive(g, dim=dim, **kw), gt.unique_consecutive(c, dim=dim, **kw))
    _same(gt.unique(_strided(g), dim=0, **kw), gt.unique(c, dim=0, **kw))


def test_unique_zero_dim_and_empty() -> None:
    c = gt.tensor(4.0)
    _same(gt.unique(c.to(CUDA), return_inverse=True, return_counts=True),
          gt.unique(c, return_inverse=True, return_counts=True))
    e = gt.zeros(0, 3)
    _same(gt.unique(e.to(CUDA), dim=0, return_inverse=True, return_counts=True),
          gt.unique(e, dim=0, return_inverse=True, return_counts=True))


# -- nonzero / masked_select ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float32, gt.float16, gt.bfloat16, gt.int64, gt.bool,
                                   gt.uint8, gt.complex64, gt.complex128])
def test_nonzero_crosses_scan_chunks(dtype) -> None:
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 3, size=(7, 2049)).astype(np.float64)
    arr[0, :5] = np.nan
    arr[1, :5] = -0.0
    c = gt.tensor(arr).to(dtype)
    if dtype.is_complex:
        c = c + gt.tensor(rng.integers(0, 2, size=(7, 2049)) * 1j).to(dtype)
    g = c.to(CUDA)
    _same(gt.nonzero(g), gt.nonzero(c))
    _same(gt.nonzero(g.t()), gt.nonzero(c.t()))
    _same(gt.nonzero(g[:, ::3]), gt.nonzero(c[:, ::3]))


def test_nonzero_empty_and_scalar() -> None:
    for v in (0.0, 2.0):
        c = gt.tensor(v)
        _same(gt.nonzero(c.to(CUDA)), gt.nonzero(c))
    _same(gt.nonzero(gt.zeros(0, 4, device=CUDA)), gt.nonzero(gt.zeros(0, 4)))
    _same(gt.nonzero(gt.zeros(3, 4, device=CUDA)), gt.nonzero(gt.zeros(3, 4)))


@pytest.mark.parametrize("dtype", [gt.float32, gt.bfloat16, gt.int8, gt.complex128, gt.bool])
def test_masked_select_broadcast_and_dtypes(dtype) -> None:
    rng = np.random.default_rng(1)
    c = gt.tensor(rng.integers(-5, 5, size=(50, 130)).astype(np.float64)).to(dtype)
    m = gt.tensor(rng.random((50, 1)) > 0.4)
    m2 = gt.tensor(rng.random((50, 130)) > 0.3)
    g, gm, gm2 = c.to(CUDA), m.to(CUDA), m2.to(CUDA)
    _same(gt.masked_select(g, gm), gt.masked_select(c, m))
    _same(gt.masked_select(g.t(), gm2.t()), gt.masked_select(c.t(), m2.t()))
    _same(gt.masked_select(g, gt.zeros_like(gm2)), gt.masked_select(c, gt.zeros_like(m2)))


def test_boolean_index_and_masked_select_gradient() -> None:
    grads = []
    for dev in ("cpu", CUDA):
        x = gt.tensor(np.arange(12.0).reshape(3, 4) - 5, device=dev).requires_grad_()
        (x[x > 0] * 2).sum().backward()
        grads.append(x.grad)
    _same(grads[1], grads[0])


# -- searchsorted ---------------------------------------------------------------------------------
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_rows_sorter_and_out(right) -> None:
    rng = np.random.default_rng(0)
    bnd = np.sort(rng.integers(-50, 50, size=(4, 300)), axis=1).astype(np.float32)
    vals = rng.integers(-60, 60, size=(4, 2000)).astype(np.float32)
    cb, gb = _pair(bnd)
    cv, gv = _pair(vals)
    _same(gt.searchsorted(gb, gv, right=right), gt.searchsorted(cb, cv, right=right))
    _same(gt.searchsorted(gb, _strided(gv), right=right, out_int32=True),
          gt.searchsorted(cb, cv, right=right, out_int32=True))
    perm = np.stack([rng.permutation(300) for _ in range(4)])
    shuffled = np.take_along_axis(bnd, perm, 1)
    sorter = np.argsort(shuffled, axis=1, kind="stable")
    cs, gs = _pair(shuffled)
    ci, gi = _pair(sorter)
    _same(gt.searchsorted(gs, gv, right=right, sorter=_strided(gi)),
          gt.searchsorted(cs, cv, right=right, sorter=ci))
    out = gt.zeros(2000, 4, dtype=gt.int64, device=CUDA).t()  # strided out=
    gt.searchsorted(gb, gv, right=right, out=out)
    _same(out, gt.searchsorted(cb, cv, right=right))


def test_searchsorted_mixed_dtypes_compare_in_compute_dtype() -> None:
    # int64 values near 2**24 meet float32 boundaries: compared as float32, like the CPU.
    cb, gb = _pair(np.array([2.0**24, 2.0**24 + 2, 2.0**25], np.float32))
    cv, gv = _pair(np.array([2**24 - 1, 2**24, 2**24 + 1, 2**24 + 3, 2**25 + 1], np.int64))
    for right in (False, True):
        _same(gt.searchsorted(gb, gv, right=right), gt.searchsorted(cb, cv, right=right))
    ch, gh = _pair(np.array([-1.0, 0.5, 0.5, 2.0, NAN], np.float32))
    cq, gq = ch.half(), gh.half()
    cv2, gv2 = _pair(np.array([0.5, NAN, 3.0, -2.0], np.float64))
    _same(gt.searchsorted(gq, gv2), gt.searchsorted(cq, cv2))
    _same(gt.searchsorted(gq, gv2.half(), right=True), gt.searchsorted(cq, cv2.half(), right=True))


def test_searchsorted_bad_sorter_raises_on_cuda() -> None:
    b = gt.tensor([1.0, 2.0, 3.0], device=CUDA)
    with pytest.raises(IndexError, match="sorter index 3 is out of bounds"):
        gt.searchsorted(b, b, sorter=gt.tensor([0, 1, 3], device=CUDA))
    with pytest.raises(IndexError, match="sorter index -1 is out of bounds"):
        gt.searchsorted(b, b, sorter=gt.tensor([0, -1, 2], device=CUDA))


# -- bincount / histc ---------------------------------------------------------------------------
@pytest.mark.parametrize("xdtype", [gt.int64, gt.int32, gt.uint8, gt.int8])
def test_bincount_weighted_is_exact(xdtype) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, size=30000)
    w = rng.standard_normal(30000)
    cx = gt.tensor(x).to(xdtype)
    gx = cx.to(CUDA)
    _same(gt.bincount(gx), gt.bincount(cx))
    _same(gt.bincount(gx, minlength=40), gt.bincount(cx, minlength=40))
    for wdt in (gt.float64, gt.float32, gt.float16, gt.bfloat16, gt.int64):
        cw = gt.tensor(w * 10).to(wdt)
        gw = cw.to(CUDA)
        _same(gt.bincount(gx, gw), gt.bincount(cx, cw))
        _same(gt.bincount(gx[::2], _strided(gw.reshape(300, 100)).reshape(-1)[::2]),
              gt.bincount(cx[::2], cw[::2]))


def test_bincount_errors_on_cuda() -> None:
    with pytest.raises(RuntimeError, match="non-negative integral"):
        gt.bincount(gt.tensor([0, -1], device=CUDA))
    _same(gt.bincount(gt.zeros(0, dtype=gt.int64, device=CUDA), gt.zeros(0, device=CUDA), 3),
          gt.bincount(gt.zeros(0, dtype=gt.int64), gt.zeros(0), 3))


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.float16, gt.bfloat16])
def test_histc_matches_cpu(dtype) -> None:
    arr = np.random.default_rng(4).uniform(-3, 3, size=20000)
    arr[:10] = [NAN, -3, 3, 1.0, 2.9999, -1, 0, np.inf, -np.inf, 1e-8]
    c = gt.tensor(arr).to(dtype)
    g = c.to(CUDA)
    for bins, lo, hi in ((7, 0, 0), (13, -1, 1), (1000, -3, 3), (3, 0.1, 0.2)):
        if lo == hi:
            c2, g2 = c[10:], g[10:]  # data range: finite values only
        else:
            c2, g2 = c, g
        _same(gt.histc(g2, bins, lo, hi), gt.histc(c2, bins, lo, hi))
    _same(gt.histc(_strided(g[10:].reshape(1999, 10)), 9, -2, 2),
          gt.histc(c[10:].reshape(1999, 10), 9, -2, 2))


# -- NVRTC -------------------------------------------------------------------------------------
