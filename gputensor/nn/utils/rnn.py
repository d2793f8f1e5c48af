"""Packing and padding of variable-length sequences (torch.nn.utils.rnn).

A ``PackedSequence`` stores a batch of sequences without padding: its ``data`` rows are
time-major (all step-0 elements, then all step-1 elements, ...) with the sequences sorted by
decreasing length, and ``batch_sizes[t]`` (a CPU int64 tensor, as in PyTorch) counts the
sequences still running at step ``t``. The recurrent layers consume it so that every sequence
runs only over its own length.

The index arithmetic depends only on the lengths, which live on the host, so it is done in
NumPy; the data then moves with one ``index_select`` (plus a ``cat`` for the padding row). Both
are differentiable ops, so gradients flow through packing and padding with no custom backward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

import gputensor as gt
from gputensor._tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


def _bind(t: Tensor | None, fn: Callable[[Tensor], Tensor]) -> Tensor | None:
    return None if t is None else fn(t)


class PackedSequence(PackedSequence_):
    """A batch of variable-length sequences stored without padding.

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence` rather than by hand.
    ``data`` may live on any device and have any dtype; ``sorted_indices`` /
    ``unsorted_indices`` (int64, on ``data``'s device) map between the caller's batch order and
    the length-sorted order; ``batch_sizes`` always stays on the CPU, because the layers read it
    on the host to drive their time loop.
    """

    def __new__(cls, data: Any, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            # PackedSequence((data, batch_sizes), sorted_indices=...)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never "
                "be created manually. They should be instantiated by functions like "
                "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor, non_blocking: bool = False) -> PackedSequence:
        """``self`` with new data; the indices follow data's device, batch_sizes stays put."""
        if data is self.data:
            return self

        def move(t: Tensor) -> Tensor:
            return t.to(data.device, non_blocking=non_blocking)

        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, move),
                          _bind(self.unsorted_indices, move))

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """Convert ``data`` like ``Tensor.to``; returns ``self`` when nothing changes."""
        return self._with_data(self.data.to(*args, **kwargs),
                               bool(kwargs.get("non_blocking", False)))

    def cuda(self, device: Any = None, non_blocking: bool = False) -> PackedSequence:
        return self._with_data(self.data.cuda(device, non_blocking=non_blocking), non_blocking)

    def cpu(self) -> PackedSequence:
        return self._with_data(self.data.cpu())

    def pin_memory(self) -> PackedSequence:
        return type(self)(self.data.pin_memory(), self.batch_sizes,
                          _bind(self.sorted_indices, lambda t: t.pin_memory()),
                          _bind(self.unsorted_indices, lambda t: t.pin_memory()))

    def double(self) -> PackedSequence:
        return self.to(dtype=gt.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=gt.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=gt.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=gt.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=gt.int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=gt.int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=gt.int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=gt.uint8)

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` is on a CUDA device."""
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        """Whether ``data`` is in pinned host memory."""
        return self.data.is_pinned()


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a 1-D index permutation (maps sorted_indices to unsorted_indices)."""
    if permutation is None:
        return None
    out = gt.empty_like(permutation)
    return out.scatter_(0, permutation,
                        gt.arange(permutation.numel(), device=permutation.device))


# -- host-side helpers ------------------------------------------------------------------------
def _check_long_1d_cpu(t: Tensor) -> None:
    if t.dim() != 1 or t.device.type != "cpu" or t.dtype != gt.int64:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{t.dim()}D {t.device} {t.dtype.legacy_name} tensor")


def _host_ints(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy(), dtype=np.int64).reshape(-1)


def _index(idx: np.ndarray, device: Any) -> Tensor:
    return gt.tensor(np.ascontiguousarray(idx, dtype=np.int64).reshape(-1), device=device)


def _with_pad_row(data: Tensor, padding_value: float) -> Tensor:
    """``data`` with one extra leading-dim row of ``padding_value`` (the index target of every
    padded slot)."""
    pad = gt.full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    return gt.cat([data, pad], 0)


# -- packing ----------------------------------------------------------------------------------
def pack_padded_sequence(input: Tensor, lengths: Tensor | Sequence[int],
                         batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded ``T x B x *`` (``B x T x *`` with batch_first) batch into a
    :class:`PackedSequence`, dropping each sequence's steps past its length.

    With ``enforce_sorted=False`` the batch is sorted by decreasing length first and the
    permutation is kept in ``sorted_indices``, so padding restores the caller's order.
    """
    if isinstance(lengths, Tensor):
        lengths_t = lengths.to(dtype=gt.int64)
    else:
        lengths_t = gt.as_tensor(np.asarray(lengths, dtype=np.int64), dtype=gt.int64,
                                 device="cpu")
    _check_long_1d_cpu(lengths_t)
    if input.dim() < 2:
        d = max(input.dim(), 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-d}, {d - 1}], "
                         f"but got 1)")
    ln = _host_ints(lengths_t)
    batch, steps = ((input.shape[0], input.shape[1]) if batch_first
                    else (input.shape[1], input.shape[0]))
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if ln.size != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{ln.size} (batch_size={batch})")
    sorted_indices = None
    order = np.arange(batch)
    if not enforce_sorted:
        order = np.argsort(-ln, kind="stable")   # ties keep their order, as torch.sort on CPU
        ln = ln[order]
        sorted_indices = _index(order, input.device)
    if ln[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if np.any(ln[1:] > ln[:-1]):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")
    if ln[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a sequence length of {ln[0]} exceeds the "
                           f"padded length {steps} of the input")

    batch_sizes = (ln[None, :] > np.arange(ln[0])[:, None]).sum(1)
    time = np.repeat(np.arange(ln[0]), batch_sizes)
    slot = np.arange(time.size) - np.repeat(np.cumsum(batch_sizes) - batch_sizes, batch_sizes)
    col = order[slot]
    flat = col * steps + time if batch_first else time * batch + col
    rows = input.reshape(batch * steps, *input.shape[2:])
    data = rows.index_select(0, _index(flat, input.device))
    return PackedSequence(data, gt.tensor(batch_sizes.astype(np.int64)), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Inverse of :func:`pack_padded_sequence`: returns the padded batch (in the original
    batch order) and a CPU int64 tensor of the lengths.

    ``total_length`` pads the time dim past the longest sequence, which keeps shapes equal
    across replicas that each see a slice of the batch.
    """
    batch_sizes_t = sequence.batch_sizes
    _check_long_1d_cpu(batch_sizes_t)
    bs = _host_ints(batch_sizes_t)
    max_seq_length = bs.size
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             "sequence in input, but got "
                             f"total_length={total_length} and max sequence length being "
                             f"{max_seq_length}")
        max_seq_length = total_length
    data = sequence.data
    batch = int(bs[0]) if bs.size else 0
    cols = np.arange(batch)
    lengths = (bs[None, :] > cols[:, None]).sum(1).astype(np.int64)
    idx = np.full((max_seq_length, batch), data.shape[0], dtype=np.int64)
    valid = cols[None, :] < bs[:, None]
    offsets = np.cumsum(bs) - bs
    idx[:bs.size][valid] = (offsets[:, None] + cols[None, :])[valid]
    if sequence.unsorted_indices is not None:
        perm = _host_ints(sequence.unsorted_indices)
        idx, lengths = idx[:, perm], lengths[perm]
    if batch_first:
        idx = idx.T
    out = _with_pad_row(data, padding_value).index_select(0, _index(idx, data.device))
    return out.view(*idx.shape, *data.shape[1:]), gt.tensor(lengths)


def _broadcast_to(seq: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``seq`` broadcast to ``shape`` as ``copy_`` would, with PyTorch's message on a
    mismatch."""
    src = tuple(seq.shape)
    for back in range(1, min(len(src), len(shape)) + 1):
        a, b = shape[-back], src[-back]
        if b not in (a, 1):
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b "
                               f"({b}) at non-singleton dimension {len(shape) - back}")
    return seq.expand(shape)


def pad_sequence(sequences: Tensor | Iterable[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack ``L_i x *`` sequences into one ``T x B x *`` (or ``B x T x *``) tensor, padding
    each on ``padding_side`` to the longest length ``T``.

    Trailing dims, dtype and device come from the first sequence, as in PyTorch.
    """
    if isinstance(sequences, Tensor):
        seqs = list(sequences.unbind(0))
    elif isinstance(sequences, Iterable):
        seqs = list(sequences)
    else:
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    if any(s.dim() == 0 for s in seqs):
        raise RuntimeError("pad_sequence: every sequence needs a length dimension, but got a "
                           "0-d tensor")
    first = seqs[0]
    trailing = tuple(first.shape[1:])
    max_len = max(s.shape[0] for s in seqs)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    parts = []
    total = sum(s.shape[0] for s in seqs)
    idx = np.full((max_len, len(seqs)), total, dtype=np.int64)   # row `total` is the padding
    offset = 0
    for b, s in enumerate(seqs):
        n = s.shape[0]
        s = s.to(device=first.device, dtype=first.dtype)
        if tuple(s.shape[1:]) != trailing:
            s = _broadcast_to(s, (n, *trailing))
        parts.append(s)
        start = max_len - n if padding_side == "left" else 0
        idx[start:start + n, b] = offset + np.arange(n)
        offset += n
    if batch_first:
        idx = idx.T
    source = gt.cat(parts + [gt.full((1, *trailing), padding_value, dtype=first.dtype,
                                     device=first.device)], 0)
    return source.index_select(0, _index(idx, first.device)).view(*idx.shape, *trailing)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor | Sequence[int],
                   batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its variable-length sequences (views of the batch)."""
    batch_dim = 0 if batch_first else 1
    max_len = padded_sequences.shape[1 - batch_dim]
    ln = _host_ints(lengths) if isinstance(lengths, Tensor) else [int(v) for v in lengths]
    out = []
    for b, n in zip(range(padded_sequences.shape[batch_dim]), ln, strict=True):
        seq = padded_sequences.select(batch_dim, b)
        out.append(seq.narrow(0, 0, min(max(int(n), 0), max_len)))
    return out


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``L_i x *`` sequences (``pad_sequence`` then ``pack_padded_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """Inverse of :func:`pack_sequence`: the sequences in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
