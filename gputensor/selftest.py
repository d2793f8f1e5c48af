"""`gputensor selftest`: run a representative set of kernels on a device against the CPU backend.

    gputensor selftest [--device cuda|cpu] [--emulator] [-k PATTERN] [--list]

Each check builds the same inputs (from a fixed NumPy seed) on the CPU and on the device, runs
one op on both and compares the results: exactly for integer and bool outputs, within a
tolerance of the dtype for floating point ones. Random ops are checked for determinism under a
seed and for plausible statistics instead (devices need not draw the CPU's numbers). Every check
is isolated: an exception (an op without a kernel on the device, say) is a failed row, not a
crash. The command prints one row per check (op, dtype, shape, max error, pass/fail), the
errors of failed checks below the table, and exits non-zero when any check failed, or when the
device cannot be used (without CUDA it says why).
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import gputensor as gt
from gputensor._device import to_device

# (rtol, atol) per output dtype for float comparisons; everything else must match exactly.
TOLERANCES: dict[Any, tuple[float, float]] = {
    gt.float64: (1e-9, 1e-12), gt.float32: (1e-4, 1e-5), gt.float16: (1e-2, 1e-3),
    gt.bfloat16: (2e-2, 1e-2),
}


@dataclass
class Result:
    op: str
    dtype: str
    shape: str
    max_error: float | None
    passed: bool
    seconds: float = 0.0
    error: str = ""


@dataclass
class Check:
    """One row: ``run(device)`` returns the op's output(s) on that device; the row passes when
    the device's outputs match the CPU's (or ``verify(device)`` when given, which returns
    (max error, passed) by itself)."""

    op: str
    dtype: str
    shape: str
    run: Callable[[str], Any] | None = None
    verify: Callable[[str], tuple[float, bool]] | None = None
    tol: tuple[float, float] | None = None
    group: str = field(default="")

    @property
    def name(self) -> str:
        return f"{self.op}[{self.dtype}]"


# ---- inputs ----------------------------------------------------------------------------------
def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _t(arr: np.ndarray, device: str, dtype: Any = None) -> gt.Tensor:
    """A tensor on ``device`` from a NumPy array (cast on the device to ``dtype``)."""
    t = gt.tensor(np.ascontiguousarray(arr), device=device)
    return t.to(dtype) if dtype is not None else t


def _randn(shape: Sequence[int], device: str, dtype: Any = gt.float32, seed: int = 0,
           scale: float = 1.0) -> gt.Tensor:
    return _t((_rng(seed).standard_normal(shape) * scale).astype(np.float32), device, dtype)


def _shape(*shapes: Sequence[int]) -> str:
    return ", ".join("x".join(str(n) for n in s) if s else "()" for s in shapes)


# ---- comparison ------------------------------------------------------------------------------
def _host(t: Any) -> np.ndarray:
    if isinstance(t, gt.Tensor):
        t = t.detach().cpu()
        arr = t.numpy()
        if t.dtype in (gt.float16, gt.bfloat16):
            arr = arr.astype(np.float64)
        return arr
    return np.asarray(t)


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, tuple | list) else [value]


def compare(got: Any, want: Any, tol: tuple[float, float] | None = None) -> tuple[float, bool]:
    """(max abs error, passed) between a device result and the CPU result."""
    worst, ok = 0.0, True
    for g, w in zip(_outputs(got), _outputs(want), strict=True):
        dt = w.dtype if isinstance(w, gt.Tensor) else None
        if isinstance(g, gt.Tensor) and isinstance(w, gt.Tensor):
            if tuple(g.shape) != tuple(w.shape) or g.dtype is not w.dtype:
                raise AssertionError(f"device result is {g.dtype} {tuple(g.shape)}, the CPU's "
                                     f"{w.dtype} {tuple(w.shape)}")
        a, b = _host(g), _host(w)
        if a.shape != b.shape:
            raise AssertionError(f"shape {a.shape} != CPU shape {b.shape}")
        if a.size == 0:
            continue
        if a.dtype.kind in "fc":
            a64, b64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), \
                b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
            nan_a, nan_b = np.isnan(a64), np.isnan(b64)
            if (nan_a != nan_b).any():
                return float("nan"), False
            fin = ~nan_a
            diff = np.abs(a64[fin] - b64[fin])
            err = float(diff.max()) if diff.size else 0.0
            rtol, atol = tol or TOLERANCES.get(dt, (1e-5, 1e-6))
            ok &= bool(np.all(diff <= atol + rtol * np.abs(b64[fin]))) if diff.size else True
        else:
            err = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
            ok &= bool(np.array_equal(a, b))
        worst = max(worst, err)
    return worst, ok


# ---- the checks --------------------------------------------------------------------------------
F = gt.nn.functional


def _elementwise() -> list[Check]:
    s2 = (96, 130)
    return [
        Check("add", "float32", _shape(s2, s2),
              lambda d: _randn(s2, d) + _randn(s2, d, seed=1)),
        Check("mul (broadcast)", "float32", _shape((96, 1), (1, 130)),
              lambda d: _randn((96, 1), d) * _randn((1, 130), d, seed=1)),
        Check("exp", "float32", _shape(s2), lambda d: gt.exp(_randn(s2, d))),
        Check("tanh", "float64", _shape(s2), lambda d: gt.tanh(_randn(s2, d, gt.float64))),
        Check("sigmoid", "float16", _shape(s2),
              lambda d: gt.sigmoid(_randn(s2, d, gt.float16))),
        Check("div", "bfloat16", _shape(s2, s2),
              lambda d: _randn(s2, d, gt.bfloat16) / (_randn(s2, d, gt.bfloat16, 1).abs() + 1)),
        Check("add (int)", "int32", _shape(s2, ()),
              lambda d: _t(_rng().integers(-1000, 1000, s2, np.int32), d) + 7),
        Check("gt (compare)", "bool", _shape(s2, s2),
              lambda d: _randn(s2, d) > _randn(s2, d, seed=1)),
        Check("where", "float32", _shape(s2),
              lambda d: gt.where(_randn(s2, d) > 0, _randn(s2, d, seed=1), 0.5)),
    ]


def _copies() -> list[Check]:
    s = (64, 70)

    def round_trip(d: str) -> gt.Tensor:
        return _randn(s, "cpu").to(d).cpu()

    return [
        Check("to(device) -> cpu", "float32", _shape(s), round_trip),
        Check("cast f32 -> f16", "float16", _shape(s), lambda d: _randn(s, d).half()),
        Check("cast f64 -> i32", "int32", _shape(s),
              lambda d: (_randn(s, d, gt.float64) * 100).int()),
        Check("cast f32 -> bf16", "bfloat16", _shape(s), lambda d: _randn(s, d).bfloat16()),
        Check("contiguous (transpose)", "float32", _shape(s),
              lambda d: _randn(s, d).t().contiguous()),
        Check("clone (strided)", "float64", _shape(s),
              lambda d: _randn(s, d, gt.float64)[::2, 1::3].clone()),
        Check("copy_ (broadcast)", "float32", _shape(s, (70,)),
              lambda d: gt.zeros(s, device=d).copy_(_randn((70,), d))),
    ]


def _reductions() -> list[Check]:
    s = (48, 1000)
    return [
        Check("sum (dim=1)", "float32", _shape(s), lambda d: _randn(s, d).sum(1)),
        Check("sum (all)", "float64", _shape(s), lambda d: _randn(s, d, gt.float64).sum()),
        Check("mean (dim=0)", "float32", _shape(s), lambda d: _randn(s, d).mean(0)),
        Check("amax (dim=1)", "float32", _shape(s), lambda d: gt.amax(_randn(s, d), 1)),
        Check("argmax (dim=1)", "int64", _shape(s), lambda d: _randn(s, d).argmax(1)),
        Check("var (dim=1)", "float32", _shape(s), lambda d: _randn(s, d).var(1)),
        Check("cumsum (dim=1)", "float32", _shape((16, 300)),
              lambda d: gt.cumsum(_randn((16, 300), d), 1), tol=(1e-4, 1e-4)),
        Check("sum (int)", "int64", _shape(s),
              lambda d: _t(_rng().integers(-50, 50, s, np.int64), d).sum(1)),
        Check("softmax (dim=-1)", "float32", _shape(s),
              lambda d: gt.softmax(_randn(s, d, scale=3.0), -1)),
        Check("log_softmax (dim=-1)", "float32", _shape(s),
              lambda d: gt.log_softmax(_randn(s, d, scale=3.0), -1)),
        Check("softmax (dim=-1)", "float16", _shape((32, 200)),
              lambda d: gt.softmax(_randn((32, 200), d, gt.float16), -1)),
    ]


def _linalg() -> list[Check]:
    return [
        Check("matmul", "float32", _shape((64, 48), (48, 80)),
              lambda d: _randn((64, 48), d) @ _randn((48, 80), d, seed=1)),
        Check("matmul", "float64", _shape((33, 17), (17, 29)),
              lambda d: _randn((33, 17), d, gt.float64) @ _randn((17, 29), d, gt.float64, 1)),
        Check("bmm", "float32", _shape((4, 32, 16), (4, 16, 24)),
              lambda d: gt.bmm(_randn((4, 32, 16), d), _randn((4, 16, 24), d, seed=1))),
        Check("matmul (transposed)", "float32", _shape((40, 30), (50, 40)),
              lambda d: _randn((40, 30), d).t() @ _randn((50, 40), d, seed=1).t()),
        Check("linear", "float32", _shape((8, 64), (32, 64), (32,)),
              lambda d: F.linear(_randn((8, 64), d), _randn((32, 64), d, seed=1),
                                 _randn((32,), d, seed=2))),
    ]


def _conv() -> list[Check]:
    x, w = (2, 3, 16, 16), (8, 3, 3, 3)
    return [
        Check("conv2d (pad 1)", "float32", _shape(x, w),
              lambda d: F.conv2d(_randn(x, d), _randn(w, d, seed=1), _randn((8,), d, seed=2),
                                 padding=1)),
        Check("conv2d (stride 2)", "float32", _shape(x, w),
              lambda d: F.conv2d(_randn(x, d), _randn(w, d, seed=1), stride=2)),
        Check("max_pool2d", "float32", _shape(x),
              lambda d: F.max_pool2d(_randn(x, d), 2)),
    ]


def _indexing() -> list[Check]:
    s = (50, 40)
    idx = _rng(5).integers(0, 50, 30)
    return [
        Check("index_select", "float32", _shape(s, (30,)),
              lambda d: gt.index_select(_randn(s, d), 0, _t(idx, d))),
        Check("advanced index x[i]", "float32", _shape(s, (30,)),
              lambda d: _randn(s, d)[_t(idx, d)]),
        Check("gather (dim=1)", "float32", _shape(s, (50, 7)),
              lambda d: gt.gather(_randn(s, d), 1, _t(_rng(6).integers(0, 40, (50, 7)), d))),
        Check("scatter_add (dim=0)", "float32", _shape((10, 40), s),
              lambda d: gt.zeros((10, 40), device=d).scatter_add(
                  0, _t(_rng(7).integers(0, 10, s), d), _randn(s, d))),
        Check("masked_fill", "float32", _shape(s),
              lambda d: _randn(s, d).masked_fill(_randn(s, d, seed=1) > 0, -1.0)),
        Check("boolean mask x[m]", "float32", _shape(s),
              lambda d: _randn(s, d)[_randn(s, d, seed=1) > 0.5]),
        Check("sort (dim=1)", "float32", _shape(s), lambda d: gt.sort(_randn(s, d), 1)),
        Check("topk (k=5)", "float32", _shape(s), lambda d: gt.topk(_randn(s, d), 5)),
        Check("cross_entropy", "float32", _shape((32, 10), (32,)),
              lambda d: F.cross_entropy(_randn((32, 10), d), _t(_rng(8).integers(0, 10, 32), d))),
    ]


def _random_determinism(op: str, draw: Callable[[str], gt.Tensor], lo: float, hi: float,
                        mean: float, std: float) -> Callable[[str], tuple[float, bool]]:
    """Same seed, same numbers; in range; sample mean and std near the distribution's."""

    def verify(device: str) -> tuple[float, bool]:
        gt.manual_seed(1234)
        a = _host(draw(device))
        gt.manual_seed(1234)
        b = _host(draw(device))
        c = _host(draw(device))  # the stream moved on: different numbers
        err = float(np.abs(a - b).max())
        ok = (np.array_equal(a, b) and not np.array_equal(b, c)
              and bool((a >= lo).all() and (a < hi).all())
              and abs(float(a.mean()) - mean) < 0.05 and abs(float(a.std()) - std) < 0.05)
        return err, ok

    return verify


def _random() -> list[Check]:
    n = 20000
    return [
        Check("rand (seeded twice)", "float32", _shape((n,)),
              verify=_random_determinism("rand", lambda d: gt.rand(n, device=d),
                                         0.0, 1.0, 0.5, (1 / 12) ** 0.5)),
        Check("randn (seeded twice)", "float32", _shape((n,)),
              verify=_random_determinism("randn", lambda d: gt.randn(n, device=d),
                                         -np.inf, np.inf, 0.0, 1.0)),
    ]


GROUPS: dict[str, Callable[[], list[Check]]] = {
    "elementwise": _elementwise, "copies": _copies, "reductions": _reductions,
    "matmul": _linalg, "conv": _conv, "indexing": _indexing, "random": _random,
}


def all_checks() -> list[Check]:
    checks = []
    for group, make in GROUPS.items():
        for c in make():
            c.group = group
            checks.append(c)
    return checks


# ---- running -----------------------------------------------------------------------------------
def run_check(check: Check, device: str) -> Result:
    """Run one check on ``device``; any exception makes a failed row carrying its message."""
    t0 = time.perf_counter()
    try:
        if check.verify is not None:
            err, ok = check.verify(device)
        else:
            want = check.run("cpu")
            got = check.run(device)
            err, ok = compare(got, want, check.tol)
        return Result(check.op, check.dtype, check.shape, err, ok, time.perf_counter() - t0,
                      "" if ok else "results differ from the CPU beyond the tolerance")
    except Exception as exc:  # noqa: BLE001 - one failing op must not stop the others
        where = traceback.extract_tb(exc.__traceback__)[-1]
        lines = f"{type(exc).__name__}: {exc}".strip().splitlines()
        msg = lines[0][:200]
        detail = next((ln.strip() for ln in lines[1:] if "error" in ln.lower()), "")
        if detail:  # a compiler's first error says more than its command line
            msg += f" ... {detail[:200]}"
        return Result(check.op, check.dtype, check.shape, None, False,
                      time.perf_counter() - t0, f"{msg} ({where.filename}:{where.lineno})")


def run_checks(device: str, checks: Sequence[Check]) -> list[Result]:
    return [run_check(c, device) for c in checks]


def format_table(results: Sequence[Result]) -> str:
    """The pass/fail table: one row per check."""
    head = ("op", "dtype", "shape", "max error", "result")
    rows = [(r.op, r.dtype, r.shape,
             "-" if r.max_error is None else f"{r.max_error:.3g}",
             "PASS" if r.passed else ("ERROR" if r.max_error is None else "FAIL"))
            for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    rule = "+-" + "-+-".join("-" * w for w in widths) + "-+"

    def fmt(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([rule, fmt(head), rule, *(fmt(row) for row in rows), rule])


def describe_device(device: str) -> str:
    if device == "cpu":
        return "device: cpu (checks compare the CPU backend with itself)"
    p = gt.cuda.get_device_properties()
    return (f"device: {device} = {p.name} (runtime: {gt.cuda.runtime_name()}, compute "
            f"capability {p.major}.{p.minor}, {p.multi_processor_count} SMs, "
            f"{p.total_memory / 1024**3:.1f} GiB)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gputensor selftest",
        description="Check the kernels of a device against the CPU backend.")
    parser.add_argument("--device", default="cuda", help="device to check (default: cuda)")
    parser.add_argument("--emulator", action="store_true",
                        help="serve cuda with the CPU emulator of the CUDA kernels "
                             "(same as GPUTENSOR_CUDA_EMULATOR=1)")
    parser.add_argument("-k", dest="pattern", default=None,
                        help="only checks whose op, dtype or group matches this glob/substring")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))

    checks = all_checks()
    if args.pattern:
        pat = args.pattern.lower()
        checks = [c for c in checks
                  if any(pat in s.lower() or fnmatch.fnmatch(s.lower(), pat)
                         for s in (c.op, c.dtype, c.group, c.name))]
    if args.list:
        for c in checks:
            print(f"{c.group:<12} {c.op:<24} {c.dtype:<9} {c.shape}")
        return 0
    if args.emulator:
        gt.cuda.use_emulator()
    try:
        dev = gt.device(args.device)
    except (RuntimeError, TypeError) as exc:
        print(f"gputensor selftest: {exc}", file=sys.stderr)
        return 2
    if dev.type == "cuda" and not gt.cuda.is_available():
        print(f"gputensor selftest: CUDA is not available on this machine: "
              f"{gt.cuda.why_unavailable()}\nNothing was checked. Run with --emulator (or "
              f"GPUTENSOR_CUDA_EMULATOR=1) to check the CUDA kernels on the CPU emulator, or "
              f"with --device cpu.")
        return 2
    device = str(to_device(dev))
    print(describe_device(device))
    print(f"running {len(checks)} checks against the CPU backend...\n")
    t0 = time.perf_counter()
    results = run_checks(device, checks)
    print(format_table(results))
    failed = [r for r in results if not r.passed]
    if failed:
        print("\nfailures:")
        for r in failed:
            print(f"  {r.op} [{r.dtype}]: {r.error}")
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed "
          f"in {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
