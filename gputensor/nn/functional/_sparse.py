"""Embedding lookup (torch.nn.functional.embedding).

The lookup is one gather op (``_embedding``) whose backward is one fused scatter-add op
(``_embedding_backward``) into a zero weight gradient; the ``padding_idx`` row gets none.
With ``sparse=True`` the weight's gradient is a sparse_coo tensor (gputensor/sparse/_nn.py).
"""

from __future__ import annotations

import gputensor as gt
from gputensor import _dtype as D
from gputensor._compile.state import replayable_check
from gputensor._ops import nn as nn_ops
from gputensor._ops.shape import _minmax
from gputensor._tensor import Tensor

__all__ = ["embedding", "one_hot"]


def _padding_index(padding_idx: int | None, num_embeddings: int) -> int:
    """PyTorch's padding_idx rule: negative values count from the end; -1 means none."""
    if padding_idx is None:
        return -1
    if padding_idx > 0:
        if padding_idx >= num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
    elif padding_idx < 0:
        if padding_idx < -num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = num_embeddings + padding_idx
    return padding_idx


def _renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` that ``indices`` reference down to norm ``max_norm``
    (in place, outside autograd), as PyTorch's embedding_renorm_ does."""
    with gt.no_grad():
        rows_idx = gt.unique(indices.reshape(-1))
        rows = weight.index_select(0, rows_idx)
        norms = rows.norm(p=norm_type, dim=1)
        scale = gt.where(norms > max_norm, max_norm / (norms + 1e-7), gt.ones_like(norms))
        weight.index_copy_(0, rows_idx, rows * scale.unsqueeze(1))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of ``weight`` (num_embeddings, embedding_dim) at the integer ``input``.

    ``padding_idx``: that row receives no gradient. ``max_norm``: referenced rows with a
    larger ``norm_type``-norm are rescaled in place first. ``scale_grad_by_freq``: each row's
    gradient is divided by how often its index occurs in ``input``.
    """
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    if input.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {input.type()} instead "
                           f"(while checking arguments for embedding)")
    pad = _padding_index(padding_idx, weight.shape[0])
    if max_norm is not None:
        input = input.contiguous()
        _renorm_(weight, input, max_norm, norm_type)
    if sparse:   # the same lookup; the weight's gradient is a sparse_coo tensor
        from gputensor.sparse._nn import embedding_sparse_grad
        return embedding_sparse_grad(weight, input, pad, scale_grad_by_freq)
    return nn_ops._embedding(weight, input, pad, scale_grad_by_freq)


def _classes_in_range(tensor: Tensor, num_classes: int) -> None:
    lo, hi = _minmax(tensor)
    if lo < 0:
        raise RuntimeError("Class values must be non-negative.")
    if hi >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 indices (*) -> (*, num_classes) of 0/1 int64; -1 infers max + 1 classes."""
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel():
        replayable_check(_classes_in_range, tensor, num_classes)
    classes = gt.arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()
