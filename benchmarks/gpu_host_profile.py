"""Where the host time of an eager CUDA training step goes: cProfile of the MLP and tiny-GPT
steps of gpu_bench.py (same models and batches), top functions by own and cumulative time.
Run by .ci/gpu_session.sh; on the emulator it profiles the emulated kernels too.

    python benchmarks/gpu_host_profile.py [mlp] [gpt] [lstm]
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench as gb  # noqa: E402
import gpu_bench_science as gs  # noqa: E402

import gputensor as gt  # noqa: E402


def training_step(kind: str) -> Callable[[], None]:
    gt.manual_seed(0)
    rng = np.random.default_rng(0)
    if kind == "mlp":
        model = gb.build_mlp(gt).cuda()
        x = gt.tensor(rng.standard_normal((128, 784), dtype=np.float32), device="cuda")
        y = gt.tensor(rng.integers(0, 10, 128), device="cuda")

        def loss_of() -> gt.Tensor:
            return gt.nn.functional.cross_entropy(model(x), y)
    else:
        if kind == "gpt":
            model, batch, seq = gb.build_gpt(gt, block=64, **gb.GPT).cuda(), 32, 64
        else:
            model, batch, seq = gs.build_char_lstm(gt).cuda(), 16, 32
        idx = rng.integers(0, 65, (batch, seq + 1))
        x, y = gt.tensor(idx[:, :-1], device="cuda"), gt.tensor(idx[:, 1:], device="cuda")

        def loss_of() -> gt.Tensor:
            return model(x, y)
    opt = gt.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        loss_of().backward()
        opt.step()
    return step


def profile(kind: str, steps: int = 30) -> None:
    step = training_step(kind)
    for _ in range(5):
        step()
    gt.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    gt.cuda.synchronize()
    print(f"{kind}: {(time.perf_counter() - t0) / steps * 1e3:.2f} ms/step unprofiled")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    gt.cuda.synchronize()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(22)
    stats.sort_stats("cumulative").print_stats(18)


if __name__ == "__main__":
    for name in sys.argv[1:] or ["mlp", "gpt"]:
        profile(name)
