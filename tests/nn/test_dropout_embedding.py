"""Dropout (statistics, reproducibility, gradients, channel-wise masks) and Embedding (parity
with PyTorch for the lookup and its gradient, padding_idx, max_norm, scale_grad_by_freq)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops import nn as nn_ops
from gputensor.nn.functional._dropout import dropout, dropout1d, dropout2d, dropout3d
from gputensor.nn.functional._sparse import embedding
from gputensor.nn.modules.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from gputensor.nn.modules.sparse import Embedding
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional


# == dropout ====================================================================================
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_statistics(device, p):
    gt.manual_seed(0)
    x = gt.ones(200, 100, device=device)
    out = dropout(x, p)
    vals = out.cpu().numpy()
    kept = vals != 0
    assert abs(1 - kept.mean() - p) < 0.02            # about p of the elements are dropped
    np.testing.assert_allclose(vals[kept], 1 / (1 - p), rtol=1e-6)
    assert abs(vals.mean() - 1) < 0.05               # the expectation is preserved


def test_dropout_reproducible_with_manual_seed(device):
    x = gt.randn(50, 20, device=device)
    gt.manual_seed(123)
    a = dropout(x, 0.4)
    gt.manual_seed(123)
    b = dropout(x, 0.4)
    c = dropout(x, 0.4)
    assert gt.equal(a, b)
    assert not gt.equal(b, c)


def test_dropout_backward_uses_the_saved_mask(device):
    gt.manual_seed(1)
    x = gt.tensor(random_array((30, 10), gt.float64), device=device).requires_grad_()
    out = dropout(x, 0.3)
    up = gt.tensor(random_array((30, 10), gt.float64, seed=5), device=device)
    (out * up).sum().backward()
    mask = (out.detach() != 0).to(gt.float64)
    assert_close(x.grad, (up * mask / 0.7).cpu().numpy(), atol=1e-12, rtol=1e-12)
    # gradcheck of the fused op itself, with a fixed mask
    m = (gt.rand(4, 3, dtype=gt.float64, device=device) > 0.5).to(gt.float64)
    a = gt.randn(4, 3, dtype=gt.float64, device=device).requires_grad_()
    assert gt.autograd.gradcheck(lambda a: nn_ops._masked_scale(a, m, 2.0), (a,))
    assert gt.autograd.gradgradcheck(lambda a: nn_ops._masked_scale(a, m, 2.0), (a,))


def test_dropout_eval_edge_probabilities_and_errors(device):
    x = gt.randn(5, 4, device=device)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    assert gt.equal(dropout(x, 1.0), gt.zeros(5, 4, device=device))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but "
                                         "got 1.5"):
        dropout(x, 1.5)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        Dropout(-0.1)
    m = Dropout(0.5)
    assert repr(m) == repr(torch.nn.Dropout(0.5))
    m.eval()
    assert m(x) is x


def test_dropout_inplace(device):
    gt.manual_seed(2)
    x = gt.ones(40, 30, device=device)
    out = dropout(x, 0.5, inplace=True)
    assert out is x
    assert set(np.unique(x.cpu().numpy())) <= {0.0, 2.0}
    leaf = gt.ones(10, 10, dtype=gt.float64, device=device).requires_grad_()
    y = leaf * 1.0
    dropout(y, 0.5, inplace=True).sum().backward()
    assert_close(leaf.grad, y.detach().cpu().numpy(), atol=0, rtol=0)


# lead: how many leading dims index the channels (2 with a batch dim, 1 without)
@pytest.mark.parametrize("fn,module,shape,lead", [(dropout1d, Dropout1d, (6, 8, 50), 2),
                                                  (dropout1d, Dropout1d, (8, 50), 1),
                                                  (dropout2d, Dropout2d, (6, 8, 5, 10), 2),
                                                  (dropout3d, Dropout3d, (6, 8, 2, 5, 5), 2),
                                                  (dropout3d, Dropout3d, (8, 2, 5, 5), 1)])
def test_channel_dropout_zeroes_whole_channels(device, fn, module, shape, lead):
    gt.manual_seed(3)
    x = gt.ones(shape, device=device)
    out = fn(x, 0.5)
    assert out.shape == shape
    vals = out.cpu().numpy().reshape(*shape[:lead], -1)
    assert (vals.min(-1) == vals.max(-1)).all()      # each channel all kept or all dropped
    assert 0 < (vals[..., 0] == 0).mean() < 1
    np.testing.assert_allclose(vals[vals != 0], 2.0)
    assert gt.equal(module(0.5).eval()(x), x)


def test_dropout2d_gradient_and_warnings(device):
    gt.manual_seed(4)
    x = gt.randn(4, 5, 3, 3, dtype=gt.float64, device=device).requires_grad_()
    out = dropout2d(x, 0.25)
    out.sum().backward()
    kept = (out.detach() != 0).to(gt.float64)
    assert_close(x.grad, (kept / 0.75).cpu().numpy(), atol=1e-12, rtol=1e-12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dropout2d(gt.randn(2, 3, 4, device=device), 0.5)
    assert any("channel-wise 1D dropout" in str(w.message) for w in caught)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        dropout1d(gt.randn(2, 3, 4, 5, device=device))
    assert repr(Dropout2d(0.3, inplace=True)) == repr(torch.nn.Dropout2d(0.3, inplace=True))


# == embedding ==================================================================================
def _embedding_pair(num, dim, device, dtype=gt.float32, seed=0):
    arr = random_array((num, dim), dtype, seed=seed)
    return (gt.tensor(arr, dtype=dtype, device=device).requires_grad_(),
            torch.from_numpy(arr.copy()).requires_grad_())


@pytest.mark.parametrize("idx_shape", [(7,), (3, 4), (2, 3, 2), ()])
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_parity(device, idx_shape, padding_idx, scale_grad_by_freq):
    w, tw = _embedding_pair(6, 4, device)
    idx = np.random.default_rng(1).integers(0, 6, idx_shape)
    if idx.size:
        idx.reshape(-1)[:3] = [2, 5, 2][:idx.size]    # repeats and the padding row
    i, ti = gt.tensor(idx, device=device), torch.from_numpy(idx)
    out = embedding(i, w, padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    t_out = TF.embedding(ti, tw, padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    assert_close(out, t_out.detach())
    up = random_array(tuple(t_out.shape), gt.float32, seed=2)
    (out * gt.tensor(up, device=device)).sum().backward()
    (t_out * torch.from_numpy(up)).sum().backward()
    assert_close(w.grad, tw.grad, atol=1e-6, rtol=1e-6)


def test_embedding_int32_indices_and_double_backward(device):
    w = gt.tensor(random_array((5, 3), gt.float64), device=device).requires_grad_()
    idx = gt.tensor([[0, 4, 4], [1, 0, 2]], dtype=gt.int32, device=device)
    assert gt.autograd.gradcheck(lambda w: embedding(idx, w), (w,))
    assert gt.autograd.gradgradcheck(lambda w: embedding(idx, w) ** 2, (w,))
    # With padding_idx the first derivative deliberately drops that row (so no gradcheck);
    # the derivative of the gradient with respect to the upstream gradient still checks out.
    assert gt.autograd.gradgradcheck(lambda w: embedding(idx, w, padding_idx=4) ** 2, (w,))


def test_embedding_max_norm(device):
    w, tw = _embedding_pair(6, 4, device)
    idx = np.array([[0, 1], [1, 3]])
    out = embedding(gt.tensor(idx, device=device), w, max_norm=1.0)
    t_out = TF.embedding(torch.from_numpy(idx), tw, max_norm=1.0)
    assert_close(out, t_out.detach(), atol=1e-6, rtol=1e-6)
    assert_close(w.detach(), tw.detach(), atol=1e-6, rtol=1e-6)   # rows renormalised in place
    out.sum().backward()
    t_out.sum().backward()
    assert_close(w.grad, tw.grad)


def test_embedding_errors():
    w = gt.randn(5, 3)
    with pytest.raises(IndexError, match="index out of range in self"):
        embedding(gt.tensor([5]), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        embedding(gt.tensor([-1]), w)
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar "
                                           "types: Long, Int"):
        embedding(gt.tensor([1.0]), w)
    with pytest.raises(RuntimeError, match="'weight' must be 2-D"):
        embedding(gt.tensor([1]), gt.randn(5))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        embedding(gt.tensor([1]), w, padding_idx=5)


def test_embedding_module(device):
    gt.manual_seed(0)
    m = Embedding(10, 4, padding_idx=-2, device=device)
    t = torch.nn.Embedding(10, 4, padding_idx=-2)
    assert m.padding_idx == 8 and repr(m) == repr(t)
    assert m.weight.shape == (10, 4) and m.weight.requires_grad
    assert gt.equal(m.weight[8], gt.zeros(4, device=device))
    w = m.weight.detach().cpu().numpy()
    assert abs(w.std() - 1) < 0.5                       # N(0, 1) initialisation
    m.load_state_dict({"weight": gt.tensor(t.weight.detach().numpy(), device=device)})
    idx = np.array([[1, 8, 3], [8, 8, 0]])
    out, t_out = m(gt.tensor(idx, device=device)), t(torch.from_numpy(idx))
    assert_close(out, t_out.detach())
    out.sum().backward()
    t_out.sum().backward()
    assert_close(m.weight.grad, t.weight.grad)
    assert list(m.state_dict()) == list(t.state_dict())
    assert repr(Embedding(3, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)) == \
        repr(torch.nn.Embedding(3, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True))


def test_embedding_from_pretrained(device):
    weights = gt.tensor([[1.0, 2.3, 3.0], [4.0, 5.1, 6.3]], device=device)
    m = Embedding.from_pretrained(weights)
    assert not m.weight.requires_grad
    assert_close(m(gt.tensor([1], device=device)), np.array([[4.0, 5.1, 6.3]], np.float32))
    trainable = Embedding.from_pretrained(weights, freeze=False, padding_idx=0)
    assert trainable.weight.requires_grad and trainable.padding_idx == 0
    with pytest.raises(AssertionError, match="Embeddings parameter is expected to be "
                                             "2-dimensional"):
        Embedding.from_pretrained(gt.zeros(3, device=device))
    with pytest.raises(AssertionError, match="Shape of weight does not match"):
        Embedding(3, 2, _weight=gt.zeros(2, 3, device=device))
