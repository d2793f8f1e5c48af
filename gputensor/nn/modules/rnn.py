"""Recurrent layers: RNN, LSTM, GRU and their single-step cells, laid out like PyTorch's.

Parameter names, shapes, gate order (LSTM: i, f, g, o; GRU: r, z, n) and init match
torch.nn, so a torch state_dict loads as is. A layer runs one direction at a time: the input
projections of every time step are one matrix product, then the recurrence over time is one
fused op with its own backward (gputensor/_ops/rnn.py: a gemm and a gate kernel per step).
LSTM projections (``proj_size``) and packed sequences run a Python loop over time of
differentiable ops instead (one ``addmm`` for the hidden projection plus the gate math), whose
backward comes from the autograd engine. The cells are the fused recurrence over one step.

The layers also take a ``PackedSequence`` (gputensor.nn.utils.rnn): each step then runs only the
sequences still active at that step, so a finished sequence's state stops updating, and the
output comes back packed with the final states in the caller's batch order.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import gputensor as gt
from gputensor._ops.rnn import gru_step as _gru_step
from gputensor._ops.rnn import lstm_step as _lstm_step
from gputensor._ops.rnn import recurrence as _recurrence
from gputensor._ops.rnn import rnn_step as _rnn_step
from gputensor._tensor import Tensor
from gputensor.nn import init
from gputensor.nn.functional._dropout import dropout as _dropout
from gputensor.nn.parameter import Parameter
from gputensor.nn.utils.rnn import PackedSequence

from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
# One time step of a layer: (input-side gates x_t, h, c) -> (h', c'); c is None except for LSTM.
_Step = Callable[[Tensor, Tensor, "Tensor | None"], "tuple[Tensor, Tensor | None]"]


def _project(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """x @ w.T + b over the last dim of a (..., K) tensor, as one gemm."""
    lead = x.shape[:-1]
    flat = x.reshape(math.prod(lead), x.shape[-1])
    out = gt.mm(flat, w.t()) if b is None else gt.addmm(b, flat, w.t())
    return out.view(*lead, out.shape[-1])


def _sum_bias(b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor | None:
    return None if b_ih is None else b_ih + b_hh


# -- layers ----------------------------------------------------------------------------------
class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU: parameters, argument checks, the layer loop."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size"]

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, value in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int):
                raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")

        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size

        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * dirs
            for direction in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [(f"weight_ih{sfx}", (gate_size, layer_input)),
                          (f"weight_hh{sfx}", (gate_size, real_hidden))]
                if bias:
                    shapes += [(f"bias_ih{sfx}", (gate_size,)), (f"bias_hh{sfx}", (gate_size,))]
                if proj_size > 0:
                    shapes.append((f"weight_hr{sfx}", (proj_size, hidden_size)))
                for name, shape in shapes:
                    self.register_parameter(
                        name, Parameter(gt.empty(shape, device=device, dtype=dtype)))
                names = [name for name, _ in shapes]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """PyTorch packs weights into one buffer for cuDNN here; gputensor reads each
        parameter directly, so there is nothing to pack (as in PyTorch on CPU)."""

    @property
    def _flat_weights(self) -> list[Tensor | None]:
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _direction_params(self, layer: int, direction: int) -> tuple[Tensor | None, ...]:
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer and direction; absent ones are None."""
        sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        # getattr, not _parameters: reparametrisations (weight_norm) replace a parameter with a
        # plain tensor attribute of the same name.
        return tuple(getattr(self, f"{kind}{sfx}", None)
                     for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))

    # -- argument checks ---------------------------------------------------------------------
    def _check_input(self, input: Tensor) -> bool:
        """Validate ``input``; True when it is batched (3-D)."""
        name = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"instead")
        w = getattr(self, self._flat_weights_names[0])
        if input.dtype != w.dtype:
            raise ValueError(f"input must have the type {w.dtype}, got type {input.dtype}")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        if input.device != w.device:
            raise RuntimeError(f"{name}: input is on {input.device} but the weights are on "
                               f"{w.device}")
        return input.dim() == 3

    @staticmethod
    def _check_hidden(hx: Tensor, expected: tuple[int, ...], what: str = "hidden") -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(hx.shape)}")

    def _hidden_shapes(self, batch: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Shapes of h_0 and (for LSTM) c_0."""
        n = self.num_layers * (2 if self.bidirectional else 1)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (n, batch, real_hidden), (n, batch, self.hidden_size)

    # -- the layer loop ----------------------------------------------------------------------
    def _direction_cell(self, layer: int, direction: int
                        ) -> tuple[Callable[[Tensor], Tensor], _Step]:
        """(project, step) for one layer and direction: ``project`` maps a (..., in) input to
        its input-side gate pre-activations in one gemm; ``step(xg_t, h, c)`` advances the
        state (h, c) by one time step (c is None except for LSTM)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._direction_params(layer, direction)
        w_hh_t = w_hh.t()
        if self.mode == "GRU":
            hs = self.hidden_size

            def gru(xt: Tensor, h: Tensor, c: Tensor | None) -> tuple[Tensor, None]:
                x_rz, x_n = xt.split([2 * hs, hs], 1)
                return _gru_step(x_rz, x_n, h, w_hh_t, b_hh), None

            return (lambda x: _project(x, w_ih, b_ih)), gru
        bias = _sum_bias(b_ih, b_hh)

        def project(x: Tensor) -> Tensor:
            return _project(x, w_ih, bias)

        if self.mode == "LSTM":
            w_hr_t = None if w_hr is None else w_hr.t()

            def lstm(xt: Tensor, h: Tensor, c: Tensor | None) -> tuple[Tensor, Tensor]:
                return _lstm_step(xt, h, c, w_hh_t, w_hr_t)

            return project, lstm
        relu = self.mode == "RNN_RELU"

        def rnn(xt: Tensor, h: Tensor, c: Tensor | None) -> tuple[Tensor, None]:
            return _rnn_step(xt, h, w_hh_t, relu), None

        return project, rnn

    def _run_direction(self, x: Tensor, layer: int, direction: int, h: Tensor,
                       c: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Run one direction of one layer over a (L, B, in) input; returns
        (outputs (L, B, H_out), h_T, c_T). Without an LSTM projection the recurrence is one
        fused op (gputensor/_ops/rnn.py); with one, a step-by-step loop."""
        if self.proj_size == 0:
            w_ih, w_hh, b_ih, b_hh, _ = self._direction_params(layer, direction)
            if self.mode == "GRU":
                xg = _project(x, w_ih, b_ih)
            else:
                b_hh, xg = None, _project(x, w_ih, _sum_bias(b_ih, b_hh))
            return _recurrence(self.mode, xg, h, c, w_hh, b_hh, direction == 1)
        project, step = self._direction_cell(layer, direction)
        xs = project(x).unbind(0)
        if direction == 1:
            xs = xs[::-1]
        outs: list[Tensor] = []
        for xt in xs:
            h, c = step(xt, h, c)
            outs.append(h)
        if direction == 1:
            outs.reverse()
        return gt.stack(outs, 0), h, c

    def _run_direction_packed(self, data: Tensor, batch_sizes: list[int], layer: int,
                              direction: int, h0: Tensor, c0: Tensor | None
                              ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Run one direction of one layer over packed (N, in) data; returns (packed outputs
        (N, H_out), h_n, c_n) with the final states taken at each sequence's own last step.

        Sequences are sorted by decreasing length, so the ones still running at step t are the
        first ``batch_sizes[t]`` rows of the state. Forward in time, rows that finish are set
        aside as the batch shrinks; in reverse, the pass starts from the shortest batch and the
        initial states of longer sequences join as it grows, so each sequence starts at its
        own last element.
        """
        project, step = self._direction_cell(layer, direction)
        xg = project(data)
        outs: list[Tensor] = []
        h, c = h0, c0
        if direction == 0:
            done_h: list[Tensor] = []
            done_c: list[Tensor] = []
            offset, last = 0, batch_sizes[0]
            for b in batch_sizes:
                if b < last:
                    done_h.append(h.narrow(0, b, last - b))
                    h = h.narrow(0, 0, b)
                    if c is not None:
                        done_c.append(c.narrow(0, b, last - b))
                        c = c.narrow(0, 0, b)
                h, c = step(xg.narrow(0, offset, b), h, c)
                outs.append(h)
                offset, last = offset + b, b
            h_n = gt.cat([h, *done_h[::-1]], 0) if done_h else h
            c_n = None if c is None else (gt.cat([c, *done_c[::-1]], 0) if done_c else c)
            return gt.cat(outs, 0), h_n, c_n
        last = batch_sizes[-1]
        h = h0.narrow(0, 0, last)
        c = None if c0 is None else c0.narrow(0, 0, last)
        offset = data.shape[0]
        for b in reversed(batch_sizes):
            if b > last:
                h = gt.cat([h, h0.narrow(0, last, b - last)], 0)
                if c is not None:
                    c = gt.cat([c, c0.narrow(0, last, b - last)], 0)
            offset -= b
            h, c = step(xg.narrow(0, offset, b), h, c)
            outs.append(h)
            last = b
        outs.reverse()
        return gt.cat(outs, 0), h, c

    def _run(self, x: Tensor, hx: Tensor, cx: Tensor | None,
             batch_sizes: list[int] | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
        """All layers over a time-major (L, B, in) input, or over packed (N, in) data when
        ``batch_sizes`` is given, with (layers*dirs, B, H) states."""
        dirs = 2 if self.bidirectional else 1
        h0s = hx.unbind(0)
        c0s = cx.unbind(0) if cx is not None else None
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        feature_dim = 2 if batch_sizes is None else 1
        for layer in range(self.num_layers):
            outs = []
            for direction in range(dirs):
                idx = layer * dirs + direction
                c0 = None if c0s is None else c0s[idx]
                if batch_sizes is None:
                    out, h, c = self._run_direction(x, layer, direction, h0s[idx], c0)
                else:
                    out, h, c = self._run_direction_packed(x, batch_sizes, layer, direction,
                                                           h0s[idx], c0)
                outs.append(out)
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            x = outs[0] if dirs == 1 else gt.cat(outs, feature_dim)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = _dropout(x, self.dropout, True)
        return x, gt.stack(h_n, 0), (gt.stack(c_n, 0) if c_n else None)

    def _forward_packed(self, input: PackedSequence, hx: Any
                        ) -> tuple[PackedSequence, Any]:
        """Run over a PackedSequence: states are given and returned in the caller's batch
        order, and permuted into the packed (length-sorted) order in between."""
        data, batch_sizes, sorted_indices, unsorted_indices = input
        name = type(self).__name__
        w = getattr(self, self._flat_weights_names[0])
        if not isinstance(data, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(data).__name__}")
        if data.dtype != w.dtype:
            raise ValueError(f"input must have the type {w.dtype}, got type {data.dtype}")
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        if data.device != w.device:
            raise RuntimeError(f"{name}: input is on {data.device} but the weights are on "
                               f"{w.device}")
        sizes = [int(b) for b in batch_sizes.tolist()]
        if not sizes:
            raise RuntimeError(f"{name}: Expected sequence length to be larger than 0")
        is_lstm = self.mode == "LSTM"
        h_shape, c_shape = self._hidden_shapes(sizes[0])
        cx = None
        if hx is None:
            hx = gt.zeros(h_shape, dtype=data.dtype, device=data.device)
            if is_lstm:
                cx = gt.zeros(c_shape, dtype=data.dtype, device=data.device)
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError("LSTM: hx must be a tuple (h_0, c_0) of tensors")
                hx, cx = hx
            if sorted_indices is not None:
                hx = hx.index_select(1, sorted_indices)
                cx = None if cx is None else cx.index_select(1, sorted_indices)
            self._check_hidden(hx, h_shape, "hidden[0]" if is_lstm else "hidden")
            if is_lstm:
                self._check_hidden(cx, c_shape, "hidden[1]")
        out, h_n, c_n = self._run(data, hx, cx, sizes)
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = None if c_n is None else c_n.index_select(1, unsorted_indices)
        packed = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        return packed, ((h_n, c_n) if is_lstm else h_n)

    def _forward(self, input: Tensor | PackedSequence, hx: Any) -> tuple[Any, Any]:
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        name = type(self).__name__
        batched = self._check_input(input)
        is_lstm = self.mode == "LSTM"
        if not batched:
            input = input.unsqueeze(1)
            states = hx if (is_lstm and hx is not None) else (hx,)
            for s in states:
                if s is not None and s.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                       f"{s.dim()}-D tensor")
            if hx is not None:
                hx = tuple(s.unsqueeze(1) for s in hx) if is_lstm else hx.unsqueeze(1)
        else:
            if self.batch_first:
                input = input.transpose(0, 1)
            states = hx if (is_lstm and hx is not None) else (hx,)
            for s in states:
                if s is not None and s.dim() != 3:
                    raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                       f"{s.dim()}-D tensor")
        seq_len, batch = input.shape[0], input.shape[1]
        if seq_len == 0:
            raise RuntimeError(f"{name}: Expected sequence length to be larger than 0")
        h_shape, c_shape = self._hidden_shapes(batch)
        cx = None
        if hx is None:
            hx = gt.zeros(h_shape, dtype=input.dtype, device=input.device)
            if is_lstm:
                cx = gt.zeros(c_shape, dtype=input.dtype, device=input.device)
        elif is_lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a tuple (h_0, c_0) of tensors")
            hx, cx = hx
            self._check_hidden(hx, h_shape, "hidden[0]")
            self._check_hidden(cx, c_shape, "hidden[1]")
        else:
            self._check_hidden(hx, h_shape)

        out, h_n, c_n = self._run(input, hx, cx)
        if not batched:
            out, h_n = out.squeeze(1), h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, ((h_n, c_n) if is_lstm else h_n)

    def forward(self, input: Tensor | PackedSequence, hx: Any = None) -> tuple[Any, Any]:
        return self._forward(input, hx)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``, act = tanh or relu.

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:   # nonlinearity is the 4th positional argument, as in PyTorch
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__(modes[nonlinearity], *args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None
                ) -> tuple[Tensor | PackedSequence, Tensor]:
        return self._forward(input, hx)


class LSTM(RNNBase):
    """Long short-term memory; with ``proj_size > 0`` the hidden state is projected by
    ``weight_hr`` (an LSTMP), as in PyTorch.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor | PackedSequence, tuple[Tensor, Tensor]]:
        return self._forward(input, hx)


class GRU(RNNBase):
    """Gated recurrent unit with PyTorch's gate order (r, z, n) and
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None
                ) -> tuple[Tensor | PackedSequence, Tensor]:
        return self._forward(input, hx)


# -- cells -----------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Parameters and checks shared by the cells: weight_ih (G*H, in), weight_hh (G*H, H)
    and optional bias_ih / bias_hh (G*H), all initialised U(-1/sqrt(H), 1/sqrt(H))."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(gt.empty((num_chunks * hidden_size, input_size), **kw))
        self.weight_hh = Parameter(gt.empty((num_chunks * hidden_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(gt.empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(gt.empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input: Tensor, states: tuple[Tensor | None, ...]
                 ) -> tuple[Tensor, list[Tensor], bool]:
        """Check ``input`` and the states, add the batch dim to unbatched ones, and fill
        missing states with zeros; returns (input, states, batched)."""
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             f"instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        batch = input.shape[0]
        out = []
        for i, s in enumerate(states):
            label = "" if len(states) == 1 else f"[{i}]"
            if s is None:
                out.append(gt.zeros((batch, self.hidden_size), dtype=input.dtype,
                                    device=input.device))
                continue
            if s.dim() != input.dim() + (0 if batched else -1) or s.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected hidden{label} to be "
                                 f"{'2D' if batched else '1D'}, got {s.dim()}D instead")
            if not batched:
                s = s.unsqueeze(0)
            if s.shape[0] != batch:
                raise RuntimeError(f"Input batch size {batch} doesn't match hidden{label} "
                                   f"batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got "
                                   f"{s.shape[1]}, expected {self.hidden_size}")
            out.append(s)
        return input, out, batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = act(W_ih x + b_ih + W_hh h + b_hh)``."""

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, (h,), batched = self._prepare(input, (hx,))
        xg = _project(input, self.weight_ih, _sum_bias(self.bias_ih, self.bias_hh))
        mode = "RNN_RELU" if self.nonlinearity == "relu" else "RNN_TANH"
        _, h, _ = _recurrence(mode, xg.unsqueeze(0), h, None, self.weight_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, Tensor]:
        states = (None, None) if hx is None else tuple(hx)
        if len(states) != 2:
            raise TypeError("LSTMCell: hx must be a tuple (h_0, c_0) of tensors")
        input, (h, c), batched = self._prepare(input, states)
        xg = _project(input, self.weight_ih, _sum_bias(self.bias_ih, self.bias_hh))
        _, h, c = _recurrence("LSTM", xg.unsqueeze(0), h, c, self.weight_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (gate order r, z, n, as in PyTorch)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, (h,), batched = self._prepare(input, (hx,))
        xg = _project(input, self.weight_ih, self.bias_ih)
        _, h, _ = _recurrence("GRU", xg.unsqueeze(0), h, None, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
