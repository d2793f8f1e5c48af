"""NVRTC compile check: every CUDA source the emulator runs must also compile for real GPUs.

No GPU is needed: NVRTC and the CUDA headers come from the NVRTC and CUDA runtime wheels of
CUDA 12 or 13 (the ``nvrtc``/``nvrtc13`` and ``test`` extras).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gputensor.kernels.cuda import nvrtc
from gputensor.kernels.cuda.emulator import parse_kernels

_OK, _WHY = nvrtc.availability()
pytestmark = pytest.mark.skipif(not _OK, reason=f"NVRTC wheel not installed: {_WHY}")

ROOT = Path(__file__).resolve().parents[2]
# Stand-alone test kernels with non-template entry points; the backend's .cu files hold
# templates whose entry points CudaSource generates (tested below, per source).
SOURCES = sorted((ROOT / "tests" / "cuda" / "kernels").rglob("*.cu"))
ARCHS = ("sm_80", "sm_90")


def _backend_targets() -> list[tuple[int, str]]:
    """(CUDA major, arch) for every installed NVRTC: Volta/Ampere/Hopper with CUDA 12 (NVRTC
    13 dropped sm_70); Hopper with the newer majors (the headers differ, the kernels do not)."""
    majors = sorted({t.major for t in nvrtc.find_toolkits()})
    return [(m, a) for m in majors for a in (("sm_70", "sm_80", "sm_90") if m == 12
                                             else ("sm_90",))]


BACKEND_TARGETS = _backend_targets() if _OK else []
_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+([\w$]+)\s*\(", re.M)


def _entries(ptx: str) -> set[str]:
    return set(_ENTRY.findall(ptx))


def test_sources_found():
    assert {p.name for p in SOURCES} >= {"vector_add.cu", "reduce.cu", "matmul.cu", "misc.cu",
                                         "templates.cu"}


def _backend_sources() -> list:
    from gputensor.kernels.cuda import ops  # noqa: F401 - declares every CudaSource
    from gputensor.kernels.cuda.device import SOURCES as BACKEND

    return BACKEND


def test_every_backend_cu_file_is_declared():
    """Each kernels/cuda/*.cu is a CudaSource, so the loop below compiles all of them."""
    files = {p.name for p in (ROOT / "kernels" / "cuda").glob("*.cu")}
    assert files <= {s.filename for s in _backend_sources()}


@pytest.mark.parametrize("major,arch", BACKEND_TARGETS,
                         ids=[f"cuda{m}-{a}" for m, a in BACKEND_TARGETS])
def test_backend_sources_compile_for_real_gpus(major: int, arch: str):
    """Every CUDA-backend source with all its instantiations compiles with each installed
    NVRTC (CUDA 12 and 13 headers) for its architectures, and every instantiated kernel is an
    (unmangled, extern "C") entry point."""
    nvrtc.prefer_major(major)
    try:
        assert nvrtc.toolkit().major == major
        for src in _backend_sources():
            prog = src.nvrtc_check(arch)
            assert re.search(rf"^\.target\s+{arch}\b", prog.ptx, re.M)
            assert prog.cubin[:4] == b"\x7fELF"
            assert set(src.kernel_names) <= _entries(prog.ptx), src.filename
    finally:
        nvrtc.prefer_major(None)


def test_backend_compile_error_shows_numbered_source_and_specialisations():
    from gputensor.kernels.cuda.device import SOURCES as BACKEND
    from gputensor.kernels.cuda.device import CudaSource

    bad = CudaSource("common.cuh")
    try:
        bad.instantiate("broken_{s}", "{T}* x", "undefined_fn(x)", [{"s": "f32", "T": "float"}])
        with pytest.raises(nvrtc.NvrtcError) as info:
            bad.nvrtc_check("sm_80")
    finally:
        BACKEND.remove(bad)
    msg = str(info.value)
    assert "undefined_fn" in msg and "specialised for: broken_f32" in msg
    assert re.search(r">\s*\d+ \| extern \"C\" __global__ void broken_f32", msg)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_source_compiles_with_every_kernel_entry(path: Path, arch: str):
    kernels = parse_kernels(path.read_text())  # the emulator's view of the launchable kernels
    assert kernels, f"{path.name} declares no __global__ kernel"
    exprs = [f"&{k}" for k in kernels]
    prog = nvrtc.compile_file(path, arch, name_expressions=exprs)
    assert re.search(rf"^\.target\s+{arch}\b", prog.ptx, re.M), prog.ptx[:400]
    assert prog.cubin[:4] == b"\x7fELF"  # ptxas ran for the real architecture
    # Kernels compile cleanly, not just compile. NVRTC 13's ptxas notes that misc.cu's
    # deliberately recursive kernel has no static stack size; nothing else may warn.
    log = "\n".join(line for line in prog.log.splitlines()
                    if "cannot be statically determined" not in line or "recurse" not in line)
    assert "warning" not in log, prog.log
    lowered = prog.lowered_names
    for k in kernels:  # C++ linkage: the symbol is mangled and starts with the kernel's name
        assert lowered[f"&{k}"].startswith(f"_Z{len(k)}{k}"), (k, lowered[f"&{k}"])
    assert _entries(prog.ptx) == set(lowered.values())


def test_misc_mangled_names_match_parameter_types():
    prog = nvrtc.compile_file(ROOT / "tests/cuda/kernels/misc.cu", "sm_90",
                              name_expressions=["&half_in", "&scalars"])
    assert prog.lowered_names == {"&half_in": "_Z7half_inPK6__halfPS_i",
                                  "&scalars": "_Z7scalarsijxdbhPd"}


def test_extern_c_entry_is_unmangled():
    src = 'extern "C" __global__ void plain(float* x) { x[threadIdx.x] = 1.0f; }\n'
    ptx = nvrtc.compile_ptx(src, "plain.cu", arch="sm_80")
    assert _entries(ptx) == {"plain"}


def test_virtual_arch_gives_ptx_only():
    src = 'extern "C" __global__ void k(int* x) { x[0] = 1; }\n'
    prog = nvrtc.compile_program(src, "k.cu", "compute_90")
    assert prog.cubin == b""
    assert re.search(r"^\.target\s+sm_90\b", prog.ptx, re.M)
    assert _entries(prog.ptx) == {"k"}


def test_common_header_features_compile_for_real_gpus():
    # What the emulator fakes, NVRTC must accept: dynamic shared memory of several types (also
    # twice in one kernel), warp reductions on half/bf16/double, grid-stride loops.
    src = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "common.cuh"
extern "C" __global__ void dyn_two(const float* x, double* y, int n) {
    GT_DYNAMIC_SHARED(float, f);
    GT_DYNAMIC_SHARED(double, d);
    f[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    d[threadIdx.x] = f[threadIdx.x] * 2.0;
    for (GT_GRID_STRIDE(i, n)) y[i] = d[i % blockDim.x];
}
extern "C" __global__ void warp_ops(const __half* h, const __nv_bfloat16* b, const double* d,
                                    __half* ho, __nv_bfloat16* bo, double* dout) {
    int i = threadIdx.x;
    ho[i] = gt_warp_sum(h[i]);
    bo[i] = gt_warp_max(b[i]);
    dout[i] = gt_warp_sum(d[i]) + gt_ceil_div(i, 3u);
}
"""
    for arch in ARCHS:
        ptx = nvrtc.compile_ptx(src, "features.cu", arch=arch)
        assert _entries(ptx) == {"dyn_two", "warp_ops"}
        assert re.search(r"\.extern \.shared \.align 16 \.b8 gt_dyn_shared_\[\]", ptx)
        assert "shfl.sync.bfly" in ptx


def test_syntax_error_raises_with_log_and_name():
    src = '#include "common.cuh"\n__global__ void broken(float* x) { x[0] = 1.0f }\n'
    with pytest.raises(nvrtc.NvrtcError) as info:
        nvrtc.compile_ptx(src, "broken_kernel.cu", arch="sm_90")
    err = info.value
    assert err.name == "broken_kernel.cu"
    assert "broken_kernel.cu(2)" in err.log and "error" in err.log
    assert "broken_kernel.cu" in str(err) and err.log in str(err)
    assert "NVRTC_ERROR_COMPILATION" in str(err)


def test_undeclared_identifier_and_missing_header_are_reported():
    with pytest.raises(nvrtc.NvrtcError, match="undefined"):
        nvrtc.compile_ptx("__global__ void k(int* x) { x[0] = nope; }", "undef.cu")
    with pytest.raises(nvrtc.NvrtcError, match="no_such_header.cuh"):
        nvrtc.compile_ptx('#include "no_such_header.cuh"\n', "inc.cu")


def test_include_dirs_and_options(tmp_path: Path):
    (tmp_path / "scale.cuh").write_text("#define GT_TEST_SCALE 3.5f\n")
    src = ('#include "scale.cuh"\n'
           'extern "C" __global__ void k(float* x) { x[0] = GT_TEST_SCALE * OFFSET; }\n')
    ptx = nvrtc.compile_ptx(src, "opts.cu", "sm_80", include_dirs=[tmp_path],
                            options=["-DOFFSET=2.0f"])
    # 3.5f * 2.0f folded to 7.0f = 0x40E00000, stored as a float or as its raw bits
    assert "0f40E00000" in ptx or str(0x40E00000) in ptx, ptx
    with pytest.raises(nvrtc.NvrtcError, match="OFFSET"):
        nvrtc.compile_ptx(src, "opts.cu", "sm_80", include_dirs=[tmp_path])


def test_version_and_archs():
    major, minor = nvrtc.version()
    assert major == nvrtc.toolkit().major in (12, 13) and minor >= 0
    archs = nvrtc.supported_archs()
    assert archs == sorted(archs) and {80, 90} <= set(archs)


@pytest.mark.parametrize("arch", ["sm90", "gfx90a", "sm_", "compute_x"])
def test_malformed_arch_raises(arch: str):
    with pytest.raises(ValueError, match="arch must look like"):
        nvrtc.compile_ptx("", "empty.cu", arch=arch)


def test_unsupported_arch_raises():
    with pytest.raises(ValueError, match="not supported"):
        nvrtc.compile_ptx("", "empty.cu", arch="sm_35")


def test_availability_reports_missing_wheels(monkeypatch):
    monkeypatch.setattr(nvrtc, "_nvidia_roots", lambda: [])
    monkeypatch.setattr(nvrtc, "_toolkit_roots", lambda: [])
    try:
        nvrtc.prefer_major(None)  # clears the cached choice
        with pytest.raises(nvrtc.NvrtcUnavailable, match="gputensor\\[cuda13\\]"):
            nvrtc.toolkit()
        ok, why = nvrtc.availability()
        assert not ok and "nvidia-cuda-nvrtc + nvidia-cuda-runtime" in why
    finally:
        monkeypatch.undo()
        nvrtc.prefer_major(None)
    assert nvrtc.availability() == (True, "")


def _elementwise_spec(op, dt, compute, out_dt):
    """The kernel spec of ``op`` over array operands of ``dt`` (``_where``'s condition bool)."""
    from gputensor import _dtype as D
    from gputensor.kernels.cuda import elementwise_codegen as cuda_ew

    ins = tuple(D.bool if op.name == "_where" and i == 0 else dt for i in range(op.arity))
    return cuda_ew.KernelSpec(op.name, cuda_ew.effective_expr(op, compute), tuple(op.params),
                              out_dt, compute, ins)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_generated_elementwise_kernels_compile_for_real_gpus(arch: str):
    """The CUDA elementwise renderer's output (run by the emulator elsewhere) also compiles
    with NVRTC: one kernel per op with an expression, over float32, int64 and float16 where
    the op's dtype rule accepts them."""
    import gputensor as gt
    from gputensor._ops.elementwise import _rule_dtypes
    from gputensor.kernels.cuda import elementwise_codegen as cuda_ew
    from gputensor.kernels.registry import OPS

    specs = []
    for op in OPS.values():
        if not op.expr:
            continue
        for dt in (gt.float32, gt.int64, gt.float16):
            try:
                compute, out_dt = _rule_dtypes(op, dt)
            except RuntimeError:
                continue
            specs.append(_elementwise_spec(op, dt, compute, out_dt))
            break  # one dtype per op keeps this test to seconds; the emulator covers the rest
    prog = nvrtc.compile_program(cuda_ew.module_source(specs), "elementwise_all.cu", arch=arch)
    entries = set(re.findall(r"\.entry\s+(\w+)", prog.ptx))
    assert {s.kernel_name for s in specs} <= entries


# Elementwise ops with complex semantics (ops whose expressions order values, like relu's
# backward, reject complex on every backend).
COMPLEX_OPS = ("add", "sub", "mul", "true_divide", "pow", "_lerp", "neg", "abs", "sgn", "_square",
               "_conj", "reciprocal", "_where", "_copy", "nan_to_num", "exp", "exp2", "expm1",
               "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
               "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid",
               "silu", "isnan", "isinf",
               "isfinite", "eq", "ne", "_isclose", "logical_and", "logical_or", "logical_xor",
               "logical_not", "_abs_error", "angle")


@pytest.mark.parametrize("arch", [a for a in ("sm_70", "sm_90")
                                  if not _OK or a in nvrtc.check_archs()])
def test_complex_elementwise_kernels_compile_for_real_gpus(arch: str):
    import gputensor as gt
    from gputensor._ops.elementwise import _rule_dtypes
    from gputensor.kernels.cuda import elementwise_codegen as cuda_ew
    from gputensor.kernels.registry import OPS

    specs = []
    for name in COMPLEX_OPS:
        op = OPS[name]
        for dt in (gt.complex64, gt.complex128):
            compute, out_dt = _rule_dtypes(op, dt)
            specs.append(_elementwise_spec(op, dt, compute, out_dt))
    prog = nvrtc.compile_program(cuda_ew.module_source(specs), "complex_all.cu", arch=arch)
    assert {s.kernel_name for s in specs} <= set(re.findall(r"\.entry\s+(\w+)", prog.ptx))
