"""The compiled batch loop over LAPACK (kernels/cpu/lapack_batched.py: real matrices below 64
rows and columns) against PyTorch, on cpu and the emulated cuda device: many small matrices,
batches with singular / non-positive-definite members (info and the partial results PyTorch
returns), broadcast and non-contiguous inputs, every QR mode and both SVD forms, and a batch
large enough to be split over threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import assert_close, requires_torch, torch

pytestmark = requires_torch

REAL = [gt.float32, gt.float64]
TOL = {gt.float32: 2e-4, gt.float64: 1e-10}


def _rand(shape: tuple, dtype: gt.dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype.np_dtype)


def _spd(shape: tuple, dtype: gt.dtype, seed: int = 0) -> np.ndarray:
    a = _rand(shape, dtype, seed)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype.np_dtype)


def _pair(a: np.ndarray, device: str) -> tuple[gt.Tensor, Any]:
    return gt.tensor(a, device=device), torch.from_numpy(a.copy())


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (37, 5, 5), (2, 3, 8, 8), (63, 63)])
def test_cholesky_solve(device: str, dtype: gt.dtype, shape: tuple) -> None:
    a = _spd(shape, dtype)
    b = _rand((*shape[:-1], 3), dtype, seed=1)
    (ga, ta), (gb, tb) = _pair(a, device), _pair(b, device)
    tol = TOL[dtype]
    for upper in (False, True):
        res, info = gt.linalg.cholesky_ex(ga, upper=upper)
        want = torch.linalg.cholesky_ex(ta, upper=upper)
        assert_close(res, want.L, atol=tol, rtol=tol)
        assert_close(info, want.info)
    assert_close(gt.linalg.solve(ga, gb), torch.linalg.solve(ta, tb), atol=tol, rtol=tol)
    # a vector right-hand side, and B broadcast against a batch of A (and the other way)
    assert_close(gt.linalg.solve(ga, gb[..., 0]), torch.linalg.solve(ta, tb[..., 0]),
                 atol=tol, rtol=tol)
    if len(shape) == 3:
        assert_close(gt.linalg.solve(ga, gb[0]), torch.linalg.solve(ta, tb[0]), atol=tol,
                     rtol=tol)
        assert_close(gt.linalg.solve(ga[0], gb), torch.linalg.solve(ta[0], tb), atol=tol,
                     rtol=tol)


@pytest.mark.parametrize("dtype", REAL)
def test_failures_in_a_batch(device: str, dtype: gt.dtype) -> None:
    """One singular / indefinite matrix among good ones: its info code, the others' results."""
    a = _spd((4, 6, 6), dtype)
    a[2, 3] = 0
    a[2, :, 3] = 0          # row and column 3 zero: singular, and its 4th leading minor is 0
    b = _rand((4, 6, 2), dtype, seed=1)
    (ga, ta), (gb, tb) = _pair(a, device), _pair(b, device)
    tol = TOL[dtype]
    res, info = gt.linalg.cholesky_ex(ga)
    want = torch.linalg.cholesky_ex(ta)
    assert_close(info, want.info)
    assert int(info[2]) == 4
    good = [0, 1, 3]
    assert_close(res[good], want.L[good], atol=tol, rtol=tol)
    assert_close(res[2, :3, :3], want.L[2, :3, :3], atol=tol, rtol=tol)  # the part done
    x, info = gt.linalg.solve_ex(ga, gb)
    want = torch.linalg.solve_ex(ta, tb)
    assert_close(info, want.info)
    assert int(info[2]) > 0
    assert_close(x[good], want.result[good], atol=tol, rtol=tol)
    assert not bool(gt.isfinite(x[2]).all())  # getrs' inf/nan from the zero pivot, as PyTorch
    with pytest.raises(gt.linalg.LinAlgError, match=r"\(Batch element 2\)"):
        gt.linalg.cholesky(ga)
    with pytest.raises(gt.linalg.LinAlgError, match=r"\(Batch element 2\)"):
        gt.linalg.solve(ga, gb)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("shape", [(5, 5), (9, 7, 4), (3, 4, 7), (2, 1, 6)])
def test_qr_modes(device: str, dtype: gt.dtype, shape: tuple) -> None:
    a = _rand(shape, dtype)
    ga, ta = _pair(a, device)
    tol = TOL[dtype]
    for mode in ("reduced", "complete", "r"):
        gq, gr = gt.linalg.qr(ga, mode)
        tq, tr = torch.linalg.qr(ta, mode)
        assert tuple(gq.shape) == tuple(tq.shape) and tuple(gr.shape) == tuple(tr.shape)
        assert_close(gr, tr, atol=tol, rtol=tol)  # Householder QR: the same signs as LAPACK's
        if mode != "r":
            assert_close(gq, tq, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("shape", [(6, 6), (11, 5, 3), (2, 3, 5)])
def test_svd_eigh(device: str, dtype: gt.dtype, shape: tuple) -> None:
    a = _rand(shape, dtype)
    ga, ta = _pair(a, device)
    tol = TOL[dtype]
    k = min(shape[-2:])
    for full in (False, True):
        gu, gs, gvh = gt.linalg.svd(ga, full_matrices=full)
        tu, ts, tvh = torch.linalg.svd(ta, full_matrices=full)
        assert tuple(gu.shape) == tuple(tu.shape) and tuple(gvh.shape) == tuple(tvh.shape)
        assert_close(gs, ts, atol=tol, rtol=tol)
        # the vectors up to sign: compare the rank-one terms u_i v_i^T
        assert_close(gu[..., :k] @ gvh[..., :k, :], tu[..., :k] @ tvh[..., :k, :], atol=tol,
                     rtol=tol)
        eye = gt.eye(gu.shape[-1], dtype=dtype, device=device)
        assert_close(gu.mT @ gu, eye.expand(*gu.shape[:-2], *eye.shape), atol=tol, rtol=tol)
    assert_close(gt.linalg.svdvals(ga), torch.linalg.svdvals(ta), atol=tol, rtol=tol)
    if shape[-1] == shape[-2]:
        for uplo in ("L", "U"):
            gw, gv = gt.linalg.eigh(ga, uplo)  # one triangle read: a is not symmetric
            tw, tv = torch.linalg.eigh(ta, uplo)
            assert_close(gw, tw, atol=tol, rtol=tol)
            assert_close(gv * gw.unsqueeze(-2) @ gv.mT, tv * tw.unsqueeze(-2) @ tv.mT,
                         atol=10 * tol, rtol=10 * tol)
            assert_close(gt.linalg.eigvalsh(ga, uplo), torch.linalg.eigvalsh(ta, uplo),
                         atol=tol, rtol=tol)


def test_strided_and_broadcast_inputs(device: str) -> None:
    """Transposed, sliced and expanded (stride 0) batches read as PyTorch reads them."""
    a = _spd((6, 7, 7), gt.float64)
    ga, ta = _pair(a, device)
    tol = TOL[gt.float64]
    for g, t in ((ga.mT, ta.mT), (ga[::2], ta[::2]), (ga[0].expand(4, 7, 7), ta[0].expand(4, 7, 7)),
                 (ga[:, 1:, 1:], ta[:, 1:, 1:])):
        assert_close(gt.linalg.cholesky(g), torch.linalg.cholesky(t), atol=tol, rtol=tol)
        assert_close(gt.linalg.qr(g).R, torch.linalg.qr(t).R, atol=tol, rtol=tol)
        assert_close(gt.linalg.eigvalsh(g), torch.linalg.eigvalsh(t), atol=tol, rtol=tol)
        assert_close(gt.linalg.svdvals(g), torch.linalg.svdvals(t), atol=tol, rtol=tol)


def test_large_batch_split_over_threads() -> None:
    """A batch with enough work to be split over the thread budget gives the serial results."""
    from gputensor.kernels.cpu import lapack_batched as lb
    a = _rand((4096, 16, 16), gt.float64)
    assert lb._parts(a.shape[0], 22 * 16 ** 3, 16) > 1 or gt.get_num_threads() < 2
    ga, ta = _pair(a, "cpu")
    gu, gs, gvh = gt.linalg.svd(ga, full_matrices=False)
    tu, ts, tvh = torch.linalg.svd(ta, full_matrices=False)
    assert_close(gs, ts, atol=1e-10, rtol=1e-10)
    assert_close(gu @ gvh, tu @ tvh, atol=1e-10, rtol=1e-10)
    gq, gr = gt.linalg.qr(ga)
    assert_close(gr, torch.linalg.qr(ta).R, atol=1e-10, rtol=1e-10)
