"""The graph of a DataPipe pipeline (torch.utils.data.graph): ``traverse_dps(dp)`` is
``{id(dp): (dp, {id(source): (source, {...})})}``, found through each DataPipe's state
(its attributes, looking inside lists, tuples, sets and dicts)."""

from __future__ import annotations

from typing import Any

from .datapipes.datapipe import IterDataPipe, MapDataPipe

DataPipe = IterDataPipe | MapDataPipe
DataPipeGraph = dict[int, tuple[Any, "DataPipeGraph"]]

__all__ = ["traverse_dps"]


def _sources(obj: Any, out: list[Any], seen: set[int]) -> None:
    if isinstance(obj, (IterDataPipe, MapDataPipe)):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
        return
    if isinstance(obj, dict):
        for v in obj.values():
            _sources(v, out, seen)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _sources(v, out, seen)


def _state(dp: Any) -> Any:
    getstate = getattr(type(dp), "__getstate__", None)
    return getstate(dp) if getstate is not None else vars(dp)


def _traverse(dp: Any, path: frozenset[int]) -> DataPipeGraph:
    sources: list[Any] = []
    _sources(_state(dp), sources, {id(dp)})
    path = path | {id(dp)}
    children: DataPipeGraph = {}
    for s in sources:
        children.update({id(s): (s, {})} if id(s) in path else _traverse(s, path))
    return {id(dp): (dp, children)}


def traverse_dps(datapipe: Any) -> DataPipeGraph:
    """The DataPipes ``datapipe`` reads from, recursively, as a nested dict."""
    return _traverse(datapipe, frozenset())
