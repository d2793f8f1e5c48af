"""Batched products are strided-batched BLAS calls (one call for contiguous or broadcast
batches), 16-bit floats take the BLAS path, and TF32 is used exactly when
``gt.backends.cuda.matmul.allow_tf32`` / ``gt.set_float32_matmul_precision`` say so."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cuda import device as kdevice
from gputensor.kernels.cuda.ops.linalg import _batch_runs

cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime (set "
                          "GPUTENSOR_CUDA_EMULATOR=1 for the emulator)")


@pytest.fixture
def gemm_calls(monkeypatch):
    """The keyword arguments of every prepared gemm each product runs (the plans are rebuilt
    through a spy of the runtime's ``gemm_plan``; on either runtime, ``rt.gemm`` is not on the
    path a product takes)."""
    from gputensor.kernels.cuda.ops import linalg

    rt = kdevice.runtime()
    calls = []
    real = rt.gemm_plan

    def spy(*args, **kw):
        run = real(*args, **kw)

        def counted(*a):
            calls.append(kw)
            return run(*a)
        return counted
    monkeypatch.setattr(rt, "gemm_plan", spy)
    monkeypatch.setattr(linalg, "_PLANS", {})
    return calls


@pytest.fixture(autouse=True)
def _precision():
    yield
    gt.set_float32_matmul_precision("highest")


def test_batch_runs_merge_collapsible_dims() -> None:
    assert _batch_runs((4, 3), (60, 20), (30, 10), (24, 8)) == ((1, 1), 12, (20, 10, 8))
    assert _batch_runs((4, 3), (0, 0), (30, 10), (24, 8)) == ((1, 1), 12, (0, 10, 8))
    # a's batch dim 0 is broadcast but dim 1 is not: loop over dim 0
    assert _batch_runs((4, 3), (0, 20), (30, 10), (24, 8)) == ((4, 1), 3, (20, 10, 8))
    assert _batch_runs((1, 5, 1), (9, 9, 9), (1, 2, 3), (4, 4, 4)) == ((1, 1, 1), 5, (9, 2, 4))
    assert _batch_runs((), ) == ((), 1, ())


@cuda
@pytest.mark.parametrize("shape_a,shape_b", [((6, 3, 4), (6, 4, 5)), ((2, 3, 3, 4), (4, 5)),
                                             ((5, 4), (2, 3, 4, 2))])
def test_batched_matmul_is_one_blas_call(gemm_calls, shape_a, shape_b) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    got = (gt.tensor(a, device="cuda") @ gt.tensor(b, device="cuda")).cpu().numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    assert len(gemm_calls) == 1  # (a batch folded into the rows of one product counts too)


@cuda
def test_non_collapsible_batches_are_copied_into_one_call(gemm_calls) -> None:
    """A batch whose dims do not merge into one stride is materialised first, as PyTorch's
    matmul does: one copy and one strided-batched call, never a loop of calls."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 2, 5))
    b = rng.standard_normal((4, 1, 5, 2))
    ta = gt.tensor(a, device="cuda").transpose(0, 1)  # batch strides no longer collapse
    got = (ta @ gt.tensor(b, device="cuda")).cpu().numpy()
    np.testing.assert_allclose(got, a.transpose(1, 0, 2, 3) @ b, rtol=1e-12)
    assert [c["batch"] for c in gemm_calls] == [12]


@cuda
def test_attention_products_of_transposed_head_views_are_one_call(gemm_calls) -> None:
    """q @ k^T and att @ v of a transformer's (B, T, H, hs) -> (B, H, T, hs) views."""
    b_, t, h, hs = 3, 5, 2, 4
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((b_, t, 3 * h * hs))
    x = gt.tensor(qkv, device="cuda")
    q, k, v = (y.view(b_, t, h, hs).transpose(1, 2) for y in x.split(h * hs, dim=2))
    att = q @ k.transpose(-2, -1)
    out = att @ v
    nq, nk, nv = (qkv[..., i * h * hs:(i + 1) * h * hs].reshape(b_, t, h, hs).transpose(0, 2, 1, 3)
                  for i in range(3))
    want_att = nq @ nk.transpose(0, 1, 3, 2)
    np.testing.assert_allclose(att.cpu().numpy(), want_att, rtol=1e-12)
    np.testing.assert_allclose(out.cpu().numpy(), want_att @ nv, rtol=1e-12)
    assert [c["batch"] for c in gemm_calls] == [b_ * h, b_ * h]


@cuda
def test_partly_broadcast_batches_are_expanded_into_one_call(gemm_calls) -> None:
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 1, 2, 4)), rng.standard_normal((5, 4, 3))
    got = (gt.tensor(a, device="cuda") @ gt.tensor(b, device="cuda")).cpu().numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    assert [c["batch"] for c in gemm_calls] == [15]


@cuda
def test_a_plan_never_reads_past_an_operand_buffer() -> None:
    """The prepared call's bounds check: a view claiming more than its buffer holds is refused
    before cuBLAS sees it."""
    from gputensor._tensor import Tensor
    from gputensor.kernels.cuda.ops.linalg import _operand_ptr

    x = gt.zeros(4, 4, device="cuda")
    over = Tensor._make(x._storage, x._dtype, (4, 4), (4, 1), 8)
    assert _operand_ptr(x, 64) == x.data_ptr()
    with pytest.raises(RuntimeError, match="spans 64 bytes from byte offset 32, past its "
                                           "64-byte buffer"):
        _operand_ptr(over, 64)


@cuda
@pytest.mark.parametrize("dtype", [gt.float16, gt.bfloat16])
def test_half_precision_products_use_blas_with_float32_accumulation(gemm_calls, dtype) -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 8, 64)), rng.standard_normal((4, 64, 8))
    ta, tb = (gt.tensor(x, dtype=dtype, device="cuda") for x in (a, b))
    got = gt.bmm(ta, tb).float().cpu().numpy()
    want = ta.float().cpu().numpy() @ tb.float().cpu().numpy()  # float32 sums of the inputs
    np.testing.assert_allclose(got, want, rtol=2e-2 if dtype is gt.bfloat16 else 2e-3,
                               atol=5e-2)
    assert len(gemm_calls) == 1 and gemm_calls[0]["batch"] == 4


@cuda
def test_tf32_follows_the_matmul_precision(gemm_calls) -> None:
    x = gt.randn(8, 8, device="cuda")
    assert gt.get_float32_matmul_precision() == "highest"
    assert not gt.backends.cuda.matmul.allow_tf32
    x @ x
    gt.set_float32_matmul_precision("high")
    assert gt.backends.cuda.matmul.allow_tf32
    x @ x
    gt.backends.cuda.matmul.allow_tf32 = False
    assert gt.get_float32_matmul_precision() == "highest"
    x @ x
    gt.set_float32_matmul_precision("medium")
    x.double() @ x.double()  # never for float64
    assert [c["allow_tf32"] for c in gemm_calls] == [False, True, False, False]


def test_matmul_precision_errors_as_pytorch() -> None:
    with pytest.raises(RuntimeError, match="Invalid float32 matmul precision"):
        gt.set_float32_matmul_precision("low")
    with pytest.raises(AttributeError, match="Unknown attribute allow_fp8"):
        gt.backends.cuda.matmul.allow_fp8 = True
