"""CPU kernels of the fused recurrences behind nn.LSTM/GRU/RNN (gputensor/_ops/rnn.py).

Each time step is one BLAS gemm for the hidden projection and one pass of gate arithmetic, in
loops over contiguous rows that LLVM vectorises (the float32 sigmoid/tanh are the vocabulary's
branch-free polynomials). The whole loop over time is one Numba call when NumPy's own BLAS can
be called from compiled code (kernels/cpu/numpy_blas.py; not SciPy's OpenBLAS, whose thread
pool would fight NumPy's): that saves Python's ~15 us per step. The forward projection is
computed as ``W_hh @ h^T`` and transposed: OpenBLAS runs that orientation of the
(B, H) x (H, G) product ~1.7x faster for a small batch. Without NumPy's BLAS entry points the
loop runs in Python around ``np.matmul``. The input projections of every step arrive
precomputed (one gemm in the frontend), biases folded in, except GRU's hidden bias, which sits
inside ``r * (W_hn h + b_hn)``.

Layouts (all C-contiguous, one float dtype): inputs ``xg`` (T, B, G*H), states (B, H),
``w_hh`` (G*H, H) as nn.Module stores it; gate order i, f, g, o (LSTM) and r, z, n (GRU), as
PyTorch's. ``reverse`` runs time backwards (the second direction of a bidirectional layer).
Saved activations for backward: LSTM keeps (i, f, g, o) after their nonlinearities and every
cell state; GRU keeps (r, z, n, W_hn h + b_hn); RNN needs only its outputs.

The backward kernels walk time the other way, carrying dh (and LSTM's dc) in the ``dh``
(``dc``) buffers: they return the gradients of the gate pre-activations, from which the
frontend gets the weight gradients with one gemm over all steps.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gputensor._tensor import Tensor
from gputensor.kernels.recurrence import step_order
from gputensor.kernels.registry import CPU

from . import numpy_blas
from .numpy_blas import NO_TRANS, TRANS
from .scalar_fns import sigmoid, tanh


def _a(t: Tensor) -> np.ndarray:
    return t._np if t._np_buf is t._storage._buf else t._host


def _one(t: Tensor) -> np.floating:
    """1 in the tensor's dtype: Numba would widen float32 arithmetic with an int literal."""
    return t._dtype.np_dtype.type(1)


def _bump(*tensors: Tensor) -> None:
    for t in tensors:
        t._bump_version()


def _compiled_loop(*arrays: np.ndarray) -> bool:
    """Whether the time loop can run in Numba: NumPy's BLAS is callable from there and every
    array is C-contiguous (the gemm reads rows at their natural leading dimension)."""
    return numpy_blas.available() and all(a.flags.c_contiguous for a in arrays)


@njit(cache=True, error_model="numpy")
def _step(k, steps, reverse, backward):
    """step_order (kernels/recurrence.py) in compiled code: (t, tp, first) of visit k."""
    if backward:
        k = steps - 1 - k
    t = steps - 1 - k if reverse else k
    return t, (t + 1 if reverse else t - 1), k == 0


@njit(cache=True, error_model="numpy")
def _project(h, w, scratch, work):
    """work (B, G) = h (B, H) @ w (G, H)^T, as scratch (G, B) = w @ h^T and a transpose."""
    batch, hs = h.shape
    gates = w.shape[0]
    numpy_blas.gemm(NO_TRANS, TRANS, gates, batch, hs, w, hs, h, hs, scratch, batch)
    for k in range(gates):
        for b in range(batch):
            work[b, k] = scratch[k, b]


@njit(cache=True, error_model="numpy")
def _project_back(d, w, dh):
    """dh (B, H) = d (B, G) @ w (G, H)."""
    batch, gates = d.shape
    hs = w.shape[1]
    numpy_blas.gemm(NO_TRANS, NO_TRANS, batch, hs, gates, d, gates, w, hs, dh, hs)


# -- LSTM -------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _lstm_gates(x, hh, cp, a, c_out, h_out):
    """One step's gates: a = (i, f, g, o) of x + hh; c = f cp + i g; h = o tanh(c)."""
    batch, gates = hh.shape
    hs = gates // 4
    for b in range(batch):
        ab = a[b]
        xb = x[b]
        hb = hh[b]
        for k in range(2 * hs):
            ab[k] = sigmoid(xb[k] + hb[k])
        for k in range(2 * hs, 3 * hs):
            ab[k] = tanh(xb[k] + hb[k])
        for k in range(3 * hs, gates):
            ab[k] = sigmoid(xb[k] + hb[k])
        cpb = cp[b]
        cb = c_out[b]
        for j in range(hs):
            cb[j] = ab[hs + j] * cpb[j] + ab[j] * ab[2 * hs + j]
        ob = h_out[b]
        for j in range(hs):
            ob[j] = ab[3 * hs + j] * tanh(cb[j])


@njit(cache=True, error_model="numpy")
def _lstm_gates_backward(g_out, a, c, cp, d, dh, dc, one):
    """One step back: dh += g_out; d = the gate pre-activation gradients; dc := its part
    through the previous cell state. (Loops over few arrays each, so LLVM vectorises them
    without giving up on its aliasing checks.)"""
    batch, gates = a.shape
    hs = gates // 4
    tc = np.empty(hs, a.dtype)
    dhv = np.empty(hs, a.dtype)
    dcv = np.empty(hs, a.dtype)
    for b in range(batch):
        ab = a[b]
        db = d[b]
        cb = c[b]
        gb = g_out[b]
        dhb = dh[b]
        dcb = dc[b]
        cpb = cp[b]
        for j in range(hs):
            tc[j] = tanh(cb[j])
        for j in range(hs):
            dhv[j] = dhb[j] + gb[j]
        for j in range(hs):
            t = tc[j]
            o = ab[3 * hs + j]
            dcv[j] = dcb[j] + dhv[j] * o * (one - t * t)
            db[3 * hs + j] = dhv[j] * t * o * (one - o)
        for j in range(hs):
            i = ab[j]
            g = ab[2 * hs + j]
            db[j] = dcv[j] * g * i * (one - i)
            db[2 * hs + j] = dcv[j] * i * (one - g * g)
        for j in range(hs):
            f = ab[hs + j]
            db[hs + j] = dcv[j] * cpb[j] * f * (one - f)
            dcb[j] = dcv[j] * f


@njit(cache=True, error_model="numpy")
def _lstm_loop(x, h0, c0, w, o, c, a, work, scratch, reverse):
    steps = x.shape[0]
    for k in range(steps):
        t, tp, first = _step(k, steps, reverse, False)
        _project(h0 if first else o[tp], w, scratch, work)
        _lstm_gates(x[t], work, c0 if first else c[tp], a[t], c[t], o[t])


@njit(cache=True, error_model="numpy")
def _lstm_loop_backward(g, a, c, c0, d, dh, dc, w, one, reverse):
    steps = d.shape[0]
    for k in range(steps):
        t, tp, first = _step(k, steps, reverse, True)
        _lstm_gates_backward(g[t], a[t], c[t], c0 if first else c[tp], d[t], dh, dc, one)
        _project_back(d[t], w, dh)


@CPU.register("_lstm_recurrence")
def lstm_recurrence(out: Tensor, cs: Tensor, acts: Tensor, hh: Tensor, xg: Tensor, h0: Tensor,
                    c0: Tensor, w_hh: Tensor, reverse: bool) -> None:
    """``hh`` (B, 4H) is scratch for each step's hidden projection."""
    o, c, a, work, x = _a(out), _a(cs), _a(acts), _a(hh), _a(xg)
    h_init, c_init, w = _a(h0), _a(c0), _a(w_hh)
    if not out.numel():
        pass
    elif _compiled_loop(o, c, a, work, x, h_init, c_init, w):
        scratch = np.empty(work.shape[::-1], work.dtype)
        _lstm_loop(x, h_init, c_init, w, o, c, a, work, scratch, reverse)
    else:
        for t, tp, first in step_order(out._shape[0], reverse, False):
            np.matmul(h_init if first else o[tp], w.T, out=work)
            _lstm_gates(x[t], work, c_init if first else c[tp], a[t], c[t], o[t])
    _bump(out, cs, acts)


@CPU.register("_lstm_recurrence_backward")
def lstm_recurrence_backward(dxg: Tensor, dh: Tensor, dc: Tensor, g_out: Tensor, acts: Tensor,
                             cs: Tensor, c0: Tensor, w_hh: Tensor, reverse: bool) -> None:
    """dh/dc hold the gradients of the final states on entry and of (h0, c0) on return."""
    d, dh_, dc_, g, a, c = _a(dxg), _a(dh), _a(dc), _a(g_out), _a(acts), _a(cs)
    c_init, w, one = _a(c0), _a(w_hh), _one(dxg)
    if not dxg.numel():
        pass
    elif _compiled_loop(d, dh_, dc_, g, a, c, c_init, w):
        _lstm_loop_backward(g, a, c, c_init, d, dh_, dc_, w, one, reverse)
    else:
        for t, tp, first in step_order(d.shape[0], reverse, True):
            _lstm_gates_backward(g[t], a[t], c[t], c_init if first else c[tp], d[t], dh_, dc_,
                                 one)
            np.matmul(d[t], w, out=dh_)
    _bump(dxg, dh, dc)


# -- GRU --------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _gru_gates(x, hh, b_hh, hp, a, h_out):
    """One step: r, z = sigmoid(x + hh + b); hn = hh_n + b_n; n = tanh(x_n + r hn);
    h = n + z (hp - n); a = (r, z, n, hn)."""
    batch, gates = hh.shape
    hs = gates // 3
    r = np.empty(hs, a.dtype)
    hn = np.empty(hs, a.dtype)
    n = np.empty(hs, a.dtype)
    for b in range(batch):
        ab = a[b]
        xb = x[b]
        hb = hh[b]
        for k in range(2 * hs):
            ab[k] = sigmoid(xb[k] + hb[k] + b_hh[k])
        for j in range(hs):
            r[j] = ab[j]
            hn[j] = hb[2 * hs + j] + b_hh[2 * hs + j]
        for j in range(hs):
            n[j] = tanh(xb[2 * hs + j] + r[j] * hn[j])
        hpb = hp[b]
        ob = h_out[b]
        for j in range(hs):
            ob[j] = n[j] + ab[hs + j] * (hpb[j] - n[j])
        for j in range(hs):
            ab[2 * hs + j] = n[j]
            ab[3 * hs + j] = hn[j]


@njit(cache=True, error_model="numpy")
def _gru_gates_backward(g_out, a, hp, dx, dg, dh, one):
    """One step back: dh += g_out; dx / dg = the gradients of the input-side and hidden-side
    pre-activations; dh := its direct part dh * z (the gemm adds dg W_hh)."""
    batch, wide = a.shape
    hs = wide // 4
    dhv = np.empty(hs, a.dtype)
    dn = np.empty(hs, a.dtype)
    for b in range(batch):
        ab = a[b]
        dxb = dx[b]
        dgb = dg[b]
        gb = g_out[b]
        hpb = hp[b]
        dhb = dh[b]
        for j in range(hs):
            dhv[j] = dhb[j] + gb[j]
        for j in range(hs):
            z = ab[hs + j]
            n = ab[2 * hs + j]
            dn[j] = dhv[j] * (one - z) * (one - n * n)
            dz = dhv[j] * (hpb[j] - n) * z * (one - z)
            dxb[hs + j] = dz
            dgb[hs + j] = dz
        for j in range(hs):
            r = ab[j]
            dr = dn[j] * ab[3 * hs + j] * r * (one - r)
            dxb[j] = dr
            dgb[j] = dr
            dxb[2 * hs + j] = dn[j]
            dgb[2 * hs + j] = dn[j] * r
        for j in range(hs):
            dhb[j] = dhv[j] * ab[hs + j]


@njit(cache=True, error_model="numpy")
def _gru_loop(x, h0, w, bias, o, a, work, scratch, reverse):
    steps = x.shape[0]
    for k in range(steps):
        t, tp, first = _step(k, steps, reverse, False)
        hp = h0 if first else o[tp]
        _project(hp, w, scratch, work)
        _gru_gates(x[t], work, bias, hp, a[t], o[t])


@njit(cache=True, error_model="numpy")
def _gru_loop_backward(g, a, o, h0, dx, dg, dh, w, through, one, reverse):
    steps = dx.shape[0]
    for k in range(steps):
        t, tp, first = _step(k, steps, reverse, True)
        _gru_gates_backward(g[t], a[t], h0 if first else o[tp], dx[t], dg[t], dh, one)
        _project_back(dg[t], w, through)
        for b in range(dh.shape[0]):
            for j in range(dh.shape[1]):
                dh[b, j] += through[b, j]


@CPU.register("_gru_recurrence")
def gru_recurrence(out: Tensor, acts: Tensor, hh: Tensor, xg: Tensor, h0: Tensor, w_hh: Tensor,
                   b_hh: Tensor | None, reverse: bool) -> None:
    o, a, work, x, h_init, w = _a(out), _a(acts), _a(hh), _a(xg), _a(h0), _a(w_hh)
    bias = np.zeros(x.shape[2], x.dtype) if b_hh is None else _a(b_hh)
    if not out.numel():
        pass
    elif _compiled_loop(o, a, work, x, h_init, w, bias):
        scratch = np.empty(work.shape[::-1], work.dtype)
        _gru_loop(x, h_init, w, bias, o, a, work, scratch, reverse)
    else:
        for t, tp, first in step_order(out._shape[0], reverse, False):
            hp = h_init if first else o[tp]
            np.matmul(hp, w.T, out=work)
            _gru_gates(x[t], work, bias, hp, a[t], o[t])
    _bump(out, acts)


@CPU.register("_gru_recurrence_backward")
def gru_recurrence_backward(dxg: Tensor, dhg: Tensor, dh: Tensor, g_out: Tensor, acts: Tensor,
                            out: Tensor, h0: Tensor, w_hh: Tensor, reverse: bool) -> None:
    """dxg: gradients of the input-side pre-activations; dhg: of W_hh h + b_hh; dh holds the
    final state's gradient on entry and h0's on return."""
    dx, dg, dh_, g, a, o = _a(dxg), _a(dhg), _a(dh), _a(g_out), _a(acts), _a(out)
    h_init, w, one = _a(h0), _a(w_hh), _one(dxg)
    through = np.empty_like(dh_)
    if not dxg.numel():
        pass
    elif _compiled_loop(dx, dg, dh_, g, a, o, h_init, w):
        _gru_loop_backward(g, a, o, h_init, dx, dg, dh_, w, through, one, reverse)
    else:
        for t, tp, first in step_order(dx.shape[0], reverse, True):
            _gru_gates_backward(g[t], a[t], h_init if first else o[tp], dx[t], dg[t], dh_, one)
            np.add(dh_, np.matmul(dg[t], w, out=through), out=dh_)
    _bump(dxg, dhg, dh)


# -- Elman RNN (tanh or relu) -----------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _elman(x, hh, h_out, relu, one):
    zero = one - one
    batch, hs = hh.shape
    for b in range(batch):
        xb = x[b]
        hb = hh[b]
        ob = h_out[b]
        if relu:
            for j in range(hs):
                v = xb[j] + hb[j]
                ob[j] = v if v > zero or v != v else zero   # relu keeps NaN
        else:
            for j in range(hs):
                ob[j] = tanh(xb[j] + hb[j])


@njit(cache=True, error_model="numpy")
def _elman_backward(g_out, o, d, dh, relu, one):
    zero = one - one
    batch, hs = o.shape
    for b in range(batch):
        db = d[b]
        ob = o[b]
        gb = g_out[b]
        dhb = dh[b]
        if relu:
            for j in range(hs):
                db[j] = dhb[j] + gb[j] if ob[j] > zero else zero
        else:
            for j in range(hs):
                db[j] = (dhb[j] + gb[j]) * (one - ob[j] * ob[j])


@njit(cache=True, error_model="numpy")
def _rnn_loop(x, h0, w, o, work, scratch, relu, one, reverse):
    steps = x.shape[0]
    for k in range(steps):
        t, tp, first = _step(k, steps, reverse, False)
        _project(h0 if first else o[tp], w, scratch, work)
        _elman(x[t], work, o[t], relu, one)


@njit(cache=True, error_model="numpy")
def _rnn_loop_backward(g, o, d, dh, w, relu, one, reverse):
    steps = d.shape[0]
    for k in range(steps):
        t, _, _ = _step(k, steps, reverse, True)
        _elman_backward(g[t], o[t], d[t], dh, relu, one)
        _project_back(d[t], w, dh)


@CPU.register("_rnn_recurrence")
def rnn_recurrence(out: Tensor, hh: Tensor, xg: Tensor, h0: Tensor, w_hh: Tensor, relu: bool,
                   reverse: bool) -> None:
    o, work, x, h_init = _a(out), _a(hh), _a(xg), _a(h0)
    w, one = _a(w_hh), _one(xg)
    if not out.numel():
        pass
    elif _compiled_loop(o, work, x, h_init, w):
        scratch = np.empty(work.shape[::-1], work.dtype)
        _rnn_loop(x, h_init, w, o, work, scratch, relu, one, reverse)
    else:
        for t, tp, first in step_order(out._shape[0], reverse, False):
            np.matmul(h_init if first else o[tp], w.T, out=work)
            _elman(x[t], work, o[t], relu, one)
    _bump(out)


@CPU.register("_rnn_recurrence_backward")
def rnn_recurrence_backward(dxg: Tensor, dh: Tensor, g_out: Tensor, out: Tensor, w_hh: Tensor,
                            relu: bool, reverse: bool) -> None:
    d, dh_, g, o, w, one = _a(dxg), _a(dh), _a(g_out), _a(out), _a(w_hh), _one(dxg)
    if not dxg.numel():
        pass
    elif _compiled_loop(d, dh_, g, o, w):
        _rnn_loop_backward(g, o, d, dh_, w, relu, one, reverse)
    else:
        for t, _, _ in step_order(d.shape[0], reverse, True):
            _elman_backward(g[t], o[t], d[t], dh_, relu, one)
            np.matmul(d[t], w, out=dh_)
    _bump(dxg, dh)
