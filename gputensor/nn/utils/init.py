"""skip_init (torch.nn.utils.init): a module whose parameters need no initialisation."""

from __future__ import annotations

from typing import Any

__all__ = ["skip_init"]


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Any:
    """``module_cls(*args, **kwargs)`` for a caller that overwrites every parameter and buffer
    itself. PyTorch builds it on the meta device so that initialisation costs nothing;
    gputensor has no meta device, so the module is built (and initialised) normally: its
    values are as arbitrary to the caller as uninitialised memory, only slower to produce.
    As in PyTorch, the class must accept a ``device`` keyword."""
    import inspect

    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
