"""Batch, layer and group norm: forward and backward parity with PyTorch, running statistics,
the modules' state, gradcheck/gradgradcheck of the fused ops, and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops import nn as nn_ops
from gputensor.nn.functional._norm import batch_norm, group_norm, layer_norm
from gputensor.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from gputensor.nn.modules.normalization import GroupNorm, LayerNorm
from tests.helpers import assert_close, random_array, torch_dtype

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [gt.float32, gt.float64]


def _tol(dtype):
    return (2e-5, 2e-5) if dtype is gt.float32 else (1e-10, 1e-10)


def _pair(shape, dtype, device, seed=0, grad=True, low=-2.0, high=2.0):
    arr = random_array(shape, dtype, low, high, seed)
    g = gt.tensor(arr, dtype=dtype, device=device)
    t = torch.from_numpy(arr.copy())
    if grad:
        g.requires_grad_()
        t.requires_grad_()
    return g, t


def _backward(g_out, t_out, device, seed=99):
    """Backpropagate the same random upstream gradient through both outputs."""
    up = random_array(tuple(t_out.shape), gt.float64, seed=seed)
    (g_out * gt.tensor(up, dtype=g_out.dtype, device=device)).sum().backward()
    (t_out * torch.from_numpy(up).to(t_out.dtype)).sum().backward()


def _assert_grads(pairs, dtype):
    atol, rtol = _tol(dtype)
    for g, t in pairs:
        if t is None:
            continue
        assert_close(g.grad, t.grad, atol=atol, rtol=rtol)


# == batch norm =================================================================================
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 5), (4, 5, 7), (3, 5, 4, 6), (2, 5, 2, 3, 2)])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_batch_norm_training_parity(device, dtype, shape, affine):
    x, tx = _pair(shape, dtype, device)
    w, tw = _pair((5,), dtype, device, seed=1) if affine in ("both", "weight") else (None, None)
    b, tb = _pair((5,), dtype, device, seed=2) if affine in ("both", "bias") else (None, None)
    rm, rv = gt.zeros(5, dtype=dtype, device=device), gt.ones(5, dtype=dtype, device=device)
    trm, trv = torch.zeros(5, dtype=torch_dtype(dtype)), torch.ones(5, dtype=torch_dtype(dtype))
    out = batch_norm(x, rm, rv, w, b, True, 0.3, 1e-5)
    t_out = TF.batch_norm(tx, trm, trv, tw, tb, True, 0.3, 1e-5)
    atol, rtol = _tol(dtype)
    assert_close(out, t_out.detach(), atol=atol, rtol=rtol)
    assert_close(rm, trm, atol=atol, rtol=rtol)
    assert_close(rv, trv, atol=atol, rtol=rtol)
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (w, tw), (b, tb)], dtype)


@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4, 6)])
def test_batch_norm_eval_parity(device, shape):
    x, tx = _pair(shape, gt.float64, device)
    w, tw = _pair((5,), gt.float64, device, seed=1)
    b, tb = _pair((5,), gt.float64, device, seed=2)
    stats = random_array((5,), gt.float64, seed=3)
    var = random_array((5,), gt.float64, 0.5, 2.0, seed=4)
    rm, rv = gt.tensor(stats, device=device), gt.tensor(var, device=device)
    trm, trv = torch.from_numpy(stats.copy()), torch.from_numpy(var.copy())
    out = batch_norm(x, rm, rv, w, b, False, 0.1, 1e-3)
    t_out = TF.batch_norm(tx, trm, trv, tw, tb, False, 0.1, 1e-3)
    assert_close(out, t_out.detach(), atol=1e-10, rtol=1e-10)
    assert_close(rm, trm)  # eval mode leaves the running statistics alone
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (w, tw), (b, tb)], gt.float64)


def test_batch_norm_without_running_stats_and_noncontiguous(device):
    x, tx = _pair((4, 6, 3, 5), gt.float32, device)
    xt, txt = x.transpose(2, 3), tx.transpose(2, 3)
    out = batch_norm(xt, None, None, training=True)
    t_out = TF.batch_norm(txt, None, None, training=True)
    assert_close(out, t_out.detach(), atol=2e-5, rtol=2e-5)
    _backward(out, t_out, device)
    _assert_grads([(x, tx)], gt.float32)


def test_batch_norm_half_input(device):
    arr = random_array((8, 3, 4), gt.float32)
    x = gt.tensor(arr, dtype=gt.float16, device=device)
    tx = torch.from_numpy(arr).half().float()
    out = batch_norm(x, None, None, training=True)
    assert out.dtype is gt.float16
    assert_close(out, TF.batch_norm(tx, None, None, training=True).half(), atol=1e-2, rtol=1e-2)


def test_batch_norm_errors():
    x = gt.randn(3, 4)
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 5"):
        batch_norm(x, gt.zeros(5), gt.ones(5), training=True)
    with pytest.raises(RuntimeError, match="weight should contain 4 elements not 5"):
        batch_norm(x, gt.zeros(4), gt.ones(4), gt.ones(5), training=True)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        batch_norm(gt.randn(1, 4), gt.zeros(4), gt.ones(4), training=True)
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        batch_norm(x, None, None, training=False)
    with pytest.raises(ValueError, match="eps must be positive during training"):
        batch_norm(x, None, None, training=True, eps=0.0)


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 4)), ("BatchNorm1d", (6, 4, 3)),
                                       ("BatchNorm2d", (3, 4, 5, 2))])
def test_batchnorm_module_running_stats(device, momentum, cls, shape):
    g_mod = {"BatchNorm1d": BatchNorm1d, "BatchNorm2d": BatchNorm2d}[cls](
        4, momentum=momentum, device=device)
    t_mod = getattr(torch.nn, cls)(4, momentum=momentum)
    with torch.no_grad():
        t_mod.weight.copy_(torch.linspace(0.5, 2, 4))
        t_mod.bias.copy_(torch.linspace(-1, 1, 4))
    g_mod.load_state_dict({k: gt.tensor(v.numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    for step in range(4):
        x, tx = _pair(shape, gt.float32, device, seed=step, grad=False, low=step - 2.0,
                      high=step + 1.0)
        assert_close(g_mod(x), t_mod(tx).detach(), atol=2e-5, rtol=2e-5)
    assert_close(g_mod.running_mean, t_mod.running_mean, atol=1e-6, rtol=1e-6)
    assert_close(g_mod.running_var, t_mod.running_var, atol=1e-6, rtol=1e-6)
    assert g_mod.num_batches_tracked.item() == 4
    g_mod.eval()
    t_mod.eval()
    x, tx = _pair(shape, gt.float32, device, seed=10)
    out, t_out = g_mod(x), t_mod(tx)
    assert_close(out, t_out.detach(), atol=2e-5, rtol=2e-5)
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (g_mod.weight, t_mod.weight), (g_mod.bias, t_mod.bias)], gt.float32)
    assert_close(g_mod.running_mean, t_mod.running_mean, atol=1e-6, rtol=1e-6)


def test_batchnorm_module_training_grads_and_options(device):
    g_mod, t_mod = BatchNorm2d(3, device=device), torch.nn.BatchNorm2d(3)
    x, tx = _pair((4, 3, 2, 5), gt.float32, device)
    out, t_out = g_mod(x), t_mod(tx)
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (g_mod.weight, t_mod.weight), (g_mod.bias, t_mod.bias)], gt.float32)
    # No affine, no running statistics: eval mode still normalises with batch statistics.
    g2 = BatchNorm1d(3, affine=False, track_running_stats=False, device=device).eval()
    t2 = torch.nn.BatchNorm1d(3, affine=False, track_running_stats=False).eval()
    x, tx = _pair((5, 3), gt.float32, device, grad=False)
    assert_close(g2(x), t2(tx), atol=2e-5, rtol=2e-5)
    assert list(g2.state_dict()) == [] and g2.weight is None and g2.running_mean is None
    g3, t3 = BatchNorm1d(3, bias=False, device=device), torch.nn.BatchNorm1d(3, bias=False)
    assert [n for n, _ in g3.named_parameters()] == [n for n, _ in t3.named_parameters()]


def test_batchnorm_state_dict_and_repr():
    g_mod, t_mod = BatchNorm2d(4, eps=1e-3, momentum=0.2), torch.nn.BatchNorm2d(4, 1e-3, 0.2)
    assert list(g_mod.state_dict()) == list(t_mod.state_dict())
    assert g_mod.state_dict()["num_batches_tracked"].dtype is gt.int64
    assert repr(g_mod) == repr(t_mod)
    assert repr(BatchNorm1d(4, momentum=None)) == repr(torch.nn.BatchNorm1d(4, momentum=None))
    # Checkpoints saved before num_batches_tracked existed still load strictly.
    old = {k: v for k, v in g_mod.state_dict().items() if k != "num_batches_tracked"}
    old["running_mean"] = gt.full((4,), 2.0)
    fresh = BatchNorm2d(4)
    fresh.num_batches_tracked.fill_(7)
    result = fresh.load_state_dict(old)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert fresh.num_batches_tracked.item() == 7
    assert fresh.running_mean.tolist() == [2.0] * 4
    nested = gt.nn.modules.container.Sequential(BatchNorm2d(4))
    nested.load_state_dict({"0." + k: v for k, v in old.items()})
    assert nested[0].num_batches_tracked.item() == 0
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        BatchNorm2d(4)(gt.randn(2, 4, 3))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        BatchNorm1d(4)(gt.randn(2, 4, 3, 3))
    assert BatchNorm3d(2)(gt.randn(2, 2, 2, 2, 2)).shape == (2, 2, 2, 2, 2)


# == layer norm =================================================================================
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,norm", [((6, 8), (8,)), ((3, 4, 8), (8,)), ((3, 4, 5), (4, 5)),
                                        ((2, 3, 4, 5), (3, 4, 5)), ((7,), (7,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_parity(device, dtype, shape, norm, affine):
    x, tx = _pair(shape, dtype, device)
    w, tw = _pair(norm, dtype, device, seed=1) if affine else (None, None)
    b, tb = _pair(norm, dtype, device, seed=2) if affine else (None, None)
    out, t_out = layer_norm(x, norm, w, b, 1e-4), TF.layer_norm(tx, norm, tw, tb, 1e-4)
    atol, rtol = _tol(dtype)
    assert_close(out, t_out.detach(), atol=atol, rtol=rtol)
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (w, tw), (b, tb)], dtype)


def test_layer_norm_module(device):
    for kwargs in ({}, {"elementwise_affine": False}, {"bias": False}):
        g_mod = LayerNorm([3, 4], eps=1e-6, device=device, **kwargs)
        t_mod = torch.nn.LayerNorm([3, 4], eps=1e-6, **kwargs)
        assert list(g_mod.state_dict()) == list(t_mod.state_dict())
        assert repr(g_mod) == repr(t_mod)
        x, tx = _pair((2, 3, 4), gt.float32, device)
        out, t_out = g_mod(x), t_mod(tx)
        assert_close(out, t_out.detach(), atol=2e-5, rtol=2e-5)
        _backward(out, t_out, device)
        _assert_grads([(x, tx)] + [(getattr(g_mod, n), getattr(t_mod, n))
                                   for n, _ in t_mod.named_parameters()], gt.float32)


@pytest.mark.parametrize("cls,shape,param_shape", [
    (LayerNorm, (2, 3, 4), [3, 4]), (GroupNorm, (2, 4, 3), None), (BatchNorm1d, (5, 4), None)])
def test_norm_parameter_grads_are_stored_without_a_copy(device, monkeypatch, cls, shape,
                                                        param_shape):
    """The fused backward returns the weight and bias gradients as fresh tensors of the
    parameter's shape (not views), so the engine stores them as ``.grad`` without a copy."""
    from gputensor.autograd import engine_modes

    mod = cls(param_shape, device=device) if cls is LayerNorm else \
        cls(2, 4, device=device) if cls is GroupNorm else cls(4, device=device)
    monkeypatch.setattr(engine_modes, "clone_obey_contract",
                        lambda g, p: pytest.fail(f"gradient of {tuple(p.shape)} copied"))
    mod(gt.randn(*shape, device=device, requires_grad=True)).sum().backward()
    assert mod.weight.grad.shape == mod.weight.shape and mod.bias.grad._base is None


def test_layer_norm_errors():
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[5\], expected input with "
                                           r"shape \[\*, 5\], but got input of size\[3, 4\]"):
        layer_norm(gt.randn(3, 4), (5,))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape as "
                                           "normalized_shape"):
        layer_norm(gt.randn(3, 4), (4,), gt.ones(5))


# == group norm =================================================================================
@pytest.mark.parametrize("dtype", DTYPES)
# (groups of one or two elements normalise to constants: their gradients are pure rounding
# noise, so every group here holds at least four elements)
@pytest.mark.parametrize("shape,groups", [((4, 6), 1), ((3, 6, 4), 3), ((3, 6, 5), 6),
                                          ((2, 6, 3, 4), 1), ((2, 6, 3, 4), 2)])
def test_group_norm_parity(device, dtype, shape, groups):
    x, tx = _pair(shape, dtype, device)
    w, tw = _pair((6,), dtype, device, seed=1)
    b, tb = _pair((6,), dtype, device, seed=2)
    out, t_out = group_norm(x, groups, w, b), TF.group_norm(tx, groups, tw, tb)
    atol, rtol = _tol(dtype)
    assert_close(out, t_out.detach(), atol=atol, rtol=rtol)
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (w, tw), (b, tb)], dtype)


def test_group_norm_module_and_errors(device):
    g_mod, t_mod = GroupNorm(2, 4, device=device), torch.nn.GroupNorm(2, 4)
    assert repr(g_mod) == repr(t_mod) and list(g_mod.state_dict()) == list(t_mod.state_dict())
    x, tx = _pair((3, 4, 5), gt.float32, device)
    out, t_out = g_mod(x), t_mod(tx)
    assert_close(out, t_out.detach(), atol=2e-5, rtol=2e-5)
    _backward(out, t_out, device)
    _assert_grads([(x, tx), (g_mod.weight, t_mod.weight), (g_mod.bias, t_mod.bias)], gt.float32)
    no_affine = GroupNorm(2, 4, affine=False, device=device)
    assert no_affine.weight is None
    assert_close(no_affine(x.detach()), TF.group_norm(tx.detach(), 2), atol=2e-5, rtol=2e-5)
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups "
                                         r"\(3\)"):
        GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be "
                                           "divisible by num_groups"):
        group_norm(gt.randn(3, 4, device=device), 3)
    with pytest.raises(RuntimeError, match="Expected weight to be a vector of size equal to the "
                                           "number of channels"):
        group_norm(gt.randn(3, 4, device=device), 2, gt.ones(3, device=device))


# == the ops' derivatives =======================================================================
def _f64(shape, seed):
    return gt.tensor(np.random.default_rng(seed).standard_normal(shape)).requires_grad_()


@pytest.mark.parametrize("name", ["batch_norm", "layer_norm", "group_norm"])
def test_norm_ops_gradcheck_and_gradgradcheck(name):
    x, w, b = _f64((3, 4, 5), 0), _f64((4,), 1), _f64((4,), 2)
    fns = {
        "batch_norm": lambda x, w, b: nn_ops._batch_norm([x, w, b], None, None, 0.1, 1e-5)[0],
        "layer_norm": lambda x, w, b: nn_ops._layer_norm([x.transpose(1, 2), w, b], 1, 1e-5)[0],
        "group_norm": lambda x, w, b: nn_ops._group_norm([x, w, b], 2, 1e-5)[0],
    }
    assert gt.autograd.gradcheck(fns[name], (x, w, b))
    assert gt.autograd.gradgradcheck(fns[name], (x, w, b))


def test_norm_backward_runs_one_fused_op():
    # The three gradients of a norm come from one node and one backward kernel call.
    x, w, b = _f64((3, 4, 5), 0), _f64((4,), 1), _f64((4,), 2)
    out = nn_ops._batch_norm([x, w, b], None, None, 0.1, 1e-5)[0]
    assert type(out.grad_fn).__name__ == "BatchNormBackward0"
    calls = []
    kernels = gt.kernels.registry.BACKENDS["cpu", "strided"].kernels
    original = kernels["_batch_norm_backward"]
    kernels["_batch_norm_backward"] = lambda *a: (calls.append(1), original(*a))
    try:
        out.sum().backward()
    finally:
        kernels["_batch_norm_backward"] = original
    assert len(calls) == 1
    assert x.grad is not None and w.grad is not None and b.grad is not None


def test_eval_batch_norm_gradcheck():
    # eval mode: one fused scale-and-shift op, differentiable to any order
    x, w, b = _f64((3, 4, 2), 0), _f64((4,), 1), _f64((4,), 2)
    mean, var = gt.randn(4, dtype=gt.float64), gt.rand(4, dtype=gt.float64) + 0.5

    def fn(x, w, b):
        return batch_norm(x, mean, var, w, b, training=False, eps=1e-3)
    assert gt.autograd.gradcheck(fn, (x, w, b))
    assert gt.autograd.gradgradcheck(fn, (x, w, b))
    scale, shift = _f64((1, 4, 1), 3), _f64((1, 4, 1), 4)
    assert gt.autograd.gradcheck(nn_ops._scale_shift, (x, scale, shift))


# == in-place activations after a norm (issue 16) ===============================================
# The norms save their input and statistics, not their output, so an in-place activation on
# the output (the usual Conv -> BatchNorm -> ReLU(inplace=True)) leaves backward intact.
_NORM_STACKS = {
    "BatchNorm1d": (lambda nn: [nn.Linear(5, 4), nn.BatchNorm1d(4)], (6, 5)),
    "BatchNorm2d": (lambda nn: [nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)], (2, 3, 6, 6)),
    "LayerNorm": (lambda nn: [nn.Linear(5, 4), nn.LayerNorm(4)], (3, 2, 5)),
    "GroupNorm": (lambda nn: [nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4)], (2, 3, 6, 6)),
}


@pytest.mark.parametrize("act", ["ReLU", "LeakyReLU"])
@pytest.mark.parametrize("norm", list(_NORM_STACKS))
def test_norm_then_inplace_activation_trains(device, norm, act):
    layers, shape = _NORM_STACKS[norm]
    t_mod = torch.nn.Sequential(*layers(torch.nn), getattr(torch.nn, act)(inplace=True))
    g_mod = gt.nn.Sequential(*layers(gt.nn), getattr(gt.nn, act)(inplace=True))
    t_mod.double()
    g_mod.to(device, gt.float64)
    g_mod.load_state_dict({k: gt.tensor(v.numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    g_opt = gt.optim.SGD(g_mod.parameters(), lr=0.1)
    t_opt = torch.optim.SGD(t_mod.parameters(), lr=0.1)
    x, tx = _pair(shape, gt.float64, device)
    _backward(g_mod(x), t_mod(tx), device)
    pairs = list(zip(g_mod.parameters(), t_mod.parameters(), strict=True))
    _assert_grads([(x, tx), *pairs], gt.float64)
    g_opt.step()
    t_opt.step()
    for g, t in zip(g_mod.state_dict().values(), t_mod.state_dict().values(), strict=True):
        assert_close(g, t, atol=1e-10, rtol=1e-10)


def test_norm_functionals_then_inplace_relu(device):
    # eval-mode batch norm, batch norm without running statistics and the functionals called
    # directly, each followed by an in-place activation on their output.
    x, tx = _pair((4, 3, 5), gt.float64, device)
    w, tw = _pair((3,), gt.float64, device, seed=1)
    b, tb = _pair((3,), gt.float64, device, seed=2)
    stats = [random_array((3,), gt.float64, 0.5, 2.0, seed=s) for s in (3, 4)]
    rm, rv = (gt.tensor(a, device=device) for a in stats)
    trm, trv = (torch.from_numpy(a.copy()) for a in stats)
    cases = [
        (lambda: batch_norm(x, rm, rv, w, b, False), lambda: TF.batch_norm(tx, trm, trv, tw, tb)),
        (lambda: batch_norm(x, None, None, w, b, True),
         lambda: TF.batch_norm(tx, None, None, tw, tb, True)),
        (lambda: layer_norm(x, (3, 5)), lambda: TF.layer_norm(tx, (3, 5))),
        (lambda: group_norm(x, 3, w, b), lambda: TF.group_norm(tx, 3, tw, tb)),
    ]
    for i, (g_fn, t_fn) in enumerate(cases):
        for t in (x, w, b, tx, tw, tb):
            t.grad = None
        _backward(g_fn().relu_(), t_fn().relu_(), device)
        _assert_grads([(x, tx)] if i == 2 else [(x, tx), (w, tw), (b, tb)], gt.float64)
