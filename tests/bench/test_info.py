"""`gputensor info`: its sections, the figures behind them, and that no probe can break it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gputensor as gt
from gputensor import info
from gputensor.__main__ import main
from gputensor.kernels.cuda.emulator import build
from gputensor.kernels.registry import BACKENDS, OPS

SECTIONS = ("gputensor", "devices", "backends", "ops", "nvrtc", "emulator", "cupy", "caches")


def run_info(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    rc = main(["info", *args])
    return rc, capsys.readouterr().out


def test_sections_in_order(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_info(capsys)
    assert rc == 0
    headers = [line.split()[1] for line in out.splitlines() if line.startswith("== ")]
    assert headers == list(SECTIONS)
    assert f"ops                          : {len(OPS)}" in out
    cpu = BACKENDS["cpu", "strided"]
    assert f"device=cpu layout=strided kernels={len(cpu.kernels)}" in out


def test_json_figures(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_info(capsys, "--json")
    assert rc == 0
    data = json.loads(out)
    assert list(data) == list(SECTIONS)
    assert data["ops"]["ops"] == len(OPS)
    assert data["devices"]["cpu cores usable"] >= 1
    assert data["devices"]["cuda available"] == gt.cuda.is_available()
    assert set(data["backends"]) == {b.name for b in BACKENDS.values()}
    # The emulator's own cache-dir helper names the location.
    assert data["caches"]["emulator builds"].startswith(str(build.cache_dir()))
    assert isinstance(data["nvrtc"]["available"], bool)
    assert isinstance(data["cupy"]["importable"], bool)
    assert not any("error" in section for section in data.values()), data


@pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                    "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")
def test_cuda_devices_listed(capsys: pytest.CaptureFixture) -> None:
    data = json.loads(run_info(capsys, "--json")[1])
    (dev,) = data["devices"]["cuda devices"][:1]
    props = gt.cuda.get_device_properties(0)
    assert dev["name"] == props.name
    assert dev["capability"] == f"{props.major}.{props.minor}"
    assert data["devices"]["cuda runtime"] == gt.cuda.runtime_name()
    if gt.cuda.runtime_name() == "emulator":
        assert data["emulator"]["selected"] is True


def test_nvrtc_section_when_available(capsys: pytest.CaptureFixture) -> None:
    from gputensor.kernels.cuda import nvrtc
    if not nvrtc.is_available():
        pytest.skip("NVRTC wheel not installed")
    section = info.nvrtc_section()
    major, minor = nvrtc.version()
    assert section["version"] == f"{major}.{minor}"
    assert section["trivial compile"].startswith("ok (")


def test_dir_size(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x" * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"y" * 28)
    assert info.dir_size(tmp_path) == (128, 2)
    assert info.dir_size(tmp_path / "missing") == (0, 0)
    assert info.fmt_bytes(512) == "512 B"
    assert info.fmt_bytes(3 * 1024 * 1024) == "3.0 MiB"


def test_a_failing_probe_is_reported(capsys: pytest.CaptureFixture,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> dict:
        raise OSError("probe exploded")

    monkeypatch.setitem(info.SECTIONS, "cupy", broken)
    rc, out = run_info(capsys)
    assert rc == 0
    assert "error : OSError: probe exploded" in out
    assert "== caches" in out  # the sections after it still ran


def test_bad_option_exit_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["info", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
