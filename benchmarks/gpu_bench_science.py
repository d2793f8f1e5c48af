"""gpu_bench.py's items for issue 17 and the recurrent model of issue 14: linalg on cuSOLVER
(solve, cholesky, qr, svd, eigh of one 512x512 and of 256 8x8 float32 matrices), rfft of 2^20
points and stft of 1 s of 16 kHz audio on cuFFT, erfinv and lgamma of 16M float32, and a char
LSTM training step. The same cases as benchmarks/test_bench_{linalg,fft,special}.py on the CPU.
Imported by gpu_bench.py (its all_items() registers these after its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gpu_bench as gb
import numpy as np

N_FFT, HOP = 512, 128  # test_bench_fft.py's stft


def _spd(n: int, batch: int | None) -> np.ndarray:
    """A well-conditioned symmetric positive definite float32 matrix (or batch), as the CPU
    benchmark's: a @ a.T / n + I."""
    rng = np.random.default_rng(3)
    shape = (n, n) if batch is None else (batch, n, n)
    a = rng.standard_normal(shape, dtype=np.float32)
    return (a @ np.swapaxes(a, -1, -2) / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def _linalg_call(lib: gb.Lib, op: str, a: Any, b: Any) -> Callable[[], Any]:
    la = lib.mod.linalg
    if op == "solve":
        return lambda: la.solve(a, b)
    if op == "cholesky":
        return lambda: la.cholesky(a)
    if op == "qr":
        return lambda: la.qr(a)
    if op == "svd":
        return lambda: la.svd(a, full_matrices=False)
    return lambda: la.eigh(a)


def _linalg_item(op: str, batch: int | None) -> Callable[[gb.Ctx], dict[str, Any]]:
    n = 512 if batch is None else 8

    def item(ctx: gb.Ctx) -> dict[str, Any]:
        shape = f"{n}x{n}" if batch is None else f"{batch} x {n}x{n}"
        it: dict[str, Any] = {"what": f"linalg.{op} of {shape} float32 (SPD input)",
                              "metric": "ms"}
        host = _spd(n, batch)
        rhs = np.random.default_rng(4).standard_normal(host.shape[:-1] + (4,), np.float32)

        def one(lib: gb.Lib) -> dict[str, Any]:
            a, b = lib.dev(host), lib.dev(rhs)
            r = gb.measure(lib, _linalg_call(lib, op, a, b), ctx.sz)
            if op == "solve":
                x = lib.to_host(_linalg_call(lib, op, a, b)())
                r["max_residual"] = float(np.abs(host @ x - rhs).max())
            return r

        gb.for_each_lib(ctx, it, one)
        return it
    return item


def item_rfft(ctx: gb.Ctx) -> dict[str, Any]:
    n = 1 << 20
    it: dict[str, Any] = {"what": "fft.rfft of 2^20 float32 points", "metric": "gbps"}

    def one(lib: gb.Lib) -> dict[str, Any]:
        x = lib.dev(ctx.host("a", (n,)))
        return gb.measure(lib, lambda: lib.mod.fft.rfft(x), ctx.sz)

    gb.for_each_lib(ctx, it, one)
    gb._bandwidth(it, ctx, n * 4 + (n // 2 + 1) * 8)
    return it


def item_stft(ctx: gb.Ctx) -> dict[str, Any]:
    n = 16000
    it: dict[str, Any] = {"what": f"stft of 1 s of 16 kHz float32 audio (n_fft {N_FFT}, hop "
                                  f"{HOP}, periodic Hann, centred, complex)", "metric": "ms"}
    window = (np.hanning(N_FFT + 1)[:-1]).astype(np.float32)

    def one(lib: gb.Lib) -> dict[str, Any]:
        if lib.name == "cupy":
            raise gb.Unsupported("CuPy has no torch-style stft")
        x, w = lib.dev(ctx.host("a", (n,))), lib.dev(window)
        r = gb.measure(lib, lambda: lib.mod.stft(x, N_FFT, HOP, window=w,
                                                 return_complex=True), ctx.sz)
        return r

    gb.for_each_lib(ctx, it, one)
    return it


def _special_item(name: str, lo: float, hi: float) -> Callable[[gb.Ctx], dict[str, Any]]:
    def item(ctx: gb.Ctx) -> dict[str, Any]:
        n = 16 << 20 if ctx.sz is gb.FULL else 1 << 16
        it: dict[str, Any] = {"what": f"{name} of {n >> 20 or n}{'M' if n >> 20 else ''} "
                                      f"float32 in ({lo}, {hi})", "metric": "gbps"}
        u = np.random.default_rng(5).random(n, dtype=np.float32)
        host = (u * np.float32(hi - lo) + np.float32(lo)).astype(np.float32)

        def one(lib: gb.Lib) -> dict[str, Any]:
            x = lib.dev(host)
            if lib.name == "cupy":
                import cupyx.scipy.special as cs
                fn = getattr(cs, "gammaln" if name == "lgamma" else name)
                return gb.measure(lib, lambda: fn(x), ctx.sz)
            return gb.measure(lib, lambda: getattr(lib.mod, name)(x), ctx.sz)

        gb.for_each_lib(ctx, it, one)
        gb._bandwidth(it, ctx, 2 * n * 4)
        return it
    return item


def build_char_lstm(lib: Any, vocab: int = 65) -> Any:
    """test_bench_compile.py's char LSTM: embedding 32, one batch-first LSTM layer of hidden
    128, a linear head; ``model(idx, targets)`` returns the cross-entropy loss."""
    nn = lib.nn

    class CharLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, 32)
            self.rnn = nn.LSTM(32, 128, batch_first=True)
            self.head = nn.Linear(128, vocab)

        def forward(self, idx: Any, targets: Any) -> Any:
            logits = self.head(self.rnn(self.emb(idx))[0])
            return nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    return CharLSTM()


ITEMS: dict[str, Callable[[gb.Ctx], dict[str, Any]]] = {
    **{f"linalg_{op}_512": _linalg_item(op, None)
       for op in ("solve", "cholesky", "qr", "svd", "eigh")},
    **{f"linalg_{op}_256x8": _linalg_item(op, 256)
       for op in ("solve", "cholesky", "qr", "svd", "eigh")},
    "rfft_1m": item_rfft,
    "stft_16k": item_stft,
    "erfinv_16m": _special_item("erfinv", -0.99, 0.99),
    "lgamma_16m": _special_item("lgamma", 0.1, 20.0),
}
