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


def test_readme_has_the_two_quickstart_commands() -> None:
    text = README.read_text()
    assert "pip install -e . && python -m gputensor.demo" in text
    assert "pip install -e '.[test]' && python -m pytest" in text
