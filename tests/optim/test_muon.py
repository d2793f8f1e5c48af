"""gt.optim.Muon and gt.optim.swap_in_optimizer_params_and_state against PyTorch 2.13."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.optim as optim
from tests.optim import assert_params_close, assert_states_close, make_params, run_both, to_np

torch = pytest.importorskip("torch")

SHAPES_2D = [(5, 4), (3, 7), (6, 6)]  # tall (the iteration runs transposed), wide, square
CASES = [
    {},
    {"lr": 0.02, "momentum": 0.9, "weight_decay": 0.01},
    {"lr": 0.05, "nesterov": False, "ns_steps": 3},
    {"lr": 0.01, "adjust_lr_fn": "match_rms_adamw"},
    {"lr": 0.01, "adjust_lr_fn": "original", "ns_coefficients": (2.0, -1.5, 0.5), "eps": 1e-5},
]


@pytest.mark.parametrize("kwargs", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_muon_matches_torch(device: str, kwargs: dict, dtype: gt.dtype) -> None:
    g, t = make_params(dtype, shapes=SHAPES_2D, device=device)
    g_opt, t_opt = optim.Muon(g, **kwargs), torch.optim.Muon(t, **kwargs)
    run_both(g_opt, t_opt, g, t, steps=6)
    # The Newton-Schulz iteration runs in bfloat16 (as PyTorch's): a rounding step apart in
    # its last products moves an update by ~1e-2 of its size, times lr. cuBLAS sums the
    # bfloat16 products in another order than PyTorch's CPU kernels: on an H200 the six steps
    # ended up to 6.3e-2 lr apart (all within a few bfloat16 rounding steps per update).
    # The momentum buffers then follow gradients of those slightly different parameters (up to
    # 8.8e-4 apart, 0.8% of the buffer, on the H200).
    scale = 2e-2 if device == "cpu" else 1e-1
    assert_params_close(g, t, rtol=0, atol=scale * max(kwargs.get("lr", 1e-3), 1e-3))
    assert_states_close(g_opt, t_opt, rtol=1e-5 if device == "cpu" else 2e-2,
                        atol=1e-6 if device == "cpu" else 2e-3)
    assert g_opt.state_dict()["param_groups"] == t_opt.state_dict()["param_groups"]


def test_newton_schulz_orthogonalizes(device: str) -> None:
    """The iteration's output has singular values in about [0.5, 1.5], like PyTorch's."""
    from torch.optim._muon import _zeropower_via_newtonschulz as torch_ns

    from gputensor.optim.muon import _zeropower_via_newtonschulz

    x = np.random.default_rng(3).standard_normal((8, 5)).astype(np.float32)
    ours = _zeropower_via_newtonschulz(gt.tensor(x, device=device), (3.4445, -4.7750, 2.0315),
                                       5, 1e-7)
    theirs = torch_ns(torch.tensor(x), (3.4445, -4.7750, 2.0315), 5, 1e-7)
    assert ours.dtype is gt.bfloat16 and ours.shape == (8, 5)
    s = np.linalg.svd(ours.float().cpu().numpy(), compute_uv=False)
    assert s.min() > 0.5 and s.max() < 1.5
    np.testing.assert_allclose(ours.float().cpu().numpy(), theirs.float().numpy(), atol=3e-2)
    for bad, msg in [(dict(ns_steps=100), "less than 100"), (dict(grad=gt.ones(3)), "2D"),
                     (dict(ns_coefficients=(1.0, 2.0)), "exactly 3")]:
        args = {"grad": gt.ones(2, 2), "ns_coefficients": (1.0, 2.0, 3.0), "ns_steps": 2,
                "eps": 1e-7, **bad}
        with pytest.raises(ValueError, match=msg):
            _zeropower_via_newtonschulz(**args)


def test_muon_with_backward_and_closure(device: str) -> None:
    w = gt.randn(4, 3, device=device, requires_grad=True)
    tw = torch.tensor(to_np(w), requires_grad=True)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    g_opt, t_opt = optim.Muon([w], lr=0.02), torch.optim.Muon([tw], lr=0.02)

    def g_closure():
        g_opt.zero_grad()
        loss = (gt.tensor(x, device=device) @ w).pow(2).sum()
        loss.backward()
        return loss

    def t_closure():
        t_opt.zero_grad()
        loss = (torch.tensor(x) @ tw).pow(2).sum()
        loss.backward()
        return loss

    for _ in range(4):
        gl, tl = g_opt.step(g_closure), t_opt.step(t_closure)
        assert gl.item() == pytest.approx(tl.item(), rel=1e-3)
    np.testing.assert_allclose(to_np(w), to_np(tw), atol=1e-3)


def _rejects_like_torch(build_g, build_t) -> None:
    with pytest.raises(Exception) as theirs:
        build_t()
    with pytest.raises(type(theirs.value)) as ours:
        build_g()
    assert str(ours.value).replace("gputensor", "torch") == str(theirs.value)


@pytest.mark.parametrize("kwargs", [{"lr": -1.0}, {"momentum": -0.1}, {"weight_decay": -1.0},
                                    {"adjust_lr_fn": "rms"}])
def test_muon_rejects_bad_hyperparameters_like_torch(kwargs: dict) -> None:
    _rejects_like_torch(lambda: optim.Muon([gt.zeros(2, 2)], **kwargs),
                        lambda: torch.optim.Muon([torch.zeros(2, 2)], **kwargs))


def test_muon_rejects_non_matrices_and_bad_grads_like_torch() -> None:
    _rejects_like_torch(lambda: optim.Muon([gt.zeros(3)]), lambda: torch.optim.Muon(
        [torch.zeros(3)]))
    p, tp = gt.zeros(2, 2, dtype=gt.complex64), torch.zeros(2, 2, dtype=torch.complex64)
    p.grad, tp.grad = gt.ones_like(p), torch.ones_like(tp)
    _rejects_like_torch(optim.Muon([p]).step, torch.optim.Muon([tp]).step)
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        optim.Muon([gt.zeros(2, 2)], lr=gt.ones(2))


# -- swap_in_optimizer_params_and_state ----------------------------------------------------------
def _trained(lib, opt_cls, params):
    extra = {"momentum": 0.9} if opt_cls.__name__ == "SGD" else {}  # plain SGD keeps no state
    opt = opt_cls(params, lr=0.1, **extra)
    for p in params:
        p.grad = lib.ones_like(p)
    opt.step()
    return opt


@pytest.mark.parametrize("name", ["Adam", "SGD", "Muon"])
def test_swap_in_steps_the_swapped_tensors_like_torch(device: str, name: str) -> None:
    g, t = make_params(gt.float64, shapes=[(3, 2), (2, 2)], device=device)
    with gt.no_grad():
        g_opt = _trained(gt, getattr(optim, name), g)
    with torch.no_grad():
        t_opt = _trained(torch, getattr(torch.optim, name), t)
    g_live = [to_np(p).copy() for p in g]
    g_sd, t_sd = g_opt.state_dict(), t_opt.state_dict()
    g_swap = {f"p{i}": p.detach().clone() for i, p in enumerate(g)}
    t_swap = {f"p{i}": p.detach().clone() for i, p in enumerate(t)}
    for d in (g_swap, t_swap):
        for p in d.values():
            p.grad = p * 0 + 0.5
    g_sd = {"state": {k: {n: (v.clone() if isinstance(v, gt.Tensor) else v)
                          for n, v in s.items()} for k, s in g_sd["state"].items()},
            "param_groups": [dict(pg, lr=0.01) for pg in g_sd["param_groups"]]}
    t_sd = {"state": {k: {n: (v.clone() if isinstance(v, torch.Tensor) else v)
                          for n, v in s.items()} for k, s in t_sd["state"].items()},
            "param_groups": [dict(pg, lr=0.01) for pg in t_sd["param_groups"]]}
    live_groups = g_opt.param_groups[0]["params"]
    with optim.swap_in_optimizer_params_and_state(g_opt, g_swap, g_sd):
        assert g_opt.param_groups[0]["lr"] == 0.01
        g_opt.step()
    with torch.optim.swap_in_optimizer_params_and_state(t_opt, t_swap, t_sd):
        t_opt.step()
    # the swapped tensors moved as torch's did; the live ones and their state did not
    assert_params_close(list(g_swap.values()), list(t_swap.values()), rtol=1e-10, atol=1e-12)
    for k in t_sd["state"]:
        for n, v in t_sd["state"][k].items():
            if isinstance(v, torch.Tensor):
                np.testing.assert_allclose(to_np(g_sd["state"][k][n]), to_np(v), rtol=1e-10,
                                           atol=1e-12)
    for p, before in zip(g, g_live, strict=True):
        np.testing.assert_array_equal(to_np(p), before)
    assert g_opt.param_groups[0]["params"] is live_groups and g_opt.param_groups[0]["lr"] == 0.1
    assert all(p in g_opt.state for p in g)


def test_swap_in_validates_like_torch() -> None:
    g, t = make_params(gt.float32, shapes=[(2, 2)])
    g_opt, t_opt = optim.SGD(g, lr=0.1, momentum=0.9), torch.optim.SGD(t, lr=0.1, momentum=0.9)

    def both(g_args, t_args):
        def run(fn, opt, args):
            with fn(opt, *args):
                pass
        _rejects_like_torch(lambda: run(optim.swap_in_optimizer_params_and_state, g_opt, g_args),
                            lambda: run(torch.optim.swap_in_optimizer_params_and_state, t_opt,
                                        t_args))

    both(({}, {}), ({}, {}))  # uninitialized state
    g_opt.zero_grad()
    for p in g:
        p.grad = gt.ones_like(p)
    for p in t:
        p.grad = torch.ones_like(p)
    with gt.no_grad():
        g_opt.step()
    t_opt.step()
    gsd, tsd = g_opt.state_dict(), t_opt.state_dict()
    gp, tp = {"w": g[0].detach()}, {"w": t[0].detach()}
    both((gp, []), (tp, []))
    both((gp, {"state": [], "param_groups": []}), (tp, {"state": [], "param_groups": []}))
    both((gp, {"state": {0: 1}, "param_groups": []}), (tp, {"state": {0: 1}, "param_groups": []}))
    both((gp, {"state": {}, "param_groups": ()}), (tp, {"state": {}, "param_groups": ()}))
    both((gp, {"state": {}, "param_groups": []}), (tp, {"state": {}, "param_groups": []}))
    both((gp, {"state": {}, "param_groups": [dict(gsd["param_groups"][0], params=[0, 1])]}),
         (tp, {"state": {}, "param_groups": [dict(tsd["param_groups"][0], params=[0, 1])]}))
    both((gp, {"state": {}, "param_groups": [dict(gsd["param_groups"][0], extra=1)]}),
         (tp, {"state": {}, "param_groups": [dict(tsd["param_groups"][0], extra=1)]}))
    both((gp, {"state": {5: {}}, "param_groups": gsd["param_groups"]}),
         (tp, {"state": {5: {}}, "param_groups": tsd["param_groups"]}))
    both(({}, gsd), ({}, tsd))
