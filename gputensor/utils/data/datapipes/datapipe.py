"""The DataPipe base classes: ``IterDataPipe`` (a stream), ``MapDataPipe`` (indexable),
``DFIterDataPipe`` and ``DataChunk`` (a batch, a list).

Functional forms: a DataPipe class registered with ``@functional_datapipe("map")`` is also
reachable as ``dp.map(...)`` on every DataPipe of its kind; the name is looked up in the
class's ``functions`` table when normal attribute lookup fails (PyTorch's mechanism).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from gputensor.utils.data.dataset import Dataset, IterableDataset

from ._hook_iterator import hook_iter, hook_reset
from ._typing import ANY_TYPE, _DataPipeType, type_of_class

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)

__all__ = ["DFIterDataPipe", "DataChunk", "IterDataPipe", "MapDataPipe"]


class DataChunk(list, Generic[_T]):
    """A batch produced by ``batch``: a list that also keeps its ``items``."""

    def __init__(self, items: Iterable[_T]) -> None:
        items = list(items)
        super().__init__(items)
        self.items = items

    def as_str(self, indent: str = "") -> str:
        return indent + "[" + ", ".join(str(i) for i in iter(self)) + "]"

    def __iter__(self) -> Iterator[_T]:
        yield from super().__iter__()

    def raw_iterator(self) -> Iterator[_T]:
        yield from self.items


class _DataPipeMeta(type):
    """Gives each DataPipe class its element ``type`` (from ``IterDataPipe[T]`` bases)."""

    def __init__(cls, name: str, bases: tuple, namespace: dict[str, Any], **kw: Any) -> None:
        super().__init__(name, bases, namespace, **kw)
        if "type" not in namespace:
            declared = type_of_class(cls, _DataPipeRoot)
            if declared is not None:
                cls.type = declared


class _IterDataPipeMeta(_DataPipeMeta):
    """Also hooks ``__iter__`` and ``reset`` (see _hook_iterator.py)."""

    def __new__(mcs, name: str, bases: tuple, namespace: dict[str, Any], **kw: Any) -> type:
        if "reset" in namespace:
            hook_reset(namespace)
        if "__iter__" in namespace:
            hook_iter(namespace)
        return super().__new__(mcs, name, bases, namespace, **kw)


class _DataPipeRoot:
    """Marks the DataPipe bases whose parametrization gives a class its element type."""

    type: _DataPipeType = ANY_TYPE
    functions: dict[str, Callable]

    def __getattr__(self, name: str) -> Any:
        functions = type(self)._functions_table()
        if name in functions:
            fn = functions[name]
            bound = functools.partial(fn, self)
            functools.update_wrapper(bound, fn, assigned=("__doc__",))
            return bound
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}")

    @classmethod
    def _functions_table(cls) -> dict[str, Callable]:
        raise NotImplementedError

    @classmethod
    def register_function(cls, function_name: str, function: Callable) -> None:
        cls._functions_table()[function_name] = function

    @classmethod
    def register_datapipe_as_function(cls, function_name: str, cls_to_register: type,
                                      enable_df_api_tracing: bool = False) -> None:
        table = cls._functions_table()
        if function_name in table:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it is "
                            f"already taken")

        def class_function(source_dp: Any, *args: Any, **kwargs: Any) -> Any:
            return cls_to_register(source_dp, *args, **kwargs)

        functools.update_wrapper(class_function, cls_to_register, assigned=("__doc__",),
                                 updated=())
        table[function_name] = class_function

    def __repr__(self) -> str:
        return type(self).__qualname__

    def __str__(self) -> str:
        return type(self).__qualname__

    def __dir__(self) -> list[str]:
        return list(super().__dir__()) + list(type(self)._functions_table())

    def reinforce_type(self, expected_type: Any) -> Any:
        """Narrow this DataPipe's element type to ``expected_type`` (a subtype of it)."""
        from ._typing import issubtype

        if isinstance(expected_type, tuple):
            expected_type = tuple[expected_type]
        if not issubtype(expected_type, self.type.param):
            raise TypeError(f"Expected 'expected_type' as subtype of {self.type}, but found "
                            f"{expected_type}")
        self.type = _DataPipeType(expected_type)
        return self


class IterDataPipe(_DataPipeRoot, IterableDataset, Generic[_T_co],
                   metaclass=_IterDataPipeMeta):
    """An iterable-style DataPipe: subclasses define ``__iter__`` (and optionally ``reset``,
    called whenever a new iterator starts). Only the newest iterator of a DataPipe is valid:
    advancing an older one raises RuntimeError."""

    functions: dict[str, Callable] = {}
    _valid_iterator_id: int | None = None
    _number_of_samples_yielded: int = 0

    @classmethod
    def _functions_table(cls) -> dict[str, Callable]:
        return IterDataPipe.functions

    def __iter__(self) -> Iterator[_T_co]:
        return self  # type: ignore[return-value]

    def reset(self) -> None:
        """Return to the initial state (clear buffers); a no-op unless overridden."""

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class DFIterDataPipe(IterDataPipe):
    """An IterDataPipe of DataFrames."""

    def _is_dfpipe(self) -> bool:
        return True


class MapDataPipe(_DataPipeRoot, Dataset, Generic[_T_co], metaclass=_DataPipeMeta):
    """A map-style DataPipe: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    functions: dict[str, Callable] = {}

    @classmethod
    def _functions_table(cls) -> dict[str, Callable]:
        return MapDataPipe.functions

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
