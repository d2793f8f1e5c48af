"""Comparison helpers: against PyTorch (CPU build, optional) and against NumPy.

``helper_test_op`` is modelled on tinygrad's: build inputs from shapes, run the PyTorch and the
gputensor function on the same values, and compare values, dtypes and shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import gputensor as gt

try:
    import torch
except ImportError:  # PyTorch is an optional oracle; its tests skip without it.
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch (CPU) oracle not installed")

FLOAT_DTYPES = [gt.float32, gt.float64]
INT_DTYPES = [gt.int32, gt.int64]
ALL_DTYPES = [gt.uint8, gt.int8, gt.int16, gt.int32, gt.int64, gt.float16, gt.bfloat16,
              gt.float32, gt.float64, gt.complex64, gt.complex128, gt.bool]
TOLERANCE = {gt.float16: (1e-2, 1e-2), gt.bfloat16: (5e-2, 5e-2), gt.float32: (1e-5, 1e-5),
             gt.float64: (1e-10, 1e-10), gt.complex64: (1e-5, 1e-5),
             gt.complex128: (1e-10, 1e-10)}


def torch_dtype(dt: gt.dtype) -> Any:
    return getattr(torch, dt.name)


def gt_dtype(tdt: Any) -> gt.dtype:
    return getattr(gt, str(tdt).removeprefix("torch."))


def random_array(shape: Sequence[int], dtype: gt.dtype = gt.float32, low: float = -2.0,
                 high: float = 2.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype is gt.bool:
        return rng.random(shape) > 0.5
    if dtype.category == 1:  # integral
        lo = max(int(low), 0) if not dtype.is_signed else int(low)
        return rng.integers(lo, max(int(high), lo + 1) + 1, size=shape).astype(dtype.np_dtype)
    vals = rng.uniform(low, high, size=shape)
    if dtype.is_complex:
        vals = vals + 1j * rng.uniform(low, high, size=shape)
    return vals.astype(dtype.np_dtype)


def noncontiguous(t: gt.Tensor) -> gt.Tensor:
    """The same values as ``t`` in a non-contiguous layout (every other element of a buffer)."""
    if t.dim() == 0:
        return t
    shape = list(t.shape)
    big = gt.zeros(*shape[:-1], shape[-1] * 2, dtype=t.dtype, device=t.device)
    view = big[..., ::2]
    view.copy_(t)
    assert not view.is_contiguous() or t.numel() <= 1
    return view


def to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, gt.Tensor):
        arr = x.detach().cpu().numpy()
    elif torch is not None and isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:
            return x.detach().float().numpy()
        arr = x.detach().cpu().numpy()
    else:
        arr = np.asarray(x)
    if arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)
    return arr


def assert_close(actual: Any, expected: Any, atol: float | None = None, rtol: float | None = None,
                 check_dtype: bool = True, equal_nan: bool = True) -> None:
    """Compare a gputensor result with a PyTorch/NumPy one: shape, dtype and values."""
    if isinstance(expected, tuple | list) and not isinstance(actual, gt.Tensor):
        assert len(actual) == len(expected), f"{len(actual)} results, expected {len(expected)}"
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, atol, rtol, check_dtype, equal_nan)
        return
    if isinstance(actual, gt.Tensor):
        if check_dtype and torch is not None and isinstance(expected, torch.Tensor):
            assert actual.dtype.name == str(expected.dtype).removeprefix("torch."), \
                f"dtype {actual.dtype} != {expected.dtype}"
        if check_dtype and isinstance(expected, np.ndarray):
            assert actual.dtype.np_dtype == expected.dtype, \
                f"dtype {actual.dtype} != numpy {expected.dtype}"
        exp_shape = tuple(expected.shape) if hasattr(expected, "shape") else ()
        assert tuple(actual.shape) == exp_shape, f"shape {tuple(actual.shape)} != {exp_shape}"
        dt = actual.dtype
    else:
        dt = None
    a, e = to_numpy(actual), to_numpy(expected)
    default = TOLERANCE.get(dt, (0, 0)) if dt is not None else (1e-6, 1e-6)
    atol = default[0] if atol is None else atol
    rtol = default[1] if rtol is None else rtol
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e)
    else:
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, equal_nan=equal_nan)


def helper_test_op(shapes: Sequence[Sequence[int]], torch_fn: Callable,
                   gt_fn: Callable | None = None, *, device: str = "cpu",
                   dtype: gt.dtype = gt.float32, low: float = -2.0, high: float = 2.0,
                   atol: float | None = None, rtol: float | None = None,
                   noncontig: bool = False, check_dtype: bool = True) -> None:
    """Run torch_fn and gt_fn (default: torch_fn) on the same random inputs and compare."""
    if torch is None:
        pytest.skip("PyTorch (CPU) oracle not installed")
    gt_fn = gt_fn or torch_fn
    arrays = [random_array(s, dtype, low, high, seed=i) for i, s in enumerate(shapes)]
    t_in = [torch.from_numpy(np.array(a, copy=True)) if dtype is not gt.bfloat16
            else torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16) for a in arrays]
    g_in = [gt.tensor(a, dtype=dtype, device=device) for a in arrays]
    if noncontig:
        g_in = [noncontiguous(g) for g in g_in]
    expected = torch_fn(*t_in)
    actual = gt_fn(*g_in)
    if isinstance(actual, gt.Tensor):
        assert actual.device == gt.device(device)
    assert_close(actual, expected, atol, rtol, check_dtype)


def numpy_test_op(shapes: Sequence[Sequence[int]], np_fn: Callable, gt_fn: Callable, *,
                  device: str = "cpu", dtype: gt.dtype = gt.float32, low: float = -2.0,
                  high: float = 2.0, atol: float | None = None, rtol: float | None = None,
                  check_dtype: bool = False) -> None:
    """Like CuPy's numpy_cupy_allclose: the same inputs through NumPy and gputensor."""
    arrays = [random_array(s, dtype, low, high, seed=i) for i, s in enumerate(shapes)]
    expected = np_fn(*arrays)
    actual = gt_fn(*[gt.tensor(a, dtype=dtype, device=device) for a in arrays])
    assert_close(actual, expected, atol, rtol, check_dtype)


# A kernel whose result comes from an included header: a runtime whose compile cache keys on the
# source text alone returns the old value after the header changes.
HEADER_PROBE = ('#include "probe.cuh"\n'
                'extern "C" __global__ void probe(long long* out) { out[0] = PROBE_VALUE; }\n')


def header_probe_results(rt: Any, tmp_path: Any, values: Sequence[int] = (1, 2)) -> list[int]:
    """Write ``probe.cuh`` defining each of ``values`` in turn, compile HEADER_PROBE on the
    device runtime ``rt`` with ``-I tmp_path``, launch it and read back what it returned."""
    from gputensor.kernels.cuda.device import NVRTC_OPTIONS

    got = []
    for value in values:
        (tmp_path / "probe.cuh").write_text(f"#define PROBE_VALUE {value}\n")
        m = rt.compile(HEADER_PROBE, "probe", options=(*NVRTC_OPTIONS, f"-I{tmp_path}"))
        p = rt.alloc(8)
        rt.launch(rt.get_kernel(m, "probe"), 1, 1, 0, [p])
        out = np.zeros(1, np.int64)
        rt.memcpy_dtoh(out, p)
        rt.free(p)
        got.append(int(out[0]))
    return got


ASYNC_NOTE = "\n(raised asynchronously"  # kernels/cuda/errors.py's suffix of a deferred error


def synced(value: Any = None) -> Any:
    """``value``, once the CUDA work queued so far has run: a kernel error (a bad index) raises
    here, as on a GPU it raises at the next synchronising call, not at the op."""
    if gt.cuda.is_available() and gt.cuda.is_initialized():
        gt.cuda.synchronize()
    return value


def error_message(e: BaseException) -> str:
    """An exception's message without the note a deferred CUDA kernel error carries."""
    return str(e).split(ASYNC_NOTE)[0]


def assert_same_error(g_call: Callable[[], Any], t_call: Callable[[], Any]) -> None:
    """gputensor raises PyTorch's exception type with PyTorch's message (its ``torch.`` names
    read ``gputensor.``); a CUDA kernel's error counts at the next synchronising call."""
    with pytest.raises(Exception) as want:
        t_call()
    with pytest.raises(type(want.value)) as got:
        synced(g_call())
    assert type(got.value) is type(want.value)
    assert error_message(got.value) == str(want.value).replace("torch.", "gputensor.")
