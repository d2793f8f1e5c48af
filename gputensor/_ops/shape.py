"""Shape ops: join/split, gathers (index_select, gather, take), flips, rolls, repeats,
triangles and diagonals, padding, grids; the argument and index checks the scatter and sort
ops (scatter.py, sort.py) share.

Frontends check everything before a kernel runs (shapes, dims, dtypes, devices and every index
value against its dimension), compute output shapes and dtypes, allocate outputs and dispatch by
op name. Ops that only rearrange metadata are composed from view ops, so every backend gets them
without a kernel of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._compile.state import replayable_check
from gputensor._device import device as Device
from gputensor._tensor import Tensor, normalize_dim, parse_size
from gputensor.autograd.formulas import sum_to
from gputensor.autograd.inplace import apply_inplace, needs_graph

from ._core import (
    broadcast_shapes,
    check_out,
    common_device,
    dims_one_at_a_time,
    empty,
    kernel,
    op,
    tensor_method,
)
from .copying import clone, strided_copy
from .reduce import aminmax
from .views import diagonal as diagonal_view
from .views import expand, narrow, reshape, transpose, unsqueeze

_INDEX_DTYPES = (D.int32, D.int64)


# -- argument helpers --------------------------------------------------------------------------
def _is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def _as_int(x: Any, what: str) -> int:
    if isinstance(x, Tensor) and x.numel() == 1 and x.dtype.category == D.INTEGRAL:
        x = x.item()
    if not _is_int(x):
        raise TypeError(f"{what} must be an int, got {type(x).__name__}")
    return int(x)


def _int_list(x: Any, what: str) -> list[int]:
    """An int, a sequence of ints or an integer tensor as a list of ints."""
    if isinstance(x, Tensor):
        x = x.tolist()
    if _is_int(x):
        return [int(x)]
    if not isinstance(x, Sequence):
        raise TypeError(f"{what} must be an int or a sequence of ints, got {type(x).__name__}")
    return [_as_int(v, what) for v in x]


def _varargs_ints(args: tuple, what: str) -> list[int]:
    """f(x, 0, 1) or f(x, [0, 1]) or f(x, (0, 1))."""
    if len(args) == 1 and not _is_int(args[0]):
        return _int_list(args[0], what)
    return [_as_int(a, what) for a in args]


def _check_tensor(x: Any, what: str, op_name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op_name}(): argument '{what}' must be Tensor, not {type(x).__name__}")
    return x


def _tensor_list(tensors: Any, op_name: str) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence):
        raise TypeError(f"{op_name}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return list(tensors)


def _dim_size(t: Tensor, d: int) -> int:
    """Size of dim ``d``; a 0-d tensor acts as one element along dim 0."""
    return t._shape[d] if t._shape else 1


def _promote_all(tensors: list[Tensor]) -> D.dtype:
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = D.promote_types(dt, t.dtype)
    return dt


# -- validation helpers ------------------------------------------------------------------------
def device_checks_indices(index: Tensor) -> bool:
    """Whether the index kernels that ``index`` feeds check it on the device: CUDA's record a
    bad index in the device's error record (kernels/cuda/errors.py), raised at the next
    synchronising point as PyTorch's device-side assert, so the frontends skip the host check
    that would make every gather, scatter and indexing op wait for the GPU."""
    return index._storage.device.type == "cuda"


def _minmax(t: Tensor) -> tuple[Any, Any]:
    """(min, max) of a non-empty tensor as Python numbers."""
    if t._storage.device.type == "cpu" and t.numel() <= 4096:
        h = t._host  # small index tensors (a batch of rows): NumPy without the reduction plan
        return h.min().item(), h.max().item()
    lo, hi = aminmax(t)
    return lo.item(), hi.item()


def _check_index_dtype(index: Tensor, message: str, *, long_only: bool = False,
                       exc: type = RuntimeError) -> None:
    allowed = (D.int64,) if long_only else _INDEX_DTYPES
    if index.dtype not in allowed:
        raise exc(message.format(dtype=index.dtype.legacy_name))


def _check_bounds(index: Tensor, size: int, dim: int, *, wrap: bool = False,
                  prefix: str = "", error: type[Exception] = IndexError,
                  device_checked: bool = False) -> bool:
    """Raise ``error`` unless every index lies in [0, size) ([-size, size) with ``wrap``);
    gather/scatter raise RuntimeError there, as PyTorch's do.

    Returns whether any index may be negative (wraps). A compiled function replays the check.
    ``device_checked``: the op's CUDA kernel checks (and wraps) each index itself, so a CUDA
    index is not read back here (see :func:`device_checks_indices`).
    """
    if index.numel() == 0:
        return False
    if device_checked and device_checks_indices(index):
        return wrap
    return replayable_check(_bounds_outcome, index, size, dim, wrap, prefix, error)


def _bounds_outcome(index: Tensor, size: int, dim: int, wrap: bool, prefix: str,
                    error: type[Exception] = IndexError) -> bool:
    lo, hi = _minmax(index)
    if hi >= size or lo < (-size if wrap else 0):
        bad = hi if hi >= size else lo
        raise error(f"{prefix}index {bad} is out of bounds for dimension {dim} with size "
                    f"{size}")
    return lo < 0


def _check_mask(mask: Any, op_name: str, message: str) -> Tensor:
    _check_tensor(mask, "mask", op_name)
    if mask.dtype is not D.bool:
        raise RuntimeError(message.format(dtype=mask.dtype.name))
    return mask


def _alloc(out: Tensor | None, shape: tuple[int, ...], dtype: D.dtype, dev: Device,
           op_name: str) -> Tensor:
    """A fresh result, or ``out`` after checking it (these ops need the exact dtype)."""
    if out is None:
        return empty(tuple(shape), dtype, dev)
    _check_tensor(out, "out", op_name)
    check_out(out, tuple(shape), dtype, dev, op_name, exact_dtype=True)
    return out


def _written(result: Tensor, out: Tensor | None) -> Tensor:
    if out is not None:
        out._storage._version += 1
    return result


def _copy_out(result: Tensor, out: Tensor | None, op_name: str) -> Tensor:
    """For ops whose size depends on the data: copy the fresh result into ``out``."""
    if out is None:
        return result
    dst = _alloc(out, result._shape, result.dtype, result.device, op_name)
    strided_copy(dst, result)
    return _written(dst, out)


def _zeros(shape: tuple[int, ...], dtype: D.dtype, dev: Device) -> Tensor:
    t = empty(tuple(shape), dtype, dev)
    t.fill_(0)
    t._storage._version = 0
    return t


def _expanded_copy(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A new contiguous tensor holding ``t`` broadcast to ``shape``."""
    result = empty(tuple(shape), t.dtype, t.device)
    strided_copy(result, t)
    return result


def _scalar_value(value: Any, op_name: str) -> Any:
    """A fill value: a Python number or a 0-dim tensor."""
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"{op_name} only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.dim()} dimension(s).")
        return value.item()
    if not isinstance(value, int | float | complex | bool | np.number | np.bool_):
        raise TypeError(f"{op_name}(): value must be a number or a 0-dim tensor, got "
                        f"{type(value).__name__}")
    return value


def _bump(t: Tensor) -> Tensor:
    t._storage._version += 1
    return t


# == joining ===================================================================================
@op(method=False, aliases=("concat", "concatenate"),
    grad={"tensors": "_cat_backward(g, tensors_shape, dim if axis is None else axis)"},
    jvp="auto_linear")
def cat(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None,
        out: Tensor | None = None) -> Tensor:
    """Join tensors along an existing dim; 1-d empty tensors are skipped, as in PyTorch."""
    if axis is not None:
        dim = axis
    tensors = _tensor_list(tensors, "cat")
    if not tensors:
        raise ValueError("cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               f"concatenated")
    dt = _promote_all(tensors)
    if type(dt) is D._LimitedDtype:  # uint16, float8, ...: the carrier's bits are joined
        from gputensor._limited import carrier, reinterpret
        joined = cat([reinterpret(t, carrier(dt)) for t in tensors], dim, out=None if out is None
                     else reinterpret(out, carrier(dt)))
        return out if out is not None else reinterpret(joined, dt)
    dev = common_device(*tensors, op_name="cat")
    parts = [(i, t) for i, t in enumerate(tensors) if t._shape != (0,)]
    if not parts:
        d, shape = normalize_dim(dim, 1), (0,)
    else:
        d, shape = _cat_shape(parts, dim)
    result = empty(shape, dt, dev) if out is None else out
    if out is not None:
        check_out(out, shape, dt, dev, "cat")
    inputs = [t for _, t in parts if t.numel()]
    if result.numel() and inputs:
        kernel(result, "cat")(result, inputs, d)
    return _written(result, out)


def _cat_shape(parts: list[tuple[int, Tensor]], dim: int) -> tuple[int, tuple[int, ...]]:
    ref = parts[0][1]
    nd = ref.dim()
    d = normalize_dim(dim, nd)
    total = 0
    for i, t in parts:
        if t.dim() != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                               f"{t.dim()}")
        for k in range(nd):
            if k != d and t._shape[k] != ref._shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                                   f"Expected size {ref._shape[k]} but got size {t._shape[k]} "
                                   f"for tensor number {i} in the list.")
        total += t._shape[d]
    return d, ref._shape[:d] + (total,) + ref._shape[d + 1:]


@op(method=False)
def _cat_backward(grad: Tensor, shapes: list[tuple[int, ...]], dim: int) -> list[Tensor]:
    """cat's gradient: one view of ``grad`` per input (the 1-d empty inputs cat skipped get
    empty gradients)."""
    skipped = [s == (0,) and grad.dim() != 1 for s in shapes]
    d = normalize_dim(dim, grad.dim())
    pieces = iter(split_with_sizes(grad, [s[d] for s, skip in zip(shapes, skipped, strict=True)
                                          if not skip], d))
    return [_zeros((0,), grad.dtype, grad.device) if skip else next(pieces) for skip in skipped]


@op(method=False, grad={"tensors": "unbind(g, dim)"}, jvp="auto_linear")
def stack(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor:
    """Join equally-shaped tensors along a new dim."""
    tensors = _tensor_list(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    ref = tensors[0]
    d = normalize_dim(dim, ref.dim() + 1)   # before the shapes, as in PyTorch
    for i, t in enumerate(tensors[1:], 1):
        if t._shape != ref._shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(ref._shape)} at entry 0 and {list(t._shape)} at entry {i}")
    return cat([_unsqueezed(t, d) for t in tensors], d, out=out)


def _unsqueezed(t: Tensor, d: int) -> Tensor:
    """``t`` with a new size-1 dim at ``d`` (a bare view: stack's own node covers the graph,
    and collating a batch stacks many small tensors)."""
    shape, stride = list(t._shape), list(t._stride)
    stride.insert(d, shape[d] * stride[d] if d < len(shape) else 1)
    shape.insert(d, 1)
    return t._view(tuple(shape), tuple(stride), t._offset)


def _atleast(t: Tensor, n: int) -> Tensor:
    """atleast_1d/2d/3d: 1-d (k,) -> (1, k) -> (1, k, 1); 2-d (m, k) -> (m, k, 1)."""
    nd = t.dim()
    if nd >= n:
        return t
    if nd == 0:
        return reshape(t, (1,) * n)
    if nd == 1:
        return reshape(t, (1, t._shape[0]) + ((1,) if n == 3 else ()))
    return unsqueeze(t, -1)


@op(method=False)
def hstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Concatenate column-wise (along dim 0 for 1-d inputs, else dim 1)."""
    ts = [_atleast(t, 1) for t in _tensor_list(tensors, "hstack")]
    if not ts:
        raise ValueError("hstack(): expected a non-empty list of Tensors")
    return cat(ts, 0 if ts[0].dim() == 1 else 1, out=out)


@op(method=False, aliases=("row_stack",))
def vstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Concatenate row-wise after making every input at least 2-d."""
    return cat([_atleast(t, 2) for t in _tensor_list(tensors, "vstack")], 0, out=out)


@op(method=False)
def dstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Concatenate depth-wise (dim 2) after making every input at least 3-d."""
    return cat([_atleast(t, 3) for t in _tensor_list(tensors, "dstack")], 2, out=out)


@op(method=False)
def column_stack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """Stack 0-d/1-d inputs as columns, concatenating others along dim 1."""
    ts = _tensor_list(tensors, "column_stack")
    ts = [reshape(t, (t.numel(), 1)) if t.dim() <= 1 else t for t in ts]
    return cat(ts, 1, out=out)


# == splitting (views) =========================================================================
def _split_sizes(tensor: Tensor, sizes: list[int], d: int) -> tuple[Tensor, ...]:
    """Views of consecutive pieces of validated ``sizes`` along dim ``d``, made directly (the
    callers record their own derivative, so per-piece ``narrow`` calls would only cost)."""
    out, start = [], tensor._offset
    shape, stride, step = list(tensor._shape), tensor._stride, tensor._stride[d]
    for s in sizes:
        shape[d] = s
        out.append(tensor._view(tuple(shape), stride, start))
        start += s * step
    return tuple(out)


def _need_dims(tensor: Tensor, op_name: str) -> None:
    if tensor.dim() == 0:
        raise RuntimeError(f"{op_name} expects at least a 1-dimensional tensor")


@op(method=False)
def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of equal chunks of ``split_size`` (the last may be smaller) or of given sizes."""
    if not _is_int(split_size_or_sections) and not (
            isinstance(split_size_or_sections, Tensor) and split_size_or_sections.dim() == 0):
        return split_with_sizes(tensor, split_size_or_sections, dim)
    _need_dims(tensor, "split")
    d = normalize_dim(dim, tensor.dim())
    s = _as_int(split_size_or_sections, "split_size")
    n = tensor._shape[d]
    if s < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={s}")
    if s == 0 and n != 0:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {n}")
    count = max(-(-n // s), 1) if s else 1
    return split_with_sizes(tensor, [min(s, n - i * s) for i in range(count)], d)


@tensor_method("split")
def _split_method(self: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """``Tensor.split(split_size, dim)``: PyTorch names the method's argument split_size."""
    return split(self, split_size, dim)


@op(grad={"input": "cat(grads, dim)"}, jvp="auto_linear")
def split_with_sizes(input: Tensor, split_sizes: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of consecutive pieces with the given sizes (which must sum to the dim size)."""
    _need_dims(input, "split_with_sizes")
    sizes = _int_list(split_sizes, "split_sizes")
    d = normalize_dim(dim, input.dim())
    n = input._shape[d]
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative entries, "
                           f"but got split_sizes={sizes}")
    if sum(sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    return _split_sizes(input, sizes, d)


@op()
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``chunks`` views of ceil(size / chunks) (fewer if the size runs out)."""
    _need_dims(input, "chunk")
    chunks = _as_int(chunks, "chunks")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = normalize_dim(dim, input.dim())
    n = input._shape[d]
    if n == 0:
        return split_with_sizes(input, [0] * chunks, d)
    return split(input, -(-n // chunks), d)


@op()
def tensor_split(input: Tensor, indices_or_sections: Any = None, dim: int = 0, *,
                 sections: Any = None, indices: Any = None) -> tuple[Tensor, ...]:
    """Views split into ``sections`` near-equal parts, or at the given ``indices``."""
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    arg = next((a for a in (indices_or_sections, sections, indices) if a is not None), None)
    if arg is None:
        raise TypeError("tensor_split() missing required argument 'indices_or_sections'")
    if isinstance(arg, Tensor):
        if arg.dtype is not D.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {arg.dtype.legacy_name}")
        if arg.dim() > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                               f"zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {arg.dim()} dims")
        arg = arg.item() if arg.dim() == 0 else arg.tolist()
    d = normalize_dim(dim, input.dim())
    n = input._shape[d]
    if _is_int(arg) and indices is None:
        s = int(arg)
        if s <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {s}")
        base, extra = divmod(n, s)
        return split_with_sizes(input, [base + (i < extra) for i in range(s)], d)
    spans, prev = [], 0
    for stop in _int_list(arg, "indices") + [n]:
        start, end, _ = slice(prev, stop).indices(n)
        spans.append((start, max(end - start, 0)))
        prev = stop
    if sum(length for _, length in spans) == n:
        # Consecutive pieces (sorted indices): one split node, whose gradient is one cat.
        return split_with_sizes(input, [length for _, length in spans], d)
    return tuple(narrow(input, d, start, length) for start, length in spans)


def _split_axis(input: Tensor, arg: Any, d: int, name: str) -> tuple[Tensor, ...]:
    if _is_int(arg):
        n = input._shape[d]
        if arg == 0 or n % arg:
            raise RuntimeError(f"{name} attempted to split along dimension {d}, but the size "
                               f"of the dimension {n} is not divisible by the split_size {arg}!")
    return tensor_split(input, arg, d)


def _need_ndim(input: Tensor, n: int, name: str) -> None:
    if input.dim() < n:
        raise RuntimeError(f"{name} requires a tensor with at least {n} dimension, but got a "
                           f"tensor with {input.dim()} dimensions!")


@op()
def hsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    _need_ndim(input, 1, "hsplit")
    return _split_axis(input, indices_or_sections, 1 if input.dim() > 1 else 0, "hsplit")


@op()
def vsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    _need_ndim(input, 2, "vsplit")
    return _split_axis(input, indices_or_sections, 0, "vsplit")


@op()
def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    _need_ndim(input, 3, "dsplit")
    return _split_axis(input, indices_or_sections, 2, "dsplit")


# == gathering ==================================================================================
@op(grad={"input": "_index_select_backward(g, input_shape, dim, index)"}, jvp="auto_linear")
def index_select(input: Tensor, dim: int, index: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Entries of ``input`` at ``index`` (a vector, no negative values) along ``dim``."""
    _check_tensor(index, "index", "index_select")
    d = normalize_dim(dim, input.dim())   # the dim first, as in PyTorch
    _check_index_dtype(index, "index_select(): Expected dtype int32 or int64 for index")
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    dev = common_device(input, index, op_name="index_select")
    if input.dim() == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{index.numel()} value(s)")
    if index.numel() and input.dim() > 1 and not input._shape[d]:   # PyTorch's n-d check
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    _check_bounds(index, _dim_size(input, d), d, prefix="index_select(): ", device_checked=True)
    shape = input._shape[:d] + (index.numel(),) + input._shape[d + 1:] if input.dim() else ()
    if out is not None and out.dtype is not input.dtype:
        raise RuntimeError("index_select(): self and result must have the same scalar type")
    result = _alloc(out, shape, input.dtype, dev, "index_select")
    if result.numel():
        kernel(result, "index_select")(result, input, d, index)
    return _written(result, out)


@op(method=False, grad={"grad": "g.index_select(dim, index)"}, jvp="auto_linear")
def _index_select_backward(grad: Tensor, shape: tuple[int, ...], dim: int,
                           index: Tensor) -> Tensor:
    """Zeros of ``shape`` with the slices of ``grad`` added at ``index`` along ``dim``
    (index_select's gradient; duplicates accumulate). The index was checked by the forward."""
    out = _zeros(tuple(shape), grad.dtype, grad.device)
    if index.numel() and out.numel():
        kernel(out, "index_add")(out, normalize_dim(dim, len(shape)), index, grad, 1)
    return out


def _check_gather_shapes(input: Tensor, d: int, index: Tensor) -> None:
    if max(index.dim(), 1) != max(input.dim(), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(index.dim()):
        if k != d and index._shape[k] > input._shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index "
                               f"{list(index._shape)} to be no larger than self "
                               f"{list(input._shape)} apart from dimension {d}")


@op(grad={"input": "_gather_backward(g, input_shape, dim, index)"}, jvp="auto_linear")
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False,
           out: Tensor | None = None) -> Tensor:
    """out[i][j][k] = input[index[i][j][k]][j][k] (for dim=0); the result has index's shape."""
    _check_tensor(index, "index", "gather")
    d = normalize_dim(dim, input.dim())  # PyTorch: the dim first; no dtype rule for no index
    dev = common_device(input, index, op_name="gather")
    if index.numel():
        _check_index_dtype(index, "gather(): Expected dtype int32/int64 for index")
        _check_gather_shapes(input, d, index)
        _check_bounds(index, _dim_size(input, d), d, error=RuntimeError, device_checked=True)
    result = _alloc(out, index._shape, input.dtype, dev, "gather")
    if result.numel():
        kernel(result, "gather")(result, input, d, index)
    return _written(result, out)


@op(method=False, grad={"grad": "g.gather(dim, index)"}, jvp="auto_linear")
def _gather_backward(grad: Tensor, shape: tuple[int, ...], dim: int, index: Tensor) -> Tensor:
    """Zeros of ``shape`` with ``grad`` added at ``index`` along ``dim`` (gather's gradient,
    and sort/topk/kthvalue's through their indices). The index was checked by the forward."""
    out = _zeros(tuple(shape), grad.dtype, grad.device)
    if index.numel():
        kernel(out, "scatter_reduce")(out, normalize_dim(dim, len(shape)), index, grad, "sum",
                                      True)
    return out


@op(grad={"input": "_take_backward(g, input_shape, index)"}, jvp="auto_linear")
def take(input: Tensor, index: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Entries of the flattened input at ``index`` (negative values count from the end)."""
    _check_tensor(index, "index", "take")
    _check_index_dtype(index, "take(): Expected a long tensor for index, but got {dtype}",
                       long_only=True)
    dev = common_device(input, index, op_name="take")
    n = input.numel()
    if n == 0 and index.numel():
        raise IndexError("take(): tried to take from an empty tensor")
    _check_bounds(index, n, 0, wrap=True, prefix="take(): (on the flattened input) ",
                  device_checked=True)
    result = _alloc(out, index._shape, input.dtype, dev, "take")
    if result.numel():
        kernel(result, "take")(result, input, index)
    return _written(result, out)


@op(method=False, grad={"grad": "g.take(index)"}, jvp="auto_linear")
def _take_backward(grad: Tensor, shape: tuple[int, ...], index: Tensor) -> Tensor:
    """Zeros of ``shape`` with ``grad`` added at the flat positions ``index`` (take's
    gradient; negative indices count from the end and duplicates accumulate)."""
    flat = _zeros((math.prod(shape),), grad.dtype, grad.device)
    if index.numel():
        kernel(flat, "_index_put")(flat, [index], grad, True)
    return reshape(flat, tuple(shape))


@op()
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None, *,
                   out: Tensor | None = None) -> Tensor:
    """Gather along ``dim`` after broadcasting input and indices (flattened when dim is None)."""
    _check_tensor(indices, "indices", "take_along_dim")
    if dim is None:  # as in PyTorch, gather checks the index dtype here: int32 passes
        return gather(reshape(input, -1), 0, reshape(indices, -1), out=out)
    # PyTorch's order: the ranks, the index dtype, the dim's range, then a 0-d input's error
    if input.dim() != indices.dim():
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number "
                           f"of dimensions, but got {input.dim()} dimensions for input, and "
                           f"{indices.dim()} dimensions for indices")
    _check_index_dtype(indices, "take_along_dim(): dtype of indices should be Long but got "
                       "{dtype}", long_only=True)
    d = normalize_dim(dim, input.dim())
    if input.dim() == 0:  # a dim in range still names no dimension
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    size = input._shape[d]
    sizes = list(input._shape)
    sizes[d] = indices._shape[d]
    shape = broadcast_shapes(tuple(sizes), indices._shape)  # (its error before the range's)
    if _check_bounds(indices, size, d, wrap=True):
        indices = indices + (indices < 0) * size  # wrap negatives; gather sees 0 <= i < size
    sizes = list(shape)
    sizes[d] = size
    return gather(expand(input, sizes), d, expand(indices, shape), out=out)


# == flips, rolls, rotations =====================================================================
@op(grad={"input": "flip(g, *dims)"}, jvp="auto_linear")
def flip(input: Tensor, *dims: Any) -> Tensor:
    """A copy of input reversed along ``dims``."""
    ds = dims_one_at_a_time(_varargs_ints(dims, "dims"), input.dim())
    ds = ds if input.dim() else []
    result = empty(input._shape, input.dtype, input.device)
    if result.numel():
        kernel(input, "flip")(result, input, ds)
    return result


@op()
def fliplr(input: Tensor) -> Tensor:
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


@op()
def flipud(input: Tensor) -> Tensor:
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


@op(grad={"input": "_roll_backward(g, shifts, dims)"}, jvp="auto_linear")
def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Rotate elements along ``dims`` by ``shifts``; without dims, along the flattened tensor."""
    shifts = _int_list(shifts, "shifts")
    dims = [] if dims is None else _int_list(dims, "dims")
    if not dims:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return reshape(roll(reshape(input, -1), shifts, [0]), input._shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    if input.dim() == 0:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    ds = [normalize_dim(d, input.dim()) for d in dims]
    result = empty(input._shape, input.dtype, input.device)
    if result.numel():
        kernel(input, "roll")(result, input, shifts, ds)
    return result


@op(method=False, grad={"grad": "roll(g, shifts, dims)"}, jvp="auto_linear")
def _roll_backward(grad: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """roll's gradient: the roll by the opposite shifts."""
    return roll(grad, [-s for s in _int_list(shifts, "shifts")], dims)


@op()
def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from dims[0] towards dims[1])."""
    dims = _int_list(dims, "dims")
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = (normalize_dim(d, input.dim()) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    k = _as_int(k, "k") % 4
    if k == 1:
        return transpose(flip(input, [d1]), d0, d1)
    if k == 2:
        return flip(input, [d0, d1])
    if k == 3:
        return transpose(flip(input, [d0]), d0, d1)
    return clone(input)


# == repeats =====================================================================================
@tensor_method()
@op(function=False, grad={"self": "_repeat_backward(g, self_shape, sizes)"}, jvp="auto_linear")
def repeat(self: Tensor, *sizes: Any) -> Tensor:
    """Tensor.repeat: tile the tensor ``sizes[i]`` times along each dim (new dims lead)."""
    if not sizes:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    reps = parse_size(sizes)
    nd = self.dim()
    if len(reps) < nd:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    padded = (1,) * (len(reps) - nd) + self._shape
    shape = tuple(r * s for r, s in zip(reps, padded, strict=True))
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    result = empty(shape, self.dtype, self.device)
    if result.numel():
        kernel(self, "repeat")(result, self, reps)
    return result


@op(method=False)
def _repeat_backward(grad: Tensor, shape: tuple[int, ...], sizes: tuple) -> Tensor:
    """Tensor.repeat's gradient: the sum over the copies (grad seen as (r0, s0, r1, s1, ...)
    summed over the r dims)."""
    reps = parse_size(sizes)
    padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
    inter = [n for r, s in zip(reps, padded, strict=True) for n in (r, s)]
    summed = reshape(grad, inter).sum(list(range(0, len(inter), 2))) if inter else grad
    return reshape(summed, tuple(shape))


@op()
def tile(input: Tensor, dims: Any) -> Tensor:
    """Like Tensor.repeat, with ``dims`` padded by leading 1s to input's number of dims."""
    reps = _int_list(dims, "dims")
    return repeat(input, [1] * (input.dim() - len(reps)) + reps)


def _check_repeats_tensor(repeats: Tensor, op_name: str) -> None:
    if repeats.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"{op_name}(): repeats must be an int32 or int64 tensor, got "
                           f"{repeats.dtype}")
    if repeats.numel() and _minmax(repeats)[0] < 0:
        raise RuntimeError("repeats can not be negative")


@op(grad={"input": "_repeat_interleave_backward(g, input_shape, repeats, dim)"}, jvp="auto_linear")
def repeat_interleave(input: Tensor, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Repeat each element (or slice along ``dim``) ``repeats`` times, in place order.

    With a single tensor argument, returns the indices 0..n-1 each repeated repeats[i] times.
    """
    if repeats is None:
        _check_tensor(input, "repeats", "repeat_interleave")
        if input.dim() > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        _check_repeats_tensor(input, "repeat_interleave")
        from .creation import arange
        idx = arange(input.numel(), dtype=input.dtype, device=input.device)
        return repeat_interleave(idx, input, 0, output_size=output_size)
    if dim is None:
        input, d = reshape(input, -1), 0
    else:
        d = normalize_dim(dim, input.dim())
        if input.dim() == 0:    # a dim of a 0-d tensor is refused (before the repeats)
            from .views import _no_dims
            raise _no_dims(dim)
    n = input._shape[d]
    if isinstance(repeats, Tensor):
        common_device(input, repeats, op_name="repeat_interleave")
        if repeats.dim() > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        _check_repeats_tensor(repeats, "repeat_interleave")
        if repeats.numel() != 1:
            if repeats.numel() != n:
                raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                                   f"repeats.size(0) = {repeats.numel()} and input.size({d}) = {n}")
            result = kernel(input, "repeat_interleave")(input, repeats, d)
            _check_output_size(output_size, result._shape[d])
            return result
        repeats = repeats.item()
    r = _as_int(repeats, "repeats")
    if r < 0:
        raise RuntimeError("Repeats must be non-negative")
    _check_output_size(output_size, n * r)
    # Each slice repeated r times in a row: a broadcast view made contiguous.
    shape = input._shape[:d + 1] + (r,) + input._shape[d + 1:]
    rep = clone(expand(unsqueeze(input, d + 1), shape))
    return reshape(rep, input._shape[:d] + (n * r,) + input._shape[d + 1:])


@op(method=False)
def _repeat_interleave_backward(grad: Tensor, shape: tuple[int, ...], repeats: Any,
                                dim: int | None) -> Tensor:
    """repeat_interleave's gradient: each input slice gets the sum of its copies."""
    flat = dim is None or not shape
    size = (math.prod(shape),) if flat else tuple(shape)
    d = 0 if flat else normalize_dim(dim, len(shape))
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        result = _index_select_backward(grad, size, d, repeat_interleave(repeats))
    else:
        r = _as_int(repeats, "repeats")
        result = reshape(grad, size[:d] + (size[d], r) + size[d + 1:]).sum(d + 1)
    return reshape(result, tuple(shape))


def _check_output_size(output_size: int | None, size: int) -> None:
    if output_size is not None and output_size != size:
        raise RuntimeError("allocated size does not match required size")


# == triangles and diagonals =====================================================================
def _tri(input: Tensor, diagonal: int, out: Tensor | None, name: str, inplace: bool) -> Tensor:
    if input.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    k = _as_int(diagonal, "diagonal")
    result = input if inplace else _alloc(out, input._shape, input.dtype, input.device, name)
    if result.numel():
        kernel(input, name)(result, input, k)
    return _bump(result) if inplace else _written(result, out)


def tril_(self: Tensor, diagonal: int = 0) -> Tensor:
    if needs_graph(self, (), {}):
        return apply_inplace(self, lambda: tril(self, diagonal))
    return _tri(self, diagonal, None, "tril", True)


def triu_(self: Tensor, diagonal: int = 0) -> Tensor:
    if needs_graph(self, (), {}):
        return apply_inplace(self, lambda: triu(self, diagonal))
    return _tri(self, diagonal, None, "triu", True)


@op(inplace=True, inplace_fn=tril_, grad={"input": "g.tril(diagonal)"}, jvp="auto_linear")
def tril(input: Tensor, diagonal: int = 0, *, out: Tensor | None = None) -> Tensor:
    """The lower triangle of the last two dims (elements above ``diagonal`` set to 0)."""
    return _tri(input, diagonal, out, "tril", False)


@op(inplace=True, inplace_fn=triu_, grad={"input": "g.triu(diagonal)"}, jvp="auto_linear")
def triu(input: Tensor, diagonal: int = 0, *, out: Tensor | None = None) -> Tensor:
    """The upper triangle of the last two dims (elements below ``diagonal`` set to 0)."""
    return _tri(input, diagonal, out, "triu", False)


@op(grad={"input": "g.diagonal(diagonal) if len(input_shape) == 1 else "
                   "into_zeros(g, input_shape, lambda z: z.diagonal(diagonal))"}, jvp="auto_linear")
def diag(input: Tensor, diagonal: int = 0, *, out: Tensor | None = None) -> Tensor:
    """1-d input: a square matrix with input on a diagonal; 2-d input: a diagonal's copy."""
    if input.dim() not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")
    k = _as_int(diagonal, "diagonal")
    if input.dim() == 2:
        src = diagonal_view(input, k)
        result = _alloc(out, src._shape, input.dtype, input.device, "diag")
        strided_copy(result, src)
        return _written(result, out)
    n = input._shape[0] + abs(k)
    if out is None:
        result = _zeros((n, n), input.dtype, input.device)
    else:
        result = _alloc(out, (n, n), input.dtype, input.device, "diag")
        result.fill_(0)
    strided_copy(diagonal_view(result, k), input)
    return result


@op(grad={"input": "g.diagonal(offset, dim1, dim2)"}, jvp="auto_linear")
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Place the last dim of input on the (dim1, dim2) diagonal of new zero matrices."""
    nd = input.dim() + 1
    d1, d2 = normalize_dim(dim1, nd), normalize_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _as_int(offset, "offset")
    n = input._shape[-1] + abs(offset)
    shape = list(input._shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    result = _zeros(tuple(shape), input.dtype, input.device)
    strided_copy(diagonal_view(result, offset, d1, d2), input)
    return result


@op()
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square matrix with the flattened input on diagonal ``offset``."""
    return diag(reshape(input, -1), offset)


# == padding =====================================================================================
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


@op(method=False, grad={"input": "_pad_backward(g, input_shape, pad, mode)"},
    jvp="pad_jvp(input_t, pad, mode)")
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """Pad the last len(pad)//2 dims: pad = (left_last, right_last, left_prev, right_prev, ...).

    Negative pads crop. Modes: 'constant' (with ``value``), 'reflect', 'replicate', 'circular'.
    """
    pads = _int_list(pad, "pad")
    nd = input.dim()
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pads) // 2 > nd:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pads)} and input of "
                           f"dimension {nd}")
    if mode not in _PAD_MODES:
        raise RuntimeError(f"Unrecognised padding mode {mode}")
    widths = [(0, 0)] * nd
    for i in range(len(pads) // 2):
        widths[nd - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    if mode != "constant":
        _check_pad_mode(input, pads, widths, mode, value)
    shape = tuple(s + lo + hi for s, (lo, hi) in zip(input._shape, widths, strict=True))
    for d, s in enumerate(shape):
        if s < 0:
            raise RuntimeError(f"pad(): the padding {tuple(widths[d])} gives dimension {d} of "
                               f"input {list(input._shape)} a negative size {s}")
    fill = 0 if value is None else _scalar_value(value, "pad")
    result = empty(shape, input.dtype, input.device)
    if result.numel():
        kernel(input, "pad")(result, input, widths, mode, fill)
    return result


@op(method=False, grad={"grad": "pad(g, pads, mode)"}, jvp="auto_linear")
def _pad_backward(grad: Tensor, shape: tuple[int, ...], pads: Sequence[int],
                  mode: str = "constant") -> Tensor:
    """pad's gradient. Constant padding: the padded border cropped away (and cropped parts
    padded back with zeros). Other modes: every output element's gradient added to the input
    element it copies, found by padding the input's flat positions the same way."""
    widths = _int_list(pads, "pad")
    if mode == "constant":
        return pad(grad, [-w for w in widths])
    from .creation import arange
    n = math.prod(shape)
    source = pad(reshape(arange(n, device=grad.device), tuple(shape)), widths, mode)
    out = _zeros((n,), grad.dtype, grad.device)
    if n:
        kernel(out, "index_add")(out, 0, reshape(source, -1), reshape(grad, -1), 1)
    return reshape(out, tuple(shape))


def _check_pad_mode(input: Tensor, pads: list[int], widths: list[tuple[int, int]], mode: str,
                    value: Any) -> None:
    nd, k = input.dim(), len(pads) // 2
    if value is not None:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if k not in (1, 2, 3) or nd not in (k + 1, k + 2):
        raise RuntimeError(f"Padding size {len(pads)} is not supported for {nd}D input tensor.")
    first = 1 if nd == k + 2 else 0  # a leading batch dim may be empty
    if any(s == 0 for s in input._shape[first:]):
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: "
                           f"{list(input._shape)}")
    for d in range(nd - k, nd):
        lo, hi = widths[d]
        size = input._shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension "
                               f"{d} of input {list(input._shape)}")
        kept = size - max(-lo, 0) - max(-hi, 0)  # circular wraps within the uncropped part
        if mode == "circular" and (lo > kept or hi > kept):
            raise RuntimeError("Padding value causes wrapping around more than once.")


# == grids and broadcasting ======================================================================
@op(method=False)
def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids (broadcast views) from 0-d/1-d tensors; indexing 'ij' (default) or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    ts = _tensor_list(tensors, "meshgrid")
    if not ts:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in ts:
        if t.dim() > 1:
            raise RuntimeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got a "
                               f"tensor of shape {list(t._shape)}")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if t.device != ts[0].device:
            raise RuntimeError("meshgrid expects all tensors to have the same device")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f'{indexing}')
    n = len(ts)
    pos = list(range(n))
    if indexing == "xy" and n >= 2:
        pos[0], pos[1] = 1, 0  # 'xy' swaps the roles of the first two inputs
    shape = [1] * n
    for t, p in zip(ts, pos, strict=True):
        shape[p] = t.numel()
    return tuple(expand(reshape(t, tuple(shape[k] if k == p else 1 for k in range(n))), shape)
                 for t, p in zip(ts, pos, strict=True))


def _broadcast_tensors_backward(grads: list[Tensor],
                                tensors_shape: list[tuple[int, ...]]) -> list[Tensor]:
    """Each input's gradient: its output's gradient summed back over the broadcast dims
    (None for an output that got no gradient)."""
    return [None if g is None else sum_to(g, s)
            for g, s in zip(grads, tensors_shape, strict=True)]


@op(method=False, grad={"tensors": _broadcast_tensors_backward}, jvp="auto_linear")
def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Views of the tensors expanded to their common broadcast shape."""
    ts = _tensor_list(tensors, "broadcast_tensors")
    shape = broadcast_shapes(*(t._shape for t in ts))
    return tuple(expand(t, shape) for t in ts)


@op(method=False)
def cartesian_prod(*tensors: Tensor) -> Tensor:
    """The cartesian product of 1-d tensors as an (N, len(tensors)) tensor (1-d for one)."""
    ts = _tensor_list(tensors, "cartesian_prod")
    for t in ts:
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t._shape)}")
    if len(ts) == 1:
        return ts[0]
    return stack([reshape(g, -1) for g in meshgrid(ts, indexing="ij")], 1)


def _check_diff_operand(t: Tensor, input: Tensor, d: int) -> None:
    if t.dim() != input.dim():
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    for k in range(input.dim()):
        if k != d and t.shape[k] != input.shape[k]:
            raise RuntimeError(f"diff expects the shape of tensor to prepend or append to match "
                               f"that of input except along the differencing dimension; "
                               f"input.size({k}) = {input.shape[k]}, but got tensor.size({k}) = "
                               f"{t.shape[k]}")


@op()
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along ``dim`` (``prepend``/``append`` joined first); bool
    inputs differ by xor, as in PyTorch."""
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    if n == 0 and prepend is None and append is None:
        return input.clone()  # PyTorch returns before it looks at dim
    d = normalize_dim(dim, input.dim())
    for t in (prepend, append):
        if t is not None:
            _check_diff_operand(t, input, d)
    if n == 0:    # PyTorch returns a copy of the input: prepend/append are checked, not joined
        return input.clone()
    x = cat([t for t in (prepend, input, append) if t is not None], d) \
        if prepend is not None or append is not None else input
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        hi, lo = narrow(x, d, 1, size - 1), narrow(x, d, 0, size - 1)
        x = hi ^ lo if x.dtype is D.bool else hi - lo
    return x
