"""The differentiable ops on compressed sparse tensors (CSR/CSC/BSR/BSC), private registry ops
like the COO ones, plus the elementwise and product routes that reach them.

Gradient conventions (PyTorch's): a compressed input's gradient is dense for the products and
``sum`` (``mm``'s is the full ``g @ mat2.T``), and compressed with the input's pattern for
``to_dense``/``values``; a constructor's ``values`` get the gradient read at their entries.
"""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops._core import op
from gputensor._tensor import Tensor

from ._cost import sparse_cost
from .compressed import (
    BLOCKED,
    KEY,
    CompressedTensor,
    convert_raw,
    densify,
    make_compressed,
    not_supported_here,
    to_coo_raw,
    to_dense_compressed,
    values_at,
)


def _masked(g: Tensor, x: CompressedTensor) -> CompressedTensor:
    """Gradient ``g`` restricted to the pattern of compressed ``x`` (PyTorch's masked grad)."""
    return make_compressed(x._cidx, x._pidx, values_at(densify(g), x), x._shape, x._layout)


def _grad_for(g: Tensor, x: Tensor) -> Tensor:
    """A gradient for ``x`` (of any layout) from ``g`` (of any layout) of x's shape."""
    if isinstance(x, CompressedTensor):
        return _masked(g, x)
    from . import _grads
    return _grads.mask(densify(g), x) if x._sparse else densify(g)


@op("_sparse_compressed", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"values": lambda g, out: values_at(densify(g), out)})
def sparse_compressed(cidx: Tensor, pidx: Tensor, values: Tensor, size: tuple[int, ...],
                      layout: Any) -> CompressedTensor:
    """A compressed tensor around validated parts (differentiable in values)."""
    return make_compressed(cidx, pidx, values.detach(), size, layout)


@op("_compressed_values", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear",
    grad={"self": lambda self, g: make_compressed(self._cidx, self._pidx, densify(g),
                                                  self._shape, self._layout)})
def compressed_values(self: CompressedTensor) -> Tensor:
    return self._values_t.detach()


@op("_compressed_clone", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"self": "g"})
def compressed_clone(self: CompressedTensor) -> CompressedTensor:
    return make_compressed(self._cidx.clone(), self._pidx.clone(), self._values_t.clone(),
                           self._shape, self._layout)


@op("_compressed_to", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"self": "g.to(device=self_device, dtype=self_dtype)"})
def compressed_to(self: CompressedTensor, dtype: D.dtype, device: Any) -> CompressedTensor:
    return make_compressed(self._cidx.to(device), self._pidx.to(device),
                           self._values_t.to(device=device, dtype=dtype), self._shape,
                           self._layout)


@op("_compressed_to_dense", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"self": lambda g, self: _masked(g, self)})
def compressed_to_dense(self: CompressedTensor) -> Tensor:
    return to_dense_compressed(self)


@op("_compressed_to_coo", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"self": lambda g, self: _masked(g, self)})
def compressed_to_coo(self: CompressedTensor) -> Tensor:
    return to_coo_raw(self)._alias()


@op("_to_compressed", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"self": lambda g, self: _grad_for(g, self)})
def to_compressed(self: Tensor, layout: Any, blocksize: Any, dense_dim: int) -> CompressedTensor:
    """``self`` (any layout) converted to a compressed layout (arguments already checked)."""
    return convert_raw(self, layout, blocksize, dense_dim)


def _transposed(x: Tensor) -> Tensor:
    """A gradient's transpose, whatever its layout."""
    return x.t() if isinstance(x, CompressedTensor) else densify(x).t()


@op("_compressed_t", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear", grad={"self": lambda g: _transposed(g)})
def compressed_t(self: CompressedTensor) -> CompressedTensor:
    """CSR <-> CSC and BSR <-> BSC: the same index arrays read the other way round (blocks
    transposed); a hybrid tensor's dense dims stay in place."""
    from gputensor._layout import sparse_bsc, sparse_bsr, sparse_csc, sparse_csr
    swap = {sparse_csr: sparse_csc, sparse_csc: sparse_csr, sparse_bsr: sparse_bsc,
            sparse_bsc: sparse_bsr}
    vals = self._values_t
    if self._layout in BLOCKED:
        vals = vals.transpose(1, 2).contiguous()
    M, N, *tail = self._shape
    return make_compressed(self._cidx, self._pidx, vals, (N, M, *tail), swap[self._layout])


@op("_compressed_sum", method=False, function=False, cost=sparse_cost(),
    jvp="auto_linear",
    grad={"self": lambda g, self: densify(g).expand(self._shape).to(self._dtype)})
def compressed_sum(self: CompressedTensor, dtype: Any = None) -> Tensor:
    vals = self._values_t
    return vals.sum(dtype=dtype) if dtype is not None else vals.sum()


def _dense_mm_grad(g: Tensor, mat2: Tensor) -> Tensor:
    m2 = mat2.conj() if mat2.is_complex() else mat2
    return densify(g) @ m2.t()


def _mat2_grad(mat1: CompressedTensor, g: Tensor) -> Tensor:
    from gputensor._layout import sparse_bsr

    from . import _grads
    if mat1._layout is sparse_bsr:   # PyTorch's backward needs BSC @ dense, which it lacks
        raise RuntimeError(f"addmm: computation on {mat1.device.type.upper()} is not "
                           f"implemented for Strided + SparseBsc @ Strided")
    return _grads.transposed_mm(to_coo_raw(mat1.detach()), densify(g))


def _mm_jvp(mat1: CompressedTensor, mat2: Tensor) -> Tensor:
    """``mat1_t @ mat2 + mat1 @ mat2_t``, the terms whose tangent exists."""
    from gputensor.autograd.forward_ad import tangent_of
    total = None
    for a, b in ((tangent_of(mat1), mat2), (mat1, tangent_of(mat2))):
        if a is not None and b is not None:
            product = compressed_mm(a, b)
            total = product if total is None else total + product
    return total if total is not None else \
        gt.zeros((mat1._shape[0], mat2._shape[1]), dtype=mat2.dtype, device=mat2.device)


@op("_compressed_mm", method=False, function=False, cost=sparse_cost(), jvp=_mm_jvp,
    grad={"mat1": lambda g, mat2: _dense_mm_grad(g, mat2),
          "mat2": lambda mat1, g: _mat2_grad(mat1, g)})
def compressed_mm(mat1: CompressedTensor, mat2: Tensor) -> Tensor:
    """``mat1 @ mat2`` (dense result) through the COO ``_spmm`` kernel."""
    from ._matmul import spmm_into
    out = gt.empty((mat1._shape[0], mat2._shape[1]), dtype=mat2.dtype, device=mat2.device)
    return spmm_into(out, to_coo_raw(mat1), mat2, 1, 0)


# -- products ---------------------------------------------------------------------------------
def _check_mm(a: CompressedTensor, b: Any, op_name: str) -> None:
    from gputensor._layout import sparse_bsc
    if a._layout is sparse_bsc:
        raise RuntimeError(f"addmm: computation on {a.device.type.upper()} is not implemented "
                           f"for Strided + SparseBsc @ Strided")
    if not isinstance(b, Tensor) or b._sparse:
        raise RuntimeError(f"{op_name}: a {a._layout.name} @ {getattr(b, 'layout', b)} product "
                           f"is not supported by gputensor; the right operand must be dense")
    if a.dim() != 2:
        raise RuntimeError(f"{op_name}: mat1 must be a matrix (a hybrid {a._layout.name} tensor "
                           f"of size {list(a._shape)} is not supported)")
    if b.dim() != 2:
        raise RuntimeError(f"{op_name}: mat2 must be a matrix, got a {b.dim()}-D tensor")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"expected scalar type {a._dtype.legacy_name} but found "
                           f"{b._dtype.legacy_name}")
    if a.device != b.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {a.device} and {b.device}!")
    if a._shape[1] != b._shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a._shape[0]}x"
                           f"{a._shape[1]} and {b._shape[0]}x{b._shape[1]})")


def mm_route(op_name: str, a: Tensor, b: Tensor, out: Any = None) -> Tensor:
    """``mm``/``matmul``/``@`` with a compressed operand: compressed @ dense (a vector too for
    matmul), dense @ compressed as ``(b.T @ a.T).T``."""
    if out is not None:
        raise RuntimeError(f"{op_name}: out= is not supported with a sparse compressed operand")
    if isinstance(a, CompressedTensor):
        if op_name == "matmul" and isinstance(b, Tensor) and not b._sparse and b.dim() == 1:
            _check_mm(a, b.unsqueeze(1), op_name)
            return compressed_mm(a, b.unsqueeze(1)).squeeze(1)
        _check_mm(a, b, op_name)
        return compressed_mm(a, b)
    if not isinstance(a, Tensor) or a._sparse or a.dim() != 2:
        raise RuntimeError(f"{op_name}: only dense @ {b.layout.name} with a 2-d dense left "
                           f"operand is supported, got {getattr(a, 'layout', type(a).__name__)}")
    bt = b.t()
    _check_mm(bt, a.t(), op_name)
    return compressed_mm(bt, a.t()).t()


def addmm_route(input: Tensor, mat1: Tensor, mat2: Tensor, beta: Any = 1, alpha: Any = 1,
                out: Any = None) -> Tensor:
    """``gt.addmm(dense, compressed, dense)``: ``beta * input + alpha * (mat1 @ mat2)``."""
    if out is not None:
        raise RuntimeError("addmm: out= is not supported with a sparse compressed operand")
    if isinstance(input, CompressedTensor) or not isinstance(mat1, CompressedTensor) or \
            getattr(mat2, "_sparse", False):
        names = ", ".join(KEY.get(getattr(x, "layout", None), "Strided")
                          for x in (input, mat1, mat2))
        raise RuntimeError(f"addmm: computation on {mat1.device.type.upper()} is not "
                           f"implemented for the layouts ({names}) with a compressed operand")
    _check_mm(mat1, mat2, "addmm")
    prod = compressed_mm(mat1, mat2)
    gt.broadcast_shapes(tuple(input._shape), tuple(prod._shape))
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod + gt.zeros_like(input).expand(prod._shape) if input._shape != prod._shape \
            else prod.clone()
    return gt.add(prod, input, alpha=beta) if beta != 1 else prod + input


# -- elementwise (reached from gputensor.sparse._elementwise.route, under no_grad) ---------------
def _is_scalar(x: Any) -> bool:
    return isinstance(x, int | float | complex | bool) or (
        isinstance(x, Tensor) and not x._sparse and x.dim() == 0)


def _same_pattern(a: CompressedTensor, b: CompressedTensor) -> bool:
    return a._cidx._shape == b._cidx._shape and a._pidx._shape == b._pidx._shape and \
        bool(gt.equal(a._cidx, b._cidx)) and bool(gt.equal(a._pidx, b._pidx))


def elementwise(op_name: str, inputs: Any, params: tuple, out: Any, inplace: Any) -> Tensor:
    """add/mul/neg with a compressed operand, as PyTorch runs them (add: CSR only)."""
    x = next(t for t in inputs if isinstance(t, CompressedTensor))
    if out is not None:
        raise not_supported_here(f"{op_name} with out=", x)
    r = _elementwise(op_name, inputs, params, x)
    if inplace is None:
        return r
    if r.layout is not inplace.layout:
        raise RuntimeError(f"{op_name}_: the result of an in-place op on a "
                           f"{inplace.layout.name} tensor is {r.layout.name}; use the "
                           f"out-of-place form")
    if not gt.can_cast(r._dtype, inplace._dtype):
        raise RuntimeError(f"result type {r._dtype.legacy_name} can't be cast to the desired "
                           f"output type {inplace._dtype.legacy_name}")
    inplace._set_parts(r._cidx, r._pidx, r._values_t.to(inplace._dtype))
    return inplace


def _elementwise(op_name: str, inputs: Any, params: tuple, x: CompressedTensor) -> Tensor:
    if op_name == "neg":
        return _with_values(x, -x._values_t)
    if op_name == "mul":
        a, b = inputs
        if _is_scalar(b) or _is_scalar(a):
            s, t = (b, a) if _is_scalar(b) else (a, b)
            return _with_values(t, t._values_t * s)
        if isinstance(a, CompressedTensor) and isinstance(b, Tensor) and not b._sparse and \
                tuple(b._shape) == a._shape:
            return _with_values(a, a._values_t * values_at(b, a))
        raise not_supported_here("mul of these operands", x)
    if op_name == "add":
        from gputensor._layout import sparse_csr
        a, b = inputs
        alpha = 1 if params[0] is None else params[0]
        if x._layout is not sparse_csr:
            raise RuntimeError(f"crow_indices expected sparse row compressed tensor layout but "
                               f"got {KEY[x._layout]}")
        if isinstance(a, CompressedTensor) and isinstance(b, CompressedTensor):
            if b._layout is not sparse_csr or a._shape != b._shape or a.device != b.device:
                raise RuntimeError(f"add: expected two sparse_csr tensors of the same size on "
                                   f"the same device, got {a._layout.name} {list(a._shape)} on "
                                   f"{a.device} and {b._layout.name} {list(b._shape)} on "
                                   f"{b.device}")
            dt = gt.promote_types(a._dtype, b._dtype)
            if _same_pattern(a, b):
                return make_compressed(a._cidx, a._pidx,
                                       a._values_t.to(dt) + b._values_t.to(dt) * alpha,
                                       a._shape, sparse_csr)
            from ._elementwise import route
            s = route("add", [to_coo_raw(a), to_coo_raw(b)], (alpha,), None, None)
            return convert_raw(s, sparse_csr, None, a.dim() - 2)
        if isinstance(a, Tensor) and isinstance(b, Tensor) and not (a._sparse and b._sparse):
            da = to_dense_compressed(a) if isinstance(a, CompressedTensor) else a
            db = to_dense_compressed(b) if isinstance(b, CompressedTensor) else b
            return gt.add(da, db, alpha=alpha)
    raise not_supported_here(op_name, x)


def _with_values(x: CompressedTensor, vals: Tensor) -> CompressedTensor:
    return make_compressed(x._cidx, x._pidx, vals.contiguous(), x._shape, x._layout)
