"""Convolution benchmarks: gputensor beside PyTorch (CPU) on the same float32 data, forward and
forward + backward (input and weight gradients) for the shapes that matter in practice:

- the demo CNN's two convs on 8x8 digits (batch 64) and on 28x28 MNIST-sized images,
- a ResNet-style 3x3 conv (16x64x32x32, 64 filters, pad 1), a 1x1 conv, a strided 3x3 conv,
- conv1d (16x64x256, 64 filters of width 5, pad 2),
- a training step of a small residual-style block on those 16x64x32x32 activations (two 3x3
  convs, batch norm, ReLU, average pool, a linear head, SGD with momentum), where convolution
  products and the elementwise kernels between them alternate.

Each shape's two libraries share one pytest-benchmark group; NumPy has no convolution and is
skipped. No timing is asserted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from test_bench_core import run

if TYPE_CHECKING:
    from conftest import Data, Lib

# name: (x shape, weight shape, keyword arguments); 3-D shapes are conv1d.
CASES = {
    "demo CNN conv1 64x1x8x8, 16 3x3, pad 1": ((64, 1, 8, 8), (16, 1, 3, 3), {"padding": 1}),
    "demo CNN conv2 64x16x4x4, 32 3x3, pad 1": ((64, 16, 4, 4), (32, 16, 3, 3), {"padding": 1}),
    "MNIST conv1 64x1x28x28, 16 3x3, pad 1": ((64, 1, 28, 28), (16, 1, 3, 3), {"padding": 1}),
    "MNIST conv2 64x16x14x14, 32 3x3, pad 1": ((64, 16, 14, 14), (32, 16, 3, 3), {"padding": 1}),
    "ResNet 16x64x32x32, 64 3x3, pad 1": ((16, 64, 32, 32), (64, 64, 3, 3), {"padding": 1}),
    "1x1 16x64x32x32, 64 filters": ((16, 64, 32, 32), (64, 64, 1, 1), {}),
    "strided 16x64x32x32, 128 3x3, stride 2, pad 1": ((16, 64, 32, 32), (128, 64, 3, 3),
                                                      {"stride": 2, "padding": 1}),
    "conv1d 16x64x256, 64 k5, pad 2": ((16, 64, 256), (64, 64, 5), {"padding": 2}),
}


def _setup(lib: Lib, data: Data, name: str) -> tuple[Any, Any, Any, dict, Any]:
    if lib.name == "numpy":
        pytest.skip("NumPy has no convolution")
    x_shape, w_shape, kw = CASES[name]
    # keep activations near 1: weights scaled by the fan-in
    w = data.get("w" + name, w_shape) / np.float32(math.prod(w_shape[1:]))
    x = lib.wrap(data.get("x" + name, x_shape))
    fn = lib.xp.nn.functional.conv2d if len(x_shape) == 4 else lib.xp.nn.functional.conv1d
    return fn, x, lib.wrap(np.ascontiguousarray(w)), kw, w_shape


def _flops(name: str) -> int:
    x_shape, w_shape, kw = CASES[name]
    stride, pad = kw.get("stride", 1), kw.get("padding", 0)
    out = [(s + 2 * pad - k) // stride + 1 for s, k in zip(x_shape[2:], w_shape[2:], strict=True)]
    return 2 * x_shape[0] * w_shape[0] * math.prod(out) * math.prod(w_shape[1:])


@pytest.mark.parametrize("name", list(CASES))
def test_conv_forward(benchmark: Any, lib: Lib, data: Data, name: str) -> None:
    conv, x, w, kw, _ = _setup(lib, data, name)
    run(benchmark, lib, f"conv {name}: forward", lambda: conv(x, w, **kw), flops=_flops(name))


@pytest.mark.parametrize("name", list(CASES))
def test_conv_forward_backward(benchmark: Any, lib: Lib, data: Data, name: str) -> None:
    conv, x, w, kw, _ = _setup(lib, data, name)
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    grad = conv(x, w, **kw).detach() * 0 + 1

    def step() -> None:
        x.grad = w.grad = None
        conv(x, w, **kw).backward(grad)
    # the input and the weight gradient each cost as much as the forward pass
    run(benchmark, lib, f"conv {name}: forward + backward", step, flops=3 * _flops(name))


def _block(nn: Any) -> Any:
    return nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10))


def test_conv_block_training_step(benchmark: Any, lib: Lib, data: Data) -> None:
    if lib.name == "numpy":
        pytest.skip("NumPy has no convolution")
    xp = lib.xp
    xp.manual_seed(0)
    model = _block(xp.nn)
    opt = xp.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = lib.wrap(data.get("block x", (16, 64, 32, 32)))
    y = lib.wrap((data.get("block y", (16,)) * 6).astype(np.int64))

    def step() -> None:
        opt.zero_grad()
        xp.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    flops = 3 * 2 * _flops("ResNet 16x64x32x32, 64 3x3, pad 1")
    run(benchmark, lib, "conv block 16x64x32x32 training step (2 convs, BN, ReLU, SGD)", step,
        flops=flops)
