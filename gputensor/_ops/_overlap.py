"""PyTorch's memory-overlap checks for ops that write into an existing tensor (in-place ops,
``out=``, ``copy_``): a written-to tensor whose elements share memory (an expanded view) is
refused, and so is an input that partly overlaps the output. Only what PyTorch can decide is
refused: the same view as the output (``a.add_(a)``) is fine, and views that are not dense
(``a[::2]`` against ``a[1::2]``) are not compared (PyTorch's TOO_HARD)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gputensor._tensor import Tensor

_INTERNAL = ("unsupported operation: more than one element of the written-to tensor refers to a "
             "single memory location. Please clone() the tensor before performing the operation.")
_PARTIAL = ("unsupported operation: some elements of the input tensor and the written-to tensor "
            "refer to a single memory location. Please clone() the tensor before performing the "
            "operation.")


def _dense(t: Tensor) -> bool:
    """Whether ``t``'s elements fill a block of memory exactly once in some dim order
    (PyTorch's ``is_non_overlapping_and_dense``)."""
    dims = sorted((s, n) for n, s in zip(t._shape, t._stride, strict=True) if n != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def check_no_internal_overlap(out: Tensor) -> None:
    """Refuse a written-to tensor that repeats an element along a dim (stride 0, size > 1)."""
    if 0 in out._stride and any(s == 0 and n > 1 for n, s in zip(out._shape, out._stride,
                                                                  strict=True)):
        raise RuntimeError(_INTERNAL)


def check_overlap(out: Tensor, inputs: Iterable[Any], allow_same: bool = True) -> None:
    """``check_no_internal_overlap(out)``, then refuse any tensor among ``inputs`` whose memory
    partly overlaps ``out``'s (both dense). The identical view is allowed (TensorIterator's
    rule) unless ``allow_same`` is False (``assert_no_overlap``: the index and scatter ops)."""
    if out._sparse:
        return  # sparse tensors have no strides: their kernels write fresh values arrays
    check_no_internal_overlap(out)
    storage = out._storage
    for x in inputs:
        if type(x) is not Tensor and not isinstance(x, Tensor):
            continue
        if x._sparse or x._storage is not storage or not x.numel() or not out.numel():
            continue
        if x is out:
            if allow_same:
                continue
            raise RuntimeError(_PARTIAL)
        if not (_dense(out) and _dense(x)):
            continue  # PyTorch cannot tell: it allows the op
        o_lo, x_lo = out._offset, x._offset
        o_hi = o_lo + 1 + sum((n - 1) * s for n, s in zip(out._shape, out._stride, strict=True))
        x_hi = x_lo + 1 + sum((n - 1) * s for n, s in zip(x._shape, x._stride, strict=True))
        isz_o, isz_x = out._dtype.itemsize, x._dtype.itemsize
        o_lo, o_hi, x_lo, x_hi = o_lo * isz_o, o_hi * isz_o, x_lo * isz_x, x_hi * isz_x
        if o_lo == x_lo and o_hi == x_hi and out._stride == x._stride and \
                out._shape == x._shape and isz_o == isz_x:
            if allow_same:
                continue  # the same view: PyTorch's FULL overlap, allowed
            raise RuntimeError(_PARTIAL)
        if o_lo < x_hi and x_lo < o_hi:
            raise RuntimeError(_PARTIAL)
