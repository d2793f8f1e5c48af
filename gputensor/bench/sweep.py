"""The sweep engine: every selected kernel x dtype x size, timed for gputensor and for each
comparison library on the same data, with bytes, flops and the roofline percentage."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gputensor import _dtype as D

from .catalogue import EMULATED_SIZES, FLOATING, NUMERIC, Case, Kernel
from .inputs import rng_for
from .libs import Lib
from .roofline import Peaks, roofline_pct
from .timing import measure


@dataclass
class Result:
    """One (kernel, dtype, size) row. ``compare`` maps each comparison library to its time
    per call, None where it has no equivalent or failed (see the sweep's notes)."""

    kernel: str
    family: str
    size: int
    shape: list[int]
    label: str
    dtype: str
    device: str
    time_s: float
    bytes: int
    flops: int
    metric: str
    roofline_pct: float | None
    compare: dict[str, float | None] = field(default_factory=dict)

    @property
    def gbps(self) -> float:
        return self.bytes / self.time_s / 1e9

    @property
    def gflops(self) -> float:
        return self.flops / self.time_s / 1e9

    def ratio(self, lib: str) -> float | None:
        """Their time / our time: > 1 means gputensor is faster."""
        theirs = self.compare.get(lib)
        return None if theirs is None else theirs / self.time_s


@dataclass
class Sweep:
    device: str
    peaks: Peaks | None
    libs: list[str]
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # comparisons left out, skipped dtypes
    failures: list[str] = field(default_factory=list)  # gputensor cases that raised

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


@dataclass(frozen=True)
class Plan:
    kernel: Kernel
    dtype: D.dtype
    size: int


def default_sizes(kernel: Kernel, quick: bool, emulated: bool) -> tuple[int, ...]:
    """The kernel's own sweep: tiny with --quick, the smallest few on the CUDA emulator."""
    if quick:
        return kernel.quick_sizes
    return kernel.sizes[:EMULATED_SIZES] if emulated else kernel.sizes


def plan(kernels: Iterable[Kernel], dtypes: list[D.dtype], sizes: list[int] | None,
         quick: bool, emulated: bool = False) -> tuple[list[Plan], list[str]]:
    """The cases to run and a note for each (kernel, dtype) left out."""
    cases, notes = [], []
    for k in kernels:
        left_out = [dt.name for dt in dtypes if dt not in k.dtypes]
        if left_out:
            notes.append(f"{k.name}: {', '.join(left_out)} skipped (swept for "
                         f"{describe_dtypes(k.dtypes)})")
        for dt in (d for d in dtypes if d in k.dtypes):
            for size in sizes or default_sizes(k, quick, emulated):
                cases.append(Plan(k, dt, int(size)))
    return cases, notes


def describe_dtypes(dtypes: tuple[D.dtype, ...]) -> str:
    if dtypes == FLOATING:
        return "floating dtypes"
    if dtypes == NUMERIC:
        return "integer and floating dtypes"
    return ", ".join(d.name for d in dtypes)


def _place(lib: Lib, case: Case) -> dict[str, Any]:
    """The case's arrays as ``lib``'s tensors: host arrays stay on the host."""
    return {n: lib.host(a) if n in case.host else lib.put(a) for n, a in case.arrays.items()}


def _time_lib(lib: Lib, kernel: Kernel, case: Case, repeat: int) -> float:
    tensors = _place(lib, case)
    fn = kernel.impls[lib.name](lib, tensors, case.params)
    return measure(fn, lib.sync, repeat)


def run_case(p: Plan, ours: Lib, others: list[Lib], repeat: int, sweep: Sweep) -> None:
    """Time one case for gputensor and every comparison library; append its Result."""
    k, dt = p.kernel, p.dtype
    case = k.build(p.size, dt, rng_for(k.name, dt.name, p.size))
    where = f"{k.name} {dt.name} size {p.size} on {ours.device}"
    try:
        tensors = _place(ours, case)
        fn = k.impls["gputensor"](ours, tensors, case.params)
        result = fn()  # also the output the cost model reads
        ours.sync()
        nbytes, flops = k.cost(case, tensors, result)
        del result
        seconds = measure(fn, ours.sync, repeat)
    except Exception as exc:  # a failing gputensor kernel is a finding, not a crash
        sweep.failures.append(f"gputensor {where}: {type(exc).__name__}: {exc}")
        return
    del tensors, fn
    compare: dict[str, float | None] = {}
    for lib in others:
        if lib.name not in k.impls:
            compare[lib.name] = None
            sweep.note(f"{lib.name}: no equivalent of {k.name}")
            continue
        try:
            compare[lib.name] = _time_lib(lib, k, case, repeat)
        except Exception as exc:  # e.g. NumPy without a bfloat16 loop: leave the cell empty
            compare[lib.name] = None
            sweep.note(f"{lib.name}: {k.name} {dt.name} failed ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''})")
    pct = roofline_pct(nbytes, flops, seconds, sweep.peaks) if k.roofline else None
    sweep.results.append(Result(
        kernel=k.name, family=k.family, size=p.size, shape=list(case.shape), label=case.label,
        dtype=dt.name, device=ours.device, time_s=seconds, bytes=int(nbytes), flops=int(flops),
        metric=k.metric, roofline_pct=pct, compare=compare))


def run_sweep(cases: list[Plan], ours: Lib, others: list[Lib], repeat: int, sweep: Sweep,
              progress: Callable[[Iterable[Plan]], Iterable[Plan]] = iter) -> Sweep:
    """Run every case (through ``progress``, e.g. a tqdm wrapper) into ``sweep``."""
    for p in progress(cases):
        run_case(p, ours, others, repeat, sweep)
    return sweep
