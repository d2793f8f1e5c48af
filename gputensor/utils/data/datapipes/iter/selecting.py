"""``filter`` (Filter)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ..utils.common import check_unpickable_fn, validate_input_col
from ..utils.streams import StreamWrapper

__all__ = ["FilterIterDataPipe"]

_T_co = TypeVar("_T_co", covariant=True)


@functional_datapipe("filter")
class FilterIterDataPipe(IterDataPipe[_T_co]):
    """``dp.filter(filter_fn, input_col=None)``: the elements for which ``filter_fn`` (of the
    element, or of its ``input_col`` columns) returns True."""

    def __init__(self, datapipe: IterDataPipe[_T_co], filter_fn: Callable,
                 input_col: Any = None) -> None:
        super().__init__()
        self.datapipe = datapipe
        check_unpickable_fn(filter_fn)
        self.filter_fn = filter_fn
        self.input_col = input_col
        validate_input_col(filter_fn, input_col)

    def _apply_filter_fn(self, data: Any) -> Any:
        if self.input_col is None:
            return self.filter_fn(data)
        if isinstance(self.input_col, (list, tuple)):
            return self.filter_fn(*(data[c] for c in self.input_col))
        return self.filter_fn(data[self.input_col])

    def __iter__(self) -> Iterator[_T_co]:
        for data in self.datapipe:
            keep = self._apply_filter_fn(data)
            if not isinstance(keep, bool):
                raise ValueError("Boolean output is required for `filter_fn` of "
                                 "FilterIterDataPipe, got", type(keep))
            if keep:
                yield data
            else:
                StreamWrapper.close_streams(data)  # a dropped (path, stream) closes its file
