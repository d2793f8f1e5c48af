"""Gradients of indexing: getitem/setitem (basic and advanced, duplicate indices), the gather and
scatter families, index_add/copy/fill, masks and index_put, out of place and in place on
non-leaf tensors: gradcheck and gradgradcheck in float64, plus PyTorch comparisons."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def leaf(shape: Sequence[int], device: str, seed: int = 0, strided: bool = False) -> gt.Tensor:
    """A float64 leaf that requires grad, with distinct values (no ties for amax/amin)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    v = ((rng.permutation(n) - n / 2) * 0.37 + rng.uniform(-0.1, 0.1, n)).reshape(tuple(shape))
    if not strided:
        return gt.tensor(v, dtype=gt.float64, device=device).requires_grad_()
    big = gt.tensor(np.stack([v, v], axis=-1), dtype=gt.float64, device=device)
    return big[..., 0].detach().requires_grad_()


def check(fn: Callable, *inputs: gt.Tensor, second_order: bool = True) -> None:
    assert gradcheck(fn, inputs)
    if second_order:
        assert gradgradcheck(fn, inputs)


def L(values: object) -> gt.Tensor:  # noqa: N802 (an index tensor, as in the forward tests)
    return gt.tensor(values, dtype=gt.int64)


def M(values: object) -> gt.Tensor:  # noqa: N802 (a mask)
    return gt.tensor(values, dtype=gt.bool)


IDX = [[0, 1, 2, 0], [2, 0, 1, 1]]  # scatter index into (3, 4) along dim 0, with duplicates

# name -> (function of the inputs and a device, input shapes)
OPS: dict[str, tuple[Callable, list[tuple[int, ...]]]] = {
    "getitem_int": (lambda d, a: a[1], [(3, 4)]),
    "getitem_negative_int": (lambda d, a: a[-1, -2], [(3, 4)]),
    "getitem_slices": (lambda d, a: a[1:, ::2], [(3, 4)]),
    "getitem_none_ellipsis": (lambda d, a: a[None, ..., 1], [(2, 3, 4)]),
    "getitem_tensor": (lambda d, a: a[L([2, 0]).to(d)], [(3, 4)]),
    "getitem_list": (lambda d, a: a[[0, 2, 2]], [(3, 4)]),
    "getitem_duplicates": (lambda d, a: a[L([1, 1, 0, 1]).to(d), 1:], [(3, 4)]),
    "getitem_two_tensors": (lambda d, a: a[L([0, 2, 0]).to(d), L([1, 3, 1]).to(d)], [(3, 4)]),
    "getitem_list_of_tensors": (lambda d, a: a[[L([0, 2]).to(d), L([1, 3]).to(d)]], [(3, 4)]),
    "getitem_tensor_and_slice": (lambda d, a: a[:, L([[3, 0], [0, 0]]).to(d)], [(3, 4)]),
    "getitem_split_advanced": (lambda d, a: a[L([1]).to(d), :, L([0, 2]).to(d)], [(2, 3, 3)]),
    "getitem_mask": (lambda d, a: a[a.detach() > 0], [(3, 4)]),
    "getitem_partial_mask": (lambda d, a: a[M([True, False, True]).to(d)], [(3, 4)]),
    "getitem_negative_tensor": (lambda d, a: a[L([-1, -3]).to(d)], [(3, 4)]),
    "index_select": (lambda d, a: a.index_select(-1, L([2, 0, 2]).to(d)), [(3, 4)]),
    "index_select_int32": (lambda d, a: gt.index_select(
        a, 0, gt.tensor([1, 1], dtype=gt.int32, device=d)), [(3, 4)]),
    "index_select_0d": (lambda d, a: a.index_select(0, L([0]).to(d)), [()]),
    "gather": (lambda d, a: a.gather(1, L([[0, 0], [2, 1], [3, 3]]).to(d)), [(3, 4)]),
    "gather_negative_dim": (lambda d, a: a.gather(-2, L([[0, 2, 2, 0]]).to(d)), [(3, 4)]),
    "gather_0d": (lambda d, a: a.gather(0, L(0).to(d)), [()]),
    "take": (lambda d, a: a.take(L([-1, 0, 5, -1]).to(d)), [(3, 4)]),
    "take_2d_index": (lambda d, a: gt.take(a, L([[1, 1], [2, 11]]).to(d)), [(3, 4)]),
    "take_along_dim": (lambda d, a: gt.take_along_dim(a, L([[0], [2], [-1]]).to(d), 1),
                       [(3, 4)]),
    "take_along_dim_broadcast": (lambda d, a: gt.take_along_dim(a, L([[0, 1]]).to(d), 0),
                                 [(3, 1)]),
    "take_along_dim_flat": (lambda d, a: gt.take_along_dim(a, L([0, 5, 3]).to(d)), [(2, 3)]),
    "scatter": (lambda d, a, b: a.scatter(0, L([[0, 1, 2, 1]]).to(d), b), [(3, 4), (1, 4)]),
    "scatter_src_larger": (lambda d, a, b: a.scatter(-1, L([[1], [0]]).to(d), b),
                           [(2, 3), (2, 3)]),
    "scatter_value": (lambda d, a: a.scatter(0, L([[0, 1, 2, 0]]).to(d), 2.5), [(3, 4)]),
    "scatter_add": (lambda d, a, b: a.scatter_add(0, L(IDX).to(d), b), [(3, 4), (2, 4)]),
    "scatter_add_src_larger": (lambda d, a, b: gt.scatter_add(a, 1, L([[0, 0]]).to(d), b),
                               [(2, 3), (2, 3)]),
    "index_add": (lambda d, a, b: a.index_add(1, L([0, 2, 0]).to(d), b, alpha=2),
                  [(3, 4), (3, 3)]),
    "index_add_0d": (lambda d, a, b: a.index_add(0, L([0]).to(d), b), [(), ()]),
    "index_copy": (lambda d, a, b: a.index_copy(1, L([0, 2]).to(d), b), [(3, 4), (3, 2)]),
    "index_fill": (lambda d, a: a.index_fill(1, L([0, -1]).to(d), 1.5), [(3, 4)]),
    "index_fill_tensor_value": (lambda d, a, v: a.index_fill(1, L([0, -1, 3]).to(d), v),
                                [(3, 4), ()]),
    "masked_fill": (lambda d, a: a.masked_fill(M([True, False, True]).to(d), 2.0), [(2, 3)]),
    "masked_fill_broadcast": (lambda d, a, v: a.masked_fill(M([[[True], [False]]]).to(d), v),
                              [(2, 3), ()]),
    "masked_scatter": (lambda d, a, b: a.masked_scatter(M([True, False, True]).to(d), b),
                       [(2, 3), (7,)]),
    "masked_scatter_broadcast": (lambda d, a, b: a.masked_scatter(M([[True], [False]]).to(d), b),
                                 [(3,), (2, 2)]),
    "masked_select": (lambda d, a: a.masked_select(M([[True, False, True]]).to(d)), [(2, 3)]),
    "masked_select_broadcast": (lambda d, a: gt.masked_select(a, M([[True], [False]]).to(d)),
                                [(3,)]),
    "index_put_accumulate": (lambda d, a, v: a.index_put((L([0, 0, 2]).to(d),), v,
                                                         accumulate=True), [(3, 4), (3, 4)]),
    "index_put": (lambda d, a, v: a.index_put((L([0, 2]).to(d), L([1, 3]).to(d)), v),
                  [(3, 4), (2,)]),
    "index_put_broadcast": (lambda d, a, v: gt.index_put(a, (L([1]).to(d),), v), [(3, 4), (4,)]),
}
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _incl in (True, False):
        OPS[f"scatter_reduce_{_reduce}_{'incl' if _incl else 'excl'}"] = (
            lambda d, a, b, r=_reduce, i=_incl: a.scatter_reduce(0, L(IDX).to(d), b, r,
                                                                 include_self=i),
            [(3, 4), (2, 5)])


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_indexing_gradients(name: str, strided: bool, device: str) -> None:
    fn, shapes = OPS[name]
    inputs = [leaf(s, device, seed=i, strided=strided) for i, s in enumerate(shapes)]
    # Second order once per op (contiguous); strided inputs change the first-order path.
    check(lambda *a: fn(device, *a), *inputs, second_order=not strided)


def test_getitem_gradient_accumulates_duplicates(device: str) -> None:
    x = leaf((4, 2), device)
    x[L([1, 3, 1, 1]).to(device)].sum().backward()
    assert_close(x.grad, np.array([[0, 0], [3, 3], [0, 0], [1, 1]], np.float64))
    y = leaf((3, 3), device)
    (y[L([0, 0]).to(device), L([2, 2]).to(device)] * gt.tensor([1.5, 2.0], device=device)) \
        .sum().backward()
    expected = np.zeros((3, 3))
    expected[0, 2] = 3.5
    assert_close(y.grad, expected)


def test_getitem_gradient_matches_torch(device: str) -> None:
    v = np.random.default_rng(1).uniform(-1, 1, (3, 4, 5))
    x = gt.tensor(v, device=device).requires_grad_()
    tx = torch.tensor(v, requires_grad=True)
    for t, lib in ((x, gt), (tx, torch)):
        ix = lib.tensor([[2, 0], [2, 2]])
        y = t[ix, 1:, lib.tensor([4, 0])] * 2 + t[..., lib.tensor([1, 1, 3])].sum()
        (y ** 2).sum().backward()
    assert_close(x.grad, tx.grad)


# -- setitem and the in-place forms on non-leaf tensors ---------------------------------------
def test_setitem_with_advanced_index_on_non_leaf(device: str) -> None:
    def fn(x: gt.Tensor, v: gt.Tensor) -> gt.Tensor:
        y = x * 1
        y[L([2, 0]).to(device), 1:3] = v
        y[y.detach() > 1] = 0.0
        return y
    check(fn, leaf((3, 4), device), leaf((2, 2), device, seed=1))


def test_setitem_broadcast_value_on_view_of_non_leaf(device: str) -> None:
    def fn(x: gt.Tensor, v: gt.Tensor) -> gt.Tensor:
        y = x.sin() * 1
        y[1][L([0, 3]).to(device)] = v
        return y
    check(fn, leaf((3, 4), device), leaf((), device, seed=1))


# name -> (in-place function on a non-leaf, input shapes)
INPLACE: dict[str, tuple[Callable, list[tuple[int, ...]]]] = {
    "scatter_": (lambda d, y, b: y.scatter_(-1, L([[1], [0]]).to(d), b), [(2, 3), (2, 1)]),
    "scatter_value_": (lambda d, y: y.scatter_(0, L([[1, 0, 1]]).to(d), 0.5), [(2, 3)]),
    "scatter_add_": (lambda d, y, b: y.scatter_add_(0, L([[1, 1, 0]]).to(d), b),
                     [(2, 3), (1, 3)]),
    "scatter_reduce_prod_": (lambda d, y, b: y.scatter_reduce_(0, L([[1, 1, 0]]).to(d), b,
                                                               "prod"), [(2, 3), (1, 3)]),
    "scatter_reduce_amax_": (lambda d, y, b: y.scatter_reduce_(0, L([[1, 1, 0]]).to(d), b,
                                                               "amax", include_self=False),
                             [(2, 3), (1, 3)]),
    "index_add_": (lambda d, y, b: y.index_add_(0, L([1, 1]).to(d), b, alpha=-1.5),
                   [(2, 3), (2, 3)]),
    "index_copy_": (lambda d, y, b: y.index_copy_(0, L([1]).to(d), b), [(2, 3), (1, 3)]),
    "index_fill_": (lambda d, y: y.index_fill_(-1, L([1]).to(d), 3.0), [(2, 3)]),
    "masked_fill_": (lambda d, y, v: y.masked_fill_(M([True, False, True]).to(d), v),
                     [(2, 3), ()]),
    "masked_scatter_": (lambda d, y, b: y.masked_scatter_(M([True, False, True]).to(d), b),
                        [(2, 3), (4,)]),
    "index_put_": (lambda d, y, v: y.index_put_((L([0, 0]).to(d), L([1, 2]).to(d)), v,
                                                accumulate=True), [(2, 3), (2,)]),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_in_place_forms_on_non_leaf(name: str, device: str) -> None:
    fn, shapes = INPLACE[name]

    def run(x: gt.Tensor, *rest: gt.Tensor) -> gt.Tensor:
        y = x * 2
        out = fn(device, y, *rest)
        assert out is y and y.requires_grad
        return y
    check(run, *[leaf(s, device, seed=i) for i, s in enumerate(shapes)])


def test_in_place_form_on_a_view_of_non_leaf(device: str) -> None:
    def fn(x: gt.Tensor, v: gt.Tensor) -> gt.Tensor:
        y = x * 1
        y[1:].masked_fill_(M([[True, False, False]]).to(device), v)
        y.t()[0].index_add_(0, L([2, 2]).to(device), v.expand(2))
        return y
    check(fn, leaf((3, 3), device), leaf((), device, seed=1))


# -- scatter_reduce against PyTorch, including zeros and ties ------------------------------------
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_gradients_match_torch(reduce: str, include_self: bool,
                                              device: str) -> None:
    # Zeros (prod), ties (amax/amin) and a column nothing is scattered to. (PyTorch rejects a
    # src larger than the index in backward; gradcheck covers that case above.)
    base = np.array([[1.0, 0.0, 2.0, 4.0], [3.0, 1.0, 0.0, 4.0]])
    src = np.array([[1.0, 0.0, 2.0], [3.0, 2.0, 0.0], [0.0, 1.0, 4.0]])
    index = [[0, 1, 1], [1, 1, 0], [0, 1, 1]]
    if reduce in ("amax", "amin") and not include_self:
        base += 0.25  # see test_scatter_reduce_excluded_self_is_no_tie
    w = np.random.default_rng(0).uniform(0.5, 1.5, (2, 4))
    grads = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        a = lib.tensor(base, dtype=lib.float64, device=dev, requires_grad=True)
        b = lib.tensor(src, dtype=lib.float64, device=dev, requires_grad=True)
        y = a.scatter_reduce(0, lib.tensor(index, device=dev), b, reduce,
                             include_self=include_self)
        (y * lib.tensor(w, device=dev)).sum().backward()
        grads.append((a.grad, b.grad))
    assert_close(grads[0][0], grads[1][0])
    assert_close(grads[0][1], grads[1][1])


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_excluded_self_is_no_tie(reduce: str) -> None:
    # With include_self=False an input equal to the result took no part in it: the scattered
    # value gets the whole gradient. (PyTorch 2.x counts such an input as a tie and halves it.)
    x = gt.tensor([[3.0, 5.0]], dtype=gt.float64, requires_grad=True)
    src = gt.tensor([[3.0, 1.0]], dtype=gt.float64, requires_grad=True)
    y = x.scatter_reduce(0, L([[0, 0]]), src, reduce, include_self=False)
    y.sum().backward()
    assert_close(src.grad, np.array([[1.0, 1.0]]))
    assert_close(x.grad, np.array([[0.0, 0.0]]))
    check(lambda a, b: a.scatter_reduce(0, L([[0, 0]]), b, reduce, include_self=False),
          x.detach().requires_grad_(), src.detach().requires_grad_())


def test_scatter_reduce_prod_double_backward_with_two_zeros_raises() -> None:
    x = leaf((2,), "cpu")
    src = gt.tensor([0.0, 0.0, 1.0], dtype=gt.float64).requires_grad_()
    y = x.scatter_reduce(0, L([0, 0, 1]), src, "prod")
    (g,) = gt.autograd.grad(y.sum(), src, retain_graph=True)
    assert_close(g, np.array([0.0, 0.0, x.detach().numpy()[1]]))
    with pytest.raises(RuntimeError, match="double backward is not supported"):
        gt.autograd.grad(y.sum(), src, create_graph=True)


def test_index_fill_value_gradient_counts_each_slice_once(device: str) -> None:
    x = leaf((2, 4), device)
    v = gt.tensor(2.0, dtype=gt.float64, device=device, requires_grad=True)
    x.index_fill(1, L([1, -3, 3]).to(device), v).sum().backward()  # -3 is 1 again
    assert_close(v.grad, np.array(4.0))
    assert_close(x.grad, np.array([[1.0, 0, 1, 0], [1, 0, 1, 0]]))
