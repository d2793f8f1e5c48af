"""CPU kernels of the neural-network ops: batch/layer/group norm, NLL loss and embedding.

Each kernel makes one or two passes over its data in a Numba loop instead of the five to ten
NumPy passes a composition would take. The frontends pass contiguous tensors and a
``layout`` tuple saying how to view them (a NumPy reshape here, no tensor op):

- batch norm: (N, C, S), S the spatial size (1 for (N, C) inputs); statistics are per
  channel over N and S.
- layer and group norm: (R, L), R independent rows (R = N * groups) of L = K * S elements,
  K channels of S elements each; the affine weight is per channel, the channel of element j
  of row r is (r % groups) * K + j // S.
- NLL loss: log-probabilities (N, C, S) and targets (N, S).

Statistics accumulate in float64 (the row sums of the layer/group norm backward in the data's
dtype, as PyTorch's do). float16/bfloat16 inputs compute in float32 copies, results are cast
back. The loops are generated in a serial and a parallel variant (``prange`` runs above
``PARALLEL_THRESHOLD`` elements, where a thread launch pays off).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU

from .codegen import load_module

PARALLEL_THRESHOLD = 1 << 17   # elements
_COL_BLOCK = 64                # channels per task when statistics run down columns (S == 1)
_HALF = (np.dtype(D.float16.np_dtype), np.dtype(D.bfloat16.np_dtype))

_SRC = """\
import numpy as np
from numba import njit, prange

_FM = {{'reassoc', 'nsz', 'contract'}}   # lets LLVM vectorise the sums; NaN/inf stay exact


@njit(cache=True, parallel={parallel}, error_model='numpy', fastmath=_FM)
def bn_stats(x, block, mean, var):
    # Per-channel mean and biased variance of x (N, C, S), two passes (no cancellation).
    N, C, S = x.shape
    cnt = N * S
    if S == 1:
        # Rows of channels: each task owns a block of columns and walks down the rows.
        nb = (C + block - 1) // block
        for b in prange(nb):
            c0 = b * block
            c1 = min(C, c0 + block)
            acc = np.zeros(c1 - c0)
            for n in range(N):
                xr = x[n, c0:c1, 0]
                for c in range(c1 - c0):
                    acc[c] += xr[c]
            for c in range(c1 - c0):
                mean[c0 + c] = acc[c] / cnt
                acc[c] = 0.0
            for n in range(N):
                xr = x[n, c0:c1, 0]
                for c in range(c1 - c0):
                    d = xr[c] - mean[c0 + c]
                    acc[c] += d * d
            for c in range(c1 - c0):
                var[c0 + c] = acc[c] / cnt
    else:
        for c in prange(C):
            s = 0.0
            for n in range(N):
                xr = x[n, c]
                for i in range(S):
                    s += xr[i]
            m = s / cnt
            q = 0.0
            for n in range(N):
                xr = x[n, c]
                for i in range(S):
                    d = xr[i] - m
                    q += d * d
            mean[c] = m
            var[c] = q / cnt


@njit(cache=True, parallel={parallel}, error_model='numpy', fastmath=_FM)
def bn_grad_sums(g, x, mean, block, sum_g, sum_gx):
    # sum_g[c] = sum of g, sum_gx[c] = sum of g * (x - mean[c]) over N and S.
    N, C, S = x.shape
    if S == 1:
        nb = (C + block - 1) // block
        for b in prange(nb):
            c0 = b * block
            c1 = min(C, c0 + block)
            a1 = np.zeros(c1 - c0)
            a2 = np.zeros(c1 - c0)
            for n in range(N):
                gr = g[n, c0:c1, 0]
                xr = x[n, c0:c1, 0]
                for c in range(c1 - c0):
                    a1[c] += gr[c]
                    a2[c] += gr[c] * (xr[c] - mean[c0 + c])
            for c in range(c1 - c0):
                sum_g[c0 + c] = a1[c]
                sum_gx[c0 + c] = a2[c]
    else:
        for c in prange(C):
            m = mean[c]
            s1 = 0.0
            s2 = 0.0
            for n in range(N):
                gr = g[n, c]
                xr = x[n, c]
                for i in range(S):
                    s1 += gr[i]
                    s2 += gr[i] * (xr[i] - m)
            sum_g[c] = s1
            sum_gx[c] = s2


@njit(cache=True, parallel={parallel}, error_model='numpy')
def channel_affine(x, scale, shift, out):
    # out = x * scale[c] + shift[c] over (N, C, S).
    N, C, S = x.shape
    if S == 1:
        for n in prange(N):
            xr = x[n, :, 0]
            orow = out[n, :, 0]
            for c in range(C):
                orow[c] = xr[c] * scale[c] + shift[c]
    else:
        for t in prange(N * C):
            n = t // C
            c = t - n * C
            a = scale[c]
            b = shift[c]
            xr = x[n, c]
            orow = out[n, c]
            for i in range(S):
                orow[i] = xr[i] * a + b


@njit(cache=True, parallel={parallel}, error_model='numpy')
def channel_affine2(g, x, p, q, r, out):
    # out = g * p[c] + x * q[c] + r[c] over (N, C, S): batch norm's input gradient.
    N, C, S = x.shape
    if S == 1:
        for n in prange(N):
            gr = g[n, :, 0]
            xr = x[n, :, 0]
            orow = out[n, :, 0]
            for c in range(C):
                orow[c] = gr[c] * p[c] + xr[c] * q[c] + r[c]
    else:
        for t in prange(N * C):
            n = t // C
            c = t - n * C
            a = p[c]
            b = q[c]
            k = r[c]
            gr = g[n, c]
            xr = x[n, c]
            orow = out[n, c]
            for i in range(S):
                orow[i] = gr[i] * a + xr[i] * b + k


@njit(cache=True, error_model='numpy', fastmath=_FM)
def _row_moments(xr):
    L = xr.shape[0]
    s = 0.0
    for j in range(L):
        s += xr[j]
    m = s / L
    q = 0.0
    for j in range(L):
        d = xr[j] - m
        q += d * d
    return m, q / L


@njit(cache=True, parallel={parallel}, error_model='numpy')
def rows_forward(x, w, b, groups, S, eps, out, mean, rstd):
    # Normalise each row of x (R, L) and apply the per-channel affine (w, b). mean and rstd
    # have x's dtype, so the elementwise pass computes in it (float32 SIMD for float32).
    R, L = x.shape
    K = L // S
    for r in prange(R):
        xr = x[r]
        m, v = _row_moments(xr)
        mean[r] = m
        rstd[r] = 1.0 / np.sqrt(v + eps)
        mr = mean[r]
        rs = rstd[r]
        c0 = (r % groups) * K
        orow = out[r]
        if S == 1:
            wr = w[c0:c0 + L]
            br = b[c0:c0 + L]
            for j in range(L):
                orow[j] = (xr[j] - mr) * rs * wr[j] + br[j]
        else:
            for k in range(K):
                a = w[c0 + k] * rs
                sh = b[c0 + k] - mr * a
                for i in range(k * S, k * S + S):
                    orow[i] = xr[i] * a + sh


@njit(cache=True, error_model='numpy', fastmath=_FM)
def _row_backward(xr, gr, wr, m, rs, S, zero, out, gwp, gbp):
    # One row: the input gradient into out, the row's weight/bias gradient terms added to
    # gwp/gbp (per channel; a channel covers S consecutive elements). The row sums run in
    # the data's dtype (``zero``), as PyTorch's do: one fused loop then vectorises.
    L = xr.shape[0]
    K = L // S
    s1 = zero   # sum of g * w
    s2 = zero   # sum of g * w * xhat
    if S == 1:
        for j in range(L):
            xh = (xr[j] - m) * rs
            gw = gr[j] * wr[j]
            s1 += gw
            s2 += gw * xh
            gwp[j] += gr[j] * xh
            gbp[j] += gr[j]
    else:
        for k in range(K):
            a1 = zero
            a2 = zero
            for i in range(k * S, k * S + S):
                xh = (xr[i] - m) * rs
                a1 += gr[i]
                a2 += gr[i] * xh
            s1 += a1 * wr[k]
            s2 += a2 * wr[k]
            gwp[k] += a2
            gbp[k] += a1
    c1 = s1 / L
    c2 = s2 / L
    if S == 1:
        for j in range(L):
            xh = (xr[j] - m) * rs
            out[j] = rs * (gr[j] * wr[j] - c1 - xh * c2)
    else:
        for k in range(K):
            wk = wr[k]
            for i in range(k * S, k * S + S):
                xh = (xr[i] - m) * rs
                out[i] = rs * (gr[i] * wk - c1 - xh * c2)


@njit(cache=True, parallel={parallel}, error_model='numpy')
def rows_backward(g, x, w, mean, rstd, groups, S, tasks, zero, gi, gw_part, gb_part):
    # Input gradient per row, and per-task partial sums of the weight and bias gradients
    # (gw_part, gb_part: (tasks, C), float64) that the caller adds up.
    R, L = x.shape
    K = L // S
    for t in prange(tasks):
        r0 = t * R // tasks
        r1 = (t + 1) * R // tasks
        for r in range(r0, r1):
            c0 = (r % groups) * K
            _row_backward(x[r], g[r], w[c0:c0 + K], mean[r], rstd[r], S, zero, gi[r],
                          gw_part[t, c0:c0 + K], gb_part[t, c0:c0 + K])


@njit(cache=True, error_model='numpy')
def nll_forward(x, t, w, ignore_index, per_item):
    # Returns (sum of -w[t] * x[n, t, s], sum of w[t], first bad target, whether one was bad);
    # per_item (N, S) receives the unreduced losses when it is non-empty.
    N, C, S = x.shape
    total = 0.0
    tw = 0.0
    keep = per_item.size > 0
    for n in range(N):
        for s in range(S):
            c = t[n, s]
            if c == ignore_index:
                if keep:
                    per_item[n, s] = 0.0
                continue
            if c < 0 or c >= C:
                return total, tw, c, True
            wc = w[c]
            loss = -wc * x[n, c, s]
            if keep:
                per_item[n, s] = loss
            total += loss
            tw += wc
    return total, tw, 0, False


@njit(cache=True, error_model='numpy')
def nll_backward(g, t, w, ignore_index, reduction, gi):
    # gi (N, C, S) is zero; the target entries get -w[t] * g, with g (N, S) per item for
    # reduction 0, else (1, 1) (divided by the summed weights of the counted targets for 1).
    N, C, S = gi.shape
    scale = 1.0
    if reduction == 1:
        tw = 0.0
        for n in range(N):
            for s in range(S):
                c = t[n, s]
                if c != ignore_index:
                    tw += w[c]
        scale = 1.0 / tw if tw != 0 else np.inf
    for n in range(N):
        for s in range(S):
            c = t[n, s]
            if c == ignore_index:
                continue
            gv = g[n, s] if reduction == 0 else g[0, 0]
            gi[n, c, s] = -w[c] * gv * scale


@njit(cache=True, parallel={parallel}, error_model='numpy')
def embedding_backward(g, idx, padding_idx, freq, block, out):
    # out (V, D) += g rows at idx; tasks own column blocks, so no two threads add to one entry.
    M, D = g.shape
    nb = (D + block - 1) // block
    for b in prange(nb):
        d0 = b * block
        d1 = min(D, d0 + block)
        for i in range(M):
            r = idx[i]
            if r == padding_idx:
                continue
            orow = out[r, d0:d1]
            grow = g[i, d0:d1]
            if freq.size:
                f = 1.0 / freq[r]
                for d in range(d1 - d0):
                    orow[d] += grow[d] * f
            else:
                for d in range(d1 - d0):
                    orow[d] += grow[d]
"""

_MODULES: dict[bool, ModuleType] = {}
_NO_ROWS = np.empty((0, 0))
_NO_FREQ: dict[np.dtype, np.ndarray] = {}
_FILLED: dict[tuple, np.ndarray] = {}


def _mod(size: int) -> ModuleType:
    parallel = size > PARALLEL_THRESHOLD
    mod = _MODULES.get(parallel)
    if mod is None:
        mod = _MODULES[parallel] = load_module("nn", _SRC.format(parallel=parallel))
    return mod


def _compute(t: Tensor, shape: tuple[int, ...]) -> np.ndarray:
    """The host array of the contiguous float tensor ``t`` viewed as ``shape``;
    float16/bfloat16 become float32 copies (the dtype these kernels compute in)."""
    a = t._host
    if a.itemsize == 2:
        a = a.astype(np.float32)
    return a.reshape(shape)


def _target(out: Tensor, like: np.ndarray) -> tuple[np.ndarray, bool]:
    """Where a kernel writes the fresh contiguous ``out``: its own host array viewed like
    ``like``, or a scratch array in ``like``'s dtype when the dtypes differ (halves)."""
    a = out._host
    if a.dtype != like.dtype:
        return np.empty(like.shape, like.dtype), True
    return a.reshape(like.shape), False


def _store(out: Tensor, arr: np.ndarray) -> None:
    out._host[...] = arr.reshape(out._shape)


def _vec(t: Tensor | None, n: int, fill: float, dtype: np.dtype) -> np.ndarray:
    """A per-channel parameter as a contiguous vector; an absent one is a cached read-only
    vector of ``fill`` (no allocation on the hot path)."""
    if t is None:
        key = (n, fill, np.dtype(dtype))
        v = _FILLED.get(key)
        if v is None:
            v = np.full(n, fill, dtype)
            v.flags.writeable = False
            if len(_FILLED) < 256:
                _FILLED[key] = v
        return v
    return np.ascontiguousarray(t._host.reshape(-1), dtype=dtype)


def _indices(t: Tensor, shape: tuple[int, ...]) -> np.ndarray:
    a = t._host.reshape(shape)
    return a if a.dtype == np.int64 else a.astype(np.int64)


# -- batch norm ------------------------------------------------------------------------------
@CPU.register("_batch_norm")
def batch_norm(out: Tensor, save_mean: Tensor, save_rstd: Tensor, x: Tensor,
               weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, momentum: float, eps: float,
               layout: tuple[int, int, int]) -> None:
    """Training-mode batch norm of contiguous x seen as ``layout`` (N, C, S): batch
    statistics, their running averages (the variance unbiased, as PyTorch keeps it) and the
    normalised, affine output."""
    xa = _compute(x, layout)
    n, c, s = layout
    mod = _mod(xa.size)
    mean = np.empty(c)
    var = np.empty(c)
    mod.bn_stats(xa, _COL_BLOCK, mean, var)
    rstd = 1.0 / np.sqrt(var + eps)
    w = _vec(weight, c, 1.0, np.float64)
    b = _vec(bias, c, 0.0, np.float64)
    scale = w * rstd
    shift = b - mean * scale
    dst, scratch = _target(out, xa)
    mod.channel_affine(xa, scale.astype(xa.dtype), shift.astype(xa.dtype), dst)
    if scratch:
        _store(out, dst)
    _store(save_mean, mean)
    _store(save_rstd, rstd)
    count = n * s
    if running_mean is not None:
        rm = running_mean._host
        rm[...] = (1 - momentum) * rm + momentum * mean
    if running_var is not None:
        rv = running_var._host
        unbiased = var * (count / (count - 1)) if count > 1 else np.full(c, np.nan)
        rv[...] = (1 - momentum) * rv + momentum * unbiased


@CPU.register("_batch_norm_backward")
def batch_norm_backward(grad_input: Tensor, grad_weight: Tensor, grad_bias: Tensor,
                        g: Tensor, x: Tensor, weight: Tensor | None, save_mean: Tensor,
                        save_rstd: Tensor, layout: tuple[int, int, int]) -> None:
    """All three gradients of training-mode batch norm: one reduction pass over (g, x) for
    the per-channel sums, one elementwise pass for the input gradient."""
    xa = _compute(x, layout)
    ga = _compute(g, layout)
    n, c, s = layout
    mod = _mod(xa.size)
    mean = save_mean._host.astype(np.float64)
    rstd = save_rstd._host.astype(np.float64)
    sum_g = np.empty(c)
    sum_gx = np.empty(c)
    mod.bn_grad_sums(ga, xa, mean, _COL_BLOCK, sum_g, sum_gx)
    w = _vec(weight, c, 1.0, np.float64)
    m = n * s
    # grad_input = w * rstd * (g - sum_g / m - xhat * sum(g * xhat) / m), as g*p + x*q + r.
    p = w * rstd
    q = -p * rstd * rstd * sum_gx / m
    r = -p * sum_g / m - q * mean
    dst, scratch = _target(grad_input, xa)
    mod.channel_affine2(ga, xa, p.astype(xa.dtype), q.astype(xa.dtype), r.astype(xa.dtype), dst)
    if scratch:
        _store(grad_input, dst)
    _store(grad_weight, sum_gx * rstd)
    _store(grad_bias, sum_g)


# -- layer and group norm (rows) ---------------------------------------------------------------
def _rows_forward(out: Tensor, mean: Tensor, rstd: Tensor, x: Tensor, weight: Tensor | None,
                  bias: Tensor | None, groups: int, spatial: int, eps: float,
                  layout: tuple[int, int]) -> None:
    """Layer/group norm of contiguous x seen as ``layout`` (rows, L)."""
    xa = _compute(x, layout)
    rows, length = layout
    channels = groups * (length // spatial) if spatial else 0
    w = _vec(weight, channels, 1.0, xa.dtype)
    b = _vec(bias, channels, 0.0, xa.dtype)
    dst, scratch = _target(out, xa)
    m = np.empty(rows, xa.dtype)
    rs = np.empty(rows, xa.dtype)
    _mod(xa.size).rows_forward(xa, w, b, groups, spatial, eps, dst, m, rs)
    if scratch:
        _store(out, dst)
    _store(mean, m)
    _store(rstd, rs)


def _rows_backward(grad_input: Tensor, grad_weight: Tensor, grad_bias: Tensor, g: Tensor,
                   x: Tensor, weight: Tensor | None, mean: Tensor, rstd: Tensor, groups: int,
                   spatial: int, layout: tuple[int, int]) -> None:
    xa = _compute(x, layout)
    ga = _compute(g, layout)
    rows, length = layout
    channels = groups * (length // spatial) if spatial else 0
    w = _vec(weight, channels, 1.0, xa.dtype)
    mod = _mod(xa.size)
    tasks = min(rows, 64) if xa.size > PARALLEL_THRESHOLD else 1
    gw = np.zeros((tasks, channels))
    gb = np.zeros((tasks, channels))
    dst, scratch = _target(grad_input, xa)
    mod.rows_backward(ga, xa, w, _compute(mean, (rows,)), _compute(rstd, (rows,)), groups,
                      spatial, tasks, xa.dtype.type(0), dst, gw, gb)
    if scratch:
        _store(grad_input, dst)
    _store(grad_weight, gw.sum(0))
    _store(grad_bias, gb.sum(0))


CPU.register("_layer_norm")(_rows_forward)
CPU.register("_group_norm")(_rows_forward)
CPU.register("_layer_norm_backward")(_rows_backward)
CPU.register("_group_norm_backward")(_rows_backward)


# -- NLL loss --------------------------------------------------------------------------------
@CPU.register("_nll_loss")
def nll_loss(out: Tensor, x: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
             ignore_index: int, layout: tuple[int, int, int]) -> None:
    """Gather -weight[t] * x[n, t, s] per item of contiguous log-probabilities seen as
    ``layout`` (N, C, S); reduction 0 keeps them, 1 divides their sum by the summed weights of
    the non-ignored targets (NaN when there are none), 2 sums them."""
    n, c, s = layout
    xa = _compute(x, layout)
    ta = _indices(target, (n, s))
    w = _vec(weight, c, 1.0, xa.dtype)
    per_item = np.empty((n, s)) if reduction == 0 else _NO_ROWS
    total, tw, bad, failed = _mod(0).nll_forward(xa, ta, w, ignore_index, per_item)
    if failed:
        raise IndexError(f"Target {bad} is out of bounds.")
    if reduction == 0:
        _store(out, per_item)
    else:
        out._host[...] = (total / tw if tw else np.nan) if reduction == 1 else total


@CPU.register("_nll_loss_backward")
def nll_loss_backward(grad_input: Tensor, g: Tensor, target: Tensor, weight: Tensor | None,
                      reduction: int, ignore_index: int, layout: tuple[int, int, int]) -> None:
    n, c, s = layout
    scratch = grad_input._host.dtype in _HALF
    gi = np.zeros(layout, np.float32) if scratch else grad_input._host.reshape(layout)
    if not scratch:
        gi.fill(0)
    ta = _indices(target, (n, s))
    w = _vec(weight, c, 1.0, gi.dtype)
    ga = _compute(g, (n, s) if reduction == 0 else (1, 1))
    _mod(0).nll_backward(ga, ta, w, ignore_index, reduction, gi)
    if scratch:
        _store(grad_input, gi)


# -- embedding -------------------------------------------------------------------------------
@CPU.register("_embedding")
def embedding(out: Tensor, weight: Tensor, indices: Tensor) -> None:
    """Rows of weight (V, D) at the (already range-checked) indices."""
    np.take(weight._host, indices._host.reshape(-1), axis=0,
            out=out._host.reshape(-1, weight._shape[1]))


@CPU.register("_embedding_backward")
def embedding_backward(out: Tensor, g: Tensor, indices: Tensor, padding_idx: int,
                       scale_grad_by_freq: bool) -> None:
    """out (V, D) = the rows of g summed at their indices; the padding row stays zero."""
    num, dim = out._shape
    ga = _compute(g, (-1, dim))
    idx = _indices(indices, (-1,))
    acc = np.zeros((num, dim), ga.dtype)
    if scale_grad_by_freq:
        freq = np.bincount(idx, minlength=num).astype(ga.dtype)
    else:
        freq = _NO_FREQ.setdefault(ga.dtype, np.empty(0, ga.dtype))
    _mod(ga.size).embedding_backward(ga, idx, padding_idx, freq, _COL_BLOCK, acc)
    _store(out, acc)
