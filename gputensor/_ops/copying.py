"""Copies and conversions: contiguous, clone, copy_, to(dtype/device) via the copy table."""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor._device import device as Device
from gputensor._tensor import Tensor
from gputensor.autograd.inplace import apply_inplace, needs_graph
from gputensor.kernels.allocation import strided_copy
from gputensor.storage.copy_table import copy_storage

from ._core import broadcast_shapes, empty, op, tensor_method


@op("_to_copy", method=False, grad={"t": "g.to(t_device)"})
def convert(t: Tensor, dt: D.dtype, dev: Device) -> Tensor:
    """A contiguous copy of ``t`` with dtype ``dt`` on ``dev``, through the copy table."""
    src = t.contiguous()
    out = empty(src._shape, dt, dev)
    copy_storage(out.storage(), src.storage(), count=src.numel(), src_offset=src._offset)
    out._storage._version = 0
    return out


@op(method=True, grad={"input": "g"})
def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy of ``input`` with its own storage."""
    out = empty(input._shape, input._dtype, input.device)
    strided_copy(out, input)
    return out


@tensor_method()
def contiguous(self: Tensor, memory_format: Any = None) -> Tensor:
    return self if self.is_contiguous() else clone(self)


@tensor_method()
def copy_(self: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """Copy ``src`` (broadcast to this shape) into this tensor, across devices and dtypes."""
    if not isinstance(src, Tensor):
        from .creation import scalar_tensor
        src = scalar_tensor(src, self._dtype, self.device)
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
