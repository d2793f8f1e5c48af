"""gt.lobpcg against PyTorch and SciPy on cpu and emulated cuda: eigenpairs of standard and
generalized problems (both methods, largest and smallest, batches, a preconditioner, the
tracker protocol), the dense-A derivative against torch.lobpcg's and gradcheck, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import gputensor as gt
from tests.helpers import assert_close, requires_torch, torch

pytestmark = requires_torch


def _spd(m: int, seed: int = 0, power: float = 1.5) -> np.ndarray:
    """A symmetric positive-definite matrix with well separated eigenvalues 1..m ** power."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((m, m)))
    return (q * np.arange(1, m + 1, dtype=np.float64) ** power) @ q.T


def _check_pairs(E: gt.Tensor, X: gt.Tensor, A: np.ndarray, B: np.ndarray | None,
                 want: np.ndarray, atol: float) -> None:
    e, x = E.cpu().numpy(), X.cpu().numpy()
    np.testing.assert_allclose(e, want, atol=atol, rtol=atol)
    b = np.eye(A.shape[-1]) if B is None else B
    np.testing.assert_allclose(A @ x, b @ x * e, atol=atol * 100)  # A x = B x e
    np.testing.assert_allclose(x.T @ b @ x, np.eye(x.shape[-1]), atol=atol * 100)


@pytest.mark.parametrize("method", ["ortho", "basic"])
@pytest.mark.parametrize("largest", [True, False])
def test_standard_problem_matches_torch(device: str, method: str, largest: bool) -> None:
    a = _spd(24)
    E, X = gt.lobpcg(gt.tensor(a, device=device), k=3, largest=largest, method=method,
                     tol=1e-10)
    assert E.device == gt.device(device) and tuple(X.shape) == (24, 3)
    want = torch.lobpcg(torch.from_numpy(a), k=3, largest=largest, method=method,
                        tol=1e-10)[0].numpy()
    _check_pairs(E, X, a, None, want, 1e-8)


@pytest.mark.parametrize("method", ["ortho", "basic"])
def test_generalized_problem_matches_scipy(device: str, method: str) -> None:
    a = _spd(18, seed=1)
    rng = np.random.default_rng(2)
    b = rng.standard_normal((18, 18))
    b = b @ b.T / 18 + np.eye(18)
    x0 = rng.standard_normal((18, 2))  # the same start for both: "basic" depends on it
    E, X = gt.lobpcg(gt.tensor(a, device=device), B=gt.tensor(b, device=device),
                     X=gt.tensor(x0, device=device), method=method, tol=1e-10)
    torch_e = torch.lobpcg(torch.from_numpy(a), B=torch.from_numpy(b),
                           X=torch.from_numpy(x0.copy()), method=method, tol=1e-10)[0]
    assert_close(E, torch_e, atol=1e-8, rtol=1e-8)
    if method == "ortho":
        want = scipy.linalg.eigh(a, b, eigvals_only=True)[::-1][:2]
        _check_pairs(E, X, a, b, want, 1e-8)
    # (PyTorch's "basic" method with B != I can return the top pair twice; so does this one)


def test_float32_batch_initial_x_and_preconditioner(device: str) -> None:
    a = np.stack([_spd(15, seed=s) for s in range(3)])
    x0 = np.random.default_rng(4).standard_normal((3, 15, 2))
    g = gt.tensor(a, dtype=gt.float32, device=device)
    E, X = gt.lobpcg(g, X=gt.tensor(x0, dtype=gt.float32, device=device), largest=False)
    assert E.dtype is gt.float32 and tuple(E.shape) == (3, 2) and tuple(X.shape) == (3, 15, 2)
    want = np.linalg.eigvalsh(a)[:, :2]
    np.testing.assert_allclose(E.cpu().numpy(), want, rtol=1e-3)
    # a diagonal (Jacobi) preconditioner: same answer
    ik = gt.tensor(np.diag(1 / np.diag(a[0])), dtype=gt.float64, device=device)
    E0, _ = gt.lobpcg(gt.tensor(a[0], device=device), k=2, iK=ik, largest=False, tol=1e-10)
    np.testing.assert_allclose(E0.cpu().numpy(), want[0], rtol=1e-8)


def test_tracker_sees_the_worker_and_can_stop(device: str) -> None:
    seen = []

    def tracker(worker) -> None:
        seen.append((worker.ivars["istep"], worker.ivars["converged_count"]))
        if worker.ivars["istep"] >= 3:
            worker.bvars["force_stop"] = True

    gt.lobpcg(gt.tensor(_spd(30), device=device), k=2, tracker=tracker, tol=1e-14)
    assert [s for s, _ in seen] == [1, 2, 3]


def test_niter_and_ortho_params(device: str) -> None:
    steps = []
    gt.lobpcg(gt.tensor(_spd(30), device=device), k=2, niter=2, tol=1e-30,
              tracker=lambda w: steps.append(w.ivars["istep"]),
              ortho_iparams={"ortho_i_max": 2}, ortho_bparams={"ortho_use_drop": True})
    assert steps == [1, 2]


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 3])
def test_gradient_matches_torch(device: str, largest: bool, k: int) -> None:
    a = _spd(12)
    w = np.random.default_rng(5).standard_normal((12, 12))
    ta = torch.from_numpy(a).requires_grad_()
    E, X = torch.lobpcg(ta, k=k, largest=largest, tol=1e-12, niter=2000)
    (E.sum() + ((X @ X.T) * torch.from_numpy(w)).sum()).backward()
    ga = gt.tensor(a, device=device, requires_grad=True)
    gE, gX = gt.lobpcg(ga, k=k, largest=largest, tol=1e-12, niter=2000)
    (gE.sum() + ((gX @ gX.T) * gt.tensor(w, device=device)).sum()).backward()
    assert_close(gE, E, atol=1e-10, rtol=1e-10)
    assert_close(ga.grad, ta.grad, atol=1e-8, rtol=1e-8)
    assert_close(ga.grad, ga.grad.mT, atol=1e-12, rtol=1e-12)  # symmetrized


def test_gradcheck(device: str) -> None:
    a = _spd(9, seed=3)
    x0 = gt.tensor(np.random.default_rng(6).standard_normal((9, 2)), device=device)

    def top(A: gt.Tensor) -> gt.Tensor:
        E, X = gt.lobpcg(A, X=x0, tol=1e-13, niter=3000)
        return E + (X @ X.mT).sum(0)[:2]

    assert gt.autograd.gradcheck(top, (gt.tensor(a, device=device, requires_grad=True),),
                                 atol=1e-5, rtol=1e-4)


def test_errors_match_torch(device: str) -> None:
    a = gt.tensor(_spd(6), device=device)
    ta = torch.from_numpy(_spd(6))
    with pytest.raises(ValueError) as want:
        torch.lobpcg(ta, k=3)
    with pytest.raises(ValueError) as got:
        gt.lobpcg(a, k=3)
    assert str(got.value) == str(want.value)
    with pytest.raises(AssertionError, match="A must be square"):
        gt.lobpcg(a[:, :5], k=1)
    b = gt.eye(6, dtype=gt.float64, device=device).requires_grad_()
    E, _ = gt.lobpcg(a, k=1, B=b)
    with pytest.raises(ValueError, match="B != I"):
        E.sum().backward()


def test_sparse_a(device: str) -> None:
    a = _spd(20)
    sparse = gt.tensor(a, device=device).to_sparse()
    E, X = gt.lobpcg(sparse, k=2, tol=1e-10)
    want = torch.lobpcg(torch.from_numpy(a).to_sparse(), k=2, tol=1e-10)[0].numpy()
    _check_pairs(E, X, a, None, want, 1e-8)
