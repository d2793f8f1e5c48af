"""View ops: new shape/stride/offset metadata over the same storage (no data is copied)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor, contiguous_strides, normalize_dim, parse_size
from gputensor.autograd.grad_mode import is_grad_enabled

from ._core import as_index_list, op, tensor_method


def _infer_size(shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    if -1 not in shape and math.prod(shape) == numel and (not shape or min(shape) >= 0):
        return tuple(shape)  # the common case, checked in one pass
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise RuntimeError(f"invalid shape dimension in {list(shape)}")
    known = math.prod(s for s in shape if s != -1)
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[:neg[0]] + (numel // known,) + shape[neg[0] + 1:]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _view_strides(old_shape: tuple, old_stride: tuple, new_shape: tuple) -> tuple | None:
    """Strides for viewing (old_shape, old_stride) as new_shape, or None if impossible.

    Walks chunks of old dims that are contiguous with each other and matches them with runs of
    new dims of the same element count (PyTorch's computeStride).
    """
    numel = math.prod(old_shape)
    if numel == 0 or not old_shape:
        return contiguous_strides(new_shape)  # empty or 0-d: any same-numel shape is a view
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_stride[-1] if old_stride else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1 and
                             old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_stride)


@op(function=False, grad={"self": "g.reshape(self_shape)"}, jvp="auto_linear")
def view(self: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        return _view_dtype(self, shape[0])
    new_shape = _infer_size(parse_size(shape), self.numel())
    # a contiguous tensor views as any same-size shape with contiguous strides
    strides = contiguous_strides(new_shape) if self._stride == contiguous_strides(self._shape) \
        else _view_strides(self._shape, self._stride, new_shape)
    if strides is None:
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride "
                           f"(size {list(self._shape)}, stride {list(self._stride)} -> "
                           f"{list(new_shape)}): at least one dimension spans across two "
                           f"contiguous subspaces. Use .reshape(...) instead.")
    return self._view(new_shape, strides, self._offset)


def _view_dtype(self: Tensor, dt: Any) -> Tensor:
    if dt.itemsize != self._dtype.itemsize:
        raise RuntimeError(f"view({dt}) needs the same element size as {self._dtype} "
                           f"({dt.itemsize} != {self._dtype.itemsize})")
    out = Tensor._make(self._storage, dt, self._shape, self._stride, self._offset)
    out._base = self
    return out


@op(grad={"input": "g.reshape(input_shape)"}, jvp="auto_linear")
def reshape(input: Tensor, *shape: Any) -> Tensor:
    """A view when the strides allow it, otherwise a contiguous copy."""
    new_shape = _infer_size(parse_size(shape), input.numel())
    strides = _view_strides(input._shape, input._stride, new_shape)
    if strides is not None:
        return input._view(new_shape, strides, input._offset)
    return view(input.contiguous(), new_shape)


@tensor_method()
def view_as(self: Tensor, other: Tensor) -> Tensor:
    return view(self, other.shape)


@tensor_method()
def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return reshape(self, other.shape)


@op(grad={"input": "g.permute(invert_permutation(dims, len(input_shape)))"}, jvp="auto_linear")
def permute(input: Tensor, *dims: Any) -> Tensor:
    dims = parse_size(dims)
    nd = input.dim()
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}"
                           .replace("(sparse_coo)", ""))
    perm = [normalize_dim(d, nd) for d in dims]
    if len(set(perm)) != nd:
        raise RuntimeError(f"permute(): duplicate dims are not allowed, got {list(dims)}")
    return input._view(tuple(input._shape[d] for d in perm),
                       tuple(input._stride[d] for d in perm), input._offset)


@op(aliases=("swapaxes", "swapdims"), grad={"input": "g.transpose(dim0, dim1)"}, jvp="auto_linear")
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    nd = input.dim()
    if nd == 0:
        return input._view((), (), input._offset)
    d0, d1 = normalize_dim(dim0, nd), normalize_dim(dim1, nd)
    shape, stride = list(input._shape), list(input._stride)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    stride[d0], stride[d1] = stride[d1], stride[d0]
    return input._view(tuple(shape), tuple(stride), input._offset)


@op(grad={"input": "g.t()"}, jvp="auto_linear")
def t(input: Tensor) -> Tensor:
    if input.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input.dim()}D")
    if input.dim() == 2:  # the hot case (weights in every linear backward): no dim parsing
        (m, n), (sm, sn) = input._shape, input._stride
        return input._view((n, m), (sn, sm), input._offset)
    return input._view(input._shape, input._stride, input._offset)


@op()
def adjoint(input: Tensor) -> Tensor:
    if input.dim() == 1:    # a 0-d tensor is its own adjoint, as in PyTorch
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of "
                           "matrices. Got 1-D tensor.")
    return transpose(input, -2, -1).conj() if input.is_complex() else transpose(input, -2, -1)


@tensor_method("T", prop=True)
def _T(self: Tensor) -> Tensor:
    if len(self._shape) <= 2:  # the common case: t() skips permute's dim parsing
        return t(self)
    return permute(self, list(range(self.dim() - 1, -1, -1)))


@tensor_method("mT", prop=True)
def _mT(self: Tensor) -> Tensor:
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got "
                           f"{self.dim()}-D tensor.")
    return transpose(self, -2, -1)


@op(function=False, grad={"self": "sum_to(g, self_shape)"}, jvp="auto_linear")
def expand(self: Tensor, *sizes: Any) -> Tensor:
    if not sizes:  # PyTorch's signature requires one (an empty tuple is a valid size)
        raise TypeError('expand() missing 1 required positional arguments: "size"')
    sizes = parse_size(sizes)
    nd = self.dim()
    if len(sizes) < nd:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({nd})")
    lead = len(sizes) - nd
    shape, stride = [], []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"expand: -1 is not allowed in a leading, non-existing "
                                   f"dimension {i}")
            shape.append(s)
            stride.append(0)
            continue
        cur, st = self._shape[i - lead], self._stride[i - lead]
        if s == -1:
            s = cur
        if cur == s:
            shape.append(s)
            stride.append(st)
        elif cur == 1:
            shape.append(s)
            stride.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(sizes)}.  Tensor sizes: {list(self._shape)}")
    return self._view(tuple(shape), tuple(stride), self._offset)


@tensor_method()
def expand_as(self: Tensor, other: Tensor) -> Tensor:
    return expand(self, other.shape)


@op()
def broadcast_to(input: Tensor, size: Any) -> Tensor:
    return expand(input, size)


@op(grad={"input": "g.reshape(input_shape)"}, jvp="auto_linear")
def squeeze(input: Tensor, dim: Any = None) -> Tensor:
    nd = input.dim()
    dims = set(as_index_list(dim, nd)) if nd else set()
    keep = [i for i in range(nd) if not (i in dims and input._shape[i] == 1)]
    return input._view(tuple(input._shape[i] for i in keep),
                       tuple(input._stride[i] for i in keep), input._offset)


@op(grad={"input": "g.reshape(input_shape)"}, jvp="auto_linear")
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    nd = input.dim()
    d = normalize_dim(dim, nd + 1)
    shape = list(input._shape)
    stride = list(input._stride)
    new_stride = shape[d] * stride[d] if d < nd else 1
    shape.insert(d, 1)
    stride.insert(d, new_stride)
    return input._view(tuple(shape), tuple(stride), input._offset)


@op()
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    nd = input.dim()
    if nd == 0:
        return reshape(input, 1)
    s, e = normalize_dim(start_dim, nd), normalize_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input._shape[:s] + (math.prod(input._shape[s:e + 1]),) + input._shape[e + 1:]
    return reshape(input, shape)


@op()
def ravel(input: Tensor) -> Tensor:
    """The elements in one dim: a view when the layout allows, else a contiguous copy."""
    return reshape(input, -1)


def _no_dims(dim: Any) -> IndexError:
    """PyTorch's error for a dim of a 0-dim tensor where the op needs a real one."""
    return IndexError(f"Dimension specified as {dim} but tensor has no dimensions")


@op()
def unflatten(input: Tensor, dim: int, sizes: Any) -> Tensor:
    d = normalize_dim(dim, input.dim())   # a 0-d tensor's range [-1, 0] first, as in PyTorch
    if not input.dim():
        raise RuntimeError(f"unflatten got an unexpected error:\n{_no_dims(dim)}")
    sizes = _infer_size(parse_size(sizes), input._shape[d])
    return view(input, input._shape[:d] + sizes + input._shape[d + 1:]) if \
        _view_strides(input._shape, input._stride, input._shape[:d] + sizes +
                      input._shape[d + 1:]) is not None else \
        reshape(input, input._shape[:d] + sizes + input._shape[d + 1:])


@op(grad={"input": "into_zeros(g, input_shape, lambda z: z.narrow(dim, start, length))"},
    jvp="auto_linear")
def narrow(input: Tensor, dim: int, start: Any, length: int) -> Tensor:
    if not input.dim():
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    d = normalize_dim(dim, input.dim())
    size = input._shape[d]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    shape = list(input._shape)
    shape[d] = length
    return input._view(tuple(shape), input._stride, input._offset + start * input._stride[d])


@op(grad={"input": "into_zeros(g, input_shape, lambda z: z.select(dim, index))"}, jvp="auto_linear")
def select(input: Tensor, dim: int, index: int) -> Tensor:
    if input.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, input.dim())
    size = input._shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    index %= size
    return input._view(input._shape[:d] + input._shape[d + 1:],
                       input._stride[:d] + input._stride[d + 1:],
                       input._offset + index * input._stride[d])


@op(grad={"input": "stack(grads, dim)"}, jvp="auto_linear")
def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    if not input.dim():
        raise _no_dims(dim)
    d = normalize_dim(dim, input.dim())
    return tuple(select(input, d, i) for i in range(input._shape[d]))


@op(grad={"input": "g.movedim(destination, source)"}, jvp="auto_linear")
def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    nd = input.dim()
    given = [[int(d)] if isinstance(d, int | np.integer) else [int(k) for k in d]
             for d in (source, destination)]
    if len(given[0]) != len(given[1]):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({given[0]} "
                           f"dims) should contain the same number of dims as destination "
                           f"({given[1]} dims)")
    # PyTorch's order: every dim's range, then repeats in each list
    src, dst = ([normalize_dim(d, nd) for d in dims] for dims in given)
    for name, dims, normalized in (("source", given[0], src), ("destination", given[1], dst)):
        if len(set(normalized)) != len(normalized):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
    if not nd:  # dims 0 and -1 of a 0-dim tensor name no dim to move
        return input.view(())
    order = [None] * nd
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    return permute(input, [o if o is not None else next(rest) for o in order])


@op(grad={"input": "_as_strided_backward(g, input_shape, size, stride, storage_offset)"},
    jvp="auto_linear")
def as_strided(input: Tensor, size: Any, stride: Any, storage_offset: int | None = None) -> Tensor:
    size, stride = parse_size(size), parse_size(stride)
    offset = input._offset if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(stride)} vs "
                           f"{len(size)}")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise RuntimeError(f"as_strided: negative size {size}, stride {stride} or offset "
                           f"{offset} is not allowed")
    if 0 not in size:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        avail = input._storage.nbytes() // input._dtype.itemsize
        if last >= avail:
            raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                               f"offset {offset} require a storage of {last + 1} elements, but "
                               f"the storage holds only {avail}")
    return input._view(size, stride, offset)


def _overlaps(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether two elements of the (size, stride) geometry can share a memory location."""
    extent = 0  # furthest offset reachable through the dims already walked, inner to outer
    for n, st in sorted(((n, st) for n, st in zip(size, stride, strict=True) if n > 1),
                        key=lambda d: d[1]):
        if st <= extent:
            return True
        extent += (n - 1) * st
    return False


# Like as_strided_scatter, the gradient takes the input as contiguous from its storage start.
@op(method=False, grad={"grad": "own_storage(g).as_strided(size, stride, storage_offset)"},
    jvp="auto_linear")
def _as_strided_backward(grad: Tensor, shape: Any, size: Any, stride: Any,
                         storage_offset: int | None = None) -> Tensor:
    """as_strided's gradient: zeros of ``shape`` with ``grad`` added at the locations the view
    reads (summed where the view reads a location more than once)."""
    from ._core import kernel
    from .copying import strided_copy
    from .creation import arange, zeros
    shape, size, stride = parse_size(shape), parse_size(size), parse_size(stride)
    out = zeros(shape, dtype=grad.dtype, device=grad.device)
    offset = 0 if storage_offset is None else int(storage_offset)
    if not _overlaps(size, stride):
        strided_copy(as_strided(out, size, stride, offset), grad)
        return out
    where = as_strided(arange(math.prod(shape), device=grad.device), size, stride, offset)
    flat = out.view(-1)
    if where.numel():
        kernel(flat, "index_add")(flat, 0, where.reshape(-1), grad.reshape(-1), 1)
    return out



@op(function=False)
def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Tensor.unfold: the windows of ``size`` elements every ``step`` along ``dimension``, as
    a view whose new last dim runs through each window (windows may overlap)."""
    nd = self.dim()
    d = normalize_dim(dimension, max(nd, 1))
    length = self._shape[d] if nd else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if nd == 0:
        return as_strided(self, (size,), (1,))
    shape = list(self._shape)
    stride = list(self._stride)
    shape[d] = (length - size) // step + 1
    stride[d] = self._stride[d] * step
    return as_strided(self, (*shape, size), (*stride, self._stride[d]))

@op(grad={"input": "as_strided_scatter(g, zeros(src_shape, dtype=g.dtype, device=g.device), "
                   "size, stride, storage_offset)",
          "src": "own_storage(g).as_strided(size, stride, storage_offset)"}, jvp="auto_linear")
def as_strided_scatter(input: Tensor, src: Tensor, size: Any, stride: Any,
                       storage_offset: int | None = None) -> Tensor:
    """A copy of ``input`` with the elements ``input.as_strided(size, stride, storage_offset)``
    would view replaced by ``src`` (``input`` is taken as contiguous)."""
    out = input.contiguous().clone()
    region = as_strided(out, size, stride, storage_offset)
    if tuple(region.shape) != tuple(src.shape):
        raise RuntimeError(f"as_strided_scatter: src of shape {list(src.shape)} does not match "
                           f"the region of shape {list(region.shape)}")
    region.copy_(src)
    return out


@op(grad={"input": "into_zeros(g, input_shape, lambda z: z.diagonal(offset, dim1, dim2))"},
    jvp="auto_linear")
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    nd = input.dim()
    d1, d2 = normalize_dim(dim1, nd), normalize_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = input._shape[d1], input._shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = input._offset
    if length:
        start += offset * input._stride[d2] if offset >= 0 else -offset * input._stride[d1]
    keep = [i for i in range(nd) if i not in (d1, d2)]
    shape = tuple(input._shape[i] for i in keep) + (length,)
    stride = tuple(input._stride[i] for i in keep) + (input._stride[d1] + input._stride[d2],)
    return input._view(shape, stride, start)


@tensor_method()
def resize_(self: Tensor, *sizes: Any, memory_format: Any = None) -> Tensor:
    shape = parse_size(sizes)
    # PyTorch refuses any resize_ of a tensor that requires grad; out= paths here resize_ to the
    # same shape under no_grad, which PyTorch's resize_output skips, so that one passes.
    if self._requires_grad and (shape != self._shape or is_grad_enabled()):
        raise RuntimeError("cannot resize variables that require grad")
    strides = contiguous_strides(shape)
    if memory_format is not None:
        from gputensor import _memory_format as MF
        fmt = MF.check(memory_format, "resize_")
        if fmt is MF.preserve_format:
            raise RuntimeError("Unsupported memory formatPreserve")  # (sic) PyTorch's
        strides = MF.format_strides(shape, fmt)
    n = math.prod(shape)
    need = (self._offset + n) * self._dtype.itemsize
    if need > self._storage.nbytes():
        self._storage.resize_(need)
    self._shape, self._stride = shape, strides
    self._np_buf = None
    return self




@tensor_method("H", "mH", prop=True)
def _adjoint_property(self: Tensor) -> Tensor:
    return adjoint(self)
