"""The ONNX graph under construction: names for traced tensors, nodes, initializers.

A traced tensor is either a graph value (an input, or the result of a translated op, bound by
``bind``) or a constant (a parameter, a buffer, a tensor made by a factory or folded from
constants), which becomes an initializer the first time a node reads it. With dynamic axes,
each value also carries its *dims*: the traced size, or None where the size follows a dynamic
axis (found by tracing the call a second time with those axes one larger).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import OnnxExporterError

Dims = tuple  # of int | None


def host_array(t: Any) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy())


class Graph:
    def __init__(self, opset: int, params: dict[int, str], unseen: dict[int, str]) -> None:
        self.opset = opset
        self.unseen = unseen   # id(buffer) -> the kernel that wrote it from the inputs' data
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.params = params                          # id(tensor) -> state_dict name
        self._values: dict[int, tuple[str, int]] = {}  # id(tensor) -> (name, version)
        self._storages: set[int] = set()               # storages of graph values
        self._consts: dict[int, str] = {}
        self._keep: list[Any] = []                     # ids must stay unique while we work
        self.dims: dict[str, Dims] = {}
        self.twins: dict[int, Any] = {}                # id(tensor) -> its tensor in trace two
        self.versions: dict[int, int] = {}             # the versions the op being read saw
        self._sizes: dict[tuple[int, int], tuple[str, int]] = {}  # (size, twin size) -> dim
        self._n = 0

    # -- names -------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"/{hint}_{self._n}"

    def bind(self, t: Any, name: str, dims: Dims | None = None,
             version: int | None = None, twin: Any = None) -> None:
        self._values[id(t)] = (name, t._version if version is None else version)
        self._storages.add(id(t._storage))
        self._keep.append(t)
        self.dims[name] = tuple(t.shape) if dims is None else dims
        if twin is not None and name:
            for axis, pair in enumerate(zip(t.shape, twin.shape, strict=True)):
                if pair[0] != pair[1]:
                    self._sizes.setdefault(pair, (name, axis))

    def size_of(self, traced: int, twin: int) -> str | None:
        """A 1-D int64 value holding a size that is ``traced`` in the first trace and
        ``twin`` in the second, read from the first graph value with such a dim (None when
        no value has one)."""
        found = self._sizes.get((traced, twin))
        if found is None:
            return None
        name, axis = found
        return self.node("Gather", [self.node("Shape", [name]), self.ints([axis])], axis=0)

    def is_value(self, t: Any) -> bool:
        return id(t) in self._values

    def v(self, x: Any, like: Any = None) -> str:
        """The name of tensor ``x`` (a Python number: a constant of ``like``'s dtype)."""
        from gputensor import Tensor
        if not isinstance(x, Tensor):
            dt = np_dtype(like) if like is not None else np.dtype(type(x))
            return self.const(np.asarray(x, dtype=dt), "scalar")
        entry = self._values.get(id(x))
        if entry is not None:
            if self.versions.get(id(x), x._version) != entry[1]:
                raise OnnxExporterError(
                    f"gt.onnx.export: a tensor of shape {tuple(x.shape)} was modified in place "
                    "by an operation the exporter does not trace (an in-place write that is "
                    "no elementwise op, such as an indexed assignment)")
            if not entry[0]:
                raise OnnxExporterError(
                    f"gt.onnx.export: a result of shape {tuple(x.shape)} that the exported "
                    "graph does not compute (an op's saved statistics) is read later")
            return entry[0]
        name = self._consts.get(id(x))
        if name is not None:
            return name
        kernel = self.unseen.get(id(x._storage._buf))
        if kernel is not None or id(x._storage) in self._storages:
            by = f" (its kernel: {kernel!r})" if kernel else ""
            raise OnnxExporterError(
                f"gt.onnx.export: a tensor of shape {tuple(x.shape)} was derived from the "
                f"model's inputs by an operation the exporter does not trace{by}")
        twin = self.twins.get(id(x))
        if twin is not None and tuple(twin.shape) != tuple(x.shape):
            raise OnnxExporterError(
                f"gt.onnx.export: a constant of shape {tuple(x.shape)} made inside the model "
                "depends on a dynamic axis (its size changes with the input's); it cannot be "
                "exported with dynamic_axes")
        name = self.params.get(id(x)) or self.fresh("Constant")[1:]
        self._consts[id(x)] = name
        self._keep.append(x)
        self.dims[name] = tuple(x.shape)
        self.initializers.append(_tensor_proto(host_array(x), name))
        return name

    def const(self, array: np.ndarray, hint: str = "Constant") -> str:
        name = self.fresh(hint)[1:]
        self.initializers.append(_tensor_proto(np.asarray(array), name))
        self.dims[name] = tuple(np.shape(array))
        return name

    def ints(self, values: Any) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    # -- nodes -------------------------------------------------------------------------------
    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> Any:
        from onnx import helper
        names = [self.fresh(op) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=names[0] + "_node",
                                           **{k: v for k, v in attrs.items() if v is not None}))
        return names[0] if outputs == 1 else names


def _tensor_proto(array: np.ndarray, name: str) -> Any:
    from onnx import numpy_helper
    return numpy_helper.from_array(array, name)


_NP: dict[Any, np.dtype] = {}


def np_dtype(t: Any) -> np.dtype:
    """The NumPy dtype of a gputensor tensor (or of a gputensor dtype)."""
    import gputensor as gt
    dt = t.dtype if isinstance(t, gt.Tensor) else t
    got = _NP.get(dt)
    if got is None:
        got = _NP[dt] = gt.empty(0, dtype=dt).numpy().dtype
    return got
