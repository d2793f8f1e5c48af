"""CPU kernels for advanced indexing (bounds are checked by the frontend before these run)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gputensor._tensor import Tensor
from gputensor.kernels.registry import CPU


def _np_index(adv: list[Any]) -> tuple:
    return tuple(slice(None) if a is None else a._host for a in adv)


@CPU.register("_index")
def index(base: Tensor, adv: list[Any]) -> Tensor:
    return Tensor._from_np(np.ascontiguousarray(base._host[_np_index(adv)]))


@CPU.register("_index_put")
def index_put(base: Tensor, adv: list[Any], value: Tensor, accumulate: bool) -> None:
    arr = base._host
    idx = _np_index(adv)
    v = value._host.astype(arr.dtype, copy=False)
    if accumulate:
        np.add.at(arr, idx, v)
    else:
        arr[idx] = v
