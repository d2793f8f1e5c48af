"""Gradients of the shape ops: joining and splitting, flips and rolls, repeats, triangles and
diagonals, padding, grids, and sorting (values differentiable, indices not): gradcheck and
gradgradcheck in float64, plus PyTorch comparisons and the ops that have no derivative."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def leaf(shape: Sequence[int], device: str, seed: int = 0, strided: bool = False) -> gt.Tensor:
    """A float64 leaf that requires grad, with distinct values (no ties for sort and friends)
    spaced far wider than gradcheck's step; ``strided`` gives it a non-contiguous layout."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    v = ((rng.permutation(n) - n / 2) * 0.37 + rng.uniform(-0.1, 0.1, n)).reshape(tuple(shape))
    if not strided:
        return gt.tensor(v, dtype=gt.float64, device=device).requires_grad_()
    big = gt.tensor(np.stack([v, v], axis=-1), dtype=gt.float64, device=device)
    return big[..., 1].detach().requires_grad_()


def check(fn: Callable, *inputs: gt.Tensor, second_order: bool = True) -> None:
    assert gradcheck(fn, inputs)
    if second_order:
        assert gradgradcheck(fn, inputs)


def values_of(fn: Callable) -> Callable:
    """The first (values) output of a (values, indices) op: gradcheck compares float outputs."""
    return lambda *a: fn(*a)[0]


# name -> (function, input shapes)
OPS: dict[str, tuple[Callable, list[tuple[int, ...]]]] = {
    "cat": (lambda a, b: gt.cat([a, b, a], -1), [(2, 3), (2, 2)]),
    "cat_dim0": (lambda a, b: gt.cat((a, b)), [(1, 3), (2, 3)]),
    "cat_skips_empty_1d": (lambda a: gt.cat([a, gt.zeros(0, dtype=gt.float64, device=a.device)],
                                             dim=1), [(2, 3)]),
    "concat_axis": (lambda a, b: gt.concat([a, b], axis=0), [(2,), (3,)]),
    "stack": (lambda a, b: gt.stack([a, b], -1), [(2, 3), (2, 3)]),
    "stack_dim1": (lambda a, b: gt.stack([a, b, a], 1), [(2, 3), (2, 3)]),
    "hstack": (lambda a, b: gt.hstack([a, b]), [(2, 3), (2, 1)]),
    "hstack_1d": (lambda a, b: gt.hstack([a, b]), [(2,), (3,)]),
    "vstack": (lambda a, b: gt.vstack([a, b]), [(3,), (2, 3)]),
    "dstack": (lambda a, b: gt.dstack([a, b]), [(2, 3), (2, 3)]),
    "column_stack": (lambda a, b: gt.column_stack([a, b]), [(3,), (3, 2)]),
    "split": (lambda a: a.split(2, -1), [(2, 5)]),
    "split_sizes": (lambda a: a.split([1, 3], 1), [(2, 4)]),
    "split_with_sizes": (lambda a: a.split_with_sizes([2, 1], -2), [(3, 2)]),
    "split_one_used": (lambda a: a.split(1, 0)[1] * 3, [(3, 2)]),
    "chunk": (lambda a: a.chunk(3, 0), [(5, 2)]),
    "tensor_split_sections": (lambda a: gt.tensor_split(a, 3, dim=-1), [(2, 7)]),
    "tensor_split_indices": (lambda a: gt.tensor_split(a, [1, 3], 1), [(2, 5)]),
    # Unsorted indices give overlapping pieces (and an empty one, left out for gradcheck).
    "tensor_split_overlap": (lambda a: tuple(p for p in gt.tensor_split(a, [3, 1], 1)
                                             if p.numel()), [(2, 5)]),
    "hsplit": (lambda a: gt.hsplit(a, 2), [(2, 4)]),
    "vsplit": (lambda a: gt.vsplit(a, [1]), [(3, 4)]),
    "dsplit": (lambda a: gt.dsplit(a, 2), [(2, 2, 4)]),
    "flip": (lambda a: a.flip(0, -1), [(3, 4)]),
    "flip_list": (lambda a: gt.flip(a, [1]), [(2, 3, 2)]),
    "fliplr": (gt.fliplr, [(3, 4)]),
    "flipud": (gt.flipud, [(3, 4)]),
    "roll": (lambda a: a.roll((1, -2), (0, -1)), [(3, 4)]),
    "roll_flat": (lambda a: a.roll(5), [(3, 4)]),
    "rot90": (lambda a: a.rot90(1, [0, 1]), [(3, 4)]),
    "rot90_2": (lambda a: a.rot90(2, [-1, 0]), [(3, 4)]),
    "rot90_3": (lambda a: a.rot90(-1, [1, 0]), [(3, 4)]),
    "tile": (lambda a: a.tile((2, 1, 2)), [(3, 2)]),
    "tile_short": (lambda a: a.tile((2,)), [(2, 3)]),
    "repeat": (lambda a: a.repeat(2, 1, 3), [(3, 2)]),
    "repeat_0d": (lambda a: a.repeat(3), [()]),
    "repeat_interleave": (lambda a: a.repeat_interleave(2, dim=-1), [(3, 2)]),
    "repeat_interleave_flat": (lambda a: a.repeat_interleave(3), [(3, 2)]),
    "repeat_interleave_tensor": (lambda a: a.repeat_interleave(
        gt.tensor([1, 0, 3], device=a.device), dim=0), [(3, 2)]),
    "tril": (lambda a: a.tril(-1), [(3, 4)]),
    "triu": (lambda a: a.triu(1), [(2, 3, 4)]),
    "diag_of_vector": (lambda a: gt.diag(a, 1), [(3,)]),
    "diag_of_matrix": (lambda a: gt.diag(a, -1), [(3, 4)]),
    "diag_embed": (lambda a: gt.diag_embed(a, 1, 0, -1), [(2, 3)]),
    "diagflat": (gt.diagflat, [(2, 2)]),
    "pad_constant": (lambda a: gt.pad(a, (1, -1, 2, 0), value=3.0), [(3, 4)]),
    "pad_constant_3d": (lambda a: gt.pad(a, (1, 1, 0, 2, 1, 0)), [(1, 2, 2)]),
    "pad_reflect": (lambda a: gt.pad(a, (2, 1), "reflect"), [(2, 4)]),
    "pad_reflect_2d": (lambda a: gt.pad(a, (1, 1, 2, 1), "reflect"), [(1, 3, 4)]),
    "pad_replicate": (lambda a: gt.pad(a, (2, 1, 1, 0), "replicate"), [(1, 2, 3)]),
    "pad_circular": (lambda a: gt.pad(a, (2, -1), "circular"), [(2, 4)]),
    "pad_circular_3d": (lambda a: gt.pad(a, (1, 1, 1, 0, 0, 1), "circular"), [(1, 2, 2, 2)]),
    "meshgrid_ij": (lambda a, b: gt.meshgrid(a, b, indexing="ij"), [(3,), (2,)]),
    "meshgrid_xy": (lambda a, b, c: gt.meshgrid([a, b, c], indexing="xy"), [(3,), (2,), ()]),
    "broadcast_tensors": (lambda a, b: gt.broadcast_tensors(a, b), [(3, 1), (2,)]),
    "cartesian_prod": (lambda a, b: gt.cartesian_prod(a, b), [(3,), (2,)]),
    "sort": (values_of(lambda a: a.sort(-1, descending=True)), [(3, 4)]),
    "sort_dim0": (lambda a: gt.sort(a, 0).values, [(3, 4)]),
    "sort_0d": (lambda a: a.sort().values, [()]),
    "msort": (gt.msort, [(3, 4)]),
    "topk": (values_of(lambda a: a.topk(2, 0)), [(3, 4)]),
    "topk_smallest": (lambda a: a.topk(3, -1, largest=False).values, [(3, 4)]),
    "kthvalue": (values_of(lambda a: a.kthvalue(2, 1)), [(3, 4)]),
    "kthvalue_keepdim": (lambda a: a.kthvalue(3, -2, keepdim=True).values, [(3, 4)]),
}


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_shape_op_gradients(name: str, strided: bool, device: str) -> None:
    fn, shapes = OPS[name]
    # Second order once per op (contiguous); strided inputs change the first-order path.
    check(fn, *[leaf(s, device, seed=i, strided=strided) for i, s in enumerate(shapes)],
          second_order=not strided)


def test_cat_where_only_some_inputs_require_grad(device: str) -> None:
    a, c = leaf((2, 3), device), leaf((2, 1), device, seed=2)
    b = gt.ones(2, 2, dtype=gt.float64, device=device)
    y = gt.cat([a, b, c], 1)
    assert y.requires_grad and type(y.grad_fn).__name__ == "CatBackward0"
    w = gt.arange(12, dtype=gt.float64, device=device).reshape(2, 6)
    (y * w).sum().backward()
    assert_close(a.grad, w[:, :3].cpu().numpy())
    assert_close(c.grad, w[:, 5:].cpu().numpy())
    assert b.grad is None and not b.requires_grad
    check(lambda a, c: gt.cat([a, b, c, b], -1), a.detach().requires_grad_(),
          c.detach().requires_grad_())


def test_cat_promotes_and_casts_gradients_back(device: str) -> None:
    a = gt.ones(2, dtype=gt.float32, device=device, requires_grad=True)
    b = gt.ones(3, dtype=gt.float64, device=device, requires_grad=True)
    y = gt.cat([a, b])
    assert y.dtype is gt.float64
    (y * gt.arange(5, dtype=gt.float64, device=device)).sum().backward()
    assert a.grad.dtype is gt.float32 and b.grad.dtype is gt.float64
    assert_close(a.grad, np.array([0, 1], np.float32))
    assert_close(b.grad, np.array([2.0, 3, 4]))


def test_split_outputs_share_one_node(device: str) -> None:
    a, b, c = leaf((6, 2), device).split(2)
    assert a.grad_fn is b.grad_fn is c.grad_fn
    assert type(a.grad_fn).__name__ == "SplitWithSizesBackward0"
    assert [a._output_nr, b._output_nr, c._output_nr] == [0, 1, 2]


@pytest.mark.parametrize("op", ["sort", "topk", "kthvalue"])
def test_indices_output_is_not_differentiable(op: str, device: str) -> None:
    x = leaf((3, 4), device)
    args = {"sort": (), "topk": (2,), "kthvalue": (2,)}[op]
    values, indices = getattr(x, op)(*args)
    assert values.requires_grad and values.grad_fn is not None
    assert not indices.requires_grad and indices.grad_fn is None
    assert indices.dtype is gt.int64


@pytest.mark.parametrize("op", ["sort", "topk", "kthvalue", "msort"])
def test_sorting_gradients_match_torch(op: str, device: str) -> None:
    v = np.random.default_rng(3).permutation(20).reshape(4, 5) * 0.5
    x = gt.tensor(v, device=device).requires_grad_()
    tx = torch.tensor(v, requires_grad=True)
    w = np.random.default_rng(4).uniform(-1, 1, 20)
    run = {"sort": lambda t: t.sort(0, descending=True)[0],
           "topk": lambda t: t.topk(3, 1)[0],
           "kthvalue": lambda t: t.kthvalue(2, 0, keepdim=True)[0],
           "msort": lambda t: t.msort()}[op]
    for t, weight in ((x, gt.tensor(w, device=device)), (tx, torch.tensor(w))):
        y = run(t)
        (y * weight[:y.numel()].reshape(y.shape)).sum().backward()
    assert_close(x.grad, tx.grad)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_gradients_match_torch(mode: str, device: str) -> None:
    v = np.random.default_rng(5).uniform(-1, 1, (2, 3, 4))
    pads = (2, 1, 1, -1) if mode != "reflect" else (2, 1, 1, 2)
    x = gt.tensor(v, device=device).requires_grad_()
    tx = torch.tensor(v, requires_grad=True)
    y = gt.pad(x, pads, mode)
    ty = torch.nn.functional.pad(tx, pads, mode)
    w = np.random.default_rng(6).uniform(-1, 1, tuple(ty.shape))
    (y * gt.tensor(w, device=device)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    assert_close(x.grad, tx.grad)


def test_repeat_interleave_gradient_matches_torch(device: str) -> None:
    v = np.random.default_rng(7).uniform(-1, 1, (3, 2))
    x = gt.tensor(v, device=device).requires_grad_()
    tx = torch.tensor(v, requires_grad=True)
    (gt.repeat_interleave(x, gt.tensor([2, 0, 1], device=device), dim=0) ** 2).sum().backward()
    (torch.repeat_interleave(tx, torch.tensor([2, 0, 1]), dim=0) ** 2).sum().backward()
    assert_close(x.grad, tx.grad)


def test_in_place_triangles_on_a_non_leaf(device: str) -> None:
    check(lambda a: (a * 1).tril_(-1) + (a * 2).triu_(1), leaf((3, 3), device))


# -- ops without a derivative ------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: x.argsort(),
    lambda x: gt.nonzero(x),
    lambda x: gt.argwhere(x),
    lambda x: gt.searchsorted(gt.sort(x.detach().reshape(-1)).values, x),
    lambda x: gt.bucketize(x, gt.tensor([-1.0, 0.0, 1.0], dtype=gt.float64, device=x.device)),
], ids=["argsort", "nonzero", "argwhere", "searchsorted", "bucketize"])
def test_non_differentiable_results_do_not_require_grad(fn: Callable, device: str) -> None:
    out = fn(leaf((3, 4), device))
    assert not out.requires_grad and out.grad_fn is None


@pytest.mark.parametrize("fn,name", [
    (lambda x: gt.unique(x), "unique"),
    (lambda x: gt.unique_consecutive(x, return_counts=True)[0], "unique_consecutive"),
], ids=["unique", "unique_consecutive"])
def test_backward_through_unique_is_not_implemented(fn: Callable, name: str) -> None:
    out = fn(leaf((3, 4), "cpu"))
    assert out.requires_grad  # as in PyTorch: the error comes when backward reaches it
    with pytest.raises(RuntimeError, match=f"the derivative for '{name}' is not implemented"):
        out.sum().backward()


def test_scatter_with_reduce_has_no_derivative() -> None:
    x = leaf((2, 3), "cpu")
    y = x.scatter(0, gt.tensor([[1, 0, 1]]), 2.0, reduce="multiply")
    with pytest.raises(RuntimeError, match="derivative for 'scatter with reduce'"):
        y.sum().backward()
