"""Forward (JVP) formulas of the sparse COO ops whose tangents are themselves sparse (the
tangent of a sparse tensor is a sparse tensor of its shape, as PyTorch's forward AD keeps)."""

from __future__ import annotations

from typing import Any

from .forward_ad import tangent_of


def sparse_addmm_jvp(input: Any, mat1: Any, mat2: Any, beta: Any, alpha: Any) -> Any:
    """``beta * input_t + alpha * (mat1_t @ mat2 + mat1 @ mat2_t)``, with only the terms whose
    tangent exists (a missing sparse tangent has no cheap zero). ``input`` None: ``mm``."""
    from gputensor.kernels.registry import OPS
    spmm = OPS["_sparse_mm"].frontend
    total = None
    for term in ((tangent_of(mat1), mat2), (mat1, tangent_of(mat2))):
        if term[0] is not None and term[1] is not None:
            product = spmm(*term)
            total = product if total is None else total + product
    if total is not None and alpha != 1:
        total = total * alpha
    input_t = tangent_of(input) if input is not None else None
    if input_t is not None and beta != 0:
        scaled = input_t * beta if beta != 1 else input_t
        total = scaled if total is None else total + scaled
    if total is None:
        import gputensor as gt
        return gt.zeros((mat1.shape[0], mat2.shape[1]), dtype=mat2.dtype, device=mat2.device)
    return total


def sparse_softmax_jvp(self_t: Any, out: Any, dim: int, log: bool) -> Any:
    """Along ``dim``, over the stored entries only: ``d log_softmax = t - sum(p t)`` and
    ``d softmax = p (t - sum(p t))`` with ``p`` the softmax; a sparse tensor with the
    output's pattern."""
    import gputensor as gt
    from gputensor.sparse._helpers import gather_at
    from gputensor.sparse._tensor import make_sparse
    idx, ov = out._indices_t, out._values_t
    tv = gather_at(self_t, idx)
    p = ov.exp() if log else ov
    weighted = p * tv
    S = out._sparse_dim
    if dim >= S:   # a dense dim: a plain sum over the values' own dim
        group_sum = weighted.sum(dim - S + 1, keepdim=True)
    else:
        partial = make_sparse(idx, weighted.contiguous(), out._shape, True)
        summed = gt.sparse.sum(partial, dim)
        if S == 1:   # every sparse dim reduced: a dense sum shared by every entry
            group_sum = summed.unsqueeze(0)
        else:
            keep = [k for k in range(S) if k != dim]
            group_sum = gather_at(summed, idx[keep].contiguous())
    values = tv - group_sum if log else p * (tv - group_sum)
    return make_sparse(idx, values.contiguous(), out._shape, True)
