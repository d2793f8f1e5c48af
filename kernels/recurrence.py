"""The visiting order of a recurrence's time steps, shared by the CPU and CUDA kernels of the
fused RNN ops (kernels/cpu/rnn.py, kernels/cuda/ops/rnn.py)."""

from __future__ import annotations


def step_order(steps: int, reverse: bool, backward: bool) -> list[tuple[int, int, bool]]:
    """(t, tp, first) per step in the order a pass visits them: t the time index, tp the
    index of the step before it in the forward pass, first whether it read the initial state.
    A reversed layer runs time backwards; backward visits the forward pass's steps in the
    opposite order."""
    times = range(steps - 1, -1, -1) if reverse else range(steps)
    visits = [(t, t + 1 if reverse else t - 1, k == 0) for k, t in enumerate(times)]
    return visits[::-1] if backward else visits
