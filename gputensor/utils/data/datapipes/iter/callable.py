"""``map`` (Mapper) and ``collate`` (Collator)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gputensor.utils.data.collate import default_collate

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ..utils.common import check_unpickable_fn, sized_len, validate_input_col

__all__ = ["CollatorIterDataPipe", "MapperIterDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


def apply_to_columns(fn: Callable, data: Any, input_col: Any, output_col: Any) -> Any:
    """``fn`` applied to ``data`` or to its ``input_col`` columns; the result replaces the
    input column(s), or goes to ``output_col`` (-1 appends)."""
    if input_col is None:
        return fn(data)
    if isinstance(input_col, (list, tuple)):
        res = fn(*(data[c] for c in input_col))
    else:
        res = fn(data[input_col])
    was_tuple = isinstance(data, tuple)
    if was_tuple:
        data = list(data)
    if output_col is None:
        if isinstance(input_col, (list, tuple)):
            data[input_col[0]] = res
            for idx in sorted(input_col[1:], reverse=True):
                del data[idx]
        else:
            data[input_col] = res
    elif output_col == -1:
        data.append(res)
    else:
        data[output_col] = res
    return tuple(data) if was_tuple else data


@functional_datapipe("map")
class MapperIterDataPipe(IterDataPipe[_T_co]):
    """``dp.map(fn, input_col=None, output_col=None)``: ``fn`` applied to every element (or
    to columns of it)."""

    def __init__(self, datapipe: IterDataPipe, fn: Callable, input_col: Any = None,
                 output_col: Any = None) -> None:
        super().__init__()
        self.datapipe = datapipe
        check_unpickable_fn(fn)
        self.fn = fn
        self.input_col = input_col
        if input_col is None and output_col is not None:
            raise ValueError("`output_col` must be None when `input_col` is None.")
        if isinstance(output_col, (list, tuple)):
            if len(output_col) > 1:
                raise ValueError("`output_col` must be a single-element list or tuple")
            output_col = output_col[0]
        self.output_col = output_col
        validate_input_col(fn, input_col)

    def _apply_fn(self, data: Any) -> Any:
        return apply_to_columns(self.fn, data, self.input_col, self.output_col)

    def __iter__(self) -> Iterator[_T_co]:
        for data in self.datapipe:
            yield self._apply_fn(data)

    def __len__(self) -> int:
        return sized_len(self, self.datapipe)


@functional_datapipe("collate")
class CollatorIterDataPipe(MapperIterDataPipe):
    """``dp.collate(conversion=default_collate, collate_fn=None)``: each element (usually a
    batch) through a collate function."""

    def __init__(self, datapipe: IterDataPipe, conversion: Callable | None = default_collate,
                 collate_fn: Callable | None = None) -> None:
        fn = collate_fn if collate_fn is not None else conversion
        if not callable(fn):
            raise TypeError("CollatorIterDataPipe: `conversion` must be a callable (the "
                            "per-column DataFrame conversion dict is not supported)")
        super().__init__(datapipe, fn=fn)
