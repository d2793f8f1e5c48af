"""The Optimizer base: construction errors, param groups, zero_grad, repr, hooks, state dicts."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import gputensor as gt
import gputensor.optim as optim
from tests.optim import assert_params_close, make_params, run_both, set_grads, to_np

torch = pytest.importorskip("torch")

ALL = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
       "LBFGS"]


def _param(*shape: int) -> gt.Tensor:
    return gt.zeros(*shape).requires_grad_()


# -- construction ----------------------------------------------------------------------------
def test_empty_parameter_list():
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)


def test_tensor_instead_of_iterable():
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(_param(3), lr=0.1)


def test_non_tensor_param():
    with pytest.raises(TypeError, match="can only optimize Tensors.*list"):
        optim.Adam([_param(2), [1.0, 2.0]])


def test_non_leaf_param():
    x = _param(3)
    y = x * 2
    if y.is_leaf:  # the autograd engine may not record ops yet: mark y as an op's output
        y.grad_fn = object()
    with pytest.raises(ValueError, match="non-leaf Tensor"):
        optim.SGD([y], lr=0.1)


def test_duplicate_params_rejected():
    p = _param(3)
    with pytest.raises(ValueError, match="duplicate parameters.*parameter 1"):
        optim.SGD([p, p], lr=0.1)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [_param(2), p]})
    assert len(opt.param_groups) == 1


def test_set_of_params_rejected():
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {_param(2)}}], lr=0.1)


@pytest.mark.parametrize("name", ALL)
def test_negative_lr(name):
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        getattr(optim, name)([_param(2)], lr=-0.1)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"])
@pytest.mark.parametrize("betas,index", [((1.0, 0.9), 0), ((-0.1, 0.9), 0), ((0.9, 1.0), 1)])
def test_betas_out_of_range(name, betas, index):
    with pytest.raises(ValueError, match=f"Invalid beta parameter at index {index}"):
        getattr(optim, name)([_param(2)], betas=betas)


@pytest.mark.parametrize("name,kwargs,match", [
    ("SGD", {"lr": 0.1, "momentum": -1}, "momentum"),
    ("SGD", {"lr": 0.1, "weight_decay": -1}, "weight_decay"),
    ("SGD", {"lr": 0.1, "nesterov": True}, "Nesterov"),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "dampening": 0.1}, "Nesterov"),
    ("Adam", {"eps": -1e-8}, "epsilon"),
    ("Adam", {"weight_decay": -1}, "weight_decay"),
    ("Adam", {"fused": True, "foreach": True}, "cannot be `True` together"),
    ("Adam", {"capturable": True}, "capturable=True is not supported"),
    ("RMSprop", {"alpha": -1}, "alpha"),
    ("Adagrad", {"lr_decay": -1}, "lr_decay"),
    ("Adagrad", {"initial_accumulator_value": -1}, "initial_accumulator_value"),
    ("Adadelta", {"rho": 1.5}, "rho"),
    ("NAdam", {"momentum_decay": -1}, "momentum_decay"),
    ("LBFGS", {"line_search_fn": "armijo"}, "strong_wolfe"),
])
def test_invalid_hyperparameters(name, kwargs, match):
    with pytest.raises((ValueError, RuntimeError), match=match):
        getattr(optim, name)([_param(2)], **kwargs)


def test_lbfgs_rejects_param_groups():
    with pytest.raises(ValueError, match="per-parameter options"):
        optim.LBFGS([{"params": [_param(2)]}, {"params": [_param(3)]}])


# -- param groups, repr ------------------------------------------------------------------------
def test_add_param_group_fills_defaults():
    opt = optim.Adam([_param(2)], lr=0.01, betas=(0.8, 0.9))
    q = _param(3)
    opt.add_param_group({"params": q, "lr": 0.5})
    group = opt.param_groups[1]
    assert group["params"] == [q] and group["lr"] == 0.5 and group["betas"] == (0.8, 0.9)
    with pytest.raises(TypeError, match="must be a dict"):
        opt.add_param_group([q])


def test_named_params():
    a, b = _param(2), _param(3)
    opt = optim.SGD([("a", a), ("b", b)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["a", "b"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["a", "b"]
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": [_param(1)]})


def test_required_default():
    class Custom(optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": optim.required})

    with pytest.raises(ValueError, match="required optimization parameter lr"):
        Custom([_param(2)])
    assert Custom([{"params": [_param(2)], "lr": 0.1}]).param_groups[0]["lr"] == 0.1


@pytest.mark.parametrize("name", ALL)
def test_repr_and_group_keys_match_torch(name):
    groups = lambda a, b: [{"params": [a]}, {"params": [b], "lr": 0.5}]  # noqa: E731
    if name == "LBFGS":  # one group only
        groups = lambda a, b: [a]  # noqa: E731
    g = getattr(optim, name)(groups(_param(2), _param(3)))
    t = getattr(torch.optim, name)(groups(torch.zeros(2, requires_grad=True),
                                          torch.zeros(3, requires_grad=True)))
    assert repr(g) == repr(t)
    assert g.state_dict()["param_groups"] == t.state_dict()["param_groups"]


def test_base_optimizer_without_rule():
    opt = optim.Optimizer([_param(2)], {"lr": 0.1})
    with pytest.raises(TypeError, match="defines no update rule"):
        opt.step()


def test_custom_subclass_step_runs_hooks_once():
    calls = []

    class Halve(optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.5})

        def _update_group(self, group):
            for p in group["params"]:
                p.mul_(group["lr"])

        def step(self, closure=None):
            calls.append("step")
            return super().step(closure)

    p = gt.ones(3).requires_grad_()
    opt = Halve([p])
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    handle = opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    opt.step()
    assert calls == ["pre", "step", "post"]
    np.testing.assert_array_equal(to_np(p), [0.5] * 3)
    handle.remove()
    opt.step()
    assert calls[3:] == ["pre", "step"]


# -- zero_grad -----------------------------------------------------------------------------------
def test_zero_grad():
    g, _ = make_params()
    opt = optim.SGD(g, lr=0.1)
    for p in g:
        p.grad = gt.ones_like(p)
    grads = [p.grad for p in g]
    opt.zero_grad(set_to_none=False)
    for p, gr in zip(g, grads, strict=True):
        assert p.grad is gr
        np.testing.assert_array_equal(to_np(gr), 0)
    opt.zero_grad()
    assert all(p.grad is None for p in g)


# -- state dicts ------------------------------------------------------------------------------
ROUND_TRIP = [("SGD", {"lr": 0.05, "momentum": 0.9}), ("Adam", {"lr": 0.01, "amsgrad": True}),
              ("AdamW", {"lr": 0.01}), ("RMSprop", {"centered": True, "momentum": 0.5}),
              ("Adagrad", {"lr_decay": 0.01}), ("Adadelta", {}), ("Adamax", {}),
              ("NAdam", {}), ("RAdam", {})]


@pytest.mark.parametrize("name,kwargs", ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_state_dict_round_trip_continues_trajectory(name, kwargs):
    """Save after 5 steps, load into a new optimizer over copies of the params, run 5 more:
    the same parameters as 10 uninterrupted steps."""
    g, t = make_params()
    g_opt, t_opt = getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs)
    run_both(g_opt, t_opt, g, t, steps=5)
    saved = copy.deepcopy(g_opt.state_dict())
    g2 = [p.detach().clone().requires_grad_() for p in g]
    resumed = getattr(optim, name)(g2, lr=123.0)  # hyper-parameters come from the state dict
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == g_opt.param_groups[0]["lr"]
    assert resumed.param_groups[0]["params"] == g2
    for _ in range(5):
        set_grads(g, t)
        set_grads(g2, t)
        g_opt.step()
        resumed.step()
        t_opt.step()
    for a, b in zip(g, g2, strict=True):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    assert_params_close(g2, t, 1e-5, 1e-6)


def test_state_dict_format():
    g, t = make_params()
    groups = lambda ps: [{"params": ps[:2]}, {"params": ps[2:], "lr": 0.1}]  # noqa: E731
    g_opt, t_opt = optim.Adam(groups(g)), torch.optim.Adam(groups(t))
    run_both(g_opt, t_opt, g, t, steps=2)
    gs, ts = g_opt.state_dict(), t_opt.state_dict()
    assert gs["param_groups"] == ts["param_groups"]
    assert [p["params"] for p in gs["param_groups"]] == [[0, 1], [2]]
    assert set(gs["state"]) == {0, 1, 2}
    assert gs["state"][2]["step"].item() == 2.0
    assert gs["state"][2]["step"].dtype is gt.float32


def test_load_state_dict_casts_buffers_but_keeps_step():
    g64, _ = make_params(gt.float64)
    opt64 = optim.Adam(g64)
    for p in g64:
        p.grad = gt.ones_like(p)
    opt64.step()
    g32, _ = make_params(gt.float32)
    opt32 = optim.Adam(g32)
    opt32.load_state_dict(opt64.state_dict())
    st = opt32.state[g32[0]]
    assert st["exp_avg"].dtype is gt.float32 and st["exp_avg_sq"].dtype is gt.float32
    assert st["step"].dtype is gt.float32 and st["step"].item() == 1.0
    np.testing.assert_allclose(to_np(st["exp_avg"]), 0.1, rtol=1e-6)


def test_load_state_dict_mismatches():
    opt = optim.SGD([_param(2), _param(3)], lr=0.1)
    other = optim.SGD([{"params": [_param(2)]}, {"params": [_param(3)]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(other.state_dict())
    small = optim.SGD([_param(2)], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(small.state_dict())


def test_deepcopy_optimizer():
    g, _ = make_params()
    opt = optim.Adam(g)
    for p in g:
        p.grad = gt.ones_like(p)
    opt.step()
    clone = copy.deepcopy(opt)
    assert clone.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    assert len(clone.state) == len(opt.state)
