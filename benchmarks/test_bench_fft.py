"""FFT benchmarks (issue 17), gputensor beside PyTorch and SciPy (the ``numpy`` variant runs
scipy.fft, pocketfft, with the same thread count) on the same data: ``rfft`` of 2^20 float32
points and ``stft`` of one second of 16 kHz audio (n_fft 512, hop 128, Hann window, centred
with reflect padding; SciPy's variant frames a reflect-padded copy with a strided view and
runs one batched rfft). No timing is asserted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.fft
from conftest import CORES
from test_bench_core import F32, run

if TYPE_CHECKING:
    from conftest import Data, Lib

N1M = 1 << 20
AUDIO = 16000
N_FFT, HOP = 512, 128


def test_rfft_1m(benchmark: Any, lib: Lib, data: Data) -> None:
    a = lib.wrap(data.get("signal", (N1M,)))
    if lib.name == "numpy":
        fn = lambda: scipy.fft.rfft(a, workers=CORES)  # noqa: E731
    else:
        fn = lambda: lib.xp.fft.rfft(a)  # noqa: E731
    run(benchmark, lib, "rfft 2^20 f32", fn, nbytes=N1M * F32 * 3,
        flops=int(2.5 * N1M * 20))


def _scipy_stft(x: np.ndarray, window: np.ndarray) -> np.ndarray:
    padded = np.pad(x, N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    return scipy.fft.rfft(frames * window, axis=-1, workers=CORES).T


def test_stft_1s_16k(benchmark: Any, lib: Lib, data: Data) -> None:
    x = data.get("audio", (AUDIO,))
    window = np.hanning(N_FFT + 1)[:-1].astype(np.float32)  # periodic Hann
    n_frames = 1 + AUDIO // HOP
    if lib.name == "numpy":
        fn = lambda: _scipy_stft(x, window)  # noqa: E731
    else:
        a, w = lib.wrap(x), lib.xp.hann_window(N_FFT)
        fn = lambda: lib.xp.stft(a, N_FFT, HOP, window=w, return_complex=True)  # noqa: E731
    run(benchmark, lib, "stft 1 s 16 kHz (n_fft 512, hop 128, hann)", fn,
        nbytes=n_frames * N_FFT * F32 * 3, flops=int(2.5 * n_frames * N_FFT * 9))
