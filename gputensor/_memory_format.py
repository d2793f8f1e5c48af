"""Memory formats (torch.memory_format): the order a tensor's dims take in memory.

``contiguous_format`` is row-major; ``channels_last`` lays an (N, C, H, W) tensor out as
NHWC (strides (HWC, 1, WC, C)) and ``channels_last_3d`` an (N, C, D, H, W) one as NDHWC;
``preserve_format`` keeps the order of an input's strides (a dense input's strides exactly),
PyTorch's rule for clone, ``*_like`` and ``.to``. Every kernel reads and writes
through strides, so a format is only a choice of strides.
"""

from __future__ import annotations

from gputensor._tensor import contiguous_strides
from gputensor.kernels.layout import dense_strides, iteration_order


class memory_format:
    """One of gt.contiguous_format, channels_last, channels_last_3d, preserve_format."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"gputensor.{self._name}"  # torch.<name> in PyTorch, like the dtypes' names

    def __reduce__(self) -> str:
        return self._name  # pickles as the module-level singleton


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

_CHANNELS_LAST_RANK = {channels_last: 4, channels_last_3d: 5}


def check(fmt: object, where: str) -> memory_format:
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{where}: memory_format must be a gputensor.memory_format (such as "
                        f"gputensor.channels_last), got {type(fmt).__name__}")
    return fmt


def format_strides(shape: tuple[int, ...], fmt: memory_format) -> tuple[int, ...]:
    """Strides of a new tensor of ``shape`` laid out in ``fmt`` (not preserve_format)."""
    rank = _CHANNELS_LAST_RANK.get(fmt)
    if rank is None:
        return contiguous_strides(shape)
    if len(shape) != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
    # channels innermost, then the spatial dims from the last, then the batch
    order = [1, *range(rank - 1, 1, -1), 0]
    strides = [0] * rank
    step = 1
    for d in order:
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def is_in_format(shape: tuple[int, ...], strides: tuple[int, ...], fmt: memory_format) -> bool:
    """Whether these strides are ``fmt``'s (dims of size 1 may have any stride)."""
    if 0 in shape:
        return True
    expected = format_strides(shape, fmt)
    return all(n == 1 or s == e for n, s, e in zip(shape, strides, expected, strict=True))


def suggested_format(shape: tuple[int, ...], strides: tuple[int, ...]) -> memory_format:
    """The format these strides look like (PyTorch's suggest_memory_format): channels_last
    (or _3d) when a 4-d (5-d) tensor's strides rise in NHWC (NDHWC) order, else contiguous."""
    rank = len(shape)
    if rank not in (4, 5) or strides[1] == 0:
        return contiguous_format
    low = 0
    for d in (1, *range(rank - 1, 1, -1), 0):  # channels, the spatial dims from the last, N
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return contiguous_format  # ambiguous layouts count as row-major, as PyTorch's
        low = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return channels_last if rank == 4 else channels_last_3d


def preserved_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                      fmt: memory_format) -> tuple[int, ...]:
    """The strides a new tensor like one of ``shape``/``strides`` takes under ``fmt``.
    preserve_format lays the dims out densely in the order of the given strides (PyTorch's
    rule: a dense input's strides are kept as they are, a sliced one's order is kept)."""
    if fmt is not preserve_format:
        return format_strides(shape, fmt)
    # PyTorch's infer_dense_strides: TensorIterator's dim order for this one operand (dims
    # with a zero stride, broadcast, stay where they are).
    return dense_strides(shape, iteration_order(shape, (strides,)))
