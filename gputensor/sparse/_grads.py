"""Gradient helpers the sparse ops' derivative formulas call (as ``sparse._grads.<name>``).

A gradient arriving at a sparse op may be dense or sparse (of the op output's full shape);
every helper accepts both. Gradients for sparse inputs come back sparse with the input's
coalesced pattern (PyTorch's ``sparse_mask`` semantics); gradients for values come back dense.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from ._helpers import coalesce_raw, gather_at, sparse_like, to_dense_raw
from ._tensor import SparseTensor, make_sparse


def values_of(g: Tensor, out: SparseTensor) -> Tensor:
    """Gradient w.r.t. the values of ``out`` (as constructed, duplicates included): each entry
    receives the gradient at its position."""
    return gather_at(g, out._indices_t)


def with_values(x: SparseTensor, g: Tensor) -> SparseTensor:
    """Gradient of ``x.values()``: a sparse tensor with ``x``'s indices and ``g`` as values."""
    return sparse_like(x, g.contiguous())


def mask(g: Tensor, x: SparseTensor) -> SparseTensor:
    """``g`` restricted to the (coalesced) pattern of ``x``: PyTorch's ``g.sparse_mask(x)``."""
    xc = coalesce_raw(x)
    return make_sparse(xc._indices_t, gather_at(g, xc._indices_t), x._shape, True)


def densify(g: Tensor) -> Tensor:
    """A dense gradient for a dense input whose gradient may have arrived sparse."""
    return to_dense_raw(g) if isinstance(g, SparseTensor) else g


def mm_sparse(g: Tensor, mat1: SparseTensor, mat2: Tensor, alpha: Any = 1) -> SparseTensor:
    """Gradient of ``mat1 @ mat2`` w.r.t. sparse ``mat1``: ``(g @ mat2.T)`` at mat1's pattern,
    computed for those entries only (the ``_sddmm`` kernel), times ``alpha``."""
    from gputensor._ops._core import kernel
    xc = coalesce_raw(mat1)
    g = densify(g).contiguous()
    vals = gt.empty((xc._nnz(),), dtype=g.dtype, device=g.device)
    if xc._nnz():
        rows = xc._indices_t[0].contiguous()
        cols = xc._indices_t[1].contiguous()
        kernel(xc, "_sddmm")(vals, rows, cols, g, mat2.contiguous())
    if not (not isinstance(alpha, Tensor) and alpha == 1):
        vals = vals * (alpha.conjugate() if isinstance(alpha, complex) else alpha)
    return make_sparse(xc._indices_t, vals, mat1._shape, True)


def sum_backward(g: Tensor, x: SparseTensor, dim: Any) -> SparseTensor:
    """Gradient of ``gt.sparse.sum(x, dim)``: ``g`` broadcast back onto x's coalesced entries."""
    from ._reduce import split_dims
    xc = coalesce_raw(x)
    vshape = tuple(xc._values_t._shape)
    S = x._sparse_dim
    if dim is None:
        vals = g.reshape(()).expand(vshape)
    else:
        sdims, ddims = split_dims(x, dim)
        keep = [d for d in range(S) if d not in sdims]
        if not keep:        # every sparse dim reduced: g is dense over the kept dense dims
            per = g.reshape(tuple(1 if d + S in ddims else n
                                  for d, n in enumerate(x._shape[S:])))
            vals = per.unsqueeze(0).expand(vshape)
        else:
            idx = xc._indices_t[keep] if len(keep) < S else xc._indices_t
            got = gather_at(g, idx.contiguous())      # [nnz, *kept dense dims]
            for d in sorted(ddims):
                got = got.unsqueeze(d - S + 1)
            vals = got.expand(vshape)
    return make_sparse(xc._indices_t, vals.contiguous(), x._shape, True)


def transposed_mm(mat1: SparseTensor, g: Tensor, alpha: Any = 1) -> Tensor:
    """``alpha * mat1.T @ g``: the dense operand's gradient of a sparse product."""
    from ._matmul import spmm_into
    from ._ops import sparse_transpose
    mt = sparse_transpose(mat1.detach(), 0, 1)
    g = densify(g)
    out = gt.empty((mt._shape[0], g._shape[1]), dtype=g.dtype, device=g.device)
    spmm_into(out, mt, g, alpha, 0)
    return out
