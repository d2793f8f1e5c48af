"""The ``gputensor bench`` command line.

    gputensor bench [-k PATTERN] [--device cpu|cuda] [--dtype float32,...]
                    [--sizes 1e3,1e5,1e7] [--repeat N] [--compare numpy,torch,cupy]
                    [--json out.json] [--plot out.png] [--quick] [--list] [--no-progress]

Exit status: 0 when every gputensor case ran, 1 when one raised (listed under FAILED), 2 for a
usage error (unknown kernel or dtype, bad size, unavailable device or library, missing
matplotlib for --plot).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import gputensor as gt
from gputensor import _dtype as D

from . import catalogue, libs, output, plot
from .roofline import peaks_for
from .sweep import Plan, Sweep, plan, run_sweep


class UsageError(ValueError):
    """Bad command-line input: reported on stderr with exit status 2."""


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def parse_dtypes(text: str) -> list[D.dtype]:
    names = {d.name: d for d in D.DTYPES}
    found = []
    for name in _split([text]):
        dt = names.get(name.removeprefix("gputensor.").removeprefix("torch."))
        if dt is None:
            raise UsageError(f"unknown dtype {name!r}; dtypes: {', '.join(names)}")
        found.append(dt)
    if not found:
        raise UsageError("--dtype needs at least one dtype")
    return found


def parse_sizes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    sizes = []
    for item in _split([text]):
        try:
            value = float(item)
        except ValueError:
            raise UsageError(f"--sizes: {item!r} is not a number (write 1e6 or 1000000)") \
                from None
        if not value.is_integer() or value < 1:
            raise UsageError(f"--sizes: {item!r} is not a positive whole number of elements")
        sizes.append(int(value))
    if not sizes:
        raise UsageError("--sizes needs at least one size")
    return sizes


def pick_device(requested: str | None) -> str:
    if requested is None:
        return "cuda" if gt.cuda.is_available() else "cpu"
    if requested == "cuda" and not gt.cuda.is_available():
        raise UsageError(f"--device cuda: CUDA is not available ({gt.cuda.why_unavailable()}); "
                         "set GPUTENSOR_CUDA_EMULATOR=1 for the CPU emulator")
    return requested


def parse_compare(text: str | None) -> list[str]:
    if text is None:
        return list(libs.KNOWN)
    names = _split([text])
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in libs.KNOWN]
    if unknown:
        raise UsageError(f"--compare: unknown library {', '.join(map(repr, unknown))}; "
                         f"choose from {', '.join(libs.KNOWN)} (or 'none')")
    return list(dict.fromkeys(names))


def device_name(device: str) -> tuple[str, bool]:
    """(a readable name, whether it is the CUDA emulator)."""
    if device == "cuda":
        return gt.cuda.get_device_name(0), gt.cuda.runtime_name() == "emulator"
    from gputensor.info import cpu_model, usable_cores
    return f"{cpu_model()}, {usable_cores()} cores usable", False


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputensor bench",
        description="Time catalogued kernels over sizes and dtypes against NumPy/PyTorch/"
                    "CuPy, with throughput and % of the device's roofline.")
    p.add_argument("-k", dest="patterns", action="append", metavar="PATTERN",
                   help="kernel name substring or glob, or a family (elementwise, reduction, "
                        "matmul, conv, copy, transfer); repeat or comma-separate")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="default: cuda when available, else cpu")
    p.add_argument("--dtype", default="float32", help="comma-separated dtypes (float32)")
    p.add_argument("--sizes", help="comma-separated element counts, e.g. 1e3,1e5,1e7 "
                                   "(default: per kernel, the smallest 3 on the CUDA emulator)")
    p.add_argument("--repeat", type=int, help="timed repeats per figure, median taken "
                                              "(default 5, 3 with --quick)")
    p.add_argument("--compare", help="comparison libraries: numpy,torch,cupy (default: those "
                                     "usable on the device) or 'none'")
    p.add_argument("--json", metavar="OUT.json", help="write the raw figures as JSON")
    p.add_argument("--plot", metavar="OUT.png", help="draw throughput against size "
                                                     "(needs matplotlib)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def list_catalogue() -> str:
    width = max(len(k.name) for k in catalogue.CATALOGUE)
    return "\n".join(f"{k.name:<{width}}  {k.family:<11}  {k.doc}"
                     + ("" if k.devices == ("cpu", "cuda") else f"  [{', '.join(k.devices)}]")
                     for k in catalogue.CATALOGUE)


def _check_writable(path: str | None, flag: str) -> None:
    if path is not None and not Path(path).resolve().parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {Path(path).resolve().parent} does not exist")


def _progress(cases: Iterable[Plan], total: int, disable: bool) -> Iterator[Plan]:
    from tqdm import tqdm

    with tqdm(cases, total=total, desc="bench", unit="case", file=sys.stderr, leave=False,
              disable=disable) as bar:
        for p in bar:
            bar.set_postfix_str(f"{p.kernel.name} {p.dtype.name} n={p.size}", refresh=False)
            yield p


def _prepare(args: argparse.Namespace) -> tuple[str, list[Plan], list[str], list[str], int]:
    """Validate everything before any timing: (device, cases, notes, libraries, repeat)."""
    device = pick_device(args.device)
    kernels = catalogue.select(_split(args.patterns), device)
    dtypes = parse_dtypes(args.dtype)
    sizes = parse_sizes(args.sizes)
    requested = parse_compare(args.compare)
    repeat = args.repeat if args.repeat is not None else (3 if args.quick else 5)
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    _check_writable(args.json, "--json")
    _check_writable(args.plot, "--plot")
    if args.plot:
        plot.require_matplotlib()
    emulated = device == "cuda" and gt.cuda.runtime_name() == "emulator"
    cases, skipped = plan(kernels, dtypes, sizes, args.quick, emulated)
    if not cases:
        raise UsageError("nothing to run: " + "; ".join(skipped))
    return device, cases, skipped, requested, repeat


def _omp_note(device: str, compared: list[str]) -> list[str]:
    if device == "cpu" and "torch" in compared and not os.environ.get("OMP_WAIT_POLICY"):
        return ["torch and Numba each run an OpenMP thread pool; on a busy machine with few "
                "cores their idle spinning can inflate torch's times: rerun with "
                "OMP_WAIT_POLICY=PASSIVE if torch's figures look off"]
    return []


def run(args: argparse.Namespace) -> int:
    if args.list:
        print(list_catalogue())
        return 0
    device, cases, skipped, requested, repeat = _prepare(args)
    ours = libs.gputensor_lib(device)
    others, left_out = libs.comparison_libs(device, requested)
    name, emulated = device_name(device)
    peaks, why = peaks_for(device)
    sweep = Sweep(device=device, peaks=peaks, libs=[lib.name for lib in others])
    for note in [*left_out, *_omp_note(device, sweep.libs), *skipped, *([why] if why else [])]:
        sweep.note(note)
    meta: dict[str, Any] = {
        "device": "cuda:0" if device == "cuda" else "cpu", "device_name": name,
        "emulated": emulated, "repeat": repeat,
        "libraries": {ours.name: ours.version, **{lib.name: lib.version for lib in others}}}
    run_sweep(cases, ours, others, repeat, sweep,
              lambda c: _progress(c, len(cases), args.no_progress))

    print(output.render(sweep, meta, {p.kernel.name: p.kernel.doc for p in cases}))
    if args.json:
        output.write_json(args.json, output.to_json(sweep, meta))
        print(f"\nwrote {args.json}")
    if args.plot:
        title = f"gputensor bench: {meta['device']} ({name})"
        plot.plot(sweep, args.plot, title + (" [emulated: not GPU times]" if emulated else ""))
        print(f"wrote {args.plot}")
    return 1 if sweep.failures else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``gputensor bench``: returns the exit status."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    try:
        return run(args)
    except (UsageError, catalogue.SelectionError, plot.PlotUnavailable) as exc:
        print(f"gputensor bench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
