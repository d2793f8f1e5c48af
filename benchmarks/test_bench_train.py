"""Training benchmarks: gputensor beside PyTorch (CPU) on the same data and the same models.

- an MLP 64-128-10 training step with Adam on the digits, batch 64 (target: <= 1.5x torch)
- the demo CNN's training step, batch 64 (target: <= 2x torch)
- autograd overhead: backward of a 100-op elementwise chain on 16-element tensors (<= 3x)
NumPy has no autograd, so its variant is skipped here. No timing is asserted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import Lib

BATCH = 64


def _skip_numpy(lib: Lib) -> None:
    if lib.name == "numpy":
        pytest.skip("NumPy has no autograd")


def _digits_batch(lib: Lib, flat: bool) -> tuple[Any, Any]:
    from gputensor.datasets import digits
    d = digits("train", as_tensor=False)
    x = np.ascontiguousarray(d.images[:BATCH].reshape(BATCH, -1) if flat else d.images[:BATCH])
    return lib.wrap(x), lib.wrap(np.ascontiguousarray(d.targets[:BATCH]))


def _mlp(nn: Any) -> Any:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _cnn(nn: Any) -> Any:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))


def _same_weights(lib: Lib, model: Any, build: Any) -> None:
    """Both libraries start from one set of weights (made by torch when present, else gt)."""
    import gputensor as gt
    gt.manual_seed(0)
    ref = build(gt.nn)
    state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    model.load_state_dict({k: lib.wrap(v) for k, v in state.items()})


def _train_step(lib: Lib, build: Any, flat: bool) -> Any:
    xp = lib.xp
    model = build(xp.nn)
    _same_weights(lib, model, build)
    opt = xp.optim.Adam(model.parameters(), lr=1e-3)
    x, y = _digits_batch(lib, flat)
    loss_fn = xp.nn.functional.cross_entropy

    def step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


def test_mlp_adam_step(benchmark: Any, lib: Lib) -> None:
    _skip_numpy(lib)
    step = _train_step(lib, _mlp, flat=True)
    step()
    benchmark.group = "train: MLP 64-128-10 Adam step, batch 64"
    benchmark.extra_info.update(lib=lib.name, target_vs_torch=1 / 1.5)
    benchmark.pedantic(step, rounds=200, iterations=5, warmup_rounds=5)


def test_cnn_adam_step(benchmark: Any, lib: Lib) -> None:
    _skip_numpy(lib)
    step = _train_step(lib, _cnn, flat=False)
    step()
    benchmark.group = "train: demo CNN Adam step, batch 64"
    benchmark.extra_info.update(lib=lib.name, target_vs_torch=1 / 2)
    benchmark.pedantic(step, rounds=100, iterations=3, warmup_rounds=3)


def test_autograd_chain_backward(benchmark: Any, lib: Lib) -> None:
    _skip_numpy(lib)
    x = lib.xp.ones(16, requires_grad=True)

    def forward() -> Any:
        y = x
        for i in range(100):
            y = y * 1.01 if i % 2 else y + 0.5
        return y.sum()

    def setup() -> tuple[tuple[Any], dict]:
        return (forward(),), {}

    forward().backward()
    benchmark.group = "autograd: backward of a 100-op chain, 16 elements"
    benchmark.extra_info.update(lib=lib.name, target_vs_torch=1 / 3)
    benchmark.pedantic(lambda loss: loss.backward(), setup=setup, rounds=200, warmup_rounds=5)
