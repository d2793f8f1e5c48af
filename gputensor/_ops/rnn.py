"""The recurrences of nn.RNN/LSTM/GRU and their cells: one fused op per layer direction, and
the op-by-op steps they fall back to.

A layer's input projections for every time step are one gemm (the caller's ``project``); what
is left is the recurrence over time, ``h_t = cell(xg_t + W_hh h_{t-1}, ...)``. The fused ops
(``_lstm_recurrence``, ``_gru_recurrence``, ``_rnn_recurrence``) run all of it in one backend
kernel call: on the CPU one Numba loop with a BLAS gemm per step (kernels/cpu/rnn.py), on CUDA
a cuBLAS gemm and one gate kernel per step (kernels/cuda/ops/rnn.py). Their derivatives run one
backward kernel over time that yields the gate pre-activation gradients; the weight gradient
is then one gemm over all steps (and GRU's hidden bias one sum). When the gradient must itself
be differentiable (``create_graph=True``), the backward recomputes the recurrence from the
op-by-op steps and differentiates that, so double backward works as PyTorch's CPU path does.

The fused ops take float32/float64 tensors of one dtype on one CPU or CUDA device, outside
gt.func.vmap and ONNX export (forward-mode AD transposes their backward); anything else
(16-bit floats, autocast's mixed dtypes; LSTM projections and packed sequences, which the
layer runs step by step) takes the op-by-op steps.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.autograd.grad_mode import is_grad_enabled
from gputensor.func._state import VMAP as _VMAP

from ._core import empty, kernel, op

_FUSED_DTYPES = (D.float32, D.float64)
_FUSED_DEVICES = ("cpu", "cuda")
# Gate count per mode; the RNN modes' nonlinearity is the ``relu`` flag.
GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# -- one time step, op by op (cells, packed sequences, fallbacks, double backward) ------------
def rnn_step(xg: Tensor, h: Tensor, w_hh_t: Tensor, relu: bool) -> Tensor:
    """h' = act(xg + h @ W_hh^T), where xg already holds W_ih x + b_ih + b_hh."""
    import gputensor as gt
    pre = gt.addmm(xg, h, w_hh_t)
    return gt.relu(pre) if relu else gt.tanh(pre)


def lstm_step(xg: Tensor, h: Tensor, c: Tensor, w_hh_t: Tensor,
              w_hr_t: Tensor | None) -> tuple[Tensor, Tensor]:
    """One LSTM step; xg holds W_ih x + b_ih + b_hh for the four gates (i, f, g, o)."""
    import gputensor as gt
    gates = gt.addmm(xg, h, w_hh_t)
    # One sigmoid over all four gates is cheaper than three over slices; g's part is unused.
    i, f, _, o = gates.sigmoid().chunk(4, 1)
    hs = c.shape[-1]
    g = gates.narrow(1, 2 * hs, hs).tanh()
    c = f * c + i * g
    h = o * c.tanh()
    if w_hr_t is not None:
        h = gt.mm(h, w_hr_t)
    return h, c


def gru_step(x_rz: Tensor, x_n: Tensor, h: Tensor, w_hh_t: Tensor,
             b_hh: Tensor | None) -> Tensor:
    """One GRU step; x_rz / x_n hold W_ih x + b_ih for the (r, z) and n gates."""
    import gputensor as gt
    hg = gt.mm(h, w_hh_t) if b_hh is None else gt.addmm(b_hh, h, w_hh_t)
    h_rz, h_n = hg.split([x_rz.shape[-1], x_n.shape[-1]], 1)
    r, z = (x_rz + h_rz).sigmoid().chunk(2, 1)
    n = (x_n + r * h_n).tanh()
    return gt.lerp(n, h, z)   # (1 - z) * n + z * h


def _steps(mode: str, xg: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor,
           b_hh: Tensor | None, reverse: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """The recurrence op by op over a (T, B, G*H) ``xg``: (outputs (T, B, H), h_T, c_T)."""
    import gputensor as gt
    w_hh_t = w_hh.t()
    hs = w_hh.shape[1]
    xs = xg.unbind(0)
    if reverse:
        xs = xs[::-1]
    outs: list[Tensor] = []
    for xt in xs:
        if mode == "LSTM":
            h, c = lstm_step(xt, h, c, w_hh_t, None)
        elif mode == "GRU":
            x_rz, x_n = xt.split([2 * hs, hs], 1)
            h = gru_step(x_rz, x_n, h, w_hh_t, b_hh)
        else:
            h = rnn_step(xt, h, w_hh_t, mode == "RNN_RELU")
        outs.append(h)
    if reverse:
        outs.reverse()
    return gt.stack(outs, 0), h, c


# -- the entry point ------------------------------------------------------------------------
def _fusable(tensors: Sequence[Tensor | None]) -> bool:
    if _VMAP.depth:
        return False
    onnx_trace = sys.modules.get("gputensor.onnx._trace")
    if onnx_trace is not None and onnx_trace.is_in_onnx_export():
        return False   # the exported graph spells the steps out in ONNX's own ops
    first = tensors[0]
    dt = first._dtype
    if dt not in _FUSED_DTYPES or first._shape[0] == 0:
        return False
    dev = first.device
    if dev.type not in _FUSED_DEVICES:
        return False
    return all(t is None or (type(t) is Tensor or isinstance(t, Tensor)) and t._dtype is dt
               and not t.is_sparse and t.device == dev for t in tensors)


def recurrence(mode: str, xg: Tensor, h0: Tensor, c0: Tensor | None, w_hh: Tensor,
               b_hh: Tensor | None = None, reverse: bool = False
               ) -> tuple[Tensor, Tensor, Tensor | None]:
    """Run ``mode``'s recurrence ("LSTM", "GRU", "RNN_TANH", "RNN_RELU") over the input-side
    pre-activations ``xg`` (T, B, G*H) from the states (B, H): (outputs (T, B, H), h_T, c_T).

    ``b_hh`` is GRU's hidden bias (the other modes fold theirs into ``xg``); ``reverse`` runs
    time backwards, with the outputs still in input order."""
    if mode == "LSTM":
        if _fusable((xg, h0, c0, w_hh)):
            out, h, c, _, _ = _lstm_recurrence([xg, h0, c0, w_hh], reverse)
            return out, h, c
    elif mode == "GRU":
        if _fusable((xg, h0, w_hh, b_hh)):
            out, h, _ = _gru_recurrence([xg, h0, w_hh] + ([] if b_hh is None else [b_hh]),
                                        reverse)
            return out, h, None
    elif _fusable((xg, h0, w_hh)):
        out, h = _rnn_recurrence([xg, h0, w_hh], mode == "RNN_RELU", reverse)
        return out, h, None
    return _steps(mode, xg, h0, c0, w_hh, b_hh, reverse)


# -- shared pieces of the fused ops ---------------------------------------------------------
def _last(out: Tensor, reverse: bool) -> Tensor:
    """The final state: the output of the last step run (the first in time when reversed)."""
    return out.select(0, 0 if reverse else out._shape[0] - 1).clone()


def _previous_states(out: Tensor, h0: Tensor, reverse: bool) -> Tensor:
    """(T, B, H): the state each step read, h0 for the first one run."""
    import gputensor as gt
    if out._shape[0] == 1:
        return h0.unsqueeze(0)
    if reverse:
        return gt.cat([out.narrow(0, 1, out._shape[0] - 1), h0.unsqueeze(0)], 0)
    return gt.cat([h0.unsqueeze(0), out.narrow(0, 0, out._shape[0] - 1)], 0)


def _weight_grad(d_gates: Tensor, out: Tensor, h0: Tensor, reverse: bool) -> Tensor:
    """sum_t d_gates_t^T h_{t-1}: one gemm over every step, (G*H, H)."""
    import gputensor as gt
    steps, batch, wide = d_gates._shape
    prev = _previous_states(out, h0, reverse)
    return gt.mm(d_gates.reshape(steps * batch, wide).t(), prev.reshape(steps * batch, -1))


def _grad_buffer(g: Tensor) -> Tensor:
    """A private contiguous copy: the backward kernels carry the state gradients in place."""
    return g.contiguous().clone()


def _needs_graph(*tensors: Tensor | None) -> bool:
    return is_grad_enabled() and any(t is not None and t._requires_grad for t in tensors)


def _differentiable_grad(mode: str, tensors: Sequence[Tensor], grads: Sequence[Tensor],
                         reverse: bool) -> list[Tensor | None]:
    """The gradients as a graph (create_graph=True): the recurrence recomputed op by op and
    differentiated, so the result can be differentiated again."""
    import gputensor as gt
    xg, h0 = tensors[0], tensors[1]
    c0 = tensors[2] if mode == "LSTM" else None
    w_hh = tensors[3] if mode == "LSTM" else tensors[2]
    b_hh = tensors[3] if mode == "GRU" and len(tensors) > 3 else None
    with gt.enable_grad():
        out, h, c = _steps(mode, xg, h0, c0, w_hh, b_hh, reverse)
        results = [out, h] + ([c] if c is not None else [])
        wanted = [t for t in tensors if t._requires_grad]
        found = gt.autograd.grad(results, wanted, list(grads[:len(results)]),
                                 create_graph=True, allow_unused=True)
    by_id = {id(t): g for t, g in zip(wanted, found, strict=True)}
    return [by_id.get(id(t)) for t in tensors]


# -- LSTM ---------------------------------------------------------------------------------------
def _lstm_grad(grads: list[Tensor], outs: tuple[Tensor, ...], tensors: list[Tensor],
               reverse: bool) -> list[Tensor | None]:
    xg, h0, c0, w_hh = tensors
    if _needs_graph(*grads[:3], *tensors):
        return _differentiable_grad("LSTM", tensors, grads, reverse)
    out, _, _, acts, cs = outs
    d_gates, dh0, dc0 = _lstm_recurrence_backward(grads[0], grads[1], grads[2], acts, cs, c0,
                                                  w_hh, reverse)
    return [d_gates, dh0, dc0, _weight_grad(d_gates, out, h0, reverse)]


@op(method=False, output_differentiable=(True, True, True, False, False),
    grad={"tensors": _lstm_grad}, jvp="transpose")
def _lstm_recurrence(tensors: list[Tensor], reverse: bool = False
                     ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """LSTM over ``tensors = [xg (T, B, 4H), h0 (B, H), c0 (B, H), w_hh (4H, H)]``:
    (outputs, h_T, c_T, gate activations (T, B, 4H), cell states (T, B, H))."""
    xg, h0, c0, w_hh = (t.contiguous() for t in tensors)
    steps, batch, wide = xg._shape
    hs = wide // 4
    out = empty((steps, batch, hs), xg._dtype, xg.device)
    cs = empty((steps, batch, hs), xg._dtype, xg.device)
    acts = empty((steps, batch, wide), xg._dtype, xg.device)
    work = empty((batch, wide), xg._dtype, xg.device)
    kernel(xg, "_lstm_recurrence")(out, cs, acts, work, xg, h0, c0, w_hh, reverse)
    return out, _last(out, reverse), _last(cs, reverse), acts, cs


@op(method=False, differentiable=False)
def _lstm_recurrence_backward(grad_out: Tensor, grad_h: Tensor, grad_c: Tensor, acts: Tensor,
                              cs: Tensor, c0: Tensor, w_hh: Tensor, reverse: bool
                              ) -> tuple[Tensor, Tensor, Tensor]:
    """(gate pre-activation gradients (T, B, 4H), dh0, dc0) of ``_lstm_recurrence``."""
    d_gates = empty(acts._shape, acts._dtype, acts.device)
    dh, dc = _grad_buffer(grad_h), _grad_buffer(grad_c)
    kernel(acts, "_lstm_recurrence_backward")(d_gates, dh, dc, grad_out.contiguous(), acts, cs,
                                              c0.contiguous(), w_hh.contiguous(), reverse)
    return d_gates, dh, dc


# -- GRU ----------------------------------------------------------------------------------------
def _gru_grad(grads: list[Tensor], outs: tuple[Tensor, ...], tensors: list[Tensor],
              reverse: bool) -> list[Tensor | None]:
    xg, h0, w_hh = tensors[:3]
    if _needs_graph(*grads[:2], *tensors):
        return _differentiable_grad("GRU", tensors, grads, reverse)
    out, _, acts = outs
    d_x, d_h, dh0 = _gru_recurrence_backward(grads[0], grads[1], acts, out, h0, w_hh, reverse)
    result = [d_x, dh0, _weight_grad(d_h, out, h0, reverse)]
    if len(tensors) > 3:
        result.append(d_h.sum((0, 1)))
    return result


@op(method=False, output_differentiable=(True, True, False), grad={"tensors": _gru_grad},
    jvp="transpose")
def _gru_recurrence(tensors: list[Tensor], reverse: bool = False
                    ) -> tuple[Tensor, Tensor, Tensor]:
    """GRU over ``tensors = [xg (T, B, 3H), h0 (B, H), w_hh (3H, H)]`` plus an optional
    ``b_hh`` (3H): (outputs, h_T, saved (r, z, n, W_hn h + b_hn) as (T, B, 4H))."""
    xg, h0, w_hh = (t.contiguous() for t in tensors[:3])
    b_hh = tensors[3].contiguous() if len(tensors) > 3 else None
    steps, batch, wide = xg._shape
    hs = wide // 3
    out = empty((steps, batch, hs), xg._dtype, xg.device)
    acts = empty((steps, batch, 4 * hs), xg._dtype, xg.device)
    work = empty((batch, wide), xg._dtype, xg.device)
    kernel(xg, "_gru_recurrence")(out, acts, work, xg, h0, w_hh, b_hh, reverse)
    return out, _last(out, reverse), acts


@op(method=False, differentiable=False)
def _gru_recurrence_backward(grad_out: Tensor, grad_h: Tensor, acts: Tensor, out: Tensor,
                             h0: Tensor, w_hh: Tensor, reverse: bool
                             ) -> tuple[Tensor, Tensor, Tensor]:
    """(input-side gradients (T, B, 3H), hidden-side gradients (T, B, 3H), dh0)."""
    steps, batch, wide = acts._shape
    d_x = empty((steps, batch, wide // 4 * 3), acts._dtype, acts.device)
    d_h = empty(d_x._shape, acts._dtype, acts.device)
    dh = _grad_buffer(grad_h)
    kernel(acts, "_gru_recurrence_backward")(d_x, d_h, dh, grad_out.contiguous(), acts, out,
                                             h0.contiguous(), w_hh.contiguous(), reverse)
    return d_x, d_h, dh


# -- Elman RNN ----------------------------------------------------------------------------------
def _rnn_grad(grads: list[Tensor], outs: tuple[Tensor, ...], tensors: list[Tensor], relu: bool,
              reverse: bool) -> list[Tensor | None]:
    xg, h0, w_hh = tensors
    if _needs_graph(*grads[:2], *tensors):
        return _differentiable_grad("RNN_RELU" if relu else "RNN_TANH", tensors, grads,
                                    reverse)
    out = outs[0]
    d_x, dh0 = _rnn_recurrence_backward(grads[0], grads[1], out, w_hh, relu, reverse)
    return [d_x, dh0, _weight_grad(d_x, out, h0, reverse)]


@op(method=False, grad={"tensors": _rnn_grad}, jvp="transpose")
def _rnn_recurrence(tensors: list[Tensor], relu: bool = False, reverse: bool = False
                    ) -> tuple[Tensor, Tensor]:
    """Elman RNN (tanh, or relu) over ``tensors = [xg (T, B, H), h0 (B, H), w_hh (H, H)]``:
    (outputs, h_T)."""
    xg, h0, w_hh = (t.contiguous() for t in tensors)
    out = empty(xg._shape, xg._dtype, xg.device)
    work = empty(xg._shape[1:], xg._dtype, xg.device)
    kernel(xg, "_rnn_recurrence")(out, work, xg, h0, w_hh, relu, reverse)
    return out, _last(out, reverse)


@op(method=False, differentiable=False)
def _rnn_recurrence_backward(grad_out: Tensor, grad_h: Tensor, out: Tensor, w_hh: Tensor,
                             relu: bool, reverse: bool) -> tuple[Tensor, Tensor]:
    """(pre-activation gradients (T, B, H), dh0)."""
    d_x = empty(out._shape, out._dtype, out.device)
    dh = _grad_buffer(grad_h)
    kernel(out, "_rnn_recurrence_backward")(d_x, dh, grad_out.contiguous(), out,
                                            w_hh.contiguous(), relu, reverse)
    return d_x, dh

