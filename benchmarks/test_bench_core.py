"""Core op benchmarks: gputensor side by side with NumPy and PyTorch (CPU) on the same data.

Every test is parametrised by `lib`; the three variants of one op share a pytest-benchmark group,
and `benchmarks/report.py` turns each group into throughput ratios. No timing is asserted.
Ops that gputensor does not have yet skip with the missing name, so the file always runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import gputensor as gt

if TYPE_CHECKING:  # benchmarks/ is not a package; conftest is only needed for the types
    from conftest import Data, Lib

N16M = 1 << 24  # 16M float32 elements: 64 MiB per operand, far beyond the caches
SQ = 4096  # 4096x4096 float32: 64 MiB
F32 = 4

# Tiny ops: fixed rounds x iterations, so timer overhead per call is amortised.
SMALL_ROUNDS = 200
SMALL_ITERS = 200
IMPORT_ROUNDS = 5


def gt_function(name: str) -> Callable | None:
    """gt.<name>, falling back to gt.nn.functional.<name> (softmax may land in either)."""
    fn = getattr(gt, name, None)
    if fn is None:
        fn = getattr(getattr(getattr(gt, "nn", None), "functional", None), name, None)
    return fn


def need(lib: Lib, *names: str) -> None:
    """Skip the gputensor variant while an op it needs is not implemented yet."""
    if lib.name != "gputensor":
        return
    missing = [n for n in names if gt_function(n) is None]
    if missing:
        pytest.skip(f"gputensor has no {', '.join('gt.' + n for n in missing)} yet")


def run(benchmark: Any, lib: Lib, group: str, fn: Callable[[], Any], *, nbytes: int = 0,
        flops: int = 0, target: float | None = None, small: bool = False) -> None:
    """Warm up (the first call compiles Numba kernels), then time `fn` in `group`."""
    benchmark.group = group
    benchmark.extra_info.update(lib=lib.name, bytes=nbytes, flops=flops)
    if target is not None:
        benchmark.extra_info["target_vs_numpy"] = target
    fn()
    if small:
        benchmark.extra_info["kind"] = "overhead"
        benchmark.pedantic(fn, rounds=SMALL_ROUNDS, iterations=SMALL_ITERS, warmup_rounds=2)
    else:
        benchmark(fn)


def vec3(lib: Lib, data: Data, n: int = N16M) -> tuple[Any, Any, Any]:
    return (lib.wrap(data.get("a", (n,))), lib.wrap(data.get("b", (n,))),
            lib.wrap(data.get("out", (n,))))


# --- headline ops (targets from the project issue) ----------------------------------------------

def test_add_out(benchmark: Any, lib: Lib, data: Data) -> None:
    a, b, c = vec3(lib, data)
    run(benchmark, lib, "add 16M f32, out=", lambda: lib.xp.add(a, b, out=c),
        nbytes=3 * N16M * F32, target=0.9)


def test_add_operator(benchmark: Any, lib: Lib, data: Data) -> None:
    a, b, _ = vec3(lib, data)
    run(benchmark, lib, "add 16M f32, a + b", lambda: a + b, nbytes=3 * N16M * F32, target=0.9)


def test_sum(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "sum")
    a, _, _ = vec3(lib, data)
    run(benchmark, lib, "sum 16M f32", lambda: lib.xp.sum(a), nbytes=N16M * F32, target=0.8)


def test_matmul(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "matmul")
    n = 1024
    a, b = lib.wrap(data.get("ma", (n, n))), lib.wrap(data.get("mb", (n, n)))
    run(benchmark, lib, "matmul 1024x1024 f32", lambda: lib.xp.matmul(a, b),
        nbytes=3 * n * n * F32, flops=2 * n ** 3, target=0.9)


def test_add_small_call(benchmark: Any, lib: Lib, data: Data) -> None:
    a, b, _ = vec3(lib, data, 16)
    run(benchmark, lib, "overhead: add(a, b) 16 elems", lambda: lib.xp.add(a, b), small=True)
    benchmark.extra_info["target_us"] = 5.0


def test_add_small_operator(benchmark: Any, lib: Lib, data: Data) -> None:
    a, b, _ = vec3(lib, data, 16)
    run(benchmark, lib, "overhead: a + b 16 elems", lambda: a + b, small=True)
    benchmark.extra_info["target_us"] = 5.0


# --- import time ---------------------------------------------------------------------------------

_TIMED_IMPORT = ("import time; t = time.perf_counter(); import {mod}; "
                 "print(time.perf_counter() - t)")


def _import_seconds(module: str) -> float:
    """Time `import module` inside a fresh interpreter (startup itself excluded)."""
    proc = subprocess.run([sys.executable, "-c", _TIMED_IMPORT.format(mod=module)],
                          capture_output=True, text=True, check=True, env=os.environ.copy())
    return float(proc.stdout.strip().splitlines()[-1])


def importtime_breakdown(module: str, top: int = 6) -> dict[str, float]:
    """`python -X importtime`: self time (ms) summed per top-level package, largest first."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          capture_output=True, text=True, check=True)
    per_pkg: dict[str, float] = defaultdict(float)
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|\s+\d+\s+\|\s+(\S+)", line.rstrip())
        if m:
            per_pkg[m.group(2).split(".")[0]] += int(m.group(1)) / 1000.0
    ranked = sorted(per_pkg.items(), key=lambda kv: -kv[1])[:top]
    return {k: round(v, 1) for k, v in ranked}


def test_import_time(benchmark: Any, lib: Lib) -> None:
    """Wall time of a fresh `python -c "import <lib>"`; extra_info holds the import alone."""
    benchmark.group = "import (fresh subprocess)"
    benchmark.extra_info.update(lib=lib.name, kind="import")
    if lib.name == "gputensor":
        benchmark.extra_info["target_s"] = 1.5
    seconds: list[float] = []

    def once() -> None:
        seconds.append(_import_seconds(lib.name))

    # The warm-up round fills __pycache__ and the OS file cache: the targets assume both.
    benchmark.pedantic(once, rounds=IMPORT_ROUNDS, warmup_rounds=1, iterations=1)
    timed = seconds[-IMPORT_ROUNDS:]
    benchmark.extra_info["import_s"] = [round(s, 4) for s in timed]
    benchmark.extra_info["import_s_min"] = min(timed)
    if lib.name == "gputensor":
        benchmark.extra_info["importtime_ms_by_package"] = importtime_breakdown(lib.name)


# --- extras --------------------------------------------------------------------------------------

def test_exp_out(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "exp")
    a, _, c = vec3(lib, data)
    run(benchmark, lib, "exp 16M f32, out=", lambda: lib.xp.exp(a, out=c),
        nbytes=2 * N16M * F32)


def test_add_broadcast(benchmark: Any, lib: Lib, data: Data) -> None:
    x, row = lib.wrap(data.get("x", (SQ, SQ))), lib.wrap(data.get("row", (SQ,)))
    z = lib.wrap(data.get("z", (SQ, SQ)))
    run(benchmark, lib, "add 4096x4096 + 4096 (broadcast), out=",
        lambda: lib.xp.add(x, row, out=z), nbytes=2 * SQ * SQ * F32)


def test_add_transposed(benchmark: Any, lib: Lib, data: Data) -> None:
    x, y = lib.wrap(data.get("x", (SQ, SQ))), lib.wrap(data.get("y", (SQ, SQ)))
    z = lib.wrap(data.get("z", (SQ, SQ)))
    xt = x.T  # a strided view: column-major reads against row-major writes
    run(benchmark, lib, "add 4096x4096 x.T + y (strided), out=",
        lambda: lib.xp.add(xt, y, out=z), nbytes=3 * SQ * SQ * F32)


def test_sum_dim(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "sum")
    x = lib.wrap(data.get("x", (SQ, SQ)))
    if lib.name == "numpy":
        fn = lambda: np.sum(x, axis=1)  # noqa: E731
    else:
        fn = lambda: lib.xp.sum(x, dim=1)  # noqa: E731
    run(benchmark, lib, "sum(dim=1) 4096x4096 f32", fn, nbytes=SQ * SQ * F32)


def test_mean(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "mean")
    a, _, _ = vec3(lib, data)
    run(benchmark, lib, "mean 16M f32", lambda: lib.xp.mean(a), nbytes=N16M * F32)


def _numpy_softmax(x: np.ndarray) -> np.ndarray:
    """NumPy has no softmax: the usual max-shifted composite (what scipy.special does)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return e


def test_softmax(benchmark: Any, lib: Lib, data: Data) -> None:
    need(lib, "softmax")
    x = lib.wrap(data.get("sm", (4096, 1024)))
    if lib.name == "numpy":
        fn = lambda: _numpy_softmax(x)  # noqa: E731
    elif lib.name == "torch":
        fn = lambda: lib.xp.softmax(x, dim=-1)  # noqa: E731
    else:
        softmax = gt_function("softmax")
        fn = lambda: softmax(x, dim=-1)  # noqa: E731
    run(benchmark, lib, "softmax(dim=-1) 4096x1024 f32", fn, nbytes=2 * 4096 * 1024 * F32)
