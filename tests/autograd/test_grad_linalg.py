"""Gradients of the matrix products, tensordot/inner/outer/kron and einsum: gradcheck and
gradgradcheck in float64 for every shape case, the in-place add* forms, and PyTorch's values
for float32 and complex inputs (grad * conj(the other factor))."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def leaves(shapes: Sequence[Sequence[int]], device: str, seed: int = 0,
           dtype: np.dtype = np.float64) -> list[gt.Tensor]:
    rng = np.random.default_rng(seed)
    return [gt.tensor(rng.uniform(-1, 1, s).astype(dtype), device=device).requires_grad_()
            for s in shapes]


PRODUCTS: dict[str, tuple[Callable, list]] = {
    "mm": (gt.mm, [(2, 3), (3, 4)]),
    "addmm": (lambda c, a, b: gt.addmm(c, a, b, beta=0.5, alpha=2.0), [(2, 4), (2, 3), (3, 4)]),
    "addmm_broadcast_bias": (gt.addmm, [(4,), (2, 3), (3, 4)]),
    "addmm_beta0": (lambda c, a, b: gt.addmm(c, a, b, beta=0), [(2, 4), (2, 3), (3, 4)]),
    "bmm": (gt.bmm, [(2, 2, 3), (2, 3, 2)]),
    "baddbmm": (lambda c, a, b: gt.baddbmm(c, a, b, beta=-1.5, alpha=0.5),
                [(2, 1, 2), (2, 2, 3), (2, 3, 2)]),
    "addbmm": (lambda c, a, b: gt.addbmm(c, a, b, beta=2, alpha=3), [(2, 2), (3, 2, 3), (3, 3, 2)]),
    "mv": (gt.mv, [(2, 3), (3,)]),
    "addmv": (lambda c, a, b: gt.addmv(c, a, b, beta=0.3, alpha=-2), [(2,), (2, 3), (3,)]),
    "addmv_scalar_input": (gt.addmv, [(), (2, 3), (3,)]),
    "dot": (gt.dot, [(3,), (3,)]),
    "vdot": (gt.vdot, [(3,), (3,)]),
    "outer": (gt.outer, [(3,), (2,)]),
    "ger": (gt.ger, [(2,), (3,)]),
    "kron": (gt.kron, [(2, 2), (2, 3)]),
    "kron_mixed_dims": (gt.kron, [(2,), (2, 3)]),
    "inner": (gt.inner, [(2, 3), (4, 3)]),
    "inner_0d": (gt.inner, [(), (2, 3)]),
    "tensordot_lists": (lambda a, b: gt.tensordot(a, b, dims=([2, 0], [0, 1])),
                        [(2, 3, 2), (2, 2, 4)]),
    "tensordot_int": (lambda a, b: gt.tensordot(a, b, 1), [(2, 3), (3, 2)]),
    "tensordot_outer": (lambda a, b: gt.tensordot(a, b, 0), [(2,), (3,)]),
    "tensordot_full": (lambda a, b: gt.tensordot(a, b, 2), [(2, 3), (2, 3)]),
    "tensordot_negative_dims": (lambda a, b: gt.tensordot(a, b, dims=([-1], [-2])),
                                [(2, 3), (3, 2)]),
    "tensordot_broadcast_a": (lambda a, b: gt.tensordot(a, b, dims=([1], [0])), [(2, 1), (3, 2)]),
    "tensordot_broadcast_b": (lambda a, b: gt.tensordot(a, b, dims=([1], [0])), [(2, 3), (1, 2)]),
}

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 2)),
                 ((2, 2, 3), (3, 2)), ((2, 2, 3), (3,)), ((3,), (2, 3, 2)), ((2, 3), (2, 3, 2)),
                 ((2, 1, 2, 3), (3, 3, 2)), ((2, 2, 3), (2, 3, 2)), ((1, 2, 3), (2, 3, 2)),
                 ((2, 2, 3), (1, 3, 2))]
for _a, _b in MATMUL_SHAPES:
    PRODUCTS[f"matmul_{_a}_{_b}"] = (gt.matmul, [_a, _b])
PRODUCTS["matmul_operator"] = (lambda a, b: a @ b, [(2, 3), (3, 2)])

EINSUMS = [("ij,jk->ik", [(2, 3), (3, 2)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
           ("ij->", [(2, 3)]), ("ij,j->i", [(2, 3), (3,)]),
           ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
           ("i,i", [(3,), (3,)]), ("ij->ji", [(2, 3)]), ("...ij,...jk->...ik", [(2, 2, 3), (3, 2)]),
           ("ij,kl->ijkl", [(2, 2), (2, 1)]), ("iij,jk->ik", [(2, 2, 3), (3, 2)]),
           ("ij,ij,ij->i", [(2, 3), (2, 3), (2, 3)]), ("ik,k->", [(2, 1), (3,)]),
           ("i...,...->i", [(2, 3), (1,)]), ("bi,bi->b", [(1, 3), (2, 3)]),
           ("ijk,k->ij", [(2, 3, 2), (2,)]), ("iji->j", [(2, 3, 2)]), ("i...j->...", [(2, 3, 2)]),
           ("a...b,b...->...a", [(2, 2, 3), (3, 1, 2)])]
for _eq, _shapes in EINSUMS:
    PRODUCTS[f"einsum {_eq}"] = ((lambda *ops, eq=_eq: gt.einsum(eq, *ops)), _shapes)


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_gradcheck_and_gradgradcheck(name: str, device: str) -> None:
    fn, shapes = PRODUCTS[name]
    xs = tuple(leaves(shapes, device))
    assert gradcheck(fn, xs)
    assert gradgradcheck(fn, xs)


def test_einsum_argument_forms(device: str) -> None:
    a, b = leaves([(2, 3), (3, 2)], device)
    assert gradcheck(lambda x, y: gt.einsum("ij,jk", [x, y]), (a, b))
    assert gradcheck(lambda x, y: gt.einsum(x, [0, 1], y, [1, 2], [0, 2]), (a, b))
    # the same tensor twice: both uses add up
    (g,) = gt.autograd.grad(gt.einsum("ij,ij->", a, a), (a,))
    assert_close(g, (2 * a).detach())


def test_only_the_operands_that_require_grad_get_one(device: str) -> None:
    a, b = leaves([(2, 3), (3, 2)], device)
    c = b.detach()
    (ga,) = gt.autograd.grad(gt.einsum("ij,jk->ik", a, c).sum(), (a,))
    assert_close(ga, c.sum(1).expand(2, 3))
    out = gt.matmul(a.detach(), c)
    assert not out.requires_grad


INPLACE: dict[str, tuple[Callable, list]] = {
    "addmm_": (lambda c, a, b: (c * 1).addmm_(a, b, beta=0.5, alpha=2), [(2, 4), (2, 3), (3, 4)]),
    "baddbmm_": (lambda c, a, b: (c * 1).baddbmm_(a, b, alpha=-1), [(2, 2, 2), (2, 2, 3),
                                                                    (2, 3, 2)]),
    "addbmm_": (lambda c, a, b: (c * 1).addbmm_(a, b, beta=3), [(2, 2), (3, 2, 3), (3, 3, 2)]),
    "addmv_": (lambda c, a, b: (c * 1).addmv_(a, b, beta=-1), [(2,), (2, 3), (3,)]),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_add_products(name: str, device: str) -> None:
    fn, shapes = INPLACE[name]
    xs = tuple(leaves(shapes, device, seed=1))
    assert gradcheck(fn, xs)
    assert gradgradcheck(fn, xs)


def test_inplace_add_product_on_a_constant_with_grad_operands(device: str) -> None:
    a, b = leaves([(2, 3), (3, 4)], device)
    c = gt.ones(2, 4, dtype=gt.float64, device=device)
    c.addmm_(a, b)
    assert c.requires_grad
    ga, gb = gt.autograd.grad(c.sum(), (a, b))
    assert_close(ga, gt.ones(2, 4, dtype=gt.float64, device=device) @ b.detach().t())
    assert_close(gb, a.detach().t() @ gt.ones(2, 4, dtype=gt.float64, device=device))


# -- PyTorch's values --------------------------------------------------------------------------
TORCH_CASES: dict[str, tuple[Callable, list]] = {
    "linear": (lambda m, x, w, b: m.addmm(b, x, w.t()), [(4, 3), (5, 3), (5,)]),
    "matmul_batched_broadcast": (lambda m, a, b: m.matmul(a, b), [(2, 1, 3, 4), (3, 4, 2)]),
    "matmul_3d_2d": (lambda m, a, b: m.matmul(a, b), [(2, 3, 4), (4, 5)]),
    "matmul_vec_batched": (lambda m, a, b: m.matmul(a, b), [(4,), (2, 4, 3)]),
    "bmm": (lambda m, a, b: m.bmm(a, b), [(2, 3, 4), (2, 4, 2)]),
    "einsum_attention": (lambda m, q, k: m.einsum("bqd,bkd->bqk", q, k), [(2, 3, 4), (2, 5, 4)]),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, dims=([1, 2], [0, 1])),
                  [(2, 3, 4), (3, 4, 5)]),
    "kron": (lambda m, a, b: m.kron(a, b), [(2, 3), (3, 2)]),
}


@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_float32_gradients_match_torch(name: str, device: str) -> None:
    fn, shapes = TORCH_CASES[name]
    xs = leaves(shapes, device, seed=2, dtype=np.float32)
    ts = [torch.tensor(x.detach().cpu().numpy(), requires_grad=True) for x in xs]
    out, tout = fn(gt, *xs), fn(torch, *ts)
    w = np.random.default_rng(3).uniform(-1, 1, tuple(tout.shape)).astype(np.float32)
    grads = gt.autograd.grad(out, xs, gt.tensor(w, device=device))
    expected = torch.autograd.grad(tout, ts, torch.tensor(w))
    for g, e in zip(grads, expected, strict=True):
        assert g.dtype is gt.float32
        assert_close(g, e, rtol=1e-5, atol=1e-5)


COMPLEX_CASES: dict[str, tuple[Callable, list]] = {
    "mm": (lambda m, a, b: m.mm(a, b), [(2, 3), (3, 2)]),
    "addmm_complex_scalars": (lambda m, c, a, b: m.addmm(c, a, b, beta=1 + 1j, alpha=2 - 1j),
                              [(2, 2), (2, 3), (3, 2)]),
    "matmul_batched": (lambda m, a, b: m.matmul(a, b), [(2, 2, 3), (3,)]),
    "dot": (lambda m, a, b: m.dot(a, b), [(3,), (3,)]),
    "vdot": (lambda m, a, b: m.vdot(a, b), [(3,), (3,)]),
    "mv": (lambda m, a, b: m.mv(a, b), [(2, 3), (3,)]),
    "einsum": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), [(2, 3), (3, 2)]),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, 1), [(2, 3), (3, 2)]),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_gradients_match_torch(name: str, device: str) -> None:
    fn, shapes = COMPLEX_CASES[name]
    rng = np.random.default_rng(4)
    arrays = [rng.uniform(-1, 1, s) + 1j * rng.uniform(-1, 1, s) for s in shapes]
    xs = [gt.tensor(a, device=device).requires_grad_() for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, tout = fn(gt, *xs), fn(torch, *ts)
    w = rng.uniform(-1, 1, tuple(tout.shape)) + 1j * rng.uniform(-1, 1, tuple(tout.shape))
    grads = gt.autograd.grad(out, xs, gt.tensor(w, device=device))
    expected = torch.autograd.grad(tout, ts, torch.tensor(w))
    for g, e in zip(grads, expected, strict=True):
        assert_close(g, e, rtol=1e-10, atol=1e-10)


def test_linear_backward_is_two_products(device: str) -> None:
    """nn.Linear's addmm: the weight and input gradients are one mm each, and the bias one sum
    (the node's broadcast reduction), with no other ops recorded in the backward graph."""
    x, w, b = leaves([(4, 3), (5, 3), (5,)], device)
    out = gt.addmm(b, x, w.t())
    g = gt.ones(4, 5, dtype=gt.float64, device=device).requires_grad_()
    gx, gw, gb = gt.autograd.grad(out, (x, w, b), g, create_graph=True)
    assert gx.grad_fn.name() == "MmBackward0"
    assert gw.grad_fn.name() in ("TBackward0", "MmBackward0")
    # the bias: the node's sum over the batch (autograd.formulas.sum_to: a sum and a reshape)
    assert gb.grad_fn.name() in ("SumBackward0", "ReshapeBackward0")
    assert_close(gb, g.detach().sum(0))
