"""Less common factories of torch's namespace: scalar_tensor, the deprecated inclusive range,
empty_permuted, and fill (the out-of-place fill_)."""

from __future__ import annotations

import builtins
import math
import warnings
from typing import Any

import numpy as np

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor, new_shape

from ._core import op, resolve_device
from .creation import _dtype_or_default, _finish, _host_to, empty_strided, full


@op(method=False, differentiable=False, vmap_exempt=True)
def scalar_tensor(s: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
                  pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor holding ``s``, in the default float dtype unless ``dtype`` is given
    (``layout``/``pin_memory``: strided and pageable memory are the only kinds here)."""
    return full((), s, dtype=_dtype_or_default(dtype), device=device,
                requires_grad=requires_grad)


_RANGE_DEPRECATED = ("torch.range is deprecated and will be removed in a future release because "
                     "its behavior is inconsistent with Python's range builtin. Instead, use "
                     "torch.arange, which produces values in [start, end).")


@op(method=False, differentiable=False, vmap_exempt=True)
def range(start: Any = 0, end: Any = None, step: Any = 1, *,  # noqa: A001 - PyTorch's name
          out: Tensor | None = None, dtype: Any = None, layout: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Deprecated: ``start, start + step, ...`` up to and including ``end``, in the default
    float dtype unless ``dtype`` is given. Values are ``start + i * step`` in float64 (int64
    for integer dtypes), as PyTorch's CPU kernel accumulates."""
    warnings.warn(_RANGE_DEPRECATED, UserWarning, stacklevel=2)
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    dt = (out.dtype if out is not None else D.get_default_dtype()) if dtype is None \
        else D.to_dtype(dtype)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    integral = dt.category <= D.INTEGRAL
    if integral:   # read as int64 (the kernel's accumulator), checked as PyTorch's Scalar is
        if not all(math.isfinite(v) and -2**63 <= v < 2**63 for v in (start, end, step)):
            raise RuntimeError("value cannot be converted to type int64_t without overflow")
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = int((float(end) - float(start)) / float(step) + 1)  # PyTorch sizes it in double
    arr = start + np.arange(n, dtype=np.int64 if integral else np.float64) * step
    t = _host_to(arr, dt, resolve_device(device) if out is None else out.device)
    return _finish(t if out is None else out.resize_(t.shape).copy_(t), requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def empty_permuted(size: Any, physical_layout: Any, *, dtype: Any = None, layout: Any = None,
                   device: Any = None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of ``size`` whose memory holds its dims in ``physical_layout``
    order (``physical_layout[-1]`` varies fastest): a dense tensor, not a view."""
    shape = new_shape(size)
    perm = [int(p) for p in physical_layout]
    if len(shape) != len(perm):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(shape)} is not equal to "
                           f"len(physical_layout) = {len(perm)}")
    seen: set[int] = set()
    for i, p in enumerate(perm):
        if not 0 <= p < len(shape):
            raise RuntimeError(f"Dimension out of range (expected to be between 0 and "
                               f"{len(shape) - 1}, but got {p} at index {i}).  NB: negative "
                               f"dims not currently supported; file an issue if you want it.")
        if p in seen:
            raise RuntimeError("Duplicate dim not allowed")
        seen.add(p)
    strides = [0] * len(shape)
    step = 1
    for p in reversed(perm):
        strides[p] = step
        step *= builtins.max(shape[p], 1)
    return empty_strided(shape, strides, dtype=dtype, device=device,
                         requires_grad=requires_grad)


@op(method=False, grad={"input": "g * 0", "value": "g.sum()"}, jvp="auto_linear")
def fill(input: Tensor, value: Any) -> Tensor:
    """A new tensor like ``input`` (its layout preserved) filled with ``value``, a number or a
    0-dim tensor (whose gradient is the sum of the output's)."""
    result = gt.empty_like(input)
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.dim()} dimensions.")
        return result.copy_(value)  # a device-side broadcast: no read of the value
    return result.fill_(value)
