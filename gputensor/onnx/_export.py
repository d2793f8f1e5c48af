"""gt.onnx.export: trace one call, translate its ops, write an ONNX model."""

from __future__ import annotations

import enum
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

from . import _symbolic
from ._graph import Graph, np_dtype
from ._trace import Call, trace
from .errors import OnnxExporterError, UnsupportedOperatorError

DEFAULT_OPSET = 18
MIN_OPSET = 17   # LayerNormalization


class TrainingMode(enum.IntEnum):
    """torch.onnx.TrainingMode: the mode the model is traced in."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """torch.onnx.OperatorExportTypes; only ONNX (standard operators) is produced here."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


def export(model: Any, args: Any = (), f: str | os.PathLike | io.IOBase | None = None, *,
           kwargs: dict[str, Any] | None = None, verbose: bool | None = None,
           input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
           opset_version: int | None = None, dynamo: bool = False,
           export_params: bool = True, keep_initializers_as_inputs: bool = False,
           dynamic_axes: Mapping[str, Mapping[int, str]] | Mapping[str, Sequence[int]] | None
           = None, training: TrainingMode = TrainingMode.EVAL,
           operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX,
           do_constant_folding: bool = True, custom_opsets: Mapping[str, int] | None = None,
           export_modules_as_functions: bool = False, autograd_inlining: bool = True) -> Any:
    """Export ``model`` (an ``nn.Module`` or a function) as an ONNX graph, like PyTorch's
    TorchScript-based exporter: one call ``model(*args, **kwargs)`` is traced (its op sequence,
    control flow fixed by these inputs) and each op becomes ONNX nodes. ``f`` is a path or a
    binary file object; the ``onnx.ModelProto`` is written there (and returned when ``f`` is
    None, which PyTorch does not allow).

    Inputs are named ``input_names`` (then ``input_0``, ...), outputs likewise; parameters
    and buffers become initializers under their state_dict names (``export_params=False``
    makes the parameters graph inputs instead; buffers stay initializers).
    ``do_constant_folding`` computes ops whose inputs are all constants at export time.
    ``dynamic_axes`` (``{name: [axes]}`` or ``{name: {axis: dim_name}}``) makes those dims
    symbolic; the call is traced a second time with them longer to find the sizes that
    follow them, and a shape-dependent constant or argument raises ``OnnxExporterError``.

    ``dynamo`` picks PyTorch's implementation (TorchDynamo or TorchScript); gputensor has one
    exporter, so both values give this graph. ``autograd_inlining=True`` is what the trace
    does anyway (custom autograd Functions show as the ops they run); False is refused, as
    are ``custom_opsets``, ``export_modules_as_functions`` and operator export types other
    than ONNX, which need ops this exporter does not emit.
    """
    import onnx
    from onnx import helper

    import gputensor as gt

    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
        raise ValueError(f"Unsupported ONNX opset version: {opset_version} (gt.onnx.export "
                         f"supports {MIN_OPSET} to {onnx.defs.onnx_opset_version()})")
    if operator_export_type != OperatorExportTypes.ONNX:
        raise ValueError(f"gt.onnx.export: operator_export_type={operator_export_type!r} is "
                         "not supported (only OperatorExportTypes.ONNX)")
    if custom_opsets:
        raise ValueError("gt.onnx.export: custom_opsets are not supported (no custom ops are "
                         "emitted)")
    if export_modules_as_functions:
        raise ValueError("gt.onnx.export: export_modules_as_functions is not supported")
    if not autograd_inlining:
        raise ValueError("gt.onnx.export: autograd_inlining=False is not supported (custom "
                         "autograd Functions are always traced through)")
    if not isinstance(training, TrainingMode):
        raise TypeError(f"training must be a gt.onnx.TrainingMode, not {type(training)}")

    call_args, call_kwargs = _split_args(args, kwargs)
    inputs = _flat_tensors(call_args) + _flat_tensors(list(call_kwargs.values()))
    is_module = isinstance(model, gt.nn.Module)
    was_training = model.training if is_module else None
    if is_module and training != TrainingMode.PRESERVE:
        model.train(training == TrainingMode.TRAINING)
    in_names = _names(input_names, len(inputs), "input")
    try:
        with gt.no_grad():
            calls, out, taint = trace(model, call_args, call_kwargs)
            outputs = _flat_tensors(out)
            out_names = _names(output_names, len(outputs), "output")
            dyn = _dynamic_axes(dynamic_axes, in_names, out_names)
            twins = twin_inputs = None
            if dynamic_axes:
                grown = _grow(call_args, call_kwargs, inputs, in_names, dyn)
                twins, _, _ = trace(model, *grown)
                twin_inputs = _flat_tensors(grown[0]) + _flat_tensors(list(grown[1].values()))
                _check_same_program(calls, twins)
    finally:
        if is_module:
            model.train(was_training)

    params: dict[int, str] = {}
    if is_module:
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            params.setdefault(id(t), name)
    g = Graph(opset, params, taint.unseen)
    graph_inputs = []
    for k, (t, name) in enumerate(zip(inputs, in_names, strict=True)):
        dims = tuple(None if i in dyn.get(name, {}) else s for i, s in enumerate(t.shape))
        g.bind(t, name, dims, twin=twin_inputs[k] if twin_inputs else None)
        graph_inputs.append(_value_info(name, t, dyn.get(name, {})))
    if not export_params and is_module:
        for name, t in model.named_parameters():
            g.bind(t, name)
            graph_inputs.append(_value_info(name, t, {}))

    _translate(g, calls, twins, do_constant_folding)

    g.versions = {}
    graph_outputs = []
    for t, name in zip(outputs, out_names, strict=True):
        src = g.v(t)
        g.nodes.append(helper.make_node("Identity", [src], [name], name=f"/{name}_out"))
        graph_outputs.append(_value_info(name, t, dyn.get(name, {})))
    if keep_initializers_as_inputs:
        graph_inputs += [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
                         for i in g.initializers]
    graph = helper.make_graph(g.nodes, "main_graph", graph_inputs, graph_outputs,
                              initializer=g.initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="gputensor", ir_version=min(onnx.IR_VERSION, 10))
    onnx.checker.check_model(proto)
    if verbose:
        print(helper.printable_graph(proto.graph))
    if f is None:
        return proto
    if isinstance(f, str | os.PathLike):
        onnx.save(proto, os.fspath(f))
    else:
        f.write(proto.SerializeToString())
    return None


# -- the trace -------------------------------------------------------------------------------
def _split_args(args: Any, kwargs: dict | None) -> tuple[tuple, dict]:
    """PyTorch's convention: a tensor alone is one argument; a tuple whose last item is a dict
    ends with the keyword arguments."""
    if not isinstance(args, tuple):
        args = (args,)
    kw = dict(kwargs or {})
    if args and isinstance(args[-1], dict):
        kw = {**args[-1], **kw}
        args = args[:-1]
    return args, kw


def _flat_tensors(x: Any) -> list:
    import gputensor as gt
    if isinstance(x, gt.Tensor):
        return [x]
    if isinstance(x, list | tuple):
        return [t for item in x for t in _flat_tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _flat_tensors(item)]
    return []


def _names(given: Sequence[str] | None, n: int, prefix: str) -> list[str]:
    given = list(given or [])
    if len(given) > n:
        raise ValueError(f"gt.onnx.export: {len(given)} {prefix} names given for {n} "
                         f"{prefix}s of the graph")
    return given + [f"{prefix}_{i}" for i in range(len(given), n)]


def _dynamic_axes(spec: Any, in_names: list[str], out_names: list[str]
                  ) -> dict[str, dict[int, str]]:
    result: dict[str, dict[int, str]] = {}
    for key, axes in (spec or {}).items():
        if key not in in_names and key not in out_names:
            raise ValueError(f"gt.onnx.export: dynamic_axes names {key!r}, which is neither "
                             f"an input ({in_names}) nor an output ({out_names})")
        if isinstance(axes, Mapping):
            result[key] = {int(a): str(n) for a, n in axes.items()}
        else:
            result[key] = {int(a): f"{key}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
    return result


def _grow(args: tuple, kwargs: dict, inputs: list, names: list[str],
          dyn: dict[str, dict[int, str]]) -> tuple[tuple, dict]:
    """The call's arguments with each dynamic input axis longer (its values repeated
    cyclically, so indices stay valid): a second trace tells which sizes follow those axes.
    Each dim name grows by its own amount (1, 2, ...), so sizes can be told apart."""
    import gputensor as gt
    growth: dict[str, int] = {}
    grown: dict[int, Any] = {}
    for t, name in zip(inputs, names, strict=True):
        g = t
        for a, dim_name in dyn.get(name, {}).items():
            if not -t.dim() <= a < t.dim():
                raise IndexError(f"gt.onnx.export: dynamic axis {a} of {name!r} is out of "
                                 f"range for its shape {tuple(t.shape)}")
            a %= t.dim()
            n = t.shape[a]
            if n == 0:
                raise OnnxExporterError(f"gt.onnx.export: dynamic axis {a} of {name!r} has "
                                        "size 0 in the example input")
            more = growth.setdefault(dim_name, len(growth) + 1)
            g = g.index_select(a, gt.arange(n + more, device=t.device) % n)
        grown[id(t)] = g

    def swap(x: Any) -> Any:
        if isinstance(x, gt.Tensor):
            return grown.get(id(x), x)
        if isinstance(x, list | tuple):
            return type(x)(swap(i) for i in x)
        if isinstance(x, dict):
            return {k: swap(v) for k, v in x.items()}
        return x
    return swap(args), swap(kwargs)


def _check_same_program(a: list[Call], b: list[Call]) -> None:
    if [c.op for c in a] != [c.op for c in b]:
        raise OnnxExporterError(
            "gt.onnx.export: the model runs different operations when a dynamic axis changes "
            "size (shape-dependent control flow); it cannot be exported with these "
            "dynamic_axes")


# -- translation -----------------------------------------------------------------------------
def _translate(g: Graph, calls: list[Call], twins: list[Call] | None, fold: bool) -> None:
    import gputensor as gt
    for k, c in enumerate(calls):
        twin = twins[k] if twins is not None else None
        tensors = _flat_tensors((c.args, c.kwargs))
        live = [t for t in tensors if g.is_value(t)]
        if not live and c.op not in _symbolic.RANDOM and not _follows_axis(c, twin) and \
                (fold or not tensors or c.op not in _symbolic.TRANSLATIONS):
            # A constant of the trace (a factory's result, or folded from constants): an
            # initializer where it is read.
            continue
        tr = _symbolic.TRANSLATIONS.get(c.op)
        if tr is None:
            raise UnsupportedOperatorError(c.op, g.opset)
        g.versions = c.versions
        if twin is not None:
            _pair_twins(g, c, twin)
        names = tr(g, c, twin)
        results = list(c.result) if isinstance(c.result, tuple | list) else [c.result]
        names = names if isinstance(names, list) else [names]
        twin_results = (list(twin.result) if isinstance(twin.result, tuple | list)
                        else [twin.result]) if twin is not None else [None] * len(results)
        for t, name, tt in zip(results, names, twin_results, strict=True):
            if name is None or not isinstance(t, gt.Tensor):
                if isinstance(t, gt.Tensor):
                    g.bind(t, "")   # produced but not exported: reading it raises
                continue
            g.bind(t, name, _symbolic._out_dims(t, tt), c.out_versions.get(id(t)), tt)


def _follows_axis(c: Call, twin: Call | None) -> bool:
    """Whether a result's shape changes with a dynamic axis (``expand(x.shape[0], ...)`` of
    a parameter): then it is computed in the graph, not folded."""
    if twin is None:
        return False
    return [tuple(t.shape) for t in _flat_tensors(c.result)] != \
        [tuple(t.shape) for t in _flat_tensors(twin.result)]


def _pair_twins(g: Graph, c: Call, twin: Call) -> None:
    """Match the call's arguments with the second trace's: constants are checked against
    their twins where they are read, and plain values must be equal unless the op's
    translation reads sizes from both traces."""
    import gputensor as gt

    def walk(x: Any, y: Any) -> None:
        if isinstance(x, gt.Tensor):
            if isinstance(y, gt.Tensor):
                g.twins[id(x)] = y
            return
        if isinstance(x, list | tuple) and isinstance(y, list | tuple) and len(x) == len(y):
            for i, j in zip(x, y, strict=True):
                walk(i, j)
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for key in x:
                walk(x[key], y.get(key))
            return
        if x != y and c.op not in _symbolic.SHAPE_OPS:
            raise OnnxExporterError(
                f"gt.onnx.export: the argument {x!r} of {c.op} changes with a dynamic axis "
                f"(it is {y!r} when the axis grows by one); it cannot be exported with these "
                "dynamic_axes")
    walk(c.args, twin.args)
    walk(c.kwargs, twin.kwargs)


def _value_info(name: str, t: Any, dynamic: dict[int, str]) -> Any:
    from onnx import helper
    shape = [dynamic.get(i, s) for i, s in enumerate(t.shape)]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np_dtype(t)),
                                         shape)
