"""CUDA backend of the fused recurrences (gputensor/_ops/rnn.py), registered under the CPU
kernels' names and signatures (kernels/cpu/rnn.py).

Each step is two launches on the current stream: the hidden projection as a cuBLAS gemm
(``gemm_into``, the ``_gemm`` kernel's path) into a (B, G*H) scratch block, then one gate
kernel from kernels/cuda/rnn.cu over the (B, H) units, which reads the step's input-side
pre-activations and writes its outputs and saved activations in place. Backward runs the gate
kernel first (state gradients carried in dh/dc) and then the gemm ``dh (+)= d_gates_t W_hh``.
Nothing is read back to the host, so the loop only queues work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.recurrence import step_order
from gputensor.kernels.registry import CUDA

from ..device import CudaSource, grid_for, launch
from ..dtypes import short_name, variants
from .linalg import gemm_into

_DTYPES = (D.float32, D.float64)
BLOCK = 256
_I64, _I32 = np.int64, np.int32

SRC = CudaSource("rnn.cu")
_V = variants(_DTYPES)
_STEP = "long long t, long long tp, int first, long long B, long long H"
SRC.instantiate("rnn_lstm_fwd_{s}",
                "const {T}* xg, const {T}* hh, const {T}* c0, {T}* out, {T}* cs, {T}* acts, "
                + _STEP, "gtrnn::lstm_forward<{T}>(xg, hh, c0, out, cs, acts, t, tp, first, B, H)",
                _V)
SRC.instantiate("rnn_lstm_bwd_{s}",
                "const {T}* g_out, const {T}* acts, const {T}* cs, const {T}* c0, {T}* d_gates, "
                "{T}* dh, {T}* dc, " + _STEP,
                "gtrnn::lstm_backward<{T}>(g_out, acts, cs, c0, d_gates, dh, dc, t, tp, first, "
                "B, H)", _V)
SRC.instantiate("rnn_gru_fwd_{s}",
                "const {T}* xg, const {T}* hh, const {T}* b_hh, const {T}* h0, {T}* out, "
                "{T}* acts, " + _STEP,
                "gtrnn::gru_forward<{T}>(xg, hh, b_hh, h0, out, acts, t, tp, first, B, H)", _V)
SRC.instantiate("rnn_gru_bwd_{s}",
                "const {T}* g_out, const {T}* acts, const {T}* out, const {T}* h0, {T}* d_x, "
                "{T}* d_h, {T}* dh, " + _STEP,
                "gtrnn::gru_backward<{T}>(g_out, acts, out, h0, d_x, d_h, dh, t, tp, first, B, "
                "H)", _V)
SRC.instantiate("rnn_elman_fwd_{s}",
                "const {T}* xg, const {T}* hh, {T}* out, long long t, long long B, long long H, "
                "int relu", "gtrnn::rnn_forward<{T}>(xg, hh, out, t, B, H, relu)", _V)
SRC.instantiate("rnn_elman_bwd_{s}",
                "const {T}* g_out, const {T}* out, {T}* d_x, const {T}* dh, long long t, "
                "long long B, long long H, int relu",
                "gtrnn::rnn_backward<{T}>(g_out, out, d_x, dh, t, B, H, relu)", _V)


def _row(t: Tensor, i: int) -> Tensor:
    """``t[i]`` of a contiguous (T, B, W) tensor, as a plain view (no op frontend)."""
    _, b, w = t._shape
    return t._view((b, w), (w, 1), t._offset + i * b * w)


def _transposed(w: Tensor) -> Tensor:
    """W^T of a contiguous (G*H, H) weight, as a plain view."""
    rows, cols = w._shape
    return w._view((cols, rows), (1, cols), w._offset)


def _previous(out: Tensor, h0: Tensor, tp: int, first: int) -> Tensor:
    return h0 if first else _row(out, tp)


def _forward(kernel: str, op: str, out: Tensor, hh: Tensor, h0: Tensor, w_hh: Tensor,
             reverse: bool, args: Callable[[int, int, int], list[Any]]) -> None:
    """Each step: hh = h_{t-1} W_hh^T, then the gate kernel with ``args(t, tp, first)``."""
    s = short_name(out._dtype, op, _DTYPES)
    steps, batch, hs = out._shape
    w_t = _transposed(w_hh)
    for t, tp, first in step_order(steps, reverse, False):
        gemm_into(hh, _previous(out, h0, tp, first), w_t)
        launch(SRC, f"{kernel}_{s}", grid_for(batch * hs, BLOCK), BLOCK, args(t, tp, first))


def _backward(kernel: str, op: str, dh: Tensor, d_hidden: Tensor, w_hh: Tensor, reverse: bool,
              args: Callable[[int, int, int], list[Any]], accumulate: bool = False) -> None:
    """Each step back: the gate kernel with ``args(t, tp, first)``, then
    dh (+)= d_hidden_t W_hh (GRU keeps its direct part dh * z and adds)."""
    s = short_name(dh._dtype, op, _DTYPES)
    steps, batch, hs = d_hidden._shape[0], dh._shape[0], dh._shape[1]
    for t, tp, first in step_order(steps, reverse, True):
        launch(SRC, f"{kernel}_{s}", grid_for(batch * hs, BLOCK), BLOCK, args(t, tp, first))
        gemm_into(dh, _row(d_hidden, t), w_hh, dh if accumulate else None, int(accumulate))


def _step_args(t: int, tp: int, first: int, batch: int, hs: int) -> list[Any]:
    return [_I64(t), _I64(tp), _I32(int(first)), _I64(batch), _I64(hs)]


@CUDA.register("_lstm_recurrence")
def lstm_recurrence(out: Tensor, cs: Tensor, acts: Tensor, hh: Tensor, xg: Tensor, h0: Tensor,
                    c0: Tensor, w_hh: Tensor, reverse: bool) -> None:
    b, hs = h0._shape
    _forward("rnn_lstm_fwd", "_lstm_recurrence", out, hh, h0, w_hh, reverse,
             lambda t, tp, first: [xg, hh, c0, out, cs, acts, *_step_args(t, tp, first, b, hs)])


@CUDA.register("_lstm_recurrence_backward")
def lstm_recurrence_backward(dxg: Tensor, dh: Tensor, dc: Tensor, g_out: Tensor, acts: Tensor,
                             cs: Tensor, c0: Tensor, w_hh: Tensor, reverse: bool) -> None:
    b, hs = dh._shape
    _backward("rnn_lstm_bwd", "_lstm_recurrence_backward", dh, dxg, w_hh, reverse,
              lambda t, tp, first: [g_out, acts, cs, c0, dxg, dh, dc,
                                    *_step_args(t, tp, first, b, hs)])


@CUDA.register("_gru_recurrence")
def gru_recurrence(out: Tensor, acts: Tensor, hh: Tensor, xg: Tensor, h0: Tensor, w_hh: Tensor,
                   b_hh: Tensor | None, reverse: bool) -> None:
    b, hs = h0._shape
    _forward("rnn_gru_fwd", "_gru_recurrence", out, hh, h0, w_hh, reverse,
             lambda t, tp, first: [xg, hh, b_hh, h0, out, acts,
                                   *_step_args(t, tp, first, b, hs)])


@CUDA.register("_gru_recurrence_backward")
def gru_recurrence_backward(dxg: Tensor, dhg: Tensor, dh: Tensor, g_out: Tensor, acts: Tensor,
                            out: Tensor, h0: Tensor, w_hh: Tensor, reverse: bool) -> None:
    b, hs = dh._shape
    _backward("rnn_gru_bwd", "_gru_recurrence_backward", dh, dhg, w_hh, reverse,
              lambda t, tp, first: [g_out, acts, out, h0, dxg, dhg, dh,
                                    *_step_args(t, tp, first, b, hs)], accumulate=True)


@CUDA.register("_rnn_recurrence")
def rnn_recurrence(out: Tensor, hh: Tensor, xg: Tensor, h0: Tensor, w_hh: Tensor, relu: bool,
                   reverse: bool) -> None:
    b, hs = h0._shape
    _forward("rnn_elman_fwd", "_rnn_recurrence", out, hh, h0, w_hh, reverse,
             lambda t, tp, first: [xg, hh, out, _I64(t), _I64(b), _I64(hs), _I32(relu)])


@CUDA.register("_rnn_recurrence_backward")
def rnn_recurrence_backward(dxg: Tensor, dh: Tensor, g_out: Tensor, out: Tensor, w_hh: Tensor,
                            relu: bool, reverse: bool) -> None:
    b, hs = dh._shape
    _backward("rnn_elman_bwd", "_rnn_recurrence_backward", dh, dxg, w_hh, reverse,
              lambda t, tp, first: [g_out, out, dxg, dh, _I64(t), _I64(b), _I64(hs),
                                    _I32(relu)])
