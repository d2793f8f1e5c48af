"""gt.linalg.ldl_factor(_ex) and ldl_solve against PyTorch (LAPACK's sytrf/hetrf format, the
same pivots), on cpu and emulated cuda; the CuPy path's array-op sytrs against LAPACK."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cpu.lapack import _sytrs_lower
from tests.helpers import assert_close, assert_same_error, requires_torch, torch

pytestmark = requires_torch

DTYPES = [gt.float32, gt.float64, gt.complex64, gt.complex128]
TOL = {gt.float32: 1e-4, gt.float64: 1e-10, gt.complex64: 1e-4, gt.complex128: 1e-10}


def _symmetric(shape: tuple, dtype: gt.dtype, hermitian: bool, seed: int = 0) -> np.ndarray:
    """Symmetric (hermitian) matrices whose leading zeros force 2x2 pivots in the first one."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype.is_complex:
        a = a + 1j * rng.standard_normal(shape)
    a = a + (np.conj(np.swapaxes(a, -1, -2)) if hermitian else np.swapaxes(a, -1, -2))
    a[(0,) * (len(shape) - 2) + (0, 0)] = 0
    a[(0,) * (len(shape) - 2) + (1, 1)] = 0
    return a.astype(dtype.np_dtype)


def _supported(device: str, dtype: gt.dtype, hermitian: bool) -> bool:
    return not (device != "cpu" and hermitian and dtype.is_complex)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hermitian", [False, True])
def test_factor_and_solve_match_torch(device: str, dtype: gt.dtype, hermitian: bool) -> None:
    a = _symmetric((3, 6, 6), dtype, hermitian)
    b = _symmetric((3, 6, 6), dtype, False, seed=1)[..., :2]
    ta = torch.from_numpy(a)
    want = torch.linalg.ldl_factor_ex(ta, hermitian=hermitian)
    assert (want.pivots < 0).any()  # the 2x2-pivot path is exercised
    g = gt.tensor(a, device=device)
    if not _supported(device, dtype, hermitian):
        with pytest.raises(RuntimeError, match="hermitian=True flag are not supported with "
                                               "cuSOLVER"):
            gt.linalg.ldl_factor(g, hermitian=True)
        return
    got = gt.linalg.ldl_factor_ex(g, hermitian=hermitian)
    assert type(got).__name__ == "linalg_ldl_factor_ex" and got.pivots.dtype is gt.int32
    assert_close(got.LD, want.LD, atol=TOL[dtype], rtol=TOL[dtype])
    assert got.pivots.tolist() == want.pivots.tolist() and got.info.tolist() == [0, 0, 0]
    x = gt.linalg.ldl_solve(got.LD, got.pivots, gt.tensor(b, device=device),
                            hermitian=hermitian)
    want_x = torch.linalg.ldl_solve(want.LD, want.pivots, torch.from_numpy(b),
                                    hermitian=hermitian)
    assert_close(x, want_x, atol=TOL[dtype] * 10, rtol=TOL[dtype] * 10)
    ld, piv = gt.linalg.ldl_factor(g, hermitian=hermitian)
    assert_close(ld, got.LD, atol=0, rtol=0)


def test_solve_broadcasts_batches(device: str) -> None:
    # (PyTorch 2.13 crashes when B has more batch dims than LD; NumPy is the oracle here.)
    a = _symmetric((2, 4, 4), gt.float64, False)
    b = np.random.default_rng(2).standard_normal((3, 2, 4, 3))
    ld, piv = gt.linalg.ldl_factor(gt.tensor(a, device=device))
    x = gt.linalg.ldl_solve(ld, piv.long(), gt.tensor(b, device=device))
    assert tuple(x.shape) == (3, 2, 4, 3)
    np.testing.assert_allclose(x.cpu().numpy(), np.linalg.solve(a, b), atol=1e-10)
    out = gt.empty(0, dtype=gt.float64, device=device)
    assert gt.linalg.ldl_solve(ld[0], piv[0], gt.tensor(b[0, 0], device=device), out=out) is out


def test_empty_and_singular(device: str) -> None:
    res = gt.linalg.ldl_factor(gt.zeros(2, 0, 0, device=device))
    assert tuple(res.LD.shape) == (2, 0, 0) and tuple(res.pivots.shape) == (2, 0)
    z = gt.zeros(2, 2, dtype=gt.float64, device=device)
    want = torch.linalg.ldl_factor_ex(torch.zeros(2, 2, dtype=torch.float64))
    got = gt.linalg.ldl_factor_ex(z)
    assert got.info.item() == want.info.item() == 1
    assert got.pivots.tolist() == want.pivots.tolist()
    # PyTorch 2.13 reaches an internal assert here; gputensor says what is wrong.
    with pytest.raises(gt.linalg.LinAlgError, match=r"singular: D\[0,0\] is exactly zero"):
        gt.linalg.ldl_factor(z)
    with pytest.raises(gt.linalg.LinAlgError, match=r"\(Batch element 1\)"):
        gt.linalg.ldl_factor_ex(gt.stack([gt.eye(2, dtype=gt.float64, device=device), z]),
                                check_errors=True)


def test_errors_match_torch(device: str) -> None:
    a = _symmetric((3, 3), gt.float64, False)
    ta = torch.from_numpy(a)
    ld, piv = torch.linalg.ldl_factor(ta)
    g = gt.tensor(a, device=device)
    gld, gpiv = gt.linalg.ldl_factor(g)
    cases = [
        (lambda: gt.linalg.ldl_factor(g[0]), lambda: torch.linalg.ldl_factor(ta[0])),
        (lambda: gt.linalg.ldl_factor(g[:2]), lambda: torch.linalg.ldl_factor(ta[:2])),
        (lambda: gt.linalg.ldl_factor(g.long()), lambda: torch.linalg.ldl_factor(ta.long())),
        (lambda: gt.linalg.ldl_factor(g.half()), lambda: torch.linalg.ldl_factor(ta.half())),
        (lambda: gt.linalg.ldl_solve(gld, gpiv, g[:, :1].float()),
         lambda: torch.linalg.ldl_solve(ld, piv, ta[:, :1].float())),
        (lambda: gt.linalg.ldl_solve(gld, gpiv, gt.ones(4, 1, dtype=gt.float64, device=device)),
         lambda: torch.linalg.ldl_solve(ld, piv, torch.ones(4, 1, dtype=torch.float64))),
        (lambda: gt.linalg.ldl_solve(gld, gpiv[:2], g[:, :1]),
         lambda: torch.linalg.ldl_solve(ld, piv[:2], ta[:, :1])),
        (lambda: gt.linalg.ldl_solve(gld, gpiv.float(), g[:, :1]),
         lambda: torch.linalg.ldl_solve(ld, piv.float(), ta[:, :1])),
        (lambda: gt.linalg.ldl_solve(gld, gpiv, g[0]),
         lambda: torch.linalg.ldl_solve(ld, piv, ta[0])),
        (lambda: gt.linalg.ldl_solve(gld[0], gpiv, g), lambda: torch.linalg.ldl_solve(
            ld[0], piv, ta)),
    ]
    for g_call, t_call in cases:
        assert_same_error(g_call, t_call)


def test_array_op_sytrs_matches_lapack() -> None:
    """The CuPy path's solve (sytrs's sweeps as array operations) on NumPy, against LAPACK,
    for every pivot pattern these matrices produce (1x1 and 2x2 blocks, swaps)."""
    for seed in range(6):
        for dtype in (gt.float64, gt.complex128):
            a = _symmetric((7, 7), dtype, False, seed)
            b = np.random.default_rng(seed).standard_normal((7, 3)).astype(dtype.np_dtype)
            ld, piv = gt.linalg.ldl_factor(gt.tensor(a))
            x = _sytrs_lower(np, ld.numpy(), piv.numpy(), b)
            np.testing.assert_allclose(a @ x, b, atol=1e-9)
