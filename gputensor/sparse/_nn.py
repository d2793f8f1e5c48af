"""``nn.Embedding(sparse=True)``: the lookup with a sparse weight gradient.

The forward is the dense ``_embedding`` gather; the gradient is PyTorch's: a hybrid sparse
tensor (sparse_dim 1, dense_dim 1) of the weight's size whose entries are the looked-up
indices (uncoalesced, one per lookup, the ``padding_idx`` ones left out) and whose values are
the matching rows of the output gradient, so an optimizer (``optim.SparseAdam``) touches only
the rows that were used. (``scale_grad_by_freq`` has no sparse form: backward raises, as
in PyTorch.)
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._ops import nn as nn_ops
from gputensor._ops._core import op
from gputensor._tensor import Tensor

from ._cost import sparse_cost
from ._tensor import SparseTensor, make_sparse


@op("_embedding_sparse_grad", method=False, function=False, cost=sparse_cost(),
    grad={"weight": lambda g, indices, weight_shape, padding_idx, scale_grad_by_freq:
          embedding_grad(g, indices, weight_shape, padding_idx, scale_grad_by_freq)},
    jvp="auto_linear")
def embedding_sparse_grad(weight: Tensor, indices: Tensor, padding_idx: int = -1,
                          scale_grad_by_freq: bool = False) -> Tensor:
    """Rows of ``weight`` at ``indices`` (checked by ``_embedding``); sparse weight gradient."""
    return nn_ops._embedding(weight, indices, padding_idx, scale_grad_by_freq)


def embedding_grad(g: Tensor, indices: Tensor, weight_shape: Any, padding_idx: int,
                   scale_grad_by_freq: bool) -> SparseTensor:
    num, dim = weight_shape
    idx = indices.reshape(-1).to(gt.int64)
    vals = g.reshape(-1, dim)
    if isinstance(vals, SparseTensor):
        raise RuntimeError("embedding(sparse=True): the output's gradient must be dense")
    if padding_idx >= 0:
        keep = gt.nonzero(idx != padding_idx).reshape(-1)
        idx, vals = idx.index_select(0, keep), vals.index_select(0, keep)
    if scale_grad_by_freq:   # as in PyTorch (there is no sparse form of the scaling)
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse "
                           "gradients")
    return make_sparse(idx.unsqueeze(0).contiguous(), vals.contiguous(), (num, dim), False)
