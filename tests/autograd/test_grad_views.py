"""Gradients of the view and copy ops: gradcheck and gradgradcheck in float64 (contiguous and
strided inputs, negative dims), conversions and copies between dtypes against PyTorch, setitem
and in-place writes through views of non-leaf tensors, and the in-place errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def values(shape: Sequence[int], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, size=tuple(shape))


def leaf(shape: Sequence[int], device: str, seed: int = 0, strided: bool = False) -> gt.Tensor:
    """A float64 leaf that requires grad; ``strided`` gives it a non-contiguous layout."""
    v = values(shape, seed)
    if not strided:
        return gt.tensor(v, dtype=gt.float64, device=device).requires_grad_()
    big = gt.tensor(np.stack([v, -v], axis=-1), dtype=gt.float64, device=device)
    x = big[..., 0].detach().requires_grad_()
    assert not x.is_contiguous() or x.numel() <= 1
    return x


def check(fn: Callable, *inputs: gt.Tensor, second_order: bool = True) -> None:
    assert gradcheck(fn, inputs)
    if second_order:
        assert gradgradcheck(fn, inputs)


# name -> (function, input shapes)
VIEWS: dict[str, tuple[Callable, list[tuple[int, ...]]]] = {
    "view": (lambda a: a.contiguous().view(4, -1), [(3, 4)]),
    "view_as": (lambda a: a.contiguous().view_as(gt.zeros(2, 6)), [(3, 4)]),
    "reshape": (lambda a: a.reshape(-1, 2), [(3, 4)]),
    "reshape_of_transpose": (lambda a: a.t().reshape(12), [(3, 4)]),
    "expand": (lambda a: a.expand(2, 3, 4), [(3, 1)]),
    "expand_as": (lambda a: a.expand_as(gt.zeros(3, 3, 4)), [(4,)]),
    "permute": (lambda a: a.permute(2, 0, -2), [(2, 3, 4)]),
    "transpose": (lambda a: a.transpose(-1, 0), [(2, 3, 4)]),
    "swapaxes": (lambda a: a.swapaxes(0, 1), [(2, 3)]),
    "t": (lambda a: a.t(), [(2, 3)]),
    "T": (lambda a: a.T, [(2, 3, 4)]),
    "mT": (lambda a: a.mT, [(2, 3, 4)]),
    "squeeze": (lambda a: a.squeeze(-2), [(2, 1, 3)]),
    "squeeze_all": (lambda a: a.squeeze(), [(1, 3, 1)]),
    "unsqueeze": (lambda a: a.unsqueeze(-1), [(2, 3)]),
    "narrow": (lambda a: a.narrow(-1, 1, 2), [(2, 4)]),
    "select": (lambda a: a.select(-2, 1), [(2, 3, 2)]),
    "unbind": (lambda a: a.unbind(-1), [(2, 3)]),
    "unbind_one_used": (lambda a: a.unbind(0)[1] * 2, [(3, 2)]),
    "movedim": (lambda a: a.movedim((0, 1), (-1, 0)), [(2, 3, 4)]),
    "as_strided": (lambda a: a.contiguous().as_strided((2, 2), (1, 2), 1), [(3, 3)]),
    "as_strided_overlap": (lambda a: a.contiguous().as_strided((3, 2), (1, 1)), [(4,)]),
    "diagonal": (lambda a: a.diagonal(1, -1, 0), [(3, 4)]),
    "diagonal_3d": (lambda a: a.diagonal(-1, 0, 2), [(3, 2, 4)]),
    "flatten": (lambda a: a.flatten(1), [(2, 3, 2)]),
    "flatten_0d": (lambda a: a.flatten(), [()]),
    "unflatten": (lambda a: a.unflatten(-1, (2, -1)), [(3, 4)]),
    "broadcast_to": (lambda a: gt.broadcast_to(a, (2, 3, 2)), [(3, 1)]),
    "adjoint": (lambda a: a.adjoint(), [(2, 3, 4)]),
    "clone": (lambda a: a.clone(), [(3, 4)]),
    "contiguous": (lambda a: a.contiguous() * 1, [(3, 4)]),
    "getitem_basic": (lambda a: a[1:, None, ..., ::2], [(3, 4)]),
    "as_strided_scatter": (lambda a, b: gt.as_strided_scatter(a.contiguous(), b, (2,), (3,), 1),
                           [(3, 3), (2,)]),
}


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_gradients(name: str, strided: bool, device: str) -> None:
    fn, shapes = VIEWS[name]
    inputs = [leaf(s, device, seed=i, strided=strided) for i, s in enumerate(shapes)]
    # Second order once per op (contiguous); strided inputs change the first-order path.
    check(fn, *inputs, second_order=not strided)


def test_view_of_strided_input_raises() -> None:
    x = leaf((3, 4), "cpu").t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(12)


def test_views_of_a_leaf_accumulate_into_it(device: str) -> None:
    x = leaf((3, 4), device)
    ((x[0] * 2).sum() + (x.t()[1] * 3).sum() + x.narrow(1, 0, 1).squeeze(1).sum()).backward()
    expected = np.zeros((3, 4))
    expected[0] += 2
    expected[:, 1] += 3
    expected[:, 0] += 1
    assert_close(x.grad, expected)


# -- conversions and copies -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_to_dtype_gradient_matches_torch(dtype: str, device: str) -> None:
    v = values((3, 4))
    x = gt.tensor(v, dtype=gt.float64, device=device).requires_grad_()
    tx = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    w = values((3, 4), seed=1)
    y = x.to(getattr(gt, dtype))
    ty = tx.to(getattr(torch, dtype))
    assert y.dtype is getattr(gt, dtype) and y.requires_grad
    (y * gt.tensor(w, device=device).to(y.dtype)).sum().abs().backward()
    (ty * torch.tensor(w).to(ty.dtype)).sum().abs().backward()
    assert x.grad.dtype is gt.float64
    assert_close(x.grad, tx.grad, atol=1e-2, rtol=1e-2)


def test_float32_round_trip_gradient_matches_torch(device: str) -> None:
    v = values((2, 5))
    x = gt.tensor(v, dtype=gt.float32, device=device).requires_grad_()
    tx = torch.tensor(v, dtype=torch.float32, requires_grad=True)
    (x.double().sin() * x.float()).sum().backward()
    (tx.double().sin() * tx.float()).sum().backward()
    assert x.grad.dtype is gt.float32
    assert_close(x.grad, tx.grad)


def test_to_same_dtype_and_device_is_differentiable(device: str) -> None:
    check(lambda a: a.to(gt.float64).to(device) * a.cpu().to(device), leaf((3,), device))


def test_copy_between_dtypes_matches_torch(device: str) -> None:
    v = values((2, 3))
    x = gt.tensor(v, dtype=gt.float64, device=device).requires_grad_()
    tx = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    y = gt.zeros(2, 3, dtype=gt.float32, device=device)
    ty = torch.zeros(2, 3, dtype=torch.float32)
    y.copy_(x * 2)
    ty.copy_(tx * 2)
    assert y.requires_grad and y.dtype is gt.float32
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert x.grad.dtype is gt.float64
    assert_close(x.grad, tx.grad, atol=1e-5, rtol=1e-5)


def test_copy_broadcasts_and_gradients_sum_back(device: str) -> None:
    def fn(a: gt.Tensor, b: gt.Tensor) -> gt.Tensor:
        y = a * 1
        y[1:].copy_(b)
        return y
    check(fn, leaf((3, 4), device), leaf((4,), device, seed=1))


# -- setitem and in-place writes through views of non-leaf tensors -----------------------------
def test_setitem_on_non_leaf(device: str) -> None:
    def fn(x: gt.Tensor, v: gt.Tensor) -> gt.Tensor:
        y = x * 1
        y[0] = v
        return y
    check(fn, leaf((3, 4), device), leaf((4,), device, seed=1))


def test_setitem_with_a_number_on_non_leaf(device: str) -> None:
    def fn(x: gt.Tensor) -> gt.Tensor:
        y = x * 2
        y[:, 1:3] = 0.5
        return y
    check(fn, leaf((3, 4), device))


def test_setitem_on_views_of_non_leaf(device: str) -> None:
    def fn(x: gt.Tensor, v: gt.Tensor) -> gt.Tensor:
        y = x.sin() * 1
        row = y[1]
        row[1:3] = v          # a view of a view: the base's history is rewritten
        col = y.t()[2]
        col.mul_(v[0])        # a strided view
        return y * 1
    check(fn, leaf((3, 4), device), leaf((2,), device, seed=1))


def test_setitem_gradient_matches_torch(device: str) -> None:
    v = values((3, 4))
    x = gt.tensor(v, device=device).requires_grad_()
    w = gt.tensor([1.5, -2.0], device=device).requires_grad_()
    tx = torch.tensor(v, requires_grad=True)
    tw = torch.tensor([1.5, -2.0], requires_grad=True)
    for a, b, lib in ((x, w, gt), (tx, tw, torch)):
        y = a.sin()
        y[1, :2] = b * b
        y.diagonal().mul_(3)
        lib.exp(y).sum().backward()
    assert_close(x.grad, tx.grad)
    assert_close(w.grad, tw.grad)


# -- errors ------------------------------------------------------------------------------------
LEAF_ERROR = "a leaf Variable that requires grad is being used in an in-place operation."


@pytest.mark.parametrize("write", [
    lambda x: x.add_(1),
    lambda x: x.copy_(gt.zeros(3, dtype=gt.float64)),
    lambda x: x.__setitem__(0, 1.0),
    lambda x: x.masked_fill_(gt.tensor([True, False, True]), 0.0),
    lambda x: x.index_fill_(0, gt.tensor([1]), 0.0),
    lambda x: x.scatter_(0, gt.tensor([1]), 2.0),
], ids=["add_", "copy_", "setitem", "masked_fill_", "index_fill_", "scatter_"])
def test_in_place_on_a_leaf_that_requires_grad_raises(write: Callable) -> None:
    x = gt.ones(3, dtype=gt.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_ERROR.replace(".", r"\.")):
        write(x)
    with gt.no_grad():
        write(x)  # allowed without grad mode


def test_in_place_on_a_view_of_a_leaf_raises() -> None:
    x = gt.ones(2, 3, dtype=gt.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2)


def test_modifying_a_saved_input_raises_naming_the_op() -> None:
    x = gt.ones(3, dtype=gt.float64, requires_grad=True)
    x2 = x * 1
    z = x2 * x2           # saves its inputs
    x2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*MulBackward0"):
        z.sum().backward()


def test_modifying_a_saved_output_raises_naming_the_op() -> None:
    x = gt.ones(3, dtype=gt.float64, requires_grad=True)
    z = (x * 1).exp()     # saves its output
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*ExpBackward0"):
        z.sum().backward()


def test_modifying_a_tensor_not_saved_is_fine(device: str) -> None:
    x = leaf((3,), device)
    y = x.sin()
    x2 = x * 1
    z = x2 + 1            # add saves nothing
    x2.add_(1)
    (z.sum() + y.sum()).backward()
    assert_close(x.grad, (1 + np.cos(x.detach().cpu().numpy())))


@pytest.mark.parametrize("view", [
    lambda x: x.select(0, 1).narrow(1, 2, 2),
    lambda x: x.unbind(0)[1].narrow(1, 0, 2),
    lambda x: x.narrow(0, 1, 1).narrow(2, 2, 2),
    lambda x: x.as_strided((1, 2), (4, 1), 5),
])
def test_double_backward_of_a_view_of_a_view(view, device):
    # The gradient of the outer view is a view into a larger gradient buffer (its row 1): the
    # inner view's gradient must read it where its own offset says, not from its storage's
    # start (as_strided offsets are absolute), or the second derivative comes from row 0.
    x = gt.tensor(np.arange(8.).reshape(2, 1, 4), dtype=gt.float64, device=device,
                  requires_grad=True)
    assert gt.autograd.gradgradcheck(lambda x: view(x).sin(), (x,))
    y = view(x) * 3
    v = gt.ones(tuple(y.shape), dtype=gt.float64, device=device, requires_grad=True)
    g, = gt.autograd.grad(y, x, v, create_graph=True)
    w = gt.arange(1., 9., dtype=gt.float64, device=device).reshape(2, 1, 4)
    gv, = gt.autograd.grad(g, v, w)
    expect = 3 * view(w)
    np.testing.assert_array_equal(gv.cpu().numpy(), expect.reshape(gv.shape).cpu().numpy())
