"""DataParallel: one module, a batch split over several CUDA devices (torch.nn.DataParallel).

Each device runs the module through ``functional_call`` with the original parameters copied
to it by differentiable ``.to(device)`` moves, so the backward pass sums every device's
gradients into the original parameters (PyTorch's ``replicate`` does this with a broadcast
function). The devices run one after another on the host; their kernels are queued on their
own devices. Buffers are copied too, so running statistics updated on a copy are not written
back (PyTorch keeps device 0's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputensor._device import device as Device
from gputensor._device import to_device
from gputensor._tensor import Tensor

from ..modules.module import Module
from ..utils.stateless import functional_call

__all__ = ["DataParallel", "data_parallel", "scatter", "gather"]


def _index(d: Any) -> int:
    if isinstance(d, int):
        return d
    dev = to_device(d)
    if dev.type != "cuda":
        raise ValueError(f"DataParallel needs CUDA devices, got {dev}")
    return dev.index or 0


def scatter(inputs: Any, devices: Sequence[int], dim: int = 0) -> list[Any]:
    """Split every tensor of ``inputs`` (nested tuples, lists and dicts) into one chunk per
    device along ``dim``, moved there; anything else is repeated."""
    n = len(devices)

    def split(obj: Any) -> list[Any]:
        if isinstance(obj, Tensor):
            chunks = obj.chunk(n, dim)
            return [c.to(f"cuda:{d}") for c, d in zip(chunks, devices, strict=False)]
        if isinstance(obj, tuple | list) and obj:
            parts = list(zip(*(split(o) for o in obj), strict=False))
            return [type(obj)(p) for p in parts]
        if isinstance(obj, dict) and obj:
            keys = list(obj)
            parts = list(zip(*(split(obj[k]) for k in keys), strict=False))
            return [type(obj)(zip(keys, p, strict=True)) for p in parts]
        return [obj] * n

    return split(inputs)


def gather(outputs: Sequence[Any], target_device: int | str, dim: int = 0) -> Any:
    """Concatenate the devices' outputs along ``dim`` on ``target_device`` (nested tuples,
    lists and dicts are gathered element by element; 0-d tensors are stacked)."""
    from gputensor import cat, stack

    dev = f"cuda:{target_device}" if isinstance(target_device, int) else target_device
    first = outputs[0]
    if isinstance(first, Tensor):
        moved = [o.to(dev) for o in outputs]
        return stack(moved) if first.dim() == 0 else cat(moved, dim)
    if first is None:
        return None
    if isinstance(first, dict):
        return type(first)((k, gather([o[k] for o in outputs], target_device, dim))
                           for k in first)
    if isinstance(first, tuple | list):
        return type(first)(gather(list(parts), target_device, dim)
                           for parts in zip(*outputs, strict=True))
    return first


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: ``forward``
    splits its inputs along ``dim`` over ``device_ids`` (default: every CUDA device), runs
    the module on each part and concatenates the outputs on ``output_device`` (default:
    ``device_ids[0]``). Without CUDA it calls the module directly."""

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        from gputensor import cuda

        self.module = module
        self.dim = dim
        if not cuda.is_available():
            self.device_ids: list[int] = []
            self.output_device = None
            return
        ids = list(range(cuda.device_count())) if device_ids is None else \
            [_index(d) for d in device_ids]
        self.device_ids = ids
        self.output_device = _index(output_device) if output_device is not None else ids[0]
        self.src_device_obj = to_device(f"cuda:{ids[0]}")
        self._check_placement()

    def _check_placement(self) -> None:
        for t in (*self.module.parameters(), *self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(f"module must have its parameters and buffers on device "
                                   f"{self.src_device_obj} (device_ids[0]) but found one of "
                                   f"them on device: {t.device}")

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        self._check_placement()
        if len(self.device_ids) == 1:
            parts = scatter((inputs, kwargs), self.device_ids, self.dim)
            args, kw = parts[0]
            return self.module(*args, **kw)
        parts = scatter((inputs, kwargs), self.device_ids, self.dim)
        named = dict(self.module.named_parameters())
        named.update(self.module.named_buffers())
        outputs = []
        for (args, kw), d in zip(parts, self.device_ids, strict=False):
            dev = Device(f"cuda:{d}")
            tensors = {k: v.to(dev) for k, v in named.items()}  # differentiable copies
            outputs.append(functional_call(self.module, tensors, tuple(args), dict(kw)))
        return gather(outputs, self.output_device, self.dim)


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[Any] | None = None,
                  output_device: Any = None, dim: int = 0,
                  module_kwargs: dict[str, Any] | None = None) -> Any:
    """``DataParallel(module, device_ids, output_device, dim)`` applied once."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return DataParallel(module, device_ids, output_device, dim)(*inputs,
                                                               **(module_kwargs or {}))
