"""The `gputensor` command (also `python -m gputensor`).

    gputensor demo [...]   the main job: train a small CNN on the bundled digits
                           (the default when no command is given; see gputensor.demo)
    gputensor tour         print the registries and devices and run a few ops
    gputensor selftest [--device cuda|cpu] [--emulator] [-k PATTERN] [--list]
                           check a device's kernels against the CPU backend: one row per
                           check, a non-zero exit status when one fails (see gputensor.selftest)
    gputensor bench [-k PATTERN] [--device cpu|cuda] [--dtype float32,...]
                    [--sizes 1e3,1e5,1e7] [--repeat N] [--compare numpy,torch,cupy]
                    [--json out.json] [--plot out.png] [--quick] [--list]
                           time catalogued kernels over sizes and dtypes: throughput, % of the
                           device's roofline and ratios against NumPy/PyTorch/CuPy (see
                           gputensor.bench; `gputensor bench --help`)
    gputensor info [--json]
                           devices, backends, op count, NVRTC / emulator / CuPy status and the
                           kernel caches (see gputensor.info)
"""

from __future__ import annotations

import argparse
import sys
import time

import gputensor as gt
from gputensor._dtype import DTYPES
from gputensor.kernels.registry import BACKENDS, OPS
from gputensor.storage.copy_table import COPY_TABLE


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def tour() -> None:
    _section("registries")
    print("dtypes :", ", ".join(str(d) for d in DTYPES))
    print("layouts:", gt.strided, gt.sparse_coo)
    for (dev, lay), b in BACKENDS.items():
        print(f"backend {b.name:<10} device={dev:<4} layout={lay:<10} kernels={len(b.kernels)}")
    print(f"ops in the registry: {len(OPS)}; copy-table entries: {len(COPY_TABLE)}")
    print("storage types:", gt.FloatStorage, gt.cuda.FloatStorage)

    _section("devices")
    print("default device:", gt.get_default_device())
    print("cuda available:", gt.cuda.is_available(), "| devices:", gt.cuda.device_count())
    device = "cuda" if gt.cuda.is_available() else "cpu"
    print("running the tour on:", device)

    _section("ops")
    x = gt.arange(12, dtype=gt.float32, device=device).reshape(3, 4)
    print("x =", x)
    print("x.T[1:, ::2] =", x.T[1:, ::2])
    print("x * 2 + 1 =", x * 2 + 1)
    print("gt.exp(x / 10) =", gt.exp(x / 10))
    print("x.type() =", x.type(), "| x.double().type() =", x.double().type())
    for name, fn in (("sum", lambda: x.sum()), ("matmul", lambda: x @ x.T)):
        if name in OPS:
            print(f"x.{name} ->", fn())

    _section("timing (first call compiles and caches the Numba kernel)")
    big = gt.ones(1 << 22, device=device)
    for label in ("first call", "cached call"):
        t0 = time.perf_counter()
        big + big
        print(f"add of 4M float32, {label}: {1e3 * (time.perf_counter() - t0):.2f} ms")


COMMANDS = ("demo", "tour", "selftest", "bench", "info")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "demo"
    if command == "tour":
        argparse.ArgumentParser(prog="gputensor tour").parse_args(argv)
        tour()
        return 0
    if command == "selftest":
        from gputensor import selftest
        return selftest.main(argv)
    if command == "bench":
        from gputensor.bench import cli
        return cli.main(argv)
    if command == "info":
        from gputensor import info
        return info.main(argv)
    from gputensor import demo
    return demo.main(argv)


if __name__ == "__main__":
    sys.exit(main())
