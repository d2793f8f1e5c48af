"""Fusion: runs of elementwise ops become one kernel, with values kept in registers and only
live results stored, and results equal to the unfused replay and to eager, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.kernels.cuda import nvrtc


def _graph(f):
    (graph,) = [g for e in f.cache.values() for g in e.graphs]
    return graph


def _groups(step):
    """The FusedOps of a fused step."""
    return step.fn.group.ops


def _chain(x, y, b):
    h = (x * 1.5 + y).tanh()            # y broadcasts along dim 0
    mask = h > 0.1                       # bool value feeding a float op
    z = h * mask + b.t()                 # a transposed (strided) operand
    return (z.sigmoid() * 2 - 1).clamp(-0.5, 0.5)


@pytest.mark.parametrize("fuse", [True, False])
def test_a_chain_runs_as_one_kernel_and_matches_eager(device: str, fuse: bool,
                                                      monkeypatch) -> None:
    monkeypatch.setattr(gt.compiler.config, "fuse", fuse)
    f = gt.compile(_chain)
    for seed in range(3):
        gt.manual_seed(seed)
        x, y = gt.randn(5, 7, device=device), gt.randn(7, device=device)
        b = gt.randn(7, 5, device=device)
        np.testing.assert_array_equal(f(x, y, b).cpu().numpy(), _chain(x, y, b).cpu().numpy())
    steps = _graph(f).forward.steps
    fused = [s for s in steps if s.name.startswith("fused_")]
    if fuse:
        assert len(steps) == 1 and fused
        assert "tanh" in fused[0].name and "clamp" in fused[0].name
        # Only the result is stored: the intermediates live in registers.
        assert sum(f.store is not None for f in _groups(fused[0])) == 1
    else:
        assert not fused


def test_values_read_later_are_stored(device: str) -> None:
    def fn(x):
        h = x.exp()
        s = h.sum()           # a reduction reads h: h must be stored
        return (h * 2).relu() + s

    f = gt.compile(fn)
    x = gt.randn(6, device=device)
    f(x)
    x2 = gt.randn(6, device=device)
    np.testing.assert_array_equal(f(x2).cpu().numpy(), fn(x2).cpu().numpy())


def test_in_place_chains_fuse_correctly(device: str) -> None:
    def fn(x, y):
        a = x.clone()
        a.mul_(y).add_(1.0).abs_()
        return a * a

    f = gt.compile(fn)
    for seed in range(2):
        gt.manual_seed(seed)
        x, y = gt.randn(3, 4, device=device), gt.randn(3, 4, device=device)
        np.testing.assert_array_equal(f(x, y).cpu().numpy(), fn(x, y).cpu().numpy())


def test_lstm_projection_cell_gates_fuse(device: str) -> None:
    # With proj_size the layer runs step by step: the gate ops of every step fuse.
    m = nn.LSTM(4, 8, batch_first=True, proj_size=3).to(device)
    cm = gt.compile(m)
    x = gt.randn(2, 5, 4, device=device)
    for _ in range(2):
        cm(x)[0].sum().backward()
    graph = _graph(cm._compiled)
    names = [s.name for s in graph.forward.steps + graph.backward.steps]
    assert sum(n.startswith("fused_") for n in names) >= 10
    m.zero_grad()
    y = cm(x)[0]
    expect = m(x)[0]
    np.testing.assert_array_equal(y.detach().cpu().numpy(), expect.detach().cpu().numpy())


def test_lstm_replays_its_fused_recurrence(device: str) -> None:
    # Without a projection the recurrence is one kernel each way, replayed as captured.
    m = nn.LSTM(4, 8, batch_first=True).to(device)
    cm = gt.compile(m)
    x = gt.randn(2, 5, 4, device=device)
    for _ in range(2):
        cm(x)[0].sum().backward()
    graph = _graph(cm._compiled)
    names = [s.name for s in graph.forward.steps + graph.backward.steps]
    assert names.count("_lstm_recurrence") == 1
    assert names.count("_lstm_recurrence_backward") == 1
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    y = cm(x)[0]
    y.sum().backward()
    m2 = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    expect = m(x)[0]
    expect.sum().backward()
    np.testing.assert_array_equal(y.detach().cpu().numpy(), expect.detach().cpu().numpy())
    for a, b, c in zip(m2, (p.grad for p in m.parameters()), grads, strict=True):
        np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
        np.testing.assert_allclose(a.cpu().numpy(), c.cpu().numpy() / 2, rtol=1e-6)


@pytest.mark.skipif(not nvrtc.availability()[0], reason="NVRTC wheel not installed")
@pytest.mark.skipif(not gt.cuda.is_available(), reason="needs the CUDA emulator")
def test_fused_cuda_kernels_compile_with_nvrtc_for_real_gpus() -> None:
    f = gt.compile(_chain)
    args = (gt.randn(5, 7, device="cuda"), gt.randn(7, device="cuda"),
            gt.randn(7, 5, device="cuda"))
    f(*args)
    m = nn.LSTM(3, 4, proj_size=2).cuda()   # step by step: its gate ops fuse
    cm = gt.compile(m)
    cm(gt.randn(2, 1, 3, device="cuda"))[0].sum().backward()
    steps = _graph(f).forward.steps + [s for g in (_graph(cm._compiled),)
                                       for s in g.forward.steps + g.backward.steps]
    sources = [s.fn.source for s in steps if s.name.startswith("fused_")]
    assert len(sources) >= 3
    for k, src in enumerate(sources):
        prog = nvrtc.compile_program(src, f"fused{k}.cu", arch="sm_90")
        assert prog is not None
