"""Tensor.__getitem__/__setitem__: basic indices give views; tensor/list/mask indices dispatch."""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._compile.state import replayable_check
from gputensor._tensor import Tensor
from gputensor.autograd.inplace import apply_inplace, needs_graph

from ._core import broadcast_shapes, kernel, op, tensor_method
from ._scalar_range import checked_fill_value
from .shape import _minmax, device_checks_indices


def _is_empty_sequence(idx: Any) -> bool:
    """An empty list/tuple, possibly nested ([[]]): no element to take a dtype from."""
    while isinstance(idx, list | tuple):
        if not idx:
            return True
        idx = idx[0]
    return False


def _as_index_tensor(idx: Any, device: Any) -> Tensor:
    from .creation import tensor
    if isinstance(idx, Tensor):
        t = idx
    else:  # an empty sequence indexes nothing, as int64 (PyTorch's, not the default dtype)
        t = tensor(idx, device=device, dtype=D.int64 if _is_empty_sequence(idx) else None)
    if t.dtype.category > D.INTEGRAL:
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got "
                         f"{t.dtype}")
    if t.dtype is D.uint8:
        t = t.bool()
    return t if t.device == device else t.to(device)


def _normalize(index: Any) -> tuple:
    if isinstance(index, list) and index and all(isinstance(t, Tensor) for t in index):
        # A list of tensors indexes like a tuple of them (PyTorch's sequence rule). Autograd
        # also hands saved tuple indices back as lists, so backward sees the same index.
        return tuple(index)
    if not isinstance(index, tuple):
        index = (index,)
    return index


def _consumed_dims(item: Any) -> int:
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    if isinstance(item, Tensor) and item.dtype in (D.bool, D.uint8):
        return max(item.dim(), 1) if item.dim() else 0
    if isinstance(item, np.ndarray) and item.dtype == np.bool_:
        return item.ndim
    return 1


def _bool_scalar(item: Any) -> bool | None:
    """The value of a Python/NumPy bool or a 0-dim bool tensor index, else None."""
    if isinstance(item, bool | np.bool_):
        return bool(item)
    if isinstance(item, Tensor) and item.dtype is D.bool and item.dim() == 0:
        return bool(item.item())
    return None


def _resolve(self: Tensor, index: Any) -> tuple[Tensor, list[Any]]:
    """Apply the basic part of ``index``; return the view and the advanced indices aligned to it.

    A bool scalar adds a dim of size 1 and is an advanced index of it (PyTorch's rule: the
    index [0] for True, [] for False, broadcast with the other advanced indices), so several
    bools give one dim and x[True] is a copy, as in PyTorch."""
    items = _normalize(index)
    if len(items) <= len(self._shape):
        basic = _basic_view(self, items)
        if basic is not None:
            return basic, [None] * basic.dim()
    n_ellipsis = sum(1 for it in items if it is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed_dims(it) for it in items)
    if used > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    shape, stride = [], []
    offset = self._offset
    adv: list[Any] = []
    dim = 0
    for position, it in enumerate(items):
        if _is_integer_scalar_tensor(it):
            # PyTorch selects with a 0-d integer tensor (its value read, as an int's): the
            # result is a view, and a bad value is reported like an int's
            it = int(it.item())
        if it is Ellipsis:
            for _ in range(self.dim() - used):
                shape.append(self._shape[dim])
                stride.append(self._stride[dim])
                adv.append(None)
                dim += 1
        elif it is None:
            shape.append(1)
            stride.append(0)
            adv.append(None)
        elif _bool_scalar(it) is not None:
            shape.append(1)
            stride.append(0)
            adv.append(_bool_index(_bool_scalar(it), self.device))
        elif isinstance(it, int | np.integer):
            size = self._shape[dim]
            i = int(it)
            if not -size <= i < size:   # the dimension as PyTorch names it: the position
                raise IndexError(f"index {i} is out of bounds for dimension {position} with "
                                 f"size {size}")
            offset += (i % size) * self._stride[dim]
            dim += 1
        elif isinstance(it, slice):
            size = self._shape[dim]
            if it.step is not None and int(it.step) <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, step = slice(*(None if v is None else int(v) for v in
                                        (it.start, it.stop, it.step))).indices(size)
            length = max(0, (stop - start + step - 1) // step)
            if length:
                offset += start * self._stride[dim]
            shape.append(length)
            stride.append(self._stride[dim] * step)
            adv.append(None)
            dim += 1
        else:
            t = _as_index_tensor(it, self.device)
            if t.dtype is D.bool:
                k = t.dim()
                mask_shape = self._shape[dim:dim + k]
                if tuple(t._shape) != tuple(mask_shape):
                    _mask_at(self._view(tuple(shape) + self._shape[dim:],
                                        tuple(stride) + self._stride[dim:], offset),
                             t, len(shape))  # raises PyTorch's IndexError
                from .sort import nonzero
                nz = nonzero(t)
                for j in range(k):
                    shape.append(self._shape[dim])
                    stride.append(self._stride[dim])
                    adv.append(nz[:, j])
                    dim += 1
            else:
                shape.append(self._shape[dim])
                stride.append(self._stride[dim])
                adv.append(t)
                dim += 1
    while dim < self.dim():
        shape.append(self._shape[dim])
        stride.append(self._stride[dim])
        adv.append(None)
        dim += 1
    base = self._view(tuple(shape), tuple(stride), offset)
    return base, adv


_PLAIN = (int, type(None))


def _basic_view(self: Tensor, items: tuple) -> Tensor | None:
    """The view of an index made only of Python ints and slices of ints (the common case,
    ``x[:, 1:5]``, ``x[0, :3]``), without ``_resolve``'s general item handling; None for any
    other index."""
    shape, stride = [], []
    offset = self._offset
    for dim, it in enumerate(items):
        tp = type(it)
        size = self._shape[dim]
        if tp is slice:
            step = it.step
            if type(it.start) not in _PLAIN or type(it.stop) not in _PLAIN or \
                    type(step) not in _PLAIN:
                return None
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, step = it.indices(size)
            length = max(0, (stop - start + step - 1) // step)
            if length:
                offset += start * self._stride[dim]
            shape.append(length)
            stride.append(self._stride[dim] * step)
        elif tp is int:
            if not -size <= it < size:
                raise IndexError(f"index {it} is out of bounds for dimension {dim} with size "
                                 f"{size}")
            offset += (it % size) * self._stride[dim]
        else:
            return None
    rest = len(items)
    return self._view(tuple(shape) + self._shape[rest:], tuple(stride) + self._stride[rest:],
                      offset)


def _bool_index(flag: bool, device: Any) -> Tensor:
    from .creation import tensor
    return tensor([0] if flag else [], dtype=D.int64, device=device)


def _index_in_range(t: Tensor, size: int, d: int) -> bool:
    """Raise IndexError unless every index lies in [-size, size); whether any is negative."""
    lo, hi = _minmax(t)
    if lo < -size or hi >= size:
        bad = hi if hi >= size else lo
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    return lo < 0


def _check_bounds(base: Tensor, adv: list[Any], *, device_checked: bool = True) -> list[Any]:
    """Out-of-range indices raise before any kernel touches memory; CUDA indices are left to
    the index kernels' own check unless ``device_checked`` is False (shape.py's
    :func:`device_checks_indices`)."""
    tensors = [t for t in adv if t is not None]
    try:
        shape = broadcast_shapes(*(t._shape for t in tensors))
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         "shapes " + ", ".join(str(list(t._shape)) for t in tensors)) from None
    # PyTorch's AdvancedIndex check, on the shapes alone: an indexed dim of size 0 has no valid
    # index, so any index into it is out of bounds (unless the indices select nothing)
    if 0 in shape:   # the indices broadcast to nothing: no element is read, none is checked
        return adv
    if any(t is not None and base._shape[d] == 0 for d, t in enumerate(adv)):
        raise IndexError("index is out of bounds for dimension with size 0")
    for d, t in enumerate(adv):
        if t is None or t.numel() == 0 or (device_checked and device_checks_indices(t)):
            continue
        replayable_check(_index_in_range, t, base._shape[d], d)
    return adv


@tensor_method("__getitem__")
@op("__getitem__", function=False, grad={"self": "_index_backward(g, self_shape, index)"},
    jvp="auto_linear")
def getitem(self: Tensor, index: Any) -> Tensor:
    if isinstance(index, int) and not isinstance(index, bool) and self.dim():
        from .views import select
        return select(self, 0, index)
    base, adv = _resolve(self, index)
    if all(a is None for a in adv):
        return base
    if type(base._dtype) is D._LimitedDtype:  # a gather of the carrier's bits
        from gputensor._limited import gather
        return gather(base, _check_bounds(base, adv, device_checked=False))
    return kernel(base, "_index")(base, _check_bounds(base, adv))


@tensor_method("__setitem__")
def setitem(self: Tensor, index: Any, value: Any) -> None:
    if isinstance(value, Tensor):
        # PyTorch drops the value's leading 1-dims (x[0] = tensor([v]) fills a 0-d slot)
        lead = next((k for k, s in enumerate(value._shape) if s != 1), value.dim())
        if lead:
            value = value.reshape(value._shape[lead:])
    if needs_graph(self, (value,), {}):
        apply_inplace(self, lambda: _setitem_functional(self, index, value))
        return
    if type(self._dtype) is D._LimitedDtype:  # uint16, float8, ...: through the carrier
        from gputensor._limited import setitem as limited_setitem
        return limited_setitem(self, index, value)
    if not isinstance(value, Tensor):
        # a 16-bit float target takes the value as a double first (rounding to inf)
        value = checked_fill_value(value, D.float64 if self._dtype.itemsize == 2 and
                                   self._dtype.is_floating_point else self._dtype)
    if isinstance(value, Tensor) and value._dtype is not self._dtype:
        # PyTorch's Python indexing selects with a 0-d integer tensor index, as with an int:
        # the write is then a copy_ (or a masked fill), which casts the value
        items = _normalize(index)
        if any(_is_integer_scalar_tensor(it) for it in items):
            index = tuple(int(it.item()) if _is_integer_scalar_tensor(it) else it
                          for it in items)
    base, adv = _resolve(self, index)
    if all(a is None for a in adv):
        base.copy_(value)
        return
    if isinstance(value, Tensor) and value._dtype is not self._dtype:
        if _fill_through_mask(*_setitem_mask(self, _normalize(index)), value):
            return
        _check_value_shape(base, adv, value)
        _check_index_put_dtypes(self, value)
    elif isinstance(value, Tensor):
        _check_value_shape(base, adv, value)  # the shapes before the indices' range
    if not _writes_nothing(base, adv):
        _index_put(base, _check_bounds(base, adv), value, accumulate=False)


def _is_integer_scalar_tensor(it: Any) -> bool:
    """A 0-d integer index tensor (not bool or uint8, which are masks)."""
    return isinstance(it, Tensor) and not it.dim() and it._dtype not in (D.bool, D.uint8) \
        and it._dtype.category <= D.INTEGRAL


def _check_value_shape(base: Tensor, adv: list[Any], value: Tensor) -> None:
    """PyTorch's shape checks of an index_put (before its dtype check): indices into a size-0
    dim, and the value, which broadcasts to the indexing result (indexed dims replaced in
    place by the indices' broadcast shape when they are adjacent, else in front)."""
    dims = [d for d, a in enumerate(adv) if a is not None]
    try:
        bshape = broadcast_shapes(*(adv[d]._shape for d in dims))
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         "shapes " + ", ".join(str(list(adv[d]._shape)) for d in dims)) from None
    rest = base._shape
    if any(rest[d] == 0 for d in dims) and 0 not in bshape:   # no index fits a size-0 dim
        raise IndexError("index is out of bounds for dimension with size 0")
    if dims == list(range(dims[0], dims[-1] + 1)):
        shape = rest[:dims[0]] + bshape + rest[dims[-1] + 1:]
    else:
        shape = bshape + tuple(n for d, n in enumerate(rest) if d not in dims)
    vshape = value._shape    # (setitem has dropped its leading unit dims already)
    lead = len(shape) - len(vshape)
    if lead < 0 or any(v not in (1, r) for v, r in zip(vshape, shape[lead:], strict=True)):
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value._shape)} cannot "
                           f"be broadcast to indexing result of shape {list(shape)}")


# PyTorch writes a one-element value through one boolean mask (and other indices only basic
# ones) by masked_fill_: the value is then converted to the target's dtype (checked for
# overflow) instead of having to match it.
def _fill_through_mask(view: Tensor | None, mask: Tensor | None, value: Tensor) -> bool:
    """``view.masked_fill_(mask, value)`` when a mask was found and ``value`` has one element;
    whether it was done."""
    if mask is None or view is None or value.numel() != 1:
        return False
    from .scatter import masked_fill_
    masked_fill_(view, mask, value.reshape(()))
    return True


def _mask_at(view: Tensor, mask: Tensor, pos: int) -> Tensor:
    """``mask`` (indexing ``view``'s dims from ``pos``) checked and shaped to broadcast."""
    for j, size in enumerate(mask._shape):
        if pos + j >= view.dim() or view._shape[pos + j] != size:
            raise IndexError(f"The shape of the mask {list(mask._shape)} at index {j} does not "
                             f"match the shape of the indexed tensor {list(view._shape)} at "
                             f"index {pos + j}")
    return mask.reshape(mask._shape + (1,) * (view.dim() - pos - mask.dim()))


def _setitem_mask(self: Tensor, items: tuple) -> tuple[Tensor | None, Tensor | None]:
    """(the basic view, its mask) when ``items`` hold exactly one boolean mask tensor and
    otherwise only ints, slices, None and Ellipsis; (None, None) otherwise."""
    if any(isinstance(it, bool | np.bool_) for it in items):
        return None, None     # a Python bool indexes like a long tensor
    masks = [k for k, it in enumerate(items) if not isinstance(
        it, int | np.integer | slice | type(None) | type(Ellipsis))]
    if len(masks) != 1:
        return None, None
    k = masks[0]
    mask = _as_index_tensor(items[k], self.device)
    if mask.dtype is not D.bool or mask.dim() == 0:   # a 0-d bool indexes like a long tensor
        return None, None
    used = sum(_consumed_dims(it) for j, it in enumerate(items) if j != k) + mask.dim()
    if used > self.dim():
        return None, None     # the general path reports it
    dims = {type(None): 1, slice: 1}
    pos = sum(self.dim() - used if it is Ellipsis else dims.get(type(it), 0)
              for it in items[:k])
    view, _ = _resolve(self, items[:k] + (slice(None),) * mask.dim() + items[k + 1:])
    return view, _mask_at(view, mask, pos)


def _index_put(base: Tensor, adv: list[Any], value: Any, accumulate: bool) -> None:
    from .creation import scalar_tensor
    if not isinstance(value, Tensor):
        value = scalar_tensor(value, base.dtype, base.device)
    elif value.device != base.device and not (value.dim() == 0 and value.is_cpu):
        raise RuntimeError(f"index_put_: value is on {value.device} but the tensor is on "
                           f"{base.device}")
    kernel(base, "_index_put")(base, adv, value, accumulate)
    base._storage._version += 1


def _check_index_put_dtypes(dst: Tensor, src: Tensor) -> None:
    if src._dtype is not dst._dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{dst._dtype.legacy_name} for the destination and "
                           f"{src._dtype.legacy_name} for the source.")


def _index_put_into(input: Tensor, indices: tuple, values: Any, accumulate: bool) -> Tensor:
    if not isinstance(indices, tuple | list):
        raise TypeError(f"index_put_(): indices must be a tuple of tensors, got "
                        f"{type(indices).__name__}")
    if isinstance(values, Tensor) and values._dtype is not input._dtype:
        if accumulate or not _fill_through_mask(*_index_put_mask(input, indices), values):
            base, adv = _resolve(input, tuple(indices))   # index and shape errors first,
            if any(a is not None for a in adv):             # as in PyTorch
                _check_value_shape(base, adv, values)
            _check_index_put_dtypes(input, values)
        return input
    base, adv = _resolve(input, tuple(indices))
    if not _writes_nothing(base, adv):
        _index_put(base, _check_bounds(base, adv), values, accumulate)
    elif isinstance(values, Tensor):
        _check_value_shape(base, adv, values)
    return input


def _writes_nothing(base: Tensor, adv: list[Any]) -> bool:
    """A dim that no index tensor indexes has size 0, so no element is written and PyTorch
    checks no index value (an indexed dim of size 0 is still an error: no index fits it)."""
    return any(a is None and n == 0 for a, n in zip(adv, base._shape, strict=True)) and \
        not any(a is not None and n == 0 for a, n in zip(adv, base._shape, strict=True))


def _index_put_mask(input: Tensor, indices: Any) -> tuple[Tensor | None, Tensor | None]:
    """(input, its mask) when ``indices`` are one boolean mask and Nones (whole dims)."""
    masks = [k for k, it in enumerate(indices) if it is not None]
    if len(masks) != 1 or not isinstance(indices[masks[0]], Tensor) or \
            indices[masks[0]].dtype not in (D.bool, D.uint8):
        return None, None
    mask = indices[masks[0]]
    return input, _mask_at(input, mask if mask.dtype is D.bool else mask.bool(), masks[0])


# The in-place form records its own history (through apply_inplace), so its frontend is not
# wrapped for autograd.
@op(inplace=False, differentiable=False)
def index_put_(input: Tensor, indices: tuple, values: Any, accumulate: bool = False) -> Tensor:
    """input[indices] = values (or += with accumulate=True, duplicates summed)."""
    if needs_graph(input, (values,), {}):
        return apply_inplace(input, lambda: index_put(input, indices, values, accumulate))
    return _index_put_into(input, indices, values, accumulate)


# Without accumulate the indexed positions of input are overwritten, so they get no gradient.
@op(inplace=False,
    grad={"input": "g if accumulate else index_put(g, indices, zeros((), dtype=g.dtype, "
                   "device=g.device))",
          "values": "g[tuple(indices)]"}, jvp="auto_linear")
def index_put(input: Tensor, indices: tuple, values: Any, accumulate: bool = False) -> Tensor:
    return _index_put_into(input.clone(), indices, values, accumulate)


@op(method=False, grad={"input": "_setitem_functional(g, index, 0.0)", "value": "g[index]"},
    jvp="auto_linear")
def _setitem_functional(input: Tensor, index: Any, value: Any) -> Tensor:
    """A copy of ``input`` with ``input[index] = value`` applied (setitem's autograd form)."""
    out = input.clone()
    setitem(out, index, value.detach() if isinstance(value, Tensor) else value)
    return out


@op(method=False, grad={"grad": "g[index]"}, jvp="auto_linear")
def _index_backward(grad: Tensor, shape: Any, index: Any) -> Tensor:
    """Zeros of ``shape`` with ``grad`` added at ``index`` (duplicates summed): getitem's
    gradient."""
    from .creation import zeros
    out = zeros(tuple(shape), dtype=grad.dtype, device=grad.device)
    base, adv = _resolve(out, index)
    tensors = [d for d, a in enumerate(adv) if a is not None]
    if not tensors:
        base.copy_(grad)
    elif len(tensors) == 1:
        _add_along(base, tensors[0], adv[tensors[0]], grad)
    else:
        _index_put(base, _check_bounds(base, adv), grad, accumulate=True)
    return out


def _add_along(base: Tensor, d: int, index: Tensor, grad: Tensor) -> None:
    """``base[..., index, ...] += grad`` with one index tensor at dim ``d`` (the common
    ``x[idx]`` gradient), through index_add's kernel, which beats a general accumulate."""
    size = base._shape[d]
    if index.numel() == 0 or base.numel() == 0:
        return
    flat = index.reshape(-1)
    if replayable_check(_index_in_range, index, size, d):
        flat = flat + (flat < 0).to(flat.dtype) * size
    g = grad.reshape(base._shape[:d] + (flat.numel(),) + base._shape[d + 1:])
    kernel(base, "index_add")(base, d, flat, g, 1)
