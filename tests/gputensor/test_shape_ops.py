"""Shape and indexing ops against PyTorch: values, dtypes, shapes, layouts, in-place variants
and the errors raised before any kernel runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import (
    ALL_DTYPES,
    assert_close,
    helper_test_op,
    noncontiguous,
    random_array,
    synced,
    torch,
)

pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch (CPU) oracle not installed")

NAN = float("nan")


def pair(arr: Any, device: str, dtype: gt.dtype | None = None) -> tuple[Any, gt.Tensor]:
    """The same values as a torch tensor and a gputensor tensor."""
    arr = np.asarray(arr) if dtype is None else np.asarray(arr, dtype=dtype.np_dtype)
    g = gt.tensor(arr, device=device)
    if g.dtype is gt.bfloat16:
        return torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16), g
    return torch.from_numpy(np.ascontiguousarray(arr)), g


def both(shapes: list, fn: Callable[[Any], Callable], **kw: Any) -> None:
    """helper_test_op with fn(torch) as the oracle and fn(gt) under test."""
    helper_test_op(shapes, fn(torch), fn(gt), **kw)


def idx(values: Any, device: str, dtype: Any = np.int64) -> tuple[Any, gt.Tensor]:
    return pair(np.asarray(values, dtype=dtype), device)


# == joining ==================================================================================
@pytest.mark.parametrize("dtypes", [(gt.float32, gt.float64), (gt.int64, gt.float32),
                                    (gt.uint8, gt.int8), (gt.bool, gt.bool),
                                    (gt.int32, gt.complex64), (gt.float16, gt.bfloat16)])
def test_cat_promotion(device: str, dtypes: tuple) -> None:
    ta, a = pair(random_array((2, 3), dtypes[0]), device)
    tb, b = pair(random_array((2, 2), dtypes[1], seed=1), device)
    assert_close(gt.cat([a, b], 1), torch.cat([ta, tb], 1))
    assert_close(gt.cat((a, noncontiguous(b)), dim=-1), torch.cat([ta, tb], -1))


def test_cat_forms(device: str) -> None:
    tx, x = pair(random_array((2, 3)), device)
    te, e = pair(np.zeros(0, np.float64), device)
    assert_close(gt.cat([x, e, x], 0), torch.cat([tx, te, tx], 0))  # 1-d empty skipped
    assert_close(gt.cat([e, e]), torch.cat([te, te]))
    assert_close(gt.concat([x, x], dim=1), torch.concat([tx, tx], dim=1))
    assert_close(gt.concatenate([x, x], axis=1), torch.concatenate([tx, tx], axis=1))
    assert_close(gt.cat([x, gt.zeros(2, 0, device=device)], 1), tx)
    out = gt.empty(0, dtype=gt.float64, device=device)
    r = gt.cat([x, x], 0, out=out)
    assert r is out and out.shape == (4, 3) and out.dtype is gt.float64
    assert_close(out, torch.cat([tx, tx]).double())


def test_cat_errors(device: str) -> None:
    x = gt.zeros(2, 3, device=device)
    with pytest.raises(RuntimeError, match="Expected size 2 but got size 3 for tensor number 1"):
        gt.cat([x, gt.ones(3, 3, device=device)], 1)
    with pytest.raises(RuntimeError, match="same number of dimensions: got 2 and 1"):
        gt.cat([x, gt.ones(3, device=device)], 1)
    with pytest.raises(RuntimeError, match=r"zero-dimensional tensor \(at position 1\)"):
        gt.cat([x, gt.tensor(1.0, device=device)])
    with pytest.raises(ValueError, match="non-empty list"):
        gt.cat([])
    with pytest.raises(IndexError, match="Dimension out of range"):
        gt.cat([x], 2)
    with pytest.raises(TypeError, match="tuple of Tensors"):
        gt.cat(x)
    with pytest.raises(TypeError, match="element 1"):
        gt.cat([x, 1])
    with pytest.raises(RuntimeError, match="can't be cast"):
        gt.cat([x, x], out=gt.empty(4, 3, dtype=gt.int64, device=device))


def test_stack_family(device: str) -> None:
    both([(2, 3), (2, 3)], lambda m: lambda a, b: m.stack([a, b], 2), device=device)
    both([(2, 3), (2, 3)], lambda m: lambda a, b: m.stack((a, b), -1), device=device,
         noncontig=True)
    both([(3,), (3,)], lambda m: lambda a, b: m.hstack([a, b]), device=device)
    both([(2, 3), (2, 1)], lambda m: lambda a, b: m.hstack([a, b]), device=device)
    both([(3,), (2, 3)], lambda m: lambda a, b: m.vstack([a, b]), device=device)
    both([(3,), (3,)], lambda m: lambda a, b: m.row_stack([a, b]), device=device)
    both([(3,), (1, 3)], lambda m: lambda a, b: m.dstack([a, b]), device=device)
    both([(2, 3), (2, 3, 2)], lambda m: lambda a, b: m.dstack([a, b]), device=device)
    both([(3,), (3, 2)], lambda m: lambda a, b: m.column_stack([a, b]), device=device)
    s = gt.stack([gt.tensor(1.0, device=device), gt.tensor(2, device=device)])
    assert s.dtype is gt.float32 and s.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match=r"equal size, but got \[2, 3\] at entry 0 and \[2, 2\]"):
        gt.stack([gt.zeros(2, 3, device=device), gt.zeros(2, 2, device=device)])
    with pytest.raises(RuntimeError, match="non-empty TensorList"):
        gt.stack([])


# == splitting ================================================================================
def _same_split(gs: tuple, ts: tuple) -> None:
    assert len(gs) == len(ts)
    for g, t in zip(gs, ts, strict=True):
        assert_close(g, t)


@pytest.mark.parametrize("arg", [2, 5, 7, [2, 3], (1, 0, 4)])
def test_split(device: str, arg: Any) -> None:
    ta, a = pair(random_array((5, 4)), device)
    _same_split(gt.split(a, arg), torch.split(ta, arg))
    _same_split(a.split(arg, 0), ta.split(arg, 0))
    parts = a.split(arg)
    parts[0].fill_(7)  # views share the input's storage
    assert float(a[0, 0]) == 7.0


def test_split_chunk_errors_and_edges(device: str) -> None:
    ta, a = pair(np.arange(6), device)
    _same_split(gt.split_with_sizes(a, [1, 5]), torch.split_with_sizes(ta, [1, 5]))
    _same_split(gt.split(gt.zeros(0, device=device), 0), torch.split(torch.zeros(0), 0))
    with pytest.raises(RuntimeError, match="sum exactly to 6"):
        gt.split(a, [2, 2])
    with pytest.raises(RuntimeError, match="dimension size of 6"):
        gt.split(a, 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        gt.split(a, -1)
    with pytest.raises(RuntimeError, match="greater than 0"):
        gt.chunk(a, 0)
    for n in (1, 3, 4, 6, 9):
        _same_split(gt.chunk(a, n), torch.chunk(ta, n))
    _same_split(gt.chunk(gt.zeros(0, device=device), 4), torch.chunk(torch.zeros(0), 4))


@pytest.mark.parametrize("arg", [3, 1, 8, [1, 5, 9], [5, 1], [-2], (2,)])
def test_tensor_split(device: str, arg: Any) -> None:
    ta, a = pair(random_array((7, 2)), device)
    _same_split(gt.tensor_split(a, arg), torch.tensor_split(ta, arg))
    _same_split(a.tensor_split(arg, dim=0), ta.tensor_split(arg, dim=0))
    tb, b = pair(random_array((2, 7)), device)
    _same_split(gt.tensor_split(b, arg, 1), torch.tensor_split(tb, arg, 1))


def test_tensor_split_tensor_args_and_axis_splits(device: str) -> None:
    ta, a = pair(np.arange(24).reshape(2, 3, 4), device)
    _same_split(gt.tensor_split(a, gt.tensor(2, device=device), 2),
                torch.tensor_split(ta, torch.tensor(2), 2))
    _same_split(gt.tensor_split(a, gt.tensor([1, 3], device=device), 2),
                torch.tensor_split(ta, torch.tensor([1, 3]), 2))
    _same_split(gt.tensor_split(a, sections=2, dim=2), torch.tensor_split(ta, sections=2, dim=2))
    _same_split(gt.tensor_split(a, indices=[1], dim=1), torch.tensor_split(ta, indices=[1], dim=1))
    _same_split(gt.hsplit(a, 3), torch.hsplit(ta, 3))
    _same_split(gt.vsplit(a, [1]), torch.vsplit(ta, [1]))
    _same_split(gt.dsplit(a, 2), torch.dsplit(ta, 2))
    with pytest.raises(RuntimeError, match="not divisible"):
        gt.dsplit(a, 3)
    with pytest.raises(RuntimeError, match="dtype of long"):
        gt.tensor_split(a, gt.tensor([1.0], device=device))
    with pytest.raises(RuntimeError, match="larger than 0"):
        gt.tensor_split(a, 0)
    with pytest.raises(RuntimeError, match="at least a 1-dimensional"):
        gt.tensor_split(gt.tensor(1.0, device=device), 1)


# == index_select / gather / take =============================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int16, gt.bool, gt.bfloat16, gt.complex64])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_index_select(device: str, dtype: gt.dtype, index_dtype: Any) -> None:
    tx, x = pair(random_array((4, 5, 3), dtype), device)
    ti, i = idx([3, 0, 0, 2], device, index_dtype)
    for d in (0, 2, -2):
        i_d = i if d != 2 else i.clamp(max=2)
        ti_d = ti if d != 2 else ti.clamp(max=2)
        assert_close(gt.index_select(x, d, i_d), torch.index_select(tx, d, ti_d))
        assert_close(noncontiguous(x).index_select(d, i_d), tx.index_select(d, ti_d))
    assert_close(x.index_select(1, gt.tensor(4, device=device)),
                 tx.index_select(1, torch.tensor(4)))
    assert_close(gt.tensor(5.0, device=device).index_select(0, gt.tensor([0], device=device)),
                 torch.tensor(5.0).index_select(0, torch.tensor([0])))
    assert_close(x.index_select(0, gt.tensor([], dtype=gt.int64, device=device)),
                 tx.index_select(0, torch.tensor([], dtype=torch.int64)))


def test_index_select_errors(device: str) -> None:
    x = gt.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 3"):
        synced(x.index_select(1, gt.tensor([0, 5], device=device)))
    with pytest.raises(IndexError, match="index -1 is out of bounds for dimension 1 with size 3"):
        synced(x.index_select(1, gt.tensor([0, -1], device=device)))
    with pytest.raises(RuntimeError, match="int32 or int64"):
        x.index_select(1, gt.tensor([0.0], device=device))
    with pytest.raises(IndexError, match="vector"):
        x.index_select(1, gt.tensor([[0]], device=device))
    with pytest.raises(RuntimeError, match="self indexing axis dim should be positive"):
        gt.zeros(0, 3, device=device).index_select(0, gt.tensor([0], device=device))
    with pytest.raises(RuntimeError, match="same scalar type"):
        gt.index_select(x, 0, gt.tensor([0], device=device),
                        out=gt.empty(1, 3, dtype=gt.float64, device=device))
    out = gt.empty(0, device=device)
    gt.index_select(x + 1, 0, gt.tensor([1, 1], device=device), out=out)
    assert out.shape == (2, 3) and out.tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [gt.float64, gt.int8, gt.bool, gt.float16])
def test_gather(device: str, dim: int, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((4, 5, 3), dtype), device)
    size = x.shape[dim]
    rng = np.random.default_rng(dim + 4)
    ishape = [3, 4, 2]
    ishape[dim] = 6
    ti, i = idx(rng.integers(0, size, ishape), device)
    assert_close(gt.gather(x, dim, i), torch.gather(tx, dim, ti))
    assert_close(noncontiguous(x).gather(dim, noncontiguous(i)), tx.gather(dim, ti))
    assert_close(x.gather(dim, i.int()), tx.gather(dim, ti.int()))


def test_gather_edges_and_errors(device: str) -> None:
    tx, x = pair(random_array((2, 3)), device)
    assert_close(gt.gather(gt.tensor(5.0, device=device), 0, gt.tensor([0, 0], device=device)),
                 torch.gather(torch.tensor(5.0), 0, torch.tensor([0, 0])))
    assert_close(x.gather(0, gt.zeros(0, 5, dtype=gt.int64, device=device)),
                 tx.gather(0, torch.zeros(0, 5, dtype=torch.int64)))
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size 3"):
        synced(x.gather(1, gt.tensor([[0, 5]], device=device)))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 3"):
        synced(x.gather(1, gt.tensor([[0, -1]], device=device)))
    with pytest.raises(RuntimeError, match="int32/int64"):
        x.gather(1, gt.tensor([[0]], dtype=gt.int16, device=device))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.gather(1, gt.tensor([0, 1], device=device))
    with pytest.raises(RuntimeError, match=r"expected index \[1, 4\] to be no larger than self"):
        x.gather(0, gt.tensor([[0, 1, 1, 1]], device=device))
    with pytest.raises(RuntimeError, match="dtype float32, but got float64"):
        gt.gather(x, 0, gt.tensor([[0]], device=device),
                  out=gt.empty(1, 1, dtype=gt.float64, device=device))


def test_take_and_take_along_dim(device: str) -> None:
    tx, x = pair(random_array((3, 4), gt.float64), device)
    ti, i = idx([[0, -1, 11], [-12, 5, 5]], device)
    assert_close(gt.take(x, i), torch.take(tx, ti))
    assert_close(noncontiguous(x).take(i), tx.take(ti))
    with pytest.raises(IndexError, match="index 12 is out of bounds"):
        synced(x.take(gt.tensor([12], device=device)))
    with pytest.raises(IndexError, match="index -13 is out of bounds"):
        synced(x.take(gt.tensor([-13], device=device)))
    with pytest.raises(RuntimeError, match="long tensor"):
        x.take(gt.tensor([1], dtype=gt.int32, device=device))
    with pytest.raises(IndexError, match="empty tensor"):
        gt.zeros(0, device=device).take(gt.tensor([0], device=device))

    ta, a = idx([[0, -1], [2, 1], [3, 3]], device)
    assert_close(gt.take_along_dim(x, a, 1), torch.take_along_dim(tx, ta, 1))
    ts, s = idx(np.argsort(np.asarray(tx), axis=0), device)
    assert_close(x.take_along_dim(s, dim=0), tx.take_along_dim(ts, dim=0))
    tb, b = idx([[1], [0], [2]], device)  # broadcast along dim 1
    assert_close(gt.take_along_dim(x, b[:1], 0), torch.take_along_dim(tx, tb[:1], 0))
    assert_close(gt.take_along_dim(x, gt.tensor([[2, 0, 1]], device=device).T, 1),
                 torch.take_along_dim(tx, torch.tensor([[2, 0, 1]]).T, 1))
    tf, f = idx([[0, 11]], device)
    assert_close(gt.take_along_dim(x, f), torch.take_along_dim(tx, tf))
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        gt.take_along_dim(x, gt.tensor([[0, 4]], device=device), 1)
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 0 with size"):
        synced(gt.take_along_dim(x, gt.tensor([[0, -1]], device=device)))    # gather's error
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        gt.take_along_dim(x, gt.tensor([0], device=device), 1)


# == scatter family ===========================================================================
def _perm_index(shape: tuple, size: int, dim: int, seed: int = 0) -> np.ndarray:
    """Indices without duplicates along ``dim`` (plain scatter is deterministic then)."""
    full = list(shape)
    full[dim] = size
    order = np.argsort(np.random.default_rng(seed).random(full), axis=dim)
    return np.ascontiguousarray(np.take(order, np.arange(shape[dim]), axis=dim))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64, gt.complex64])
def test_scatter(device: str, dim: int, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((4, 5), dtype), device)
    ts, s = pair(random_array((3, 4), dtype, seed=3), device)
    ishape = (3, 4) if dim == 0 else (3, 2)
    ti, i = idx(_perm_index(ishape, x.shape[dim], dim), device)
    assert_close(gt.scatter(x, dim, i, s), torch.scatter(tx, dim, ti, ts))
    assert_close(x.scatter(dim, i, 2), tx.scatter(dim, ti, 2))
    assert_close(x.scatter(dim, i, value=3), tx.scatter(dim, ti, value=3))
    assert_close(noncontiguous(x).scatter(dim, noncontiguous(i.int()), noncontiguous(s)),
                 tx.scatter(dim, ti.int(), ts))
    if dtype is not gt.complex64:
        dup = gt.zeros_like(i)
        assert_close(x.scatter(dim, dup, s, reduce="add"),
                     tx.scatter(dim, torch.zeros_like(ti), ts, reduce="add"))
        assert_close(x.scatter(dim, dup, 2, reduce="multiply"),
                     tx.scatter(dim, torch.zeros_like(ti), 2, reduce="multiply"))
    y = x.clone()
    v = y._version
    assert y.scatter_(dim, i, s) is y and y._version == v + 1
    assert_close(y, tx.scatter(dim, ti, ts))


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64, gt.int32, gt.float16])
def test_scatter_add(device: str, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((4, 3), dtype), device)
    ts, s = pair(random_array((5, 3), dtype, seed=2), device)
    ti, i = idx(np.random.default_rng(1).integers(0, 4, (5, 2)), device)
    assert_close(gt.scatter_add(x, 0, i, s), torch.scatter_add(tx, 0, ti, ts))
    y = x.clone()
    y.scatter_add_(0, i, s)
    assert_close(y, tx.scatter_add(0, ti, ts))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64])
def test_scatter_reduce(device: str, reduce: str, include_self: bool, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((5, 3), dtype, low=-5, high=5), device)
    ts, s = pair(random_array((6, 3), dtype, low=-5, high=5, seed=2), device)
    ti, i = idx(np.random.default_rng(3).integers(0, 3, (6, 3)), device)
    expected = torch.scatter_reduce(tx, 0, ti, ts, reduce, include_self=include_self)
    assert_close(gt.scatter_reduce(x, 0, i, s, reduce, include_self=include_self), expected)
    y = noncontiguous(x)
    y.scatter_reduce_(0, i, s, reduce=reduce, include_self=include_self)
    assert_close(y, expected)


def test_scatter_errors_leave_input_untouched(device: str) -> None:
    x = gt.zeros(3, device=device)
    v = x._version
    with pytest.raises(RuntimeError, match="self.dtype to be equal to src.dtype"):
        x.scatter_(0, gt.tensor([0], device=device), gt.ones(1, dtype=gt.float64, device=device))
    with pytest.raises(RuntimeError, match=r"no larger size than src \[1\]"):
        x.scatter_(0, gt.tensor([0, 1], device=device), gt.ones(1, device=device))
    with pytest.raises(RuntimeError, match="dimensions as self tensor"):
        x.scatter_add_(0, gt.tensor([[0]], device=device), gt.ones(1, 1, device=device))
    with pytest.raises(RuntimeError, match="int32/int64"):
        x.scatter_(0, gt.tensor([0.0], device=device), 1.0)
    with pytest.raises(RuntimeError, match="add or multiply"):
        x.scatter(0, gt.tensor([0], device=device), 1.0, reduce="mean")
    with pytest.raises(RuntimeError, match="sum, prod, mean, amax or amin, got foo"):
        x.scatter_reduce(0, gt.tensor([0], device=device), gt.ones(1, device=device), "foo")
    assert x._version == v and x.tolist() == [0.0, 0.0, 0.0]
    # A bad index raises; the good ones may have been written, as PyTorch's kernels (its CPU
    # ones included) check each index as they go, and CUDA's check on the device.
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 3"):
        synced(x.scatter_(0, gt.tensor([0, 5], device=device), gt.ones(2, device=device)))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        synced(x.scatter_add_(0, gt.tensor([0, -1], device=device), gt.ones(2, device=device)))
    x.zero_()
    # An empty index skips all checks and returns a copy, like PyTorch.
    empty = gt.tensor([], dtype=gt.int64, device=device)
    assert x.scatter(0, empty, gt.ones(1, 2, device=device)).tolist() == [0.0] * 3


@pytest.mark.parametrize("dim", [0, 1])
def test_large_gather_scatter_use_numba_walker(device: str, dim: int) -> None:
    """Sizes above kernels.cpu.shape.WALK_THRESHOLD take the compiled strided walker."""
    tx, x = pair(random_array((300, 80), low=-9, high=9), device)
    shape = (280, 70)  # smaller than x off ``dim``: exercises the index/self offset mapping
    rng = np.random.default_rng(dim)
    ti, i = idx(rng.integers(0, x.shape[dim], shape), device)
    ts, s = pair(random_array((290, 75), seed=3), device)
    assert_close(x.gather(dim, i), tx.gather(dim, ti))
    assert_close(noncontiguous(x).gather(dim, noncontiguous(i)), tx.gather(dim, ti))
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            kw = {"include_self": include_self}
            assert_close(x.scatter_reduce(dim, i, s, reduce, **kw),
                         tx.scatter_reduce(dim, ti, ts, reduce, **kw), rtol=1e-4, atol=1e-4)
    assert_close(noncontiguous(x).scatter_add_(dim, i, noncontiguous(s)),
                 tx.scatter_add(dim, ti, ts), rtol=1e-4, atol=1e-4)
    tp, p = idx(_perm_index(shape, x.shape[dim], dim), device)  # no duplicates: deterministic
    assert_close(x.scatter(dim, p, s), tx.scatter(dim, tp, ts))
    tn, n = pair(random_array((300, 80), gt.int64, low=-50, high=50), device)
    tsi, si = pair(random_array((290, 75), gt.int64, low=-50, high=50, seed=4), device)
    assert_close(n.scatter_reduce(dim, i, si, "mean"), tn.scatter_reduce(dim, ti, tsi, "mean"))
    tk, k = idx(rng.integers(0, x.shape[dim], 250), device)
    src_shape = (250, 80) if dim == 0 else (300, 250)
    tsrc, src = pair(random_array(src_shape, seed=5), device)
    assert_close(x.index_add(dim, k, src, alpha=0.5), tx.index_add(dim, tk, tsrc, alpha=0.5),
                 rtol=1e-4, atol=1e-4)


# == index_add / index_copy / index_fill ======================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64, gt.float16, gt.bool])
def test_index_add(device: str, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((4, 5), dtype), device)
    ts, s = pair(random_array((4, 3), dtype, seed=1), device)
    ti, i = idx([4, 0, 4], device)
    assert_close(gt.index_add(x, 1, i, s), torch.index_add(tx, 1, ti, ts))
    if dtype is not gt.bool:
        assert_close(x.index_add(1, i.int(), s, alpha=2), tx.index_add(1, ti.int(), ts, alpha=2))
    y = noncontiguous(x)
    v = y._version
    assert y.index_add_(1, i, s) is y and y._version == v + 1
    assert_close(y, tx.index_add(1, ti, ts))


def test_index_add_copy_fill_edges(device: str) -> None:
    tx, x = pair(np.arange(3.0), device)
    assert_close(gt.tensor([1, 2, 3], device=device).index_add(
                     0, gt.tensor([0, 1], device=device), gt.tensor([4, 5], device=device),
                     alpha=2.5),
                 torch.tensor([1, 2, 3]).index_add(0, torch.tensor([0, 1]),
                                                   torch.tensor([4, 5]), alpha=2.5))
    assert_close(gt.zeros((), device=device).index_add(0, gt.tensor([0], device=device),
                                                       gt.tensor(2.0, device=device)),
                 torch.zeros(()).index_add(0, torch.tensor([0]), torch.tensor(2.0)))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        synced(x.index_add(0, gt.tensor([0, 3], device=device),
                           gt.ones(2, dtype=gt.float64, device=device)))
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        synced(x.index_add(0, gt.tensor([0, -1], device=device),
                           gt.ones(2, dtype=gt.float64, device=device)))
    with pytest.raises(RuntimeError, match=r"self \(Double\) and source \(Float\)"):
        x.index_add(0, gt.tensor([0, 1], device=device), gt.ones(2, device=device))
    with pytest.raises(RuntimeError, match=r"Number of indices \(2\) should be equal"):
        x.index_add(0, gt.tensor([0, 1], device=device),
                    gt.ones(3, dtype=gt.float64, device=device))
    with pytest.raises(RuntimeError, match="source tensor shape must match"):
        gt.ones(2, 3, device=device).index_add(1, gt.tensor([0, 0], device=device),
                                               gt.ones(3, 2, device=device))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.index_add(0, gt.tensor([[1]], device=device), gt.ones(1, dtype=gt.float64, device=device))


@pytest.mark.parametrize("dtype", [gt.float32, gt.int32, gt.complex128])
def test_index_copy(device: str, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((3, 4, 2), dtype), device)
    ts, s = pair(random_array((3, 2, 2), dtype, seed=5), device)
    ti, i = idx([3, 1], device)
    assert_close(gt.index_copy(x, 1, i, s), torch.index_copy(tx, 1, ti, ts))
    y = noncontiguous(x)
    y.index_copy_(1, i, s)
    assert_close(y, tx.index_copy(1, ti, ts))
    assert_close(gt.tensor([1.0, 2, 3], device=device).index_copy(
                     0, gt.tensor(1, device=device), gt.tensor(9.0, device=device)),
                 torch.tensor([1.0, 2, 3]).index_copy(0, torch.tensor(1), torch.tensor(9.0)))
    with pytest.raises(IndexError, match="index_copy_\\(\\): index -1 is out of bounds"):
        synced(x.index_copy(1, gt.tensor([-1, 1], device=device), s))
    with pytest.raises(RuntimeError, match="Expected a long tensor for index, but got Int"):
        x.index_copy(1, i.int(), s)
    with pytest.raises(IndexError, match=r"Number of indices \(1\)"):
        x.index_copy(1, i[:1], s)
    with pytest.raises(RuntimeError, match="same slice shapes"):
        x.index_copy(1, i, s[:2])


@pytest.mark.parametrize("dtype", [gt.float64, gt.int8, gt.bool])
def test_index_fill(device: str, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((3, 4), dtype), device)
    ti, i = idx([0, -1, 2], device)
    assert_close(gt.index_fill(x, 1, i, 1), torch.index_fill(tx, 1, ti, 1))
    assert_close(x.index_fill(0, i, gt.tensor(0, device=device)),
                 tx.index_fill(0, ti, torch.tensor(0)))
    y = noncontiguous(x)
    v = y._version
    y.index_fill_(1, i, True)
    assert y._version == v + 1
    assert_close(y, tx.index_fill(1, ti, True))
    assert_close(gt.tensor([1, 2, 3], device=device).index_fill(
                     0, gt.tensor([0], device=device), 7.5),
                 torch.tensor([1, 2, 3]).index_fill(0, torch.tensor([0]), 7.5))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.index_fill(0, gt.tensor([3], device=device), 1)
    with pytest.raises(IndexError, match="int64"):
        x.index_fill(0, gt.tensor([0], dtype=gt.int32, device=device), 1)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.index_fill(0, gt.tensor([0], device=device), gt.tensor([1], device=device))


# == masks =====================================================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64, gt.bool, gt.bfloat16, gt.complex64])
def test_masked_fill(device: str, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((3, 4), dtype), device)
    tm, m = pair(random_array((3, 4), gt.bool, seed=9), device)
    assert_close(gt.masked_fill(x, m, 1), torch.masked_fill(tx, tm, 1))
    assert_close(x.masked_fill(m[0], gt.tensor(0, device=device)),
                 tx.masked_fill(tm[0], torch.tensor(0)))
    assert_close(x[0].masked_fill(m[:, :1], 1), tx[0].masked_fill(tm[:, :1], 1))  # broadcasts
    y = noncontiguous(x)
    v = y._version
    assert y.masked_fill_(m, 1) is y and y._version == v + 1
    assert_close(y, tx.masked_fill(tm, 1))


def test_masked_fill_errors(device: str) -> None:
    x = gt.tensor([1, 2, 3], device=device)
    assert_close(x.masked_fill(gt.tensor([True, False, True], device=device), 7.5),
                 torch.tensor([1, 2, 3]).masked_fill(torch.tensor([True, False, True]), 7.5))
    with pytest.raises(RuntimeError, match="boolean masks, but got mask with dtype uint8"):
        x.masked_fill(gt.tensor([1, 0, 1], dtype=gt.uint8, device=device), 7)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(gt.tensor([True, False, True], device=device), gt.tensor([7], device=device))
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast"):
        x.masked_fill_(gt.tensor([[True], [False]], device=device), 7)
    assert x.tolist() == [1, 2, 3]


@pytest.mark.parametrize("dtype", [gt.float32, gt.int16, gt.bool])
def test_masked_scatter_and_select(device: str, dtype: gt.dtype) -> None:
    tx, x = pair(random_array((3, 4), dtype), device)
    tm, m = pair(random_array((3, 4), gt.bool, seed=4), device)
    ts, s = pair(random_array((15,), dtype, seed=6), device)
    assert_close(gt.masked_scatter(x, m, s), torch.masked_scatter(tx, tm, ts))
    assert_close(x.masked_scatter(m[1], s), tx.masked_scatter(tm[1], ts))
    assert_close(x[0].masked_scatter(m, s), tx[0].masked_scatter(tm, ts))
    y = noncontiguous(x)
    y.masked_scatter_(m, s.reshape(3, 5))
    assert_close(y, tx.masked_scatter(tm, ts.reshape(3, 5)))
    assert_close(gt.masked_select(x, m), torch.masked_select(tx, tm))
    assert_close(noncontiguous(x).masked_select(m[:1]), tx.masked_select(tm[:1]))
    assert_close(x[0].masked_select(m[:, :1]), tx[0].masked_select(tm[:, :1]))
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        x.masked_scatter(gt.ones(3, 4, dtype=gt.bool, device=device), s[:3])
    with pytest.raises(RuntimeError, match="same dtypes"):
        x.masked_scatter(m, s.to(gt.complex64))
    with pytest.raises(RuntimeError, match="expected BoolTensor"):
        x.masked_select(m.int())


@pytest.mark.parametrize("dtype", [gt.float32, gt.int8, gt.bool, gt.complex64, gt.bfloat16])
def test_nonzero_argwhere(device: str, dtype: gt.dtype) -> None:
    arr = random_array((3, 4, 2), dtype)
    arr.reshape(-1)[::3] = 0
    t, g = pair(arr, device)
    assert_close(gt.nonzero(g), torch.nonzero(t))
    assert_close(noncontiguous(g).nonzero(), t.nonzero())
    assert_close(gt.argwhere(g), torch.argwhere(t))
    assert_close(g.nonzero(as_tuple=True), t.nonzero(as_tuple=True))
    for v in (0.0, 3.0):
        assert_close(gt.nonzero(gt.tensor(v, device=device)), torch.nonzero(torch.tensor(v)))
        assert_close(gt.nonzero(gt.tensor(v, device=device), as_tuple=True),
                     torch.nonzero(torch.tensor(v), as_tuple=True))
    assert_close(gt.where(g != 0), torch.where(t != 0))
    out = gt.empty(0, dtype=gt.int64, device=device)
    assert gt.nonzero(g, out=out) is out
    assert_close(out, torch.nonzero(t))


def test_boolean_mask_indexing_uses_nonzero(device: str) -> None:
    tx, x = pair(random_array((3, 4)), device)
    assert_close(x[x > 0], tx[tx > 0])
    assert_close(x[:, x[0] > 0], tx[:, tx[0] > 0])


# == sorting and selection =====================================================================
SORT_DTYPES = [gt.float32, gt.float64, gt.float16, gt.bfloat16, gt.int64, gt.uint8, gt.bool]


@pytest.mark.parametrize("dtype", SORT_DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(device: str, dtype: gt.dtype, descending: bool) -> None:
    arr = random_array((3, 7, 4), dtype, low=-3, high=3)  # small range: many ties
    t, g = pair(arr, device)
    for dim in (-1, 0, 1):
        r = gt.sort(g, dim, descending, stable=True)
        e = torch.sort(t, dim=dim, descending=descending, stable=True)
        assert_close(r.values, e.values)
        assert_close(r.indices, e.indices)
        assert_close(noncontiguous(g).sort(dim=dim, descending=descending, stable=True),
                     tuple(e))
        assert_close(g.argsort(dim, descending, stable=True),
                     t.argsort(dim=dim, descending=descending, stable=True))


def test_sort_nan_zero_and_forms(device: str) -> None:
    t, g = pair(np.array([3.0, NAN, 1, -0.0, 0.0, NAN, 2], np.float32), device)
    for desc in (False, True):
        assert_close(tuple(g.sort(descending=desc, stable=True)),
                     tuple(t.sort(descending=desc, stable=True)))
    r = gt.sort(gt.tensor(3.0, device=device))
    assert r.values.item() == 3.0 and r.indices.item() == 0 and r.indices.dim() == 0
    values, indices = gt.sort(g)
    assert values is not None and indices.dtype is gt.int64
    tm, m = pair(random_array((3, 2)), device)
    assert_close(gt.msort(m), torch.msort(tm))
    vo, io = gt.empty(0, device=device), gt.empty(0, dtype=gt.int64, device=device)
    assert gt.sort(m, 0, out=(vo, io)).values is vo
    assert_close((vo, io), tuple(torch.sort(tm, 0)))
    with pytest.raises(RuntimeError, match="dtype int64, but got int32"):
        gt.sort(m, out=(gt.empty(0, device=device), gt.empty(0, dtype=gt.int32, device=device)))
    with pytest.raises(RuntimeError, match="ComplexFloat"):
        gt.sort(gt.zeros(2, dtype=gt.complex64, device=device))
    with pytest.raises(IndexError, match="Dimension out of range"):
        gt.sort(g, 1)


@pytest.mark.parametrize("n", [6, 200])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [gt.float32, gt.int32, gt.float16])
def test_topk(device: str, n: int, largest: bool, dtype: gt.dtype) -> None:
    base = np.random.default_rng(n).permutation(n * 3).reshape(3, n)  # distinct values
    t, g = pair(base.astype(dtype.np_dtype), device)
    for k, dim in ((1, 1), (min(n, 5), -1), (n, 1), (2, 0), (0, 1)):
        r = gt.topk(g, k, dim, largest=largest)
        e = torch.topk(t, k, dim, largest=largest)
        assert_close(tuple(r), tuple(e))
        assert_close(tuple(noncontiguous(g).topk(k, dim=dim, largest=largest)), tuple(e))


def test_topk_kthvalue_edges(device: str) -> None:
    t, g = pair(np.array([3.0, 1, 2, NAN], np.float32), device)
    assert_close(tuple(g.topk(2)), tuple(t.topk(2)))
    assert_close(tuple(g.topk(2, largest=False)), tuple(t.topk(2, largest=False)))
    assert gt.topk(gt.tensor(3.0, device=device), 1).values.item() == 3.0
    with pytest.raises(RuntimeError, match="k out of range"):
        g.topk(5)
    with pytest.raises(RuntimeError, match="k out of range"):
        g.topk(-1)
    with pytest.raises(RuntimeError, match="Bool"):
        gt.topk(gt.tensor([True, False], device=device), 1)
    assert_close(tuple(g.kthvalue(4)), tuple(t.kthvalue(4)))
    with pytest.raises(RuntimeError, match="selected number k out of range for dimension 0"):
        g.kthvalue(5)
    with pytest.raises(RuntimeError, match="selected number k out of range"):
        g.kthvalue(0)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [gt.float64, gt.int16, gt.bfloat16])
def test_kthvalue(device: str, keepdim: bool, dtype: gt.dtype) -> None:
    base = np.random.default_rng(2).permutation(60).reshape(3, 4, 5)
    t, g = pair(base.astype(dtype.np_dtype), device)
    for k, dim in ((1, -1), (3, 1), (3, 0), (5, 2)):
        r = gt.kthvalue(g, k, dim, keepdim)
        assert r.values is r[0] and r.indices is r[1]
        assert_close(tuple(r), tuple(torch.kthvalue(t, k, dim, keepdim)))
    assert_close(tuple(noncontiguous(g).kthvalue(2, 0, keepdim=keepdim)),
                 tuple(t.kthvalue(2, 0, keepdim=keepdim)))
    assert_close(tuple(gt.kthvalue(gt.tensor(3.0, device=device), 1)),
                 tuple(torch.kthvalue(torch.tensor(3.0), 1)))


# == unique =====================================================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64, gt.bool, gt.float16, gt.uint8])
def test_unique(device: str, dtype: gt.dtype) -> None:
    t, g = pair(random_array((4, 5), dtype, low=-3, high=3), device)
    for inv in (False, True):
        for cnt in (False, True):
            kw = {"return_inverse": inv, "return_counts": cnt}
            assert_close(gt.unique(g, **kw), torch.unique(t, **kw))
            assert_close(noncontiguous(g).unique(**kw), t.unique(**kw))
            assert_close(gt.unique_consecutive(g, **kw), torch.unique_consecutive(t, **kw))
            for dim in (0, 1):
                assert_close(gt.unique(g, dim=dim, **kw), torch.unique(t, dim=dim, **kw))
                assert_close(g.unique_consecutive(dim=dim, **kw),
                             t.unique_consecutive(dim=dim, **kw))


def test_unique_edges(device: str) -> None:
    t, g = pair(np.array([3.0, NAN, 1, NAN, 1, -0.0, 0.0], np.float32), device)
    kw = {"return_inverse": True, "return_counts": True}
    assert_close(gt.unique(g, **kw), torch.unique(t, **kw))
    assert_close(gt.unique_consecutive(g, **kw), torch.unique_consecutive(t, **kw))
    rows = np.array([[3, 1], [3, 1], [0, 2], [3, 1]])
    t, g = pair(rows, device)
    assert_close(gt.unique(g, dim=0, **kw), torch.unique(t, dim=0, **kw))
    assert_close(gt.unique_consecutive(g, dim=0, **kw), torch.unique_consecutive(t, dim=0, **kw))
    assert_close(gt.unique(gt.tensor(3, device=device), return_inverse=True),
                 torch.unique(torch.tensor(3), return_inverse=True))
    assert_close(gt.unique(gt.zeros(0, dtype=gt.int64, device=device), **kw),
                 torch.unique(torch.zeros(0, dtype=torch.int64), **kw))
    assert_close(gt.unique(gt.zeros(0, 3, device=device), dim=0, **kw),
                 torch.unique(torch.zeros(0, 3), dim=0, **kw))
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        gt.unique(gt.zeros(2, 0, device=device), dim=0)
    with pytest.raises(RuntimeError, match="ComplexFloat"):
        gt.unique(gt.zeros(2, dtype=gt.complex64, device=device))


# == flips, rolls, rotations ===================================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int8, gt.bool, gt.complex64])
def test_flip_roll_rot90(device: str, dtype: gt.dtype) -> None:
    kw = {"device": device, "dtype": dtype}
    for dims in ([0], [0, 2], [-1], [], (1,)):
        helper_test_op([(2, 3, 4)], lambda x, d=dims: x.flip(d), **kw)
    helper_test_op([(2, 3, 4)], lambda x: x.flip(0, 1), noncontig=True, **kw)
    helper_test_op([(2, 3)], lambda x: x.fliplr(), **kw)
    helper_test_op([(2, 3)], lambda x: x.flipud(), noncontig=True, **kw)
    for shifts, dims in ((1, None), (-7, None), ((1, -1), (0, 1)), (5, 2), ((1, 1), (0, 0))):
        helper_test_op([(2, 3, 4)], lambda x, s=shifts, d=dims: x.roll(s, d), **kw)
    helper_test_op([(2, 3, 4)], lambda x: x.roll(2, 1), noncontig=True, **kw)
    for k, dims in ((1, (0, 1)), (2, (0, 1)), (3, (1, 2)), (-1, (2, 0)), (4, (0, 1))):
        helper_test_op([(2, 3, 4)], lambda x, k=k, d=dims: x.rot90(k, d), **kw)


def test_flip_roll_rot90_errors(device: str) -> None:
    x = gt.zeros(2, 3, device=device)
    assert gt.flip(gt.tensor(1.0, device=device), [0]).item() == 1.0
    assert gt.roll(gt.tensor(3.0, device=device), 1).item() == 3.0
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        x.flip([0, 0])
    with pytest.raises(RuntimeError, match="Input must be >= 2-d"):
        gt.fliplr(gt.ones(3, device=device))
    with pytest.raises(RuntimeError, match="Input must be >= 1-d"):
        gt.flipud(gt.tensor(3.0, device=device))
    with pytest.raises(RuntimeError, match="shifts: 2, dims:1"):
        x.roll((1, -1), (0,))
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.roll(1, 2)
    with pytest.raises(IndexError, match="no dimensions"):
        gt.tensor(3.0, device=device).roll(1, 0)
    with pytest.raises(RuntimeError, match="rotation dims to be different"):
        x.rot90(1, [0, 0])
    with pytest.raises(RuntimeError, match="total rotation dims == 2"):
        x.rot90(1, [0])
    with pytest.raises(RuntimeError, match="total dims >= 2"):
        gt.ones(3, device=device).rot90()


# == repeats ===================================================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64, gt.bool])
def test_repeat_tile(device: str, dtype: gt.dtype) -> None:
    kw = {"device": device, "dtype": dtype}
    for reps in ((2, 1, 2), (1, 3), (2, 2, 1, 1), (0, 2)):
        helper_test_op([(2, 3)], lambda x, r=reps: x.repeat(*r), **kw)
        helper_test_op([(2, 3)], lambda x, r=reps: x.repeat(r), noncontig=True, **kw)
    for reps in ((2,), (), (2, 1, 3), [3, 2]):
        helper_test_op([(2, 3)], lambda x, r=reps: x.tile(r), **kw)
    assert gt.tensor(2.0, device=device).repeat([]).item() == 2.0
    with pytest.raises(RuntimeError, match="can not be smaller"):
        gt.zeros(2, 3, device=device).repeat(2)
    with pytest.raises(RuntimeError, match="negative dimension"):
        gt.zeros(2, 3, device=device).repeat(-1, 1)


def test_repeat_interleave(device: str) -> None:
    tx, x = pair(random_array((2, 3)), device)
    assert_close(gt.repeat_interleave(x, 2), torch.repeat_interleave(tx, 2))
    assert_close(x.repeat_interleave(2, dim=1), tx.repeat_interleave(2, dim=1))
    assert_close(noncontiguous(x).repeat_interleave(3, 0), tx.repeat_interleave(3, 0))
    for reps in ([1, 2], [0, 3], [2]):
        tr, r = idx(reps, device)
        assert_close(x.repeat_interleave(r, dim=0), tx.repeat_interleave(tr, dim=0))
    assert_close(x.repeat_interleave(gt.tensor(2, device=device), dim=1),
                 tx.repeat_interleave(torch.tensor(2), dim=1))
    tr, r = idx([1, 0, 2], device, np.int32)
    assert_close(gt.repeat_interleave(r), torch.repeat_interleave(tr))
    assert_close(x.repeat_interleave(gt.tensor([1, 0, 2], dtype=gt.int32, device=device), dim=1),
                 tx.repeat_interleave(tr, dim=1))
    assert_close(gt.repeat_interleave(gt.tensor(3.0, device=device), 2), torch.repeat_interleave(
        torch.tensor(3.0), 2))
    assert x.repeat_interleave(2, 0, output_size=4).shape == (4, 3)
    y = x.repeat_interleave(1, 0)
    y.fill_(0)
    assert float(x.abs().sum()) > 0  # a new tensor, never a view of the input
    with pytest.raises(RuntimeError, match="same size as input along dim"):
        x.repeat_interleave(gt.tensor([1, 2], device=device), dim=1)
    with pytest.raises(RuntimeError, match="can not be negative"):
        x.repeat_interleave(gt.tensor([1, -2], device=device), dim=0)
    with pytest.raises(RuntimeError, match="non-negative"):
        x.repeat_interleave(-1, dim=0)
    with pytest.raises(RuntimeError, match="0-dim or 1-dim"):
        x.repeat_interleave(gt.tensor([[1, 2]], device=device), dim=0)
    with pytest.raises(RuntimeError, match="int32 or int64"):
        x.repeat_interleave(gt.tensor([1.0, 2.0], device=device), dim=0)
    with pytest.raises(RuntimeError, match="allocated size"):
        x.repeat_interleave(gt.tensor([1, 2], device=device), 0, output_size=4)


# == triangles and diagonals ====================================================================
@pytest.mark.parametrize("dtype", [gt.float32, gt.int32, gt.bool, gt.complex64])
def test_tril_triu(device: str, dtype: gt.dtype) -> None:
    kw = {"device": device, "dtype": dtype}
    for k in (0, 1, -1, 5, -5):
        helper_test_op([(3, 4)], lambda x, k=k: x.tril(k), **kw)
        helper_test_op([(2, 4, 3)], lambda x, k=k: x.triu(k), noncontig=True, **kw)
        helper_test_op([(2, 4, 3)], lambda x, k=k: torch.tril(x, diagonal=k) if
                       isinstance(x, torch.Tensor) else gt.tril(x, diagonal=k), **kw)
    t, g = pair(random_array((3, 3), dtype), device)
    y = noncontiguous(g)
    v = y._version
    assert y.tril_(-1) is y and y._version == v + 1
    assert_close(y, t.tril(-1))
    y.triu_(1)
    assert_close(y, t.tril(-1).triu(1))
    out = gt.empty(0, dtype=dtype, device=device)
    assert gt.triu(g, out=out) is out
    assert_close(out, t.triu())
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        gt.triu(gt.ones(3, device=device))


def test_diag_family(device: str) -> None:
    tv, v = pair(random_array((3,), gt.int64), device)
    tm, m = pair(random_array((3, 4)), device)
    for k in (0, 1, -1, -2, 5):
        assert_close(gt.diag(v, k), torch.diag(tv, k))
        assert_close(m.diag(k), tm.diag(k))
        assert_close(noncontiguous(m).diag(k), tm.diag(k))
        assert_close(gt.diagflat(m, k), torch.diagflat(tm, k))
    assert_close(gt.diagflat(gt.tensor(3.0, device=device)), torch.diagflat(torch.tensor(3.0)))
    for args in ((0,), (1,), (-1, 0, 2), (2, 2, 0), (0, -1, -3)):
        assert_close(gt.diag_embed(m, *args), torch.diag_embed(tm, *args))
    out = gt.empty(0, dtype=gt.int64, device=device)
    assert gt.diag(v, 1, out=out) is out
    assert_close(out, torch.diag(tv, 1))
    with pytest.raises(RuntimeError, match="Supports 1D or 2D tensors. Got 3D"):
        gt.diag(gt.ones(2, 2, 2, device=device))
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        gt.diag_embed(m, 0, 0, 0)


# == padding ====================================================================================
PADS = [
    ((2, 3), (1, 2), "constant"), ((2, 3), (1, -1, -1, 1), "constant"), ((2, 3), (), "constant"),
    ((2, 3, 4), (1, 1, 2, 0, 1, 1), "constant"), ((2, 3), (1, 1), "reflect"),
    ((2, 3), (2, 1), "reflect"), ((2, 3), (-1, 1), "reflect"), ((2, 3, 4), (1, 2, 2, 1), "reflect"),
    ((2, 3), (1, 1), "replicate"), ((2, 3), (-1, 2), "replicate"),
    ((1, 2, 3, 4), (1, 2, 0, 3), "replicate"), ((1, 2, 3, 4, 2), (1, 1, 2, 0, 1, 2), "replicate"),
    ((2, 3), (1, 1), "circular"), ((2, 3), (3, 1), "circular"), ((2, 3), (-1, 1), "circular"),
    ((2, 3, 4), (2, 1, 3, 0), "circular"), ((0, 3, 4), (1, 1), "reflect"),
    ((1, 4), (3, -2), "reflect"), ((1, 4), (-2, 3), "replicate"), ((1, 4), (2, -1), "circular"),
    ((1, 4), (1, -3), "circular"), ((1, 4), (-2, 2), "circular"),
]


@pytest.mark.parametrize("shape,pads,mode", PADS)
def test_pad(device: str, shape: tuple, pads: tuple, mode: str) -> None:
    fn = torch.nn.functional.pad
    helper_test_op([shape], lambda x: fn(x, pads, mode), lambda x: gt.pad(x, pads, mode),
                   device=device)
    helper_test_op([shape], lambda x: fn(x, pads, mode), lambda x: gt.pad(x, pads, mode),
                   device=device, noncontig=True, dtype=gt.int32)


def test_pad_value_and_errors(device: str) -> None:
    fn = torch.nn.functional.pad
    tx, x = pair(random_array((2, 3), gt.int32), device)
    assert_close(gt.pad(x, (1, 1), value=2.5), fn(tx, (1, 1), value=2.5))
    assert_close(gt.pad(x.float(), [1, 0, 0, 2], "constant", -1.0),
                 fn(tx.float(), [1, 0, 0, 2], "constant", -1.0))
    with pytest.raises(RuntimeError, match="divisible by 2"):
        gt.pad(x, (1, 1, 1))
    with pytest.raises(RuntimeError, match="padding length 6 and input of dimension 2"):
        gt.pad(x, (1,) * 6)
    with pytest.raises(RuntimeError, match="negative size"):
        gt.pad(x, (1, -5))
    with pytest.raises(RuntimeError, match="should be less than the corresponding input"):
        gt.pad(x, (3, 1), "reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        gt.pad(x, (4, 1), "circular")
    with pytest.raises(RuntimeError, match="Padding size 4 is not supported for 2D input"):
        gt.pad(x, (1, 1, 1, 1), "replicate")
    with pytest.raises(RuntimeError, match="doesn't take in value"):
        gt.pad(x, (1, 1), "reflect", 2)
    with pytest.raises(RuntimeError, match="Unrecognised padding mode foo"):
        gt.pad(x, (1, 1), "foo")
    with pytest.raises(RuntimeError, match="non-zero dimensions"):
        gt.pad(gt.zeros(2, 0, device=device), (1, 1), "replicate")


# == grids and broadcasting ======================================================================
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(device: str, indexing: str) -> None:
    ta, a = pair(np.arange(3.0), device)
    tb, b = pair(np.arange(4.0) + 10, device)
    tc, c = pair(np.arange(2.0) - 5, device)
    assert_close(gt.meshgrid(a, b, indexing=indexing), torch.meshgrid(ta, tb, indexing=indexing))
    assert_close(gt.meshgrid([a, b, c], indexing=indexing),
                 torch.meshgrid([ta, tb, tc], indexing=indexing))
    assert_close(gt.meshgrid(a, gt.tensor(2.0, dtype=gt.float64, device=device), indexing=indexing),
                 torch.meshgrid(ta, torch.tensor(2.0, dtype=torch.float64), indexing=indexing))
    grid = gt.meshgrid(a, b, indexing=indexing)[0]
    assert grid._storage is a._storage  # views, like PyTorch
    with pytest.raises(RuntimeError, match="same dtype"):
        gt.meshgrid(a, b.int(), indexing=indexing)
    with pytest.raises(RuntimeError, match="indexing must be one of"):
        gt.meshgrid(a, b, indexing="foo")
    with pytest.raises(RuntimeError, match="non-empty TensorList"):
        gt.meshgrid(indexing=indexing)


def test_broadcast_tensors_cartesian_prod(device: str) -> None:
    tx, x = pair(random_array((2, 3)), device)
    ty, y = pair(np.array([1, 2, 3]), device)
    assert_close(gt.broadcast_tensors(x, y), torch.broadcast_tensors(tx, ty))
    assert gt.broadcast_tensors() == ()
    with pytest.raises(RuntimeError, match="broadcast"):
        gt.broadcast_tensors(x, gt.tensor([1, 2], device=device))
    tb, b = pair(np.array([7, 8]), device)
    tc, c = pair(np.array([0, 1, 2, 3]), device)
    assert_close(gt.cartesian_prod(y, b), torch.cartesian_prod(ty, tb))
    assert_close(gt.cartesian_prod(y, b, c), torch.cartesian_prod(ty, tb, tc))
    assert_close(gt.cartesian_prod(y), torch.cartesian_prod(ty))
    with pytest.raises(RuntimeError, match=r"Expect a 1D vector, but got shape \[2, 3\]"):
        gt.cartesian_prod(x)


# == searching and counting ======================================================================
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("dtype", [gt.float32, gt.int64, gt.float16])
def test_searchsorted_bucketize(device: str, right: bool, dtype: gt.dtype) -> None:
    tb, b = pair(np.sort(random_array((7,), dtype, low=-5, high=5)), device)
    tv, v = pair(random_array((3, 4), dtype, low=-6, high=6, seed=2), device)
    assert_close(gt.searchsorted(b, v, right=right), torch.searchsorted(tb, tv, right=right))
    side = "right" if right else "left"
    assert_close(gt.searchsorted(b, noncontiguous(v), side=side, out_int32=True),
                 torch.searchsorted(tb, tv, side=side, out_int32=True))
    assert_close(gt.bucketize(v, b, right=right), torch.bucketize(tv, tb, right=right))
    assert_close(gt.bucketize(3, b, right=right), torch.bucketize(3, tb, right=right))
    t2, b2 = pair(np.sort(random_array((3, 5), dtype, low=-5, high=5, seed=3), axis=1), device)
    assert_close(gt.searchsorted(b2, v, right=right), torch.searchsorted(t2, tv, right=right))
    perm = np.random.default_rng(0).permutation(7)
    ts, s = idx(np.argsort(np.asarray(tb.float())[perm], kind="stable"), device)
    tu, u = pair(np.asarray(tb.float())[perm], device, dtype)
    assert_close(gt.searchsorted(u, v, right=right, sorter=s),
                 torch.searchsorted(tu, tv, right=right, sorter=ts))


def test_searchsorted_nan_mixed_and_errors(device: str) -> None:
    tb, b = pair(np.array([1.0, NAN], np.float32), device)
    tv, v = pair(np.array([3.0, NAN, 0.0], np.float32), device)
    assert_close(gt.searchsorted(b, v), torch.searchsorted(tb, tv))
    ti, i = idx([3, 6, 9], device)
    assert_close(gt.searchsorted(b, i), torch.searchsorted(tb, ti))
    assert_close(gt.searchsorted(b, 4), torch.searchsorted(tb, 4))
    assert_close(gt.searchsorted(i, 4.5), torch.searchsorted(ti, 4.5))
    large = gt.arange(100000, device=device) % 97
    tl = torch.arange(100000) % 97
    tr, r = pair(np.arange(0, 100, 3), device)
    assert_close(gt.searchsorted(r, large), torch.searchsorted(tr, tl))
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        gt.searchsorted(b, v, side="left", right=True)
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        gt.searchsorted(b, v, side="foo")
    with pytest.raises(RuntimeError, match="positive dimension"):
        gt.searchsorted(gt.tensor(1.0, device=device), v)
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        gt.searchsorted(gt.zeros(2, 4, device=device), gt.zeros(1, 2, device=device))
    with pytest.raises(IndexError, match="sorter index 2 is out of bounds"):
        gt.searchsorted(b, v, sorter=gt.tensor([0, 2], device=device))
    with pytest.raises(RuntimeError, match="must be 1 dimension, but got dim"):
        gt.bucketize(v, gt.zeros(1, 2, device=device))


def test_bincount_histc(device: str) -> None:
    tx, x = pair(np.array([0, 1, 1, 3, 7, 1]), device)
    assert_close(gt.bincount(x), torch.bincount(tx))
    assert_close(x.bincount(minlength=10), tx.bincount(minlength=10))
    assert_close(x.int().bincount(), tx.int().bincount())
    assert_close(x.to(gt.uint8).bincount(), tx.to(torch.uint8).bincount())
    for wdt in (gt.float32, gt.float64, gt.int64, gt.float16):
        tw, w = pair(random_array((6,), wdt, seed=1), device)
        assert_close(gt.bincount(x, w), torch.bincount(tx, tw))
    assert_close(gt.bincount(gt.zeros(0, dtype=gt.int64, device=device)),
                 torch.bincount(torch.zeros(0, dtype=torch.int64)))
    with pytest.raises(RuntimeError, match="non-negative integral"):
        gt.bincount(gt.tensor([0, -1], device=device))
    with pytest.raises(RuntimeError, match="non-negative integral"):
        gt.bincount(gt.tensor([0.0], device=device))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        gt.bincount(x, minlength=-1)
    with pytest.raises(RuntimeError, match="same length as input"):
        gt.bincount(x, gt.ones(3, device=device))

    for dtype in (gt.float32, gt.float64, gt.float16):
        th, h = pair(random_array((50,), dtype, low=-3, high=3), device)
        assert_close(gt.histc(h, bins=7), torch.histc(th, bins=7))
        assert_close(h.histc(4, -1, 1), th.histc(4, -1, 1))
    th, h = pair(np.array([0.1, 0.2, 0.3, 0.7, 1.0, 1.5, -0.1, NAN], np.float32), device)
    assert_close(gt.histc(h, 10, 0, 1), torch.histc(th, 10, 0, 1))
    assert_close(gt.histc(gt.ones(3, device=device), 4), torch.histc(torch.ones(3), 4))
    assert_close(gt.histc(gt.zeros(0, device=device), 4), torch.histc(torch.zeros(0), 4))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        gt.histc(h, 4, 3, 1)
    with pytest.raises(RuntimeError, match="not finite"):
        gt.histc(h, 4)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        gt.histc(h, 0, 0, 1)
    with pytest.raises(RuntimeError, match="Long"):
        gt.histc(gt.tensor([1, 2], device=device), 4)


# == registry / methods ==========================================================================
def test_methods_and_namespace() -> None:
    x = gt.zeros(2, 2)
    for name in ("split", "chunk", "tensor_split", "index_select", "gather", "scatter",
                 "scatter_", "scatter_add_", "scatter_reduce_", "index_add_", "index_copy_",
                 "index_fill_", "masked_fill_", "masked_scatter_", "tril_", "triu_", "sort",
                 "argsort", "topk", "kthvalue", "unique", "flip", "roll", "rot90", "repeat",
                 "repeat_interleave", "tile", "diag", "nonzero", "take_along_dim", "bincount"):
        assert callable(getattr(x, name)), name
    for name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "pad",
                 "meshgrid", "broadcast_tensors", "cartesian_prod", "searchsorted", "bucketize"):
        assert callable(getattr(gt, name)), name
    assert not hasattr(gt.Tensor, "cat") and not hasattr(gt, "repeat")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cat_flip_every_dtype(device: str, dtype: gt.dtype) -> None:
    both([(2, 3), (2, 2)], lambda m: lambda a, b: m.cat([a, b], 1).flip(1), device=device,
         dtype=dtype)
