"""Multi-class/multi-label margin losses, triplet loss with a distance function, LP pooling,
max unpooling, conv/linear + BatchNorm fusion, channels-last conversion, skip_init and the
deprecated clip_grad_norm/NLLLoss2d names, against PyTorch on cpu and emulated cuda."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional as F

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5))


def _pair(data, device, grad=True):
    return (torch.tensor(data, requires_grad=grad),
            gt.tensor(data, device=device, requires_grad=grad))


def _check(got, want, g_in, t_in, tol=1e-10):
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=tol,
                               atol=1e-12)
    want.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(g_in.grad.cpu().numpy(), t_in.grad.numpy(), rtol=tol,
                               atol=1e-12)


@pytest.mark.parametrize("p,weighted,reduction", [(1, False, "mean"), (2, True, "none"),
                                                  (1, True, "sum")])
def test_multi_margin_loss(device, p, weighted, reduction) -> None:
    t, g = _pair(X, device)
    target = np.array([0, 4, 2, 2])
    w = np.array([1.0, 0.5, 2.0, 1.5, 0.25])
    want = torch.nn.MultiMarginLoss(p, 0.7, torch.tensor(w) if weighted else None,
                                    reduction=reduction)(t, torch.tensor(target))
    got = gt.nn.MultiMarginLoss(p, 0.7, gt.tensor(w, device=device) if weighted else None,
                                reduction=reduction)(g, gt.tensor(target, device=device))
    _check(got, want, g, t)


def test_multilabel_margin_loss(device) -> None:
    target = np.array([[3, 0, -1, 1, 1], [1, 2, 4, 0, -1], [-1, 0, 0, 0, 0], [4, 3, 2, 1, 0]])
    for reduction in ("mean", "none"):
        t, g = _pair(X, device)
        want = torch.nn.functional.multilabel_margin_loss(t, torch.tensor(target),
                                                          reduction=reduction)
        got = F.multilabel_margin_loss(g, gt.tensor(target, device=device),
                                       reduction=reduction)
        _check(got, want, g, t)


def test_triplet_margin_with_distance_loss(device) -> None:
    a, p, n = X, X[::-1].copy(), X * 0.3
    for kwargs in ({}, {"swap": True, "margin": 0.5}):
        (ta, ga), (tp, gp), (tn, gn) = _pair(a, device), _pair(p, device), _pair(n, device)
        want = torch.nn.TripletMarginWithDistanceLoss(**kwargs)(ta, tp, tn)
        got = gt.nn.TripletMarginWithDistanceLoss(**kwargs)(ga, gp, gn)
        _check(got, want, ga, ta)
    cos = (lambda x, y: 1 - torch.nn.functional.cosine_similarity(x, y),
           lambda x, y: 1 - F.cosine_similarity(x, y))
    (ta, ga), (tp, gp), (tn, gn) = _pair(a, device), _pair(p, device), _pair(n, device)
    want = torch.nn.functional.triplet_margin_with_distance_loss(ta, tp, tn,
                                                                 distance_function=cos[0])
    got = F.triplet_margin_with_distance_loss(ga, gp, gn, distance_function=cos[1])
    _check(got, want, ga, ta)
    assert repr(gt.nn.TripletMarginWithDistanceLoss()) == \
        repr(torch.nn.TripletMarginWithDistanceLoss())


@pytest.mark.parametrize("norm_type", [2.0, 1.5, float("inf")])
def test_lp_pool(device, norm_type) -> None:
    x4 = np.abs(RNG.standard_normal((2, 3, 6, 5))) + 0.1
    t, g = _pair(x4, device)
    want = torch.nn.LPPool2d(norm_type, (2, 3), stride=(2, 1))(t)
    got = gt.nn.LPPool2d(norm_type, (2, 3), stride=(2, 1))(g)
    _check(got, want, g, t, tol=1e-9)
    t1, g1 = _pair(x4[0], device)
    _check(gt.nn.LPPool1d(norm_type, 3)(g1), torch.nn.LPPool1d(norm_type, 3)(t1), g1, t1, 1e-9)
    assert repr(gt.nn.LPPool2d(2, 3)) == repr(torch.nn.LPPool2d(2, 3))


def test_max_unpool(device) -> None:
    x4 = RNG.standard_normal((2, 3, 6, 4))
    tp, ti = torch.nn.functional.max_pool2d(torch.tensor(x4), 2, return_indices=True)
    gp, gi = F.max_pool2d(gt.tensor(x4, device=device), 2, return_indices=True)
    (tv, gv) = _pair(tp.numpy(), device)
    want = torch.nn.MaxUnpool2d(2)(tv, ti)
    got = gt.nn.MaxUnpool2d(2)(gv, gi)
    _check(got, want, gv, tv)
    want = torch.nn.functional.max_unpool2d(tp, ti, 2, output_size=(7, 5))
    got = F.max_unpool2d(gp, gi, 2, output_size=(7, 5))
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    x3 = RNG.standard_normal((2, 3, 8))
    tp, ti = torch.nn.functional.max_pool1d(torch.tensor(x3), 2, return_indices=True)
    gp, gi = F.max_pool1d(gt.tensor(x3, device=device), 2, return_indices=True)
    np.testing.assert_array_equal(gt.nn.MaxUnpool1d(2)(gp, gi).cpu().numpy(),
                                  torch.nn.MaxUnpool1d(2)(tp, ti).numpy())
    assert repr(gt.nn.MaxUnpool2d(2)) == repr(torch.nn.MaxUnpool2d(2))
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(gp.unsqueeze(-1), gi.unsqueeze(-1), 2, output_size=(20, 20))


def test_fusion_keeps_eval_outputs(device) -> None:
    conv, bn = gt.nn.Conv2d(3, 4, 3).to(device), gt.nn.BatchNorm2d(4).to(device)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-0.5, 0.5)
    conv.eval()
    bn.eval()
    x = gt.randn(2, 3, 6, 6, device=device)
    fused = gt.nn.utils.fuse_conv_bn_eval(conv, bn)
    np.testing.assert_allclose(fused(x).detach().cpu().numpy(),
                               bn(conv(x)).detach().cpu().numpy(), rtol=1e-4, atol=1e-5)
    lin, bn1 = gt.nn.Linear(5, 4).to(device), gt.nn.BatchNorm1d(4).to(device)
    bn1.running_var.uniform_(0.5, 2)
    lin.eval()
    bn1.eval()
    y = gt.randn(3, 5, device=device)
    np.testing.assert_allclose(gt.nn.utils.fuse_linear_bn_eval(lin, bn1)(y).detach().cpu()
                               .numpy(), bn1(lin(y)).detach().cpu().numpy(), rtol=1e-4,
                               atol=1e-5)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        gt.nn.utils.fuse_conv_bn_eval(conv.train(), bn)


def test_memory_format_skip_init_and_deprecated_names(device) -> None:
    net = gt.nn.Sequential(gt.nn.Conv2d(3, 4, 3), gt.nn.ReLU()).to(device)
    gt.nn.utils.convert_conv2d_weight_memory_format(net, gt.channels_last)
    assert net[0].weight.is_contiguous(memory_format=gt.channels_last)
    lin = gt.nn.utils.skip_init(gt.nn.Linear, 3, 2, device=device)
    assert lin.weight.shape == (2, 3) and lin.weight.device == gt.device(device)
    with pytest.raises(RuntimeError, match="support a 'device' arg"):
        gt.nn.utils.skip_init(gt.nn.ReLU)
    p = gt.nn.Parameter(gt.ones(3, device=device))
    p.grad = gt.full((3,), 4.0, device=device)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        gt.nn.utils.clip_grad_norm([p], 1.0)
    assert "deprecated in favor of" in str(w[0].message)
    assert abs(float(p.grad.norm()) - 1.0) < 1e-5
    assert issubclass(gt.nn.NLLLoss2d, gt.nn.NLLLoss)
