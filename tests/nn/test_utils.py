"""gputensor.nn.utils: gradient clipping and parameter/vector conversion against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
    parameters_to_vector,
    vector_to_parameters,
)
from tests.helpers import assert_close

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (2, 2, 2), ()]


def _params_with_grads(scale: float, dtype=np.float32, device="cpu", with_none=True):
    rng = np.random.default_rng(0)
    g_params, t_params = [], []
    for i, shape in enumerate(SHAPES):
        data = np.asarray(rng.standard_normal(shape), dtype=dtype)
        grad = np.asarray(rng.standard_normal(shape) * scale, dtype=dtype)
        gp = nn.Parameter(gt.tensor(data, device=device))
        tp = torch.nn.Parameter(torch.from_numpy(data.copy()))
        if not (with_none and i == 1):  # one parameter without a gradient
            gp.grad = gt.tensor(grad, device=device)
            tp.grad = torch.from_numpy(grad.copy())
        g_params.append(gp)
        t_params.append(tp)
    return g_params, t_params


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, "inf"])
@pytest.mark.parametrize("scale", [0.01, 10.0])
def test_clip_grad_norm_matches_torch(device, norm_type, scale):
    g_params, t_params = _params_with_grads(scale, device=device)
    total = clip_grad_norm_(g_params, max_norm=1.5, norm_type=norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(t_params, max_norm=1.5, norm_type=norm_type)
    assert isinstance(total, gt.Tensor) and total.dim() == 0
    assert_close(total, t_total, atol=1e-5, rtol=1e-5)
    for gp, tp in zip(g_params, t_params, strict=True):
        if tp.grad is None:
            assert gp.grad is None
        else:
            assert_close(gp.grad, tp.grad, atol=1e-6, rtol=1e-5)


def test_clip_grad_norm_forms_and_edge_cases():
    p = nn.Parameter(gt.ones(4))
    p.grad = gt.full((4,), 3.0)
    total = clip_grad_norm_(p, 1.0)  # a single tensor
    assert total.item() == pytest.approx(6.0)
    assert_close(p.grad, np.full(4, 3.0 / (6.0 + 1e-6), np.float32))
    assert clip_grad_norm_([nn.Parameter(gt.ones(2))], 1.0).item() == 0.0  # no grads
    with pytest.warns(UserWarning, match="empty generator"):
        clip_grad_norm_((q for q in []), 1.0)
    model = nn.Linear(3, 2)
    for q in model.parameters():
        q.grad = gt.ones_like(q)
    clip_grad_norm_(model.parameters(), 0.1)  # a generator, walked twice internally
    assert model.weight.grad.abs().max().item() < 0.1


def test_clip_grad_norm_nonfinite():
    g_params, t_params = _params_with_grads(1.0)
    g_params[0].grad[0, 0] = float("inf")
    t_params[0].grad[0, 0] = float("inf")
    with pytest.raises(RuntimeError) as info:
        clip_grad_norm_(g_params, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as tinfo:
        torch.nn.utils.clip_grad_norm_(t_params, 1.0, error_if_nonfinite=True)
    assert str(info.value) == str(tinfo.value)
    total = clip_grad_norm_(g_params, 1.0)
    assert math.isinf(total.item())


def test_get_total_norm_and_clip_with_norm():
    g_params, t_params = _params_with_grads(2.0)
    grads = [p.grad for p in g_params if p.grad is not None]
    t_grads = [p.grad for p in t_params if p.grad is not None]
    total = get_total_norm(grads, 2.0)
    assert_close(total, torch.nn.utils.get_total_norm(t_grads, 2.0), atol=1e-5, rtol=1e-5)
    clip_grads_with_norm_(g_params, 0.5, total)
    torch.nn.utils.clip_grads_with_norm_(t_params, 0.5,
                                         torch.nn.utils.get_total_norm(t_grads, 2.0))
    for gp, tp in zip(g_params, t_params, strict=True):
        if tp.grad is not None:
            assert_close(gp.grad, tp.grad, atol=1e-6, rtol=1e-5)


def test_clip_grad_norm_half_grads():
    g_params, t_params = _params_with_grads(5.0, dtype=np.float16, with_none=False)
    total = clip_grad_norm_(g_params, 1.0)
    t_total = torch.nn.utils.clip_grad_norm_(t_params, 1.0)
    assert total.dtype is gt.float16
    assert_close(total, t_total, atol=1e-2, rtol=1e-2)
    for gp, tp in zip(g_params, t_params, strict=True):
        assert gp.grad.dtype is gt.float16
        assert_close(gp.grad, tp.grad, atol=2e-3, rtol=1e-2)


@pytest.mark.parametrize("clip", [0.5, 2])
def test_clip_grad_value_matches_torch(device, clip):
    g_params, t_params = _params_with_grads(3.0, device=device)
    assert clip_grad_value_(g_params, clip) is None
    torch.nn.utils.clip_grad_value_(t_params, clip)
    for gp, tp in zip(g_params, t_params, strict=True):
        if tp.grad is not None:
            assert_close(gp.grad, tp.grad)
    single = nn.Parameter(gt.zeros(2, device=device))
    single.grad = gt.tensor([-5.0, 5.0], device=device)
    clip_grad_value_(single, 1.0)
    assert single.grad.tolist() == [-1.0, 1.0]


def test_parameters_to_vector_roundtrip(device):
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).to(device)
    t_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model.load_state_dict({k: gt.from_numpy(v.numpy().copy())
                           for k, v in t_model.state_dict().items()})
    vec = parameters_to_vector(model.parameters())
    t_vec = torch.nn.utils.parameters_to_vector(t_model.parameters())
    assert vec.shape == (26,) and vec.device == gt.device(device)
    assert_close(vec, t_vec.detach())
    weight = model[0].weight
    new = gt.arange(26, dtype=gt.float32, device=device)
    vector_to_parameters(new, model.parameters())
    assert model[0].weight is weight  # identity kept, data replaced
    assert model[0].weight.tolist()[0] == [0.0, 1.0, 2.0]
    assert model[1].bias.tolist() == [24.0, 25.0]
    new[0] = 100.0  # parameters now view the vector, as in PyTorch
    assert model[0].weight.tolist()[0][0] == 100.0
    with pytest.raises(TypeError, match="expected gputensor.Tensor, but got: list"):
        vector_to_parameters([1.0], model.parameters())


def test_parameters_to_vector_rejects_mixed_devices():
    class OnOtherDevice:  # stands in for a CUDA parameter on a CPU-only machine
        device = gt.device("cuda", 0)

    with pytest.raises(TypeError, match="different devices"):
        parameters_to_vector([nn.Parameter(gt.ones(2)), OnOtherDevice()])
    with pytest.raises(TypeError, match="different devices"):
        vector_to_parameters(gt.ones(4), [nn.Parameter(gt.ones(2)), OnOtherDevice()])
