"""Tensor methods and functions PyTorch programs reach for, composed of existing ops:

- in-place view ops (``t_``, ``transpose_``, ``swapaxes_``, ``swapdims_``, ``squeeze_``,
  ``unsqueeze_``, ``as_strided_``): the tensor takes the view's geometry and, under autograd,
  its history (as PyTorch: a leaf that requires grad refuses);
- scatters into copies (``slice_scatter``, ``select_scatter``, ``diagonal_scatter``), ``put``,
  ``fill_diagonal_``, ``index_reduce``;
- small arithmetic (``addr``, ``dist``, ``logit``, ``renorm``, ``trace``, ``sum_to_size``,
  in-place ``cumsum_``/``cumprod_``), the ``unsafe_`` split spellings and legacy constructors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._tensor import Tensor, normalize_dim
from gputensor.autograd.inplace import apply_inplace, check_leaf, needs_graph

from ._core import op, result_type, tensor_method
from ._scalar_range import checked_fill_value
from .scatter import check_index_source
from .shape import _check_bounds, _dim_size


# -- in-place views ------------------------------------------------------------------------------
def _take_view(self: Tensor, view: Tensor) -> Tensor:
    self._shape, self._stride, self._offset = view._shape, view._stride, view._offset
    if view._requires_grad:
        self.grad_fn = view.grad_fn
        self._output_nr = view._output_nr
    return self


def _inplace_view(name: str, make: Callable[..., Tensor]) -> None:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if needs_graph(self, (), {}):
            check_leaf(self)  # before the view: PyTorch's order of checks
        return _take_view(self, make(self, *args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``: this tensor becomes that view of its data."
    tensor_method(name)(method)


for _name, _make in (("t_", lambda s: s.t()), ("transpose_", lambda s, a, b: s.transpose(a, b)),
                     ("swapaxes_", lambda s, a, b: s.transpose(a, b)),
                     ("swapdims_", lambda s, a, b: s.transpose(a, b)),
                     ("squeeze_", lambda s, *d: s.squeeze(*d)),
                     ("unsqueeze_", lambda s, d: s.unsqueeze(d)),
                     ("as_strided_", lambda s, size, stride, offset=None:
                      s.as_strided(size, stride, offset))):
    _inplace_view(_name, _make)


# -- scatters into a copy ------------------------------------------------------------------------
def _scatter_into(input: Tensor, src: Tensor, region: Callable[[Tensor], Tensor]) -> Tensor:
    out = input.clone()
    target = region(out)
    if tuple(target.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(target.shape)}")
    target.copy_(src)
    return out


@op()
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    """``input`` with ``src`` written into the slice start:end:step of ``dim``."""
    d = normalize_dim(dim, input.dim())
    index = [slice(None)] * input.dim()
    index[d] = slice(start, end, step)
    return _scatter_into(input, src, lambda t: t[tuple(index)])


@op()
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``input`` with ``src`` written into ``input.select(dim, index)``."""
    return _scatter_into(input, src, lambda t: t.select(dim, index))


@op()
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> Tensor:
    """``input`` with ``src`` written into ``input.diagonal(offset, dim1, dim2)``."""
    return _scatter_into(input, src, lambda t: t.diagonal(offset, dim1, dim2))


def _flat_coordinates(t: Tensor, index: Tensor) -> tuple[Tensor, ...]:
    n = t.numel()
    if index.numel() and bool(((index < -n) | (index >= n)).any()):
        raise IndexError(f"put_(): index out of range for a tensor of {n} elements")
    return gt.unravel_index(index.reshape(-1) % max(n, 1), tuple(t.shape)) if t.dim() else ()


@tensor_method()
def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """Write ``source`` at the flat (row-major) positions ``index`` of this tensor, or add
    them with ``accumulate``."""
    if index.dtype is not D.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{index.dtype.legacy_name}")
    if source.dtype is not self.dtype:   # no cast, as in PyTorch
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {self.dtype.legacy_name} and source.dtype = "
                           f"{source.dtype.legacy_name}")
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")
    if index.numel() and not self.numel():
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    if self.dim() == 0:     # through its 1-element view: an index may repeat (0 and -1)
        self.view(1).put_(index, source, accumulate)
        return self
    return self.index_put_(_flat_coordinates(self, index), source.reshape(-1), accumulate)


@op()
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """``put_`` on a copy of ``input``."""
    return input.clone().put_(index, source, accumulate)


@tensor_method()
def fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fill the main diagonal (all dims equal beyond 2-D); with ``wrap``, a tall matrix's
    diagonal restarts every ``ncols + 1`` rows, as NumPy's fill_diagonal."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.dim() > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = min(self.shape)
    if self.dim() == 2 and wrap and self.shape[0] > self.shape[1] + 1:
        rows, cols = self.shape
        flat = list(range(0, rows * cols, cols + 1))
        positions = gt.tensor(flat, dtype=D.int64, device=self.device)
        coords = gt.unravel_index(positions, (rows, cols))
    else:
        ar = gt.arange(n, device=self.device)
        coords = tuple(ar for _ in range(self.dim()))
    values = gt.full((coords[0].numel(),), fill_value, dtype=self.dtype, device=self.device)
    return self.index_put_(coords, values)


@op()
def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """Reduce the slices of ``source`` into ``input``'s slices ``index`` along ``dim`` with
    "prod", "mean", "amax" or "amin" (``scatter_reduce`` with ``index`` spread over the
    other dims)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d = normalize_dim(dim, input.dim())
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (D.int32, D.int64):
        raise RuntimeError("index_reduce_(): Expected dtype int32/int64 for index")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({input.dtype.legacy_name}) and source "
                           f"({source.dtype.legacy_name}) must have the same scalar type")
    check_index_source("index_reduce_", input, d, index, source)
    unsupported = input.dtype is D.bool or input.is_complex()
    if unsupported and not include_self:  # a kernel of its own fills the slices first
        raise NotImplementedError(f'"index_reduce_func_exclude_input_init" not implemented '
                                  f"for '{input.dtype.legacy_name}'")
    if index.numel() and input.dim() > 1:  # PyTorch's kernel selects the slices first
        _check_bounds(index, _dim_size(input, d), d)
    if unsupported:
        raise NotImplementedError(f'"index_func_" not implemented for '
                                  f"'{input.dtype.legacy_name}'")
    _check_bounds(index, _dim_size(input, d), d)    # negative indices are out of range too
    shape = [1] * source.dim()
    if source.dim():
        shape[d] = -1
    spread = index.reshape(shape).expand(source.shape) if source.dim() else index.reshape(())
    return input.scatter_reduce(d, spread, source, reduce, include_self=include_self)


@tensor_method()
def index_reduce_(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                  include_self: bool = True) -> Tensor:
    return self.copy_(index_reduce(self, dim, index, source, reduce, include_self=include_self))


# -- arithmetic ----------------------------------------------------------------------------------
@op(inplace=True)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)`` (beta = 0 ignores input, NaN included)."""
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.dim()}-D"
                           if vec1.dim() != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.dim()}-D")
    # The tensors alone set the result dtype; beta and alpha are converted to it, as in PyTorch
    dt = result_type(input, vec1, vec2)
    for name, scalar in (("beta", beta), ("alpha", alpha)):
        if isinstance(scalar, bool) and dt is not D.bool:
            raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
        if dt.category <= D.INTEGRAL and not isinstance(scalar, int):
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                               f"floating point number.")
    # converted to the result dtype like fill values: an overflow raises
    beta_v, _ = checked_fill_value(beta, dt), checked_fill_value(alpha, dt)
    if dt is D.bool:   # (beta and self) or (alpha and vec1 vec2^T)
        outer = gt.outer(vec1.to(dt), vec2.to(dt))
        self_part = input.to(dt).expand(outer.shape)
        outer = outer if alpha else gt.zeros_like(outer)
        return (self_part | outer) if beta else outer
    # PyTorch's kernel: (alpha * vec1[i]) * vec2[j], plus beta * input[i, j] unless beta is 0
    # in the result dtype (then input is ignored, NaN included). Complex products are the
    # plain (ac - bd) + (ad + bc)i, so a factor 1 + 0i still turns inf + 0i into inf + NaN i.
    scaled = vec1.to(dt) * alpha if dt.is_complex or alpha != 1 else vec1.to(dt)
    outer = scaled.unsqueeze(-1) * vec2.to(dt)
    input.expand(outer.shape)   # (its shape is checked either way)
    if (beta_v if dt.category <= D.INTEGRAL else dt.np_dtype.type(beta_v)) == 0:
        return outer
    if not dt.is_complex:
        return (input.to(dt) if beta == 1 else input.to(dt) * beta) + outer
    # the kernel's sum is plain too: gputensor's add, like PyTorch's, is a + (1 + 0i) * b,
    # which would make NaNs of inf + inf i
    total = gt.view_as_real(input.to(dt) * beta) + gt.view_as_real(outer)
    return gt.view_as_complex(total if total.stride(-1) == 1 else total.contiguous())


@tensor_method()
def addr_(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1,
          alpha: Any = 1) -> Tensor:
    return apply_inplace(self, lambda: addr(self, vec1, vec2, beta=beta, alpha=alpha)) \
        if needs_graph(self, (vec1, vec2), {}) else \
        self.copy_(addr(self, vec1, vec2, beta=beta, alpha=alpha))


@op()
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of ``input - other``."""
    return gt.norm(input - other, p)


@op(inplace=True)
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(x / (1 - x)), with x clamped to [eps, 1 - eps] when ``eps`` is given."""
    if input.dtype.is_complex:
        raise NotImplementedError(f"\"logit_{input.device.type}\" not implemented for "
                                  f"'{input.dtype.legacy_name}'")
    if input.dtype.category <= D.INTEGRAL:   # PyTorch computes bool and integer inputs in
        input = input.to(D.get_default_dtype())   # the default float dtype (int8 1 - x wraps)
    x = input if eps is None else input.clamp(eps, 1 - eps)
    return gt.log(x / (1 - x))


@tensor_method()
def logit_(self: Tensor, eps: float | None = None) -> Tensor:
    if self.dtype.category <= D.INTEGRAL:   # the float result cannot go back in place
        raise RuntimeError(f"result type {D.get_default_dtype().legacy_name} can't be cast to "
                           f"the desired output type {self.dtype.legacy_name}")
    return self.copy_(logit(self, eps)) if not needs_graph(self, (), {}) else \
        apply_inplace(self, lambda: logit(self, eps))


@op(inplace=True)
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` rescaled to p-norm ``maxnorm`` where its norm exceeds it."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.dim() < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           f"dimensions")
    d = normalize_dim(dim, input.dim())
    others = [i for i in range(input.dim()) if i != d]
    # 16-bit floats norm in float32, their accumulation type, as PyTorch's renorm does (a
    # float16 slice whose 1-norm passes 65504 is rescaled, not zeroed by an inf norm)
    wide = input.to(D.float32) if input.dtype in (D.float16, D.bfloat16) else input
    norms = gt.norm(wide, p, dim=others, keepdim=True)
    factor = gt.where(norms > maxnorm, maxnorm / (norms + 1e-7), gt.ones_like(norms))
    return input * factor.to(input.dtype) if wide is not input else input * factor


@tensor_method()
def renorm_(self: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    return self.copy_(renorm(self, p, dim, maxnorm)) if not needs_graph(self, (), {}) else \
        apply_inplace(self, lambda: renorm(self, p, dim, maxnorm))


@op()
def trace(input: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal."""
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return input.diagonal().sum()


@tensor_method()
def sum_to_size(self: Tensor, *size: Any) -> Tensor:
    """Sum this tensor down to ``size`` (which it must broadcast to)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], Sequence) else \
        tuple(size)
    if gt.broadcast_shapes(shape, tuple(self.shape)) != tuple(self.shape):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size "
                           f"{{{list(self.shape)}}}.")
    lead = self.dim() - len(shape)
    out = self.sum(tuple(range(lead))) if lead else self
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and out.shape[i] != 1)
    return out.sum(dims, keepdim=True) if dims else out


@tensor_method()
def cumsum_(self: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return apply_inplace(self, lambda: self.cumsum(dim, dtype=dtype)) \
        if needs_graph(self, (), {}) else self.copy_(self.cumsum(dim, dtype=dtype))


@tensor_method()
def cumprod_(self: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return apply_inplace(self, lambda: self.cumprod(dim, dtype=dtype)) \
        if needs_graph(self, (), {}) else self.copy_(self.cumprod(dim, dtype=dtype))


# -- spellings -----------------------------------------------------------------------------------
@op()
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``chunk`` (PyTorch's variant skips a view check gputensor does not make)."""
    return input.chunk(chunks, dim)


@op()
def unsafe_split(input: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """``split`` (PyTorch's variant skips a view check gputensor does not make); its
    ``split_size`` is one int (unsafe_split_with_sizes takes a list)."""
    if isinstance(split_size, bool) or not isinstance(split_size, int):
        raise TypeError(f"unsafe_split(): argument 'split_size' (position 2) must be int, not "
                        f"{type(split_size).__name__}")
    return input.split(split_size, dim)


@op()
def unsafe_split_with_sizes(input: Tensor, split_sizes: Sequence[int],
                            dim: int = 0) -> tuple[Tensor, ...]:
    return input.split(list(split_sizes), dim)


@tensor_method()
def new_empty_strided(self: Tensor, size: Sequence[int], stride: Sequence[int], *,
                      dtype: Any = None, device: Any = None, requires_grad: bool = False,
                      layout: Any = None, pin_memory: bool = False) -> Tensor:
    return gt.empty_strided(size, stride, dtype=dtype or self.dtype,
                            device=device or self.device, requires_grad=requires_grad)


@tensor_method()
def new(self: Tensor, *args: Any, device: Any = None) -> Tensor:
    """The legacy constructor: ``x.new(*sizes)`` (uninitialised), ``x.new(data)`` (a copy of
    a sequence) or ``x.new()`` (empty), in this tensor's dtype and device."""
    dev = self.device if device is None else device
    if not args:
        return gt.empty(0, dtype=self.dtype, device=dev)
    if len(args) == 1 and isinstance(args[0], Sequence) and not isinstance(args[0], gt.Size):
        return gt.tensor(args[0], dtype=self.dtype, device=dev)
    shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], gt.Size) else args
    if not all(isinstance(n, int) for n in shape):
        raise TypeError(f"new(): argument must be sizes (ints) or a sequence of values, got "
                        f"{args!r:.80}")
    return gt.empty(shape, dtype=self.dtype, device=dev)


@tensor_method()
def storage_type(self: Tensor) -> type:
    """The legacy storage class of this tensor's dtype and device (``gt.FloatStorage``...)."""
    return type(self.storage())


@tensor_method()
def hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    from gputensor.nn.functional import hardshrink as _hardshrink

    return _hardshrink(self, lambd)


@tensor_method()
def prelu(self: Tensor, weight: Tensor) -> Tensor:
    from gputensor.nn.functional import prelu as _prelu

    return _prelu(self, weight)
