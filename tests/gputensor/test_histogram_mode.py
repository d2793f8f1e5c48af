"""gt.histogram, gt.histogramdd and gt.mode against PyTorch (whose histograms are CPU-only;
here they run on cpu and emulated cuda alike): edges, the right-most edge's inclusion, weights,
density, errors; mode's values, its index among ties, keepdim, out= and its derivative."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, assert_same_error, random_array, requires_torch, torch

pytestmark = requires_torch


def _pair(a: np.ndarray, device: str) -> tuple:
    return gt.tensor(a, device=device), torch.from_numpy(np.array(a))


def _same_hist(got, want, atol: float = 0.0) -> None:
    assert type(got).__name__ == type(want).__name__
    assert_close(got.hist, want.hist, atol=atol, rtol=atol)
    edges_g = got.bin_edges if isinstance(got.bin_edges, tuple) else (got.bin_edges,)
    edges_t = want.bin_edges if isinstance(want.bin_edges, tuple) else (want.bin_edges,)
    assert len(edges_g) == len(edges_t)
    for eg, et in zip(edges_g, edges_t, strict=True):
        # the edges are gt.linspace's, which can differ from PyTorch's fused multiply-add
        # ramp in the last bit (the bin of a value within an ulp of an edge could then differ)
        ulp = 2e-7 if eg.dtype is gt.float32 else 5e-16
        assert_close(eg, et, atol=ulp, rtol=ulp)


# -- histogram -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
@pytest.mark.parametrize("bins", [1, 4, 10, 100])
def test_histogram_int_bins(device: str, dtype: gt.dtype, bins: int) -> None:
    g, t = _pair(random_array((7, 9), dtype), device)
    _same_hist(gt.histogram(g, bins), torch.histogram(t, bins))
    _same_hist(g.histogram(bins, range=(-1.0, 1.5)), t.histogram(bins, range=(-1.0, 1.5)))
    w, tw = _pair(random_array((7, 9), dtype, 0.0, 3.0, seed=1), device)
    tol = 1e-5 if dtype is gt.float32 else 1e-12
    _same_hist(gt.histogram(g, bins, weight=w, density=True),
               torch.histogram(t, bins, weight=tw, density=True), tol)
    _same_hist(gt.histogram(g, bins=bins, weight=w), torch.histogram(t, bins=bins, weight=tw), tol)


def test_histogram_edges_inclusive_on_the_right(device: str) -> None:
    # values exactly on edges (0.1 * k in float32 is rounded), the right-most edge, outside
    # values, NaN, and the default 100 bins
    a = np.array([0.0, 0.1, 0.2, 0.30000001, 0.7, 1.0, 1.0, -0.5, 1.5, np.nan], np.float32)
    g, t = _pair(a, device)
    for bins in (10, 3, 7):
        _same_hist(gt.histogram(g, bins, range=(0.0, 1.0)),
                   torch.histogram(t, bins, range=(0.0, 1.0)))
    edges = np.array([0.0, 0.1, 0.3, 0.7, 1.0], np.float32)
    ge, te = _pair(edges, device)
    _same_hist(gt.histogram(g, ge), torch.histogram(t, te))
    _same_hist(gt.histogram(g, ge, density=True), torch.histogram(t, te, density=True), 1e-6)
    finite = g[:-1]
    _same_hist(gt.histogram(finite), torch.histogram(t[:-1]))
    # all values equal: the range widens by 0.5; empty input: [0, 1]
    _same_hist(gt.histogram(gt.full((4,), 2.0, device=device), 3),
               torch.histogram(torch.full((4,), 2.0), 3))
    _same_hist(gt.histogram(gt.empty(0, device=device), 3), torch.histogram(torch.empty(0), 3))


def test_histogram_out(device: str) -> None:
    g, t = _pair(random_array((20,), gt.float64), device)
    out = (gt.empty(0, dtype=gt.float64, device=device),
           gt.empty(0, dtype=gt.float64, device=device))
    res = gt.histogram(g, 5, out=out)
    assert res.hist is out[0] and res.bin_edges is out[1]
    _same_hist(res, torch.histogram(t, 5))


def test_histogram_errors_match_torch(device: str) -> None:
    g, t = _pair(np.array([0.0, 1, 1, 2, 3, 3, 3, 5], np.float32), device)
    nan_g, nan_t = _pair(np.array([2.0, np.nan], np.float32), device)
    cases = [
        (lambda m: m.histogram, (3,), {"range": (3.0, 1.0)}),
        (lambda m: m.histogram, (0,), {}),
        (lambda m: m.histogram, (-1,), {}),
        (lambda m: m.histogram, (3,), {"range": (0.0, float("inf"))}),
        (lambda m: m.histogram, (3,), {"range": (0.0, 1.0, 2.0)}),
    ]
    for fn, args, kw in cases:
        assert_same_error(lambda fn=fn, args=args, kw=kw: fn(gt)(g, *args, **kw),
                          lambda fn=fn, args=args, kw=kw: fn(torch)(t, *args, **kw))
    assert_same_error(lambda: gt.histogram(nan_g, 3), lambda: torch.histogram(nan_t, 3))
    assert_same_error(lambda: gt.histogram(g.long(), 3), lambda: torch.histogram(t.long(), 3))
    assert_same_error(lambda: gt.histogram(g.half(), 3), lambda: torch.histogram(t.half(), 3))
    assert_same_error(lambda: gt.histogram(g.double(), g[:2]),
                      lambda: torch.histogram(t.double(), t[:2]))
    assert_same_error(lambda: gt.histogram(g, g[:1]), lambda: torch.histogram(t, t[:1]))
    assert_same_error(lambda: gt.histogram(g, g.reshape(2, 4)),
                      lambda: torch.histogram(t, t.reshape(2, 4)))
    assert_same_error(lambda: gt.histogram(g, 3, weight=g[:3]),
                      lambda: torch.histogram(t, 3, weight=t[:3]))
    assert_same_error(lambda: gt.histogram(g, 3, weight=g.double()),
                      lambda: torch.histogram(t, 3, weight=t.double()))
    assert_same_error(lambda: gt.histogram(g, 3, weight=g.long()),
                      lambda: torch.histogram(t, 3, weight=t.long()))
    with pytest.raises(TypeError):
        gt.histogram(g, 2.5)


def test_histogram_has_no_derivative(device: str) -> None:
    x = gt.tensor([0.5, 1.0, 2.0], device=device, requires_grad=True)
    hist, _ = gt.histogram(x.detach(), 2, weight=x)
    with pytest.raises(RuntimeError, match="histogram"):
        hist.sum().backward()


# -- histogramdd --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_histogramdd_matches_torch(device: str, dtype: gt.dtype) -> None:
    g, t = _pair(random_array((4, 6, 3), dtype), device)
    w, tw = _pair(random_array((4, 6), dtype, 0.0, 2.0, seed=1), device)
    tol = 1e-5 if dtype is gt.float32 else 1e-12
    _same_hist(gt.histogramdd(g, 4), torch.histogramdd(t, 4))
    _same_hist(gt.histogramdd(g, [2, 3, 5], range=[-1.0, 1.0, -2.0, 2.0, 0.0, 1.0]),
               torch.histogramdd(t, [2, 3, 5], range=[-1.0, 1.0, -2.0, 2.0, 0.0, 1.0]))
    _same_hist(gt.histogramdd(g, (3, 3, 2), weight=w, density=True),
               torch.histogramdd(t, (3, 3, 2), weight=tw, density=True), tol)
    edges = [random_array((n,), dtype, seed=5 + n) for n in (3, 4, 2)]
    edges = [np.sort(e) for e in edges]
    ge = [gt.tensor(e, device=device) for e in edges]
    te = [torch.from_numpy(e) for e in edges]
    _same_hist(gt.histogramdd(g, ge, weight=w), torch.histogramdd(t, te, weight=tw), tol)


def test_histogramdd_edge_cases(device: str) -> None:
    a = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    g, t = _pair(a, device)
    # points on the outer edges of both dims
    _same_hist(gt.histogramdd(g, [2, 3], range=[0.0, 6.0, 1.0, 7.0]),
               torch.histogramdd(t, [2, 3], range=[0.0, 6.0, 1.0, 7.0]))
    _same_hist(gt.histogramdd(gt.empty(0, 2, device=device), 3),
               torch.histogramdd(torch.empty(0, 2), 3))
    _same_hist(gt.histogramdd(gt.empty(3, 0, device=device), 3),
               torch.histogramdd(torch.empty(3, 0), 3))
    for g_args, t_args, kw in [
        ((g, [2, 3]), (t, [2, 3]), {"range": [0.0, 1.0]}),
        ((g, [2, 3, 4]), (t, [2, 3, 4]), {}),
        ((g.reshape(-1), 3), (t.reshape(-1), 3), {}),
        ((g, [0, 3]), (t, [0, 3]), {}),
        ((g, 3), (t, 3), {"range": (0.0, 1.0, 3.0, 2.0)}),
        ((g.long(), 3), (t.long(), 3), {}),
    ]:
        assert_same_error(lambda g_args=g_args, kw=kw: gt.histogramdd(*g_args, **kw),
                          lambda t_args=t_args, kw=kw: torch.histogramdd(*t_args, **kw))
    assert_same_error(lambda: gt.histogramdd(g, 3, weight=g),
                      lambda: torch.histogramdd(t, 3, weight=t))


# -- mode ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.int64, gt.int32, gt.int8,
                                   gt.uint8, gt.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_mode_matches_torch_on_ties(device: str, dtype: gt.dtype, dim: int) -> None:
    # rows up to 16 long (std::sort is then an insertion sort: the last occurrence), many ties
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, size=(6, 16, 5)).astype(dtype.np_dtype)
    g, t = _pair(a, device)
    for keepdim in (False, True):
        got, want = gt.mode(g, dim, keepdim), torch.mode(t, dim, keepdim)
        assert type(got).__name__ == "mode" and got._fields == ("values", "indices")
        assert_close(got.values, want.values, atol=0, rtol=0)
        assert_close(got.indices, want.indices, atol=0, rtol=0)
    got = g.mode(dim=dim)
    assert_close(got.indices, torch.mode(t, dim).indices, atol=0, rtol=0)


def _musser_killer(n: int) -> np.ndarray:
    """Musser's median-of-3 killer: drives introsort into its heapsort fallback."""
    k, a = n // 2, [0] * n
    for i in range(1, k + 1):
        if i % 2:
            a[i - 1], a[i] = i, k + i
        a[k + i - 1] = 2 * i
    return np.array(a)


@pytest.mark.parametrize("dtype", [gt.int64, gt.float32, gt.float64, gt.float16, gt.int16])
def test_mode_long_rows_match_torch_index(device: str, dtype: gt.dtype) -> None:
    # beyond 16 elements std::sort is an unstable introsort: PyTorch's index among ties is
    # what its moves leave last; the kernel replays them (partitions, heapsort fallback, final
    # insertion sort), so the index is PyTorch's, not just any occurrence
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, 7, size=100), rng.integers(0, 40, size=257),
            np.sort(rng.integers(0, 9, size=300)), np.sort(rng.integers(0, 9, size=300))[::-1],
            _musser_killer(500) // 2, _musser_killer(128) // 2, rng.integers(0, 3, size=17)]
    not_last = 0  # rows where PyTorch's index is not the last occurrence
    for row in rows:
        a = np.stack([row, row[::-1]]).astype(dtype.np_dtype)
        g, t = _pair(a, device)
        got, want = gt.mode(g, 1), torch.mode(t, 1)
        assert_close(got.values, want.values, atol=0, rtol=0)
        assert_close(got.indices, want.indices, atol=0, rtol=0)
        for r, v, i in zip(a, want.values.numpy(), want.indices.tolist(), strict=True):
            not_last += i != int(np.nonzero(r == v)[0][-1])
    assert not_last  # the replayed sort matters here


def test_mode_scalars_empty_and_out(device: str) -> None:
    for a in (np.float32(3.0), np.array([-0.0, 0.0, 0.0], np.float32), np.array([7], np.int64)):
        g, t = _pair(np.array(a), device)
        got, want = gt.mode(g), torch.mode(t)
        assert_close(got.values, want.values, atol=0, rtol=0)
        assert_close(got.indices, want.indices, atol=0, rtol=0)
    for shape, dim in (((0, 2), 1), ((2, 0), 0)):
        g, t = gt.empty(shape, device=device), torch.empty(shape)
        got, want = gt.mode(g, dim), torch.mode(t, dim)
        assert tuple(got.values.shape) == tuple(want.values.shape)
    for shape, dim in (((0, 2), 0), ((2, 0), 1), ((0,), -1)):
        assert_same_error(lambda shape=shape, dim=dim: gt.mode(gt.empty(shape, device=device),
                                                               dim),
                          lambda shape=shape, dim=dim: torch.mode(torch.empty(shape), dim))
    if device == "cpu":  # PyTorch names its CPU kernel
        assert_same_error(lambda: gt.mode(gt.ones(2, dtype=gt.complex64)),
                          lambda: torch.mode(torch.ones(2, dtype=torch.complex64)))
    g, t = _pair(np.array([[1.0, 2, 2], [3, 1, 1]]), device)
    out = (gt.empty(0, dtype=gt.float64, device=device), gt.empty(0, dtype=gt.int64,
                                                                  device=device))
    res = gt.mode(g, 1, out=out)
    assert res.values is out[0] and res.indices is out[1]
    want = torch.mode(t, 1)
    assert_close(out[0], want.values, atol=0, rtol=0)
    assert_close(out[1], want.indices, atol=0, rtol=0)


def test_mode_gradient_flows_to_the_index(device: str) -> None:
    a = np.array([[1.0, 2, 2, 5], [3, 3, 1, 1], [4, 0, 4, 0]])
    ta = torch.from_numpy(a).requires_grad_()
    g = gt.tensor(a, device=device, requires_grad=True)
    for dim, keepdim in ((1, False), (0, True)):
        ta.grad = None
        g.grad = None
        w = np.arange(1.0, 5.0)[: 3 if dim == 1 else 4]
        w = w.reshape((1, 4) if keepdim else (-1,)) if dim == 0 else w
        (torch.mode(ta, dim, keepdim).values * torch.from_numpy(w)).sum().backward()
        (gt.mode(g, dim, keepdim).values * gt.tensor(w, device=device)).sum().backward()
        assert_close(g.grad, ta.grad, atol=0, rtol=0)
    x = gt.tensor(random_array((3, 5), gt.float64), device=device, requires_grad=True)
    assert gt.autograd.gradcheck(lambda t: gt.mode(t, 1).values, (x,))
