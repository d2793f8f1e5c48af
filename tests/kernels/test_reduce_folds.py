"""The folds of kernels/reduce.py: one record per reduction drives the CPU kernels, the CUDA op
structs and the frontends' result dtypes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import gputensor as gt
from gputensor import _dtype as D
from gputensor.kernels import reduce as R
from gputensor.kernels.cpu import reduce as cpu_reduce
from gputensor.kernels.cuda import fold_codegen
from gputensor.kernels.cuda.device import CudaSource
from gputensor.kernels.cuda.ops import reduce as cuda_reduce

REDUCE_CU = Path(cuda_reduce.__file__).resolve().parents[1] / "reduce.cu"


def test_every_fold_is_built_by_both_backends_from_its_record() -> None:
    for name, fold in R.REDUCTIONS.items():
        assert cpu_reduce.FOLDS[name] is fold
        k = cuda_reduce.KERNELS[name]
        assert k.fold is fold and k.dtypes == fold.dtypes and k.out is fold.out
        source = k.src.source()
        for d in fold.dtypes:
            assert fold_codegen.fold_struct(fold, d) in source, (name, d)
            assert f"red_{name}_{fold_codegen.SHORT[d]}" in k.src.kernel_names


def test_no_reduction_is_written_twice() -> None:
    """reduce.cu keeps only the multi-field algorithms; the CPU's own folds are the second
    passes of its two-pass var/std and logsumexp."""
    text = REDUCE_CU.read_text()
    for gone in ("SumOp", "SelectOp", "NormOp"):
        assert gone not in text
    assert set(cpu_reduce.FOLDS) - set(R.REDUCTIONS) == set(cpu_reduce.CENTERED)
    assert set(cuda_reduce.KERNELS) - set(R.REDUCTIONS) == {"argmax", "argmin", "var",
                                                            "logsumexp"}


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown accumulator rule 'wide'"):
        R.Reduction("bad", "x", "a + b", 0, acc="wide")
    bad = R.Reduction("bad", "x", "a @ b", 0, dtypes=(D.float32,))
    with pytest.raises(ValueError, match="unsupported operator MatMult"):
        fold_codegen.fold_struct(bad, D.float32)
    with pytest.raises(ValueError, match="unknown name 'y'"):
        fold_codegen.fold_struct(R.Reduction("bad2", "y", "a + b", 0), D.float32)


@pytest.mark.parametrize(("fold", "dtype", "acc", "element"), [
    ("sum", D.float16, "float", "float"),
    ("sum", D.int8, "long long", "long long"),
    ("sum", D.complex64, "gt::complex<float>", "gt::complex<float>"),
    ("all", D.float32, "long long", "float"),
    ("norm2", D.complex64, "float", "gt::complex<float>"),
    ("normp", D.float32, "double", "double"),
    ("normp", D.complex64, "double", "gt::complex<double>"),
    ("amax", D.bfloat16, "float", "float"),
])
def test_cuda_accumulator_types_follow_the_rule(fold: str, dtype: D.dtype, acc: str,
                                                element: str) -> None:
    f = R.REDUCTIONS[fold]
    assert fold_codegen.accumulator_ctype(f, dtype) == acc
    assert fold_codegen.element_ctype(f, dtype) == element


@pytest.mark.parametrize(("name", "dtype"), [
    (name, dtype) for name in ("sum", "prod", "all", "any", "count_nonzero", "nansum")
    for dtype in ("bool", "uint8", "int32", "float16", "float64")
    if name != "nansum" or dtype.startswith("float")])  # PyTorch's nansum takes floats only
def test_frontends_take_result_dtypes_from_the_records(device: str, name: str,
                                                       dtype: str) -> None:
    data = np.array([[0, 1, 2], [3, 0, 1]])
    got = getattr(gt, name)(gt.tensor(data, dtype=getattr(gt, dtype), device=device))
    want = getattr(torch, name)(torch.tensor(data, dtype=getattr(torch, dtype)))
    assert got.dtype == R.REDUCTIONS[name].out(getattr(gt, dtype))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


def test_a_new_fold_needs_only_its_record(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold declared once runs on both backends: the CPU pastes it into its templates, CUDA
    renders its op struct (compiled here into a module of its own)."""
    fold = R.Reduction("rms_plus_p", "abs2(x)", "a + b", 0, finalize="sqrt(a / n) + p",
                       acc="real", out=R.real, dtypes=(D.float32, D.complex64))
    monkeypatch.setitem(cpu_reduce.FOLDS, fold.name, fold)
    kernels = cuda_reduce.fold_kernels(fold, CudaSource("reduce.cu",
                                                        code=REDUCE_CU.read_text()))
    cuda_reduce.declare(fold.name, kernels)
    monkeypatch.setitem(cuda_reduce.KERNELS, fold.name, kernels)
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.complex64):
        data = (rng.standard_normal((5, 300)) + 1j * rng.standard_normal((5, 300))).astype(dtype) \
            if dtype is np.complex64 else rng.standard_normal((5, 300)).astype(dtype)
        x = gt.tensor(data, device=device)
        out = gt.empty(5, dtype=x.dtype.to_real(), device=device)
        if device == "cpu":
            cpu_reduce._reduce_into(fold.name, out, x, (1,), 0.25)
        else:
            with gt.cuda.device_of(x):  # a backend kernel called directly: no op's guard
                cuda_reduce.reduce(fold.name, x, (1,), out, p=0.25)
        want = np.sqrt((np.abs(data.astype(np.complex128)) ** 2).mean(axis=1)) + 0.25
        np.testing.assert_allclose(out.cpu().numpy(), want, rtol=2e-6)


@pytest.mark.parametrize("name", ["sum", "nansum", "prod", "mean", "amax", "all"])
def test_full_form_gives_the_general_kernels_bits(name: str) -> None:
    """``x.sum()``'s path (the kernel's ``full`` form, its runner found by the tensor's own
    shape, strides and dtype) computes exactly what the general kernel does, and declines
    (None) what that runner cannot serve."""
    full = gt.kernels.registry.BACKENDS["cpu", "strided"].kernel(name).full
    rng = np.random.default_rng(5)
    served = 0
    for shape in [(1,), (7,), (16,), (3, 5), (100,), (513,), (2047,), (2048,), (2049,),
                  (40, 70), (3, 1, 4, 5)]:
        for dtype in (np.float32, np.float64):
            x = gt.tensor((rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
                           ).astype(dtype))
            for view in (x, x.t() if x.dim() == 2 else x, x[..., ::2]):
                want = gt.empty((), dtype=gt.bool if name == "all" else view.dtype)
                cpu_reduce._reduce_into(name, want, view, tuple(range(view.dim())))
                got = full(view)
                if got is None:   # a plan that cannot view it in place: the general kernel
                    assert not view.is_contiguous()
                    continue
                served += 1
                assert got.shape == () and got.numpy().tobytes() == want.numpy().tobytes()
    assert served >= 42   # every contiguous view, some strided ones
    assert full(gt.ones(4, dtype=gt.float16)) is None          # computes in float32 copies
    assert full(gt.ones(0)) is None and full(gt.ones(1 << 19)) is None   # empty, threaded


def test_full_reductions_stay_visible_to_the_profiler() -> None:
    a = gt.randn(16)
    a.sum(), a.mean()
    with gt.profiler.profile() as prof:
        a.sum()
        a.mean()
    keys = {r.key for r in prof.key_averages()}
    assert {"sum", "mean"} <= keys


def test_large_reductions_do_not_change_with_the_thread_count() -> None:
    """The block layout is planned for the pool's size; set_num_threads(1) runs the same
    blocks serially (no prange on one thread), so every bit of the result is the same."""
    import numba

    rng = np.random.default_rng(0)
    x = gt.from_numpy(rng.random(1 << 20, dtype=np.float32))
    m = gt.from_numpy(rng.random((2048, 1024), dtype=np.float32))

    def results():
        return [x.sum().numpy(), m.sum(0).numpy(), m.sum(1).numpy(), m.std(0).numpy(),
                m.amax(1).numpy()]
    before = gt.get_num_threads()
    try:
        gt.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = results()
        gt.set_num_threads(1)
        one = results()
    finally:
        gt.set_num_threads(before)
    for a, b in zip(many, one, strict=True):
        np.testing.assert_array_equal(a, b)
