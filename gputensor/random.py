"""``gt.random``: the seeding functions under torch.random's names, and the switch to
PyTorch's CPU stream (a gputensor extension; see gputensor/_random.py)."""

from __future__ import annotations

from gputensor._random import (
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
    torch_cpu_stream_enabled,
    use_torch_cpu_stream,
)

__all__ = ["default_generator", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state", "torch_cpu_stream_enabled", "use_torch_cpu_stream"]
