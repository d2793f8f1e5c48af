"""nn.Embedding(sparse=True) gradients and optim.SparseAdam trajectories against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt

from ._util import assert_same, np_of, torch

# PyTorch warns once that it skips its (slow) invariant checks; irrelevant here.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")


def _embeddings(device, **kwargs):
    w = np.random.default_rng(0).standard_normal((7, 3))
    g = gt.nn.Embedding(7, 3, sparse=True, device=device, dtype=gt.float64, **kwargs)
    t = torch.nn.Embedding(7, 3, sparse=True, dtype=torch.float64, **kwargs)
    with gt.no_grad():
        g.weight.copy_(gt.tensor(w, device=device))
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w))
    return g, t


@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 2}])
def test_embedding_sparse_grad(device, kwargs):
    g, t = _embeddings(device, **kwargs)
    idx = [[1, 2, 1], [6, 2, 0]]
    w = np.random.default_rng(1).uniform(-1, 1, size=(2, 3, 3))
    (g(gt.tensor(idx, device=device)) * gt.tensor(w, device=device)).sum().backward()
    (t(torch.tensor(idx)) * torch.tensor(w)).sum().backward()
    assert g.weight.grad.is_sparse
    assert g.weight.grad.sparse_dim() == 1 and g.weight.grad.dense_dim() == 1
    assert g.weight.grad._nnz() == t.weight.grad._nnz()
    assert_same(g.weight.grad, t.weight.grad)
    # a second backward accumulates sparse + sparse
    g(gt.tensor([3], device=device)).sum().backward()
    t(torch.tensor([3])).sum().backward()
    assert_same(g.weight.grad, t.weight.grad)


@pytest.mark.parametrize("maximize", [False, True])
def test_sparse_adam_matches_torch(device, maximize):
    g, t = _embeddings(device)
    og = gt.optim.SparseAdam(g.parameters(), lr=0.05, maximize=maximize)
    ot = torch.optim.SparseAdam(t.parameters(), lr=0.05, maximize=maximize)
    batches = [[1, 4, 1], [0, 4], [6, 6, 6, 2], [1]]
    for step, batch in enumerate(batches):
        target = np.full((len(batch), 3), 0.5 * step)
        for model, opt, lib in ((g, og, gt), (t, ot, torch)):
            opt.zero_grad()
            x = lib.tensor(batch)
            if lib is gt:
                x = x.to(device)
            out = model(x)
            tg = lib.tensor(target) if lib is torch else lib.tensor(target, device=device)
            ((out - tg) ** 2).sum().backward()
            opt.step()
        np.testing.assert_allclose(np_of(g.weight), t.weight.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    np.testing.assert_allclose(np_of(og.state[g.weight]["exp_avg_sq"]),
                               ot.state[t.weight]["exp_avg_sq"].numpy(), rtol=1e-12, atol=1e-14)
    assert og.state[g.weight]["step"] == ot.state[t.weight]["step"] == len(batches)


def test_zero_grad_keeps_sparse_grad(device):
    g, t = _embeddings(device)
    og = gt.optim.SparseAdam(g.parameters(), lr=0.1)
    ot = torch.optim.SparseAdam(t.parameters(), lr=0.1)
    for model, opt, x in ((g, og, gt.tensor([2, 5, 2], device=device)),
                          (t, ot, torch.tensor([2, 5, 2]))):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        model(x[:1]).sum().backward()
        opt.step()
    assert g.weight.grad.is_sparse and g.weight.grad._nnz() == 1
    np.testing.assert_allclose(np_of(g.weight), t.weight.detach().numpy(), rtol=1e-12)


def test_embedding_scale_grad_by_freq_has_no_sparse_form(device):
    g, t = _embeddings(device, scale_grad_by_freq=True)
    with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
        g(gt.tensor([1, 1], device=device)).sum().backward()
    with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
        t(torch.tensor([1, 1])).sum().backward()


def test_dense_optimizers_reject_sparse_grads(device):
    g, _ = _embeddings(device)
    g(gt.tensor([1], device=device)).sum().backward()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        gt.optim.Adam(g.parameters()).step()
    p = gt.zeros(2, requires_grad=True, device=device)
    p.sum().backward()
    with pytest.raises(RuntimeError, match="dense gradients"):
        gt.optim.SparseAdam([p]).step()


def test_sparse_adam_rejects_sparse_params():
    s = gt.sparse_coo_tensor([[0]], [1.0], (2,), requires_grad=True)
    with pytest.raises(ValueError, match="requires dense parameter tensors"):
        gt.optim.SparseAdam([s])


@pytest.mark.parametrize("maximize", [False, True])
def test_plain_sgd_takes_sparse_grads_like_torch(device, maximize):
    g, t = _embeddings(device)
    og = gt.optim.SGD(g.parameters(), lr=0.3, maximize=maximize)
    ot = torch.optim.SGD(t.parameters(), lr=0.3, maximize=maximize)
    for batch in ([1, 4, 1], [6, 1]):
        for model, opt, x in ((g, og, gt.tensor(batch, device=device)),
                              (t, ot, torch.tensor(batch))):
            opt.zero_grad()
            (model(x) ** 2).sum().backward()
            opt.step()
    assert g.weight.grad.is_sparse
    np.testing.assert_allclose(np_of(g.weight), t.weight.detach().numpy(), rtol=1e-12)


def test_sgd_momentum_refuses_sparse_grads(device):
    g, _ = _embeddings(device)
    g(gt.tensor([1], device=device)).sum().backward()
    with pytest.raises(RuntimeError, match="momentum=0.9 .* does not support sparse gradients"):
        gt.optim.SGD(g.parameters(), lr=0.1, momentum=0.9).step()


def test_dense_grad_joining_a_sparse_grad_densifies_it(device):
    g, t = _embeddings(device)
    for model, x in ((g, gt.tensor([2], device=device)), (t, torch.tensor([2]))):
        model(x).sum().backward()
        (model.weight * 2).sum().backward()
    assert not g.weight.grad.is_sparse
    np.testing.assert_allclose(np_of(g.weight.grad), t.weight.grad.to_dense().numpy())
