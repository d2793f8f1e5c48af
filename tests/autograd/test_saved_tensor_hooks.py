"""gt.autograd.graph.saved_tensors_hooks and save_on_cpu, compared with PyTorch's."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor.autograd.graph import SavedTensor, save_on_cpu, saved_tensors_hooks
from tests.helpers import assert_close

OPS = {
    "mul": lambda m, a, b: a * b,
    "add": lambda m, a, b: a + b,
    "exp": lambda m, a, b: a.exp(),
    "sin": lambda m, a, b: a.sin(),
    "matmul": lambda m, a, b: a @ b.T,
    "mul_scalar": lambda m, a, b: a * 2,
    "tanh": lambda m, a, b: a.tanh(),
    "relu": lambda m, a, b: a.relu(),
    "sum": lambda m, a, b: a.sum(),
    "div": lambda m, a, b: a / b,
    "pow": lambda m, a, b: a ** 2,
    "linear": lambda m, a, b: m.nn.functional.linear(a, b),
    "softmax": lambda m, a, b: a.softmax(-1),
    "log": lambda m, a, b: a.abs().log(),
    "sqrt": lambda m, a, b: a.abs().sqrt(),
}


def _leaves(m, device, seed=0):
    rng = np.random.default_rng(seed)
    dev = device if m is gt else "cpu"
    return [m.tensor(rng.random((3, 4)) + 0.5, device=dev, requires_grad=True)
            for _ in range(2)]


@pytest.mark.parametrize("name", sorted(OPS))
def test_pack_count_and_grads_match_torch(device, name):
    """Each tensor an op saves goes through pack once (same count as PyTorch, the elementwise
    fast path included); gradients through pack(x)=2x / unpack(p)=p/2 equal PyTorch's."""
    counts, grads = [], []
    for m in (gt, torch):
        a, b = _leaves(m, device)
        n = [0]

        def pack(t, n=n):
            n[0] += 1
            return t * 2

        with m.autograd.graph.saved_tensors_hooks(pack, lambda p: p / 2):
            y = OPS[name](m, a, b)
        y.sum().backward()
        counts.append(n[0])
        grads.append([a.grad, b.grad])
    assert counts[0] == counts[1]
    for g, t in zip(*grads, strict=True):
        assert (g is None) == (t is None)
        if g is not None:
            assert_close(g, t)


def test_hooks_see_what_pytorch_shows(device):
    """Pack runs with grad disabled, gets the input itself (not a copy), and the unpacked
    value is what backward uses."""
    seen = []
    x = gt.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    w = gt.tensor([4.0, 5.0, 6.0], device=device, requires_grad=True)

    def pack(t):
        seen.append((t is x, gt.is_grad_enabled()))
        return t

    with saved_tensors_hooks(pack, lambda p: p):
        y = (x * w).sum()
    assert (True, False) in seen and all(not g for _, g in seen)
    # an unpack hook that lies is believed: d(x*w)/dx = w, here replaced by ones
    with saved_tensors_hooks(lambda t: t, lambda p: gt.ones_like(p)):
        z = (x * w).sum()
    z.backward()
    assert_close(x.grad, gt.ones(3, device=device))
    y.backward()
    assert_close(x.grad, gt.ones(3, device=device) + w.detach())


def test_innermost_hooks_win_and_exit_restores():
    log = []
    x = gt.ones(2, requires_grad=True)
    with saved_tensors_hooks(lambda t: log.append("outer") or t, lambda p: p):
        with saved_tensors_hooks(lambda t: log.append("inner") or t, lambda p: p):
            x.exp()
        x.exp()
    x.exp()
    assert log == ["inner", "outer"]


def test_no_hooks_keeps_the_tensor():
    x = gt.ones(2, requires_grad=True)
    s = SavedTensor(x)
    assert s.hooks is None and s.tensor is x
    with saved_tensors_hooks(lambda t: "packed", lambda p: p):
        s = SavedTensor(x)
    assert s.tensor == "packed"


def test_unpack_must_return_a_tensor():
    for m in (gt, torch):
        x = m.ones(3, requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: 1, lambda p: p):
            y = (x * x).sum()
        with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result "
                                            "of type int"):
            y.backward()


def test_pack_may_not_modify_its_input():
    def pack(t):
        t.add_(1)
        return t

    for m in (gt, torch):
        x = m.ones(3, requires_grad=True)
        y = x.detach().requires_grad_()
        with m.autograd.graph.saved_tensors_hooks(pack, lambda p: p):
            with pytest.raises(RuntimeError, match="pack hook is modifying its input in place"):
                x * y


def test_no_version_check_with_hooks(device):
    """What a hook keeps is its own: an in-place edit after a copying pack is no error, and
    backward uses the values at save time (PyTorch skips the check with hooks too)."""
    out = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        a = m.tensor([1.0, 2.0], device=dev, requires_grad=True)
        b = m.tensor([3.0, 4.0], device=dev)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda p: p):
            y = (a * b).sum()
        b.mul_(10)
        y.backward()
        out.append(a.grad)
    assert_close(out[0], out[1])
    # without hooks the edit is caught
    a = gt.tensor([1.0, 2.0], requires_grad=True)
    b = gt.tensor([3.0, 4.0])
    y = (a * b).sum()
    b.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_double_backward_through_hooks(device):
    """Unpacked tensors get back their history (non-leaf grad_fn, leaf accumulator, the
    node for outputs), so create_graph gradients match PyTorch."""
    res = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        x = m.tensor([0.5, -1.0, 2.0], device=dev, dtype=m.float64, requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda p: p):
            h = x.sin()
            y = (h * h * x).sum() + x.exp().sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        g.sum().backward()
        res.append((g.detach(), x.grad))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1])


def test_retain_graph_and_release(device):
    x = gt.tensor([1.0, 2.0], device=device, requires_grad=True)
    calls = [0]

    def unpack(p):
        calls[0] += 1
        return p

    with saved_tensors_hooks(lambda t: t, unpack):
        y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert calls[0] == 4
    assert_close(x.grad, 4 * x.detach())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_custom_function_save_for_backward():
    class Square(gt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    packed = []
    x = gt.tensor([1.0, 3.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: packed.append(t) or ("box", t.clone()),
                             lambda p: p[1]):
        y = Square.apply(x).sum()
    y.backward()
    assert len(packed) == 1 and packed[0] is x
    assert_close(x.grad, 2 * x.detach())


def test_hooks_are_thread_local():
    log = []
    x = gt.ones(2, requires_grad=True)

    def other_thread():
        x.exp()

    with saved_tensors_hooks(lambda t: log.append(1) or t, lambda p: p):
        th = threading.Thread(target=other_thread)
        th.start()
        th.join()
        assert log == []
        x.exp()
    assert log == [1]


@pytest.mark.parametrize("pin_memory", [False, True])
def test_save_on_cpu(device, pin_memory):
    """Packed tensors live on the CPU; backward brings them back; gradients match PyTorch."""
    res = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        rng = np.random.default_rng(3)
        x = m.tensor(rng.random((4, 3)), device=dev, requires_grad=True)
        w = m.tensor(rng.random((3, 5)), device=dev, requires_grad=True)
        ctx = m.autograd.graph.save_on_cpu(pin_memory=pin_memory)
        packed = []
        pack = ctx.pack_hook
        ctx.pack_hook = lambda t, pack=pack, packed=packed: packed.append(pack(t)) or packed[-1]
        with ctx:
            y = (x @ w).tanh().sum()
        y.backward()
        assert len(packed) == 3   # x, w and tanh's output
        for orig_device, t in packed:
            assert t.device.type == "cpu" and orig_device.type == dev.split(":")[0]
        res.append((x.grad, w.grad))
    for g, t in zip(res[0], res[1], strict=True):
        assert_close(g, t)


@pytest.mark.skipif(not gt.cuda.is_available(), reason="measures (emulated) CUDA memory")
def test_save_on_cpu_moves_activations_off_the_device():
    device = f"cuda:{gt.cuda.device_count() - 1}"
    data = np.random.default_rng(4).random((256, 256)).astype(np.float32)
    x = gt.tensor(data, device=device, requires_grad=True)
    gt.cuda.synchronize(device)
    base = gt.cuda.memory_allocated(device)
    y = x.tanh().tanh().tanh()
    held = gt.cuda.memory_allocated(device) - base
    del y
    with save_on_cpu():
        y = x.tanh().tanh().tanh()
    held_cpu = gt.cuda.memory_allocated(device) - base
    assert held_cpu < held   # only y itself stays on the device
    y.sum().backward()
    t = torch.tensor(data, requires_grad=True)
    t.tanh().tanh().tanh().sum().backward()
    assert_close(x.grad, t.grad)


@pytest.mark.parametrize("expr", ["x * x", "x * 3.0 * x", "x.exp() * x", "x.sin()", "x.tanh()"])
def test_double_backward_through_hooks_of_a_leaf(device, expr):
    """One-pass (lane) calls on a leaf under pack hooks: the hook's weak reference to the
    leaf's AccumulateGrad must find the one the node's edge holds, or the second backward
    accumulates into the unpacked copy instead of the leaf."""
    res = []
    for m in (gt, torch):
        dev = device if m is gt else "cpu"
        x = m.tensor([0.5, -1.0, 2.0], device=dev, dtype=m.float64, requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda p: p):
            y = eval(expr).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        g.sum().backward()
        res.append((g.detach(), x.grad))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1])
