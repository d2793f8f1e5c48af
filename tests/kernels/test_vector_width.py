"""Kernels that compute fast-math transcendentals ask LLVM for 512-bit vectors on AVX-512 CPUs
(kernels/cpu/vector_width.py), other kernels keep LLVM's tuning, and ``ATEN_CPU_CAPABILITY``
and ``gt.backends.cpu.get_cpu_capability()`` keep PyTorch's meaning."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

import gputensor as gt
from gputensor.kernels.cpu import fast_math, fast_math64, vector_width

_ATTRIBUTE = '"prefer-vector-width"="512"'


def _exp_loop(a: np.ndarray, out: np.ndarray) -> None:
    for i in range(a.size):
        out[i] = fast_math.exp_f32(a[i])


def _exp64_loop(a: np.ndarray, out: np.ndarray) -> None:
    for i in range(a.size):
        out[i] = fast_math64.exp_f64(a[i])


def _neg_loop(a: np.ndarray, out: np.ndarray) -> None:
    for i in range(a.size):
        out[i] = -a[i]


def _compiled(fn, dtype):  # noqa: ANN001, ANN202
    kernel = njit(cache=False, error_model="numpy")(fn)
    a = np.linspace(-5, 5, 100, dtype=dtype)
    out = np.empty_like(a)
    kernel(a, out)
    return kernel, a, out


@pytest.mark.parametrize("loop, dtype, reference", [(_exp_loop, np.float32, np.exp),
                                                    (_exp64_loop, np.float64, np.exp)])
def test_transcendental_kernels_prefer_wide_vectors(loop, dtype, reference) -> None:  # noqa: ANN001
    kernel, a, out = _compiled(loop, dtype)
    ir = "".join(kernel.inspect_llvm().values())
    assert (_ATTRIBUTE in ir) == vector_width.wide()
    np.testing.assert_allclose(out, reference(a.astype(np.float64)), rtol=2e-7 if dtype ==
                               np.float32 else 1e-15)
    if vector_width.wide():   # the loop really runs in zmm registers
        assert re.search(r"%zmm\d+", "".join(kernel.inspect_asm().values()))


def test_other_kernels_keep_llvm_tuning() -> None:
    kernel, a, out = _compiled(_neg_loop, np.float32)
    assert _ATTRIBUTE not in "".join(kernel.inspect_llvm().values())
    np.testing.assert_array_equal(out, -a)


def test_capability_matches_the_host_features() -> None:
    features = vector_width.host_features()
    avx512 = all(f"+{f}" in features for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl"))
    expected = "AVX512" if avx512 else ("AVX2" if "+avx2" in features else "DEFAULT")
    assert gt.backends.cpu.get_cpu_capability() == expected == vector_width.capability()


def test_aten_cpu_capability_avx2_keeps_256_bit_vectors() -> None:
    program = ("import gputensor as gt; from gputensor.kernels.cpu import vector_width as v; "
               "print(gt.backends.cpu.get_cpu_capability(), v.wide())")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=300, check=True,
                         env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"})
    capability, wide = run.stdout.split()
    assert wide == "False"
    assert capability == ("AVX2" if "+avx2" in vector_width.host_features() else "DEFAULT")


def test_cpu_capability_against_pytorch() -> None:
    torch = pytest.importorskip("torch")
    ours, theirs = gt.backends.cpu.get_cpu_capability(), torch.backends.cpu.get_cpu_capability()
    if theirs in ("AVX512", "AVX2", "DEFAULT"):   # x86 builds; others name other ISAs
        assert ours == theirs


_HASWELL = "+avx,+avx2,+fma,+f16c,+sse,+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+bmi,+bmi2"
_EDGES = ("[float('nan'), float('inf'), -float('inf'), 0.0, -0.0, 1e-30, -1e-30, 1.0, 88.72,"
          " 88.73, 88.5, 88.0, -87.3, -88.0, -95.0, -100.0, -103.9, -104.0, -104.1, -150.0,"
          " 1e7, -1e7, 3e38, -3e38, 20.5, -20.5, 0.3465736, -0.3465736]")
_EDGES64 = ("[709.78, 709.79, -708.3, -708.5, -744.4, -745.1, -745.2, -800.0, 1e300, 0.34657,"
            " -0.34657, 36.0, -36.0, -38.0]")
_SCALE_PROGRAM = f"""
import numpy as np, gputensor as gt
from gputensor.kernels.cpu import fast_math
x = gt.tensor({_EDGES}, dtype=gt.float32)
x = gt.cat([x, gt.linspace(-110, 95, 4099)])
print(fast_math.SCALEF)
for name in ("exp", "expm1", "sigmoid", "erf", "tanh"):
    print(getattr(gt, name)(x).numpy().view(np.uint32).tobytes().hex())
x = gt.cat([x.double(), gt.tensor({_EDGES64}, dtype=gt.float64), gt.linspace(-750, 712, 4099,
           dtype=gt.float64)])
for name in ("exp", "sigmoid", "erf", "tanh", "nn.functional.gelu"):
    fn = gt
    for part in name.split("."):
        fn = getattr(fn, part)
    print(fn(x).numpy().view(np.uint64).tobytes().hex())
"""


def test_exp_scaling_without_avx512_gives_the_same_bits(tmp_path) -> None:  # noqa: ANN001
    """exp's 2^n (float32 and float64) is one VSCALEFPS/PD on AVX-512 CPUs and two normal
    factors elsewhere (LLVM's ldexp would call libm per element there): both round once, so
    the bits are the same.
    A Haswell target in a fresh process takes the other path from this host's."""
    here = subprocess.run([sys.executable, "-c", _SCALE_PROGRAM], capture_output=True,
                          text=True, timeout=600, check=True).stdout.split()
    env = {**os.environ, "NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": _HASWELL,
           "GPUTENSOR_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path)}
    haswell = subprocess.run([sys.executable, "-c", _SCALE_PROGRAM], capture_output=True,
                             text=True, timeout=600, check=True, env=env).stdout.split()
    assert haswell[0] == "False"
    assert here[0] == str("+avx512f" in vector_width.host_features())
    assert here[1:] == haswell[1:]
