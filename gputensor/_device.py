"""gt.device and the default device."""

from __future__ import annotations

from typing import Any

DEVICE_TYPES = ("cpu", "cuda")


class device:
    """A device: a type ('cpu' or 'cuda') and an optional index, like torch.device."""

    __slots__ = ("type", "index")

    def __init__(self, type_or_str: Any, index: int | None = None) -> None:
        if isinstance(type_or_str, device):
            type_, index = type_or_str.type, type_or_str.index if index is None else index
        elif isinstance(type_or_str, int) and not isinstance(type_or_str, bool):
            type_, index = "cuda", type_or_str
        elif isinstance(type_or_str, str):
            type_, _, idx = type_or_str.partition(":")
            if idx:
                if index is not None:
                    raise RuntimeError(f"device string {type_or_str!r} already has an index")
                if not idx.isdigit():
                    raise RuntimeError(f"invalid device string: {type_or_str!r}")
                index = int(idx)
        else:
            raise TypeError(f"device() expects a string, int or device, got {type(type_or_str)}")
        if type_ not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start "
                               f"of device string: {type_or_str!r}")
        if index is not None and index < 0:
            raise RuntimeError(f"device index must be non-negative, got {index}")
        if type_ == "cpu" and index not in (None, 0):
            raise RuntimeError(f"CPU device index must be 0 or None, got {index}")
        self.type = type_
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __reduce__(self) -> tuple:
        return (device, (self.type, self.index))

    # ``with gt.device('cuda'):`` makes it the default device of factory calls inside the block
    # and restores the previous default on exit (nesting works, as in PyTorch).
    def __enter__(self) -> device:
        _device_stack.append(_default_device)
        set_default_device(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        set_default_device(_device_stack.pop())


CPU = device("cpu")
_default_device: device = CPU
_device_stack: list[device] = []   # the defaults that enclosing ``with device(...)`` replaced


_INTERNED: dict[tuple[str, int | None], device] = {("cpu", None): CPU}


def _no_cuda_device() -> int:
    return 0


# This thread's current CUDA device index; kernels/cuda/device.py installs its own when CUDA
# is served (gt.cuda.set_device / gt.cuda.device(i) change it).
current_cuda_index: Any = _no_cuda_device


def to_device(value: Any) -> device:
    """Normalise a device argument to an interned instance ('cuda' means the current CUDA
    device, 'cuda:0' unless set_device chose another).

    Tensors and storages only ever hold interned devices, so hot paths compare with ``is``.
    """
    if value is None:
        return _default_device
    if value is CPU or value == "cpu":
        return CPU
    d = value if isinstance(value, device) else device(value)
    key = (d.type, d.index if d.type == "cuda" and d.index is not None else
           (current_cuda_index() if d.type == "cuda" else None))
    out = _INTERNED.get(key)
    if out is None:
        out = _INTERNED[key] = device(*key)
    return out


def get_default_device() -> device:
    return _default_device


def set_default_device(value: Any) -> None:
    global _default_device
    _default_device = CPU if value is None else to_device(value)
