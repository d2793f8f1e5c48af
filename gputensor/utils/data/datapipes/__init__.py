"""DataPipes (torch.utils.data.datapipes): composable iterable- and map-style pipelines.

``datapipe.py`` holds the base classes and the functional-form registry, ``_decorator.py``
the decorators, ``_hook_iterator.py`` the single-iterator rule, ``_typing.py`` element types;
``iter/`` and ``map/`` hold the DataPipes themselves, each registered under its functional
name (``dp.map``, ``dp.filter``, ``dp.batch``, ``dp.shuffle``...).
"""

from . import iter, map  # noqa: A004 - PyTorch's module names
from ._decorator import (
    argument_validation,
    functional_datapipe,
    guaranteed_datapipes_determinism,
    non_deterministic,
    runtime_validation,
    runtime_validation_disabled,
)
from .datapipe import DataChunk, DFIterDataPipe, IterDataPipe, MapDataPipe

__all__ = ["DFIterDataPipe", "DataChunk", "IterDataPipe", "MapDataPipe", "argument_validation",
           "functional_datapipe", "guaranteed_datapipes_determinism", "iter", "map",
           "non_deterministic", "runtime_validation", "runtime_validation_disabled"]
