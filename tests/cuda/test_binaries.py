"""The project's own NVRTC step for real GPUs (kernels/cuda/binaries.py): the options are the
project's (no flush-to-zero), and the cache key covers every byte that reaches the compiler,
so an edited header never loads stale code (CuPy's cache keys on the source text alone)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gputensor.kernels.cuda import binaries, nvrtc
from gputensor.kernels.cuda.device import NVRTC_OPTIONS
from tests.helpers import HEADER_PROBE, header_probe_results

_OK, _WHY = nvrtc.availability()
needs_nvrtc = pytest.mark.skipif(not _OK, reason=f"NVRTC wheel not installed: {_WHY}")

_PROBE = HEADER_PROBE


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GPUTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "cuda_nvrtc"


def _value_in(ptx: str) -> int:
    return int(re.search(r"mov\.u64\s+%rd\d+,\s*(\d+);", ptx).group(1))


@needs_nvrtc
def test_an_edited_header_gives_a_new_binary(tmp_path, cache, monkeypatch) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    compiles = []
    real = nvrtc.compile_program
    monkeypatch.setattr(nvrtc, "compile_program",
                        lambda *a, **k: compiles.append(a[1]) or real(*a, **k))
    opts = (*NVRTC_OPTIONS, f"-I{inc}")
    got = []
    for value in (1, 2, 2):
        (inc / "probe.cuh").write_text(f"#define PROBE_VALUE {value}\n")
        b = binaries.build(_PROBE, "probe", "compute_80", opts)
        got.append((b.key, _value_in(b.image.decode(errors="replace"))))
    assert [v for _, v in got] == [1, 2, 2]
    assert got[0][0] != got[1][0] == got[2][0]
    assert compiles == ["probe", "probe"]  # the third build came from the cache
    assert len(list(cache.glob("probe-*.ptx"))) == 2


@needs_nvrtc
def test_every_included_header_keys_the_cache(tmp_path) -> None:
    (tmp_path / "a.cuh").write_text('#include "sub/b.cuh"\n#include <cuda_fp16.h>\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.cuh").write_text('#include "c.cuh"\n')  # next to its includer
    (tmp_path / "sub" / "c.cuh").write_text("#define C 1\n")
    files = binaries.included_files('#include "a.cuh"\n', [tmp_path, nvrtc.toolkit().include])
    names = {p.name for p in files}
    assert {"a.cuh", "b.cuh", "c.cuh", "cuda_fp16.h", "cuda_fp16.hpp"} <= names


@needs_nvrtc
def test_float32_subnormals_are_not_flushed(cache) -> None:
    """CuPy's compiler appends -ftz=true (cupy/cuda/compiler.py); the project's build keeps
    float32 subnormals: no .ftz arithmetic in the PTX."""
    src = ('extern "C" __global__ void mul(float* x, float s) { x[0] = x[0] * s + 1e-40f; }\n')
    ptx = binaries.build(src, "mul", "compute_90", NVRTC_OPTIONS).image.decode()
    assert re.search(r"\bmul\.(rn\.)?f32", ptx) and ".ftz" not in ptx
    flushed = nvrtc.compile_program(src, "mul", "compute_90", options=["-ftz=true"]).ptx
    assert ".ftz" in flushed  # the test can tell the difference


@needs_nvrtc
def test_cubin_for_sm_and_ptx_for_newer_devices(cache) -> None:
    src = 'extern "C" __global__ void k(int* x) { x[0] = 1; }\n'
    assert binaries.build(src, "k", "sm_90").image[:4] == b"\x7fELF"
    newest = nvrtc.supported_archs()[-1]
    assert nvrtc.arch_for((9, 0)) == "sm_90"
    assert nvrtc.arch_for((newest // 10 + 1, 0)) == f"compute_{newest}"
    assert binaries.build(src, "k", f"compute_{newest}").image.startswith(b"//")


def test_toolkits_pair_each_nvrtc_with_its_own_headers(tmp_path, monkeypatch) -> None:
    root = tmp_path / "nvidia"
    for lib, inc in (("cu13/lib/libnvrtc.so.13", "cu13/include"),
                     ("cuda_nvrtc/lib/libnvrtc.so.12", "cuda_runtime/include")):
        (root / lib).parent.mkdir(parents=True)
        (root / lib).write_bytes(b"")
        (root / inc).mkdir(parents=True)
        (root / inc / "cuda_fp16.h").write_text("")
    monkeypatch.setattr(nvrtc, "_nvidia_roots", lambda: [root])
    monkeypatch.setattr(nvrtc, "_toolkit_roots", lambda: [])
    found = nvrtc.find_toolkits()
    assert [(t.major, t.include.parent.name) for t in found] == [(13, "cu13"),
                                                                 (12, "cuda_runtime")]
    try:
        nvrtc.prefer_major(None)
        assert nvrtc.toolkit().major == 13
        nvrtc.prefer_major(12)  # a CUDA 12 driver cannot load CUDA 13 cubins
        assert nvrtc.toolkit().major == 12
        nvrtc.prefer_major(11)
        with pytest.raises(nvrtc.NvrtcUnavailable, match="CUDA 11 or older"):
            nvrtc.toolkit()
    finally:
        nvrtc.prefer_major(None)


@needs_nvrtc
def test_check_archs_follow_the_nvrtc_version() -> None:
    archs = nvrtc.check_archs()
    assert "sm_80" in archs and "sm_90" in archs
    assert ("sm_70" in archs) == (nvrtc.version()[0] < 13)  # NVRTC 13 dropped Volta


def test_the_emulator_cache_also_keys_on_included_headers(tmp_path) -> None:
    from gputensor.kernels.cuda.emulator_driver import EmulatorRuntime

    # The default cache dir on purpose: the emulator's fiber runtime is one library per process,
    # loaded from the cache dir of its first use (another dir would load a second copy).
    assert header_probe_results(EmulatorRuntime(), tmp_path) == [1, 2]
