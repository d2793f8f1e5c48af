"""LAPACK's Householder QR interface: geqrf, orgqr, ormqr (functions and Tensor methods).

``geqrf`` and ``ormqr`` run one backend kernel each (kernels/cpu/householder.py: SciPy's LAPACK
on the host, cuSOLVER through CuPy; the emulator takes the host route). ``orgqr`` is PyTorch's
alias of gt.linalg.householder_product, a formula over matrix products. As in PyTorch, geqrf
has no derivative; ormqr's is below: the gradient of ``other`` is ormqr with Q's adjoint, and
those of ``input`` (below its diagonal) and ``tau`` come from differentiating the reflectors
applied one by one, written with differentiable ops (so gradients of gradients work).
"""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor

from ._core import empty, kernel, op
from .decompositions import deliver, deliver_all


def _check_dtype(t: Tensor, fn: str) -> None:
    if not (t.dtype.is_floating_point or t.dtype.is_complex) or \
            t.dtype in (D.float16, D.bfloat16):
        dev = "cuda" if t.is_cuda else "cpu"
        raise NotImplementedError(f"\"{fn}_{dev}\" not implemented for '{t.dtype.legacy_name}'")


def _check_tensor(t: Any, name: str, fn: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}")


# -- geqrf -------------------------------------------------------------------------------------
@op("_linalg_geqrf", method=False)
def _linalg_geqrf(A: Tensor) -> tuple[Tensor, Tensor]:
    m, n = A.shape[-2:]
    batch = tuple(A.shape[:-2])
    a = empty((*batch, m, n), A.dtype, A.device)
    tau = empty((*batch, min(m, n)), A.dtype, A.device)
    kernel(A, "_linalg_geqrf")((a, tau), (A.contiguous(),), ())
    return a, tau


@op()
def geqrf(input: Tensor, *, out: Any = None) -> return_types.geqrf:
    """LAPACK's QR factorization: ``a`` holds R on and above its diagonal and the Householder
    vectors below it; ``tau`` the reflectors' scalars (gt.linalg.householder_product(a, tau)
    is Q)."""
    _check_tensor(input, "input", "geqrf")
    if input.dim() < 2:
        raise RuntimeError("gputensor.geqrf: input must have at least 2 dimensions.")
    _check_dtype(input, "geqrf")
    a, tau = _linalg_geqrf(input)
    return deliver_all(return_types.geqrf(a, tau), out, "geqrf")


# -- orgqr ---------------------------------------------------------------------------------------
@op()
def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of the product of the Householder reflectors of geqrf (PyTorch's
    alias of gt.linalg.householder_product)."""
    import gputensor as gt
    return gt.linalg.householder_product(input, tau)


# -- ormqr ---------------------------------------------------------------------------------------
def _check_ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool) -> None:
    fn = "gputensor.ormqr"
    for t, name in ((input, "input"), (tau, "tau"), (other, "other")):
        _check_tensor(t, name, "ormqr")
    for t, name in ((input, "input"), (other, "other")):
        if t.dim() < 2:
            raise RuntimeError(f"{fn}: {name} must have at least 2 dimensions.")
    side = -2 if left else -1
    if other.shape[side] != input.shape[-2]:
        raise RuntimeError(f"{fn}: other.shape[{side}] must be equal to input.shape[-2]")
    k = min(other.shape[side], input.shape[-1])
    if tau.dim() == 0 or tau.shape[-1] != k:
        raise RuntimeError(f"{fn}: tau.shape[-1] must be equal to min(other.shape[{side}], "
                           f"input.shape[-1])")
    if tau.dim() != input.dim() - 1:
        raise RuntimeError(f"{fn}: Expected tau to have one dimension less than input, but got "
                           f"tau.ndim equal to {tau.dim()} and input.ndim is equal to "
                           f"{input.dim()}")
    if other.dim() != input.dim():
        raise RuntimeError(f"{fn}: Expected other to have the same number of dimensions as "
                           f"input, but got other.ndim equal to {other.dim()} and input.ndim is "
                           f"equal to {input.dim()}")
    batch = list(input.shape[:-2])
    if list(tau.shape[:-1]) != batch:
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if list(other.shape[:-2]) != batch:
        raise RuntimeError(f"{fn}: Expected batch dimensions of other to be equal to "
                           f"input.shape[:-2], but got {list(other.shape[:-2])}")
    for t, name in ((tau, "tau"), (other, "other")):
        if t.dtype is not input.dtype:
            raise RuntimeError(f"{fn}: Expected input and {name} to have the same dtype, but "
                               f"input has dtype{input.dtype.legacy_name} and {name} has dtype "
                               f"{t.dtype.legacy_name}")
    _check_dtype(input, "ormqr")
    for t in (tau, other):
        if t.device != input.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {input.device} and {t.device}!")


def _reflector_grads(g: Tensor, input: Tensor, tau: Tensor, other: Tensor, left: bool,
                     transpose: bool) -> tuple[Tensor, Tensor]:
    """Gradients of ``input`` and ``tau`` for ormqr's output gradient ``g``.

    Every case is a sequence of reflectors I - s_j v_j v_j^H applied from the left to
    X = C (left) or C^H (right), s_j = tau_j or conj(tau_j). One step X' = X - s v (v^H X) with
    output gradient G gives, with a = v^H X and b = v^H G:
    gX = G - conj(s) v b, gs = -sum(b conj(a)), gv = -conj(s) G a^H - s X b^H.
    """
    import gputensor as gt
    k = tau.shape[-1]
    mn, cols = input.shape[-2], input.shape[-1]
    eye = gt.eye(mn, k, dtype=input.dtype, device=input.device)
    V = input[..., :, :k].tril(-1) + eye
    # Q = H_1 ... H_k: left N applies H_k first; left T/H applies H_1^H first; right uses
    # (C Q)^H = Q^H C^H and (C Q^H)^H = Q C^H.
    conj = transpose == left
    order = list(range(k)) if conj else list(range(k - 1, -1, -1))
    X = other if left else other.mH
    G = g if left else g.mH
    xs = []
    for j in order:
        v = V[..., :, j:j + 1]
        s = tau[..., j:j + 1].unsqueeze(-1)
        s = s.conj() if conj and s.is_complex() else s
        xs.append(X)
        X = X - (s * v) @ (v.mH @ X)
    gv: list[Tensor | None] = [None] * k
    gs: list[Tensor | None] = [None] * k
    for j, X in zip(reversed(order), reversed(xs), strict=True):
        v = V[..., :, j:j + 1]
        s = tau[..., j:j + 1].unsqueeze(-1)
        s = s.conj() if conj and s.is_complex() else s
        a, b = v.mH @ X, v.mH @ G
        s_c = s.conj() if s.is_complex() else s
        gs_j = -(b * (a.conj() if a.is_complex() else a)).sum(-1)   # (..., 1)
        gs[j] = gs_j.conj() if conj and gs_j.is_complex() else gs_j
        gv[j] = -(s_c * (G @ a.mH)) - s * (X @ b.mH)
        G = G - (s_c * v) @ b
    g_input = gt.cat([c for c in gv], -1).tril(-1)
    if cols > k:
        pad = gt.zeros((*input.shape[:-2], mn, cols - k), dtype=input.dtype,
                       device=input.device)
        g_input = gt.cat([g_input, pad], -1)
    return g_input, gt.cat([s for s in gs], -1)


@op("_linalg_ormqr", method=False,
    grad={"input": lambda g, input, tau, other, left, transpose:
          _reflector_grads(g, input, tau, other, left, transpose)[0],
          "tau": lambda g, input, tau, other, left, transpose:
          _reflector_grads(g, input, tau, other, left, transpose)[1],
          "other": lambda g, input, tau, left, transpose:
          _linalg_ormqr(input, tau, g, left, not transpose)},
    jvp="transpose")   # the backward formulas are differentiable gt ops
def _linalg_ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool,
                  transpose: bool) -> Tensor:
    res = empty(tuple(other.shape), other.dtype, other.device)
    kernel(input, "_linalg_ormqr")((res,), (input.contiguous(), tau.contiguous(),
                                            other.contiguous()), (bool(left), bool(transpose)))
    return res


@op()
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True,
          transpose: bool = False, *, out: Tensor | None = None) -> Tensor:
    """Q other (left) or other Q, with Q^H instead when ``transpose``; Q is the product of the
    Householder reflectors of geqrf held in ``input`` and ``tau``."""
    _check_ormqr(input, tau, other, bool(left))
    return deliver(_linalg_ormqr(input, tau, other, bool(left), bool(transpose)), out, "ormqr")


__all__ = ["geqrf", "orgqr", "ormqr"]
