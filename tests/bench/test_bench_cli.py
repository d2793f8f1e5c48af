"""`gputensor bench`: tables, JSON schema and arithmetic, the plot, and usage errors.

Runs the command in-process (`gputensor.__main__.main`) with `--quick --repeat 1`, on cpu and,
with GPUTENSOR_CUDA_EMULATOR=1, on the emulated cuda device. Nothing here asserts on a time.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import gputensor as gt
from gputensor.__main__ import main
from gputensor.bench import catalogue, cli
from gputensor.bench.sweep import Result
from gputensor.bench.timing import measure
from gputensor.profiler.peaks import Peaks

try:
    import torch
except ImportError:
    torch = None

QUICK = ["--quick", "--repeat", "1", "--no-progress"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bench(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    rc = main(["bench", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def dev_type(device: str) -> str:
    return device.split(":")[0]


def test_add_table(device: str, capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = bench(capsys, "-k", "add", "--device", dev_type(device), *QUICK)
    assert rc == 0, out
    assert "== add (elementwise, memory-bound)" in out
    assert "their time / gputensor's time (> 1: gputensor is faster)" in out
    lines = out.splitlines()
    head = next(line for line in lines if line.startswith("size"))
    for col in ("shape", "dtype", "time", "throughput", "roofline", "vs numpy"):
        assert col in head
    rows = [line.split() for line in lines if line.split()[:1] in (["256"], ["4096"])]
    assert [r[0] for r in rows] == ["256", "4096"]
    assert all("float32" in r and "GB/s" in r for r in rows)
    if dev_type(device) == "cuda" and gt.cuda.runtime_name() == "emulator":
        assert "not GPU times" in out
    if dev_type(device) == "cpu" and torch is not None:
        assert "vs torch" in head


def test_json_schema_and_bytes(device: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "out.json"
    rc, out, _ = bench(capsys, "-k", "add", "--device", dev_type(device), "--json", str(path),
                       *QUICK)
    assert rc == 0, out
    data = json.loads(path.read_text())
    assert data["version"] == 1
    assert data["device"] == ("cpu" if dev_type(device) == "cpu" else "cuda:0")
    assert isinstance(data["emulated"], bool)
    assert set(data["peaks"]) == {"bandwidth", "flops", "source"}
    assert data["libraries"]["gputensor"]
    assert [r["size"] for r in data["results"]] == list(catalogue.FLAT_QUICK)
    keys = {"kernel", "family", "size", "shape", "dtype", "device", "time_s", "bytes", "flops",
            "gbps", "gflops", "metric", "roofline_pct", "compare"}
    for r in data["results"]:
        assert set(r) == keys
        n = r["size"]
        assert (r["kernel"], r["dtype"], r["shape"]) == ("add", "float32", [n])
        assert r["bytes"] == 12 * n  # two float32 reads and one write per element
        assert r["flops"] == n
        assert r["time_s"] > 0
        assert math.isclose(r["gbps"], r["bytes"] / r["time_s"] / 1e9)
        assert math.isclose(r["gflops"], r["flops"] / r["time_s"] / 1e9)
        assert r["roofline_pct"] is None or r["roofline_pct"] > 0
        assert isinstance(r["compare"]["numpy"], float) and r["compare"]["numpy"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name != "out.json"]  # no temp file left


def test_matmul_shape_and_flops_from_size(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "mm.json"
    rc, out, _ = bench(capsys, "-k", "matmul", "--device", "cpu", "--sizes", "256",
                       "--compare", "none", "--json", str(path), *QUICK)
    assert rc == 0, out
    (r,) = json.loads(path.read_text())["results"]
    assert r["shape"] == [16, 16] and r["metric"] == "GFLOP/s"
    assert r["flops"] == 2 * 16 ** 3
    assert r["bytes"] == 3 * 16 * 16 * 4
    assert r["compare"] == {}
    assert "16x16 @ 16x16" in out and "vs numpy" not in out


def test_dtypes_and_skip_notes(capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = bench(capsys, "-k", "add,exp", "--device", "cpu", "--dtype", "int32,float64",
                       "--compare", "numpy", *QUICK)
    assert rc == 0, out
    assert "exp: int32 skipped" in out
    add_rows = [line.split() for line in out.split("== exp")[0].splitlines()
                if line.split()[:1] in (["256"], ["4096"])]
    assert sorted({r[2] for r in add_rows}) == ["float64", "int32"]


def test_plot_writes_png(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    rc, out, _ = bench(capsys, "-k", "add,matmul", "--device", "cpu", "--plot", str(path),
                       *QUICK)
    assert rc == 0, out
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_plot_without_matplotlib(tmp_path: Path, capsys: pytest.CaptureFixture,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    rc, out, err = bench(capsys, "-k", "add", "--device", "cpu", "--plot",
                         str(tmp_path / "x.png"), *QUICK)
    assert rc == 2
    assert "pip install gputensor[plot]" in err
    assert out == ""  # it fails before sweeping


@pytest.mark.parametrize(("args", "message"), [
    (["-k", "nosuchkernel"], "no catalogued kernel matches 'nosuchkernel'"),
    (["--dtype", "float33"], "unknown dtype 'float33'"),
    (["--sizes", "1e3,abc"], "'abc' is not a number"),
    (["--sizes", "0"], "not a positive whole number"),
    (["--sizes", "2.5"], "not a positive whole number"),
    (["--compare", "jax"], "unknown library 'jax'"),
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["-k", "exp", "--dtype", "int32"], "nothing to run: exp: int32 skipped"),
    (["-k", "to_cuda"], "only run(s) on cuda, not on 'cpu'"),
    (["--json", "/nonexistent/dir/out.json"], "does not exist"),
])
def test_usage_errors_exit_2(args: list[str], message: str,
                             capsys: pytest.CaptureFixture) -> None:
    rc, out, err = bench(capsys, "--device", "cpu", *QUICK, *args)
    assert rc == 2
    assert message in err
    assert err.startswith("gputensor bench: error:")


def test_unavailable_device_exit_2(capsys: pytest.CaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gt.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gt.cuda, "why_unavailable", lambda: "no GPU in this test")
    rc, _, err = bench(capsys, "-k", "add", "--device", "cuda", *QUICK)
    assert rc == 2
    assert "CUDA is not available (no GPU in this test)" in err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture) -> None:
    rc, _, err = bench(capsys, "--device", "tpu")
    assert rc == 2 and "invalid choice: 'tpu'" in err


def test_list(capsys: pytest.CaptureFixture) -> None:
    rc, out, _ = bench(capsys, "--list")
    assert rc == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert names == [k.name for k in catalogue.CATALOGUE]
    assert {"add", "sum", "softmax", "matmul", "conv2d", "cast", "to_cuda"} <= set(names)


def test_selection() -> None:
    assert [k.name for k in catalogue.select(["add"], "cpu")] == ["add"]
    assert [k.name for k in catalogue.select(["*ax"], "cpu")] == ["amax", "softmax"]
    assert {k.family for k in catalogue.select(["reduction"], "cpu")} == {"reduction"}
    assert "to_cpu" in [k.name for k in catalogue.select(["transfer"], "cuda")]
    assert "to_cpu" not in [k.name for k in catalogue.select([], "cpu")]


def test_ratio_is_their_time_over_ours() -> None:
    r = Result("add", "elementwise", 4, [4], "4", "float32", "cpu", time_s=2.0, bytes=48,
               flops=4, metric="GB/s", roofline_pct=None, compare={"numpy": 4.0, "torch": None})
    assert r.ratio("numpy") == 2.0  # NumPy took twice as long: gputensor is 2x faster
    assert r.ratio("torch") is None and r.ratio("cupy") is None
    assert r.gbps == 48 / 2.0 / 1e9


def test_roofline_percentage() -> None:
    from gputensor.bench.roofline import roof_rate, roofline_pct
    peaks = Peaks(bandwidth_bytes_per_s=100.0, flops_per_s=1000.0, source="test")
    assert roofline_pct(50, 0, 1.0, peaks) == pytest.approx(50.0)     # memory-bound
    assert roofline_pct(1, 500, 1.0, peaks) == pytest.approx(50.0)    # compute-bound
    assert roofline_pct(100, 0, 1.0, None) is None
    assert roof_rate(100, 0, "GB/s", peaks) == pytest.approx(100 / 1e9)
    assert roof_rate(100, 10, "GFLOP/s", peaks) == pytest.approx(10.0 / 1e9)  # AI 0.1 * bw


def test_measure_warms_up_and_repeats() -> None:
    calls, syncs = [], []
    seconds = measure(lambda: calls.append(1), lambda: syncs.append(1), repeat=3)
    assert seconds > 0
    assert len(calls) >= 1 + 1 + 3  # warm-up, calibration, then at least one call per repeat
    assert len(syncs) >= 2 * 3
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        measure(lambda: None, lambda: None, repeat=0)


def test_cli_parsers() -> None:
    assert cli.parse_sizes("1e3, 100000") == [1000, 100000]
    assert cli.parse_sizes(None) is None
    assert [d.name for d in cli.parse_dtypes("float32,torch.bfloat16")] == ["float32",
                                                                           "bfloat16"]
    assert cli.parse_compare("none") == []
    assert cli.parse_compare("torch,numpy,torch") == ["torch", "numpy"]


def _raise(message: str) -> catalogue.Impl:
    def impl(lib: object, t: object, p: object) -> Callable[[], None]:
        def call() -> None:
            raise RuntimeError(message)
        return call
    return impl


def test_failures_and_failed_comparisons(capsys: pytest.CaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    add = catalogue.BY_NAME["add"]
    boom = catalogue.Kernel("boom", "elementwise", add.build, {"gputensor": _raise("exploded")},
                            add.dtypes, (64,), (64,), op="add")
    flaky = catalogue.Kernel("flaky", "elementwise", add.build,
                             {**add.impls, "numpy": _raise("no loop")}, add.dtypes, (64,),
                             (64,), op="add")
    monkeypatch.setattr(catalogue, "CATALOGUE", (boom, flaky))
    rc, out, _ = bench(capsys, "--device", "cpu", "--compare", "numpy", *QUICK)
    assert rc == 1  # a gputensor kernel raised
    assert "FAILED:" in out and "gputensor boom float32 size 64 on cpu: RuntimeError: exploded" \
        in out
    assert "numpy: flaky float32 failed (RuntimeError: no loop)" in out
    row = next(line.split() for line in out.split("== flaky")[1].splitlines()
               if line.startswith("64 "))
    assert row[-1] == "-"  # the failed comparison leaves its ratio cell empty


def test_default_sizes() -> None:
    from gputensor.bench.sweep import default_sizes, plan
    add = catalogue.BY_NAME["add"]
    assert default_sizes(add, quick=True, emulated=False) == catalogue.FLAT_QUICK
    assert default_sizes(add, quick=False, emulated=False) == catalogue.FLAT_SIZES
    # the emulator runs CUDA threads as fibers on the CPU: only the smallest sizes
    assert default_sizes(add, quick=False, emulated=True) == \
        catalogue.FLAT_SIZES[:catalogue.EMULATED_SIZES]
    cases, notes = plan([add], [gt.float32], [5, 7], quick=True)
    assert [c.size for c in cases] == [5, 7] and notes == []  # --sizes wins over --quick
