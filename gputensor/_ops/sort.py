"""Sorting, selection and search ops: masked_select, nonzero/argwhere, sort/argsort/msort,
topk, kthvalue, unique, searchsorted/bucketize, bincount and histc.

Frontends check everything before a kernel runs, compute output shapes and dtypes, allocate
outputs and dispatch by op name to the sort kernels (kernels/cpu/sort.py,
kernels/cuda/ops/sort.py). Ops whose output size depends on the data read back one count.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor, normalize_dim
from gputensor.kernels.registry import OPS

from ._core import broadcast_shapes, common_device, empty, kernel, op, result_type
from ._scalar_range import checked_fill_value
from .copying import strided_copy
from .shape import (
    _alloc,
    _as_int,
    _check_bounds,
    _check_mask,
    _check_tensor,
    _copy_out,
    _dim_size,
    _minmax,
    _scalar_value,
    _written,
    _zeros,
)
from .views import expand, unbind, unsqueeze

sort_result = return_types.sort
topk_result = return_types.topk
kthvalue_result = return_types.kthvalue


# == masks selecting ============================================================================
@op(grad={"input": "_masked_select_backward(g, input_shape, mask)"}, jvp="auto_linear")
def masked_select(input: Tensor, mask: Tensor, *, out: Tensor | None = None) -> Tensor:
    """A 1-d tensor of the elements of input (broadcast with mask) where the mask is True."""
    _check_mask(mask, "masked_select", "masked_select: expected BoolTensor for mask")
    common_device(input, mask, op_name="masked_select")
    shape = broadcast_shapes(input._shape, mask._shape)
    result = kernel(input, "masked_select")(expand(input, shape), expand(mask, shape))
    return _copy_out(result, out, "masked_select")


@op(method=False, grad={"grad": "masked_select(g, mask)"}, jvp="auto_linear")
def _masked_select_backward(grad: Tensor, shape: tuple[int, ...], mask: Tensor) -> Tensor:
    """Zeros of the broadcast of ``shape`` and the mask's shape, with ``grad`` placed where
    the mask holds (masked_select's gradient; the node sums it back to the input's shape)."""
    full = broadcast_shapes(tuple(shape), mask._shape)
    out = _zeros(full, grad.dtype, grad.device)
    if grad.numel():
        kernel(out, "masked_scatter")(out, expand(mask, full), grad)
    return out


@op(differentiable=False)
def nonzero(input: Tensor, *, out: Tensor | None = None, as_tuple: bool = False) -> Any:
    """Indices of the non-zero elements: an (n, ndim) int64 tensor, or one column per dim."""
    nz = kernel(input, "nonzero")(input)
    if as_tuple:
        if input.dim() == 0:
            return (_zeros((nz._shape[0],), D.int64, input.device),)
        return unbind(nz, 1)
    return _copy_out(nz, out, "nonzero")


@op(differentiable=False)
def argwhere(input: Tensor) -> Tensor:
    """nonzero(input): the (n, ndim) int64 indices of the non-zero elements."""
    return nonzero(input)


# == sorting and selection =======================================================================
def _pair_out(out: Any, op_name: str) -> tuple[Tensor | None, Tensor | None]:
    if out is None:
        return None, None
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise TypeError(f"{op_name}(): argument 'out' must be a tuple of two Tensors")
    return out[0], out[1]


def _no_complex(input: Tensor, op_name: str, bool_ok: bool = True) -> None:
    if input.is_complex() or (not bool_ok and input.dtype is D.bool):
        raise RuntimeError(f"{op_name}(): not implemented for '{input.dtype.legacy_name}' "
                           f"tensors")


# The values' gradient lands where the indices say; the indices themselves have none.
@op(grad={"input": "_gather_backward(g, input_shape, dim, out1)"},
    output_differentiable=(True, False), jvp="(input_t.gather(dim, out1), None)")
def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False, *,
         out: Any = None) -> sort_result:
    """(values, indices) sorted along ``dim``; stable, NaN sorts as the largest value."""
    d = normalize_dim(dim, input.dim())     # the dim before the dtype, as in PyTorch
    _no_complex(input, "sort")
    vo, io = _pair_out(out, "sort")
    values = _alloc(vo, input._shape, input.dtype, input.device, "sort")
    indices = _alloc(io, input._shape, D.int64, input.device, "sort")
    if input.numel():
        kernel(input, "sort")(values, indices, input, d, bool(descending))
    _written(values, vo)
    return sort_result(values, _written(indices, io))


@op(differentiable=False)
def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort input along ``dim`` (stable)."""
    return sort(input, dim, descending, stable).indices


@op()
def msort(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """input sorted along dim 0."""
    return _copy_out(sort(input, 0).values, out, "msort")


@op(grad={"input": "_gather_backward(g, input_shape, dim, out1)"},
    output_differentiable=(True, False), jvp="(input_t.gather(dim, out1), None)")
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *,
         out: Any = None) -> topk_result:
    """The k largest (or smallest) elements along ``dim`` and their indices, in sorted order."""
    k = _as_int(k, "k")
    d = normalize_dim(dim, input.dim())
    if not 0 <= k <= _dim_size(input, d):
        raise RuntimeError("selected index k out of range")
    _no_complex(input, "topk", bool_ok=False)
    shape = input._shape[:d] + (k,) + input._shape[d + 1:] if input.dim() else ()
    vo, io = _pair_out(out, "topk")
    values = _alloc(vo, shape, input.dtype, input.device, "topk")
    indices = _alloc(io, shape, D.int64, input.device, "topk")
    if values.numel():
        # a 0-d input's result is its element for k = 0 as for k = 1, as in PyTorch
        kernel(input, "topk")(values, indices, input, d, k if input.dim() else 1, bool(largest))
    _written(values, vo)
    return topk_result(values, _written(indices, io))


@op(grad={"input": "_gather_backward(unsqueeze_like(g, input_shape, dim, keepdim), "
                   "input_shape, dim, unsqueeze_like(out1, input_shape, dim, keepdim))"},
    output_differentiable=(True, False),
    jvp="select_jvp(input, input_t, dim, 0, out, out1, keepdim, False)")
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False, *,
             out: Any = None) -> kthvalue_result:
    """The k-th smallest element (1-based) along ``dim`` and its index."""
    k = _as_int(k, "k")
    d = normalize_dim(dim, input.dim())
    if not _dim_size(input, d):
        raise IndexError(f"kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if not 1 <= k <= _dim_size(input, d):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input.dim():     # PyTorch returns a 0-d input's element for every dtype
        _no_complex(input, "kthvalue", bool_ok=False)
    kept = input._shape[:d] + (1,) + input._shape[d + 1:] if input.dim() else ()
    shape = kept if keepdim or not input.dim() else input._shape[:d] + input._shape[d + 1:]
    vo, io = _pair_out(out, "kthvalue")
    values = _alloc(vo, shape, input.dtype, input.device, "kthvalue")
    indices = _alloc(io, shape, D.int64, input.device, "kthvalue")
    if not input.dim():
        strided_copy(values, input)
        indices.fill_(0)
    elif values.numel():
        squeeze = not keepdim and input.dim()
        kernel(input, "kthvalue")(unsqueeze(values, d) if squeeze else values,
                                  unsqueeze(indices, d) if squeeze else indices, input, d, k)
    _written(values, vo)
    return kthvalue_result(values, _written(indices, io))


# == unique ======================================================================================
def _unique(input: Tensor, sort_first: bool, return_inverse: bool, return_counts: bool,
            dim: int | None, op_name: str) -> Any:
    _no_complex(input, op_name)
    d = None
    if dim is not None and not input.dim():
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if dim is not None:
        d = normalize_dim(dim, input.dim())
        if any(s == 0 for k, s in enumerate(input._shape) if k != d):
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                               "unique cannot be applied")
    values, inverse, counts = kernel(input, "unique")(input, sort_first, d)
    if not (return_inverse or return_counts):
        return values
    return (values,) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())


@op()
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The sorted unique elements (or slices along ``dim``), with inverse indices and counts."""
    return _unique(input, True, return_inverse, return_counts, dim, "unique")


@op()
def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> Any:
    """Collapse runs of equal consecutive elements (or slices along ``dim``)."""
    return _unique(input, False, return_inverse, return_counts, dim, "unique_consecutive")


# == searching and counting ======================================================================
def _search_side(right: bool, side: str | None) -> bool:
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise RuntimeError(f"searchsorted(): side can only be 'left' or 'right' but got {side}")
    if right and side == "left":
        raise RuntimeError(f"searchsorted(): side and right can't be set to opposites, got side "
                           f"of {side} while right was True")
    return side == "right"


def _check_sorter(sorter: Tensor, boundaries: Tensor) -> None:
    if sorter.dtype is not D.int64:
        raise RuntimeError(f"searchsorted(): sorter must be a tensor of long dtype but got "
                           f"{sorter.dtype.legacy_name}")
    if sorter._shape != boundaries._shape:
        raise RuntimeError(f"searchsorted(): boundary and sorter must have the same size, but "
                           f"got boundary tensor {list(boundaries._shape)} and got sorter tensor "
                           f"{list(sorter._shape)}")
    _check_bounds(sorter, boundaries._shape[-1], boundaries.dim() - 1,
                  prefix="searchsorted(): sorter ")


@op(method=False, differentiable=False)
def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None,
                 out: Tensor | None = None) -> Tensor:
    """Insertion indices of ``input`` into the innermost dim of ``sorted_sequence``."""
    bnd = _check_tensor(sorted_sequence, "sorted_sequence", "searchsorted")
    use_right = _search_side(right, side)
    if bnd.dim() == 0:
        raise RuntimeError("searchsorted(): boundaries tensor should have positive dimension, "
                           "but got 0 dimension")
    promoted_with = input  # PyTorch's result_type: a 0-d tensor or a number ranks below bnd
    if not isinstance(input, Tensor):
        from .creation import scalar_tensor
        value = promoted_with = _scalar_value(input, "searchsorted")
        input = scalar_tensor(value, D.scalar_dtype(value), bnd.device)
    if bnd.dim() > 1 and (input.dim() != bnd.dim() or input._shape[:-1] != bnd._shape[:-1]):
        raise RuntimeError(f"searchsorted(): boundaries tensor should be 1 dimension or the first "
                           f"N-1 dimensions of boundaries tensor and input value tensor must "
                           f"match, but we got boundaries tensor {list(bnd._shape)} and input "
                           f"value tensor {list(input._shape)}")
    if input.numel():  # PyTorch dispatches on the dtype only when there is work
        for t in (bnd, input):
            if t.is_complex():
                raise NotImplementedError(f"searchsorted(): not implemented for "
                                          f"'{t.dtype.legacy_name}' tensors")
    dev = common_device(bnd, input, sorter, op_name="searchsorted")
    if sorter is not None:
        _check_sorter(_check_tensor(sorter, "sorter", "searchsorted"), bnd)
    result = _alloc(out, input._shape, D.int32 if out_int32 else D.int64, dev, "searchsorted")
    if result.numel():
        compute = result_type(bnd, promoted_with)
        if compute in (D.float16, D.bfloat16):   # compared as values of the 16-bit dtype:
            bnd, input = bnd.to(compute), input.to(compute)   # int32 2**31 - 1 is inf there
        kernel(input, "searchsorted")(result, bnd, input, use_right, sorter, compute)
    return _written(result, out)


@op(method=False, differentiable=False)
def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False,
              out: Tensor | None = None) -> Tensor:
    """Bucket indices of ``input`` for the 1-d sorted ``boundaries``."""
    _check_tensor(boundaries, "boundaries", "bucketize")
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim"
                           f"({boundaries.dim()})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right, out=out)


@op()
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Counts (or summed weights) of each value of a 1-d non-negative integer tensor."""
    msg = "bincount only supports 1-d non-negative integral inputs."
    if input.dtype.category != D.INTEGRAL or input.dim() != 1:
        raise RuntimeError(msg)
    minlength = _as_int(minlength, "minlength")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if not input.numel():   # PyTorch: int64 zeros, whatever the weights are
        return _zeros((minlength,), D.int64, input.device)
    if weights is not None:
        _check_tensor(weights, "weights", "bincount")
        if weights.dim() != 1 or weights.numel() != input.numel():
            raise RuntimeError("weights should be 1-d and have the same length as input")
        _no_complex(weights, "bincount")
    dev = common_device(input, weights, op_name="bincount")
    lo, hi = _minmax(input)
    if lo < 0:
        raise RuntimeError(msg)
    if weights is None:
        dt = D.int64
    else:
        dt = D.float32 if weights.dtype is D.float32 else D.float64
    result = empty((max(hi + 1, minlength),), dt, dev)
    if result.numel():
        kernel(input, "bincount")(result, input, weights)
    return result


def _widened(v: float, dt: D.dtype) -> tuple[float, float]:
    """histc's empty range [v, v] widened as PyTorch's: by one, or to v's neighbours in a
    float32/float64 input where one vanishes in rounding (1e30 +- 1 is 1e30)."""
    if dt not in (D.float32, D.float64):
        return v - 1, v + 1
    ft, big = dt.np_dtype.type, np.finfo(dt.np_dtype).max
    with np.errstate(over="ignore"):
        x = ft(v)   # its neighbours toward the lowest and the largest finite value
        down, up = float(np.nextafter(x, -big)), float(np.nextafter(x, big))
    return min(down, v - 1), max(up, v + 1)


@op(differentiable=False)
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0, *,
          out: Tensor | None = None) -> Tensor:
    """A histogram of ``bins`` equal-width bins over [min, max] (the data range if equal)."""
    if not input.is_floating_point():
        raise RuntimeError(f"histc(): not implemented for '{input.dtype.legacy_name}'")
    bins = _as_int(bins, "bins")
    if bins <= 0:
        raise RuntimeError(f"histc(): bins must be > 0, but got {bins}")
    lo, hi = float(min), float(max)
    if lo == hi and input.numel():
        lo, hi = (float(v) for v in _minmax(input))
    if lo == hi:
        lo, hi = _widened(lo, input.dtype)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"gputensor.histc: range of [{lo:g}, {hi:g}] is not finite")
    if not lo < hi:
        raise RuntimeError("gputensor.histc: max must be larger than min")
    if input.dtype in (D.float16, D.bfloat16):   # the edges are in the input's dtype
        lo, hi = (float(input.dtype.np_dtype.type(checked_fill_value(v, input.dtype)))
                  for v in (lo, hi))
    result = _alloc(out, (bins,), input.dtype, input.device, "histc")
    kernel(input, "histc")(result, input, bins, lo, hi)
    return _written(result, out)


@op(differentiable=False)
def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` occurs in ``test_elements`` (bool, the shape of
    ``elements``): a binary search of the sorted test elements. ``assume_unique`` only lets
    PyTorch pick a faster algorithm; the answer is the same."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() expects elements or test_elements to be a Tensor")
    if not isinstance(test_elements, Tensor):   # PyTorch's Tensor-Scalar form is eq / ne
        return OPS["ne" if invert else "eq"].frontend(elements, test_elements)
    dev = test_elements.device
    # PyTorch casts both to their result type (an out-of-range scalar or 0-d value wraps) when
    # it compares every pair; with many test elements it sorts their concatenation instead,
    # which promotes as for 1-d tensors
    n = 1 if not isinstance(elements, Tensor) else elements.numel()
    dt = result_type(elements, test_elements) if \
        test_elements.numel() < int(10.0 * n ** 0.145) else None
    if not isinstance(elements, Tensor):
        elements = OPS["tensor"].frontend(elements, device=dev)
    dt = dt or D.promote_types(elements.dtype, test_elements.dtype)
    table = test_elements.to(dt).reshape(-1)
    if dt.is_floating_point:
        table = table[~table.isnan()]  # NaN matches nothing, and would derail the search
    if table.numel() == 0:
        found = OPS["zeros"].frontend(elements.shape, dtype=D.bool, device=dev)
    else:
        table = table.sort().values
        x = elements.to(dt)
        at = searchsorted(table, x).clamp(max=table.numel() - 1)
        found = table[at.reshape(-1)].reshape(x.shape) == x
    return ~found if invert else found
