"""Rprop, ASGD, Adafactor and swa_utils (AveragedModel, update_bn, SWALR) against PyTorch."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

import gputensor as gt
import gputensor.optim as optim
from gputensor.optim import swa_utils
from tests.optim import (
    assert_params_close,
    assert_states_close,
    grad_of,
    make_params,
    set_grads,
    to_np,
)

torch = pytest.importorskip("torch")

TOL = {gt.float32: (2e-5, 1e-6), gt.float64: (1e-12, 1e-13)}
SHAPES_0D = [(5, 4), (7,), (3, 2, 2), ()]

CASES = [
    ("Rprop", {}),
    ("Rprop", {"lr": 0.2, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.4)}),
    ("Rprop", {"lr": 0.1, "maximize": True}),
    ("ASGD", {}),
    ("ASGD", {"lr": 0.05, "lambd": 0.05, "alpha": 0.5, "t0": 3, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.05, "t0": 0, "maximize": True}),
    ("Adafactor", {}),
    ("Adafactor", {"lr": 0.5, "beta2_decay": -0.5, "d": 2.0, "weight_decay": 0.1}),
    ("Adafactor", {"eps": (1e-20, 1e-2), "maximize": True}),
]


def _ids(case: tuple) -> str:
    name, kw = case
    return "-".join([name, *(f"{k}={v}" for k, v in kw.items())])


def field(x: np.ndarray) -> np.ndarray:
    """tests.optim's gradient field, kept an array for 0-d params."""
    return np.asarray(grad_of(x))


def _grad_fn(kwargs: dict):
    # Maximizing runs on the negated field, so ascent converges like descent does.
    return (lambda x: np.asarray(-field(x))) if kwargs.get("maximize") else field


def _pair(name: str, kwargs: dict, dtype: gt.dtype, device: str = "cpu", shapes=SHAPES_0D):
    g, t = make_params(dtype, shapes=shapes, device=device)
    return g, t, getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs)


def _steps(g, t, g_opt, t_opt, fn, steps: int, check=None) -> None:
    for _ in range(steps):
        set_grads(g, t, fn)
        g_opt.step()
        t_opt.step()
        if check is not None:
            check()


# -- trajectories -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_and_state_match_torch_every_step(case, dtype, device):
    name, kwargs = case
    g, t, g_opt, t_opt = _pair(name, kwargs, dtype, device)
    rtol, atol = TOL[dtype]

    def check():
        assert_params_close(g, t, rtol, atol)
        assert_states_close(g_opt, t_opt, rtol, atol)

    _steps(g, t, g_opt, t_opt, _grad_fn(kwargs), 8, check)


def test_rprop_sign_flips_reset_prev():
    """The overshoot branch runs: some coordinates flip sign, their prev is zeroed and their
    step size shrinks by etaminus (still matching torch)."""
    g, t, g_opt, t_opt = _pair("Rprop", {"lr": 0.5}, gt.float64)
    flips = 0

    def check():
        nonlocal flips
        flips += sum(int((to_np(g_opt.state[p]["prev"]) == 0).sum()) for p in g)

    _steps(g, t, g_opt, t_opt, field, 6, check)
    assert flips > 0
    assert_states_close(g_opt, t_opt, *TOL[gt.float64])


def test_asgd_averages_after_t0():
    """Past t0, mu < 1 and ax is a running average that differs from the param."""
    g, t, g_opt, t_opt = _pair("ASGD", {"lr": 0.1, "t0": 2}, gt.float64)
    _steps(g, t, g_opt, t_opt, field, 6)
    st = g_opt.state[g[0]]
    assert 0 < st["mu"].item() < 1
    assert not np.allclose(to_np(st["ax"]), to_np(g[0]))
    assert_states_close(g_opt, t_opt, *TOL[gt.float64])


def test_state_devices_and_dtypes(device):
    """As PyTorch keeps them: ASGD's step/eta/mu on the param's device, the Rprop and
    Adafactor step counters on the CPU; factored Adafactor state has reduced shapes."""
    g, _ = make_params(gt.float64, device=device)
    opts = {n: getattr(optim, n)([p.detach().clone().requires_grad_() for p in g])
            for n in ("Rprop", "ASGD", "Adafactor")}
    for opt in opts.values():
        for p in opt.param_groups[0]["params"]:
            p.grad = gt.ones_like(p)
        opt.step()
    p0 = opts["ASGD"].param_groups[0]["params"][0]
    st = opts["ASGD"].state[p0]
    for key in ("step", "eta", "mu"):
        assert st[key].device == gt.device(device) and st[key].dtype is gt.float32
    assert st["ax"].dtype is gt.float64 and st["ax"].device == gt.device(device)
    for name in ("Rprop", "Adafactor"):
        p = opts[name].param_groups[0]["params"][0]
        assert opts[name].state[p]["step"].device == gt.device("cpu")
    pa = opts["Adafactor"].param_groups[0]["params"]
    assert list(opts["Adafactor"].state[pa[0]]) == ["step", "row_var", "col_var"]
    assert opts["Adafactor"].state[pa[0]]["row_var"].shape == (5, 1)
    assert opts["Adafactor"].state[pa[2]]["col_var"].shape == (3, 1, 2)
    assert list(opts["Adafactor"].state[pa[1]]) == ["step", "variance"]


def test_default_float64_counters():
    gt.set_default_dtype(gt.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for name in ("ASGD", "Rprop", "Adafactor"):
            g, t, g_opt, t_opt = _pair(name, {"lr": 0.05}, gt.float32)
            _steps(g, t, g_opt, t_opt, field, 3)
            assert_states_close(g_opt, t_opt, *TOL[gt.float32])
            assert_params_close(g, t, *TOL[gt.float32])
    finally:
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("name,kwargs", [("Rprop", {"lr": 0.1}),
                                         ("ASGD", {"t0": 2, "weight_decay": 0.1})])
def test_complex_params_match_torch(name, kwargs):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex128)
    g, t = [gt.tensor(a).requires_grad_()], [torch.tensor(a, requires_grad=True)]
    g_opt, t_opt = getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs)
    field = lambda x: (2 * (x - 0.5) + 0.1 * x * np.abs(x) ** 2).astype(x.dtype)  # noqa: E731
    _steps(g, t, g_opt, t_opt, field, 6)
    assert_params_close(g, t, *TOL[gt.float64])
    assert_states_close(g_opt, t_opt, *TOL[gt.float64])


@pytest.mark.parametrize("name", ["Rprop", "ASGD", "Adafactor"])
def test_foreach_flag_is_accepted_and_changes_nothing(name):
    g, t, g_opt, t_opt = _pair(name, {"lr": 0.05}, gt.float64)
    g2 = [p.detach().clone().requires_grad_() for p in g]
    g_opt2 = getattr(optim, name)(g2, lr=0.05, foreach=True)
    for _ in range(4):
        set_grads(g, t, field)
        set_grads(g2, t, field)
        g_opt.step()
        g_opt2.step()
        t_opt.step()
    for a, b in zip(g, g2, strict=True):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    assert_params_close(g2, t, *TOL[gt.float64])


def test_params_without_grad_are_skipped():
    g, t, g_opt, t_opt = _pair("Adafactor", {}, gt.float64)
    for _ in range(3):
        set_grads(g, t, field)
        g[1].grad, t[1].grad = None, None
        g_opt.step()
        t_opt.step()
    assert g[1] not in g_opt.state
    assert_params_close(g, t, *TOL[gt.float64])
    assert_states_close(g_opt, t_opt, *TOL[gt.float64])


# -- param groups and state dicts ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["Rprop", "ASGD", "Adafactor"])
def test_repr_and_group_keys_match_torch(name):
    def groups(a, b):
        return [{"params": [a]}, {"params": [b], "lr": 0.5}]
    g = getattr(optim, name)(groups(gt.zeros(2).requires_grad_(), gt.zeros(3).requires_grad_()))
    t = getattr(torch.optim, name)(groups(torch.zeros(2, requires_grad=True),
                                          torch.zeros(3, requires_grad=True)))
    assert repr(g) == repr(t)
    assert g.state_dict()["param_groups"] == t.state_dict()["param_groups"]


ROUND_TRIP = [("Rprop", {"lr": 0.1, "maximize": True}),
              ("ASGD", {"t0": 2, "lambd": 0.01}),
              ("Adafactor", {"weight_decay": 0.1})]


@pytest.mark.parametrize("name,kwargs", ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_state_dict_round_trip_continues_trajectory(name, kwargs):
    g, t, g_opt, t_opt = _pair(name, kwargs, gt.float64)
    fn = _grad_fn(kwargs)
    _steps(g, t, g_opt, t_opt, fn, 4)
    saved = copy.deepcopy(g_opt.state_dict())
    g2 = [p.detach().clone().requires_grad_() for p in g]
    resumed = getattr(optim, name)(g2, lr=123.0)  # hyper-parameters come from the state dict
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == g_opt.param_groups[0]["lr"]
    for _ in range(4):
        set_grads(g, t, fn)
        set_grads(g2, t, fn)
        g_opt.step()
        resumed.step()
        t_opt.step()
    for a, b in zip(g, g2, strict=True):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    assert_params_close(g2, t, *TOL[gt.float64])


@pytest.mark.parametrize("name,kwargs", ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_torch_state_dict_loads_and_resumes_like_torch(name, kwargs, tmp_path: Path):
    """A state dict saved by torch.optim (torch.save -> gt.load) continues torch's run; its
    state keys and tensor dtypes (cast like PyTorch's load) match after loading."""
    g, t, _, t_opt = _pair(name, kwargs, gt.float64)
    fn = _grad_fn(kwargs)
    for _ in range(4):
        for tp in t:
            tp.grad = torch.from_numpy(fn(tp.detach().numpy()))
        t_opt.step()
    path = tmp_path / "opt.pt"
    torch.save(t_opt.state_dict(), path)
    with torch.no_grad():
        for gp, tp in zip(g, t, strict=True):
            gp.detach().copy_(gt.tensor(tp.detach().numpy()))
    g_opt = getattr(optim, name)(g, lr=123.0)
    g_opt.load_state_dict(gt.load(path))
    t_opt.load_state_dict(torch.load(path))  # torch casts loaded state the same way
    assert_states_close(g_opt, t_opt, 0, 0)
    _steps(g, t, g_opt, t_opt, fn, 4)
    assert_params_close(g, t, *TOL[gt.float64])
    assert_states_close(g_opt, t_opt, *TOL[gt.float64])


# -- errors ------------------------------------------------------------------------------------
def _p() -> gt.Tensor:
    return gt.zeros(3).requires_grad_()


@pytest.mark.parametrize("name,kwargs,exc,match", [
    ("Rprop", {"lr": -1.0}, ValueError, "Invalid learning rate"),
    ("Rprop", {"etas": (1.5, 1.2)}, ValueError, "Invalid eta values"),
    ("Rprop", {"etas": (0.5, 0.9)}, ValueError, "Invalid eta values"),
    ("Rprop", {"capturable": True}, ValueError, "capturable=True is not supported"),
    ("Rprop", {"differentiable": True}, ValueError, "differentiable=True is not supported"),
    ("ASGD", {"lr": -0.1}, ValueError, "Invalid learning rate"),
    ("ASGD", {"weight_decay": -0.1}, ValueError, "Invalid weight_decay value"),
    ("ASGD", {"capturable": True}, ValueError, "capturable=True is not supported"),
    ("ASGD", {"differentiable": True}, ValueError, "differentiable=True is not supported"),
    ("Adafactor", {"lr": -0.1}, ValueError, "Invalid learning rate"),
    ("Adafactor", {"beta2_decay": 0.5}, ValueError, "beta2_decay should be <= 0"),
    ("Adafactor", {"eps": (-1.0, 1e-3)}, ValueError, "epsilon1 should be >= 0"),
    ("Adafactor", {"eps": (None, -1.0)}, ValueError, "epsilon2 should be >= 0"),
    ("Adafactor", {"d": 0.5}, ValueError, "Clipping threshold d should be >= 1"),
    ("Adafactor", {"weight_decay": -1.0}, ValueError, "weight_decay should be >= 0"),
])
def test_constructor_errors(name, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        getattr(optim, name)([_p()], **kwargs)
    if "capturable" not in kwargs and "differentiable" not in kwargs:
        with pytest.raises(exc):
            getattr(torch.optim, name)([torch.zeros(3, requires_grad=True)], **kwargs)


def test_step_errors():
    c = gt.zeros(2, dtype=gt.complex64).requires_grad_()
    c.grad = gt.ones_like(c)
    with pytest.raises(RuntimeError, match="Adafactor does not support complex"):
        optim.Adafactor([c]).step()
    for name in ("Rprop", "ASGD", "Adafactor"):
        p = _p()
        p.grad = gt.ones(3).to_sparse()
        with pytest.raises(RuntimeError, match=f"{name} does not support sparse gradients"):
            getattr(optim, name)([p]).step()


# -- AveragedModel ------------------------------------------------------------------------------
def _models(device: str = "cpu"):
    """The same Linear+BatchNorm model in gputensor and torch (float64)."""
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                            torch.nn.Linear(4, 2)).double()
    g = gt.nn.Sequential(gt.nn.Linear(3, 4), gt.nn.BatchNorm1d(4), gt.nn.Linear(4, 2))
    g = g.to(gt.float64)
    g.load_state_dict({k: gt.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return g.to(device), t


def _train_step(g, t, i: int, device: str) -> None:
    """Move the parameters (the same deterministic change in both) and run a training
    forward, so the BatchNorm buffers move too."""
    rng = np.random.default_rng(i)
    with torch.no_grad():
        for gp, tp in zip(g.parameters(), t.parameters(), strict=True):
            d = rng.standard_normal(tuple(tp.shape)) * 0.1
            tp.add_(torch.from_numpy(d))
            gp.detach().add_(gt.tensor(d, device=device))
    x = rng.standard_normal((6, 3))
    g.train()
    t.train()
    g(gt.tensor(x, device=device))
    t(torch.from_numpy(x))


def _assert_module_close(g_mod, t_mod, rtol=1e-12, atol=1e-13) -> None:
    gs, ts = g_mod.state_dict(), t_mod.state_dict()
    assert list(gs) == list(ts)
    for k, tv in ts.items():
        gv = to_np(gs[k])
        assert gv.dtype == tv.numpy().dtype, k
        np.testing.assert_allclose(gv, tv.numpy(), rtol=rtol, atol=atol, err_msg=k)


def _swa_tol(case: str, device: str) -> tuple[float, float]:
    return (1e-7, 1e-8) if case == "swa-default" and device != "cpu" else (1e-12, 1e-13)


AVG_CASES = [
    ("swa-default", lambda su: {}),
    ("swa-multi", lambda su: {"multi_avg_fn": su.get_swa_multi_avg_fn()}),
    ("swa-avg_fn", lambda su: {"avg_fn": su.get_swa_avg_fn()}),
    ("ema-multi", lambda su: {"multi_avg_fn": su.get_ema_multi_avg_fn(0.9)}),
    ("ema-avg_fn", lambda su: {"avg_fn": su.get_ema_avg_fn(0.8)}),
]


@pytest.mark.parametrize("use_buffers", [False, True], ids=["params", "buffers"])
@pytest.mark.parametrize("case", AVG_CASES, ids=[c[0] for c in AVG_CASES])
def test_averaged_model_matches_torch(case, use_buffers, device):
    _, make_kwargs = case
    g, t = _models()
    g_avg = swa_utils.AveragedModel(g, device=device, use_buffers=use_buffers,
                                    **make_kwargs(swa_utils))
    t_avg = torch.optim.swa_utils.AveragedModel(t, use_buffers=use_buffers,
                                                **make_kwargs(torch.optim.swa_utils))
    assert g_avg.module is not g and g_avg.n_averaged.device == gt.device(device)
    if case[0] == "swa-multi" and use_buffers:
        # num_batches_tracked is int64: PyTorch's foreach addcdiv refuses it, and so do we.
        _train_step(g, t, 0, "cpu")
        g_avg.update_parameters(g)
        t_avg.update_parameters(t)
        for avg, model in ((g_avg, g), (t_avg, t)):
            with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
                avg.update_parameters(model)
        return
    for i in range(4):
        _train_step(g, t, i, "cpu")
        g_avg.update_parameters(g)
        t_avg.update_parameters(t)
        # On CUDA the default SWA average is PyTorch's foreach lerp with the weight 1/(n+1)
        # rounded to float32; torch here runs the CPU formula, so they agree to float32.
        _assert_module_close(g_avg, t_avg, *_swa_tol(case[0], device))
    assert g_avg.n_averaged.item() == t_avg.n_averaged.item() == 4
    assert g_avg.n_averaged.dtype is gt.int64
    x = np.random.default_rng(9).standard_normal((5, 3))
    g_avg.eval()
    t_avg.eval()
    np.testing.assert_allclose(to_np(g_avg(gt.tensor(x, device=device))),
                               t_avg(torch.from_numpy(x)).detach().numpy(),
                               *_swa_tol(case[0], device))


def test_averaged_model_of_a_model_on_the_device(device):
    g, t = _models(device)
    g_avg = swa_utils.AveragedModel(g)
    t_avg = torch.optim.swa_utils.AveragedModel(t)
    for i in range(3):
        _train_step(g, t, i, device)
        g_avg.update_parameters(g)
        t_avg.update_parameters(t)
    _assert_module_close(g_avg, t_avg, *_swa_tol("swa-default", device))
    assert all(p.device == gt.device(device) for p in g_avg.parameters())


def test_averaged_model_state_dict_loads_torch():
    g, t = _models()
    t_avg = torch.optim.swa_utils.AveragedModel(t)
    for i in range(2):
        _train_step(g, t, i, "cpu")
        t_avg.update_parameters(t)
    g_avg = swa_utils.AveragedModel(g)
    g_avg.load_state_dict({k: gt.tensor(v.numpy()) for k, v in t_avg.state_dict().items()})
    _assert_module_close(g_avg, t_avg, 0, 0)
    _train_step(g, t, 5, "cpu")
    g_avg.update_parameters(g)
    t_avg.update_parameters(t)
    _assert_module_close(g_avg, t_avg)


def test_integer_tensors_in_multi_avg_fns():
    """Non-float tensors take the arithmetic branch (no lerp), with PyTorch's results: SWA
    refuses them (an int or a tensor count), EMA truncates its float result."""
    def run(mod, T):
        a = [T.tensor([10, 20])]
        with pytest.raises(RuntimeError, match="argument alpha must not be a floating"):
            mod.get_swa_multi_avg_fn()(a, [T.tensor([20, 41])], 1)
        with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
            mod.get_swa_multi_avg_fn()(a, [T.tensor([20, 41])], T.tensor(1))
        e = [T.tensor([10, 20])]
        mod.get_ema_multi_avg_fn(0.5)(e, [T.tensor([21, 41])], 3)
        f = [T.tensor([0.0, 4.0])]
        mod.get_ema_multi_avg_fn(0.25)(f, [T.tensor([4.0, 0.0])], 3)
        return a[0].tolist(), e[0].tolist(), f[0].tolist()

    assert run(swa_utils, gt) == run(torch.optim.swa_utils, torch)
    assert run(swa_utils, gt)[2] == [3.0, 1.0]


def test_averaged_model_errors():
    g, _ = _models()
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(g, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    for fn in (swa_utils.get_ema_avg_fn, swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match="Invalid decay value"):
            fn(1.5)
        with pytest.raises(ValueError, match="Invalid decay value"):
            fn(-0.1)


# -- update_bn ----------------------------------------------------------------------------------
@pytest.mark.parametrize("batches", ["tensors", "tuples"])
def test_update_bn_matches_torch(batches, device):
    g, t = _models()
    g = g.to(device)
    for i in range(2):  # running statistics away from their reset values
        _train_step(g, t, i, device)
    g.eval()
    t.eval()
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((n, 3)) for n in (5, 7, 3)]
    if batches == "tensors":
        g_loader, t_loader = [gt.tensor(x) for x in xs], [torch.from_numpy(x) for x in xs]
    else:
        g_loader = [(gt.tensor(x), gt.zeros(len(x))) for x in xs]
        t_loader = [(torch.from_numpy(x), torch.zeros(len(x))) for x in xs]
    swa_utils.update_bn(g_loader, g, device=device)
    torch.optim.swa_utils.update_bn(t_loader, t)
    _assert_module_close(g, t)
    assert g[1].num_batches_tracked.item() == 3
    assert g[1].momentum == 0.1 and not g.training


def test_update_bn_keeps_training_mode_and_skips_models_without_batchnorm():
    g, t = _models()
    g.train()
    swa_utils.update_bn([gt.zeros(4, 3, dtype=gt.float64)], g)
    assert g.training and g[1].num_batches_tracked.item() == 1

    class Exploding:
        def __iter__(self):
            raise AssertionError("a model without BatchNorm needs no pass over the data")

    swa_utils.update_bn(Exploding(), gt.nn.Linear(2, 2))


def test_update_bn_leaves_instance_norm_alone():
    """PyTorch's InstanceNorm is no _BatchNorm: update_bn neither resets it nor changes its
    momentum (its running stats only move by the forward passes, with its own momentum)."""
    g = gt.nn.Sequential(gt.nn.InstanceNorm1d(2, track_running_stats=True),
                         gt.nn.BatchNorm1d(2)).to(gt.float64)
    t = torch.nn.Sequential(torch.nn.InstanceNorm1d(2, track_running_stats=True),
                            torch.nn.BatchNorm1d(2)).double()
    for m in (g[0], t[0]):
        m.running_mean.fill_(0.5)
    xs = [np.random.default_rng(i).standard_normal((3, 2, 4)) for i in range(2)]
    swa_utils.update_bn([gt.tensor(x) for x in xs], g)
    torch.optim.swa_utils.update_bn([torch.from_numpy(x) for x in xs], t)
    _assert_module_close(g, t)


# -- SWALR ------------------------------------------------------------------------------------
def _sgd_pair(lrs=(0.1, 0.5)):
    gp = [gt.zeros(2).requires_grad_() for _ in lrs]
    tp = [torch.zeros(2, requires_grad=True) for _ in lrs]
    g = optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(gp, lrs, strict=True)])
    t = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(tp, lrs, strict=True)])
    return g, t


@pytest.mark.parametrize("anneal_epochs", [0, 1, 4])
@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("swa_lr", [0.05, [0.02, 0.3]], ids=["one", "per-group"])
def test_swalr_lr_sequence_matches_torch(strategy, anneal_epochs, swa_lr):
    g_opt, t_opt = _sgd_pair()
    g_s = swa_utils.SWALR(g_opt, swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    t_s = torch.optim.swa_utils.SWALR(t_opt, swa_lr, anneal_epochs=anneal_epochs,
                                      anneal_strategy=strategy)
    seq_g, seq_t = [g_s.get_last_lr()], [t_s.get_last_lr()]
    for _ in range(7):
        g_opt.step()
        t_opt.step()
        g_s.step()
        t_s.step()
        seq_g.append(g_s.get_last_lr())
        seq_t.append(t_s.get_last_lr())
    np.testing.assert_allclose(seq_g, seq_t, rtol=1e-14, atol=0)
    final = swa_lr if isinstance(swa_lr, list) else [swa_lr] * 2
    np.testing.assert_allclose(seq_g[-1], final, rtol=1e-12)
    assert [g["swa_lr"] for g in g_opt.param_groups] == final


def test_swalr_takes_over_from_another_scheduler_and_round_trips():
    g_opt, t_opt = _sgd_pair()
    g_first = optim.lr_scheduler.ExponentialLR(g_opt, gamma=0.7)
    t_first = torch.optim.lr_scheduler.ExponentialLR(t_opt, gamma=0.7)
    for _ in range(3):
        g_opt.step()
        t_opt.step()
        g_first.step()
        t_first.step()
    g_s = swa_utils.SWALR(g_opt, 0.01, anneal_epochs=3)
    t_s = torch.optim.swa_utils.SWALR(t_opt, 0.01, anneal_epochs=3)
    g_opt.step()
    t_opt.step()
    g_s.step()
    t_s.step()
    state = g_s.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    assert set(state) == set(t_s.state_dict())
    g_s2 = swa_utils.SWALR(g_opt, 0.01, anneal_epochs=3, anneal_strategy="linear")
    g_s2.load_state_dict(state)
    assert g_s2.anneal_func(0.5) == pytest.approx((1 - math.cos(math.pi * 0.5)) / 2)
    for _ in range(3):
        g_opt.step()
        t_opt.step()
        g_s2.step()
        t_s.step()
        np.testing.assert_allclose(g_s2.get_last_lr(), t_s.get_last_lr(), rtol=1e-14)


def test_swalr_errors():
    g_opt, _ = _sgd_pair()
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        swa_utils.SWALR(g_opt, 0.05, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(g_opt, 0.05, anneal_epochs=-1)
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa_utils.SWALR(g_opt, 0.05, anneal_epochs=2.5)
    with pytest.raises(ValueError, match="swa_lr must have the same length"):
        swa_utils.SWALR(g_opt, [0.05])
    with pytest.raises(TypeError, match="is not an Optimizer"):
        swa_utils.SWALR(object(), 0.05)


def test_swa_names_are_exported():
    assert set(swa_utils.__all__) == set(torch.optim.swa_utils.__all__)
    for name in ("Rprop", "ASGD", "Adafactor"):
        assert getattr(gt.optim, name) is getattr(optim, name)
        assert name in optim.__all__
