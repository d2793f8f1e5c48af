"""Compiled calls return what eager calls return: values and gradients, bit for bit, over the
nn zoo on cpu and emulated cuda, across several replays with new inputs (and the same random
stream for dropout), while outputs of earlier calls stay untouched."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
import gputensor.nn.functional as F

Case = tuple[Callable[[], nn.Module], Callable[[str, int], tuple]]


def _randn(*shape: int, seed: int) -> gt.Tensor:
    return gt.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _tokens(*shape: int, high: int, seed: int) -> gt.Tensor:
    return gt.tensor(np.random.default_rng(seed).integers(0, high, shape))


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.ln = nn.LayerNorm(8)
        self.att = nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.1)
        self.head = nn.Linear(8, 20)

    def forward(self, idx: gt.Tensor) -> gt.Tensor:
        h = self.ln(self.emb(idx))
        mask = gt.triu(gt.ones(idx.shape[1], idx.shape[1], dtype=gt.bool,
                               device=idx.device), 1)
        o, _ = self.att(h, h, h, attn_mask=mask, need_weights=False)
        return self.head(h + o)


class _Recurrent(nn.Module):
    def __init__(self, cell: type) -> None:
        super().__init__()
        self.rnn = cell(6, 10, batch_first=True, num_layers=2)
        self.out = nn.Linear(10, 3)

    def forward(self, x: gt.Tensor) -> gt.Tensor:
        y, _ = self.rnn(x)
        return self.out(y[:, -1])


CASES: dict[str, Case] = {
    "mlp": (lambda: nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3)),
            lambda dev, s: (_randn(5, 6, seed=s).to(dev),)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.2),
                                  nn.Linear(64, 10)),
            lambda dev, s: (_randn(4, 1, 8, 8, seed=s).to(dev),)),
    "attention": (_Attention, lambda dev, s: (_tokens(2, 6, high=20, seed=s).to(dev),)),
    "lstm": (lambda: _Recurrent(nn.LSTM), lambda dev, s: (_randn(3, 5, 6, seed=s).to(dev),)),
    "gru": (lambda: _Recurrent(nn.GRU), lambda dev, s: (_randn(3, 5, 6, seed=s).to(dev),)),
    "transformer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1,
                                                       batch_first=True),
                    lambda dev, s: (_randn(2, 5, 8, seed=s).to(dev),)),
}


def _grads(m: nn.Module) -> list[np.ndarray]:
    return [p.grad.cpu().numpy().copy() for p in m.parameters()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_module_matches_eager(device: str, name: str) -> None:
    make, inputs = CASES[name]
    gt.manual_seed(0)
    eager = make().to(device)
    compiled_mod = copy.deepcopy(eager)
    compiled = gt.compile(compiled_mod)
    first = None
    for step in range(4):
        args = inputs(device, step)
        gt.manual_seed(100 + step)
        expect = eager(*args)
        gt.manual_seed(100 + step)
        got = compiled(*args)
        np.testing.assert_array_equal(got.detach().cpu().numpy(), expect.detach().cpu().numpy())
        if first is None:
            first = (got, got.detach().cpu().numpy().copy())
        weight = _randn(*expect.shape, seed=50 + step).to(device)
        (expect * weight).sum().backward()
        (got * weight).sum().backward()
        for a, b in zip(_grads(compiled_mod), _grads(eager), strict=True):
            np.testing.assert_array_equal(a, b)
        eager.zero_grad()
        compiled_mod.zero_grad()
    np.testing.assert_array_equal(first[0].detach().cpu().numpy(), first[1])
    graphs = [g for e in compiled._compiled.cache.values() for g in e.graphs]
    assert len(graphs) == 1 and graphs[0].backward is not None  # one capture, replayed
    for (n, b), (_, c) in zip(eager.named_buffers(), compiled_mod.named_buffers(), strict=True):
        np.testing.assert_array_equal(c.cpu().numpy(), b.cpu().numpy(), err_msg=n)


@pytest.mark.parametrize("loss", ["cross_entropy", "mse_loss", "nll_loss", "smooth_l1_loss"])
def test_compiled_losses_match_eager(device: str, loss: str) -> None:
    def fn(x: gt.Tensor, y: gt.Tensor) -> gt.Tensor:
        if loss == "nll_loss":
            return F.nll_loss(F.log_softmax(x, -1), y)
        if loss == "cross_entropy":
            return F.cross_entropy(x, y, label_smoothing=0.1)
        return getattr(F, loss)(x, F.one_hot(y, 4).to(x.dtype))  # one_hot(num_classes=4)

    compiled = gt.compile(fn)
    for step in range(3):
        x = _randn(6, 4, seed=step).to(device).requires_grad_()
        y = _tokens(6, high=4, seed=10 + step).to(device)
        expect = fn(x, y)
        (gx_e,) = gt.autograd.grad(expect, x)
        got = compiled(x, y)
        (gx_c,) = gt.autograd.grad(got, x)
        np.testing.assert_array_equal(got.detach().cpu().numpy(),
                                      expect.detach().cpu().numpy())
        np.testing.assert_array_equal(gx_c.cpu().numpy(), gx_e.cpu().numpy())
    entry, = compiled.cache.values()
    assert entry.eager is None and len(entry.graphs) == 1
