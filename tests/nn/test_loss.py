"""Losses: forward and backward parity with PyTorch for every functional and module (all
reductions, weights, ignore_index, label smoothing, probability targets, pos_weight, 4-d
inputs), gradcheck/gradgradcheck of the fused loss ops, and PyTorch's errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops import nn as nn_ops
from gputensor.nn.functional import _loss as L
from gputensor.nn.modules import loss as M
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional

REDUCTIONS = ["none", "mean", "sum"]
DTYPES = [gt.float32, gt.float64]


def _tol(dtype):
    return (2e-5, 2e-5) if dtype is gt.float32 else (1e-10, 1e-10)


def _pair(shape, dtype=gt.float64, device="cpu", seed=0, low=-2.0, high=2.0, grad=True):
    arr = random_array(shape, dtype, low, high, seed)
    g = gt.tensor(arr, dtype=dtype, device=device)
    t = torch.from_numpy(arr.copy())
    if grad:
        g.requires_grad_()
        t.requires_grad_()
    return g, t


def _index_pair(shape, classes, device, seed=0, ignore=None):
    idx = np.random.default_rng(seed).integers(0, classes, shape)
    if ignore is not None and idx.size:
        idx.reshape(-1)[::3] = ignore
    return gt.tensor(idx, device=device), torch.from_numpy(idx)


def _check(g_out, t_out, grads, device, dtype=gt.float64, tol=None):
    """Compare outputs, then backpropagate one random upstream gradient and compare the
    gradients of every (gputensor, torch) leaf pair."""
    atol, rtol = tol or _tol(dtype)
    assert_close(g_out, t_out.detach(), atol=atol, rtol=rtol)
    up = random_array(tuple(t_out.shape), gt.float64, seed=42)
    (g_out * gt.tensor(up, dtype=g_out.dtype, device=device)).sum().backward()
    (t_out * torch.from_numpy(up).to(t_out.dtype)).sum().backward()
    for g, t in grads:
        assert_close(g.grad, t.grad, atol=atol, rtol=rtol)


# == regression losses ==========================================================================
_REGRESSION = [(L.mse_loss, TF.mse_loss, {}), (L.l1_loss, TF.l1_loss, {}),
               (L.smooth_l1_loss, TF.smooth_l1_loss, {"beta": 0.7}),
               (L.smooth_l1_loss, TF.smooth_l1_loss, {"beta": 0.0}),
               (L.huber_loss, TF.huber_loss, {"delta": 0.6})]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fn,tfn,kwargs", _REGRESSION)
def test_regression_losses(device, dtype, reduction, fn, tfn, kwargs):
    x, tx = _pair((4, 3, 5), dtype, device)
    y, ty = _pair((4, 3, 5), dtype, device, seed=1)
    _check(fn(x, y, reduction=reduction, **kwargs), tfn(tx, ty, reduction=reduction, **kwargs),
           [(x, tx), (y, ty)], device, dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fn,tfn", [(L.mse_loss, TF.mse_loss), (L.l1_loss, TF.l1_loss),
                                    (L.huber_loss, TF.huber_loss)])
def test_regression_losses_weighted(device, reduction, fn, tfn):
    x, tx = _pair((6, 4), device=device)
    y, ty = _pair((6, 4), device=device, seed=1)
    w, tw = _pair((6, 4), device=device, seed=2, low=0.1, high=2.0, grad=False)
    _check(fn(x, y, reduction=reduction, weight=w), tfn(tx, ty, reduction=reduction, weight=tw),
           [(x, tx), (y, ty)], device)
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        fn(x, y, weight=w[:3])


def test_regression_broadcast_warning_and_errors(device):
    x, tx = _pair((4, 3), device=device)
    y, ty = _pair((3,), device=device, seed=1)
    with pytest.warns(UserWarning, match="Using a target size"):
        out = L.mse_loss(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(out, TF.mse_loss(tx, ty), [(x, tx), (y, ty)], device)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(5\) must match the size of "
                                           r"tensor b \(4\)"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L.mse_loss(gt.randn(3, 5, device=device), gt.randn(3, 4, device=device))
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        L.l1_loss(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values "
                                           "for beta."):
        L.smooth_l1_loss(x, x, beta=-1)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values "
                                           "for delta."):
        L.huber_loss(x, x, delta=0)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, "
                                         "please use reduction='sum' instead."):
        out = L.mse_loss(x, x * 2, size_average=False)
    assert_close(out, TF.mse_loss(tx, tx * 2, reduction="sum").detach())


# == nll_loss and cross_entropy =================================================================
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 5), (5,), (3, 5, 4), (2, 5, 3, 2)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 2])
def test_nll_loss(device, reduction, shape, weighted, ignore):
    x, tx = _pair(shape, device=device)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t, tt = _index_pair(tshape, 5, device, ignore=ignore)
    w, tw = _pair((5,), device=device, seed=3, low=0.2, high=2.0, grad=False) if weighted \
        else (None, None)
    kw = {"ignore_index": ignore} if ignore is not None else {}
    _check(L.nll_loss(x, t, w, reduction=reduction, **kw),
           TF.nll_loss(tx, tt, tw, reduction=reduction, **kw), [(x, tx)], device)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(8, 5), (5,), (2, 5, 3, 4)])
@pytest.mark.parametrize("smoothing", [0.0, 0.15])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(device, reduction, shape, smoothing, weighted,
                                     dtype=gt.float64):
    x, tx = _pair(shape, dtype, device)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t, tt = _index_pair(tshape, 5, device, ignore=-100 if len(shape) > 1 else None)
    w, tw = _pair((5,), dtype, device, seed=3, low=0.2, high=2.0, grad=False) if weighted \
        else (None, None)
    kw = {"reduction": reduction, "label_smoothing": smoothing}
    _check(L.cross_entropy(x, t, w, **kw), TF.cross_entropy(tx, tt, tw, **kw), [(x, tx)],
           device, dtype)


def test_cross_entropy_float32(device):
    test_cross_entropy_class_indices(device, "mean", (16, 5), 0.1, True, dtype=gt.float32)
    x, tx = _pair((64, 10), gt.float32, device)
    t, tt = _index_pair((64,), 10, device)
    _check(L.cross_entropy(x, t), TF.cross_entropy(tx, tt), [(x, tx)], device, gt.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 4), (4,), (2, 4, 3, 2)])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probabilities(device, reduction, shape, smoothing, weighted):
    x, tx = _pair(shape, device=device)
    class_dim = 0 if len(shape) == 1 else 1
    probs = torch.softmax(torch.from_numpy(random_array(shape, gt.float64, seed=7)), class_dim)
    p, tp = gt.tensor(probs.numpy(), device=device).requires_grad_(), probs.requires_grad_()
    w, tw = _pair((4,), device=device, seed=3, low=0.2, high=2.0, grad=False) if weighted \
        else (None, None)
    kw = {"reduction": reduction, "label_smoothing": smoothing}
    _check(L.cross_entropy(x, p, w, **kw), TF.cross_entropy(tx, tp, tw, **kw),
           [(x, tx), (p, tp)], device)


def test_nll_and_cross_entropy_errors():
    x = gt.randn(3, 5)
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        L.nll_loss(x, gt.tensor([1, 2, 7]))
    with pytest.raises(IndexError, match="Target -3 is out of bounds."):
        L.cross_entropy(x, gt.tensor([1, 2, -3]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got "
                                           "Int"):
        L.nll_loss(x, gt.tensor([1, 2, 3], dtype=gt.int32))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target "
                                         r"batch_size \(4\)."):
        L.nll_loss(x, gt.tensor([1, 2, 3, 4]))
    with pytest.raises(RuntimeError, match=r"Expected target size \[3, 4\], got \[3\]"):
        L.nll_loss(gt.randn(3, 5, 4), gt.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5 "
                                           "classes or no classes"):
        L.cross_entropy(x, gt.tensor([1, 2, 3]), weight=gt.ones(4))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected, multi-target not "
                                           "supported"):
        L.cross_entropy(x, gt.randn(3, 4))
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point "
                                           "target"):
        L.cross_entropy(x, gt.randn(3, 5).softmax(1), ignore_index=2)
    with pytest.raises(RuntimeError, match="Expected floating point type for target with class "
                                           "probabilities, got Long"):
        L.cross_entropy(x, gt.zeros(3, 5, dtype=gt.int64))
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0. Got: "
                                           "1.5"):
        L.cross_entropy(x, gt.tensor([1, 2, 3]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="For 1D input, 1D target must have size 1"):
        L.nll_loss(gt.randn(5), gt.tensor([1, 2]))


def test_nll_loss_edge_cases():
    x, tx = _pair((3, 5))
    every = gt.tensor([-100, -100, -100])
    assert np.isnan(L.nll_loss(x, every).item())
    assert L.nll_loss(x, every, reduction="sum").item() == 0.0
    byte = gt.tensor([0, 4, 2], dtype=gt.uint8)
    assert_close(L.nll_loss(x, byte), TF.nll_loss(tx, torch.tensor([0, 4, 2],
                                                                   dtype=torch.uint8)).detach())
    v, tv = _pair((5,))
    assert_close(L.nll_loss(v, gt.tensor([2]), reduction="none"),
                 TF.nll_loss(tv, torch.tensor([2]), reduction="none").detach())


def test_cross_entropy_forward_backward_op_count():
    # The training hot path: log_softmax + the fused NLL op, and their two backward ops.
    from gputensor.kernels.registry import BACKENDS
    table = BACKENDS["cpu", "strided"].kernels
    calls: list[str] = []
    x = gt.randn(64, 10).requires_grad_()
    t = gt.randint(0, 10, (64,))
    L.cross_entropy(x, t).backward()   # compile and resolve every kernel once
    originals = dict(table)
    for name, fn in originals.items():
        table[name] = (lambda n, f: lambda *a, **k: (calls.append(n), f(*a, **k))[1])(name, fn)
    try:
        x.grad = None
        L.cross_entropy(x, t).backward()
    finally:
        table.clear()
        table.update(originals)
    assert calls.count("_nll_loss") == 1 and calls.count("_nll_loss_backward") == 1
    assert len(calls) <= 6, calls


# == binary cross entropy =======================================================================
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight_shape", [None, (5,), (4, 5)])
def test_binary_cross_entropy(device, reduction, weight_shape):
    x, tx = _pair((4, 5), device=device, low=0.02, high=0.98)
    y, ty = _pair((4, 5), device=device, seed=1, low=0.0, high=1.0)
    w, tw = (None, None) if weight_shape is None else \
        _pair(weight_shape, device=device, seed=2, low=0.1, high=2.0, grad=False)
    _check(L.binary_cross_entropy(x, y, w, reduction=reduction),
           TF.binary_cross_entropy(tx, ty, tw, reduction=reduction), [(x, tx), (y, ty)], device)


def test_binary_cross_entropy_saturation_and_errors(device):
    # log(0) is clamped to -100 and the gradient's denominator to 1e-12, as in PyTorch
    x = gt.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=gt.float64, device=device).requires_grad_()
    tx = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=torch.float64, requires_grad=True)
    y = gt.tensor([1.0, 0.0, 0.0, 1.0, 1.0], dtype=gt.float64, device=device)
    ty = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    _check(L.binary_cross_entropy(x, y, reduction="none"),
           TF.binary_cross_entropy(tx, ty, reduction="none"), [(x, tx)], device,
           tol=(1e-10, 1e-8))   # gradients of order 1e12 at the clamp
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        L.binary_cross_entropy(gt.tensor([0.5, 1.5], device=device),
                               gt.tensor([0.5, 0.5], device=device))
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        L.binary_cross_entropy(gt.tensor([0.5, 0.5], device=device),
                               gt.tensor([0.5, -0.5], device=device))
    with pytest.raises(ValueError, match="Using a target size"):
        L.binary_cross_entropy(gt.rand(3, device=device), gt.rand(4, device=device))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos_weight", [None, (5,), (4, 5)])
def test_bce_with_logits(device, reduction, weighted, pos_weight, dtype=gt.float64):
    x, tx = _pair((4, 5), dtype, device, low=-30.0, high=30.0)   # large logits stay finite
    y, ty = _pair((4, 5), dtype, device, seed=1, low=0.0, high=1.0)
    w, tw = _pair((5,), dtype, device, seed=2, low=0.1, high=2.0, grad=False) if weighted \
        else (None, None)
    # (PyTorch has no gradient for pos_weight; ours is gradchecked below)
    pw, tpw = (None, None) if pos_weight is None else \
        _pair(pos_weight, dtype, device, seed=3, low=0.5, high=3.0, grad=False)
    grads = [(x, tx), (y, ty)]
    atol, rtol = _tol(dtype)
    _check(L.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw),
           TF.binary_cross_entropy_with_logits(tx, ty, tw, reduction=reduction, pos_weight=tpw),
           grads, device, dtype, tol=(atol * 10, rtol))
    with pytest.raises(ValueError, match="must be the same as input size"):
        L.binary_cross_entropy_with_logits(x, y[:2])


@pytest.mark.parametrize("pos_weight", [None, (5,)])
def test_bce_with_logits_float32(device, pos_weight):
    test_bce_with_logits(device, "mean", True, pos_weight, dtype=gt.float32)


# == kl_div, cosine embedding, margin ranking ===================================================
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(device, reduction, log_target):
    x = torch.log_softmax(torch.from_numpy(random_array((4, 6), gt.float64)), 1)
    target = torch.softmax(torch.from_numpy(random_array((4, 6), gt.float64, seed=1)), 1)
    if log_target:
        target = target.log()
    g, t = gt.tensor(x.numpy(), device=device).requires_grad_(), x.clone().requires_grad_()
    gy = gt.tensor(target.numpy(), device=device).requires_grad_()
    ty = target.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(L.kl_div(g, gy, reduction=reduction, log_target=log_target),
               TF.kl_div(t, ty, reduction=reduction, log_target=log_target),
               [(g, t), (gy, ty)], device)
    if reduction == "mean":
        with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
            L.kl_div(g, gy, reduction="mean")


def test_kl_div_zero_target_probabilities(device):
    # Zero probabilities contribute nothing; their target gradient is 0 here, where PyTorch's
    # is NaN (log 0), so only the values and the input gradient are compared.
    x = torch.log_softmax(torch.from_numpy(random_array((3, 4), gt.float64)), 1)
    target = torch.softmax(torch.from_numpy(random_array((3, 4), gt.float64, seed=1)), 1)
    target[0, :2] = 0.0
    g, t = gt.tensor(x.numpy(), device=device).requires_grad_(), x.clone().requires_grad_()
    gy = gt.tensor(target.numpy(), device=device).requires_grad_()
    _check(L.kl_div(g, gy, reduction="sum"), TF.kl_div(t, target, reduction="sum"), [(g, t)],
           device)
    assert np.isfinite(gy.grad.cpu().numpy()).all() and (gy.grad[0, :2] == 0).all().item()


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_cosine_embedding_loss(device, reduction, margin):
    a, ta = _pair((6, 4), device=device)
    b, tb = _pair((6, 4), device=device, seed=1)
    y = np.array([1, -1, 1, -1, -1, 1], dtype=np.float64)
    _check(L.cosine_embedding_loss(a, b, gt.tensor(y, device=device), margin, reduction=reduction),
           TF.cosine_embedding_loss(ta, tb, torch.from_numpy(y), margin, reduction=reduction),
           [(a, ta), (b, tb)], device)
    v, tv = _pair((4,), device=device, seed=2)
    w, tw = _pair((4,), device=device, seed=3)
    _check(L.cosine_embedding_loss(v, w, gt.tensor(-1.0, dtype=gt.float64, device=device), -0.5),
           TF.cosine_embedding_loss(tv, tw, torch.tensor(-1.0, dtype=torch.float64), -0.5),
           [(v, tv), (w, tw)], device)
    with pytest.raises(RuntimeError, match=r"1D target tensor expects 2D input tensors, but "
                                           r"found inputs with sizes \[3, 4, 2\] and "
                                           r"\[3, 4, 2\]."):
        L.cosine_embedding_loss(gt.rand(3, 4, 2, device=device), gt.rand(3, 4, 2, device=device),
                                gt.ones(3, device=device))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected"):
        L.cosine_embedding_loss(gt.rand(3, 4, device=device), gt.rand(3, 4, device=device),
                                gt.ones(3, 1, device=device))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_loss(device, reduction):
    a, ta = _pair((7,), device=device)
    b, tb = _pair((7,), device=device, seed=1)
    y = np.array([1, -1, 1, 1, -1, -1, 1], dtype=np.float64)
    gy, ty = gt.tensor(y, device=device), torch.from_numpy(y)
    _check(L.margin_ranking_loss(a, b, gy, 0.25, reduction=reduction),
           TF.margin_ranking_loss(ta, tb, ty, 0.25, reduction=reduction),
           [(a, ta), (b, tb)], device)
    with pytest.raises(RuntimeError, match="margin_ranking_loss : All input tensors should have "
                                           "same dimension"):
        L.margin_ranking_loss(gt.rand(3, device=device), gt.rand(3, 1, device=device),
                              gt.ones(3, device=device))


# == soft margin, hinge, gaussian/poisson NLL, triplet, multilabel soft margin ==================
def _signs(shape, device, seed=5, zero=False):
    """A +-1 target (with a 0 at the front if ``zero``: any other value gets both hinge terms)."""
    y = np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)
    if zero:
        y.reshape(-1)[0] = 0.0
    return gt.tensor(y, device=device), torch.from_numpy(y)


def _same_error(gfn, tfn, same_message=True):
    """gputensor raises what PyTorch raises: the same type, and (unless told otherwise) a
    message starting with PyTorch's (ours may add the broadcast shapes)."""
    with pytest.raises(Exception) as t_err:
        tfn()
    with pytest.raises(type(t_err.value)) as g_err:
        gfn()
    assert type(g_err.value) is type(t_err.value)
    if same_message:
        assert str(g_err.value).startswith(str(t_err.value)), (g_err.value, t_err.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss(device, dtype, reduction):
    x, tx = _pair((6, 5), dtype, device, low=-4.0, high=4.0)
    y, ty = _signs((6, 5), device)
    y, ty = y.to(dtype), ty.to(tx.dtype)
    _check(L.soft_margin_loss(x, y, reduction=reduction),
           TF.soft_margin_loss(tx, ty, reduction=reduction), [(x, tx)], device, dtype)
    # the target may broadcast (a row of it here), the input may not
    _check(L.soft_margin_loss(x, y[0], reduction=reduction),
           TF.soft_margin_loss(tx, ty[0], reduction=reduction), [(x, tx)], device, dtype)


def test_soft_margin_loss_large_margins_stay_finite(device):
    # PyTorch's log1p(exp(-y * x)) is inf (and its gradient NaN) past exp's range; ours is the
    # limit, -y * x, with gradient -y.
    x = gt.tensor([-1000.0, 1000.0, 0.0], dtype=gt.float64, device=device).requires_grad_()
    y = gt.tensor([1.0, -1.0, 1.0], dtype=gt.float64, device=device)
    loss = L.soft_margin_loss(x, y, reduction="none")
    loss.sum().backward()
    assert_close(loss, np.array([1000.0, 1000.0, np.log(2.0)]))
    assert_close(x.grad, np.array([-1.0, 1.0, -0.5]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [1.0, 0.4])
def test_hinge_embedding_loss(device, dtype, reduction, margin):
    x, tx = _pair((6, 5), dtype, device)
    y, ty = _signs((6, 5), device, zero=True)
    _check(L.hinge_embedding_loss(x, y, margin, reduction=reduction),
           TF.hinge_embedding_loss(tx, ty, margin, reduction=reduction), [(x, tx)], device,
           dtype)


_VAR_SHAPES = [(4, 3, 2), (4, 3), (4, 3, 1), (4, 1, 2), (1, 3, 2), "float"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("var_shape", _VAR_SHAPES, ids=str)
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll_loss(device, reduction, var_shape, full, dtype=gt.float64):
    x, tx = _pair((4, 3, 2), dtype, device)
    y, ty = _pair((4, 3, 2), dtype, device, seed=1)
    grads = [(x, tx), (y, ty)]
    if var_shape == "float":
        v = tv = 0.7
    else:
        v, tv = _pair(var_shape, dtype, device, seed=2, low=0.05, high=2.0)
        grads.append((v, tv))
    kw = {"full": full, "reduction": reduction}
    _check(L.gaussian_nll_loss(x, y, v, **kw), TF.gaussian_nll_loss(tx, ty, tv, **kw), grads,
           device, dtype)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_gaussian_nll_loss_float32(device, reduction):
    test_gaussian_nll_loss(device, reduction, (4, 3), True, dtype=gt.float32)


def test_gaussian_nll_loss_clamped_var_keeps_its_gradient(device):
    # var below eps is used as eps, but (as in PyTorch) its gradient is not zeroed there
    x, tx = _pair((2, 3), device=device)
    y, ty = _pair((2, 3), device=device, seed=1)
    arr = np.array([[0.0, 1e-9, 0.3], [2e-6, 1.0, 5e-7]])
    v = gt.tensor(arr, device=device).requires_grad_()
    tv = torch.from_numpy(arr.copy()).requires_grad_()
    _check(L.gaussian_nll_loss(x, y, v, eps=1e-6, reduction="sum"),
           TF.gaussian_nll_loss(tx, ty, tv, eps=1e-6, reduction="sum"),
           [(x, tx), (y, ty), (v, tv)], device, tol=(1e-4, 1e-10))   # var grads ~1e12
    assert (v.grad[0, 0] != 0).item()


def test_gaussian_nll_loss_errors(device):
    x, tx = _pair((4, 3), device=device, grad=False)
    for var in [-1.0, -gt.ones(4, 3), (3,), (1, 1), (2, 3), (), (4, 3, 1)]:
        if isinstance(var, tuple):
            var = gt.ones(var, dtype=gt.float64)
        tvar = torch.from_numpy(var.numpy()) if isinstance(var, gt.Tensor) else var
        var = var.to(device) if isinstance(var, gt.Tensor) else var
        _same_error(lambda var=var: L.gaussian_nll_loss(x, x, var),
                    lambda tvar=tvar: TF.gaussian_nll_loss(tx, tx, tvar))
    _same_error(lambda: L.gaussian_nll_loss(x, x, gt.ones_like(x), reduction="avg"),
                lambda: TF.gaussian_nll_loss(tx, tx, torch.ones_like(tx), reduction="avg"))
    # an int var: PyTorch's TypeError comes from inside torch.any(); ours names the argument
    _same_error(lambda: L.gaussian_nll_loss(x, x, 1), lambda: TF.gaussian_nll_loss(tx, tx, 1),
                same_message=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (False, False), (True, True),
                                            (False, True)])
def test_poisson_nll_loss(device, dtype, reduction, log_input, full):
    # rates must be positive when given directly; targets on both sides of the Stirling cut (1)
    x, tx = _pair((5, 4), dtype, device, low=-2.0 if log_input else 0.1, high=2.0)
    y, ty = _pair((5, 4), dtype, device, seed=1, low=0.1, high=6.0)
    kw = {"log_input": log_input, "full": full, "reduction": reduction}
    _check(L.poisson_nll_loss(x, y, **kw), TF.poisson_nll_loss(tx, ty, **kw), [(x, tx), (y, ty)],
           device, dtype)


def test_poisson_nll_loss_zero_counts(device):
    # Integer counts with zeros: the values and input gradient match; the target gradient is
    # finite where PyTorch's is NaN (0 * log 0 in the masked-out Stirling term).
    x, tx = _pair((3, 4), device=device)
    counts = np.array([[0.0, 1.0, 2.0, 7.0], [0.0, 0.0, 3.0, 1.0], [5.0, 0.0, 1.0, 2.0]])
    y = gt.tensor(counts, device=device).requires_grad_()
    ty = torch.from_numpy(counts.copy()).requires_grad_()
    _check(L.poisson_nll_loss(x, y, full=True, reduction="sum"),
           TF.poisson_nll_loss(tx, ty, full=True, reduction="sum"), [(x, tx)], device)
    g, t = y.grad.cpu().numpy(), ty.grad.numpy()
    zero = counts == 0
    assert np.isnan(t[zero]).all() and np.isfinite(g).all()
    np.testing.assert_allclose(g[~zero], t[~zero], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [2, 1, 3.0, float("inf")])
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_loss(device, reduction, p, swap, dtype=gt.float64):
    a, ta = _pair((6, 4), dtype, device)
    pos, tpos = _pair((6, 4), dtype, device, seed=1)
    neg, tneg = _pair((6, 4), dtype, device, seed=2)
    kw = {"margin": 1.5, "p": p, "swap": swap, "reduction": reduction}
    _check(L.triplet_margin_loss(a, pos, neg, **kw), TF.triplet_margin_loss(ta, tpos, tneg, **kw),
           [(a, ta), (pos, tpos), (neg, tneg)], device, dtype)


@pytest.mark.parametrize("shapes", [((4,), (4,), (4,)), ((2, 3, 4),) * 3,
                                    ((5, 4), (1, 4), (5, 4))], ids=["1d", "3d", "broadcast"])
def test_triplet_margin_loss_shapes_and_float32(device, shapes):
    dtype = gt.float32
    (a, ta), (pos, tpos), (neg, tneg) = (_pair(s, dtype, device, seed=i)
                                         for i, s in enumerate(shapes))
    _check(L.triplet_margin_loss(a, pos, neg, reduction="none", swap=True),
           TF.triplet_margin_loss(ta, tpos, tneg, reduction="none", swap=True),
           [(a, ta), (pos, tpos), (neg, tneg)], device, dtype)


def test_triplet_margin_loss_identical_inputs(device):
    # eps is added to the difference, so equal rows have distance eps * sqrt(D) and finite grads
    a, ta = _pair((3, 4), device=device)
    _check(L.triplet_margin_loss(a, a, a * 1.0), TF.triplet_margin_loss(ta, ta, ta * 1.0),
           [(a, ta)], device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight_shape", [None, (4,), (5, 4)])
def test_multilabel_soft_margin_loss(device, dtype, reduction, weight_shape):
    x, tx = _pair((5, 4), dtype, device, low=-30.0, high=30.0)   # large logits stay finite
    y, ty = _pair((5, 4), dtype, device, seed=1, low=0.0, high=1.0)
    w, tw = (None, None) if weight_shape is None else \
        _pair(weight_shape, dtype, device, seed=2, low=0.1, high=2.0, grad=False)
    atol, rtol = _tol(dtype)
    _check(L.multilabel_soft_margin_loss(x, y, w, reduction=reduction),
           TF.multilabel_soft_margin_loss(tx, ty, tw, reduction=reduction), [(x, tx), (y, ty)],
           device, dtype, tol=(atol * 10, rtol))
    v, tv = _pair((4,), dtype, device, seed=3)   # one sample: the classes are its only dim
    b = (y[0] > 0.5).to(dtype)
    _check(L.multilabel_soft_margin_loss(v, b, reduction=reduction),
           TF.multilabel_soft_margin_loss(tv, (ty[0] > 0.5).to(tv.dtype), reduction=reduction),
           [(v, tv)], device, dtype)


def test_new_loss_errors_and_legacy_flags(device):
    x, tx = _pair((4, 3), device=device, grad=False)
    g3, t3 = gt.ones(3, device=device), torch.ones(3)
    for red in ["avg", "elementwise_mean"]:   # 'elementwise_mean' is an alias in some only
        for gfn, tfn in [(L.poisson_nll_loss, TF.poisson_nll_loss),
                         (L.multilabel_soft_margin_loss, TF.multilabel_soft_margin_loss)]:
            _same_error(lambda gfn=gfn, red=red: gfn(x, x, reduction=red),
                        lambda tfn=tfn, red=red: tfn(tx, tx, reduction=red))
    with pytest.warns(UserWarning, match="'elementwise_mean' is deprecated"):
        out = L.soft_margin_loss(x, x, reduction="elementwise_mean")
    assert_close(out, TF.soft_margin_loss(tx, tx))
    cases = [
        (lambda: L.soft_margin_loss(x, x, reduction="avg"),
         lambda: TF.soft_margin_loss(tx, tx, reduction="avg")),
        (lambda: L.soft_margin_loss(g3, x), lambda: TF.soft_margin_loss(t3, tx)),
        (lambda: L.soft_margin_loss(x, x[:, :2]), lambda: TF.soft_margin_loss(tx, tx[:, :2])),
        (lambda: L.hinge_embedding_loss(x, x, reduction="avg"),
         lambda: TF.hinge_embedding_loss(tx, tx, reduction="avg")),
        (lambda: L.triplet_margin_loss(x, x, x, margin=0),
         lambda: TF.triplet_margin_loss(tx, tx, tx, margin=0)),
        (lambda: L.triplet_margin_loss(x, x, x, margin=0, reduction="avg"),
         lambda: TF.triplet_margin_loss(tx, tx, tx, margin=0, reduction="avg")),
        (lambda: L.triplet_margin_loss(x, x, x[0]), lambda: TF.triplet_margin_loss(tx, tx, tx[0])),
        (lambda: L.multilabel_soft_margin_loss(x, x, weight=gt.ones(4, device=device)),
         lambda: TF.multilabel_soft_margin_loss(tx, tx, weight=torch.ones(4))),
        (lambda: L.multilabel_soft_margin_loss(x[0, 0], x[0, 0]),
         lambda: TF.multilabel_soft_margin_loss(tx[0, 0], tx[0, 0])),
        (lambda: M.TripletMarginLoss(margin=-1.0), lambda: torch.nn.TripletMarginLoss(margin=-1.0)),
        (lambda: M.GaussianNLLLoss(True), lambda: torch.nn.GaussianNLLLoss(True)),
    ]
    for gfn, tfn in cases:
        _same_error(gfn, tfn)
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        out = L.poisson_nll_loss(x, x.abs(), reduce=False)
    assert_close(out, TF.poisson_nll_loss(tx, tx.abs(), reduction="none"))
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        m = M.TripletMarginLoss(size_average=False)
    assert m.reduction == "sum"


_NEW_LOSSES = ["soft_margin_loss", "hinge_embedding_loss", "gaussian_nll_loss",
               "poisson_nll_loss", "triplet_margin_loss", "multilabel_soft_margin_loss",
               "SoftMarginLoss", "HingeEmbeddingLoss", "GaussianNLLLoss", "PoissonNLLLoss",
               "TripletMarginLoss", "MultiLabelSoftMarginLoss"]


@pytest.mark.parametrize("name", _NEW_LOSSES)
def test_new_loss_signatures(name):
    import inspect

    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
    if name[0].isupper():
        ours, theirs = getattr(gt.nn, name).__init__, getattr(torch.nn, name).__init__
        assert getattr(M, name).__constants__ == getattr(torch.nn, name).__constants__
    else:
        ours, theirs = getattr(gt.nn.functional, name), getattr(TF, name)
    assert params(ours) == params(theirs)


_NEW_GRADCHECKS = [
    ("soft_margin", lambda x, y: L.soft_margin_loss(x, y, reduction="none"), (-3, 3), (-1, 1)),
    ("hinge", lambda x, y: L.hinge_embedding_loss(x, y.sign(), 0.8, reduction="none"),
     (-1.5, 1.5), (-1, 1)),
    ("gaussian", lambda x, y: L.gaussian_nll_loss(x, y, x.abs() + 0.1, full=True, reduction="sum"),
     (-2, 2), (-2, 2)),
    ("poisson", lambda x, y: L.poisson_nll_loss(x, y, full=True, reduction="none"), (-2, 2),
     (0.2, 5)),
    ("poisson_rates", lambda x, y: L.poisson_nll_loss(x, y, log_input=False, reduction="sum"),
     (0.2, 3), (0.2, 5)),
    ("triplet", lambda x, y: L.triplet_margin_loss(x, y, x.flip(0), margin=3.0, p=3, swap=True,
                                                   reduction="none"), (-2, 2), (-2, 2)),
    ("multilabel", lambda x, y: L.multilabel_soft_margin_loss(
        x, y, gt.tensor([0.5, 1.0, 2.0, 1.5], dtype=gt.float64), reduction="none"), (-3, 3),
     (0, 1)),
]


@pytest.mark.parametrize("name,fn,ra,rb", _NEW_GRADCHECKS, ids=[c[0] for c in _NEW_GRADCHECKS])
def test_new_losses_gradcheck(name, fn, ra, rb):
    a, b = _f64((3, 4), 0, *ra), _f64((3, 4), 1, *rb)
    if name == "hinge":
        a = gt.tensor(np.array([[-1.2, -0.3, 0.3, 1.4]] * 3)).requires_grad_()  # off the kink
        b = b.detach()
    assert gt.autograd.gradcheck(fn, (a, b))


# == modules ====================================================================================
_MODULES = [
    ("MSELoss", {}, "reg"), ("L1Loss", {"reduction": "sum"}, "reg"),
    ("SmoothL1Loss", {"beta": 0.5}, "reg"), ("HuberLoss", {"delta": 0.5}, "reg"),
    ("CrossEntropyLoss", {"label_smoothing": 0.1, "ignore_index": 1}, "cls"),
    ("CrossEntropyLoss", {"weight": [0.5, 1.0, 2.0, 1.5]}, "cls"),
    ("NLLLoss", {"weight": [0.5, 1.0, 2.0, 1.5], "reduction": "none"}, "cls"),
    ("BCELoss", {"weight": [0.5, 1.0, 2.0, 1.5]}, "prob"),
    ("BCEWithLogitsLoss", {"pos_weight": [0.5, 1.0, 2.0, 1.5]}, "logit"),
    ("KLDivLoss", {"reduction": "batchmean", "log_target": True}, "reg"),
    ("CosineEmbeddingLoss", {"margin": 0.2}, "pair"),
    ("MarginRankingLoss", {"margin": 0.1, "reduction": "sum"}, "rank"),
    ("SoftMarginLoss", {"reduction": "sum"}, "sign"),
    ("HingeEmbeddingLoss", {"margin": 0.5}, "sign"),
    ("PoissonNLLLoss", {"full": True, "reduction": "none"}, "prob"),
    ("PoissonNLLLoss", {"log_input": False, "eps": 1e-4}, "prob"),
    ("MultiLabelSoftMarginLoss", {"weight": [0.5, 1.0, 2.0, 1.5]}, "prob"),
    ("GaussianNLLLoss", {"full": True, "eps": 1e-3}, "var"),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True, "reduction": "none"},
     "triplet"),
]


@pytest.mark.parametrize("name,kwargs,kind", _MODULES)
def test_loss_modules(device, name, kwargs, kind):
    g_kw = {k: gt.tensor(v, dtype=gt.float64, device=device) if isinstance(v, list) else v
            for k, v in kwargs.items()}
    t_kw = {k: torch.tensor(v, dtype=torch.float64) if isinstance(v, list) else v
            for k, v in kwargs.items()}
    g_mod, t_mod = getattr(M, name)(**g_kw), getattr(torch.nn, name)(**t_kw)
    assert repr(g_mod) == repr(t_mod)
    assert list(g_mod.state_dict()) == list(t_mod.state_dict())
    x, tx = _pair((5, 4), device=device, low=0.05 if kind == "prob" else -2.0,
                  high=0.95 if kind == "prob" else 2.0)
    if kind == "cls":
        if name == "NLLLoss":
            x, tx = _pair((5, 4), device=device, high=-0.1)
        t, tt = _index_pair((5,), 4, device)
        _check(g_mod(x, t), t_mod(tx, tt), [(x, tx)], device)
    elif kind in ("reg", "prob", "logit"):
        y, ty = _pair((5, 4), device=device, seed=1, low=0.0 if kind != "reg" else -2.0,
                      high=1.0 if kind != "reg" else 2.0)
        _check(g_mod(x, y), t_mod(tx, ty), [(x, tx), (y, ty)], device)
    elif kind == "sign":   # +-1 targets, not differentiable in PyTorch
        y, ty = _signs((5, 4), device)
        _check(g_mod(x, y), t_mod(tx, ty), [(x, tx)], device)
    elif kind in ("var", "triplet"):
        y, ty = _pair((5, 4), device=device, seed=1)
        z, tz = _pair((5, 4), device=device, seed=2, low=0.1 if kind == "var" else -2.0)
        _check(g_mod(x, y, z), t_mod(tx, ty, tz), [(x, tx), (y, ty), (z, tz)], device)
    else:
        shape = (5, 4) if kind == "pair" else (5,)
        a, ta = _pair(shape, device=device, seed=2)
        b, tb = _pair(shape, device=device, seed=3)
        sign = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
        _check(g_mod(a, b, gt.tensor(sign, device=device)), t_mod(ta, tb, torch.from_numpy(sign)),
               [(a, ta), (b, tb)], device)


def test_loss_module_legacy_flags_and_weight_buffer():
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        m = M.MSELoss(reduce=False)
    assert m.reduction == "none"
    w = gt.tensor([1.0, 2.0])
    ce = M.CrossEntropyLoss(weight=w)
    assert ce.weight is w and "weight" in dict(ce.named_buffers())
    assert M.BCEWithLogitsLoss().pos_weight is None


# == gradcheck of the fused ops =================================================================
def _f64(shape, seed, low=-2.0, high=2.0):
    return gt.tensor(random_array(shape, gt.float64, low, high, seed)).requires_grad_()


_ELEMENTWISE_OPS = [
    ("_squared_error", lambda a, b: nn_ops._squared_error(a, b), (-2, 2), (-2, 2)),
    ("_abs_error", lambda a, b: nn_ops._abs_error(a, b), (-2, -1), (1, 2)),
    ("_smooth_l1", lambda a, b: nn_ops._smooth_l1(a, b, 0.8), (-2, 2), (-0.1, 0.1)),
    ("_huber", lambda a, b: nn_ops._huber(a, b, 0.8), (-2, 2), (-0.1, 0.1)),
    ("_binary_cross_entropy", lambda a, b: nn_ops._binary_cross_entropy(a, b), (0.1, 0.9),
     (0, 1)),
    ("_bce_with_logits", lambda a, b: nn_ops._bce_with_logits(a, b), (-3, 3), (0, 1)),
]


@pytest.mark.parametrize("name,fn,ra,rb", _ELEMENTWISE_OPS, ids=[o[0] for o in _ELEMENTWISE_OPS])
def test_loss_ops_gradcheck(name, fn, ra, rb):
    a, b = _f64((3, 4), 0, *ra), _f64((3, 4), 1, *rb)
    if name == "_smooth_l1" or name == "_huber":
        a = gt.tensor(np.array([[-1.5, -0.3, 0.2, 1.4]] * 3)).requires_grad_()  # off the kinks
    assert gt.autograd.gradcheck(fn, (a, b))
    assert gt.autograd.gradgradcheck(fn, (a, b))


def test_pos_weight_and_nll_ops_gradcheck():
    x, t, pw = _f64((3, 4), 0, -3, 3), _f64((3, 4), 1, 0, 1), _f64((4,), 2, 0.5, 2)
    assert gt.autograd.gradcheck(nn_ops._bce_with_logits_pos_weight, (x, t, pw))
    logits = _f64((4, 5, 3), 3)
    target = gt.tensor([[0, 4, 2], [1, 1, -100], [3, 0, 2], [4, 4, 4]])
    weight = gt.tensor([0.5, 1.0, 1.5, 2.0, 0.7], dtype=gt.float64)
    for code in (0, 1, 2):
        def loss(x, code=code):
            return nn_ops._nll_loss(x.log_softmax(1), target, weight, code, -100)
        assert gt.autograd.gradcheck(loss, (logits,))
        assert gt.autograd.gradgradcheck(loss, (logits,))


def test_float32_dtype_of_results(device):
    x = gt.randn(4, 3, device=device)
    t = gt.tensor([0, 2, 1, 1], device=device)
    assert L.cross_entropy(x, t).dtype is gt.float32
    assert L.nll_loss(x.double(), t).dtype is gt.float64
    assert L.mse_loss(x, x).dtype is gt.float32
