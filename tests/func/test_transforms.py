"""gt.func's differentiation transforms and module helpers against torch.func, composed with
vmap, on cpu and emulated cuda."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor import func

from .helpers import close, pair


def _mlp(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(4, 8), m.nn.Tanh(), m.nn.Linear(8, 3))


def _same_params(model, tmodel, device):
    ours = {k: v.detach().to(device) for k, v in model.named_parameters()}
    theirs = {k: torch.tensor(v.detach().cpu().numpy()) for k, v in ours.items()}
    for k, p in tmodel.named_parameters():
        p.data.copy_(theirs[k])
    return ours, theirs


def test_per_sample_gradients_of_an_mlp(device):
    model, tmodel = _mlp(gt).to(device), _mlp(torch)
    params, tparams = _same_params(model, tmodel, device)
    x, tx = pair((6, 4), device, "float32")
    y = torch.tensor([0, 2, 1, 1, 0, 2])

    def loss(m, fc, p, xb, yb):
        return m.nn.functional.cross_entropy(fc(p, (xb.unsqueeze(0),)), yb.unsqueeze(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # all batching rules, no per-sample fallback
        grads = func.vmap(func.grad(lambda p, a, b: loss(
            gt, lambda q, args: func.functional_call(model, q, args), p, a, b)),
            in_dims=(None, 0, 0))(params, x, gt.tensor(y.numpy(), device=device))
    expected = torch.func.vmap(torch.func.grad(lambda p, a, b: loss(
        torch, lambda q, args: torch.func.functional_call(tmodel, q, args), p, a, b)),
        in_dims=(None, 0, 0))(tparams, tx, y)
    close(grads, expected, atol=1e-5)


def _f(m, x, w):
    return ((x @ w).tanh() * x.sum()).sum()


def test_grad_argnums_has_aux_and_value(device):
    (x, tx), (w, tw) = pair((3,), device), pair((3, 2), device, seed=1)
    close(func.grad(lambda a, b: _f(gt, a, b), argnums=(0, 1))(x, w),
          torch.func.grad(lambda a, b: _f(torch, a, b), argnums=(0, 1))(tx, tw))
    g, (value, aux) = func.grad_and_value(lambda a: (_f(gt, a, w), a * 2), has_aux=True)(x)
    tg, (tv, ta) = torch.func.grad_and_value(lambda a: (_f(torch, a, tw), a * 2),
                                             has_aux=True)(tx)
    close([g, value, aux], [tg, tv, ta])
    assert not value.requires_grad
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        func.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 2 positional inputs"):
        func.grad(lambda a, b: _f(gt, a, b), argnums=2)(x, w)


def test_higher_order_and_jacobians(device):
    (x, tx), (w, tw) = pair((3,), device), pair((3, 2), device, seed=1)
    cases = [
        (lambda m, fn: fn.grad(lambda a: fn.grad(lambda b: (b.sin() * a).sum())(a).pow(2).sum())(
            x if m is gt else tx)),
        (lambda m, fn: fn.jacrev(lambda a: (a.unsqueeze(-1) * (w if m is gt else tw)).sin())(
            x if m is gt else tx)),
        (lambda m, fn: fn.jacrev(lambda a, b: _f(m, a, b) * a, argnums=(0, 1))(
            x if m is gt else tx, w if m is gt else tw)),
        (lambda m, fn: fn.jacfwd(lambda a: a.exp() * a.sum())(x if m is gt else tx)),
        (lambda m, fn: fn.hessian(lambda a: _f(m, a, w if m is gt else tw))(x if m is gt else tx)),
        (lambda m, fn: fn.vmap(fn.jacrev(lambda a: a.sin() * a))(
            (w if m is gt else tw).t().contiguous())),
        (lambda m, fn: fn.vmap(fn.hessian(lambda a: a.pow(3).sum()))(
            (w if m is gt else tw).t().contiguous())),
    ]
    for case in cases:
        close(case(gt, func), case(torch, torch.func))


def _small_net(m, w1, b1, w2):
    def f(x):
        h = m.nn.functional.linear(x, w1, b1).tanh()
        y = m.nn.functional.softmax(w2 @ h, -1)
        return (y * y).sum() + m.nn.functional.gelu(h).pow(2).mean()
    return f


def _net_params(device):
    return [pair(s, device, seed=i) for i, s in enumerate(((5, 4), (5,), (3, 5)))]


def test_forward_over_reverse_on_a_small_network(device):
    params = _net_params(device)
    f = _small_net(gt, *(p for p, _ in params))
    tf = _small_net(torch, *(t for _, t in params))
    (x, tx), (v, tv) = pair((4,), device, seed=5), pair((4,), device, seed=6)
    close(func.jacfwd(func.jacrev(f))(x), torch.func.jacfwd(torch.func.jacrev(tf))(tx))
    close(func.hessian(f)(x), torch.func.hessian(tf)(tx))
    close(func.jvp(func.grad(f), (x,), (v,)), torch.func.jvp(torch.func.grad(tf), (tx,), (tv,)))
    # in the parameters, several at once, and per sample under vmap
    xs, txs = pair((3, 4), device, seed=7)

    def in_params(m, fn, x):
        return lambda w1, b1: _small_net(m, w1, b1, w2)(x)
    w1, b1, w2 = (p for p, _ in params)
    tw1, tb1, tw2 = (t for _, t in params)
    close(func.hessian(lambda a, b: _small_net(gt, a, b, w2)(x), argnums=(0, 1))(w1, b1),
          torch.func.hessian(lambda a, b: _small_net(torch, a, b, tw2)(tx), argnums=(0, 1))(
              tw1, tb1))
    close(func.vmap(func.hessian(f))(xs), torch.func.vmap(torch.func.hessian(tf))(txs))
    value, jvp_out = func.jvp(func.grad_and_value(f), (x,), (v,))
    tvalue, tjvp_out = torch.func.jvp(torch.func.grad_and_value(tf), (tx,), (tv,))
    close([value, jvp_out], [tvalue, tjvp_out])


def test_jacrev_is_one_batched_backward(device):
    (w, tw), (b, tb), (x, tx) = (pair(s, device, "float32", seed=i)
                                 for i, s in enumerate(((16, 16), (16,), (16,))))

    def layer(m, w, b):
        return lambda a: m.nn.functional.linear(a, w, b).tanh()
    calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # every backward formula batches: no per-sample loop
        jac = func.jacrev(layer(gt, w, b))(x)
        out, vjp_fn = func.vjp(lambda a, c: (layer(gt, w, b)(a) * c, c.sum()), x, b)
        cts, tcts = pair((5, 16), device, "float32", seed=9)
        rows = func.vmap(vjp_fn, in_dims=((0, None),))((cts, gt.ones((), device=device)))
        calls.append(rows)
    close(jac, torch.func.jacrev(layer(torch, tw, tb))(tx), atol=1e-5)
    _, tvjp_fn = torch.func.vjp(lambda a, c: (layer(torch, tw, tb)(a) * c, c.sum()), tx, tb)
    close(calls[0], torch.func.vmap(tvjp_fn, in_dims=((0, None),))((tcts, torch.ones(()))),
          atol=1e-5)
    # a vjp inside a vmap, its vjp_fn under a second vmap
    xs, txs = pair((2, 16), device, "float32", seed=4)
    close(func.vmap(func.jacrev(layer(gt, w, b)))(xs),
          torch.func.vmap(torch.func.jacrev(layer(torch, tw, tb)))(txs), atol=1e-5)


def test_vjp_and_jvp(device):
    (x, tx), (v, tv) = pair((4,), device), pair((4,), device, seed=2)
    out, fn = func.vjp(lambda a: (a.sin(), a * a.sum()), x)
    tout, tfn = torch.func.vjp(lambda a: (a.sin(), a * a.sum()), tx)
    close([out, fn((v, v))], [tout, tfn((tv, tv))])
    close(func.jvp(lambda a: a.exp() * a, (x,), (v,)), torch.func.jvp(lambda a: a.exp() * a,
                                                                      (tx,), (tv,)))
    value, jvp_fn = func.linearize(lambda a: a.sin() * 2, x)
    tvalue, tjvp_fn = torch.func.linearize(lambda a: a.sin() * 2, tx)
    close([value, jvp_fn(v)], [tvalue, tjvp_fn(tv)])
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        func.jvp(lambda a: a, x, (v,))


def test_functional_call_tied_weights_and_strict(device):
    model = gt.nn.Sequential(gt.nn.Linear(3, 3), gt.nn.Linear(3, 3)).to(device)
    model[1].weight = model[0].weight
    x = gt.randn(2, 3, device=device)
    zero = gt.zeros(3, 3, device=device)
    out = func.functional_call(model, {"0.weight": zero}, (x,))
    expected = model[1].bias + (model[0].bias @ zero.t())
    np.testing.assert_allclose(out.detach().cpu().numpy(),
                               expected.expand(2, 3).detach().cpu().numpy(), atol=1e-6)
    assert model[0].weight is model[1].weight and model[0].weight is not zero   # restored
    untied = func.functional_call(model, {"0.weight": zero}, (x,), tie_weights=False)
    assert not np.allclose(untied.detach().cpu().numpy(), out.detach().cpu().numpy())
    with pytest.raises(RuntimeError, match="Missing key\\(s\\)"):
        func.functional_call(model, {"0.weight": zero}, (x,), strict=True)
    with pytest.raises(ValueError, match="which are tied"):
        func.functional_call(model, {"0.weight": zero, "1.weight": zero + 1}, (x,))


def test_stack_module_state_ensemble(device):
    models = [gt.nn.Linear(3, 2).to(device) for _ in range(4)]
    params, buffers = func.stack_module_state(models)
    assert params["weight"].shape == (4, 2, 3) and params["weight"].requires_grad
    x = gt.randn(5, 3, device=device)
    out = func.vmap(lambda p: func.functional_call(models[0], p, (x,)))(params)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().cpu().numpy(), m(x).detach().cpu().numpy(),
                                   atol=1e-6)
    bn = gt.nn.Sequential(gt.nn.BatchNorm1d(3))
    func.replace_all_batch_norm_modules_(bn)
    assert bn[0].running_mean is None and not bn[0].track_running_stats
