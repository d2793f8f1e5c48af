"""Shared machinery for op frontends: declaring ops, broadcasting, promotion, device checks."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import device as Device
from gputensor._device import get_default_device, to_device
from gputensor._op_hook import OP_HOOK
from gputensor._tensor import Tensor
from gputensor.autograd.derivatives import Derivative, limited_error, rename_keywords
from gputensor.autograd.derivatives import differentiable as differentiable_frontend
from gputensor.func._state import VMAP

# Allocation, kernel lookup and broadcasting live below the frontends (kernels use them too);
# re-exported here for the frontends.
from gputensor.kernels.allocation import empty as empty
from gputensor.kernels.allocation import empty_cpu as empty_cpu
from gputensor.kernels.allocation import kernel as kernel
from gputensor.kernels.layout import broadcast_shapes as broadcast_shapes
from gputensor.kernels.registry import TENSOR_METHODS, OpDef, declare

Number = int | float | complex | bool


def op(name: str | None = None, *, method: bool = True, inplace: bool = False,
       aliases: tuple[str, ...] = (), cost: Callable | None = None,
       grad: dict[str, str | None] | None = None, differentiable: bool = True,
       output_differentiable: tuple[bool, ...] | None = None, function: bool = True,
       inplace_fn: Callable | None = None, jvp: Any = None,
       vmap_exempt: bool = False) -> Callable:
    """Declare a non-elementwise op whose frontend is the decorated function.

    ``grad`` holds its derivative: one formula per differentiable argument (see
    gputensor.autograd.derivatives). Ops that produce no gradient at all (creation, random,
    integer results) pass ``differentiable=False``; ops without either are checked at call time
    and backward through them raises. ``jvp`` is the forward-mode rule beside ``grad``
    (gputensor.autograd.jvp: "auto_linear", "transpose", or formulas). ``function=False``
    makes a method-only op (``x.view``). ``vmap_exempt`` marks a deterministic factory of
    sizes and scalars (``zeros``, ``arange``): gt.func.vmap never changes its result, so its
    frontend is the function itself, without the batching hook's call.
    """
    def deco(fn: Callable) -> Callable:
        op_name = name or fn.__name__
        derivative = Derivative.for_function(op_name, fn, grad, output_differentiable, jvp) \
            if grad is not None else None
        renames = _numpy_aliases(fn)
        if differentiable:
            frontend = differentiable_frontend(fn, derivative, op_name, renames)
        elif vmap_exempt:
            frontend = _with_aliases(fn, renames, op_name) if renames else fn
        else:
            frontend = _vmappable(fn, op_name, renames)
        opdef = OpDef(name=op_name, frontend=frontend, method=method, inplace=inplace,
                      aliases=aliases, doc=fn.__doc__ or "", derivative=derivative,
                      function=function, differentiable=differentiable,
                      inplace_fn=inplace_fn)
        if cost is not None:
            opdef.cost = cost
        declare(opdef)
        return frontend
    return deco


# PyTorch's argument parser takes NumPy's names for these parameters (x.sum(axis=1)).
_NUMPY_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))


def _numpy_aliases(fn: Callable) -> dict[str, str]:
    params = inspect.signature(fn).parameters
    return {alias: name for alias, name in _NUMPY_ALIASES
            if name in params and alias not in params}


def _with_aliases(fn: Callable, renames: dict[str, str], op_name: str) -> Callable:
    @functools.wraps(fn)
    def aliased(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            kwargs = rename_keywords(kwargs, renames, op_name)
        return fn(*args, **kwargs)
    return aliased


def _vmappable(fn: Callable, op_name: str, renames: dict[str, str]) -> Callable:
    """A frontend that ``differentiable`` does not wrap (random ops, ops of tensors without a
    gradient): under gt.func.vmap its batched (or random) calls go to the batching rules;
    otherwise one global check (and the keyword aliases, in the same call), and one for the
    op hook (gputensor/_op_hook.py)."""
    vmap = VMAP
    hook = OP_HOOK

    @functools.wraps(fn)
    def frontend(*args: Any, **kwargs: Any) -> Any:
        if kwargs and renames:
            kwargs = rename_keywords(kwargs, renames, op_name)
        if vmap.depth:
            result = vmap.dispatch(op_name, fn, args, kwargs)
            if result is not NotImplemented:
                return result
        try:
            if hook.active:
                return hook.call(op_name, args, kwargs, lambda: fn(*args, **kwargs))
            return fn(*args, **kwargs)
        except Exception as exc:  # PyTorch's error for a limited dtype (uint16, float8...)
            raise limited_error(op_name, args, kwargs, exc) from None
    return frontend


def tensor_method(*names: str, prop: bool = False) -> Callable:
    """Declare the decorated function as ``Tensor.<name>`` for each of ``names`` (default: its
    own name), or as a read-only property with ``prop=True``, for methods that are not ops of
    their own. The op namespace installs them with the ops' methods."""
    def deco(fn: Callable) -> Callable:
        for n in names or (fn.__name__,):
            if n in TENSOR_METHODS:
                raise RuntimeError(f"Tensor.{n} is declared twice")
            TENSOR_METHODS[n] = property(fn) if prop else fn
        return fn
    return deco


def resolve_device(device: Any) -> Device:
    return get_default_device() if device is None else to_device(device)


# -- promotion -------------------------------------------------------------------------------
def result_type(*operands: Any) -> D.dtype:
    """PyTorch's result_type over tensors and Python scalars."""
    dims, zeros, scalars = [], [], []
    for x in operands:
        if isinstance(x, Tensor):
            (dims if x._shape else zeros).append(x._dtype)
        elif x is not None:
            scalars.append(D.scalar_dtype(x))
    return D.result_type_of(dims, zeros, scalars)


def common_device(*operands: Any, op_name: str) -> Device:
    """The device all tensor operands share; a 0-dim CPU tensor may join as a scalar."""
    dev = None
    scalar_only = True
    for t in operands:
        if not isinstance(t, Tensor):
            continue
        d = t._storage.device
        is_cpu_scalar = d.type == "cpu" and not t._shape
        if dev is None or (scalar_only and not is_cpu_scalar):
            if dev is not None and d is not dev and not (dev.type == "cpu"):
                raise _device_mismatch(dev, d, op_name)
            dev, scalar_only = d, is_cpu_scalar
        elif d is not dev and not is_cpu_scalar:
            raise _device_mismatch(dev, d, op_name)
    return dev or get_default_device()


def _device_mismatch(a: Device, b: Device, op_name: str) -> RuntimeError:
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                        f"devices, {a} and {b}! (when checking arguments for {op_name})")


def check_out(out: Tensor, shape: tuple[int, ...], dtype: D.dtype, dev: Device,
              op_name: str, exact_dtype: bool = False) -> None:
    """Validate an ``out=`` tensor; ops that never cast into ``out`` pass ``exact_dtype``."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op_name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if exact_dtype and out._dtype is not dtype:
        raise RuntimeError(f"{op_name}(): Expected out tensor to have dtype {dtype.name}, but "
                           f"got {out._dtype.name} instead")
    if out.device != dev:
        raise RuntimeError(f"{op_name}(): out is on {out.device} but the inputs are on {dev}")
    if not D.can_cast(dtype, out.dtype):
        raise RuntimeError(f"result type {dtype.legacy_name} can't be cast to the desired output "
                           f"type {out.dtype.legacy_name}")
    if tuple(out._shape) != tuple(shape):
        if out.numel() != 0:
            # PyTorch resizes a non-empty out= of the wrong shape too, with this warning.
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._shape)}, which does not match the required output shape "
                          f"{list(shape)} (in {op_name}). This behavior is deprecated; pass an "
                          f"out tensor of the right shape or an empty one.", UserWarning,
                          stacklevel=3)
        out.resize_(tuple(shape))


def dims_one_at_a_time(dims: Sequence[int], ndim: int) -> list[int]:
    """Normalised dims, checked one at a time as PyTorch's dim_list_to_bitset does (flip,
    nansum): a repeat raises before a later dim's range."""
    from gputensor._tensor import normalize_dim
    out: list[int] = []
    for d in dims:
        d = normalize_dim(d, ndim)
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return out


def as_index_list(dims: Any, ndim: int) -> list[int]:
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int | np.integer):
        dims = [dims]
    from gputensor._tensor import normalize_dim
    out = [normalize_dim(d, ndim) for d in dims]
    if len(set(out)) != len(out):
        repeated = next(d for i, d in enumerate(out) if d in out[:i])
        raise RuntimeError(f"dim {repeated} appears multiple times in the list of dims")
    return out
