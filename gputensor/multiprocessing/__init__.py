"""gputensor.multiprocessing: Python's multiprocessing, with tensors passed by reference.

Every name of the standard module is here (Process, Queue, Pool, Pipe, get_context, ...).
Importing gputensor registers reducers with multiprocessing's pickler (``reductions.py``), so
a tensor put on a queue or passed to a process moves into shared memory once and the receiver
maps the same bytes; CUDA tensors travel as IPC handles. ``spawn`` runs a function in N
processes and raises the first failure in the parent.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import *  # noqa: F403 - the standard module's names, as PyTorch's

from gputensor.storage import shared as _shared

from .reductions import init_reductions
from .spawn import (
    ProcessContext,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)


def set_sharing_strategy(new_strategy: str) -> None:
    """Choose how CPU storages are shared from now on: "file_descriptor" (Linux default) or
    "file_system" (see ``gputensor/storage/shared.py`` for what each means)."""
    _shared.set_strategy(new_strategy)


def get_sharing_strategy() -> str:
    return _shared.get_strategy()


def get_all_sharing_strategies() -> set[str]:
    return set(_shared.STRATEGIES)


init_reductions()

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           *multiprocessing.__all__, "ProcessContext", "ProcessExitedException",
           "ProcessRaisedException", "SpawnContext", "spawn", "start_processes",
           "init_reductions"]
