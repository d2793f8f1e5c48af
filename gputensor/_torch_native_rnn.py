"""torch.* native recurrent functions: ``torch.lstm/gru/rnn_tanh/rnn_relu`` (a padded input
or packed data with its ``batch_sizes``) and the one-step cells ``torch.lstm_cell``, ...

They take the weights as PyTorch's flat ``params`` list (per layer and direction: w_ih,
w_hh[, b_ih, b_hh][, w_hr]) and run nn.RNNBase's layer loop over them, so the layers and these
functions share one implementation (and one autograd path). The packed form takes and returns
states in the packed (length-sorted) batch order, as the native function does.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.nn.modules.module import Module
from gputensor.nn.modules.rnn import _GATES, RNNBase, _gru_step, _lstm_step, _project, _rnn_step


class _FlatParamsRNN(RNNBase):
    """An RNNBase over a native flat ``params`` list instead of registered parameters."""

    def __init__(self, mode: str, params: Sequence[Tensor], has_biases: bool, num_layers: int,
                 dropout: float, train: bool, bidirectional: bool, has_proj: bool) -> None:
        Module.__init__(self)   # no parameters of its own: RNNBase.__init__ would make them
        dirs = 2 if bidirectional else 1
        self._stride = 2 + 2 * bool(has_biases) + bool(has_proj)
        if num_layers <= 0 or len(params) != self._stride * num_layers * dirs:
            raise RuntimeError("got an incorrect number of RNN parameters")
        self._params = list(params)
        self._has_biases, self._has_proj = bool(has_biases), bool(has_proj)
        self.mode = mode
        self.num_layers = num_layers
        self.bidirectional = bool(bidirectional)
        self.dropout = float(dropout)
        self.training = bool(train)
        self.hidden_size = params[0].shape[0] // _GATES[mode]
        self.proj_size = params[self._stride - 1].shape[0] if has_proj else 0

    def _direction_params(self, layer: int, direction: int) -> tuple[Tensor | None, ...]:
        start = (layer * (2 if self.bidirectional else 1) + direction) * self._stride
        p = self._params[start:start + self._stride]
        b_ih, b_hh = (p[2], p[3]) if self._has_biases else (None, None)
        return p[0], p[1], b_ih, b_hh, (p[-1] if self._has_proj else None)


def _states(name: str, hx: Tensor | Sequence[Tensor], lstm: bool
            ) -> tuple[Tensor, Tensor | None]:
    if not lstm:
        return hx, None
    if len(hx) != 2:
        raise RuntimeError(f"{name} expects two hidden states")
    return hx[0], hx[1]


def _check_state(hx: Tensor, expected: tuple[int, ...], what: str) -> None:
    if tuple(hx.shape) != expected:
        raise RuntimeError(f"Expected {what} size {expected}, got {list(hx.shape)}")


def _run_input(mode: str, input: Tensor, hx: Tensor | Sequence[Tensor],
               params: Sequence[Tensor], has_biases: bool, num_layers: int, dropout: float,
               train: bool, bidirectional: bool, batch_first: bool) -> tuple[Tensor, ...]:
    lstm = mode == "LSTM"
    name = mode.lower()
    h0, c0 = _states(name, hx, lstm)
    has_proj = lstm and h0.shape[-1] != c0.shape[-1]
    rnn = _FlatParamsRNN(mode, params, has_biases, num_layers, dropout, train, bidirectional,
                         has_proj)
    unbatched = input.dim() == 2   # (L, in) with (layers*dirs, H) states
    if unbatched and mode in ("LSTM", "GRU"):
        # PyTorch's native LSTM and GRU index a batch dim a 2-D input lacks (its simple RNNs
        # happen to broadcast over it, which is the unbatched computation).
        bound = 2 if lstm else 1
        raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, "
                         f"{bound - 1}], but got {bound})")
    if unbatched:
        input, h0 = input.unsqueeze(1), h0.unsqueeze(1)
        c0 = None if c0 is None else c0.unsqueeze(1)
    elif input.dim() != 3:
        raise RuntimeError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
    elif batch_first:
        input = input.transpose(0, 1)
    if input.shape[0] == 0:
        raise RuntimeError(f"{name}: Expected sequence length to be larger than 0")
    h_shape, c_shape = rnn._hidden_shapes(input.shape[1])
    _check_state(h0, h_shape, "hidden[0]" if lstm else "hidden")
    if lstm:
        _check_state(c0, c_shape, "hidden[1]")
    out, h_n, c_n = rnn._run(input, h0, c0)
    if unbatched:
        out, h_n = out.squeeze(1), h_n.squeeze(1)
        c_n = None if c_n is None else c_n.squeeze(1)
    elif batch_first:
        out = out.transpose(0, 1)
    return (out, h_n, c_n) if lstm else (out, h_n)


def _run_packed(mode: str, data: Tensor, batch_sizes: Tensor, hx: Tensor | Sequence[Tensor],
                params: Sequence[Tensor], has_biases: bool, num_layers: int, dropout: float,
                train: bool, bidirectional: bool) -> tuple[Tensor, ...]:
    lstm = mode == "LSTM"
    name = mode.lower()
    h0, c0 = _states(name, hx, lstm)
    if batch_sizes.dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {batch_sizes.dtype.legacy_name}")
    if data.dim() != 2:
        raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
    sizes = [int(b) for b in batch_sizes.tolist()]
    if not sizes:
        raise RuntimeError(f"{name}: Expected sequence length to be larger than 0")
    total = sum(sizes)
    if data.shape[0] < total:
        raise RuntimeError(f"{name}: batch_sizes {sizes} describe {total} rows of packed data, "
                           f"but data has {data.shape[0]}")
    # The native kernels read the first sum(batch_sizes) rows; any further rows are unused.
    data = data.narrow(0, 0, total)
    has_proj = lstm and h0.shape[-1] != c0.shape[-1]
    rnn = _FlatParamsRNN(mode, params, has_biases, num_layers, dropout, train, bidirectional,
                         has_proj)
    h_shape, c_shape = rnn._hidden_shapes(sizes[0])
    _check_state(h0, h_shape, "hidden[0]" if lstm else "hidden")
    if lstm:
        _check_state(c0, c_shape, "hidden[1]")
    out, h_n, c_n = rnn._run(data, h0, c0, sizes)
    return (out, h_n, c_n) if lstm else (out, h_n)


def _dispatch(mode: str, args: tuple, kwargs: dict) -> tuple[Tensor, ...]:
    """The two native overloads: (input, hx, params, ..., batch_first) and
    (data, batch_sizes, hx, params, ...); the fourth argument tells them apart."""
    packed = "batch_sizes" in kwargs or "data" in kwargs or (
        len(args) > 3 and isinstance(args[3], (list, tuple)))   # args[3]: params, or has_biases
    if packed:
        return _run_packed(mode, *args, **kwargs)
    return _run_input(mode, *args, **kwargs)


def lstm(*args: object, **kwargs: object) -> tuple[Tensor, Tensor, Tensor]:
    """``torch.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first)`` or ``torch.lstm(data, batch_sizes, hx, params, has_biases, num_layers,
    dropout, train, bidirectional)``; hx = (h_0, c_0). Returns (output, h_n, c_n)."""
    return _dispatch("LSTM", args, kwargs)


def gru(*args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
    """``torch.gru``: the two overloads of ``torch.lstm`` with one state; (output, h_n)."""
    return _dispatch("GRU", args, kwargs)


def rnn_tanh(*args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
    """``torch.rnn_tanh``: the two overloads of ``torch.lstm`` with one state."""
    return _dispatch("RNN_TANH", args, kwargs)


def rnn_relu(*args: object, **kwargs: object) -> tuple[Tensor, Tensor]:
    """``torch.rnn_relu``: the two overloads of ``torch.lstm`` with one state."""
    return _dispatch("RNN_RELU", args, kwargs)


# -- cells -----------------------------------------------------------------------------------
def _check_cell(input: Tensor, states: Sequence[Tensor], w_ih: Tensor, w_hh: Tensor) -> None:
    """The native cells' checks: a (B, in) input and (B, H) states."""
    if input.dim() == 1:   # PyTorch indexes dim 1 first
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         "1)")
    if input.dim() != 2:
        raise RuntimeError(f"rnn cells expect a 2D input, got {input.dim()}D")
    if input.shape[1] != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected "
                           f"{w_ih.shape[1]}")
    for i, s in enumerate(states):
        if s.dim() != 2:
            raise RuntimeError(f"Expected hidden{i} to be 2D, got {s.dim()}D instead")
        if s.shape[0] != input.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{i} "
                               f"batch size {s.shape[0]}")
        if s.shape[1] != w_hh.shape[1]:
            raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, "
                               f"expected {w_hh.shape[1]}")


def _bias(b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor | None:
    if b_ih is None or b_hh is None:
        return b_hh if b_ih is None else b_ih
    return b_ih + b_hh


def lstm_cell(input: Tensor, hx: Sequence[Tensor], w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor | None = None, b_hh: Tensor | None = None
              ) -> tuple[Tensor, Tensor]:
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    _check_cell(input, hx, w_ih, w_hh)
    xg = _project(input, w_ih, _bias(b_ih, b_hh))
    return _lstm_step(xg, hx[0], hx[1], w_hh.t(), None)


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
             b_hh: Tensor | None = None) -> Tensor:
    _check_cell(input, (hx,), w_ih, w_hh)
    hs = w_hh.shape[1]
    x_rz, x_n = _project(input, w_ih, b_ih).split([2 * hs, hs], 1)
    return _gru_step(x_rz, x_n, hx, w_hh.t(), b_hh)


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    _check_cell(input, (hx,), w_ih, w_hh)
    return _rnn_step(_project(input, w_ih, _bias(b_ih, b_hh)), hx, w_hh.t(), False)


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    _check_cell(input, (hx,), w_ih, w_hh)
    return _rnn_step(_project(input, w_ih, _bias(b_ih, b_hh)), hx, w_hh.t(), True)


FUNCTIONS = {f.__name__: f for f in (lstm, gru, rnn_tanh, rnn_relu, lstm_cell, gru_cell,
                                      rnn_tanh_cell, rnn_relu_cell)}
