"""torch.* native nn functions that return PyTorch's extra outputs (``native_batch_norm``'s
saved statistics, ``native_dropout``'s mask, ``embedding_bag``'s bookkeeping tensors, ...) or
take the native argument forms (int enums for modes and reductions, flat conv parameters).

Each runs the implementation behind nn.functional (the fused norm ops of gputensor/_ops/nn.py,
F.embedding_bag, F.ctc_loss, F.grid_sample, the conv ops), so results, gradients and devices
are those of the nn functions; the extra outputs come from the same op or from a small
composition beside it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._ops import nn as nn_ops
from gputensor._tensor import Tensor
from gputensor.nn import functional as F
from gputensor.nn.functional._embedding_bag import _bag_of_each_index, _padding
from gputensor.nn.functional._norm import (
    _affine,
    _check_channel_vector,
    _check_group_affine,
    _check_layer_norm,
)
from gputensor.nn.functional._sparse import _renorm_

from ._torch_functional import _reduction


# -- norms -----------------------------------------------------------------------------------
def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                      running_mean: Tensor | None, running_var: Tensor | None, training: bool,
                      momentum: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(output, save_mean, save_invstd). Training normalises with the batch statistics
    (returned; the running ones are updated in place); eval uses the running statistics and,
    as PyTorch's CPU kernel, returns empty statistics."""
    if input.dim() < 2:
        raise RuntimeError(f"batch_norm: expected at least 2D input (got {input.dim()}D "
                           f"input)")
    channels = input.shape[1]
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_channel_vector(t, name, channels)
    if training:
        out, mean, invstd = nn_ops._batch_norm(_affine(input, weight, bias, (channels,)),
                                               running_mean, running_var, momentum, eps)
        # float16/bfloat16 statistics are computed in float32 and returned in the input's
        # dtype, as PyTorch's CPU kernel returns them
        return out, mean.to(input.dtype), invstd.to(input.dtype)
    out = F.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    # (float32 for float16/bfloat16 inputs: the dtype PyTorch's mixed-type kernel keeps)
    empty = gt.empty(0, dtype=nn_ops._compute_dtype(input.dtype), device=input.device)
    return out, empty, empty.clone()


def native_layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(output, mean, rstd); the statistics have the input's leading dims and a size-1 dim
    for each normalized one."""
    shape = _check_layer_norm(input, normalized_shape, weight, bias)
    out, mean, rstd = nn_ops._layer_norm(_affine(input, weight, bias, shape), len(shape), eps)
    stat_shape = tuple(input.shape[:input.dim() - len(shape)]) + (1,) * len(shape)
    return (out, mean.view(stat_shape).to(input.dtype),
            rstd.view(stat_shape).to(input.dtype))


def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int,
                      C: int, HxW: int, group: int, eps: float
                      ) -> tuple[Tensor, Tensor, Tensor]:
    """(output, mean, rstd) of group norm over ``input`` read as (N, C, HxW); the statistics
    are (N, group) and, as in PyTorch, differentiable."""
    if input.numel() != N * C * HxW:
        raise RuntimeError(f"Expected input to have {N * C * HxW} elements (N={N}, C={C}, "
                           f"HxW={HxW}), but got input of shape {list(input.shape)}")
    if group <= 0 or C % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(input.shape)} and num_groups={group}")
    _check_group_affine(input, weight, bias, C)
    x = input.reshape(N, C, HxW)
    out, mean, rstd = nn_ops._group_norm(_affine(x, weight, bias, (C,)), group, eps)
    if gt.is_grad_enabled() and input.requires_grad:
        # The fused op's statistics are outside autograd; PyTorch's are differentiable, so
        # recompute them from differentiable ops when a gradient can flow.
        grouped = x.reshape(N, group, -1).to(mean.dtype)
        mean = grouped.mean(2)
        rstd = (grouped.var(2, correction=0) + eps).rsqrt()
    return (out.reshape(input.shape), mean.reshape(N, group).to(input.dtype),
            rstd.reshape(N, group).to(input.dtype))


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple[Tensor, Tensor]:
    """(output, keep mask as bool). Training (``train`` True or None) keeps each element with
    probability 1 - p and scales the kept ones by 1 / (1 - p); otherwise a copy and an
    all-True mask."""
    if train is None or train:
        keep = 1.0 - p
        if not 0.0 <= keep <= 1.0:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={keep}")
        mask = gt.empty(input.shape, dtype=input.dtype, device=input.device).bernoulli_(keep)
        scale = 0.0 if keep == 0 else 1.0 / keep
        return nn_ops._masked_scale(input, mask, scale), mask.bool()
    return input.clone(), gt.ones(input.shape, dtype=gt.bool, device=input.device)


def native_norm(input: Tensor, p: float | None = 2, dim: Sequence[int] | None = None,
                keepdim: bool = False, dtype: D.dtype | None = None) -> Tensor:
    """The vector p-norm (p None: 2) over ``dim`` (all elements when None or empty), in
    ``dtype``. PyTorch registers this op for sparse tensors only; the value is the same for
    any layout, so it is computed here for dense tensors too."""
    dims = None if dim is None or len(dim) == 0 else list(dim)
    return gt.linalg.vector_norm(input, 2 if p is None else p, dims, keepdim, dtype=dtype)


def norm_except_dim(v: Tensor, pow: int = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm over every dim but ``dim``, keeping the reduced dims (weight_norm's
    helper); ``dim=-1`` is the norm of all elements."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.dim()
    rows = v.movedim(dim, 0).reshape(v.shape[dim], -1)
    shape = [1] * v.dim()
    shape[dim] = v.shape[dim]
    return gt.linalg.vector_norm(rows, pow, 1).reshape(shape)


def frobenius_norm(input: Tensor, dim: Sequence[int], keepdim: bool = False) -> Tensor:
    dims = [dim] if isinstance(dim, int) else list(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions "
                           f"instead.")
    warnings.warn("at::frobenius_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.vector_norm(A, 2., dim, keepdim)` instead", UserWarning,
                  stacklevel=2)
    return gt.linalg.vector_norm(input, 2, dims or None, keepdim)


def nuclear_norm(input: Tensor, dim: Sequence[int] | bool = (-2, -1),
                 keepdim: bool = False) -> Tensor:
    """``nuclear_norm(input, keepdim=False)`` or ``nuclear_norm(input, dim, keepdim=False)``:
    the sum of the singular values of the matrices in ``dim`` (the last two by default)."""
    if isinstance(dim, bool):   # the (input, keepdim) overload
        dim, keepdim = (-2, -1), dim
    warnings.warn("at::nuclear_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead", UserWarning,
                  stacklevel=2)
    return gt.linalg.matrix_norm(input, "nuc", tuple(dim), keepdim)


# -- embeddings and losses -------------------------------------------------------------------
_BAG_MODES = ("sum", "mean", "max")


def _max_rows(rows: Tensor, idx: Tensor, bag: Tensor, out: Tensor) -> Tensor:
    """(bags, dim): per bag and column, the weight row of the first maximal entry (0 for an
    empty bag), as PyTorch's CPU kernel records it."""
    n, dim = rows.shape
    if n == 0:
        return gt.zeros(out.shape, dtype=gt.int64, device=rows.device)
    pos = gt.arange(n, device=rows.device).unsqueeze(1).expand(n, dim)
    hit = rows == out.index_select(0, bag)
    first = gt.full(out.shape, n, dtype=gt.int64, device=rows.device)
    first = first.scatter_reduce(0, bag.unsqueeze(1).expand(n, dim).contiguous(),
                                 gt.where(hit, pos, n), "amin")
    found = first < n
    return gt.where(found, idx[first.clamp(max=n - 1)], 0)


def embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor,
                  scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(output, offset2bag, bag_size, max_indices) with the layout of PyTorch's CPU kernel:
    offset2bag is each index's bag (empty where that kernel's 'sum' fast path skips it);
    bag_size counts each bag's non-padding indices (zeros in 'sum' mode); max_indices is,
    per bag and column, the row that gave the maximum in 'max' mode, bag_size in 'mean' mode
    and zeros in 'sum' mode. ``mode`` is 0/1/2 = sum/mean/max."""
    if mode not in (0, 1, 2):
        raise RuntimeError(f"embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got "
                           f"{mode}")
    if indices.dim() != 1:
        raise RuntimeError(f"input has to be a 1D Tensor, but got Tensor of dimension "
                           f"{indices.dim()}")
    out = F.embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq,
                          _BAG_MODES[mode], sparse, per_sample_weights, include_last_offset,
                          padding_idx)
    itype, dev = indices.dtype, weight.device
    num_bags = out.shape[0]
    n = indices.numel()
    pad = _padding(padding_idx, weight.shape[0])
    with gt.no_grad():
        idx = indices.long()
        bag = _bag_of_each_index(offsets, num_bags, n, None).to(dev) if num_bags else \
            gt.zeros(n, dtype=gt.int64, device=dev)
        # The CPU kernel's fast path for sum mode (float32/16 and bfloat16 rows of unit
        # stride, no padding) skips offset2bag.
        fast_sum = mode == 0 and pad < 0 and weight.stride(1) == 1 and weight.dtype in (
            D.float32, D.float16, D.bfloat16)
        offset2bag = gt.empty(0, dtype=itype, device=dev) if fast_sum else bag.to(itype)
        if mode == 0:
            zeros = gt.zeros(num_bags, dtype=itype, device=dev)
            return out, offset2bag, zeros, zeros.clone()
        counted = idx != pad if pad >= 0 else gt.ones(n, dtype=gt.bool, device=dev)
        bag_size = gt.zeros(num_bags, dtype=gt.int64, device=dev).index_add(
            0, bag, counted.long()).to(itype)
        if mode == 1:
            return out, offset2bag, bag_size, bag_size.clone()
        keep = gt.nonzero(counted).reshape(-1)
        idx, bag = idx.index_select(0, keep), bag.index_select(0, keep)
        rows = weight.detach().index_select(0, idx)
        return out, offset2bag, bag_size, _max_rows(rows, idx, bag, out.detach()).to(itype)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float,
                      norm_type: float) -> Tensor:
    """Scale the rows of ``input`` that ``indices`` reference down to norm ``max_norm``, in
    place; returns ``input``."""
    if indices.dtype not in (D.int32, D.int64):
        raise RuntimeError(f"Expected tensor for argument #2 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {indices.type()} "
                           f"instead (while checking arguments for embedding_renorm_)")
    if input.dim() != 2:
        raise RuntimeError(f"Expected 2-dimensional tensor, but got {input.dim()}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for "
                           f"embedding_renorm_)")
    if indices.numel():
        _renorm_(input, indices, max_norm, norm_type)
        input._bump_version()
    return input


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Tensor | Sequence[int],
             target_lengths: Tensor | Sequence[int], blank: int = 0, reduction: int = 1,
             zero_infinity: bool = False) -> Tensor:
    """``torch.ctc_loss``: F.ctc_loss with the int reduction (0/1/2 = none/mean/sum)."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction(reduction), zero_infinity)


# -- convolution, sampling, pooling ----------------------------------------------------------
def _expand(values: Sequence[int], n: int, name: str) -> tuple[int, ...]:
    vals = tuple(int(v) for v in values)
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={list(vals)}")
    return vals


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                output_padding: Sequence[int], groups: int) -> Tensor:
    """The 1-, 2- or 3-d convolution (or transposed convolution) the weight's rank selects;
    ``output_padding`` applies to transposed convolutions only, as in PyTorch."""
    n = weight.dim() - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"Expected 3D, 4D or 5D weight for convolution, but got weight of "
                           f"size {list(weight.shape)}")
    if input.dim() != n + 2:
        raise RuntimeError(f"Expected {n + 2}-dimensional input for {n + 2}-dimensional weight "
                           f"{list(weight.shape)}, but got {input.dim()}-dimensional input of "
                           f"size {list(input.shape)} instead")
    stride, padding = _expand(stride, n, "stride"), _expand(padding, n, "padding")
    dilation = _expand(dilation, n, "dilation")
    if transposed:
        conv_t = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return conv_t(input, weight, bias, stride, padding,
                      _expand(output_padding, n, "output_padding"), groups, dilation)
    conv = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return conv(input, weight, bias, stride, padding, dilation, groups)


_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """F.grid_sample with int modes: interpolation 0/1/2 = bilinear/nearest/bicubic, padding
    0/1/2 = zeros/border/reflection."""
    if interpolation_mode not in (0, 1, 2):
        raise RuntimeError(f"grid_sampler(): expected interpolation_mode 0 (bilinear), 1 "
                           f"(nearest) or 2 (bicubic), but got {interpolation_mode}")
    if padding_mode not in (0, 1, 2):
        raise RuntimeError(f"grid_sampler(): expected padding_mode 0 (zeros), 1 (border) or 2 "
                           f"(reflection), but got {padding_mode}")
    return F.grid_sample(input, grid, _INTERPOLATION[interpolation_mode],
                         _PADDING[padding_mode], bool(align_corners))


def _grid_sampler_nd(nd: int, input: Tensor, grid: Tensor, interpolation_mode: int,
                     padding_mode: int, align_corners: bool) -> Tensor:
    if input.dim() != nd + 2 or grid.dim() != nd + 2:
        raise RuntimeError(f"grid_sampler(): expected {nd + 2}D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    return _grid_sampler_nd(2, input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    return _grid_sampler_nd(3, input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta: Tensor, size: Sequence[int], align_corners: bool) -> Tensor:
    return F.affine_grid(theta, size, bool(align_corners))


def adaptive_max_pool1d(input: Tensor, output_size: Sequence[int] | int
                        ) -> tuple[Tensor, Tensor]:
    """(values, indices): the native function always returns the indices."""
    return F.adaptive_max_pool1d(input, output_size, True)


def max_pool1d_with_indices(input: Tensor, kernel_size: Sequence[int] | int,
                            stride: Sequence[int] | int = (), padding: Sequence[int] | int = 0,
                            dilation: Sequence[int] | int = 1,
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices); an empty ``stride`` means the kernel size, as in PyTorch."""
    empty_stride = not isinstance(stride, int) and len(stride) == 0
    return F.max_pool1d_with_indices(input, kernel_size, None if empty_stride else stride,
                                     padding, dilation, ceil_mode)


FUNCTIONS: dict[str, Any] = {
    name: obj for name, obj in list(globals().items())
    if callable(obj) and not name.startswith("_") and getattr(obj, "__module__", "") == __name__}
