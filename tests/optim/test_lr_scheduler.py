"""Learning-rate schedulers: 30-step lr (and momentum) sequences against torch's."""

from __future__ import annotations

import copy
import math
import warnings

import pytest

import gputensor as gt
import gputensor.optim as optim
from gputensor.optim import lr_scheduler as gs

torch = pytest.importorskip("torch")
ts = torch.optim.lr_scheduler

STEPS = 30


def _optimizers(kind: str = "SGD", groups: int = 2):
    """The same optimizer in both libraries, with `groups` param groups of different lrs."""
    g_params = [gt.zeros(2).requires_grad_() for _ in range(groups)]
    t_params = [torch.zeros(2, requires_grad=True) for _ in range(groups)]
    spec = lambda ps: [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)]  # noqa
    kwargs = {"lr": 0.1, "momentum": 0.9} if kind == "SGD" else {"lr": 0.1}
    return (getattr(optim, kind)(spec(g_params), **kwargs),
            getattr(torch.optim, kind)(spec(t_params), **kwargs))


def _assert_groups_match(g_opt, t_opt, keys=("lr",)):
    for gg, tg in zip(g_opt.param_groups, t_opt.param_groups, strict=True):
        for key in keys:
            if key in tg:
                assert gg[key] == pytest.approx(tg[key], rel=1e-12, abs=1e-15), key


def _run(make, kind="SGD", steps=STEPS, keys=("lr",)):
    """Build both schedulers with make(module, optimizer) and compare every step."""
    g_opt, t_opt = _optimizers(kind)
    g_sched, t_sched = make(gs, g_opt), make(ts, t_opt)
    assert g_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)
    for _ in range(steps):
        g_opt.step()
        t_opt.step()
        g_sched.step()
        t_sched.step()
        assert g_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12,
                                                      abs=1e-15)
        _assert_groups_match(g_opt, t_opt, keys)
    return g_sched, t_sched


SCHEDULES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 1 / (1 + e)),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: e % 3]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=12),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=5, T_mult=2, eta_min=0.01),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, gamma=0.8)],
        milestones=[5]),
    "SequentialLR-3": lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.3, total_iters=2), m.CosineAnnealingLR(o, T_max=6),
            m.StepLR(o, step_size=3)], milestones=[3, 12]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.9)]),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                        step_size_down=6),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1,
                                                    step_size_up=3, mode="triangular2"),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5,
                                                  mode="exp_range", gamma=0.95),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_torch(name):
    _run(SCHEDULES[name], keys=("lr", "momentum"))


ONE_CYCLE = {
    "cos": {"max_lr": 0.5, "total_steps": STEPS},
    "linear": {"max_lr": [0.5, 1.0], "total_steps": STEPS, "anneal_strategy": "linear"},
    "three_phase": {"max_lr": 0.5, "epochs": 3, "steps_per_epoch": 10, "three_phase": True,
                    "pct_start": 0.25},
    "no_momentum": {"max_lr": 0.5, "total_steps": STEPS, "cycle_momentum": False,
                    "div_factor": 10.0, "final_div_factor": 100.0},
}


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("case", list(ONE_CYCLE))
def test_one_cycle_matches_torch(case, kind):
    """OneCycleLR for STEPS - 1 steps (its last allowed); momentum or Adam's beta1 cycles."""
    kwargs = ONE_CYCLE[case]
    _run(lambda m, o: m.OneCycleLR(o, **kwargs), kind=kind, steps=STEPS - 1,
         keys=("lr", "momentum", "betas", "initial_lr", "max_lr", "min_lr"))


def test_one_cycle_past_total_steps_raises():
    g_opt, _ = _optimizers()
    sched = gs.OneCycleLR(g_opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        g_opt.step()
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched.step()


@pytest.mark.parametrize("kwargs", [
    {},
    {"mode": "max"},
    {"threshold_mode": "abs", "threshold": 0.5, "patience": 2},
    {"mode": "max", "threshold_mode": "abs", "cooldown": 2, "patience": 1, "factor": 0.5},
    {"patience": 0, "min_lr": [0.02, 0.05], "factor": 0.5},
    {"patience": 1, "eps": 0.05, "factor": 0.9},
])
def test_reduce_on_plateau_matches_torch(kwargs):
    g_opt, t_opt = _optimizers()
    g_sched, t_sched = gs.ReduceLROnPlateau(g_opt, **kwargs), ts.ReduceLROnPlateau(t_opt, **kwargs)
    metrics = [10, 9, 9, 9.5, 9, 9, 8, 8.9, 8.99, 9, 9, 9, 7, 7, 7, 7, 7.5, 6, 6, 6,
               6, 6, 6, 5, 5, 5, 5, 5, 4, 4]
    for m in metrics:
        g_sched.step(m)
        t_sched.step(m)
        assert g_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)
        assert g_sched.num_bad_epochs == t_sched.num_bad_epochs
        assert g_sched.cooldown_counter == t_sched.cooldown_counter
    _assert_groups_match(g_opt, t_opt)


def test_reduce_on_plateau_accepts_tensor_metric():
    g_opt, _ = _optimizers()
    sched = gs.ReduceLROnPlateau(g_opt, patience=0)
    sched.step(gt.tensor(1.0))
    sched.step(gt.tensor(2.0))
    assert sched.get_last_lr() == pytest.approx([0.01, 0.02])


@pytest.mark.parametrize("kwargs,match", [
    ({"factor": 1.0}, "Factor should be < 1.0"),
    ({"mode": "avg"}, "mode avg is unknown"),
    ({"threshold_mode": "pct"}, "threshold mode pct is unknown"),
    ({"min_lr": [0.1]}, "expected 2 min_lrs"),
])
def test_reduce_on_plateau_errors(kwargs, match):
    g_opt, _ = _optimizers()
    with pytest.raises(ValueError, match=match):
        gs.ReduceLROnPlateau(g_opt, **kwargs)


def test_scheduler_state_dict_round_trip():
    g_opt, t_opt = _optimizers()
    sched = gs.CosineAnnealingLR(g_opt, T_max=7, eta_min=0.01)
    for _ in range(10):
        g_opt.step()
        sched.step()
    saved = copy.deepcopy(sched.state_dict())
    saved_opt = copy.deepcopy(g_opt.state_dict())
    assert "optimizer" not in saved and saved["last_epoch"] == 10
    expected = []
    for _ in range(5):
        g_opt.step()
        sched.step()
        expected.append(sched.get_last_lr())
    opt2, _ = _optimizers()
    opt2.load_state_dict(saved_opt)
    resumed = gs.CosineAnnealingLR(opt2, T_max=1)
    resumed.load_state_dict(saved)
    got = []
    for _ in range(5):
        opt2.step()
        resumed.step()
        got.append(resumed.get_last_lr())
    assert sum(got, []) == pytest.approx(sum(expected, []), rel=1e-12)


def test_sequential_state_dict_includes_children():
    g_opt, _ = _optimizers()
    sched = SCHEDULES["SequentialLR"](gs, g_opt)
    state = sched.state_dict()
    assert len(state["_schedulers"]) == 2 and "optimizer" not in state["_schedulers"][0]


def test_lambda_state_dict_saves_callable_objects_only():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, epoch):
            return self.rate ** epoch

    g_opt, _ = _optimizers()
    fn = Decay()
    sched = gs.LambdaLR(g_opt, [fn, lambda e: 1.0])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"rate": 0.5}, None]
    state["lr_lambdas"][0]["rate"] = 0.25
    sched.load_state_dict(state)
    assert fn.rate == 0.25


def test_closed_form_with_explicit_epoch():
    g_opt, t_opt = _optimizers()
    g_sched, t_sched = gs.StepLR(g_opt, step_size=3, gamma=0.5), ts.StepLR(t_opt, 3, 0.5)
    g_opt.step()
    t_opt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        g_sched.step(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_sched.step(7)
    assert g_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr())
    assert g_sched.get_last_lr() == pytest.approx([0.1 * 0.25, 0.2 * 0.25])


def test_warns_when_stepped_before_optimizer():
    g_opt, _ = _optimizers()
    sched = gs.ExponentialLR(g_opt, gamma=0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    g_opt2, _ = _optimizers()
    sched2 = gs.ExponentialLR(g_opt2, gamma=0.5)
    g_opt2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched2.step()


def test_get_lr_outside_step_warns():
    g_opt, _ = _optimizers()
    sched = gs.StepLR(g_opt, step_size=2)
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()


def test_initial_lr_and_resume_errors():
    g_opt, _ = _optimizers()
    with pytest.raises(KeyError, match="initial_lr"):
        gs.StepLR(g_opt, step_size=2, last_epoch=3)
    gs.StepLR(g_opt, step_size=2)
    assert [g["initial_lr"] for g in g_opt.param_groups] == [0.1, 0.2]
    with pytest.raises(TypeError, match="is not an Optimizer"):
        gs.StepLR(object(), step_size=2)


def test_resume_with_last_epoch_uses_closed_form():
    g_opt, t_opt = _optimizers()
    for opt in (g_opt, t_opt):
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
    g_sched = gs.CosineAnnealingLR(g_opt, T_max=10, last_epoch=4)
    t_sched = ts.CosineAnnealingLR(t_opt, T_max=10, last_epoch=4)
    assert g_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)


def test_tensor_lr_is_filled_in_place():
    p = gt.zeros(2).requires_grad_()
    lr = gt.tensor(0.1, dtype=gt.float64)
    opt = optim.SGD([p], lr=lr)
    sched = gs.ExponentialLR(opt, gamma=0.5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is lr
    assert lr.item() == pytest.approx(0.05)
    assert math.isclose(float(sched.get_last_lr()[0]), 0.05)


def test_cycle_momentum_requires_momentum():
    opt = optim.Adagrad([gt.zeros(2).requires_grad_()])
    with pytest.raises(ValueError, match="momentum or beta1"):
        gs.OneCycleLR(opt, max_lr=0.1, total_steps=10)


@pytest.mark.parametrize("kwargs,match", [
    ({"max_lr": 0.1}, "total_steps OR"),
    ({"max_lr": 0.1, "total_steps": 0}, "positive integer total_steps"),
    ({"max_lr": 0.1, "total_steps": 10, "pct_start": 1.5}, "pct_start"),
    ({"max_lr": 0.1, "total_steps": 10, "anneal_strategy": "exp"}, "anneal_strategy"),
    ({"max_lr": [0.1], "total_steps": 10}, "max_lr must have the same length"),
])
def test_one_cycle_errors(kwargs, match):
    g_opt, _ = _optimizers()
    with pytest.raises(ValueError, match=match):
        gs.OneCycleLR(g_opt, **kwargs)


def test_sequential_milestone_count():
    g_opt, _ = _optimizers()
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        gs.SequentialLR(g_opt, [gs.StepLR(g_opt, 2), gs.StepLR(g_opt, 3)], milestones=[])
