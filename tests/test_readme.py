"""The README's tour is real code: run it, so the documentation cannot drift from the API."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the tour saves a checkpoint
    text = README.read_text()
    code = re.search(r"## A short tour\n\n```python\n(.*?)```", text, re.S)
    assert code, "README has no tour block"
    exec(compile(code.group(1), str(README), "exec"), {})
    assert "gputensor.FloatTensor" in capsys.readouterr().out


def test_readme_profiling_and_sparse_block_runs(capsys, tmp_path, monkeypatch) -> None:
    """The profiling/sparse block continues the tour (it reuses its model and data)."""
    monkeypatch.chdir(tmp_path)
    text = README.read_text()
    tour = re.search(r"## A short tour\n\n```python\n(.*?)```", text, re.S)
    block = re.search(r"## Profiling, benchmarking, sparse\n\n```python\n(.*?)```", text, re.S)
    assert tour and block, "README lacks the tour or the profiling block"
    exec(compile(tour.group(1) + block.group(1), str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "GB/s" in out and "_gemm" in out          # the profile table
    assert "tensor([[0., 0., 3.]," in out            # the sparse block's to_dense()
    assert (tmp_path / "trace.json").stat().st_size > 0


def test_readme_has_the_two_quickstart_commands() -> None:
    text = README.read_text()
    assert "pip install -e . && python -m gputensor.demo" in text
    assert "pip install -e '.[test]' && python -m pytest" in text
