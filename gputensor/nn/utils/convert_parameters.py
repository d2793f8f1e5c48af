"""parameters_to_vector / vector_to_parameters: flatten parameters into one vector and back."""

from __future__ import annotations

from collections.abc import Iterable

import gputensor as gt
from gputensor._tensor import Tensor
from gputensor.nn.modules.module import typename


def _check_same_device(param: Tensor, device: gt.device | None) -> gt.device:
    if device is not None and param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return param.device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Concatenate the flattened parameters into one new 1-D tensor."""
    device = None
    flat = []
    for param in parameters:
        device = _check_same_device(param, device)
        flat.append(param.view(-1))
    return gt.cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Point each parameter's data at its slice of ``vec`` (they then share memory)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected gputensor.Tensor, but got: {typename(vec)}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_same_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
