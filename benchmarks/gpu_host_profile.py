"""Where the host time of eager CUDA work goes: cProfile of the MLP, tiny-GPT and char-LSTM
training steps of gpu_bench.py (same models and batches), and of the library-backed calls
that gpu_bench_science.py found slow (batched cholesky and solve of 256 8x8 matrices, rfft of
2^20 points, stft of 1 s of 16 kHz audio); top functions by own and cumulative time. Run by
.ci/gpu_session.sh; on the emulator it profiles the emulated kernels too.

    python benchmarks/gpu_host_profile.py [mlp] [gpt] [lstm] [library]
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

import gputensor as gt  # noqa: E402


def training_step(kind: str) -> Callable[[], object]:
    """gpu_bench.py's ``kind`` training step (its full sizes) on gputensor's CUDA device."""
    _, inputs = gb.training_inputs(kind, gb.FULL)
    return gb.training_step(gb.GtLib(), kind, gb.FULL, inputs)[1]


def library_calls() -> Callable[[], None]:
    """One round of the slow library-backed calls (each result left to the pool)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 8, 8)).astype(np.float32)
    spd = gt.tensor(a @ a.transpose(0, 2, 1) / 8 + np.eye(8, dtype=np.float32), device="cuda")
    rhs = gt.ones(256, 8, 4, device="cuda")
    signal = gt.randn(1 << 20, device="cuda")
    audio, window = gt.randn(16000, device="cuda"), gt.hann_window(512, device="cuda")

    def run() -> None:
        gt.linalg.cholesky(spd)
        gt.linalg.solve(spd, rhs)
        gt.fft.rfft(signal)
        gt.stft(audio, 512, 128, window=window, return_complex=True)
    return run


def profile(kind: str, steps: int = 30) -> None:
    step = library_calls() if kind == "library" else training_step(kind)
    for _ in range(5):
        step()
    gt.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    gt.cuda.synchronize()
    unit = "ms per round of the 4 calls" if kind == "library" else "ms/step"
    print(f"{kind}: {(time.perf_counter() - t0) / steps * 1e3:.2f} {unit} unprofiled")
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
