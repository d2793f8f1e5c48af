"""The fuzz test's options and its outcome tally.

``--fuzz-deep`` (or GPUTENSOR_FUZZ_DEEP=1) runs many more examples per op with larger shapes;
GPUTENSOR_FUZZ_EXAMPLES=<n> sets the examples per op and device.
``--fuzz-seed=<n>`` (or GPUTENSOR_FUZZ_SEED=<n>) draws other examples than the fixed CI seed:
a seed that finds a failure reproduces it (the failure message names the seed).
The option is registered when this folder is on the command line (``pytest tests/fuzz``); the
environment variable works from any invocation. At the end of the run the terminal summary
prints the count of calls per outcome class and device; GPUTENSOR_FUZZ_SUMMARY=<file> also
writes them, with the first examples of each non-matching class, as JSON."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from typing import Any

import pytest

TALLY: Counter = Counter()                      # (device, class) -> calls
EXAMPLES: dict[str, list[str]] = defaultdict(list)   # class -> a few descriptions
INTENDED: Counter = Counter()                   # intended-difference key -> calls


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-deep", action="store_true", default=False,
                     help="run the registry fuzz test (tests/fuzz) with many more examples")
    parser.addoption("--fuzz-seed", type=int, default=None,
                     help="seed of the registry fuzz test (default: the fixed CI seed)")


@pytest.fixture(scope="session")
def fuzz_deep(request: pytest.FixtureRequest) -> bool:
    try:
        opt = bool(request.config.getoption("--fuzz-deep"))
    except ValueError:
        opt = False
    return opt or os.environ.get("GPUTENSOR_FUZZ_DEEP", "") not in ("", "0")


@pytest.fixture(scope="session")
def fuzz_examples() -> int | None:
    """GPUTENSOR_FUZZ_EXAMPLES=<n> overrides the examples per op and device."""
    n = os.environ.get("GPUTENSOR_FUZZ_EXAMPLES", "")
    return int(n) if n else None


@pytest.fixture(scope="session")
def fuzz_seed(request: pytest.FixtureRequest) -> int | None:
    """--fuzz-seed or GPUTENSOR_FUZZ_SEED: None keeps the fixed, derandomized CI examples."""
    try:
        opt = request.config.getoption("--fuzz-seed")
    except ValueError:
        opt = None
    env = os.environ.get("GPUTENSOR_FUZZ_SEED", "")
    return opt if opt is not None else (int(env) if env else None)


@pytest.fixture(scope="session")
def fuzz_record() -> Any:
    def record(device: str, cls: str, text: str, intended: str | None) -> None:
        TALLY[(device.split(":")[0], cls)] += 1
        if intended is not None:
            INTENDED[intended] += 1
        elif cls not in ("match", "both_raise") and len(EXAMPLES[cls]) < 200:
            EXAMPLES[cls].append(text)
    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TALLY:
        return
    from .test_fuzz_registry import CLASSES
    tr = terminalreporter
    tr.section("registry fuzz outcomes (gputensor vs PyTorch)")
    devices = sorted({d for d, _ in TALLY})
    tr.write_line(f"{'class':<12}" + "".join(f"{d:>10}" for d in devices) + f"{'total':>10}")
    for cls in CLASSES:
        row = [TALLY[(d, cls)] for d in devices]
        tr.write_line(f"{cls:<12}" + "".join(f"{n:>10}" for n in row) + f"{sum(row):>10}")
    total = [sum(TALLY[(d, c)] for c in CLASSES) for d in devices]
    tr.write_line(f"{'calls':<12}" + "".join(f"{n:>10}" for n in total) + f"{sum(total):>10}")
    for key, n in sorted(INTENDED.items()):
        tr.write_line(f"  intended difference hit {n}x: {key}")
    path = os.environ.get("GPUTENSOR_FUZZ_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({"counts": {f"{d}/{c}": n for (d, c), n in sorted(TALLY.items())},
                       "intended": dict(INTENDED), "examples": EXAMPLES}, f, indent=1)
