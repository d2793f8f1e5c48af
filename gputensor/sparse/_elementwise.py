"""Elementwise arithmetic with sparse operands, reached from the elementwise frontend
(gputensor/_ops/elementwise.py routes any call with a sparse operand here, before promotion or
allocation): add/sub, mul, true_divide and neg, PyTorch's semantics.

- sparse + sparse (same size and sparse_dim): the entries concatenated; coalesced again when
  both operands were coalesced. dense + sparse and sparse + dense: dense (an accumulating
  ``index_put_`` of the values). sparse + number: an error, like PyTorch.
- sparse * number (or a 0-d tensor), sparse / number: the values scaled, pattern kept.
- sparse * dense of the same size: sparse, the dense tensor read at the stored entries.
- sparse * sparse: sparse, the entries both have (intersection of the coalesced patterns).

The frontend records autograd through the op's own derivative formulas afterwards (``g``,
``g * b``, ...), which these same rules evaluate when the gradient is sparse.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor._tensor import Tensor

from ._helpers import coalesce_raw, gather_at, index_rows, linear_keys, sparse_like
from ._tensor import SparseTensor, make_sparse, not_supported

_SUPPORTED = ("add", "sub", "mul", "true_divide", "neg")


def route(op_name: str, inputs: Any, params: tuple, out: Tensor | None,
          inplace: Tensor | None) -> Tensor:
    """Run elementwise op ``op_name`` with at least one sparse operand (no autograd here)."""
    if any(getattr(x, "_layout", None) is not None for x in inputs):   # CSR/CSC/BSR/BSC
        from ._compressed_ops import elementwise
        with gt.no_grad():
            return elementwise(op_name, inputs, params, out, inplace)
    dev_type = next(x for x in inputs if isinstance(x, SparseTensor)).device.type
    if op_name not in _SUPPORTED:
        raise not_supported(op_name, dev_type)
    if out is not None:
        raise RuntimeError(f"{op_name}: out= is not supported with sparse_coo operands")
    with gt.no_grad():
        if op_name == "neg":
            return _scale(inputs[0], -1, inplace, op_name)
        a, b = inputs
        if op_name in ("add", "sub"):
            alpha = 1 if params[0] is None else params[0]
            return _add(a, b, -alpha if op_name == "sub" else alpha, inplace, op_name)
        if op_name == "mul":
            return _mul(a, b, inplace)
        if isinstance(a, SparseTensor) and _is_scalar(b):
            return _scale(a, b, inplace, op_name, divide=True)
        raise RuntimeError(f"{op_name}: a sparse_coo tensor can only be divided by a number or a "
                           f"0-d tensor, got {_describe(a)} / {_describe(b)}")


def _describe(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"{x.layout.name} tensor of size {list(x._shape)}"
    return type(x).__name__


def _is_scalar(x: Any) -> bool:
    return isinstance(x, int | float | complex | bool) or (
        isinstance(x, Tensor) and not isinstance(x, SparseTensor) and x.dim() == 0)


def _result(inplace: Tensor | None, r: SparseTensor) -> SparseTensor:
    if inplace is None:
        return r
    if not isinstance(inplace, SparseTensor):
        raise RuntimeError("in-place arithmetic on a dense tensor with a sparse_coo result is not "
                           "supported")
    if not gt.can_cast(r._dtype, inplace._dtype):
        raise RuntimeError(f"result type {r._dtype.legacy_name} can't be cast to the desired "
                           f"output type {inplace._dtype.legacy_name}")
    vals = r._values_t.to(inplace._dtype)
    inplace._set(r._indices_t, vals, inplace._shape, r._is_coalesced)
    return inplace


def _scale(a: SparseTensor, s: Any, inplace: Tensor | None, op_name: str,
           divide: bool = False) -> SparseTensor:
    vals = a._values_t / s if divide else a._values_t * s
    return _result(inplace, sparse_like(a, vals))


def _check_same(a: Tensor, b: Tensor, op_name: str) -> None:
    if tuple(a._shape) != tuple(b._shape):
        raise RuntimeError(f"{op_name}: sparse_coo operands need the same size, got "
                           f"{list(a._shape)} and {list(b._shape)} (no broadcasting)")
    if a.device != b.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {a.device} and {b.device}! (when checking arguments "
                           f"for {op_name})")


def _add(a: Any, b: Any, alpha: Any, inplace: Tensor | None, op_name: str) -> Tensor:
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        raise RuntimeError(f"{op_name}(sparse, dense) is not supported for a number operand: "
                           f"{_describe(a)} and {_describe(b)}")
    _check_same(a, b, op_name)
    dt = gt.result_type(a, b) if inplace is None else inplace._dtype
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        if a._sparse_dim != b._sparse_dim:
            raise RuntimeError(f"{op_name}: sparse_coo operands need the same sparse_dim, got "
                               f"{a._sparse_dim} and {b._sparse_dim}")
        bv = b._values_t if alpha == 1 else b._values_t * alpha
        idx = gt.cat([a._indices_t, b._indices_t], 1)
        vals = gt.cat([a._values_t.to(dt), bv.to(dt)], 0)
        r = make_sparse(idx, vals, a._shape, False)
        if a._is_coalesced and b._is_coalesced:
            r = coalesce_raw(r)
        return _result(inplace, r)
    if isinstance(a, SparseTensor):      # sparse + dense: dense, like PyTorch's add(S, D)
        if inplace is not None:
            raise RuntimeError(f"{op_name}_(sparse, dense) is not supported: the result of "
                               f"sparse_coo + strided is strided; use dense.{op_name}_(sparse)")
        res = (b * alpha).to(dt) if alpha != 1 else b.to(dt, copy=True)
        if a._nnz():
            res.index_put_(index_rows(a._indices_t), a._values_t.to(dt), accumulate=True)
        return res
    res = a.to(dt, copy=True) if inplace is None else a
    if b._nnz():
        bv = b._values_t if alpha == 1 else b._values_t * alpha
        res.index_put_(index_rows(b._indices_t), bv.to(res.dtype), accumulate=True)
    return res


def _mul(a: Any, b: Any, inplace: Tensor | None) -> Tensor:
    if _is_scalar(b) and isinstance(a, SparseTensor):
        return _scale(a, b, inplace, "mul")
    if _is_scalar(a) and isinstance(b, SparseTensor):
        if inplace is not None:
            raise RuntimeError("mul_: a 0-d dense tensor can't hold a sparse_coo product")
        return _scale(b, a, None, "mul")
    _check_same(a, b, "mul")
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        return _result(inplace, _intersect(a, b))
    sp, dn = (a, b) if isinstance(a, SparseTensor) else (b, a)
    if inplace is not None and inplace is not sp:
        raise RuntimeError("mul_(dense, sparse) is not supported: the product is sparse_coo")
    sc = coalesce_raw(sp)
    vals = sc._values_t * gather_at(dn, sc._indices_t)
    return _result(inplace, make_sparse(sc._indices_t, vals, sp._shape, True))


def _intersect(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """a * b over the entries both have (coalesced patterns matched by linear key)."""
    if a._sparse_dim != b._sparse_dim:
        raise RuntimeError(f"mul: sparse_coo operands need the same sparse_dim, got "
                           f"{a._sparse_dim} and {b._sparse_dim}")
    ac, bc = coalesce_raw(a), coalesce_raw(b)
    if ac._nnz() == 0 or bc._nnz() == 0:
        small = ac if ac._nnz() == 0 else bc
        vals = gt.zeros((0, *ac._values_t._shape[1:]), dtype=gt.result_type(a, b),
                        device=a.device)
        return make_sparse(small._indices_t[:, :0].contiguous(), vals, a._shape, True)
    sizes = a._shape[: a._sparse_dim]
    ak, bk = linear_keys(ac._indices_t, sizes), linear_keys(bc._indices_t, sizes)
    pos = gt.searchsorted(bk, ak).clamp_(max=bc._nnz() - 1)
    hit = gt.nonzero(bk.index_select(0, pos) == ak).reshape(-1)
    idx = ac._indices_t.index_select(1, hit).contiguous()
    vals = ac._values_t.index_select(0, hit) * bc._values_t.index_select(0, pos.index_select(
        0, hit))
    return make_sparse(idx, vals.contiguous(), a._shape, True)
