"""torch.nn.factory_kwargs: the device/dtype/memory_format keywords a module passes on to the
tensor factories."""

from __future__ import annotations

from typing import Any

_SIMPLE_KEYS = frozenset({"device", "dtype", "memory_format"})


def factory_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """A new dict of the factory keywords in ``kwargs``: its ``device``, ``dtype`` and
    ``memory_format`` merged with the explicit ``factory_kwargs`` dict it may hold (a key in
    both, or any other key, is a TypeError)."""
    if kwargs is None:
        return {}
    expected = _SIMPLE_KEYS | {"factory_kwargs"}
    if not kwargs.keys() <= expected:
        raise TypeError(f"unexpected kwargs {kwargs.keys() - expected}")
    result = dict(kwargs.get("factory_kwargs", {}))
    for key in _SIMPLE_KEYS:
        if key in kwargs:
            if key in result:
                raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
            result[key] = kwargs[key]
    return result
