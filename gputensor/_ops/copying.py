"""Copies and conversions: contiguous, clone, copy_, to(dtype/device) via the copy table."""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor import _limited
from gputensor import _memory_format as MF
from gputensor._device import device as Device
from gputensor._tensor import Tensor
from gputensor.autograd.inplace import apply_inplace, needs_graph
from gputensor.kernels.allocation import empty_with_strides, strided_copy
from gputensor.storage.copy_table import copy_storage

from ._core import broadcast_shapes, empty, op, tensor_method
from ._overlap import check_overlap


@op("_to_copy", method=False, grad={"t": "g.to(t_device)"}, jvp="auto_linear")
def convert(t: Tensor, dt: D.dtype, dev: Device) -> Tensor:
    """A contiguous copy of ``t`` with dtype ``dt`` on ``dev``, through the copy table."""
    if _limited.is_limited(t._dtype) or _limited.is_limited(dt):  # no typed storages
        return _limited.convert(t, dt, dev)
    src = t.contiguous()
    out = empty(src._shape, dt, dev)
    copy_storage(out.storage(), src.storage(), count=src.numel(), src_offset=src._offset)
    out._storage._version = 0
    return out


def convert_with_format(t: Tensor, dt: D.dtype, dev: Device, copy: bool,
                        memory_format: Any) -> Tensor:
    """``t.to(dt, dev, memory_format=...)``: one copy straight into the format's layout (the
    view permuted into that layout order is converted, then permuted back)."""
    fmt = MF.check(memory_format, "to")
    strides = MF.preserved_strides(t._shape, t._stride, fmt)
    same = dev == t.device and dt is t._dtype
    if same and not copy and (fmt is MF.preserve_format
                              or MF.suggested_format(t._shape, t._stride) is fmt):
        return t  # PyTorch's to(): no copy when the strides already suggest the format
    if same:
        return clone(t, memory_format=fmt)
    order = sorted(range(t.dim()), key=lambda d: (-strides[d], d))
    back = sorted(range(t.dim()), key=order.__getitem__)
    return convert(t.permute(order), dt, dev).permute(back)


@op(method=True, grad={"input": "g"}, jvp="auto_linear")
def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy of ``input`` with its own storage, laid out in ``memory_format``: by default
    (preserve_format, as PyTorch) with the strides of a dense input, else row-major."""
    fmt = MF.preserve_format if memory_format is None else MF.check(memory_format, "clone")
    if (fmt is MF.preserve_format and input.is_contiguous()) or fmt is MF.contiguous_format:
        out = empty(input._shape, input._dtype, input.device)
    else:
        strides = MF.preserved_strides(input._shape, input._stride, fmt)
        out = empty_with_strides(input._shape, strides, input._dtype, input.device)
    strided_copy(out, input)
    return out


@tensor_method()
def contiguous(self: Tensor, memory_format: Any = None) -> Tensor:
    """This tensor if it is laid out in ``memory_format`` (row-major by default), else a
    copy that is."""
    if memory_format is None or memory_format is MF.contiguous_format:
        return self if self.is_contiguous() else clone(self, memory_format=MF.contiguous_format)
    fmt = MF.check(memory_format, "contiguous")
    if fmt is MF.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return self if MF.is_in_format(self._shape, self._stride, fmt) else \
        clone(self, memory_format=fmt)


@tensor_method()
def copy_(self: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast to this shape) into this tensor, across devices and dtypes."""
    if not isinstance(src, Tensor):
        from .creation import scalar_tensor
        src = scalar_tensor(src, self._dtype, self.device)
    check_overlap(self, (src,))
    if needs_graph(self, (src,), {}):
        return apply_inplace(self, lambda: src.to(self.device, self._dtype).expand(self._shape))
    shape = broadcast_shapes(self._shape, src._shape)
    if shape != self._shape:
        raise RuntimeError(f"copy_: the source of shape {list(src._shape)} can't be broadcast "
                           f"to the destination shape {list(self._shape)}")
    if src.device != self.device:
        src = convert(src, src._dtype, self.device)
    strided_copy(self, src)
    self._storage._version += 1
    return self
