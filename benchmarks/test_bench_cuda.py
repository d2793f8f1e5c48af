"""CUDA benchmarks: host <-> device transfer throughput and gputensor-on-cuda variants of a few
ops, beside NumPy (on the host) and torch.cuda when it is available.

With GPUTENSOR_CUDA_EMULATOR=1 the "cuda" device is the CPU emulator: every group name here
then carries "[emulated CUDA]" so nobody reads those times as GPU times; on a GPU it carries
"[cuda]". Without any CUDA runtime the whole file skips with the reason. Every timed call ends
with a synchronisation, so queued device work is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from test_bench_core import F32, run

import gputensor as gt

if TYPE_CHECKING:
    from conftest import Data, Lib

if not gt.cuda.is_available():
    pytest.skip(f"no CUDA runtime ({gt.cuda.why_unavailable()}); set GPUTENSOR_CUDA_EMULATOR=1 "
                "for the emulator", allow_module_level=True)

EMULATED = gt.cuda.runtime_name() == "emulator"
TAG = "[emulated CUDA]" if EMULATED else "[cuda]"
N_TRANSFER = 1 << 24                        # 64 MiB of float32
N_OP = 1 << 18 if EMULATED else 1 << 24     # the emulator runs threads as fibers: keep it short


def _torch_cuda() -> Any | None:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


TORCH_CUDA = _torch_cuda()


def _sync_for(lib: Lib) -> Callable[[], None]:
    """lib's device synchronise (skips torch without torch.cuda; a no-op for NumPy)."""
    if lib.name == "gputensor":
        return gt.cuda.synchronize
    if lib.name == "torch":
        if TORCH_CUDA is None:
            pytest.skip("torch.cuda is not available")
        return TORCH_CUDA.cuda.synchronize
    return lambda: None


def _on_device(lib: Lib, host: np.ndarray) -> tuple[Any, Callable[[], None]]:
    """(the array on lib's device for this file, its synchronise): gputensor and torch on
    cuda; NumPy stays on the host as the baseline."""
    sync = _sync_for(lib)
    return (host if lib.name == "numpy" else lib.wrap(host).cuda()), sync


def _synced(fn: Callable[[], Any], sync: Callable[[], None]) -> Callable[[], None]:
    def call() -> None:
        fn()
        sync()
    return call


# --- transfers -----------------------------------------------------------------------------------

def test_to_cuda(benchmark: Any, lib: Lib, data: Data) -> None:
    if lib.name == "numpy":
        pytest.skip("NumPy has no device")
    sync = _sync_for(lib)
    src = lib.wrap(data.get("a", (N_TRANSFER,)))
    run(benchmark, lib, f"transfer {TAG}: .cuda() 16M f32", _synced(src.cuda, sync),
        nbytes=N_TRANSFER * F32)


def test_to_cpu(benchmark: Any, lib: Lib, data: Data) -> None:
    if lib.name == "numpy":
        pytest.skip("NumPy has no device")
    x, sync = _on_device(lib, data.get("a", (N_TRANSFER,)))
    run(benchmark, lib, f"transfer {TAG}: .cpu() 16M f32", _synced(x.cpu, sync),
        nbytes=N_TRANSFER * F32)


# --- ops on the device ---------------------------------------------------------------------------

def _label(what: str) -> str:
    n = f"{N_OP >> 20}M" if N_OP >= 1 << 20 else f"{N_OP >> 10}K"
    return f"{TAG} {what.format(n=n)}"


def test_cuda_add_out(benchmark: Any, lib: Lib, data: Data) -> None:
    (a, sync), (b, _), (c, _) = (_on_device(lib, data.get(k, (N_OP,))) for k in ("a", "b", "out"))
    run(benchmark, lib, _label("add {n} f32, out="),
        _synced(lambda: lib.xp.add(a, b, out=c), sync), nbytes=3 * N_OP * F32)


def test_cuda_sum(benchmark: Any, lib: Lib, data: Data) -> None:
    a, sync = _on_device(lib, data.get("a", (N_OP,)))
    run(benchmark, lib, _label("sum {n} f32"), _synced(lambda: lib.xp.sum(a), sync),
        nbytes=N_OP * F32)


def test_cuda_matmul(benchmark: Any, lib: Lib, data: Data) -> None:
    n = 256
    (a, sync), (b, _) = (_on_device(lib, data.get(k, (n, n))) for k in ("ma", "mb"))
    run(benchmark, lib, f"{TAG} matmul {n}x{n} f32", _synced(lambda: lib.xp.matmul(a, b), sync),
        nbytes=3 * n * n * F32, flops=2 * n ** 3)


def test_cuda_softmax(benchmark: Any, lib: Lib, data: Data) -> None:
    rows = N_OP // 1024
    x, sync = _on_device(lib, data.get("sm", (rows, 1024)))
    if lib.name == "numpy":
        def fn() -> Any:
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e
    else:
        softmax = lib.xp.softmax
        fn = lambda: softmax(x, dim=-1)  # noqa: E731
    run(benchmark, lib, f"{TAG} softmax(dim=-1) {rows}x1024 f32", _synced(fn, sync),
        nbytes=2 * rows * 1024 * F32)
