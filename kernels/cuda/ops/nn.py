"""CUDA backend kernels of the neural-network ops (kernels/cuda/nn.cu): batch/layer/group norm,
NLL loss and embedding, registered under the CPU kernels' names and signatures
(kernels/cpu/nn.py) so the frontends in gputensor/_ops/nn.py dispatch by device alone.

The launchers only shape launches: per-channel parameters are brought to the kernels'
accumulator dtype (float32 for 16-bit floats and float32, float64 for float64) by device ops,
outputs of another dtype go through an accumulator-typed scratch tensor and ``copy_``. Index
kernels report a bad target/index to the device's error record (kernels/cuda/errors.py), which
raises the CPU backend's IndexError right after the launch or at the next synchronising call;
no launch waits for the device. Embedding copies rows as raw words, so any dtype works
(complex128 as two 8-byte words per element).
"""

from __future__ import annotations

import numpy as np

from gputensor import _dtype as D
from gputensor._determinism import alert_not_deterministic
from gputensor._tensor import Tensor
from gputensor.kernels.allocation import empty
from gputensor.kernels.registry import CUDA

from .. import errors
from ..device import (
    MAX_GRID,
    CudaSource,
    grid_for,
    launch,
)
from ..dtypes import FLOAT_DTYPES, REAL_DTYPES, SHORT, short_name, variants

SRC = CudaSource("nn.cu")
_F = variants(FLOAT_DTYPES)
_I64, _F64 = np.int64, np.float64

SRC.instantiate(
    "nn_bn_fwd_{s}",
    "{T}* out, {A}* mean, {A}* rstd, const {T}* x, const {A}* w, const {A}* b, {A}* rm, "
    "{A}* rv, double* part, double momentum, double eps, long long N, long long C, long long S, "
    "long long P, int phase",
    "gtnn::batch_norm_forward<{T}, {A}>(out, mean, rstd, x, w, b, rm, rv, part, momentum, eps, "
    "N, C, S, P, phase)", _F)
SRC.instantiate(
    "nn_bn_bwd_{s}",
    "{T}* gi, {A}* gw, {A}* gb, const {T}* g, const {T}* x, const {A}* w, const {A}* mean, "
    "const {A}* rstd, double* part, long long N, long long C, long long S, long long P, "
    "int phase",
    "gtnn::batch_norm_backward<{T}, {A}>(gi, gw, gb, g, x, w, mean, rstd, part, N, C, S, P, "
    "phase)", _F)
SRC.instantiate(
    "nn_rows_fwd_{s}",
    "{T}* out, {A}* mean, {A}* rstd, const {T}* x, const {A}* w, const {A}* b, "
    "long long groups, long long S, double eps, long long R, long long L, int cached",
    "gtnn::rows_forward<{T}, {A}>(out, mean, rstd, x, w, b, groups, S, eps, R, L, cached)", _F)
SRC.instantiate(
    "nn_rows_bwd_{s}",
    "{T}* gi, double* pw, double* pb, const {T}* g, const {T}* x, const {A}* w, "
    "const {A}* mean, const {A}* rstd, long long groups, long long S, long long R, long long L",
    "gtnn::rows_backward<{T}, {A}>(gi, pw, pb, g, x, w, mean, rstd, groups, S, R, L)", _F)
SRC.instantiate(
    "nn_rows_param_direct_{s}",
    "{A}* gw, {A}* gb, double* part, const {T}* g, const {T}* x, const {A}* mean, "
    "const {A}* rstd, long long groups, long long N, long long C, long long P",
    "gtnn::rows_param_direct<{T}, {A}>(gw, gb, part, g, x, mean, rstd, groups, N, C, P)", _F)
_ACC = [{"s": "f32", "A": "float"}, {"s": "f64", "A": "double"}]
SRC.instantiate(
    "nn_rows_param_partials_{s}",
    "{A}* gw, {A}* gb, double* part, const double* pw, const double* pb, long long N, "
    "long long C, long long P",
    "gtnn::rows_param_partials<{A}>(gw, gb, part, pw, pb, N, C, P)", _ACC)
SRC.instantiate(
    "nn_cols_finalize_{s}", "{A}* gw, {A}* gb, const double* part, long long C, long long P",
    "gtnn::cols_finalize<{A}>(gw, gb, part, C, P)", _ACC)
SRC.instantiate(
    "nn_nll_fwd_{s}",
    "{T}* out, double* part, long long* err, long long site, const {T}* x, const long long* t, "
    "const {A}* w, long long ignore_index, int reduction, long long N, long long C, long long S",
    "gtnn::nll_forward<{T}, {A}>(out, part, err, site, x, t, w, ignore_index, reduction, N, C, "
    "S)",
    _F)
SRC.instantiate(
    "nn_nll_finalize_{s}", "{T}* out, double* scale, const double* part, int nparts, int mode",
    "gtnn::nll_finalize<{T}>(out, scale, part, nparts, mode)", _F)
SRC.instantiate(
    "nn_nll_weight_sum_{s}",
    "double* part, double* scale, long long* err, long long site, const long long* t, "
    "const {A}* w, long long ignore_index, long long items, long long C",
    "gtnn::nll_weight_sum<{A}>(part, scale, err, site, t, w, ignore_index, items, C)", _ACC)
SRC.instantiate(
    "nn_nll_bwd_{s}",
    "{T}* gi, long long* err, long long site, const {T}* g, const long long* t, const {A}* w, "
    "const double* scale, long long ignore_index, int reduction, long long N, long long C, "
    "long long S",
    "gtnn::nll_backward<{T}, {A}>(gi, err, site, g, t, w, scale, ignore_index, reduction, N, C, "
    "S)",
    _F)
# Embedding rows are copied as unsigned integers of the element's size; indices int32/int64.
_BYTES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
_INDEX = {D.int32: ("i32", "int"), D.int64: ("i64", "long long")}
SRC.instantiate(
    "nn_emb_fwd_b{n}_{i}",
    "{E}* out, long long* err, long long site, const {E}* w, const {I}* idx, long long M, "
    "long long V, long long D",
    "gtnn::embedding_forward<{E}, {I}>(out, err, site, w, idx, M, V, D)",
    [{"n": str(n), "E": e, "i": i, "I": it} for n, e in _BYTES.items()
     for i, it in _INDEX.values()])
SRC.instantiate(
    "nn_emb_counts_{i}", "int* counts, const {I}* idx, long long M, long long V",
    "gtnn::embedding_counts<{I}>(counts, idx, M, V)",
    [{"i": i, "I": it} for i, it in _INDEX.values()])
SRC.instantiate(
    "nn_emb_bwd_{s}_{i}",
    "{A}* acc, long long* err, long long site, const {T}* g, const {I}* idx, "
    "const int* counts, long long padding_idx, long long M, long long V, long long D",
    "gtnn::embedding_backward<{T}, {A}, {I}>(acc, err, site, g, idx, counts, padding_idx, M, V, "
    "D)",
    [{**v, "i": i, "I": it} for v in _F for i, it in _INDEX.values()])
SRC.instantiate("nn_zero_{s}", "{T}* p, long long n", "gtnn::fill_zero<{T}>(p, n)",
                [{"s": "f32", "T": "float"}, {"s": "f64", "T": "double"},
                 {"s": "i32", "T": "int"}])
SRC.instantiate("nn_cast_{s}", "{T}* out, const {A}* src, long long n",
                "gtnn::cast_store<{T}, {A}>(out, src, n)", _F)

_BLOCK = 256
_COLS = (32, 8)  # column reductions: 32 adjacent channels per warp, 8 warps down the rows


# -- helpers ----------------------------------------------------------------------------------
def _acc(dt: D.dtype) -> D.dtype:
    """The dtype the kernels compute ``dt`` in (and keep per-channel parameters in)."""
    return D.float64 if dt is D.float64 else D.float32


def _float_kind(t: Tensor, op: str) -> str:
    s = short_name(t._dtype, op, REAL_DTYPES)
    if t._dtype not in FLOAT_DTYPES:
        raise TypeError(f"'{op}' on CUDA expects a floating point input, got {t._dtype}")
    return s


def _as_acc(t: Tensor | None, adt: D.dtype) -> Tensor | None:
    """A contiguous ``adt`` version of a per-channel parameter (itself when it already is)."""
    if t is None:
        return None
    if t._dtype is not adt:
        t = t.to(adt)
    return t if t.is_contiguous() else t.contiguous()


def _writable(t: Tensor | None, adt: D.dtype) -> Tensor | None:
    """``t`` when a kernel can write it as a contiguous ``adt`` array, else an ``adt`` copy
    (written back by :func:`_write_back`)."""
    if t is None or (t._dtype is adt and t.is_contiguous()):
        return t
    return _as_acc(t, adt)


def _write_back(t: Tensor | None, scratch: Tensor | None) -> None:
    if t is not None and scratch is not t:
        t.copy_(scratch)


def _pow2_block(n: int, cap: int = _BLOCK) -> int:
    """Threads for a reduction over ``n`` items: a power of two, 32 to ``cap``."""
    b = 32
    while b < cap and b < n:
        b *= 2
    return b


_TARGET_SITE = errors.site("nll_loss", IndexError,
                           "Target {value} is out of bounds. (the input has {bound} classes)")
_EMBEDDING_SITE = errors.site("embedding", IndexError,
                              "index out of range in self: index {value} with {bound} embeddings")


def _error_args(t: Tensor, site: errors.ErrorSite) -> tuple[list, int]:
    """(the kernel's ``err, site`` arguments, the device index for ``errors.launched``)."""
    dev = t._storage.device.index or 0
    return [errors.record(dev), _I64(site.id)], dev


def _zero(t: Tensor) -> None:
    n = t.numel()
    if n:
        kind = {D.float32: "f32", D.float64: "f64", D.int32: "i32"}[t._dtype]
        launch(SRC, f"nn_zero_{kind}", grid_for(n), _BLOCK, [t, _I64(n)])


def _indices(t: Tensor) -> tuple[Tensor, str]:
    """Contiguous int32/int64 indices and their kernel suffix (other integer dtypes become
    int64 on the device)."""
    if t._dtype not in _INDEX:
        t = t.to(D.int64)
    if not t.is_contiguous():
        t = t.contiguous()
    return t, _INDEX[t._dtype][0]


# -- batch norm -------------------------------------------------------------------------------
# Below this many blocks a channel's positions are split over several blocks (P parts)...
_BN_TARGET_BLOCKS = 256
# ... but never into parts of fewer positions than this.
_BN_MIN_PART = 4096
_FUSED = 3
# Column reductions of the layer/group norm weight gradients split the batch into parts of at
# least this many rows when the channel tiles alone are too few blocks.
_COL_MIN_ROWS = 512
# Rows up to this size (in the accumulator dtype) are kept in dynamic shared memory.
_ROW_CACHE_BYTES = 32 << 10


def _bn_plan(n: int, c: int, s: int) -> tuple[int, tuple[int, int, int], int]:
    """(parts P, block, grid) of the per-channel kernels: tiles of 32 channels for (N, C)
    inputs, one channel per block otherwise; P > 1 splits each channel's N * S positions when
    the tiles alone would leave the device mostly idle."""
    cnt = n * s
    if s == 1:
        tiles, block = -(-c // _COLS[0]), (_COLS[0], _COLS[1], 1)
    else:
        tiles, block = c, (1, _pow2_block(cnt), 1)
    parts = max(1, min(-(-_BN_TARGET_BLOCKS // tiles), -(-cnt // _BN_MIN_PART)))
    return parts, block, min(MAX_GRID, tiles * parts)


@CUDA.register("_batch_norm")
def batch_norm(out: Tensor, save_mean: Tensor, save_rstd: Tensor, x: Tensor,
               weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, momentum: float, eps: float,
               layout: tuple[int, int, int]) -> None:
    """Training-mode batch norm of contiguous x seen as ``layout`` (N, C, S), the running
    statistics updated in place (variance unbiased): one launch, or three when channels are
    split over several blocks (sums, squared deviations, output)."""
    s = _float_kind(x, "batch_norm")
    adt = _acc(x._dtype)
    n, c, sp = layout
    rm, rv = _writable(running_mean, adt), _writable(running_var, adt)
    parts, block, grid = _bn_plan(n, c, sp)
    part = empty((c * parts * 2,), D.float64, x.device) if parts > 1 else None
    args = [out, save_mean, save_rstd, x, _as_acc(weight, adt), _as_acc(bias, adt), rm, rv,
            part, _F64(momentum), _F64(eps), _I64(n), _I64(c), _I64(sp), _I64(parts)]
    for phase in ((0, 1, 2) if parts > 1 else (_FUSED,)):
        launch(SRC, f"nn_bn_fwd_{s}", grid, block, [*args, np.int32(phase)])
    _write_back(running_mean, rm)
    _write_back(running_var, rv)


@CUDA.register("_batch_norm_backward")
def batch_norm_backward(grad_input: Tensor, grad_weight: Tensor, grad_bias: Tensor,
                        g: Tensor, x: Tensor, weight: Tensor | None, save_mean: Tensor,
                        save_rstd: Tensor, layout: tuple[int, int, int]) -> None:
    """All three gradients of training-mode batch norm: per-channel sums, then the input
    gradient from them (one launch, or two when channels are split over several blocks)."""
    s = _float_kind(x, "batch_norm_backward")
    adt = _acc(x._dtype)
    n, c, sp = layout
    gw, gb = _writable(grad_weight, adt), _writable(grad_bias, adt)
    parts, block, grid = _bn_plan(n, c, sp)
    part = empty((c * parts * 2,), D.float64, x.device) if parts > 1 else None
    args = [grad_input, gw, gb, g, x, _as_acc(weight, adt), _as_acc(save_mean, adt),
            _as_acc(save_rstd, adt), part, _I64(n), _I64(c), _I64(sp), _I64(parts)]
    for phase in ((0, 1) if parts > 1 else (_FUSED,)):
        launch(SRC, f"nn_bn_bwd_{s}", grid, block, [*args, np.int32(phase)])
    _write_back(grad_weight, gw)
    _write_back(grad_bias, gb)


# -- layer and group norm (rows) ---------------------------------------------------------------
def _rows_forward(out: Tensor, mean: Tensor, rstd: Tensor, x: Tensor, weight: Tensor | None,
                  bias: Tensor | None, groups: int, spatial: int, eps: float,
                  layout: tuple[int, int]) -> None:
    """Layer/group norm of contiguous x seen as ``layout`` (rows, L): one block per row, the
    row read once into shared memory when it fits (then both statistics passes and the output
    pass read it there)."""
    s = _float_kind(x, "layer_norm")
    adt = _acc(x._dtype)
    rows, length = layout
    m, rs = _writable(mean, adt), _writable(rstd, adt)
    row_bytes = length * adt.itemsize
    cached = row_bytes <= _ROW_CACHE_BYTES
    launch(SRC, f"nn_rows_fwd_{s}", min(MAX_GRID, rows), _pow2_block(length),
           [out, m, rs, x, _as_acc(weight, adt), _as_acc(bias, adt), _I64(groups),
            _I64(spatial), _F64(eps), _I64(rows), _I64(length), np.int32(cached)],
           shared_bytes=row_bytes if cached else 0)
    _write_back(mean, m)
    _write_back(rstd, rs)


def _rows_backward(grad_input: Tensor, grad_weight: Tensor, grad_bias: Tensor, g: Tensor,
                   x: Tensor, weight: Tensor | None, mean: Tensor, rstd: Tensor, groups: int,
                   spatial: int, layout: tuple[int, int]) -> None:
    """Input gradient one block per row; weight/bias gradients by a column reduction over the
    batch (of g * xhat directly for S == 1, of the rows' per-channel partials otherwise), split
    into parts of the batch plus a finalize launch when the channels alone are few blocks."""
    s = _float_kind(x, "layer_norm_backward")
    adt = _acc(x._dtype)
    rows, length = layout
    k = length // spatial
    channels = groups * k
    batch = rows // groups
    m, rs = _as_acc(mean, adt), _as_acc(rstd, adt)
    w = _as_acc(weight, adt)
    pw = pb = None
    if spatial > 1:
        pw = empty((rows * k,), D.float64, x.device)
        pb = empty((rows * k,), D.float64, x.device)
    block = _pow2_block(length) if spatial < 32 else _BLOCK
    launch(SRC, f"nn_rows_bwd_{s}", min(MAX_GRID, rows), block,
           [grad_input, pw, pb, g, x, w, m, rs, _I64(groups), _I64(spatial), _I64(rows),
            _I64(length)])
    gw, gb = _writable(grad_weight, adt), _writable(grad_bias, adt)
    tiles = -(-channels // _COLS[0])
    parts = max(1, min(-(-_BN_TARGET_BLOCKS // tiles), -(-batch // _COL_MIN_ROWS)))
    part = empty((channels * parts * 2,), D.float64, x.device) if parts > 1 else None
    grid, block2 = min(MAX_GRID, tiles * parts), (_COLS[0], _COLS[1], 1)
    if spatial == 1:
        launch(SRC, f"nn_rows_param_direct_{s}", grid, block2,
               [gw, gb, part, g, x, m, rs, _I64(groups), _I64(batch), _I64(channels),
                _I64(parts)])
    else:
        launch(SRC, f"nn_rows_param_partials_{SHORT[adt]}", grid, block2,
               [gw, gb, part, pw, pb, _I64(batch), _I64(channels), _I64(parts)])
    if parts > 1:
        launch(SRC, f"nn_cols_finalize_{SHORT[adt]}", grid_for(channels), _BLOCK,
               [gw, gb, part, _I64(channels), _I64(parts)])
    _write_back(grad_weight, gw)
    _write_back(grad_bias, gb)


CUDA.register("_layer_norm")(_rows_forward)
CUDA.register("_group_norm")(_rows_forward)
CUDA.register("_layer_norm_backward")(_rows_backward)
CUDA.register("_group_norm_backward")(_rows_backward)


# -- NLL loss --------------------------------------------------------------------------------
def _targets(t: Tensor) -> Tensor:
    if t._dtype is not D.int64:
        t = t.to(D.int64)
    return t if t.is_contiguous() else t.contiguous()



def _partials_finalize(s: str, out: Tensor | None, scale: Tensor | None, part: Tensor,
                       nparts: int, mode: int) -> None:
    launch(SRC, f"nn_nll_finalize_{s}", 1, _BLOCK, [out, scale, part, np.int32(nparts),
                                                     np.int32(mode)])


# Up to this many items a reducing NLL pass runs as one block that finalises its own result
# (PyTorch's reducing kernel is one block too): one launch instead of a partials pass and a
# finalize, which is what a small classifier's loss costs.
_NLL_ONE_BLOCK_ITEMS = 1 << 16


def _reduce_grid(items: int) -> int:
    return 1 if items <= _NLL_ONE_BLOCK_ITEMS else grid_for(items)


@CUDA.register("_nll_loss")
def nll_loss(out: Tensor, x: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
             ignore_index: int, layout: tuple[int, int, int]) -> None:
    """-weight[t] * x[n, t, s] per item of log-probabilities seen as ``layout`` (N, C, S);
    reduction 0 keeps them, 1 divides their sum by the summed weights of the counted targets
    (NaN when there are none), 2 sums them. Bad targets raise IndexError, as on the CPU."""
    s = _float_kind(x, "nll_loss")
    adt = _acc(x._dtype)
    n, c, sp = layout
    items = n * sp
    t = _targets(target)
    w = _as_acc(weight, adt)
    err, dev = _error_args(x, _TARGET_SITE)
    grid = grid_for(items) if reduction == 0 else _reduce_grid(items)
    part = None if reduction == 0 or grid == 1 else empty((2 * grid,), D.float64, x.device)
    if items or reduction != 0:
        launch(SRC, f"nn_nll_fwd_{s}", grid, _BLOCK,
               [out, part, *err, x, t, w, _I64(ignore_index), np.int32(reduction), _I64(n),
                _I64(c), _I64(sp)])
    if part is not None:
        _partials_finalize(s, out, None, part, grid, 1 if reduction == 1 else 2)
    errors.launched(dev)


@CUDA.register("_nll_loss_backward")
def nll_loss_backward(grad_input: Tensor, g: Tensor, target: Tensor, weight: Tensor | None,
                      reduction: int, ignore_index: int, layout: tuple[int, int, int]) -> None:
    """grad_input (N, C, S) written whole in one pass: -weight[t] * g at the targets (scaled by
    1 / summed weights for 'mean', reduced first on the device), zeros elsewhere."""
    s = _float_kind(grad_input, "nll_loss_backward")
    adt = _acc(grad_input._dtype)
    n, c, sp = layout
    items = n * sp
    t = _targets(target)
    w = _as_acc(weight, adt)
    err, dev = _error_args(g, _TARGET_SITE)
    scale = None
    if reduction == 1:
        grid = _reduce_grid(items)
        part = None if grid == 1 else empty((2 * grid,), D.float64, g.device)
        scale = empty((1,), D.float64, g.device)
        launch(SRC, f"nn_nll_weight_sum_{SHORT[adt]}", grid, _BLOCK,
               [part, scale, *err, t, w, _I64(ignore_index), _I64(items), _I64(c)])
        if part is not None:
            _partials_finalize(s, None, scale, part, grid, 3)
    total = grad_input.numel()
    if total:
        launch(SRC, f"nn_nll_bwd_{s}", grid_for(total), _BLOCK,
               [grad_input, *err, g, t, w, scale, _I64(ignore_index), np.int32(reduction),
                _I64(n), _I64(c), _I64(sp)])
    errors.launched(dev)


# -- embedding -------------------------------------------------------------------------------
@CUDA.register("_embedding")
def embedding(out: Tensor, weight: Tensor, indices: Tensor) -> None:
    """Rows of weight (V, D) at the indices, copied element by element on the device (as raw
    words: elements wider than 8 bytes, complex128, as several)."""
    short_name(weight._dtype, "embedding")
    num, dim = weight._shape
    idx, kind = _indices(indices)
    count = idx.numel()
    if not count or not dim:
        return
    size = weight._dtype.itemsize
    words = max(1, size // 8)
    err, dev = _error_args(weight, _EMBEDDING_SITE)
    launch(SRC, f"nn_emb_fwd_b{size // words}_{kind}", grid_for(count * dim * words),
           _BLOCK, [out, *err, weight, idx, _I64(count), _I64(num), _I64(dim * words)])
    errors.launched(dev)


def _real_view(t: Tensor) -> Tensor:
    """A contiguous complex (.., D) tensor as the real (.., 2D) tensor of its parts."""
    shape = (*t._shape[:-1], 2 * t._shape[-1]) if t._shape else (2,)
    strides = tuple(int(np.prod(shape[k + 1:])) for k in range(len(shape)))
    return Tensor._make(t._storage, t._dtype.to_real(), shape, strides, 2 * t._offset)


@CUDA.register("_embedding_backward")
def embedding_backward(out: Tensor, g: Tensor, indices: Tensor, padding_idx: int,
                       scale_grad_by_freq: bool) -> None:
    """out (V, D) = the rows of g summed at their indices with atomics (in float32 for 16-bit
    floats); the padding row stays zero; rows divided by their index's count on request.
    Complex gradients run as their real (.., 2D) views: every step acts on each part alike."""
    alert_not_deterministic("embedding_dense_backward_cuda")
    if g._dtype.is_complex and out._dtype is g._dtype:
        embedding_backward(_real_view(out), _real_view(g.contiguous()), indices, padding_idx,
                           scale_grad_by_freq)
        return
    s = _float_kind(g, "embedding_backward")
    adt = _acc(g._dtype)
    num, dim = out._shape
    idx, kind = _indices(indices)
    count = idx.numel()
    acc = out if out._dtype is adt else empty(out._shape, adt, out.device)
    _zero(acc)
    if count and dim:
        counts = None
        if scale_grad_by_freq:
            counts = empty((num,), D.int32, out.device)
            _zero(counts)
            launch(SRC, f"nn_emb_counts_{kind}", grid_for(count), _BLOCK,
                   [counts, idx, _I64(count), _I64(num)])
        err, dev = _error_args(g, _EMBEDDING_SITE)
        launch(SRC, f"nn_emb_bwd_{s}_{kind}", grid_for(count * dim), _BLOCK,
               [acc, *err, g, idx, counts, _I64(padding_idx), _I64(count), _I64(num),
                _I64(dim)])
        errors.launched(dev)
    if acc is not out and out.numel():
        launch(SRC, f"nn_cast_{s}", grid_for(out.numel()), _BLOCK,
               [out, acc, _I64(out.numel())])

