"""kernels/cpu/numpy_blas.py (NumPy's BLAS gemm called from Numba) and the compiled time loops
of the CPU recurrences that use it (kernels/cpu/rnn.py), against np.matmul and against the
Python loop they replace."""

from __future__ import annotations

import os

import numpy as np
import pytest
from numba import njit

import gputensor as gt
from gputensor._ops import rnn as rnn_ops
from gputensor.kernels.cpu import numpy_blas
from gputensor.kernels.cpu import rnn as cpu_rnn

torch = pytest.importorskip("torch")


def _numpy_vendors_openblas() -> bool:
    """NumPy's PyPI wheels (what CI installs) carry their own OpenBLAS, inside NumPy's tree."""
    from threadpoolctl import threadpool_info

    root = os.path.dirname(os.path.dirname(np.__file__))
    return any(i.get("internal_api") == "openblas" and i["filepath"].startswith(root)
               and "numpy" in i["filepath"] for i in threadpool_info())


def test_numpy_blas_is_found_where_numpy_vendors_openblas() -> None:
    assert numpy_blas.available() == _numpy_vendors_openblas()


@njit(cache=False)
def _call(ta, tb, a, b, c):  # noqa: ANN001, ANN202
    m, n = c.shape
    k = a.shape[0] if ta == numpy_blas.TRANS else a.shape[1]
    numpy_blas.gemm(ta, tb, m, n, k, a, a.shape[1], b, b.shape[1], c, n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_matches_numpy(dtype: type, ta: bool, tb: bool) -> None:
    if not numpy_blas.available():
        pytest.fail("NumPy's BLAS entry points were not found")
    rng = np.random.default_rng(0)
    m, n, k = 5, 7, 3
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype)   # beta is 0: the NaNs must not leak
    flag = {False: numpy_blas.NO_TRANS, True: numpy_blas.TRANS}
    _call(flag[ta], flag[tb], a, b, c)
    expect = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(c, expect, rtol=1e-6 if dtype == np.float32 else 1e-14)


MODES = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]


def _run(mode: str, reverse: bool, dtype: gt.dtype) -> list[np.ndarray]:
    """Outputs and input gradients of one fused recurrence on the CPU."""
    rng = np.random.default_rng(1)
    gates = rnn_ops.GATES[mode]

    def leaf(*shape: int) -> gt.Tensor:
        return gt.tensor(rng.uniform(-1, 1, shape), dtype=dtype, requires_grad=True)

    xg, h0, c0 = leaf(7, 3, gates * 6), leaf(3, 6), leaf(3, 6)
    w_hh, b_hh = leaf(gates * 6, 6), leaf(gates * 6)
    c = c0 if mode == "LSTM" else None
    b = b_hh if mode == "GRU" else None
    inputs = [t for t in (xg, h0, c, w_hh, b) if t is not None]
    res = [r for r in rnn_ops.recurrence(mode, xg, h0, c, w_hh, b, reverse) if r is not None]
    loss = sum((r * (k + 1.5)).square().sum() for k, r in enumerate(res))
    grads = gt.autograd.grad(loss, inputs)
    return [t.detach().numpy() for t in (*res, *grads)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
def test_compiled_time_loop_equals_the_python_loop(mode: str, reverse: bool, dtype: gt.dtype,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if not numpy_blas.available():
        pytest.fail("NumPy's BLAS entry points were not found")
    compiled = _run(mode, reverse, dtype)
    monkeypatch.setattr(cpu_rnn, "_compiled_loop", lambda *arrays: False)
    python = _run(mode, reverse, dtype)
    tol = 2e-6 if dtype == gt.float32 else 1e-13
    for x, y in zip(compiled, python, strict=True):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def test_compiled_time_loop_is_the_one_that_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("_lstm_loop", "_lstm_loop_backward"):
        fn = getattr(cpu_rnn, name)
        monkeypatch.setattr(cpu_rnn, name,
                            lambda *a, _fn=fn, _name=name: (calls.append(_name), _fn(*a))[1])
    m = gt.nn.LSTM(4, 8)
    m(gt.randn(5, 2, 4))[0].sum().backward()
    assert calls == (["_lstm_loop", "_lstm_loop_backward"] if numpy_blas.available() else [])
