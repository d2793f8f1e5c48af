"""Scatter ops: scatter/scatter_add/scatter_reduce, index_add/index_copy/index_fill and
masked_fill/masked_scatter, with their in-place forms and backward ops.

Frontends check everything before a kernel runs (shapes, dims, dtypes, devices and every index
value against its dimension), allocate and dispatch by op name to the scatter kernels
(kernels/cpu/scatter.py, kernels/cuda/ops/scatter.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gputensor._tensor import Tensor, normalize_dim
from gputensor.autograd.grad_mode import is_grad_enabled, no_grad
from gputensor.autograd.inplace import apply_inplace, needs_graph

from ._core import broadcast_shapes, common_device, kernel, op
from ._overlap import check_no_internal_overlap, check_overlap
from ._scalar_range import checked_fill_value
from .copying import clone
from .reduce import count_nonzero
from .shape import (
    _bump,
    _check_bounds,
    _check_index_dtype,
    _check_mask,
    _check_tensor,
    _copy_out,
    _dim_size,
    _expanded_copy,
    _scalar_value,
    _zeros,
    cat,
    gather,
)
from .sort import masked_select
from .views import expand, reshape

# == scattering ==================================================================================
_LEGACY_REDUCE = {None: None, "add": "sum", "multiply": "prod"}
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _check_scatter(self: Tensor, dim: int, index: Tensor, src: Tensor | None,
                   op_name: str) -> int:
    """Validate a scatter into ``self``; returns the normalized dim."""
    d = normalize_dim(dim, self.dim())     # the dim first, as in PyTorch
    _check_tensor(index, "index", op_name)
    if index.numel():   # PyTorch checks an empty index's dtype no more than its values
        _check_index_dtype(index, f"{op_name}(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype is not self.dtype:
        raise RuntimeError(f"{op_name}(): Expected self.dtype to be equal to src.dtype")
    common_device(self, index, src, op_name=op_name)
    if index.numel() == 0:
        return d
    nd = max(self.dim(), 1)
    if max(index.dim(), 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if src is not None and max(src.dim(), 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    ishape, sshape = index._shape or (1,), self._shape or (1,)
    srcshape = (src._shape or (1,)) if src is not None else None
    for k in range(nd):
        if (k != d and ishape[k] > sshape[k]) or (srcshape and ishape[k] > srcshape[k]):
            extra = f" and to be no larger size than src {list(src._shape)}" if src is not None \
                else ""
            raise RuntimeError(f"Expected index {list(index._shape)} to be no larger than self "
                               f"{list(self._shape)} apart from dimension {d}{extra}")
    _check_bounds(index, sshape[d], d, error=RuntimeError, device_checked=True)
    return d


def _scatter_source(src: Any, value: Any) -> Any:
    if src is None and value is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    if isinstance(src, Tensor):
        return src
    return _scalar_value(value if src is None else src, "scatter")


def _scatter(self: Tensor, dim: int, index: Tensor, src: Any, value: Any, reduce: str | None,
             inplace: bool) -> Tensor:
    source = _scatter_source(src, value)
    if reduce not in _LEGACY_REDUCE:
        raise RuntimeError("reduce argument must be either add or multiply.")
    d = _check_scatter(self, dim, index, source if isinstance(source, Tensor) else None,
                       "scatter")
    if inplace:   # after the dtype and shape checks, as PyTorch's scatter meta function
        check_overlap(self, (index, source), allow_same=False)
    target = self if inplace else clone(self)
    if index.numel():
        kernel(target, "scatter")(target, d, index, source, _LEGACY_REDUCE[reduce])
    return _bump(target) if inplace else target


def scatter_(self: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
             reduce: str | None = None) -> Tensor:
    if needs_graph(self, (src, value), {}):
        return apply_inplace(self, lambda: scatter(self, dim, index, src, value=value,
                                                   reduce=reduce))
    return _scatter(self, dim, index, src, value, reduce, True)


# PyTorch has no derivative for the legacy ``reduce=`` forms of scatter.
_SCATTER_NO_REDUCE = "not_implemented('scatter with reduce') if reduce is not None else "


@op(inplace=True, inplace_fn=scatter_,
    grad={"input": _SCATTER_NO_REDUCE + "g.scatter(dim, index, 0.0)",
          "src": _SCATTER_NO_REDUCE + "_gather_to(g, dim, index, src_shape)"},
    jvp="input_t.scatter(dim, index, 0.0 if src is None else src_t) if reduce is None else "
        "not_implemented('scatter with reduce')")
def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Tensor:
    """Write ``src`` (a tensor or a number) into a copy of input at ``index`` along ``dim``."""
    return _scatter(input, dim, index, src, value, reduce, False)


def _scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                    include_self: bool, inplace: bool, op_name: str) -> Tensor:
    _check_tensor(src, "src", op_name)
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    d = _check_scatter(self, dim, index, src, op_name)
    if inplace:
        check_overlap(self, (index, src), allow_same=False)
    target = self if inplace else clone(self)
    if index.numel():
        kernel(target, "scatter_reduce")(target, d, index, src, reduce, bool(include_self))
    elif reduce == "mean" and target.is_complex():
        # PyTorch divides by the counts (ones here) even when nothing is scattered: a complex
        # division by 1 + 0j, which turns inf - 1.5j into inf + nanj
        import gputensor as gt
        with no_grad():
            target.div_(gt.ones_like(target))
    return _bump(target) if inplace else target


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    if needs_graph(self, (src,), {}):
        return apply_inplace(self, lambda: scatter_add(self, dim, index, src))
    return _scatter_reduce(self, dim, index, src, "sum", True, True, "scatter_add")


@op(inplace=True, inplace_fn=scatter_add_,
    grad={"input": "g", "src": "_gather_to(g, dim, index, src_shape)"}, jvp="auto_linear")
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Add ``src`` into a copy of input at ``index`` along ``dim`` (duplicates accumulate)."""
    return _scatter_reduce(input, dim, index, src, "sum", True, False, "scatter_add")


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    if needs_graph(self, (src,), {}):
        # The derivative reads self's value from before the write: reduce into a copy of it.
        before = clone(self)
        return apply_inplace(self, lambda: scatter_reduce(before, dim, index, src, reduce,
                                                          include_self=include_self))
    return _scatter_reduce(self, dim, index, src, reduce, include_self, True, "scatter_reduce")


@op(inplace=True, inplace_fn=scatter_reduce_,
    grad={"input": "g if reduce == 'sum' and include_self else _scatter_reduce_backward(g, "
                   "input, dim, index, src, reduce, include_self, out, True)",
          "src": "_scatter_reduce_backward(g, input, dim, index, src, reduce, include_self, "
                 "out, False)"}, jvp="transpose")
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """Reduce ``src`` into input at ``index`` with sum, prod, mean, amax or amin."""
    return _scatter_reduce(input, dim, index, src, reduce, include_self, False, "scatter_reduce")


@op(method=False)
def _scatter_reduce_backward(grad: Tensor, input: Tensor, dim: int, index: Tensor, src: Tensor,
                             reduce: str, include_self: bool, result: Tensor,
                             for_input: bool) -> Tensor:
    """scatter_reduce's gradient for ``input`` (``for_input``) or for ``src``, composed of
    differentiable ops so that it has a gradient itself.

    Only ``src[:index.shape]`` takes part in the forward; the rest of src gets zero.
    """
    if reduce == "sum":  # (the formula itself passes grad on to an included input)
        if for_input:
            return grad.scatter(dim, index, 0.0)
        return _gather_to(grad, dim, index, src._shape)
    if reduce == "mean":
        # Each output is divided by how many values it combined (itself included or not).
        ones = _zeros(index._shape, grad.dtype, grad.device).fill_(1)
        start = _zeros(input._shape, grad.dtype, grad.device)
        if include_self:
            start.fill_(1)
        count = start.scatter_add(dim, index, ones).clamp_(min=1)
        if for_input:
            return grad / count if include_self else grad.scatter(dim, index, 0.0)
        return _gather_to(grad / count, dim, index, src._shape)
    src_part = src[tuple(slice(n) for n in index._shape)] if src._shape != index._shape else src
    if reduce in ("amax", "amin"):
        # The gradient is shared evenly by every value that equals the result.
        self_hit = (input == result).to(grad.dtype)
        if not include_self:
            self_hit = self_hit.scatter(dim, index, 0.0)
        src_hit = (src_part == result.gather(dim, index)).to(grad.dtype)
        share = grad / self_hit.scatter_add(dim, index, src_hit).clamp_(min=1)
        if for_input:
            return share * self_hit
        return _pad_src_grad(share.gather(dim, index) * src_hit, index, src._shape)
    return _scatter_prod_backward(grad, input, dim, index, src, src_part, include_self, result,
                                  for_input)


@op(method=False)
def _gather_to(grad: Tensor, dim: int, index: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``grad.gather(dim, index)`` in a ``shape`` at least as large as index's: a scatter's
    gradient for its source (source elements beyond index's extent get zero)."""
    return _pad_src_grad(gather(grad, dim, index), index, shape)


def _pad_src_grad(g: Tensor, index: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A gradient for ``src[:index.shape]`` placed in zeros of src's ``shape`` (differentiable:
    the write records through setitem when ``g`` requires grad)."""
    if g._shape == tuple(shape):
        return g
    out = _zeros(tuple(shape), g.dtype, g.device)
    out[tuple(slice(n) for n in index._shape)] = g
    return out


def _scatter_prod_backward(grad: Tensor, input: Tensor, dim: int, index: Tensor, src: Tensor,
                           src_part: Tensor, include_self: bool, result: Tensor,
                           for_input: bool) -> Tensor:
    """The gradient of a scattered product: the product of the other factors, computed
    without dividing by a zero factor."""
    if for_input:
        if not include_self:
            return grad.scatter(dim, index, 0.0)
        # A zero in input: its cofactor is the product with that zero replaced by one.
        nonzero_input = input.masked_fill(input == 0, 1)
        others = nonzero_input.scatter_reduce(dim, index, src, "prod", include_self=True)
        return grad * others / nonzero_input
    zero = src_part == 0
    zeros_at = _zeros(input._shape, grad.dtype, grad.device).scatter_add(
        dim, index, zero.to(grad.dtype)).gather(dim, index)
    if is_grad_enabled() and bool((zeros_at > 1).any()):
        raise RuntimeError("scatter_reduce(): double backward is not supported for src when two "
                           "or more src values reduced into the same position are zero")
    # A src zero that is the only zero at its target: its cofactor is the product with it
    # replaced by one. Other src values divide the result by themselves (0 if another is 0).
    lone = zero & (zeros_at == 1)
    cofactor = input.scatter_reduce(dim, index, src_part.masked_fill(lone, 1), "prod",
                                    include_self=include_self)
    from .composite import where
    g_src = where(lone, (grad * cofactor).gather(dim, index),
                  (grad * result).gather(dim, index) / src_part.masked_fill(zero, 1))
    return _pad_src_grad(g_src, index, src._shape)


# -- index_add / index_copy / index_fill ------------------------------------------------------
def _check_source_slices(self: Tensor, d: int, source: Tensor, message: str) -> None:
    sshape, tshape = self._shape or (1,), source._shape or (1,)
    if len(sshape) != len(tshape) or any(a != b for k, (a, b) in
                                         enumerate(zip(sshape, tshape, strict=True)) if k != d):
        raise RuntimeError(message)


def check_index_source(op_name: str, self: Tensor, d: int, index: Tensor,
                       source: Tensor) -> None:
    """index_add_/index_reduce_'s checks of the source against the index count and self's
    slices, in PyTorch's order (a 0-d source with other than one index: the dim error of
    source.size(dim))."""
    if d and d >= source.dim():
        raise RuntimeError(f"{op_name}(): Indexing dim {d} is out of bounds of the source tensor "
                           f"with dim {source.dim()}")
    if index.numel() != 1 and not source.dim():
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    if index.numel() != _dim_size(source, d):
        raise RuntimeError(f"{op_name}(): Number of indices ({index.numel()}) should be equal "
                           f"to source.size(dim): ({_dim_size(source, d)}), for dim: {d}")
    if self.dim() != source.dim() or any(a != b for k, (a, b) in enumerate(
            zip(self._shape, source._shape, strict=True)) if k != d):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(self._shape)} "
                           f"source.shape = {list(source._shape)}")


def _index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Any,
               inplace: bool) -> Tensor:
    _check_tensor(index, "index", "index_add_")
    _check_tensor(source, "source", "index_add_")
    d = normalize_dim(dim, self.dim())  # PyTorch's meta function wraps the dim first
    if index.dim() > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{index.dim()} with type: {index.dtype.legacy_name} and size: "
                         f"{list(index._shape)}")
    _check_index_dtype(index, "index_add_(): Expected dtype int32/int64 for index but got: "
                       "{dtype}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_add_(): self ({self.dtype.legacy_name}) and source "
                           f"({source.dtype.legacy_name}) must have the same scalar type")
    common_device(self, index, source, op_name="index_add_")
    check_index_source("index_add_", self, d, index, source)
    if inplace:   # after the checks above, as PyTorch's index_func_meta_impl
        check_overlap(self, (index, source), allow_same=False)
    # alpha converts to self's dtype with PyTorch's overflow check (300 is no uint8 alpha),
    # before the indices are range-checked; PyTorch's kernel for a self of more dims returns
    # before it when there is no index or no element
    alpha = _scalar_value(alpha, "index_add")
    if self.dim() <= 1 or (index.numel() and self.numel()):
        alpha = checked_fill_value(alpha, self._dtype)
    _check_bounds(index, _dim_size(self, d), d, prefix="index_add_(): ", device_checked=True)
    target = self if inplace else clone(self)
    if index.numel():
        kernel(target, "index_add")(target, d, index, source, alpha)
    return _bump(target) if inplace else target


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *,
               alpha: Any = 1) -> Tensor:
    if needs_graph(self, (source,), {}):
        return apply_inplace(self, lambda: index_add(self, dim, index, source, alpha=alpha))
    return _index_add(self, dim, index, source, alpha, True)


@op(inplace=True, inplace_fn=index_add_,
    grad={"input": "g",
          "source": "scale(g.index_select(dim, index), alpha).reshape(source_shape)"},
    jvp="auto_linear")
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1,
              out: Tensor | None = None) -> Tensor:
    """input with ``alpha * source`` added at ``index`` along ``dim`` (duplicates accumulate)."""
    result = _index_add(input, dim, index, source, alpha, False)
    return _copy_out(result, out, "index_add")


def _index_copy(self: Tensor, dim: int, index: Tensor, source: Tensor, inplace: bool) -> Tensor:
    _check_tensor(index, "index", "index_copy_")
    _check_tensor(source, "source", "index_copy_")
    d = normalize_dim(dim, self.dim())     # PyTorch's order of checks
    if inplace:   # PyTorch's index_copy meta checks overlap before anything else
        check_overlap(self, (index, source), allow_same=False)
    if index.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index.dim()})")
    if not source.dim() and index.numel() != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element "
                         f"(got {index.numel()})")
    if source.dim() and self.dim() and source.dim() != self.dim():
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.dim()}), "
                         f"destination dimensionality ({self.dim()})")
    _check_index_dtype(index, "index_copy_(): Expected a long tensor for index, but got {dtype}",
                       long_only=True)
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but "
                           f"got (self) {self.dtype.legacy_name} and (source) "
                           f"{source.dtype.legacy_name}")
    common_device(self, index, source, op_name="index_copy_")
    _check_source_slices(self, d, source, f"index_copy_(): Source/destination tensor must have "
                         f"same slice shapes. Destination shape {list(self._shape)} and source "
                         f"shape {list(source._shape)} differ outside dimension {d}.")
    if index.numel() != _dim_size(source, d):   # (after the slices, as in PyTorch)
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal "
                         f"to source.size(dim) ({_dim_size(source, d)})")
    _check_bounds(index, _dim_size(self, d), d, prefix="index_copy_(): ", device_checked=True)
    target = self if inplace else clone(self)
    if index.numel():
        kernel(target, "index_copy")(target, d, index, source)
    return _bump(target) if inplace else target


def index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    if needs_graph(self, (source,), {}):
        return apply_inplace(self, lambda: index_copy(self, dim, index, source))
    return _index_copy(self, dim, index, source, True)


@op(inplace=True, inplace_fn=index_copy_,
    grad={"input": "g.index_fill(dim, index, 0)",
          "source": "g.index_select(dim, index).reshape(source_shape)"}, jvp="auto_linear")
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """input with the slices at ``index`` along ``dim`` replaced by those of ``source``."""
    return _index_copy(input, dim, index, source, False)


def _index_fill(self: Tensor, dim: int, index: Tensor, value: Any, inplace: bool) -> Tensor:
    _check_tensor(index, "index", "index_fill_")
    _check_index_dtype(index, "index_fill_(): Expected dtype int64 for index.", long_only=True,
                       exc=IndexError)
    v = _scalar_value(value, "index_fill_")
    if (value.is_complex() if isinstance(value, Tensor) else
            isinstance(value, complex | np.complexfloating)) and not self.is_complex():
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not "
                           "supported")
    d = normalize_dim(dim, self.dim())   # then the index's rank, then the value (PyTorch's order)
    if index.dim() > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    v = checked_fill_value(v, self._dtype)
    common_device(self, index, op_name="index_fill_")
    if math.prod(s for i, s in enumerate(self._shape) if i != d):
        # PyTorch checks the indices only when the filled slices have elements
        _check_bounds(index, _dim_size(self, d), d, wrap=True)
    target = self if inplace else clone(self)
    if index.numel() and target.numel():
        kernel(target, "index_fill")(target, d, index, v)
    return _bump(target) if inplace else target


def index_fill_(self: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    if needs_graph(self, (value,), {}):
        return apply_inplace(self, lambda: index_fill(self, dim, index, value))
    return _index_fill(self, dim, index, value, True)


# A 0-dim ``value`` tensor gets the sum of the gradient over the filled slices (each counted
# once, however often or in whichever sign convention the index names it).
@op(inplace=True, inplace_fn=index_fill_,
    grad={"input": "g.index_fill(dim, index, 0)",
          "value": "(g - g.index_fill(dim, index, 0)).sum()"}, jvp="auto_linear")
def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """input with the slices at ``index`` along ``dim`` set to ``value`` (negatives wrap)."""
    return _index_fill(input, dim, index, value, False)


# == masks =======================================================================================
def _inplace_mask_shape(self: Tensor, mask: Tensor) -> None:
    shape = broadcast_shapes(self._shape, mask._shape)
    if shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")


def _masked_fill(self: Tensor, mask: Tensor, value: Any, inplace: bool) -> Tensor:
    _check_mask(mask, "masked_fill_", "masked_fill_ only supports boolean masks, but got mask "
                "with dtype {dtype}")
    v = _scalar_value(value, "masked_fill_")
    v = checked_fill_value(v, self._dtype)  # a 0-dim tensor's value too, as PyTorch checks it
    common_device(self, mask, op_name="masked_fill_")
    if inplace:
        _inplace_mask_shape(self, mask)
        target = self
    else:
        target = _expanded_copy(self, broadcast_shapes(self._shape, mask._shape))
    if target.numel():
        kernel(target, "masked_fill")(target, mask, v)
    return _bump(target) if inplace else target


def masked_fill_(self: Tensor, mask: Tensor, value: Any) -> Tensor:
    if needs_graph(self, (value,), {}):
        _inplace_mask_shape(self, mask)
        return apply_inplace(self, lambda: masked_fill(self, mask, value))
    return _masked_fill(self, mask, value, True)


@op(inplace=True, inplace_fn=masked_fill_,
    grad={"input": "g.masked_fill(mask, 0)", "value": "masked(g, mask).sum()"}, jvp="auto_linear")
def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """input (broadcast with mask) with ``value`` wherever the boolean mask is True."""
    return _masked_fill(input, mask, value, False)


def _masked_scatter(self: Tensor, mask: Tensor, source: Tensor, inplace: bool) -> Tensor:
    if inplace:   # PyTorch's masked_scatter_ refuses an expanded self before anything else
        check_no_internal_overlap(self)
    _check_mask(mask, "masked_scatter_", "masked_scatter_ only supports boolean masks, but got "
                "mask with dtype {dtype}")
    _check_tensor(source, "source", "masked_scatter_")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got {self.dtype.legacy_name} and {source.dtype.legacy_name}")
    common_device(self, mask, source, op_name="masked_scatter_")
    if inplace:
        _inplace_mask_shape(self, mask)
        shape = self._shape
    else:
        shape = broadcast_shapes(self._shape, mask._shape)
    full_mask = expand(mask, shape)
    count = count_nonzero(full_mask).item() if full_mask.numel() else 0
    if source.numel() < count:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    target = self if inplace else _expanded_copy(self, shape)
    if count:
        kernel(target, "masked_scatter")(target, full_mask, source)
    return _bump(target) if inplace else target


def masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    if needs_graph(self, (source,), {}):
        _inplace_mask_shape(self, mask)
        return apply_inplace(self, lambda: masked_scatter(self, mask, source))
    return _masked_scatter(self, mask, source, True)


@op(inplace=True, inplace_fn=masked_scatter_,
    grad={"input": "g.masked_fill(mask, 0)",
          "source": "_masked_scatter_source_grad(g, mask, source_shape)"}, jvp="auto_linear")
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """Copy consecutive elements of ``source`` into input wherever the mask is True."""
    return _masked_scatter(input, mask, source, False)


@op(method=False)
def _masked_scatter_source_grad(grad: Tensor, mask: Tensor, shape: tuple[int, ...]) -> Tensor:
    """masked_scatter's gradient for its source: the masked gradient in order, then zeros for
    the source elements the mask did not use."""
    used = masked_select(grad, mask)
    n = math.prod(shape)
    if used.numel() < n:
        used = cat([used, _zeros((n - used.numel(),), grad.dtype, grad.device)])
    return reshape(used, tuple(shape))
