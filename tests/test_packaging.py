"""Packaging and the main job: one namespace installed, nothing generic, the tour runs."""

from __future__ import annotations

import subprocess
import sys

import gputensor as gt


def _run(code: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_only_the_gputensor_namespace_is_installed(tmp_path) -> None:
    code = ("import importlib.util as u; import gputensor.storage, gputensor.kernels, "
            "gputensor.autograd; print([u.find_spec(n) is None for n in "
            "('storage', 'kernels', 'autograd')])")
    result = _run(code, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, True, True]"


def test_import_compiles_no_kernel(tmp_path) -> None:
    # Numba dispatchers compile on first call; after import none has any compiled signature.
    code = ("import gc, numba, gputensor; "
            "from numba.core.registry import CPUDispatcher; "
            "print(sum(len(o.overloads) for o in gc.get_objects() "
            "if isinstance(o, CPUDispatcher)))")
    result = _run(code, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_tour_runs(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "gputensor", "tour"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    cuda = gt.cuda.is_available()  # the tour runs on CUDA when there is one (emulated in CI)
    for needle in ("backend CPU", f"cuda available: {cuda}",
                   f"x.type() = gputensor.{'cuda.' if cuda else ''}FloatTensor"):
        assert needle in result.stdout


def test_main_job_trains_and_checkpoints(tmp_path) -> None:
    """The README's main job, as a user runs it (one epoch here to keep the suite short)."""
    result = subprocess.run([sys.executable, "-m", "gputensor.demo", "--epochs", "1"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "test accuracy" in result.stdout and (tmp_path / "digits_cnn.pt").exists()
    assert "epoch 1/1" in result.stderr  # the progress bar


def test_cli_dispatches_commands(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "gputensor", "demo", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "--resume" in result.stdout


def test_new_factories_follow_self() -> None:
    x = gt.ones(2, dtype=gt.float64)
    assert x.new_zeros(2, 3).dtype is gt.float64 and x.new_zeros(2, 3).shape == (2, 3)
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype is gt.float64
    assert x.new_ones(1, dtype=gt.int32).dtype is gt.int32
