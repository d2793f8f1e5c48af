"""Sparse ops forward and backward against torch.sparse: mm/addmm, sum, arithmetic, transpose,
softmax, index_select (uncoalesced inputs with duplicates, hybrid and empty tensors)."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

from ._util import assert_same, assert_same_coalesced, dense_pair, np_of, pair, torch

# PyTorch warns once that it skips its (slow) invariant checks; irrelevant here.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")


def _backward(out_g, out_t, seed=5):
    """Backward both outputs with the same random upstream gradient (densified outputs)."""
    dg = out_g.to_dense() if out_g.is_sparse else out_g
    dt = out_t.to_dense() if out_t.is_sparse else out_t
    w = np.random.default_rng(seed).uniform(-1, 1, size=tuple(dt.shape))
    (dg * gt.tensor(w, dtype=dg.dtype, device=dg.device)).sum().backward()
    (dt * torch.tensor(w, dtype=dt.dtype)).sum().backward()


@pytest.mark.parametrize("m,k,n,nnz", [(5, 4, 3, 9), (6, 7, 1, 3), (4, 4, 5, 0), (1, 3, 2, 2)])
def test_sparse_mm_forward_backward(device, m, k, n, nnz):
    sg, st = pair((m, k), 2, nnz, device, requires_grad=True)
    dg, dt = dense_pair((k, n), device, requires_grad=True)
    og, ot = gt.sparse.mm(sg, dg), torch.sparse.mm(st, dt)
    assert_same(og, ot)
    _backward(og, ot)
    assert sg.grad.is_sparse and sg.grad.is_coalesced()
    assert_same(sg.grad, st.grad)
    assert_same_coalesced(sg.grad, st.grad)
    assert_same(dg.grad, dt.grad)


@pytest.mark.parametrize("dtype,tol", [(gt.float32, 1e-5), (gt.float16, 1e-2),
                                       (gt.bfloat16, 5e-2)])
def test_sparse_mm_dtypes(device, dtype, tol):
    sg, st = pair((6, 5), 2, 12, device, dtype=dtype)
    dg, dt = dense_pair((5, 4), device, dtype=dtype)
    assert_same(gt.sparse.mm(sg, dg), torch.sparse.mm(st.float(), dt.float()).to(st.dtype),
                rtol=tol, atol=tol)


def test_mm_routes(device):
    sg, st = pair((5, 4), 2, 8, device)
    dg, dt = dense_pair((4, 3), device)
    ref = torch.sparse.mm(st, dt)
    for out in (gt.mm(sg, dg), gt.matmul(sg, dg), sg @ dg, sg.mm(dg), sg.matmul(dg)):
        assert_same(out, ref)
    vg, vt = dense_pair((4,), device)
    assert_same(gt.matmul(sg, vg), torch.matmul(st.to_dense(), vt))
    lg, lt = dense_pair((2, 5), device)
    assert_same(gt.mm(lg, sg), lt @ st.to_dense())


def test_mm_errors(device):
    sg, _ = pair((5, 4), 2, 8, device)
    dg, _ = dense_pair((3, 3), device)
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(5x4 and 3x3\)"):
        gt.sparse.mm(sg, dg)
    with pytest.raises(RuntimeError, match="same dtype"):
        gt.sparse.mm(sg, gt.ones(4, 2, device=device))
    hybrid, _ = pair((5, 4, 2), 2, 3, device)
    with pytest.raises(RuntimeError, match="2 sparse dims"):
        gt.sparse.mm(hybrid, dg)
    with pytest.raises(RuntimeError, match="sparse @ sparse"):
        gt.sparse.mm(sg, sg.t())


@pytest.mark.parametrize("beta,alpha,bias_shape", [(1, 1, (5, 3)), (0.5, -2.0, (3,)),
                                                   (0, 1.5, (5, 3))])
def test_sparse_addmm(device, beta, alpha, bias_shape):
    sg, st = pair((5, 4), 2, 7, device, requires_grad=True)
    dg, dt = dense_pair((4, 3), device, requires_grad=True)
    bg, bt = dense_pair(bias_shape, device, seed=3, requires_grad=True)
    og = gt.sparse.addmm(bg, sg, dg, beta=beta, alpha=alpha)
    ot = torch.sparse.addmm(bt, st, dt, beta=beta, alpha=alpha)
    assert_same(og, ot)
    assert_same(gt.addmm(bg, sg, dg, beta=beta, alpha=alpha), ot)
    _backward(og, ot)
    assert_same(sg.grad, st.grad)
    assert_same(dg.grad, dt.grad)
    assert_same(bg.grad, bt.grad)


def test_addmm_nan_input_ignored_with_beta_zero(device):
    sg, st = pair((3, 4), 2, 5, device)
    dg, dt = dense_pair((4, 2), device)
    nan = gt.full((3, 2), float("nan"), dtype=gt.float64, device=device)
    assert_same(gt.sparse.addmm(nan, sg, dg, beta=0), torch.sparse.mm(st, dt))


@pytest.mark.parametrize("shape,sparse_dim,dim", [
    ((4, 5), 2, None), ((4, 5), 2, 0), ((4, 5), 2, 1), ((4, 5), 2, (0, 1)),
    ((3, 4, 2), 2, 2), ((3, 4, 2), 2, (0, 2)), ((3, 4, 2), 2, (0, 1)), ((3, 4, 2), 1, 0),
    ((3, 4, 2, 2), 2, (1, 3)), ((4, 5), 2, -1)])
def test_sparse_sum(device, shape, sparse_dim, dim):
    sg, st = pair(shape, sparse_dim, 9, device, requires_grad=True)
    og = gt.sparse.sum(sg) if dim is None else gt.sparse.sum(sg, dim)
    ot = torch.sparse.sum(st) if dim is None else torch.sparse.sum(st, dim)
    assert_same(og, ot)
    _backward(og, ot)
    assert_same(sg.grad, st.grad)


def test_sparse_sum_empty_and_method(device):
    sg, st = pair((3, 4), 2, 0, device)
    assert np_of(gt.sparse.sum(sg)).item() == 0.0
    assert_same(gt.sparse.sum(sg, 1), torch.sparse.sum(st, 1))
    sg, st = pair((3, 4), 2, 6, device)
    assert_same(sg.sum(), torch.sparse.sum(st))
    assert_same(sg.sum(0), torch.sparse.sum(st, 0))


@pytest.mark.parametrize("shape,sparse_dim", [((4, 5), 2), ((3, 4, 2), 2), ((3, 4, 2), 1)])
def test_add_sub(device, shape, sparse_dim):
    ag, at = pair(shape, sparse_dim, 7, device, seed=1, requires_grad=True)
    bg, bt = pair(shape, sparse_dim, 5, device, seed=2, requires_grad=True)
    og, ot = ag + bg, at + bt
    assert og.is_sparse
    assert_same(og, ot)
    assert_same(ag - bg, at - bt)
    assert_same(gt.add(ag, bg, alpha=2.5), torch.add(at, bt, alpha=2.5))
    cg, ct = ag.coalesce() + bg.coalesce(), at.coalesce() + bt.coalesce()
    assert cg.is_coalesced() == ct.is_coalesced()
    _backward(og, ot)
    assert_same(ag.grad, at.grad)
    assert_same(bg.grad, bt.grad)


def test_dense_sparse_add(device):
    sg, st = pair((4, 5), 2, 7, device)
    dg, dt = dense_pair((4, 5), device)
    assert_same(dg + sg, dt + st)
    assert_same(sg + dg, dt + st)   # PyTorch refuses add(sparse, dense); we give the sum
    assert_same(gt.add(dg, sg, alpha=-2), torch.add(dt, st, alpha=-2))
    d2 = dg.clone()
    d2 += sg
    assert_same(d2, dt + st)
    with pytest.raises(RuntimeError, match="sparse"):
        sg.add_(dg)
    with pytest.raises(RuntimeError, match="same size"):
        sg + gt.ones(4, 6, dtype=gt.float64, device=device)


def test_mul_div_neg(device):
    sg, st = pair((3, 4, 2), 2, 8, device, requires_grad=True)
    for og, ot in ((sg * 2.5, st * 2.5), (3 * sg, 3 * st), (sg / 4, st / 4), (-sg, -st),
                   (sg * gt.tensor(2.0, dtype=gt.float64), st * torch.tensor(2.0))):
        assert og.is_sparse
        assert_same(og, ot)
    og, ot = (sg * 2.5) / 2, (st * 2.5) / 2
    _backward(og, ot)
    assert_same(sg.grad, st.grad)
    with pytest.raises(RuntimeError, match="divided by a number"):
        sg / sg


def test_mul_sparse_dense_and_sparse_sparse(device):
    ag, at = pair((4, 5), 2, 9, device, seed=1, requires_grad=True)
    dg, dt = dense_pair((4, 5), device, requires_grad=True)
    og, ot = ag * dg, at * dt
    assert og.is_sparse
    assert_same(og, ot)
    assert_same(dg * ag, dt * at)
    _backward(og, ot)
    assert_same(ag.grad, at.grad)
    assert_same(dg.grad.to_dense(), dt.grad.to_dense())
    bg, bt = pair((4, 5), 2, 9, device, seed=2)
    assert_same(ag.detach() * bg, at.detach() * bt)


def test_inplace_on_sparse(device):
    sg, st = pair((4, 5), 2, 6, device)
    bg, bt = pair((4, 5), 2, 4, device, seed=3)
    v = sg._version
    sg.mul_(2)
    st.mul_(2)
    assert sg._version > v
    sg.add_(bg)
    st.add_(bt)
    assert_same(sg, st)
    leaf, leaf_t = pair((4, 5), 2, 6, device, requires_grad=True)
    y = leaf * 1.0
    y.mul_(3)
    y.to_dense().sum().backward()
    (leaf_t * 3.0).to_dense().sum().backward()
    assert_same(leaf.grad, leaf_t.grad)


@pytest.mark.parametrize("shape,sparse_dim,dims", [((4, 5), 2, (0, 1)), ((3, 4, 2, 3), 2, (2, 3)),
                                                   ((3, 4, 5), 3, (0, 2))])
def test_transpose(device, shape, sparse_dim, dims):
    sg, st = pair(shape, sparse_dim, 7, device, requires_grad=True)
    # torch.sparse only swaps sparse dims; the dense transpose of to_dense() is the reference.
    og, ot = sg.transpose(*dims), st.to_dense().transpose(*dims)
    assert og.is_sparse
    np.testing.assert_allclose(np_of(og), ot.detach().numpy(), rtol=1e-12)
    w = np.random.default_rng(5).uniform(-1, 1, size=tuple(ot.shape))
    (og.to_dense() * gt.tensor(w, device=device)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    assert_same(sg.grad, st.grad)
    if len(shape) == 2:
        assert_same(sg.detach().t(), st.detach().t())


def test_transpose_mixed_dims_error(device):
    sg, _ = pair((3, 4, 2), 2, 3, device)
    with pytest.raises(RuntimeError, match="sparse dim with a dense dim"):
        sg.transpose(0, 2)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,sparse_dim,dim", [((4, 5), 2, 1), ((4, 5), 2, 0),
                                                  ((3, 4, 2), 2, 1), ((3, 4, 2), 2, 2),
                                                  ((3, 4, 5), 3, 2), ((6,), 1, 0)])
def test_softmax(device, log, shape, sparse_dim, dim):
    sg, st = pair(shape, sparse_dim, 10, device, requires_grad=True)
    fg = gt.sparse.log_softmax if log else gt.sparse.softmax
    ft = torch.sparse.log_softmax if log else torch.sparse.softmax
    og, ot = fg(sg, dim), ft(st, dim)
    assert og.is_sparse
    assert_same_coalesced(og, ot)
    w = np.random.default_rng(4).uniform(-1, 1, size=(og._nnz(), *shape[sparse_dim:]))
    (og.values() * gt.tensor(w, device=device)).sum().backward()
    (ot.coalesce().values() * torch.tensor(w)).sum().backward()
    assert_same_coalesced(sg.grad, st.grad)


def test_softmax_empty(device):
    sg, st = pair((3, 4), 2, 0, device)
    assert gt.sparse.softmax(sg, 1)._nnz() == 0


@pytest.mark.parametrize("shape,sparse_dim,dim,index", [
    ((4, 5), 2, 1, [2, 2, 0, 4]), ((4, 5), 2, 0, [3, 1]), ((3, 4, 2), 2, 2, [1, 1, 0]),
    ((3, 4, 2), 1, 0, [2, 0]), ((4, 5), 2, 1, [])])
def test_index_select(device, shape, sparse_dim, dim, index):
    sg, st = pair(shape, sparse_dim, 8, device, requires_grad=True)
    ig = gt.tensor(index, dtype=gt.int64, device=device)
    it = torch.tensor(index, dtype=torch.long)
    og, ot = sg.index_select(dim, ig), st.index_select(dim, it)
    assert_same(og, ot)
    if not index:
        return
    # torch.sparse has no index_select backward: differentiate its dense equivalent instead.
    _backward(og, st.to_dense().index_select(dim, it))
    assert_same(sg.grad, st.grad)


def test_index_select_errors(device):
    sg, _ = pair((4, 5), 2, 8, device)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1"):
        sg.index_select(1, gt.tensor([5], device=device))
    with pytest.raises(IndexError, match="index -1"):
        sg.index_select(0, gt.tensor([-1], device=device))


def test_cost_models_count_stored_entries(device):
    from gputensor.kernels.registry import OPS
    sg, _ = pair((1000, 800), 2, 6, device, duplicates=False)
    dg, _ = dense_pair((800, 4), device)
    out = gt.sparse.mm(sg, dg)
    moved, flops = OPS["_sparse_mm"].cost([sg, dg], out)
    assert flops == 2 * 6 * 4
    assert moved == sg.nbytes + (800 * 4 + 1000 * 4) * 8   # not the dense 1000 x 800 size
    moved, _ = OPS["_sparse_to_dense"].cost([sg], sg.to_dense())
    assert moved == sg.nbytes + 1000 * 800 * 8


def test_sparse_mask(device):
    mg, mt = pair((4, 3, 2), 2, 6, device)
    dg, dt = dense_pair((4, 3, 2), device, requires_grad=True)
    og, ot = dg.sparse_mask(mg), dt.sparse_mask(mt.coalesce())
    assert og.is_sparse and og.is_coalesced()
    assert_same_coalesced(og, ot)
    w = np.random.default_rng(6).uniform(-1, 1, size=(og._nnz(), 2))
    (og.values() * gt.tensor(w, device=device)).sum().backward()
    (ot.values() * torch.tensor(w)).sum().backward()
    assert_same(dg.grad, dt.grad)
    with pytest.raises(RuntimeError, match="same size"):
        dg.sparse_mask(pair((4, 3), 2, 2, device)[0])
