"""The fused recurrences behind nn.LSTM/GRU/RNN and their cells (gputensor/_ops/rnn.py).

test_rnn.py compares the layers with PyTorch; this file checks what the fusion itself
promises: one recurrence kernel per layer direction each way (no per-step op dispatch), the
same values as the step-by-step path it replaces, a gradient that can be differentiated again
(double backward recomputes the steps), forward-mode AD, and the fallbacks.
"""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor._ops import rnn as rnn_ops
from gputensor.autograd import forward_ad as fwAD

torch = pytest.importorskip("torch")

MODES = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]


def _layer(mode: str, **kw):
    if mode.startswith("RNN"):
        return nn.RNN(3, 5, nonlinearity="relu" if mode == "RNN_RELU" else "tanh", **kw)
    return getattr(nn, mode)(3, 5, **kw)


class _KernelCounter:
    """The names of the backend kernels called inside the block (the profiler's records)."""

    def __enter__(self) -> _KernelCounter:
        self._prof = gt.profiler.profile()
        self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._prof.__exit__(*exc)
        self.names = [e.name for e in self._prof.events() if e.kind == "kernel"]


@pytest.mark.parametrize("mode", MODES)
def test_one_recurrence_kernel_per_layer_direction(mode: str, device: str) -> None:
    m = _layer(mode, num_layers=2, bidirectional=True).to(device)
    x = gt.randn(7, 2, 3, device=device, requires_grad=True)
    stem = "_rnn" if mode.startswith("RNN") else f"_{mode.lower()}"
    with _KernelCounter() as k:
        out = m(x)[0]
    assert k.names.count(f"{stem}_recurrence") == 4
    # the projections of every step are one gemm per layer direction, nothing per step
    assert k.names.count("_gemm") == 4
    with _KernelCounter() as k:
        out.sum().backward()
    assert k.names.count(f"{stem}_recurrence_backward") == 4
    assert x.grad is not None and m.weight_hh_l1_reverse.grad is not None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_fused_equals_the_step_by_step_path(mode: str, reverse: bool, device: str) -> None:
    rng = np.random.default_rng(0)
    gates = rnn_ops.GATES[mode]

    def leaf(*shape: int) -> gt.Tensor:
        return gt.tensor(rng.uniform(-1, 1, shape), dtype=gt.float64, device=device,
                         requires_grad=True)

    xg, h0, c0 = leaf(6, 3, gates * 4), leaf(3, 4), leaf(3, 4)
    w_hh, b_hh = leaf(gates * 4, 4), leaf(gates * 4)
    c = c0 if mode == "LSTM" else None
    b = b_hh if mode == "GRU" else None
    inputs = [t for t in (xg, h0, c, w_hh, b) if t is not None]
    fused = rnn_ops.recurrence(mode, xg, h0, c, w_hh, b, reverse)
    steps = rnn_ops._steps(mode, xg, h0, c, w_hh, b, reverse)
    weights = [gt.tensor(rng.standard_normal(t.shape), dtype=gt.float64, device=device)
               for t in fused if t is not None]
    grads = []
    for res in (fused, steps):
        loss = sum((r * w).sum() for r, w in zip((r for r in res if r is not None), weights,
                                                  strict=True))
        grads.append(gt.autograd.grad(loss, inputs))
    for f, s in zip(fused, steps, strict=True):
        if f is not None:
            np.testing.assert_allclose(f.detach().cpu().numpy(), s.detach().cpu().numpy(),
                                       rtol=1e-12, atol=1e-13)
    for f, s in zip(*grads, strict=True):
        np.testing.assert_allclose(f.cpu().numpy(), s.cpu().numpy(), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_layer_gradgradcheck(mode: str, device: str) -> None:
    gt.manual_seed(0)
    m = _layer(mode, bidirectional=True).double().to(device)
    x = gt.randn(3, 2, 3, dtype=gt.float64, device=device, requires_grad=True)
    h = gt.randn(2, 2, 5, dtype=gt.float64, device=device, requires_grad=True)

    def fn(x: gt.Tensor, h: gt.Tensor) -> gt.Tensor:
        out, _ = m(x, (h, h * 0.5) if mode == "LSTM" else h)
        return out

    assert gt.autograd.gradcheck(fn, (x, h))
    assert gt.autograd.gradgradcheck(fn, (x, h))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_forward_ad_through_the_layer(mode: str, device: str) -> None:
    gt.manual_seed(0)
    m = _layer(mode).double().to(device)
    x = gt.randn(4, 2, 3, dtype=gt.float64, device=device)
    t = gt.randn(4, 2, 3, dtype=gt.float64, device=device)
    with fwAD.dual_level():
        out = m(fwAD.make_dual(x, t))[0]
        tangent = fwAD.unpack_dual(out).tangent
    eps = 1e-6
    with gt.no_grad():
        expected = (m(x + eps * t)[0] - m(x - eps * t)[0]) / (2 * eps)
    np.testing.assert_allclose(tangent.detach().cpu().numpy(), expected.cpu().numpy(), rtol=1e-6,
                               atol=1e-8)


def test_long_sequence_matches_torch(device: str) -> None:
    torch.manual_seed(0)
    t_mod = torch.nn.LSTM(8, 32, num_layers=2, batch_first=True)
    g_mod = nn.LSTM(8, 32, num_layers=2, batch_first=True).to(device)
    g_mod.load_state_dict({k: gt.tensor(v.detach().numpy(), device=device)
                           for k, v in t_mod.state_dict().items()})
    arr = np.random.default_rng(1).standard_normal((4, 60, 8)).astype(np.float32)
    gx = gt.tensor(arr, device=device, requires_grad=True)
    tx = torch.from_numpy(arr.copy()).requires_grad_()
    g_out, (g_h, g_c) = g_mod(gx)
    t_out, (t_h, t_c) = t_mod(tx)
    for g, t in ((g_out, t_out), (g_h, t_h), (g_c, t_c)):
        np.testing.assert_allclose(g.detach().cpu().numpy(), t.detach().numpy(), rtol=1e-4,
                                   atol=2e-6)
    (g_out.square().sum() + g_c.sum()).backward()
    (t_out.square().sum() + t_c.sum()).backward()
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for name, tp in t_mod.named_parameters():
        np.testing.assert_allclose(g_mod.get_parameter(name).grad.cpu().numpy(),
                                   tp.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_cells_run_the_fused_recurrence(device: str) -> None:
    x = gt.randn(2, 3, device=device)
    for cell, stem in ((nn.LSTMCell(3, 4), "_lstm"), (nn.GRUCell(3, 4), "_gru"),
                       (nn.RNNCell(3, 4), "_rnn")):
        with _KernelCounter() as k:
            cell.to(device)(x)
        assert k.names.count(f"{stem}_recurrence") == 1


def test_fallbacks_run_step_by_step(device: str) -> None:
    # float16 (no fused kernel) and mixed dtypes take the op-by-op steps and still agree.
    m = nn.GRU(3, 4).to(device)
    x = gt.randn(5, 2, 3, device=device)
    with _KernelCounter() as k:
        expected = m(x)[0]
    assert "_gru_recurrence" in k.names
    with _KernelCounter() as k:
        got = m.double()(x.double())[0]
    assert "_gru_recurrence" in k.names
    np.testing.assert_allclose(got.detach().cpu().numpy(), expected.detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    xg = gt.randn(5, 2, 12, device=device, dtype=gt.float16)
    h = gt.zeros(2, 4, device=device, dtype=gt.float16)
    w = gt.randn(12, 4, device=device, dtype=gt.float16)
    with _KernelCounter() as k:
        out, h_n, _ = rnn_ops.recurrence("GRU", xg, h, None, w)
    assert "_gru_recurrence" not in k.names
    assert out.dtype is gt.float16 and out.shape == (5, 2, 4)
    ref, _, _ = rnn_ops.recurrence("GRU", xg.float(), h.float(), None, w.float())
    np.testing.assert_allclose(out.float().cpu().numpy(), ref.cpu().numpy(), atol=5e-3)
