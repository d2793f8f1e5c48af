"""nanmean, isin, diff, tril_indices/triu_indices, cross, cdist and Tensor.unfold (compositions
of other ops) against PyTorch: values, dtypes, gradients and errors, on cpu and emulated cuda."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close

torch = pytest.importorskip("torch")
NAN = float("nan")


def _leaves(device: str, *arrays: np.ndarray) -> tuple[list, list]:
    return ([gt.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _backward_both(got, want, device: str) -> None:
    weights = np.linspace(0.5, 1.5, int(np.prod(tuple(want.shape))) or 1)[:want.numel()]
    weights = weights.reshape(tuple(want.shape))
    (got * gt.tensor(weights, device=device)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()


@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "keepdim": True}])
def test_nanmean_matches_torch(device: str, kw: dict) -> None:
    data = np.array([[1.0, NAN, 3.0], [NAN, NAN, NAN], [2.0, 4.0, -1.0]])
    (x,), (tx,) = _leaves(device, data)
    got, want = gt.nanmean(x, **kw), torch.nanmean(tx, **kw)
    assert_close(got, want)
    assert_close(x.nanmean(**kw), want)
    if kw:
        _backward_both(got.nan_to_num(), want.nan_to_num(), device)
        # an all-NaN slice (count 0): PyTorch's gradient there is 0 * inf = NaN, ours 0
        assert_close(x.grad, tx.grad.nan_to_num())
    with pytest.raises(RuntimeError, match="expected input to have floating point"):
        gt.nanmean(gt.tensor([1, 2], device=device))


@pytest.mark.parametrize(("elements", "tests", "kw"), [
    ([1, 2, 3, 4], [2, 4, 9], {}), ([[1, 5], [7, 2]], [[2], [7]], {"invert": True}),
    ([1.0, NAN, 2.5], [NAN, 1.0], {}), ([1, 2], [], {}), ([0.5, 2.0], [2], {}),
])
def test_isin_matches_torch(device: str, elements, tests, kw: dict) -> None:
    e, t = np.array(elements), np.array(tests, dtype=np.int64 if not tests else None)
    got = gt.isin(gt.tensor(e, device=device), gt.tensor(t, device=device), **kw)
    want = torch.isin(torch.tensor(e), torch.tensor(t), **kw)
    assert got.dtype is gt.bool and got.tolist() == want.tolist()
    assert gt.isin(3, gt.tensor([1, 3], device=device)).item() is True
    assert gt.isin(gt.tensor([1, 3], device=device), 3).tolist() == [False, True]


@pytest.mark.parametrize(("shape", "kw"), [((6,), {}), ((6,), {"n": 2}), ((3, 4), {"dim": 0}),
                                           ((3, 4), {"n": 3, "dim": 1}), ((4,), {"n": 0})])
def test_diff_matches_torch(device: str, shape, kw: dict) -> None:
    data = np.random.default_rng(0).standard_normal(shape)
    (x,), (tx,) = _leaves(device, data)
    got, want = gt.diff(x, **kw), torch.diff(tx, **kw)
    assert_close(got, want)
    if want.numel():
        _backward_both(got, want, device)
        assert_close(x.grad, tx.grad)


def test_diff_prepend_append_and_bool(device: str) -> None:
    x, tx = gt.tensor([[1.0, 2.0], [4.0, 8.0]], device=device), torch.tensor([[1., 2.], [4., 8.]])
    got = gt.diff(x, dim=0, prepend=gt.zeros(1, 2, device=device),
                  append=gt.ones(2, 2, device=device))
    assert_close(got, torch.diff(tx, dim=0, prepend=torch.zeros(1, 2), append=torch.ones(2, 2)))
    flags = [True, False, False, True]
    assert gt.diff(gt.tensor(flags, device=device)).tolist() == \
        torch.diff(torch.tensor(flags)).tolist()
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        gt.diff(gt.tensor(1.0, device=device))


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("args", [(3, 3), (3, 4, 1), (4, 3, -1), (0, 3), (2, 5, 7), (5, 2, -9)])
def test_triangle_indices_match_torch(device: str, name: str, args: tuple) -> None:
    got = getattr(gt, name)(*args, device=device)
    want = getattr(torch, name)(*args)
    assert got.dtype is gt.int64 and tuple(got.shape) == tuple(want.shape)
    assert got.tolist() == want.tolist()
    assert getattr(gt, name)(*args, dtype=gt.int32).dtype is gt.int32


@pytest.mark.parametrize(("a_shape", "b_shape", "dim"), [((4, 3), (4, 3), 1),
                                                         ((3, 5), (3, 1), 0),
                                                         ((2, 3, 3), (1, 3, 3), -1)])
def test_cross_matches_torch(device: str, a_shape, b_shape, dim: int) -> None:
    rng = np.random.default_rng(1)
    (a, b), (ta, tb) = _leaves(device, rng.standard_normal(a_shape), rng.standard_normal(b_shape))
    got, want = gt.cross(a, b, dim=dim), torch.linalg.cross(ta, tb, dim=dim)
    assert_close(got, want)
    _backward_both(got, want, device)
    assert_close(a.grad, ta.grad)
    assert_close(b.grad, tb.grad)
    with pytest.raises(RuntimeError, match="must have length 3"):
        gt.cross(gt.zeros(2, 4, device=device), gt.zeros(2, 4, device=device), dim=-1)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        gt.cross(gt.zeros(2, 3, device=device), gt.zeros(3, device=device))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize(("s1", "s2"), [((5, 3), (4, 3)), ((2, 5, 3), (2, 4, 3))])
def test_cdist_matches_torch(device: str, p: float, s1, s2) -> None:
    rng = np.random.default_rng(2)
    (x, y), (tx, ty) = _leaves(device, rng.standard_normal(s1), rng.standard_normal(s2))
    got = gt.cdist(x, y, p=p)
    want = torch.cdist(tx, ty, p=p, compute_mode="donot_use_mm_for_euclid_dist")
    assert_close(got, want)
    _backward_both(got, want, device)
    assert_close(x.grad, tx.grad)
    assert_close(y.grad, ty.grad)


def test_cdist_errors_are_torchs() -> None:
    for args, kw in (((gt.zeros(3), gt.zeros(2, 3)), {}), ((gt.zeros(2, 3), gt.zeros(2, 4)), {}),
                     ((gt.zeros(2, 3), gt.zeros(2, 3)), {"p": -1.0})):
        with pytest.raises(RuntimeError) as want:
            torch.cdist(*(torch.from_numpy(a.numpy()) for a in args), **kw)
        with pytest.raises(type(want.value)):
            gt.cdist(*args, **kw)


@pytest.mark.parametrize(("shape", "args"), [((7,), (0, 3, 2)), ((3, 8), (1, 4, 1)),
                                             ((5, 4), (0, 2, 3)), ((2, 3, 6), (-1, 3, 3)),
                                             ((), (0, 1, 1))])
def test_tensor_unfold_matches_torch(device: str, shape, args: tuple) -> None:
    data = np.random.default_rng(3).standard_normal(shape)
    (x,), (tx,) = _leaves(device, data)
    got, want = x.unfold(*args), tx.unfold(*args)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert_close(got, want)
    _backward_both(got, want, device)  # overlapping windows add up their gradients
    assert_close(x.grad, tx.grad)


def test_tensor_unfold_errors_are_torchs(device: str) -> None:
    x = gt.arange(7.0, device=device)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 7"):
        x.unfold(0, 8, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        x.unfold(0, 2, 0)
