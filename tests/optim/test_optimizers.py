"""Parameter and state trajectories of every update rule against torch.optim (10 steps)."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.optim as optim
from tests.optim import (
    assert_params_close,
    assert_states_close,
    grad_of,
    make_params,
    run_both,
    set_grads,
    to_np,
)

torch = pytest.importorskip("torch")

TOL = {gt.float32: (1e-5, 1e-6), gt.float64: (1e-12, 1e-13)}
FUSABLE = {"SGD", "Adam", "AdamW", "Adagrad"}

CASES = [
    ("SGD", {"lr": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "betas": (0.3, 0.9), "eps": 1e-3}),  # lerp's weight >= 0.5 form
    ("Adam", {"lr": 0.01, "decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "maximize": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.2}),
    ("AdamW", {"lr": 0.01, "maximize": True}),
    ("RMSprop", {}),
    ("RMSprop", {"centered": True}),
    ("RMSprop", {"momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"centered": True, "momentum": 0.5, "maximize": True}),
    ("RMSprop", {"alpha": 0.3, "eps": 1e-4}),
    ("Adagrad", {}),
    ("Adagrad", {"lr_decay": 0.1, "initial_accumulator_value": 0.5}),
    ("Adagrad", {"weight_decay": 0.1, "eps": 1e-3, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"rho": 0.5, "weight_decay": 0.1, "lr": 0.5}),
    ("Adadelta", {"maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"weight_decay": 0.1, "betas": (0.5, 0.9)}),
    ("Adamax", {"maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("RAdam", {}),  # rho_t crosses 5 within the 10 steps: both branches run
    ("RAdam", {"weight_decay": 0.1}),
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
]


def _ids(case: tuple) -> str:
    name, kw = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kw.items())


def _grad_fn(kwargs: dict):
    # Maximizing runs on the negated field, so ascent converges like descent does.
    return (lambda x: -grad_of(x)) if kwargs.get("maximize") else grad_of


def _trajectory(name: str, kwargs: dict, dtype: gt.dtype, device: str = "cpu",
                steps: int = 10, **gt_only):
    g, t = make_params(dtype, device=device)
    g_opt = getattr(optim, name)(g, **kwargs, **gt_only)
    t_opt = getattr(torch.optim, name)(t, **kwargs)
    fn = _grad_fn(kwargs)
    for _ in range(steps):
        set_grads(g, t, fn)
        g_opt.step()
        t_opt.step()
    return g, t, g_opt, t_opt


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_matches_torch(case, dtype, device):
    name, kwargs = case
    g, t, g_opt, t_opt = _trajectory(name, kwargs, dtype, device)
    rtol, atol = TOL[dtype]
    assert_params_close(g, t, rtol, atol)
    assert_states_close(g_opt, t_opt, rtol, atol)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in FUSABLE],
                         ids=[_ids(c) for c in CASES if c[0] in FUSABLE])
def test_unfused_path_matches_torch_and_fused(case):
    """fused=False takes the op-by-op path; it agrees with torch and with the fused kernel."""
    name, kwargs = case
    g, t, _, _ = _trajectory(name, kwargs, gt.float32, fused=False)
    assert_params_close(g, t, *TOL[gt.float32])
    g_fused, _, _, _ = _trajectory(name, kwargs, gt.float32, fused=True)
    for a, b in zip(g, g_fused, strict=True):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
def test_foreach_flag_is_accepted(name):
    kwargs = {"lr": 0.01, "momentum": 0.9} if name == "SGD" else {"lr": 0.01}
    g, t, _, _ = _trajectory(name, kwargs, gt.float32, foreach=True)
    assert_params_close(g, t, *TOL[gt.float32])


COMPLEX_CASES = [("SGD", {"lr": 0.05, "momentum": 0.9}), ("Adam", {"lr": 0.01, "amsgrad": True}),
                 ("AdamW", {"lr": 0.01}), ("RMSprop", {"centered": True, "momentum": 0.5}),
                 ("Adagrad", {}), ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}),
                 ("RAdam", {"weight_decay": 0.1})]


@pytest.mark.parametrize("case", COMPLEX_CASES, ids=[c[0] for c in COMPLEX_CASES])
def test_complex_params_match_torch(case):
    """Complex params update as their real view (as torch does with view_as_real)."""
    name, kwargs = case
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    g, t = [gt.tensor(a).requires_grad_()], [torch.tensor(a, requires_grad=True)]
    g_opt, t_opt = getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs)
    for _ in range(10):
        set_grads(g, t, lambda x: (2 * (x - 0.5) + 0.1 * x * np.abs(x) ** 2).astype(x.dtype))
        g_opt.step()
        t_opt.step()
    np.testing.assert_allclose(to_np(g[0]), to_np(t[0]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("Adam", {"lr": 0.01, "amsgrad": True}),
                                         ("SGD", {"lr": 0.05, "momentum": 0.9}),
                                         ("Adagrad", {})])
def test_noncontiguous_params_fall_back(name, kwargs):
    """Strided params can't use the fused kernel; fused=None quietly takes the op path."""
    arrays = [np.random.default_rng(i).uniform(-2, 2, (4, 5)).astype(np.float32)
              for i in range(2)]
    g, t = [], []
    for a in arrays:
        gb, tb = gt.zeros(5, 4), torch.zeros(5, 4)
        gp, tp = gb.t(), tb.t()  # transposed views: not contiguous
        gp.copy_(gt.tensor(a))
        tp.copy_(torch.from_numpy(a))
        g.append(gp.requires_grad_())
        t.append(tp.requires_grad_())
    assert not g[0].is_contiguous()
    g_opt, t_opt = getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs)
    run_both(g_opt, t_opt, g, t)
    assert_params_close(g, t, *TOL[gt.float32])


def test_params_without_grad_are_skipped():
    g, t = make_params()
    g_opt, t_opt = optim.Adam(g, lr=0.1), torch.optim.Adam(t, lr=0.1)
    for _ in range(3):
        set_grads(g, t)
        g[1].grad, t[1].grad = None, None
        g_opt.step()
        t_opt.step()
    assert_params_close(g, t, *TOL[gt.float32])
    assert g[1] not in g_opt.state
    assert_states_close(g_opt, t_opt, *TOL[gt.float32])


def test_param_groups_with_own_hyperparameters():
    g, t = make_params(gt.float64)
    groups = lambda ps: [{"params": ps[:1], "lr": 0.1, "momentum": 0.5},  # noqa: E731
                         {"params": ps[1:], "weight_decay": 0.2}]
    g_opt = optim.SGD(groups(g), lr=0.01, momentum=0.9)
    t_opt = torch.optim.SGD(groups(t), lr=0.01, momentum=0.9)
    run_both(g_opt, t_opt, g, t)
    assert_params_close(g, t, *TOL[gt.float64])
    assert g_opt.param_groups[1]["lr"] == 0.01 and g_opt.param_groups[1]["momentum"] == 0.9


def test_lr_change_between_steps_takes_effect():
    g, t = make_params()
    g_opt, t_opt = optim.Adam(g, lr=0.1), torch.optim.Adam(t, lr=0.1)
    for i in range(6):
        for opt in (g_opt, t_opt):
            opt.param_groups[0]["lr"] = 0.1 / (i + 1)
        set_grads(g, t)
        g_opt.step()
        t_opt.step()
    assert_params_close(g, t, *TOL[gt.float32])


def test_tensor_lr():
    g, t = make_params(gt.float64)
    g_opt = optim.SGD(g, lr=gt.tensor(0.05, dtype=gt.float64), momentum=0.9)
    t_opt = torch.optim.SGD(t, lr=torch.tensor(0.05, dtype=torch.float64), momentum=0.9)
    run_both(g_opt, t_opt, g, t)
    assert_params_close(g, t, *TOL[gt.float64])


def test_closure_loss_is_returned_and_runs_with_grad_enabled():
    g, _ = make_params()
    opt = optim.SGD(g, lr=0.1)
    seen = []

    def closure():
        seen.append(gt.is_grad_enabled())
        for p in g:
            p.grad = gt.ones_like(p)
        return 3.5

    with gt.no_grad():
        assert opt.step(closure) == 3.5
    assert seen == [True]
    np.testing.assert_allclose(to_np(g[0]), make_params()[0][0].detach().numpy() - 0.1,
                               rtol=1e-6)


def test_step_bumps_version_counters():
    g, _ = make_params()
    opt = optim.Adam(g)
    before = [p._version for p in g]
    for p in g:
        p.grad = gt.ones_like(p)
    opt.step()
    assert all(p._version > v for p, v in zip(g, before, strict=True))


def test_default_float64_uses_float64_step_counters():
    gt.set_default_dtype(gt.float64)
    torch.set_default_dtype(torch.float64)
    try:
        g, t = make_params(gt.float32)
        g_opt, t_opt = optim.NAdam(g), torch.optim.NAdam(t)
        run_both(g_opt, t_opt, g, t, steps=3)
        assert_states_close(g_opt, t_opt, *TOL[gt.float32])
    finally:
        torch.set_default_dtype(torch.float32)
