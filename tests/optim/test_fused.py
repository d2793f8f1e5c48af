"""The fused CPU kernels: registration, lookup through the backend, fallbacks, large params."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.optim as optim
from gputensor._ops._core import kernel
from gputensor.kernels.registry import CPU
from tests.optim import make_params, run_both, set_grads, to_np

torch = pytest.importorskip("torch")

FUSED = ["_fused_adam", "_fused_sgd", "_fused_adagrad"]


@pytest.mark.parametrize("name", FUSED)
def test_kernels_registered_with_cpu_backend(name):
    assert name in CPU.kernels
    assert kernel(gt.zeros(2), name) is CPU.kernels[name]


@pytest.mark.parametrize("name,kwargs,kernel_name", [
    ("Adam", {"lr": 0.01, "amsgrad": True}, "_fused_adam"),
    ("SGD", {"lr": 0.05, "momentum": 0.9}, "_fused_sgd"),
    ("Adagrad", {}, "_fused_adagrad"),
])
def test_fused_kernel_is_used_by_default(monkeypatch, name, kwargs, kernel_name):
    calls = []
    original = CPU.kernels[kernel_name]
    monkeypatch.setitem(CPU.kernels, kernel_name,
                        lambda *a, **k: (calls.append(len(a[0])), original(*a, **k)))
    g, t = make_params()
    run_both(getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs), g, t,
             steps=3)
    assert calls == [3, 3, 3]  # one call per step, covering all three params
    for gp, tp in zip(g, t, strict=True):
        np.testing.assert_allclose(to_np(gp), to_np(tp), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kernel_name", [("Adam", "_fused_adam"), ("SGD", "_fused_sgd"),
                                              ("Adagrad", "_fused_adagrad")])
def test_backend_without_kernel_falls_back(monkeypatch, name, kernel_name):
    """A backend lacking the fused kernel (as CUDA may) gets the op path; fused=True fails."""
    monkeypatch.delitem(CPU.kernels, kernel_name)
    g, t = make_params()
    kwargs = {"lr": 0.05, "momentum": 0.9} if name == "SGD" else {"lr": 0.05}
    run_both(getattr(optim, name)(g, **kwargs), getattr(torch.optim, name)(t, **kwargs), g, t,
             steps=3)
    for gp, tp in zip(g, t, strict=True):
        np.testing.assert_allclose(to_np(gp), to_np(tp), rtol=1e-5, atol=1e-6)
    opt = getattr(optim, name)(g, fused=True, **kwargs)
    set_grads(g, t)
    with pytest.raises(RuntimeError, match=f"no {kernel_name} kernel"):
        opt.step()


def test_fused_true_rejects_strided_or_half_params():
    p = gt.zeros(4, 6)[:, ::2].requires_grad_()
    p.grad = gt.ones(4, 3)
    with pytest.raises(RuntimeError, match=r"fused=True.*shape \[4, 3\]"):
        optim.Adam([p], fused=True).step()
    h = gt.zeros(3, dtype=gt.float16).requires_grad_()
    h.grad = gt.ones(3, dtype=gt.float16)
    with pytest.raises(RuntimeError, match="fused=True.*float16"):
        optim.SGD([h], lr=0.1, fused=True).step()


def test_half_params_take_op_path():
    a = np.linspace(-1, 1, 6).astype(np.float16)
    g = gt.tensor(a).requires_grad_()
    t = torch.tensor(a, requires_grad=True)
    g_opt, t_opt = optim.Adam([g], lr=0.01), torch.optim.Adam([t], lr=0.01)
    for _ in range(3):
        set_grads([g], [t])
        g_opt.step()
        t_opt.step()
    np.testing.assert_allclose(to_np(g).astype(np.float32), to_np(t).astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_mixed_group_splits_between_paths():
    """Contiguous params go to the kernel, a strided one to the op path, in one step."""
    g, t = make_params(shapes=[(3, 4), (5,)])
    base_g, base_t = gt.zeros(4, 6), torch.zeros(4, 6)
    vals = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    sg, st = base_g[:, ::2], base_t[:, ::2]
    sg.copy_(gt.tensor(vals))
    st.copy_(torch.from_numpy(vals))
    g.append(sg.requires_grad_())
    t.append(st.requires_grad_())
    run_both(optim.AdamW(g, lr=0.05), torch.optim.AdamW(t, lr=0.05), g, t, steps=4)
    for gp, tp in zip(g, t, strict=True):
        np.testing.assert_allclose(to_np(gp), to_np(tp), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("Adam", {"lr": 0.01, "weight_decay": 0.1}),
                                         ("SGD", {"lr": 0.01, "momentum": 0.9,
                                                  "nesterov": True}),
                                         ("Adagrad", {"lr_decay": 0.01})])
def test_large_param_uses_parallel_kernel(name, kwargs):
    """Above 2**17 elements the kernel runs with prange; results match the op path."""
    a = np.random.default_rng(0).uniform(-1, 1, (400, 400)).astype(np.float32)
    fused, plain = gt.tensor(a).requires_grad_(), gt.tensor(a).requires_grad_()
    opts = [getattr(optim, name)([fused], **kwargs),
            getattr(optim, name)([plain], fused=False, **kwargs)]
    for _ in range(2):
        for p, opt in zip((fused, plain), opts, strict=True):
            p.grad = gt.tensor(np.sin(3 * p.detach().numpy()))
            opt.step()
    np.testing.assert_allclose(to_np(fused), to_np(plain), rtol=1e-6, atol=1e-7)


def test_fused_adam_handles_inf_param_without_weight_decay():
    """weight_decay=0 must not compute 0 * inf (PyTorch skips the term)."""
    p = gt.tensor([float("inf"), 1.0]).requires_grad_()
    p.grad = gt.tensor([0.5, 0.5])
    optim.Adam([p]).step()
    assert to_np(p)[0] == np.inf
