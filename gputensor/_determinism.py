"""``gt.use_deterministic_algorithms``: refuse (or warn about) kernels whose results can
differ from run to run.

On the CPU every kernel is deterministic. The CUDA kernels that accumulate floating-point
values with atomics (scatter/index_add/index_put with accumulation, scatter_reduce's sum,
mean and prod, embedding and max-pool backward) sum in whatever order threads arrive, so the
last bits of a result can vary between runs on a GPU; with the mode on they raise PyTorch's
error (a warning with ``warn_only=True``) instead of running. Integer accumulations and
extrema are exact in any order and never alert. The CUDA emulator alerts exactly as a GPU
does, so CI sees what a GPU run would.
"""

from __future__ import annotations

import warnings

_state = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _state["enabled"], _state["warn_only"] = mode, warn_only


def are_deterministic_algorithms_enabled() -> bool:
    return _state["enabled"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def alert_not_deterministic(caller: str) -> None:
    """Called by a kernel that has no deterministic implementation, before it runs."""
    if not _state["enabled"]:
        return
    message = (f"{caller} does not have a deterministic implementation, but you set "
               f"'torch.use_deterministic_algorithms(True)'. You can turn off determinism just "
               f"for this operation, or you can use the 'warn_only=True' option, if that's "
               f"acceptable for your application.")
    if _state["warn_only"]:
        warnings.warn(message, UserWarning, stacklevel=3)
    else:
        raise RuntimeError(message)
