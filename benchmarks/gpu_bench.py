#!/usr/bin/env python
"""One-shot GPU benchmark: gputensor (device "cuda") beside PyTorch (CUDA build) and CuPy, in one
process on the same card.

    python benchmarks/gpu_bench.py --out result.json [--quick] [--only add,gemm_fp32] [--list]

What it measures (full sizes; ``--quick`` shrinks them, see ``QUICK``):

- ``bandwidth_d2d``: the reference bandwidth, a 256 MiB device-to-device memcpy through CuPy
  (``MemoryPointer.copy_from_device_async``; torch.cuda ``copy_`` or gputensor ``copy_`` when
  CuPy is missing, and the JSON says which). Every "% of d2d" below is against this figure.
- ``add`` (``a + b``), ``copy`` (``b.copy_(a)``; CuPy ``copyto``) and ``sum`` of 256 MiB
  float32 (64M elements); ``softmax`` over the last dim of (8192, 8192) float32 (CuPy has no
  softmax: a max-shifted exp / sum composite). GB/s and % of the d2d bandwidth.
- ``gemm_fp32``, ``gemm_tf32``, ``gemm_bf16``: 4096x4096x4096 products; ``bmm`` 512 x (64x64 @
  64x64) float32. TFLOP/s (2*M*N*K per product), and the error of a 64x64 corner against a
  float64 product on the host (which shows whether TF32 / bf16 really ran).
- ``host_overhead``: the host cost of one eager 1024-element ``a + b`` while the GPU is busy
  (about 50 ms of 4096 matmuls queued first), per op in microseconds, and the same with the
  GPU idle; ``gpu_busy_at_end`` says whether the queue outlived the timed loop. The same for a
  broadcast add ((32, 32) + (32,), keys ``broadcast_*``) and a full ``sum`` (``sum_*``).
- ``train_mlp`` (784-256-256-10, batch 128), ``train_cnn`` (gputensor/demo.py's CNN on 1x8x8
  digits, batch 64) and ``train_gpt`` (2 layers, n_embd 128, 4 heads, block 64, vocab 65, batch
  32; one model source for torch.nn and gt.nn): zero_grad, forward, cross entropy, backward and
  an Adam step. Median step time with a synchronisation around each step, and the mean step of
  back-to-back steps with one synchronisation at the end ("pipelined").

Timing: one untimed warm-up call (compilation is never timed), a calibration call, then the
median over repeats of a loop of calls timed with each library's CUDA events (gt.cuda.Event,
torch.cuda.Event, cupy.cuda.Event); perf_counter around synchronisations where a library has no
device. Every item, and every library inside an item, has its own try/except: a failure is
recorded as its error string and the rest still runs; the JSON is rewritten after each item.
``--quick`` (automatic under GPUTENSOR_CUDA_EMULATOR=1 or when torch has no CUDA) shrinks every
size so the script dry-runs on the CPU emulator; its times say nothing about a GPU. Ratios in
the JSON and the table are gputensor's time over the other library's (> 1: gputensor slower).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SCHEMA = "gputensor-gpu-bench/1"
EMULATOR_ENV = "GPUTENSOR_CUDA_EMULATOR"
BYTE_COUNTING = (
    "bytes moved through device memory: every element read counts its size once and every "
    "element written once. d2d memcpy of S bytes = 2*S; add = 3 x 4 B per element (two reads, "
    "one write); copy = 2 x 4 B; sum = 4 B (one read; the scalar written is ignored); softmax = "
    "2 x 4 B (one read, one write: the minimum, a multi-pass implementation moves more). "
    "GB/s = counted bytes / median time / 1e9; pct_of_d2d = GB/s / bandwidth_d2d GB/s * 100.")


@dataclass(frozen=True)
class Sizes:
    n_stream: int                   # float32 elements of the add / copy / sum operands
    softmax: tuple[int, int]
    gemm: int                       # M = N = K
    bmm: tuple[int, int, int, int]  # batch, M, K, N
    small: int                      # elements of the host-overhead add
    small_ops: int                  # small adds timed per repeat
    busy_s: float                   # GPU work queued before the small adds
    busy_cap: int                   # at most this many big matmuls in that queue
    warmup_steps: int
    steps: int
    gpt_batch: int
    gpt_block: int
    repeats: int                    # timed repeats per measurement (at most)
    repeat_s: float                 # a repeat loops calls until it lasts about this long
    budget_s: float                 # per measurement: fewer repeats (not below 3) past this


FULL = Sizes(n_stream=64 << 20, softmax=(8192, 8192), gemm=4096, bmm=(512, 64, 64, 64),
             small=1024, small_ops=200, busy_s=0.05, busy_cap=200, warmup_steps=5, steps=30,
             gpt_batch=32, gpt_block=64, repeats=10, repeat_s=5e-3, budget_s=1.5)
QUICK = Sizes(n_stream=256 << 10, softmax=(512, 512), gemm=128, bmm=(16, 32, 32, 32),
              small=1024, small_ops=200, busy_s=0.05, busy_cap=20, warmup_steps=1, steps=2,
              gpt_batch=4, gpt_block=32, repeats=3, repeat_s=1e-3, budget_s=0.5)

TRAIN_PHASE_S = 3.0   # synced steps, then pipelined steps: about this long each, at most

GPT = {"n_layer": 2, "n_embd": 128, "n_head": 4, "vocab": 65}


class Unsupported(Exception):
    """A feature a library does not have (recorded as "unsupported: ...", not as an error)."""


class Skipped(Exception):
    """An item that does not apply to a library (recorded as "skipped: ...")."""


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".strip()[:2000]


# --- the three libraries -----------------------------------------------------------------------

class Lib:
    """One library's column: how to put host data on its device, synchronise, time with its
    events. ``status`` is "ok" or why the column cannot run."""

    name = ""
    short = ""

    def __init__(self) -> None:
        self.status = "ok"
        self.device = "cuda"
        self.mod: Any = None
        self.notes: list[str] = []
        self.qualifier = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def column(self) -> str:
        """What the column ran on, for the table's footer."""
        return f"{self.device}{self.qualifier}" if self.ok else self.status

    @property
    def on_device(self) -> bool:
        return self.device != "cpu"

    def sync(self) -> None:
        raise NotImplementedError

    def dev(self, host: np.ndarray) -> Any:
        raise NotImplementedError

    def to_host(self, x: Any) -> np.ndarray:
        raise NotImplementedError

    def bf16(self, x: Any) -> Any:
        raise NotImplementedError

    def event(self) -> Any | None:
        """A timing event, or None when the column has no device (perf_counter then)."""
        return None

    def record(self, ev: Any) -> None:
        ev.record()

    def done(self, ev: Any) -> bool:
        return bool(ev.query())

    def elapsed_s(self, e0: Any, e1: Any) -> float:
        return float(e0.elapsed_time(e1)) / 1e3

    def cleanup(self) -> None:
        gc.collect()

    def info(self) -> dict[str, Any]:
        return {"status": self.status, "device": self.device if self.ok else "n/a",
                "column": self.column(), "notes": self.notes}


class GtLib(Lib):
    name, short = "gputensor", "gt"

    def __init__(self) -> None:
        super().__init__()
        try:
            import gputensor as gt
        except Exception as e:  # noqa: BLE001 - any import failure disables the column
            self.status = f"gputensor import failed: {_err(e)}"
            return
        self.mod = gt
        try:
            if not gt.cuda.is_available():
                self.status = f"gputensor CUDA unavailable: {gt.cuda.why_unavailable()}"
            elif gt.cuda.runtime_name() == "emulator":
                self.notes.append("CUDA is the CPU emulator: times say nothing about a GPU")
                self.qualifier = " (CPU emulator)"
        except Exception as e:  # noqa: BLE001
            self.status = f"gputensor CUDA probe failed: {_err(e)}"

    def sync(self) -> None:
        self.mod.cuda.synchronize()

    def dev(self, host: np.ndarray) -> Any:
        return self.mod.from_numpy(np.ascontiguousarray(host)).cuda()

    def to_host(self, x: Any) -> np.ndarray:
        if x.dtype != self.mod.float32 and x.is_floating_point():
            x = x.float()
        return x.cpu().numpy()

    def bf16(self, x: Any) -> Any:
        try:
            return x.to(self.mod.bfloat16)
        except Exception as e:  # noqa: BLE001
            raise Unsupported(f"gputensor bfloat16 cast on cuda: {_err(e)}") from e

    def event(self) -> Any:
        return self.mod.cuda.Event(enable_timing=True)

    def cleanup(self) -> None:
        gc.collect()
        with contextlib.suppress(Exception):
            self.mod.cuda.empty_cache()

    def info(self) -> dict[str, Any]:
        out = super().info()
        gt = self.mod
        if gt is None:
            return out
        with contextlib.suppress(Exception):
            import importlib.metadata as md
            out["version"] = md.version("gputensor")
        with contextlib.suppress(Exception):
            out["file"] = gt.__file__
        if self.ok:
            with contextlib.suppress(Exception):
                out["runtime"] = gt.cuda.runtime_name()
            with contextlib.suppress(Exception):
                out["device_name"] = gt.cuda.get_device_name()
            with contextlib.suppress(Exception):
                from gputensor.profiler.peaks import datasheet_peaks
                peaks = datasheet_peaks(out.get("device_name", ""))
                if peaks is not None:
                    out["datasheet"] = asdict(peaks)
        return out


class TorchLib(Lib):
    name, short = "torch", "torch"

    def __init__(self) -> None:
        super().__init__()
        try:
            import torch
        except Exception as e:  # noqa: BLE001
            self.status = f"torch not installed: {_err(e)}"
            return
        self.mod = torch
        if not torch.cuda.is_available():
            self.device = "cpu"
            self.qualifier = " (torch has no CUDA)"
            self.notes.append("torch has no CUDA here: its column ran on the CPU, so its "
                              "figures and the gt/torch ratios compare against a CPU")

    def sync(self) -> None:
        if self.on_device:
            self.mod.cuda.synchronize()

    def dev(self, host: np.ndarray) -> Any:
        t = self.mod.from_numpy(np.ascontiguousarray(host))
        return t.to(self.device) if self.on_device else t.clone()  # never alias host data

    def to_host(self, x: Any) -> np.ndarray:
        if x.is_floating_point():
            x = x.float()
        return x.detach().cpu().numpy()

    def bf16(self, x: Any) -> Any:
        return x.to(self.mod.bfloat16)

    def event(self) -> Any | None:
        return self.mod.cuda.Event(enable_timing=True) if self.on_device else None

    def cleanup(self) -> None:
        gc.collect()
        if self.on_device:
            with contextlib.suppress(Exception):
                self.mod.cuda.empty_cache()

    def info(self) -> dict[str, Any]:
        out = super().info()
        torch = self.mod
        if torch is None:
            return out
        out["version"] = str(torch.__version__)
        out["cuda_build"] = str(torch.version.cuda)
        out["threads"] = torch.get_num_threads()
        if self.on_device:
            with contextlib.suppress(Exception):
                out["device_name"] = torch.cuda.get_device_name()
            with contextlib.suppress(Exception):
                out["cudnn"] = torch.backends.cudnn.version()
        return out


class CupyLib(Lib):
    name, short = "cupy", "cupy"

    def __init__(self) -> None:
        super().__init__()
        try:
            import cupy
        except Exception as e:  # noqa: BLE001
            self.status = f"cupy not installed ({_err(e)})"
            return
        self.mod = cupy
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                self.status = "cupy sees no CUDA device"
        except Exception as e:  # noqa: BLE001
            self.status = f"cupy sees no CUDA device: {_err(e)}"

    def sync(self) -> None:
        self.mod.cuda.Device().synchronize()

    def dev(self, host: np.ndarray) -> Any:
        return self.mod.asarray(np.ascontiguousarray(host))

    def to_host(self, x: Any) -> np.ndarray:
        if x.dtype.kind == "f" or x.dtype.kind == "V":
            x = x.astype(np.float32)
        return self.mod.asnumpy(x)

    def bf16(self, x: Any) -> Any:
        bf = getattr(self.mod, "bfloat16", None)
        if bf is None:  # CuPy 14 takes ml_dtypes.bfloat16 (a gputensor dependency)
            try:
                import ml_dtypes
            except ImportError as e:
                raise Unsupported("no cupy.bfloat16 and no ml_dtypes") from e
            bf = ml_dtypes.bfloat16
        try:
            return x.astype(bf)
        except Exception as e:  # noqa: BLE001
            raise Unsupported(f"cupy bfloat16: {_err(e)}") from e

    def event(self) -> Any:
        return self.mod.cuda.Event()

    def done(self, ev: Any) -> bool:
        return bool(ev.done)

    def elapsed_s(self, e0: Any, e1: Any) -> float:
        return float(self.mod.cuda.get_elapsed_time(e0, e1)) / 1e3

    def cleanup(self) -> None:
        gc.collect()
        with contextlib.suppress(Exception):
            self.mod.get_default_memory_pool().free_all_blocks()

    def info(self) -> dict[str, Any]:
        out = super().info()
        cp = self.mod
        if cp is None:
            return out
        out["version"] = str(cp.__version__)
        if self.ok:
            rt = cp.cuda.runtime
            with contextlib.suppress(Exception):
                out["cuda_runtime"] = rt.runtimeGetVersion()
            with contextlib.suppress(Exception):
                out["cuda_driver"] = rt.driverGetVersion()
            with contextlib.suppress(Exception):
                props = rt.getDeviceProperties(0)
                name = props["name"]
                out["device_name"] = name.decode() if isinstance(name, bytes) else str(name)
                out["sm_count"] = int(props["multiProcessorCount"])
                out["memory_bytes"] = int(props["totalGlobalMem"])
                out["compute_capability"] = f"{props['major']}.{props['minor']}"
                out["clock_khz"] = int(props.get("clockRate", 0))
                out["memory_clock_khz"] = int(props.get("memoryClockRate", 0))
                out["memory_bus_width"] = int(props.get("memoryBusWidth", 0))
        return out


# --- timing ------------------------------------------------------------------------------------

def time_calls(lib: Lib, fn: Callable[[], Any], calls: int) -> float:
    """Seconds per call of ``calls`` back-to-back calls: the library's events around the loop
    (the queue is drained first), or perf_counter around synchronisations without a device."""
    lib.sync()
    e0 = lib.event()
    if e0 is None:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        lib.sync()
        return (time.perf_counter() - t0) / calls
    e1 = lib.event()
    lib.record(e0)
    for _ in range(calls):
        fn()
    lib.record(e1)
    e1.synchronize()
    return lib.elapsed_s(e0, e1) / calls


def measure(lib: Lib, fn: Callable[[], Any], sz: Sizes) -> dict[str, Any]:
    """Warm-up, calibration, then the median and minimum over repeats (seconds per call)."""
    fn()
    lib.sync()
    t0 = time.perf_counter()
    fn()
    lib.sync()
    one = max(time.perf_counter() - t0, 1e-7)
    calls = max(1, min(1000, int(sz.repeat_s / one)))
    repeats = max(3, min(sz.repeats, int(sz.budget_s / (one * calls))))
    times = [time_calls(lib, fn, calls) for _ in range(repeats)]
    lib.sync()  # gputensor: raises any error a kernel recorded
    return {"s": statistics.median(times), "s_min": min(times), "calls_per_repeat": calls,
            "repeats": repeats, "timer": "perf_counter" if lib.event() is None else "events"}


# --- the context and the item runner -----------------------------------------------------------

@dataclass
class Ctx:
    libs: list[Lib]
    sz: Sizes
    d2d_gbps: float | None = None
    d2d_method: str = ""
    _host: dict[str, np.ndarray] | None = None

    def host(self, which: str, shape: tuple[int, ...]) -> np.ndarray:
        """Float32 standard-normal data (two buffers, "a" and "b"), as views of one array."""
        n = math.prod(shape)
        if self._host is None:
            self._host = {}
        buf = self._host.get(which)
        if buf is None or buf.size < n:
            rng = np.random.default_rng(0 if which == "a" else 1)
            buf = rng.standard_normal(max(n, self.sz.n_stream), dtype=np.float32)
            self._host[which] = buf
        return buf[:n].reshape(shape)

    def lib(self, name: str) -> Lib:
        return next(lb for lb in self.libs if lb.name == name)


def for_each_lib(ctx: Ctx, item: dict[str, Any], run_one: Callable[[Lib], dict[str, Any]],
                 libs: tuple[str, ...] = ("gputensor", "torch", "cupy")) -> None:
    """Run ``run_one`` per library, each in its own try/except, into item["results"]."""
    results = item.setdefault("results", {})
    for lib in ctx.libs:
        if lib.name not in libs:
            continue
        if not lib.ok:
            results[lib.name] = {"skipped": lib.status}
            continue
        t0 = time.perf_counter()
        try:
            r = run_one(lib)
        except Unsupported as e:
            r = {"unsupported": str(e)}
        except Skipped as e:
            r = {"skipped": str(e)}
        except Exception as e:  # noqa: BLE001 - one failing library never loses the rest
            r = {"error": _err(e),
                 "traceback": traceback.format_exc(limit=-6)[-3000:]}
            with contextlib.suppress(Exception):  # leave the device usable for the next one
                lib.sync()
        finally:
            lib.cleanup()
        r["device"] = lib.device
        r["wall_s"] = round(time.perf_counter() - t0, 3)
        results[lib.name] = r


def _ratios(item: dict[str, Any]) -> None:
    res = item.get("results", {})
    gt_s = res.get("gputensor", {}).get("s")
    for other in ("torch", "cupy"):
        o_s = res.get(other, {}).get("s")
        if gt_s and o_s:
            item.setdefault("ratios", {})[f"gt_time_over_{other}"] = gt_s / o_s


def _bandwidth(item: dict[str, Any], ctx: Ctx, nbytes: int) -> None:
    item["bytes_counted"] = nbytes
    for r in item.get("results", {}).values():
        if "s" in r:
            r["gbps"] = nbytes / r["s"] / 1e9
            if ctx.d2d_gbps:
                r["pct_of_d2d"] = 100.0 * r["gbps"] / ctx.d2d_gbps


def _flops(item: dict[str, Any], flops: float) -> None:
    item["flops"] = flops
    for r in item.get("results", {}).values():
        if "s" in r:
            r["tflops"] = flops / r["s"] / 1e12


# --- items: memory-bound -----------------------------------------------------------------------

def item_bandwidth_d2d(ctx: Ctx) -> dict[str, Any]:
    n = ctx.sz.n_stream
    nbytes = n * 4
    item: dict[str, Any] = {
        "what": f"device-to-device copy of {nbytes >> 20} MiB, the reference bandwidth",
        "metric": "gbps", "bytes_counted": 2 * nbytes, "byte_counting": "read + write = 2 x size"}
    cp, torch_lib, gt_lib = ctx.lib("cupy"), ctx.lib("torch"), ctx.lib("gputensor")
    if cp.ok:
        src, dst = cp.dev(ctx.host("a", (n,))), cp.mod.empty(n, dtype=np.float32)
        lib, method = cp, "cupy MemoryPointer.copy_from_device_async (cudaMemcpyAsync D2D)"
        fn: Callable[[], Any] = lambda: dst.data.copy_from_device_async(src.data, nbytes)  # noqa: E731
    elif torch_lib.ok and torch_lib.on_device:
        src = torch_lib.dev(ctx.host("a", (n,)))
        dst = torch_lib.mod.empty_like(src)
        lib, method = torch_lib, f"torch.cuda dst.copy_(src) ({cp.status})"
        fn = lambda: dst.copy_(src)  # noqa: E731
    elif gt_lib.ok:
        src = gt_lib.dev(ctx.host("a", (n,)))
        dst = gt_lib.mod.empty_like(src)
        lib, method = gt_lib, (f"gputensor dst.copy_(src) ({cp.status}; torch: "
                               f"{torch_lib.status if not torch_lib.ok else 'no CUDA'})")
        fn = lambda: dst.copy_(src)  # noqa: E731
    else:
        item["error"] = "no library with a CUDA device"
        return item
    r = measure(lib, fn, ctx.sz)
    r["gbps"] = 2 * nbytes / r["s"] / 1e9
    r["library"] = lib.name
    item["method"] = method
    item["results"] = {lib.name: r}
    ctx.d2d_gbps, ctx.d2d_method = r["gbps"], method
    return item


def item_add(ctx: Ctx) -> dict[str, Any]:
    n = ctx.sz.n_stream
    item = {"what": f"c = a + b, {n * 4 >> 20} MiB float32 each ({n:,} elements)",
            "metric": "gbps"}

    def one(lib: Lib) -> dict[str, Any]:
        a, b = lib.dev(ctx.host("a", (n,))), lib.dev(ctx.host("b", (n,)))
        return measure(lib, lambda: a + b, ctx.sz)

    for_each_lib(ctx, item, one)
    _bandwidth(item, ctx, 3 * n * 4)
    return item


def item_copy(ctx: Ctx) -> dict[str, Any]:
    n = ctx.sz.n_stream
    item = {"what": f"b.copy_(a), {n * 4 >> 20} MiB float32 (cupy: cupy.copyto(b, a))",
            "metric": "gbps"}

    def one(lib: Lib) -> dict[str, Any]:
        a, b = lib.dev(ctx.host("a", (n,))), lib.dev(ctx.host("b", (n,)))
        if lib.name == "cupy":
            return measure(lib, lambda: lib.mod.copyto(b, a), ctx.sz)
        return measure(lib, lambda: b.copy_(a), ctx.sz)

    for_each_lib(ctx, item, one)
    _bandwidth(item, ctx, 2 * n * 4)
    return item


def item_sum(ctx: Ctx) -> dict[str, Any]:
    n = ctx.sz.n_stream
    item = {"what": f"a.sum() of {n * 4 >> 20} MiB float32 (full reduction)", "metric": "gbps"}

    def one(lib: Lib) -> dict[str, Any]:
        a = lib.dev(ctx.host("a", (n,)))
        r = measure(lib, lambda: a.sum(), ctx.sz)
        got = float(lib.to_host(a.sum()).reshape(-1)[0])
        want = float(ctx.host("a", (n,)).sum(dtype=np.float64))
        r["abs_err_vs_fp64"] = abs(got - want)
        return r

    for_each_lib(ctx, item, one)
    _bandwidth(item, ctx, n * 4)
    return item


def item_softmax(ctx: Ctx) -> dict[str, Any]:
    rows, cols = ctx.sz.softmax
    item = {"what": f"softmax(x, dim=-1), x ({rows}, {cols}) float32 (cupy: max-shifted "
                    "exp / sum composite, 4+ kernels)", "metric": "gbps"}

    def one(lib: Lib) -> dict[str, Any]:
        x = lib.dev(ctx.host("a", (rows, cols)))
        if lib.name == "cupy":
            cp = lib.mod

            def fn() -> Any:
                e = cp.exp(x - x.max(axis=-1, keepdims=True))
                e /= e.sum(axis=-1, keepdims=True)
                return e
        else:
            fn = lambda: lib.mod.softmax(x, dim=-1)  # noqa: E731
        r = measure(lib, fn, ctx.sz)
        got = lib.to_host(fn()[:4])
        h = ctx.host("a", (rows, cols))[:4].astype(np.float64)
        want = np.exp(h - h.max(axis=-1, keepdims=True))
        want /= want.sum(axis=-1, keepdims=True)
        r["max_abs_err_first_rows"] = float(np.abs(got - want).max())
        return r

    for_each_lib(ctx, item, one)
    _bandwidth(item, ctx, 2 * rows * cols * 4)
    return item


# --- items: matrix products --------------------------------------------------------------------

CORNER = 64


def _gemm_error(lib: Lib, c: Any, a_host: np.ndarray, b_host: np.ndarray) -> float:
    """Max |C - ref| / max |ref| over the top-left CORNER x CORNER block, ref in float64."""
    k = CORNER
    ref = a_host[..., :k, :].astype(np.float64) @ b_host[..., :, :k].astype(np.float64)
    got = lib.to_host(c[..., :k, :k]).astype(np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


@contextlib.contextmanager
def cupy_compute_type(lib: Lib, tf32: bool) -> Iterator[str]:
    """Set CuPy's float32 matmul compute type (TF32 or the default) for the block, then restore
    it. gputensor's float32 gemm goes through cupy.matmul, so the default is also set around the
    float32 items: otherwise a CUPY_TF32=1 environment would change gputensor's figures."""
    if not (lib.ok and lib.mod is not None):
        yield "n/a"
        return
    try:
        from cupy._core import _routines_linalg as rl  # type: ignore[import-not-found]

        old = rl.get_compute_type(np.float32)
        new = (getattr(rl, "COMPUTE_TYPE_TF32", 7) if tf32
               else getattr(rl, "COMPUTE_TYPE_DEFAULT", 1))
        rl.set_compute_type(np.float32, new)
        now = rl.get_compute_type(np.float32)
        label = str(getattr(rl, "compute_type_to_str", str)(now))
    except Exception as e:  # noqa: BLE001 - a CuPy without this internal API: say so, go on
        yield f"could not set: {_err(e)}"
        return
    try:
        yield label
    finally:
        rl.set_compute_type(np.float32, old)


def _gt_tf32(gt: Any, enable: bool) -> str:
    """Turn gputensor's TF32 matmul on or off through whichever API exists; Unsupported when
    none does."""
    tried = []
    backends = getattr(gt, "backends", None)
    matmul = getattr(getattr(backends, "cuda", None), "matmul", None)
    if matmul is not None and hasattr(matmul, "allow_tf32"):
        matmul.allow_tf32 = enable
        return "gt.backends.cuda.matmul.allow_tf32"
    if matmul is not None and hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if enable else "ieee"
        return "gt.backends.cuda.matmul.fp32_precision"
    tried.append("gt.backends.cuda.matmul.allow_tf32 / fp32_precision: "
                 + ("no gt.backends" if backends is None else "missing"))
    setter = getattr(gt, "set_float32_matmul_precision", None)
    if setter is not None:
        setter("high" if enable else "highest")
        return "gt.set_float32_matmul_precision"
    tried.append("gt.set_float32_matmul_precision: missing")
    raise Unsupported("no TF32 switch in gputensor (" + "; ".join(tried) + ")")


@contextlib.contextmanager
def torch_tf32(torch: Any, enable: bool) -> Iterator[str]:
    """TF32 for torch's cuBLAS matmul on or off for the block, then restored: the
    ``fp32_precision`` API where it exists (torch >= 2.9; mixing it with the legacy
    ``allow_tf32`` flag can raise), else ``allow_tf32``."""
    mm = torch.backends.cuda.matmul
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(mm, "fp32_precision"):
            attr, value = "fp32_precision", ("tf32" if enable else "ieee")
        else:
            attr, value = "allow_tf32", enable
        old = getattr(mm, attr)
        setattr(mm, attr, value)
    try:
        yield f"torch.backends.cuda.matmul.{attr} = {value!r}"
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            setattr(mm, attr, old)


def _gemm_item(ctx: Ctx, mode: str) -> dict[str, Any]:
    n = ctx.sz.gemm
    item: dict[str, Any] = {"what": f"C = A @ B, {n}x{n}x{n}, {mode}", "metric": "tflops"}
    a_host, b_host = ctx.host("a", (n, n)), ctx.host("b", (n, n))
    cp = ctx.lib("cupy")

    def one(lib: Lib) -> dict[str, Any]:
        a, b = lib.dev(a_host), lib.dev(b_host)
        extra: dict[str, Any] = {}
        with contextlib.ExitStack() as stack:
            if mode == "bf16":
                a, b = lib.bf16(a), lib.bf16(b)
            if lib.name == "torch":
                extra["switch"] = stack.enter_context(torch_tf32(lib.mod, mode == "tf32"))
                if not lib.on_device and mode == "tf32":
                    extra["note"] = "torch on the CPU: the TF32 flag has no effect"
            if lib.name == "gputensor" and mode == "tf32":
                extra["switch"] = _gt_tf32(lib.mod, True)
                stack.callback(_gt_tf32, lib.mod, False)
            if mode in ("fp32", "tf32"):
                # gputensor's float32 gemm is cupy.matmul: keep CuPy at its default for gt
                extra["cupy_compute_type"] = stack.enter_context(
                    cupy_compute_type(cp, tf32=(mode == "tf32" and lib.name == "cupy")))
            try:
                r = measure(lib, lambda: a @ b, ctx.sz)
            except Exception as e:
                if mode == "bf16" and lib.name == "cupy":
                    raise Unsupported(f"cupy bfloat16 matmul: {_err(e)}") from e
                raise
            r["rel_err_corner_vs_fp64"] = _gemm_error(lib, a @ b, a_host, b_host)
            if mode == "tf32":  # float32 gives ~1e-6 here, TF32 ~5e-4
                r["tf32_engaged"] = r["rel_err_corner_vs_fp64"] > 1e-4
        r.update(extra)
        return r

    for_each_lib(ctx, item, one)
    _flops(item, 2.0 * n ** 3)
    item["error_note"] = (f"rel_err: max |C - C64| / max |C64| over the top-left {CORNER}x"
                          f"{CORNER} block, C64 the float64 product of the float32 inputs; "
                          "~1e-6 means float32, ~1e-3 TF32, ~1e-2 bf16")
    return item


def item_gemm_fp32(ctx: Ctx) -> dict[str, Any]:
    return _gemm_item(ctx, "fp32")


def item_gemm_tf32(ctx: Ctx) -> dict[str, Any]:
    return _gemm_item(ctx, "tf32")


def item_gemm_bf16(ctx: Ctx) -> dict[str, Any]:
    return _gemm_item(ctx, "bf16")


def item_bmm(ctx: Ctx) -> dict[str, Any]:
    bt, m, k, n = ctx.sz.bmm
    item = {"what": f"bmm {bt} x ({m}x{k} @ {k}x{n}) float32 (cupy: matmul)", "metric": "tflops"}
    a_host, b_host = ctx.host("a", (bt, m, k)), ctx.host("b", (bt, k, n))
    cp = ctx.lib("cupy")

    def one(lib: Lib) -> dict[str, Any]:
        a, b = lib.dev(a_host), lib.dev(b_host)
        fn = (lambda: lib.mod.matmul(a, b)) if lib.name == "cupy" else (
            lambda: lib.mod.bmm(a, b))
        extra: dict[str, Any] = {}
        with contextlib.ExitStack() as stack:
            if lib.name == "torch":
                extra["switch"] = stack.enter_context(torch_tf32(lib.mod, False))
            extra["cupy_compute_type"] = stack.enter_context(cupy_compute_type(cp, False))
            r = measure(lib, fn, ctx.sz)
            r["rel_err_corner_vs_fp64"] = _gemm_error(lib, fn(), a_host, b_host)
        r.update(extra)
        return r

    for_each_lib(ctx, item, one)
    _flops(item, 2.0 * bt * m * n * k)
    return item


# --- item: host overhead while the GPU is busy -------------------------------------------------

def item_host_overhead(ctx: Ctx) -> dict[str, Any]:
    sz = ctx.sz
    g, s, n_ops = sz.gemm, sz.small, sz.small_ops
    item = {"what": (f"host time of one eager a + b on {s} float32 elements, {n_ops} in a row, "
                     f"(broadcast_*: a ({s // 32}, 32) + (32,) add; sum_*: a full sum), "
                     f"timed with perf_counter while ~{sz.busy_s * 1e3:.0f} ms of {g}x{g} "
                     "float32 matmuls are queued on the GPU (busy), and with the GPU idle"),
            "metric": "us_per_op"}
    cp = ctx.lib("cupy")

    def one(lib: Lib) -> dict[str, Any]:
        big_a, big_b = lib.dev(ctx.host("a", (g, g))), lib.dev(ctx.host("b", (g, g)))
        sa, sb = lib.dev(ctx.host("a", (s,))), lib.dev(ctx.host("b", (s,)))
        rows = lib.dev(ctx.host("a", (s,))).reshape(s // 32, 32)
        row = lib.dev(ctx.host("b", (32,)))
        ops = {"": lambda: sa + sb, "broadcast_": lambda: rows + row, "sum_": lambda: sa.sum()}
        with contextlib.ExitStack() as stack:
            if lib.name == "torch":
                stack.enter_context(torch_tf32(lib.mod, False))
            stack.enter_context(cupy_compute_type(cp, False))
            for op in ops.values():
                for _ in range(20):
                    op()
            big_a @ big_b
            lib.sync()
            t0 = time.perf_counter()
            big_a @ big_b
            lib.sync()
            t_mm = time.perf_counter() - t0
            n_mm = max(1, min(sz.busy_cap, math.ceil(sz.busy_s / max(t_mm, 1e-9))))
            out: dict[str, Any] = {"one_matmul_ms": t_mm * 1e3, "matmuls_queued": n_mm}
            for prefix, op in ops.items():
                idle, busy, flags, queue_s = [], [], [], []
                for _ in range(3):
                    lib.sync()
                    t0 = time.perf_counter()
                    for _ in range(n_ops):
                        op()
                    idle.append((time.perf_counter() - t0) / n_ops)
                    lib.sync()
                for _ in range(3):
                    lib.sync()
                    t0 = time.perf_counter()
                    for _ in range(n_mm):
                        big_a @ big_b
                    queue_s.append(time.perf_counter() - t0)
                    marker = lib.event()
                    if marker is not None:
                        lib.record(marker)
                    t0 = time.perf_counter()
                    for _ in range(n_ops):
                        op()
                    busy.append((time.perf_counter() - t0) / n_ops)
                    flags.append(None if marker is None else not lib.done(marker))
                    lib.sync()
                out.update({f"{prefix}busy_us": statistics.median(busy) * 1e6,
                            f"{prefix}busy_us_min": min(busy) * 1e6,
                            f"{prefix}idle_us": statistics.median(idle) * 1e6,
                            f"{prefix}host_ms_to_queue": statistics.median(queue_s) * 1e3,
                            f"{prefix}gpu_busy_at_end": flags})
        out["s"] = out["busy_us"] * 1e-6
        return out

    for_each_lib(ctx, item, one)
    item["note"] = ("gpu_busy_at_end: per repeat, whether the queued matmuls were still running "
                    "when the timed loop ended (False: the loop waited for the GPU, or the queue "
                    "was too short); host_ms_to_queue far above matmuls_queued x one_matmul_ms "
                    "/ its GPU time means the matmul call itself blocks the host")
    return item


# --- items: training steps ---------------------------------------------------------------------

def build_mlp(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def build_cnn(lib: Any) -> Any:
    """gputensor/demo.py's build_model: two conv blocks and a small classifier on 1x8x8."""
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10),
    )


def build_gpt(lib: Any, block: int, n_layer: int = 2, n_embd: int = 128, n_head: int = 4,
              vocab: int = 65) -> Any:
    """A nanoGPT-style decoder, one source for torch and gputensor: ``lib`` is the ``torch`` or
    ``gputensor`` module and every layer comes from ``lib.nn``. ``model(idx, targets)`` returns
    the cross-entropy loss."""
    nn = lib.nn
    F = nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("mask", lib.tril(lib.ones(block, block)).view(1, 1, block, block))

        def forward(self, x: Any) -> Any:
            b, t, c = x.size()
            hs = c // n_head
            q, k, v = self.qkv(x).split(n_embd, dim=2)
            q = q.view(b, t, n_head, hs).transpose(1, 2)
            k = k.view(b, t, n_head, hs).transpose(1, 2)
            v = v.view(b, t, n_head, hs).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, n_embd)
            self.pos = nn.Embedding(block, n_embd)
            self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx: Any, targets: Any) -> Any:
            b, t = idx.size()
            pos = lib.arange(t, device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            logits = self.head(self.ln_f(self.blocks(x)))
            return F.cross_entropy(logits.view(b * t, vocab), targets.view(b * t))

    return GPT()


def training_inputs(kind: str, sz: Sizes) -> tuple[str, tuple[np.ndarray, np.ndarray]]:
    """What the ``kind`` training step trains on ("mlp", "cnn", "lstm" or "gpt"): its
    description and the host (input, target) arrays, the same for every library."""
    rng = np.random.default_rng(2)
    if kind == "mlp":
        batch = 128
        return (f"MLP 784-256-256-10, batch {batch}",
                (rng.standard_normal((batch, 784), dtype=np.float32),
                 rng.integers(0, 10, batch, dtype=np.int64)))
    if kind == "cnn":
        batch = 64
        return (f"demo CNN (gputensor/demo.py) on 1x8x8, batch {batch}",
                (rng.standard_normal((batch, 1, 8, 8), dtype=np.float32),
                 rng.integers(0, 10, batch, dtype=np.int64)))
    if kind == "lstm":
        batch, seq, vocab = 16, 32, 65
        what = f"char LSTM (embedding 32, hidden 128, vocab 65), batch {batch}, sequence {seq}"
    else:
        batch, seq, vocab = sz.gpt_batch, sz.gpt_block, GPT["vocab"]
        what = (f"GPT {GPT['n_layer']} layers, n_embd {GPT['n_embd']}, {GPT['n_head']} heads, "
                f"block {seq}, vocab {vocab}, batch {batch}")
    idx = rng.integers(0, vocab, (batch, seq + 1), dtype=np.int64)
    return what, (np.ascontiguousarray(idx[:, :-1]), np.ascontiguousarray(idx[:, 1:]))


def training_step(lib: Lib, kind: str, sz: Sizes, inputs: tuple[np.ndarray, np.ndarray],
                  compiled: bool = False) -> tuple[Any, Callable[[], Any]]:
    """(model, step) of the ``kind`` training step on ``lib``'s device: one call of step()
    is zero_grad, forward, cross entropy, backward and an Adam update; it returns the loss.
    ``compiled``: the forward and loss go through the library's ``compile(...,
    mode='reduce-overhead')`` (CUDA graphs in both libraries); the optimizer steps eagerly."""
    m = lib.mod
    m.manual_seed(0)
    if kind == "mlp":
        model = build_mlp(m)
    elif kind == "cnn":
        model = build_cnn(m)
    elif kind == "lstm":
        from gpu_bench_science import build_char_lstm
        model = build_char_lstm(m)
    else:
        model = build_gpt(m, block=sz.gpt_block, **GPT)
    model = model.to(lib.device)
    x, y = (lib.dev(h) for h in inputs)
    opt = m.optim.Adam(model.parameters(), lr=1e-3)
    if kind in ("gpt", "lstm"):
        loss_of = lambda: model(x, y)  # noqa: E731
    else:
        ce = m.nn.functional.cross_entropy
        loss_of = lambda: ce(model(x), y)  # noqa: E731
    if compiled:
        loss_of = m.compile(loss_of, mode="reduce-overhead")

    def step() -> Any:
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        opt.step()
        return loss
    return model, step


def _train_item(ctx: Ctx, kind: str, compiled: bool = False) -> dict[str, Any]:
    sz = ctx.sz
    what, inputs = training_inputs(kind, sz)
    how = "compiled (mode='reduce-overhead') " if compiled else ""
    item = {"what": f"{how}training step (zero_grad, forward, cross entropy, backward, Adam): "
                    f"{what}",
            "metric": "ms_per_step", "warmup_steps": sz.warmup_steps, "steps": sz.steps}

    def one(lib: Lib) -> dict[str, Any]:
        model, step = training_step(lib, kind, sz, inputs, compiled)
        loss = step()
        first = float(loss.item())
        for _ in range(sz.warmup_steps - 1):
            step()
        lib.sync()
        t0 = time.perf_counter()
        step()
        lib.sync()
        # a slow step (over ~0.1 s) gets fewer steps: each phase stays near TRAIN_PHASE_S
        fit = int(TRAIN_PHASE_S / max(time.perf_counter() - t0, 1e-6))
        steps = max(min(3, sz.steps), min(sz.steps, fit))
        times = []
        for _ in range(steps):
            lib.sync()
            t0 = time.perf_counter()
            step()
            lib.sync()
            times.append(time.perf_counter() - t0)
        lib.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        lib.sync()
        pipelined = (time.perf_counter() - t0) / steps
        med = statistics.median(times)
        return {"s": med, "ms_per_step": med * 1e3, "ms_min": min(times) * 1e3,
                "pipelined_ms_per_step": pipelined * 1e3, "first_loss": first,
                "last_loss": float(loss.item()),
                "params": sum(p.numel() for p in model.parameters()), "steps": steps}

    def one_or_skip(lib: Lib) -> dict[str, Any]:
        if lib.name == "cupy":
            raise Skipped("CuPy has no autograd or nn")
        return one(lib)

    for_each_lib(ctx, item, one_or_skip)
    return item


def item_train_mlp(ctx: Ctx) -> dict[str, Any]:
    return _train_item(ctx, "mlp")


def item_train_cnn(ctx: Ctx) -> dict[str, Any]:
    return _train_item(ctx, "cnn")


def item_train_gpt(ctx: Ctx) -> dict[str, Any]:
    return _train_item(ctx, "gpt")


def item_train_lstm(ctx: Ctx) -> dict[str, Any]:
    return _train_item(ctx, "lstm")


def item_train_gpt_compiled(ctx: Ctx) -> dict[str, Any]:
    """Issue 14's GPU target: gt.compile with CUDA graphs <= 0.5x PyTorch eager's step (the
    train_gpt item) and no slower than torch.compile(mode='reduce-overhead') (this item)."""
    return _train_item(ctx, "gpt", compiled=True)


def item_train_mlp_compiled(ctx: Ctx) -> dict[str, Any]:
    return _train_item(ctx, "mlp", compiled=True)


ITEMS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "bandwidth_d2d": item_bandwidth_d2d,
    "add": item_add,
    "copy": item_copy,
    "sum": item_sum,
    "softmax": item_softmax,
    "gemm_fp32": item_gemm_fp32,
    "gemm_tf32": item_gemm_tf32,
    "gemm_bf16": item_gemm_bf16,
    "bmm": item_bmm,
    "host_overhead": item_host_overhead,
    "train_mlp": item_train_mlp,
    "train_cnn": item_train_cnn,
    "train_gpt": item_train_gpt,
    "train_lstm": item_train_lstm,
    "train_gpt_compiled": item_train_gpt_compiled,
    "train_mlp_compiled": item_train_mlp_compiled,
}


def all_items() -> dict[str, Callable[[Ctx], dict[str, Any]]]:
    """ITEMS, then gpu_bench_science.py's (linalg, fft, special functions), which imports this
    module as ``gpu_bench``: run as a script, this module is ``__main__``, so it is registered
    under that name first (one module, one Unsupported class)."""
    sys.modules.setdefault("gpu_bench", sys.modules[__name__])
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import gpu_bench_science
    return {**ITEMS, **gpu_bench_science.ITEMS}


# --- environment, output -----------------------------------------------------------------------

def environment(libs: list[Lib]) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": sys.version.split()[0], "platform": platform.platform(),
        "machine": platform.machine(), "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "env": {k: os.environ[k] for k in (EMULATOR_ENV, "CUPY_TF32", "CUDA_VISIBLE_DEVICES",
                                           "NVIDIA_TF32_OVERRIDE", "GPUTENSOR_CACHE_DIR")
                if k in os.environ},
    }
    with contextlib.suppress(Exception):
        env["numpy"] = np.__version__
    with contextlib.suppress(Exception):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0:
            env["gputensor_git_commit"] = out.stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10)
        if dirty.returncode == 0:
            env["gputensor_git_dirty"] = bool(dirty.stdout.strip())
    for lib in libs:
        try:
            env[lib.name] = lib.info()
        except Exception as e:  # noqa: BLE001
            env[lib.name] = {"status": lib.status, "info_error": _err(e)}
    return env


def _clean(x: Any) -> Any:
    """JSON-safe: non-finite floats become None."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.generic):
        return _clean(x.item())
    return x


def write_json(path: str, doc: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(_clean(doc), f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def _cell(item: dict[str, Any], r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    for key, label in (("error", "ERROR"), ("unsupported", "unsupported"), ("skipped", "-")):
        if key in r:
            return label
    metric = item.get("metric")
    if metric == "gbps" and "gbps" in r:
        pct = r.get("pct_of_d2d")
        return f"{r['gbps']:.4g} GB/s" + (f" {pct:.0f}%" if pct is not None else "")
    if metric == "tflops" and "tflops" in r:
        return f"{r['tflops']:.3g} TF/s"
    if metric == "us_per_op" and "busy_us" in r:
        return f"{r['busy_us']:.3g}us (idle {r['idle_us']:.3g})"
    if metric == "ms_per_step" and "ms_per_step" in r:
        return f"{r['ms_per_step']:.3g} ms ({r['pipelined_ms_per_step']:.3g})"
    if metric == "ms" and "s" in r:
        return f"{r['s'] * 1e3:.4g} ms"
    return "?"


def table(doc: dict[str, Any]) -> str:
    names = ["gputensor", "torch", "cupy"]
    heads = ["item", "gputensor", "torch", "cupy", "gt/torch", "gt/cupy"]
    rows = []
    for key, item in doc["items"].items():
        if "error" in item and "results" not in item:
            rows.append([key, "ERROR: " + item["error"][:60], "", "", "", ""])
            continue
        res = item.get("results", {})
        ratios = item.get("ratios", {})
        rows.append([key, *(_cell(item, res.get(n)) for n in names),
                     *(f"{ratios[k]:.2f}x" if k in ratios else "-"
                       for k in ("gt_time_over_torch", "gt_time_over_cupy"))])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(heads)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    out = [line(heads), line(["-" * w for w in widths]), *(line(r) for r in rows)]
    libs = doc["environment"]
    devs = "; ".join(f"{n}: {libs.get(n, {}).get('column', '?')}" for n in names)
    out.append("")
    out.append(f"columns: {devs}")
    out.append("gt/x: gputensor's time over x's (> 1: gputensor slower). GB/s % is of "
               f"bandwidth_d2d ({doc.get('d2d_method') or 'not measured'}); host_overhead: "
               "us per op with the GPU busy (idle); train: median ms/step synced (pipelined).")
    problems = [(k, n, r) for k, it in doc["items"].items()
                for n, r in it.get("results", {}).items() if "error" in r or "unsupported" in r]
    problems += [(k, "item", it) for k, it in doc["items"].items() if "error" in it]
    if problems:
        out.append("")
        out.append("errors / unsupported:")
        for k, n, r in problems:
            out.append(f"  {k} [{n}]: {r.get('error') or 'unsupported: ' + r['unsupported']}")
    return "\n".join(out)


# --- main --------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="gpu_bench.json", help="the JSON file to write")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes (automatic on the emulator or when torch has no CUDA)")
    p.add_argument("--only", default="", help="comma-separated items (--list names them)")
    p.add_argument("--list", action="store_true", help="list the items and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    items = all_items()
    if args.list:
        print("\n".join(items))
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in items]
    if unknown:
        print(f"unknown items: {unknown}; known: {list(items)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    libs: list[Lib] = [GtLib(), TorchLib(), CupyLib()]
    torch_lib = libs[1]
    reasons = []
    if args.quick:
        reasons.append("--quick")
    if os.environ.get(EMULATOR_ENV, "") not in ("", "0"):
        reasons.append(f"{EMULATOR_ENV}=1")
    if not (torch_lib.ok and torch_lib.on_device):
        reasons.append("torch has no CUDA")
    quick = bool(reasons)
    sz = QUICK if quick else FULL
    ctx = Ctx(libs=libs, sz=sz)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv, "quick": quick, "quick_because": reasons, "sizes": asdict(sz),
        "byte_counting": BYTE_COUNTING,
        "ratio_definition": "gt_time_over_X = gputensor median time / X median time "
                            "(> 1: gputensor slower)",
        "environment": environment(libs), "items": {},
    }
    print(f"gpu_bench: {'QUICK sizes (' + ', '.join(reasons) + ')' if quick else 'full sizes'}; "
          + "; ".join(f"{lb.name}: {lb.column()}" for lb in libs),
          file=sys.stderr, flush=True)
    write_json(args.out, doc)
    for key, fn in items.items():
        if only and key not in only:
            continue
        t0 = time.perf_counter()
        try:
            item = fn(ctx)
        except Exception as e:  # noqa: BLE001 - one failing item never loses the rest
            item = {"error": _err(e), "traceback": traceback.format_exc(limit=-6)[-3000:]}
            for lib in libs:
                with contextlib.suppress(Exception):
                    lib.sync()
        for lib in libs:
            lib.cleanup()
        _ratios(item)
        item["wall_s"] = round(time.perf_counter() - t0, 2)
        doc["items"][key] = item
        doc["d2d_gbps"], doc["d2d_method"] = ctx.d2d_gbps, ctx.d2d_method
        doc["elapsed_s"] = round(time.perf_counter() - started, 2)
        write_json(args.out, doc)
        print(f"  [{doc['elapsed_s']:7.1f}s] {key}: {item['wall_s']:.1f}s", file=sys.stderr,
              flush=True)
    doc["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    write_json(args.out, doc)
    print(table(doc))
    print(f"\nwrote {args.out} in {doc['elapsed_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
