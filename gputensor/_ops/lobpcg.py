"""torch.lobpcg: the k largest (or smallest) eigenpairs of the symmetric positive-definite
generalized eigenproblem A X = B X E by LOBPCG [Knyazev2001], in PyTorch's two variants:
"basic" (Rayleigh-Ritz with a Cholesky-based B-orthonormalization of the search basis) and
"ortho" (the default: [DuerschEtal2018]'s robust scheme, which keeps the basis [X, P, W]
B-orthonormal by repeated SVQB projections [StathopoulosWu2002]).

Everything is composed from gputensor ops (eigh, cholesky, triangular solves, QR, products), so
it runs on every device. The worker (``LOBPCG``) keeps PyTorch's state names (``ivars``,
``fvars``, ``bvars``, ``tvars``, ``X``, ``E``, ``R``, ``S``) because a ``tracker`` callback
receives it each iteration and may read them (or stop the run with
``worker.bvars["force_stop"] = True``).

Derivative (dense A only, as in PyTorch): A is symmetrized, (A + A^T) / 2, and the private op
``_lobpcg_dense`` carries the symmetric-eigenproblem backward: the usual formula when the k
eigenvectors span the whole space, else the partial-eigenspace one, which solves the
Sylvester equation on the orthogonal complement of span(U) through the characteristic
polynomial of D evaluated at A (Hu & Cheng 2006). B != I has no derivative (ValueError in
backward, as in PyTorch).
"""

from __future__ import annotations

from collections.abc import Callable

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.autograd.forward_ad import _state as _fw_state
from gputensor.autograd.forward_ad import tangent_of

from ._core import op


# -- small linear-algebra helpers (PyTorch's torch._linalg_utils) ------------------------------
def _mm(A: Tensor | None, X: Tensor) -> Tensor:
    """A X, with A = None the identity (A may be sparse)."""
    if A is None:
        return X
    if A.is_sparse:
        import gputensor as gt
        return gt.sparse.mm(A, X)
    return A @ X


def _qform(A: Tensor | None, S: Tensor) -> Tensor:
    """S^T A S."""
    return S.mT @ _mm(A, S)


def _symeig(M: Tensor, largest: bool = False) -> tuple[Tensor, Tensor]:
    """Eigenpairs of a symmetric matrix (upper triangle), ascending or, if ``largest``,
    descending."""
    import gputensor as gt
    E, Z = gt.linalg.eigh(M, UPLO="U")
    if largest:
        E, Z = E.flip(-1), Z.flip(-1)
    return E, Z


def _floating(dt: D.dtype) -> D.dtype:
    return dt if dt in (D.float16, D.float32, D.float64) else D.float32


class LOBPCG:
    """One LOBPCG run: ``run()`` iterates ``update()`` until k pairs converged, ``niter``
    steps were taken or a tracker set ``bvars["force_stop"]``."""

    def __init__(self, A: Tensor | None, B: Tensor | None, X: Tensor, iK: Tensor | None,
                 iparams: dict[str, int], fparams: dict[str, float],
                 bparams: dict[str, bool], method: str, tracker: Callable | None) -> None:
        import gputensor as gt
        self.A, self.B, self.iK = A, B, iK
        self.iparams, self.fparams, self.bparams = iparams, fparams, bparams
        self.method, self.tracker = method, tracker
        m, n = iparams["m"], iparams["n"]
        self.X = X
        self.E = gt.zeros((n,), dtype=X.dtype, device=X.device)
        self.R = gt.zeros((m, n), dtype=X.dtype, device=X.device)
        self.S = gt.zeros((m, 3 * n), dtype=X.dtype, device=X.device)
        self.tvars: dict[str, Tensor] = {}
        self.ivars: dict[str, int] = {"istep": 0}
        self.fvars: dict[str, float] = {"_": 0.0}
        self.bvars: dict[str, bool] = {"_": False}

    def __str__(self) -> str:
        fields = ("iparams", "fparams", "bparams", "ivars", "fvars", "bvars", "tvars", "A", "B",
                  "iK", "X", "E")
        return "LOBPCG:\n" + "".join(f"  {f}={getattr(self, f)}\n" for f in fields)

    # -- the iteration ------------------------------------------------------------------------
    def run(self) -> None:
        self.update()
        self.call_tracker()
        while not self.stop_iteration():
            self.update()
            self.call_tracker()

    def call_tracker(self) -> None:
        if self.tracker is not None:
            self.tracker(self)

    def stop_iteration(self) -> bool:
        return (self.bvars.get("force_stop", False) or self.ivars["iterations_left"] == 0
                or self.ivars["converged_count"] >= self.iparams["k"])

    def update(self) -> None:
        if self.ivars["istep"] == 0:
            x_norm = float(self.X.norm())
            if x_norm == 0:   # PyTorch's error type (its 0.0 ** -1), with what went wrong
                raise ZeroDivisionError("lobpcg(): the initial X is zero (its norm is 0), so "
                                        "the iteration has no direction to start from")
            self.fvars["X_norm"] = x_norm
            self.fvars["A_norm"] = float(_mm(self.A, self.X).norm()) / x_norm
            self.fvars["B_norm"] = float(_mm(self.B, self.X).norm()) / x_norm
            self.ivars["iterations_left"] = self.iparams["niter"]
            self.ivars["converged_count"] = 0
            self.ivars["converged_end"] = 0
        if self.method == "ortho":
            self._update_ortho()
        else:
            self._update_basic()
        self.ivars["iterations_left"] -= 1
        self.ivars["istep"] += 1

    def update_residual(self) -> None:
        self.R = _mm(self.A, self.X) - _mm(self.B, self.X) * self.E

    def update_converged_count(self) -> int:
        """Leading pairs whose backward-stable relative residual [DuerschEtal2018, 4.3] is
        below tol (counting stops at the first one that is not, to keep the order)."""
        import gputensor as gt
        before = self.ivars["converged_count"]
        a_norm, b_norm = self.fvars["A_norm"], self.fvars["B_norm"]
        X = self.X
        rerr = gt.linalg.vector_norm(self.R, 2, dim=0) / (
            gt.linalg.vector_norm(X, 2, dim=0) * (a_norm + self.E[:X.shape[-1]].abs() * b_norm))
        count = 0
        for ok in (rerr < self.fparams["tol"]).tolist():
            if not ok:
                break
            count += 1
        if count < before:
            raise AssertionError(f"the number of converged eigenpairs (was {before}, got "
                                 f"{count}) cannot decrease")
        self.ivars["converged_count"] = count
        self.tvars["rerr"] = rerr
        return count

    def _start(self) -> Tensor:
        """Step 0 of both variants: Rayleigh-Ritz on the initial X (returns the Ritz values;
        only "basic" keeps them: "ortho" starts its residual from E = 0, as PyTorch's)."""
        Ri = self._rayleigh_ritz_transform(self.X)
        E, Z = _symeig(_qform(_qform(self.A, self.X), Ri), self.bparams["largest"])
        self.X = self.X @ (Ri @ Z)
        return E

    def _update_basic(self) -> None:
        n, largest = self.iparams["n"], self.bparams["largest"]
        nc, ns = self.ivars["converged_count"], self.ivars["converged_end"]
        if self.ivars["istep"] == 0:
            self.E = self._start().clone()
            n_p = 0
            self.update_residual()
            nc = self.update_converged_count()
            W = _mm(self.iK, self.R)
        else:
            S_ = self.S[:, nc:ns]
            Ri = self._rayleigh_ritz_transform(S_)
            E_, Z = _symeig(_qform(_qform(self.A, S_), Ri), largest)
            self.X[:, nc:] = S_ @ (Ri @ Z[:, :n - nc])
            self.E[nc:] = E_[:n - nc]
            P = S_ @ (Ri @ Z[:, n:2 * n - nc])
            n_p = P.shape[-1]
            self.update_residual()
            nc = self.update_converged_count()
            self.S[:, n:n + n_p] = P
            W = _mm(self.iK, self.R[:, nc:])
        self.S[:, :n] = self.X
        ns = self.ivars["converged_end"] = n + n_p + W.shape[-1]
        self.S[:, n + n_p:ns] = W

    def _update_ortho(self) -> None:
        import gputensor as gt
        n, largest = self.iparams["n"], self.bparams["largest"]
        nc, ns = self.ivars["converged_count"], self.ivars["converged_end"]
        if self.ivars["istep"] == 0:
            self._start()
            n_p = 0
            self.update_residual()
            nc = self.update_converged_count()
            self.S[:, :n] = self.X
            W = self._get_ortho(self.R, self.X)
        else:
            S_ = self.S[:, nc:ns]
            E_, Z = _symeig(_qform(self.A, S_), largest)  # S_ is B-orthonormal
            self.X[:, nc:] = S_ @ Z[:, :n - nc]
            self.E[nc:] = E_[:n - nc]
            # P: the part of the new basis orthogonal to X, in the span of S_
            P = S_ @ (Z[:, n - nc:] @ gt.linalg.qr(Z[:n - nc, n - nc:].mT).Q)
            n_p = P.shape[-1]
            self.update_residual()
            nc = self.update_converged_count()
            self.S[:, :n] = self.X
            self.S[:, n:n + n_p] = P
            W = self._get_ortho(self.R[:, nc:], self.S[:, :n + n_p])
        ns = self.ivars["converged_end"] = n + n_p + W.shape[-1]
        self.S[:, n + n_p:ns] = W

    # -- B-orthonormalization -------------------------------------------------------------------
    def _rayleigh_ritz_transform(self, S: Tensor) -> Tensor:
        """Ri, upper triangular, with Ri^T (S^T B S) Ri = I: the Cholesky factor of the
        diagonally scaled S^T B S, inverted, times the scaling."""
        import gputensor as gt
        SBS = _qform(self.B, S)
        d = SBS.diagonal(0, -2, -1) ** -0.5
        R = gt.linalg.cholesky(SBS * d * d.reshape(-1, 1), upper=True)
        return gt.linalg.solve_triangular(R, d.diag_embed(), upper=True, left=False)

    def _get_svqb(self, U: Tensor, drop: bool, tau: float) -> Tensor:
        """B-orthonormal columns spanning U's (SVQB); exactly zero columns are dropped, and
        with ``drop`` also those whose scaled Gram eigenvalue is below tau * max."""
        if U.numel() == 0:
            return U
        UBU = _qform(self.B, U)
        d = UBU.diagonal(0, -2, -1)
        nonzero = (d.abs() != 0).nonzero().reshape(-1)
        if nonzero.numel() < d.numel():
            U = U[:, nonzero]
            if U.numel() == 0:
                return U
            UBU = _qform(self.B, U)
            d = UBU.diagonal(0, -2, -1)
        scale = (d ** -0.5).reshape(-1, 1)
        E, Z = _symeig(UBU * scale * scale.mT)
        floor = tau * float(E.abs().max())
        if drop:
            keep = (E > floor).nonzero().reshape(-1)
            E, Z, scale = E[keep], Z[:, keep], scale[keep]
        else:
            E = E.clamp(min=floor)
        return (U * scale.mT) @ (Z * E ** -0.5)

    def _get_ortho(self, U: Tensor, V: Tensor) -> Tensor:
        """B-orthonormal columns spanning U's part B-orthogonal to V (V B-orthonormal):
        project out V, re-orthonormalize by SVQB, repeat while the errors exceed ortho_tol."""
        import gputensor as gt
        m = self.iparams["m"]
        tol = self.fparams["ortho_tol"]
        tol_drop, tol_replace = self.fparams["ortho_tol_drop"], self.fparams["ortho_tol_replace"]
        i_max, j_max = self.iparams["ortho_i_max"], self.iparams["ortho_j_max"]
        use_drop = self.bparams["ortho_use_drop"]
        for key in [k for k in self.fvars if k.startswith("ortho_") and k.endswith("_rerr")]:
            self.fvars.pop(key)
        self.ivars.pop("ortho_i", 0)
        self.ivars.pop("ortho_j", 0)
        BV_norm = _mm(self.B, V).norm()
        VBU = V.mT @ _mm(self.B, U)
        i = j = 0
        for i in range(i_max):
            U = U - V @ VBU
            drop, tau = False, tol_drop
            for j in range(j_max):
                if use_drop:
                    U = self._get_svqb(U, drop, tau)
                    drop, tau = True, tol_replace
                else:
                    U = self._get_svqb(U, False, tol_replace)
                if U.numel() == 0:  # every column of U was B-collinear to V
                    self.ivars["ortho_i"], self.ivars["ortho_j"] = i, j
                    return U
                BU = _mm(self.B, U)
                UBU = U.mT @ BU
                eye = gt.eye(UBU.shape[-1], dtype=UBU.dtype, device=UBU.device)
                rerr = float((UBU - eye).norm()) / float(BU.norm() * U.norm())
                self.fvars[f"ortho_UBUmI_rerr[{i}, {j}]"] = rerr
                if rerr < tol:
                    break
            VBU = V.mT @ BU
            rerr = float(VBU.norm()) / float(BV_norm * U.norm())
            self.fvars[f"ortho_VBU_rerr[{i}]"] = rerr
            if rerr < tol:
                break
            if m < U.shape[-1] + V.shape[-1]:
                cols = m if self.B is None else self.B.shape[-1]
                raise ValueError(f"Overdetermined shape of U: #B-cols(={cols}) >= "
                                 f"#U-cols(={U.shape[-1]}) + #V-cols(={V.shape[-1]}) must hold")
        self.ivars["ortho_i"], self.ivars["ortho_j"] = i, j
        return U


# -- the backward of a (partial) symmetric eigendecomposition ----------------------------------
def _complete_eigenspace_grad(gD: Tensor, gU: Tensor, D_: Tensor, U: Tensor) -> Tensor:
    """U (diag(gD) + (U^T gU) * F) U^T, F_ij = 1 / (d_j - d_i), F_ii = 0."""
    import gputensor as gt
    diff = D_.unsqueeze(-2) - D_.unsqueeze(-1)
    eye = gt.eye(D_.shape[-1], dtype=D.bool, device=D_.device)
    F = gt.where(eye, gt.zeros_like(diff), 1 / gt.where(eye, gt.ones_like(diff), diff))
    return U @ (gt.diag_embed(gD) + (U.mT @ gU) * F) @ U.mT


def _char_poly(roots: Tensor) -> list[Tensor]:
    """Coefficients c_0..c_n (c_n = 1, as 0-d tensors) of prod_i (x - roots_i)."""
    import gputensor as gt
    one = gt.ones((), dtype=roots.dtype, device=roots.device)
    coeffs = [one]  # highest power first while building
    for r in roots.unbind(-1):
        nxt = [coeffs[0]]
        for a, b in zip(coeffs[1:], coeffs[:-1], strict=True):
            nxt.append(a - r * b)
        nxt.append(-r * coeffs[-1])
        coeffs = nxt
    return coeffs[::-1]


def _partial_eigenspace_grad(gD: Tensor, gU: Tensor, A: Tensor, D_: Tensor, U: Tensor,
                             largest: bool) -> Tensor:
    import gputensor as gt
    m, k = A.shape[-1], D_.shape[-1]
    eye = gt.eye(m, dtype=A.dtype, device=A.device)
    proj = eye - U @ U.mT
    # a basis of span(U)'s orthogonal complement: the projection of fixed random vectors
    gen = gt.Generator(device=A.device)
    gen.manual_seed(0)
    U_ortho = proj @ gt.randn((m, m - k), dtype=A.dtype, device=A.device, generator=gen)
    c = _char_poly(D_)
    # series = sum_{j>=1} A^{j-1} gU * p_j(D), p_j(x) = sum_{i>=j} c_i x^{i-j}
    series = gt.zeros_like(gU)
    power = gU
    for j in range(1, k + 1):
        p = gt.zeros_like(D_)
        for coeff in reversed(c[j:]):
            p = p * D_ + coeff
        series = series + power * p.unsqueeze(-2)
        power = A @ power
    charA = gt.zeros_like(A)  # c(A) by Horner's rule
    for coeff in reversed(c):
        charA = A @ charA + coeff * eye
    restricted = U_ortho.mT @ charA @ U_ortho
    sign = -1 if (largest and k % 2 == 1) else 1  # makes `restricted` positive definite
    L = gt.linalg.cholesky(sign * restricted)
    solved = gt.cholesky_solve(U_ortho.mT @ series, L)
    return _complete_eigenspace_grad(gD, gU, D_, U) - U_ortho @ (sign * solved) @ U.mT


def _lobpcg_grad(grads: list, A: Tensor, outs: tuple, largest: bool | None) -> Tensor:
    import gputensor as gt
    if A.is_complex():
        raise ValueError("lobpcg.backward does not support complex input yet. Note that "
                         "lobpcg.forward does though.")
    E, X = outs
    gE, gX = grads
    gE = gt.zeros_like(E) if gE is None else gE
    gX = gt.zeros_like(X) if gX is None else gX
    if X.shape[-1] == X.shape[-2]:
        return _complete_eigenspace_grad(gE, gX, E, X)
    return _partial_eigenspace_grad(gE, gX, A, E, X, True if largest is None else largest)


def _lobpcg_b_grad(B: Tensor) -> Tensor:
    raise ValueError("lobpcg.backward does not support backward with B != I yet.")


def _lobpcg_jvp(A: Tensor, A_t: Tensor | None, outs: tuple, B: Tensor | None) -> tuple:
    """First-order perturbation of the k simple eigenpairs (A symmetric, B = I):
    dλ_i = x_i^T dA x_i and dx_i = -(A - λ_i I)^+ dA x_i, the pseudo-inverse applied as a solve
    with A - λ_i I + x_i x_i^T (invertible for a simple λ_i, and equal to A - λ_i I on the
    complement of x_i), so the normalised vectors keep x_i^T dx_i = 0."""
    import gputensor as gt
    if B is not None:
        raise NotImplementedError("lobpcg: forward-mode AD with B != I is not implemented "
                                  "(PyTorch's lobpcg has no forward-mode AD at all)")
    E, X = outs
    if A_t is None:
        return gt.zeros_like(E), gt.zeros_like(X)
    dA = (A_t + A_t.mT) / 2
    dAx = dA @ X                                              # column i: dA x_i
    dE = (X * dAx).sum(-2)                                    # x_i^T dA x_i
    n = A.shape[-1]
    eye = gt.eye(n, dtype=A.dtype, device=A.device)
    xs = X.mT.unsqueeze(-1)                                   # (..., k, n, 1)
    shifted = (A.unsqueeze(-3) - E[..., None, None] * eye + xs @ xs.mT)   # (..., k, n, n)
    rhs = dAx.mT.unsqueeze(-1)                                # (..., k, n, 1)
    rhs = rhs - xs * (xs.mT @ rhs)                            # projected off x_i
    dX = -gt.linalg.solve(shifted, rhs).squeeze(-1).mT        # (..., n, k)
    return dE, dX


@op("_lobpcg_dense", method=False,
    grad={"A": lambda grads, A, outs, largest: _lobpcg_grad(grads, A, outs, largest),
          "B": lambda B: _lobpcg_b_grad(B)},
    output_differentiable=(True, True),
    jvp=lambda A, A_t, outs, B: _lobpcg_jvp(A, A_t, outs, B))
def _lobpcg_dense(A: Tensor, k: int | None, B: Tensor | None, X: Tensor | None,
                  n: int | None, iK: Tensor | None, niter: int | None, tol: float | None,
                  largest: bool | None, method: str | None, tracker: Callable | None,
                  ortho_iparams: dict | None, ortho_fparams: dict | None,
                  ortho_bparams: dict | None) -> tuple[Tensor, Tensor]:
    """LOBPCG of a (symmetrized) dense A: the op that carries the derivative."""
    return _run(A, k, B, X, n, iK, niter, tol, largest, method, tracker, ortho_iparams,
                ortho_fparams, ortho_bparams)


def _run(A: Tensor, k: int | None, B: Tensor | None, X: Tensor | None, n: int | None,
         iK: Tensor | None, niter: int | None, tol: float | None, largest: bool | None,
         method: str | None, tracker: Callable | None, ortho_iparams: dict | None,
         ortho_fparams: dict | None, ortho_bparams: dict | None) -> tuple[Tensor, Tensor]:
    import gputensor as gt
    if A.shape[-2] != A.shape[-1]:
        raise AssertionError(f"A must be square, got shape {A.shape}")
    if B is not None and A.shape != B.shape:
        raise AssertionError(f"A and B must have same shape, got {A.shape} vs {B.shape}")
    dtype, device = _floating(A.dtype), A.device
    if tol is None:
        tol = {D.float32: 1.2e-07, D.float64: 2.23e-16}[dtype] ** 0.5
    m = A.shape[-1]
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if n is None else n) if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(f"LOBPCG algorithm is not applicable when the number of A rows "
                         f"(={m}) is smaller than 3 x the number of requested eigenpairs "
                         f"(={n})")
    method = "ortho" if method is None else method
    iparams: dict[str, int] = {"m": m, "n": n, "k": k, "niter": 1000 if niter is None else niter}
    fparams: dict[str, float] = {"tol": tol}
    bparams: dict[str, bool] = {"largest": True if largest is None else largest}
    if method == "ortho":
        iparams.update(ortho_iparams or {})
        fparams.update(ortho_fparams or {})
        bparams.update(ortho_bparams or {})
        iparams.setdefault("ortho_i_max", 3)
        iparams.setdefault("ortho_j_max", 3)
        for key in ("ortho_tol", "ortho_tol_drop", "ortho_tol_replace"):
            fparams.setdefault(key, tol)
        bparams.setdefault("ortho_use_drop", False)
    batch = tuple(A.shape[:-2])
    count = 1
    for s in batch:
        count *= s
    # (a 2-d A, which may be sparse, is used as it is)
    bA = A.reshape(count, m, m) if batch else [A]
    bB = None if B is None else B.reshape(count, m, m) if batch else [B]
    bX = None if X is None else X.reshape(count, *X.shape[-2:]) if batch else [X]
    Es, Xs = [], []
    for i in range(count):
        X_ = gt.randn((m, n), dtype=dtype, device=device) if bX is None else bX[i]
        if not (X_.dim() == 2 and tuple(X_.shape) == (m, n)):
            raise AssertionError(f"X shape mismatch: got {X_.shape}, expected {(m, n)}")
        if batch:
            iparams["batch_index"] = i
        worker = LOBPCG(bA[i], None if bB is None else bB[i], X_, iK, iparams, fparams,
                        bparams, method, tracker)
        worker.run()
        Es.append(worker.E[:k])
        Xs.append(worker.X[:, :k])
    if not batch:
        return Es[0], Xs[0]
    return gt.stack(Es).reshape(*batch, k), gt.stack(Xs).reshape(*batch, m, k)


def _differentiated(x: Tensor | None) -> bool:
    """Whether reverse or forward mode differentiates ``x`` (then the dense op carries the
    derivative of the converged result, not of the iterations)."""
    if x is None:
        return False
    return x.requires_grad or (_fw_state.active and tangent_of(x) is not None)


@op(method=False)
def lobpcg(A: Tensor, k: int | None = None, B: Tensor | None = None, X: Tensor | None = None,
           n: int | None = None, iK: Tensor | None = None, niter: int | None = None,
           tol: float | None = None, largest: bool | None = None, method: str | None = None,
           tracker: Callable | None = None, ortho_iparams: dict[str, int] | None = None,
           ortho_fparams: dict[str, float] | None = None,
           ortho_bparams: dict[str, bool] | None = None) -> tuple[Tensor, Tensor]:
    """The k largest (``largest=False``: smallest) eigenvalues E and eigenvectors X of
    A X = B X E for symmetric positive-definite A (B), by LOBPCG (``method`` "ortho" or
    "basic"); ``iK`` preconditions, ``X`` is the initial basis (n columns, default random
    with n = k). Differentiable in a dense A."""
    if _differentiated(A) or _differentiated(B):
        # symmetrized, so that the gradient is symmetric too (PyTorch's rule)
        A_sym = (A + A.mT) / 2
        B_sym = (B + B.mT) / 2 if B is not None else None
        return _lobpcg_dense(A_sym, k, B_sym, X, n, iK, niter, tol, largest, method, tracker,
                             ortho_iparams, ortho_fparams, ortho_bparams)
    return _run(A, k, B, X, n, iK, niter, tol, largest, method, tracker, ortho_iparams,
                ortho_fparams, ortho_bparams)


__all__ = ["lobpcg"]
