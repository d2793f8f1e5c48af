"""torch.profiler's step schedule: which steps are skipped, warmed up or recorded."""

from __future__ import annotations

import enum
from collections.abc import Callable


class ProfilerAction(enum.Enum):
    NONE = 0              # hooks off
    WARMUP = 1            # hooks on, nothing kept
    RECORD = 2            # recording
    RECORD_AND_SAVE = 3   # the last recorded step of a cycle: the trace is handed over after it


RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """After ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup`` steps and ``active``
    recorded steps; ``repeat`` cycles (0: until the profile ends). Step numbers start at 0."""
    for name, value, least in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                               ("repeat", repeat, 0), ("skip_first", skip_first, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"schedule(): {name} must be an int >= {least}, got {value!r}")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if pos == cycle - 1 else ProfilerAction.RECORD

    return action


def _always_record(step: int) -> ProfilerAction:
    """The schedule of a profile without one: record from start to stop."""
    return ProfilerAction.RECORD
