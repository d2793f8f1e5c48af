"""Seeding and state of the CUDA default generators (one per device), as torch.cuda names them.

The generators themselves live in gputensor/_random.py (``default_generator_for``), shared with
``gt.manual_seed``, which seeds them too. Like PyTorch's, these functions are safe to call
without CUDA: they seed the generator objects, which only a CUDA random kernel consumes.
"""

from __future__ import annotations

from typing import Any

from gputensor import _random
from gputensor._device import to_device
from gputensor._tensor import Tensor


def _count() -> int:
    from gputensor import cuda

    return max(1, cuda.device_count()) if cuda.is_available() else 1


def _gen(device: Any = None) -> _random.Generator:
    if device is None:
        from gputensor import cuda

        idx = cuda.current_device() if cuda.is_available() else 0
    elif isinstance(device, int) and not isinstance(device, bool):
        idx = device
    else:
        d = to_device(device)
        if d.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {d}")
        idx = d.index or 0
    return _random.default_generator_for(to_device(f"cuda:{idx}"))


def _all() -> list[_random.Generator]:
    return [_gen(i) for i in range(_count())]


def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's default generator."""
    _gen().manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the default generator of every CUDA device."""
    for g in _all():
        g.manual_seed(seed)


def seed() -> None:
    """Seed the current CUDA device's default generator from OS entropy."""
    _gen().seed()


def seed_all() -> None:
    """Seed every CUDA device's default generator with one seed from OS entropy."""
    s = _gen(0).seed()
    for g in _all()[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    """The seed of the current CUDA device's default generator."""
    return _gen().initial_seed()


def get_rng_state(device: Any = "cuda") -> Tensor:
    """The state of a CUDA device's default generator, as a CPU uint8 tensor."""
    return _gen(device).get_state()


def set_rng_state(new_state: Tensor, device: Any = "cuda") -> None:
    _gen(device).set_state(new_state)


def get_rng_state_all() -> list[Tensor]:
    return [g.get_state() for g in _all()]


def set_rng_state_all(new_states: list[Tensor]) -> None:
    for g, st in zip(_all(), new_states, strict=False):
        g.set_state(st)


def all_default_generators() -> tuple[_random.Generator, ...]:
    """The default generator of every CUDA device (``torch.cuda.default_generators``)."""
    return tuple(_all())
