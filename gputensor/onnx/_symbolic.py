"""Each traced gputensor op as ONNX nodes (torch.onnx's symbolic functions).

A translation takes the graph, the recorded call and its twin from the second trace (None
without dynamic axes) and returns the ONNX name of each result (None for a result it does not
produce, such as layer_norm's saved statistics: reading one later is an error). Arguments are
read by position as the op frontends receive them (gputensor/_ops/*.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._graph import Graph, np_dtype
from ._trace import Call
from .errors import OnnxExporterError

Translation = Callable[[Graph, Call, Any], Any]
TRANSLATIONS: dict[str, Translation] = {}

# Ops whose integer arguments may follow a dynamic axis: their translations read sizes from
# the two traces instead of baking them.
SHAPE_OPS = {"reshape", "view", "expand", "_max_pool2d"}
# Random ops: never constants of the trace (the graph would replay one draw).
RANDOM = {"bernoulli", "multinomial", "normal", "poisson", "rand", "rand_like", "randint",
          "randint_like", "randn", "randn_like", "randperm", "_masked_scale"}


def _register(*names: str) -> Callable[[Translation], Translation]:
    def deco(fn: Translation) -> Translation:
        for n in names:
            TRANSLATIONS[n] = fn
        return fn
    return deco


def _arg(c: Call, i: int, name: str, default: Any = None) -> Any:
    if name in c.kwargs:
        return c.kwargs[name]
    return c.args[i] if len(c.args) > i else default


def _pair(x: Any) -> list[int]:
    return [int(x), int(x)] if isinstance(x, int) else [int(v) for v in x]


def _dims(x: Any, ndim: int) -> list[int]:
    dims = [x] if isinstance(x, int) else list(x)
    return [d % ndim if ndim else 0 for d in dims]


def _sizes(args: tuple) -> list[int]:
    """``view(2, 3)`` or ``view((2, 3))``."""
    return list(args[0]) if len(args) == 1 and not isinstance(args[0], int) else list(args)


# -- elementwise ----------------------------------------------------------------------------
def _first_tensor(c: Call) -> Any:
    import gputensor as gt
    return next(a for a in c.args if isinstance(a, gt.Tensor))


def _unary(onnx_op: str) -> Translation:
    return lambda g, c, t: g.node(onnx_op, [g.v(c.args[0])])


for _name, _op in {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp",
                   "log": "Log", "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs", "erf": "Erf",
                   "sin": "Sin", "cos": "Cos", "reciprocal": "Reciprocal", "floor": "Floor",
                   "ceil": "Ceil", "sign": "Sign", "logical_not": "Not",
                   "contiguous": "Identity", "clone": "Identity", "detach": "Identity",
                   "alias": "Identity"}.items():
    TRANSLATIONS[_name] = _unary(_op)


def _binary(onnx_op: str) -> Translation:
    def tr(g: Graph, c: Call, t: Any) -> str:
        like = _first_tensor(c)
        a, b = g.v(c.args[0], like), g.v(c.args[1], like)
        return g.node(onnx_op, [a, b])
    return tr


for _name, _op in {"mul": "Mul", "true_divide": "Div", "pow": "Pow", "maximum": "Max",
                   "minimum": "Min", "gt": "Greater", "lt": "Less", "ge": "GreaterOrEqual",
                   "le": "LessOrEqual", "eq": "Equal", "logical_and": "And",
                   "logical_or": "Or"}.items():
    TRANSLATIONS[_name] = _binary(_op)


@_register("ne")
def _ne(g: Graph, c: Call, t: Any) -> str:
    return g.node("Not", [_binary("Equal")(g, c, t)])


@_register("div")
def _div(g: Graph, c: Call, t: Any) -> str:
    mode = _arg(c, 2, "rounding_mode")
    q = _binary("Div")(g, c, t)
    if mode is None:
        return q
    if mode == "floor" and c.result.dtype.is_floating_point:
        return g.node("Floor", [q])
    raise OnnxExporterError(f"gt.onnx.export: div(rounding_mode={mode!r}) on "
                            f"{c.result.dtype} has no translation")


@_register("add", "sub")
def _add(g: Graph, c: Call, t: Any) -> str:
    like = _first_tensor(c)
    a, b = g.v(c.args[0], like), g.v(c.args[1], like)
    alpha = _arg(c, 2, "alpha", 1)
    if alpha != 1:
        b = g.node("Mul", [b, g.v(alpha, like)])
    return g.node("Add" if c.op == "add" else "Sub", [a, b])


@_register("_masked_scale")
def _masked_scale(g: Graph, c: Call, t: Any) -> str:
    raise OnnxExporterError("gt.onnx.export: dropout in training mode (a random mask drawn "
                            "once by the trace) cannot be exported; export with "
                            "training=TrainingMode.EVAL")


@_register("rsqrt")
def _rsqrt(g: Graph, c: Call, t: Any) -> str:
    return g.node("Reciprocal", [g.node("Sqrt", [g.v(c.args[0])])])


@_register("silu")
def _silu(g: Graph, c: Call, t: Any) -> str:
    x = g.v(c.args[0])
    return g.node("Mul", [x, g.node("Sigmoid", [x])])


@_register("gelu")
def _gelu(g: Graph, c: Call, t: Any) -> str:
    x0 = c.args[0]
    x = g.v(x0)
    approximate = _arg(c, 1, "approximate", 0)
    tanh = approximate in (1, "tanh")
    if g.opset >= 20:
        return g.node("Gelu", [x], approximate="tanh" if tanh else "none")
    half = g.node("Mul", [x, g.v(0.5, x0)])
    if tanh:   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = g.node("Mul", [g.node("Mul", [x, x]), x])
        inner = g.node("Add", [x, g.node("Mul", [cube, g.v(0.044715, x0)])])
        act = g.node("Tanh", [g.node("Mul", [inner, g.v(math.sqrt(2 / math.pi), x0)])])
    else:      # 0.5 x (1 + erf(x / sqrt 2))
        act = g.node("Erf", [g.node("Div", [x, g.v(math.sqrt(2.0), x0)])])
    return g.node("Mul", [half, g.node("Add", [act, g.v(1.0, x0)])])


@_register("leaky_relu")
def _leaky_relu(g: Graph, c: Call, t: Any) -> str:
    return g.node("LeakyRelu", [g.v(c.args[0])], alpha=float(_arg(c, 1, "negative_slope", 0.01)))


@_register("_clamp")
def _clamp(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    lo, hi = (c.args[1] if len(c.args) > 1 else None), (c.args[2] if len(c.args) > 2 else None)
    return g.node("Clip", [g.v(x), "" if lo is None else g.v(lo, x),
                           "" if hi is None else g.v(hi, x)])


@_register("_where")
def _where(g: Graph, c: Call, t: Any) -> str:
    like = c.result
    return g.node("Where", [g.v(c.args[0]), g.v(c.args[1], like), g.v(c.args[2], like)])


@_register("masked_fill")
def _masked_fill(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    return g.node("Where", [g.v(c.args[1]), g.v(c.args[2], x), g.v(x)])


@_register("_lerp")
def _lerp(g: Graph, c: Call, t: Any) -> str:
    like = c.result
    a, b, w = (g.v(v, like) for v in c.args[:3])
    return g.node("Add", [a, g.node("Mul", [w, g.node("Sub", [b, a])])])


@_register("_scale_shift")
def _scale_shift(g: Graph, c: Call, t: Any) -> str:
    a, b, s = (g.v(v) for v in c.args[:3])
    return g.node("Add", [g.node("Mul", [a, b]), s])


@_register("tril", "triu")
def _trilu(g: Graph, c: Call, t: Any) -> str:
    k = int(_arg(c, 1, "diagonal", 0))
    return g.node("Trilu", [g.v(c.args[0]), _scalar_int(g, k)],
                  upper=int(c.op == "triu"))


def _scalar_int(g: Graph, k: int) -> str:
    return g.const(np.asarray(k, dtype=np.int64), "k")


# -- linear algebra -------------------------------------------------------------------------
@_register("matmul", "mm", "bmm")
def _matmul(g: Graph, c: Call, t: Any) -> str:
    return g.node("MatMul", [g.v(c.args[0]), g.v(c.args[1])])


@_register("linear")
def _linear(g: Graph, c: Call, t: Any) -> str:
    x, w = c.args[0], c.args[1]
    b = _arg(c, 2, "bias")
    if x.dim() == 2:
        return g.node("Gemm", [g.v(x), g.v(w)] + ([g.v(b)] if b is not None else []), transB=1)
    y = g.node("MatMul", [g.v(x), g.node("Transpose", [g.v(w)], perm=[1, 0])])
    return y if b is None else g.node("Add", [y, g.v(b)])


@_register("addmm")
def _addmm(g: Graph, c: Call, t: Any) -> str:
    beta, alpha = c.kwargs.get("beta", 1), c.kwargs.get("alpha", 1)
    return g.node("Gemm", [g.v(c.args[1]), g.v(c.args[2]), g.v(c.args[0])],
                  alpha=float(alpha), beta=float(beta))


@_register("t")
def _t(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    return g.node("Transpose", [g.v(x)], perm=[1, 0]) if x.dim() == 2 else \
        g.node("Identity", [g.v(x)])


# -- shapes ---------------------------------------------------------------------------------
@_register("transpose", "swapaxes", "swapdims")
def _transpose(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    n = x.dim()
    d0, d1 = (int(d) % n for d in (c.args[1], c.args[2]))
    perm = list(range(n))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return g.node("Transpose", [g.v(x)], perm=perm)


@_register("permute")
def _permute(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    return g.node("Transpose", [g.v(x)], perm=_dims(_sizes(c.args[1:]) or c.kwargs["dims"],
                                                       x.dim()))


def _target_shape(g: Graph, x: Any, out: Any, twin_x: Any, twin_out: Any) -> str:
    """Reshape's shape input. Sizes that follow dynamic axes are 0 (copy the input's dim at
    that index) when they are that dim in both traces, else read from a graph value that has
    such a dim (its ``Shape``), else the one -1."""
    shape = list(out.shape)
    if twin_out is None:
        return g.ints(shape)
    pieces: list[Any] = []   # ints, or names of 1-D int64 values
    free = []
    for i, (a, b) in enumerate(zip(out.shape, twin_out.shape, strict=True)):
        if a == b:
            pieces.append(a)
        elif i < x.dim() and x.shape[i] == a and twin_x.shape[i] == b:
            pieces.append(0)
        else:
            found = g.size_of(a, b)
            if found is None:
                free.append(i)
            pieces.append(-1 if found is None else found)
    if len(free) > 1:
        raise OnnxExporterError(
            f"gt.onnx.export: a reshape to {tuple(shape)} has several sizes that follow "
            "dynamic axes and are not sizes of any input; it cannot be exported with these "
            "dynamic_axes")
    return _shape_value(g, pieces)


def _out_dims(out: Any, twin_out: Any) -> tuple:
    if twin_out is None:
        return tuple(out.shape)
    return tuple(a if a == b else None for a, b in zip(out.shape, twin_out.shape, strict=True))


@_register("reshape", "view", "_unsafe_view")
def _reshape(g: Graph, c: Call, t: Any) -> str:
    shape = _target_shape(g, c.args[0], c.result, t.args[0] if t else None,
                          t.result if t else None)
    return g.node("Reshape", [g.v(c.args[0]), shape])


@_register("expand")
def _expand(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    if t is None:
        return g.node("Expand", [g.v(x), g.ints(list(c.result.shape))])
    # Expand broadcasts: a 1 keeps the input's dim, which serves where the input already has
    # the dynamic size; a size-1 dim grown to a dynamic size reads it from a graph value.
    lead = c.result.dim() - x.dim()
    pieces: list[Any] = []
    for i, (a, b) in enumerate(zip(c.result.shape, t.result.shape, strict=True)):
        j = i - lead
        if a == b:
            pieces.append(a)
        elif j >= 0 and x.shape[j] == a and t.args[0].shape[j] == b:
            pieces.append(1)
        else:
            found = g.size_of(a, b)
            if found is None:
                raise OnnxExporterError(
                    f"gt.onnx.export: expand to {tuple(c.result.shape)}: dim {i} follows a "
                    "dynamic axis but is no size of any input; it cannot be exported with "
                    "these dynamic_axes")
            pieces.append(found)
    return g.node("Expand", [g.v(x), _shape_value(g, pieces)])


def _shape_value(g: Graph, pieces: list) -> str:
    """A 1-D int64 shape from ints and names of 1-D int64 values."""
    if all(isinstance(p, int) for p in pieces):
        return g.ints(pieces)
    return g.node("Concat", [g.ints([p]) if isinstance(p, int) else p for p in pieces], axis=0)


@_register("flatten")
def _flatten(g: Graph, c: Call, t: Any) -> str:
    return _reshape(g, c, t)


@_register("unsqueeze")
def _unsqueeze(g: Graph, c: Call, t: Any) -> str:
    d = int(c.args[1]) % (c.args[0].dim() + 1)
    return g.node("Unsqueeze", [g.v(c.args[0]), g.ints([d])])


@_register("squeeze")
def _squeeze(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    dim = _arg(c, 1, "dim")
    dims = [i for i, s in enumerate(x.shape) if s == 1] if dim is None else \
        [d for d in _dims(dim, x.dim()) if x.shape[d] == 1]
    if not dims:
        return g.node("Identity", [g.v(x)])
    return g.node("Squeeze", [g.v(x), g.ints(dims)])


@_register("cat", "concat", "concatenate")
def _cat(g: Graph, c: Call, t: Any) -> str:
    ts = [x for x in c.args[0] if not (x.dim() == 1 and x.shape[0] == 0)]
    dim = int(_arg(c, 1, "dim", 0)) % c.result.dim()
    return g.node("Concat", [g.v(x) for x in ts], axis=dim)


@_register("stack")
def _stack(g: Graph, c: Call, t: Any) -> str:
    dim = int(_arg(c, 1, "dim", 0)) % c.result.dim()
    axes = g.ints([dim])
    return g.node("Concat", [g.node("Unsqueeze", [g.v(x), axes]) for x in c.args[0]], axis=dim)


@_register("split_with_sizes", "split")
def _split(g: Graph, c: Call, t: Any) -> list[str]:
    x = c.args[0]
    dim = int(_arg(c, 2, "dim", 0)) % x.dim()
    sizes = [int(r.shape[dim]) for r in c.result]
    out = g.node("Split", [g.v(x), g.ints(sizes)], outputs=len(sizes), axis=dim)
    return [out] if len(sizes) == 1 else out


@_register("unbind")
def _unbind(g: Graph, c: Call, t: Any) -> list[str]:
    x = c.args[0]
    dim = int(_arg(c, 1, "dim", 0)) % x.dim()
    n = x.shape[dim]
    parts = g.node("Split", [g.v(x), g.ints([1] * n)], outputs=n, axis=dim)
    parts = [parts] if n == 1 else parts
    axes = g.ints([dim])
    return [g.node("Squeeze", [p, axes]) for p in parts]


@_register("narrow")
def _narrow(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    dim = int(c.args[1]) % x.dim()
    start = int(c.args[2]) % max(x.shape[dim], 1) if int(c.args[2]) < 0 else int(c.args[2])
    return g.node("Slice", [g.v(x), g.ints([start]), g.ints([start + int(c.args[3])]),
                            g.ints([dim])])


@_register("__getitem__")
def _getitem(g: Graph, c: Call, t: Any) -> str:
    import gputensor as gt
    x, index = c.args[0], c.args[1]
    items = list(index) if isinstance(index, tuple) else [index]

    def is_array(i: Any) -> bool:   # an index tensor, or a list of ints (x[:, [-1]])
        return isinstance(i, gt.Tensor) or (
            isinstance(i, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                        for v in i))
    if any(is_array(i) for i in items):
        arrays = [i for i in items if is_array(i)]
        pos = next(k for k, i in enumerate(items) if is_array(i))
        rest = [i for k, i in enumerate(items) if k != pos]
        a = arrays[0]
        if len(arrays) == 1 and (isinstance(a, list) or a.dtype in (gt.int64, gt.int32)) and \
                all(i == slice(None) for i in rest) and Ellipsis not in items[:pos]:
            idx = g.const(np.asarray(a, dtype=np.int64), "index") if isinstance(a, list) \
                else g.v(a)
            return g.node("Gather", [g.v(x), idx], axis=pos)
        raise OnnxExporterError(
            "gt.onnx.export: indexing with this index (boolean masks, several index tensors) "
            f"has no translation: {index!r}")
    if Ellipsis in items:
        k = items.index(Ellipsis)
        explicit = sum(1 for i in items if i is not None and i is not Ellipsis)
        items[k:k + 1] = [slice(None)] * (x.dim() - explicit)
    name, dim = g.v(x), 0
    starts, ends, axes, steps, squeeze, unsq = [], [], [], [], [], []
    out_dim = 0
    for i in items:
        if i is None:
            unsq.append(out_dim)
            out_dim += 1
            continue
        if isinstance(i, bool) or not isinstance(i, int | slice):
            raise OnnxExporterError(f"gt.onnx.export: indexing with {i!r} has no translation")
        if isinstance(i, int):
            starts.append(i)
            ends.append(i + 1 if i != -1 else np.iinfo(np.int64).max)
            axes.append(dim)
            steps.append(1)
            squeeze.append(dim)
        else:
            if i != slice(None):
                step = 1 if i.step is None else int(i.step)
                starts.append(0 if i.start is None else int(i.start))
                ends.append(np.iinfo(np.int64).max if i.stop is None else int(i.stop))
                axes.append(dim)
                steps.append(step)
            out_dim += 1
        dim += 1
    if axes:
        name = g.node("Slice", [name, g.ints(starts), g.ints(ends), g.ints(axes),
                                g.ints(steps)])
    if squeeze:
        name = g.node("Squeeze", [name, g.ints(squeeze)])
    if unsq:
        name = g.node("Unsqueeze", [name, g.ints(unsq)])
    if not (axes or squeeze or unsq):
        name = g.node("Identity", [name])
    return name


@_register("index_select")
def _index_select(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    return g.node("Gather", [g.v(x), g.v(c.args[2])], axis=int(c.args[1]) % max(x.dim(), 1))


@_register("_embedding")
def _embedding(g: Graph, c: Call, t: Any) -> str:
    return g.node("Gather", [g.v(c.args[0]), g.v(c.args[1])], axis=0)


# -- reductions -----------------------------------------------------------------------------
def _reduce(g: Graph, onnx_op: str, x: Any, dim: Any, keepdim: bool) -> str:
    axes = list(range(x.dim())) if dim is None or dim == () or dim == [] else \
        _dims(dim, x.dim())
    if onnx_op == "ReduceSum" or g.opset >= 18:
        return g.node(onnx_op, [g.v(x), g.ints(axes)], keepdims=int(bool(keepdim)))
    return g.node(onnx_op, [g.v(x)], axes=axes, keepdims=int(bool(keepdim)))


def _reduction(onnx_op: str) -> Translation:
    def tr(g: Graph, c: Call, t: Any) -> str:
        if c.kwargs.get("dtype") is not None or (len(c.args) > 3 and c.args[3] is not None):
            raise OnnxExporterError(f"gt.onnx.export: {c.op}(dtype=...) has no translation")
        return _reduce(g, onnx_op, c.args[0], _arg(c, 1, "dim"), _arg(c, 2, "keepdim", False))
    return tr


for _name, _op in {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax",
                   "amin": "ReduceMin"}.items():
    TRANSLATIONS[_name] = _reduction(_op)


@_register("softmax", "log_softmax")
def _softmax(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    if _arg(c, 2, "dtype") is not None:
        x_name = g.node("Cast", [g.v(x)], to=_onnx_type(c.result))
    else:
        x_name = g.v(x)
    axis = int(_arg(c, 1, "dim")) % max(x.dim(), 1)
    return g.node("Softmax" if c.op == "softmax" else "LogSoftmax", [x_name], axis=axis)


def _onnx_type(t: Any) -> int:
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np_dtype(t))


# -- normalisation --------------------------------------------------------------------------
def _affine(g: Graph, tensors: list, shape: tuple, like: Any) -> tuple[str, str]:
    w = g.v(tensors[1]) if len(tensors) > 1 and tensors[1] is not None else \
        g.const(np.ones(shape, np_dtype(like)), "ones")
    b = g.v(tensors[2]) if len(tensors) > 2 and tensors[2] is not None else \
        g.const(np.zeros(shape, np_dtype(like)), "zeros")
    return w, b


@_register("_layer_norm")
def _layer_norm(g: Graph, c: Call, t: Any) -> list:
    tensors, ndim, eps = c.args[0], int(c.args[1]), float(c.args[2])
    x = tensors[0]
    w, b = _affine(g, tensors, tuple(x.shape[x.dim() - ndim:]), x)
    y = g.node("LayerNormalization", [g.v(x), w, b], axis=-ndim, epsilon=eps)
    return [y, None, None]


@_register("_group_norm")
def _group_norm(g: Graph, c: Call, t: Any) -> list:
    tensors, groups, eps = c.args[0], int(c.args[1]), float(c.args[2])
    x = tensors[0]
    xv = g.v(x)
    grouped = g.node("Reshape", [xv, g.ints([0, groups, -1])])
    mean = _reduce_name(g, "ReduceMean", grouped, [2])
    centred = g.node("Sub", [grouped, mean])
    var = _reduce_name(g, "ReduceMean", g.node("Mul", [centred, centred]), [2])
    std = g.node("Sqrt", [g.node("Add", [var, g.v(eps, x)])])
    normed = g.node("Reshape", [g.node("Div", [centred, std]), g.node("Shape", [xv])])
    shape = (x.shape[1],) + (1,) * (x.dim() - 2)
    w, b = _affine(g, tensors, (x.shape[1],), x)
    w = g.node("Reshape", [w, g.ints(shape)])
    b = g.node("Reshape", [b, g.ints(shape)])
    return [g.node("Add", [g.node("Mul", [normed, w]), b]), None, None]


def _reduce_name(g: Graph, onnx_op: str, x: str, axes: list[int]) -> str:
    if g.opset >= 18:
        return g.node(onnx_op, [x, g.ints(axes)], keepdims=1)
    return g.node(onnx_op, [x], axes=axes, keepdims=1)


# -- convolution and pooling ----------------------------------------------------------------
def _conv_pads(c: Call, padding: Any, kernel: list[int], dilation: list[int]) -> list[int]:
    if padding == "valid":
        return [0] * (2 * len(kernel))
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return [p // 2 for p in total] + [p - p // 2 for p in total]
    p = _pair(padding)
    return p + p


@_register("conv2d")
def _conv2d(g: Graph, c: Call, t: Any) -> str:
    x, w = c.args[0], c.args[1]
    b = _arg(c, 2, "bias")
    stride, dilation = _pair(_arg(c, 3, "stride", 1)), _pair(_arg(c, 5, "dilation", 1))
    kernel = [int(s) for s in w.shape[2:]]
    pads = _conv_pads(c, _arg(c, 4, "padding", 0), kernel, dilation)
    return g.node("Conv", [g.v(x), g.v(w)] + ([g.v(b)] if b is not None else []),
                  kernel_shape=kernel, strides=stride, pads=pads, dilations=dilation,
                  group=int(_arg(c, 6, "groups", 1)))


@_register("conv_transpose2d")
def _conv_transpose2d(g: Graph, c: Call, t: Any) -> str:
    x, w = c.args[0], c.args[1]
    b = _arg(c, 2, "bias")
    stride = _pair(_arg(c, 3, "stride", 1))
    pad = _pair(_arg(c, 4, "padding", 0))
    out_pad = _pair(_arg(c, 5, "output_padding", 0))
    groups = int(_arg(c, 6, "groups", 1))
    dilation = _pair(_arg(c, 7, "dilation", 1))
    return g.node("ConvTranspose", [g.v(x), g.v(w)] + ([g.v(b)] if b is not None else []),
                  kernel_shape=[int(s) for s in w.shape[2:]], strides=stride, pads=pad + pad,
                  output_padding=out_pad, dilations=dilation, group=groups)


def _pool_geometry(c: Call, first: int) -> dict[str, Any]:
    """kernel_size, stride (default: the kernel), padding at ``args[first:first + 3]``."""
    kernel = _pair(_arg(c, first, "kernel_size"))
    stride = _arg(c, first + 1, "stride")
    stride = kernel if stride is None or stride == [] or stride == () else _pair(stride)
    pad = _pair(_arg(c, first + 2, "padding", 0))
    return {"kernel_shape": kernel, "strides": stride, "pads": pad + pad}


@_register("_max_pool2d")
def _max_pool2d(g: Graph, c: Call, t: Any) -> str:
    # args[1] is the indices buffer the frontend fills; the graph computes values only.
    return g.node("MaxPool", [g.v(c.args[0])], **_pool_geometry(c, 2),
                  dilations=_pair(_arg(c, 5, "dilation", 1)),
                  ceil_mode=int(bool(_arg(c, 6, "ceil_mode", False))))


@_register("avg_pool2d")
def _avg_pool2d(g: Graph, c: Call, t: Any) -> str:
    if _arg(c, 6, "divisor_override") is not None:
        raise OnnxExporterError("gt.onnx.export: avg_pool2d(divisor_override=...) has no "
                                "ONNX translation")
    return g.node("AveragePool", [g.v(c.args[0])], **_pool_geometry(c, 1),
                  ceil_mode=int(bool(_arg(c, 4, "ceil_mode", False))),
                  count_include_pad=int(bool(_arg(c, 5, "count_include_pad", True))))


@_register("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    out_hw = [int(s) for s in c.result.shape[-2:]]
    in_hw = [int(s) for s in x.shape[-2:]]
    if out_hw == [1, 1]:
        return g.node("GlobalAveragePool", [g.v(x)])
    if all(i % o == 0 for i, o in zip(in_hw, out_hw, strict=True)):
        k = [i // o for i, o in zip(in_hw, out_hw, strict=True)]
        return g.node("AveragePool", [g.v(x)], kernel_shape=k, strides=k)
    raise OnnxExporterError(
        f"gt.onnx.export: adaptive_avg_pool2d from {tuple(in_hw)} to {tuple(out_hw)} (sizes "
        "that do not divide) has no ONNX translation")


# -- more of what models use ----------------------------------------------------------------
@_register("_to_copy")
def _to_copy(g: Graph, c: Call, t: Any) -> str:
    # The device argument has no meaning in the graph (the runtime places the tensors).
    x = c.args[0]
    if c.result.dtype == x.dtype:
        return g.node("Identity", [g.v(x)])
    return g.node("Cast", [g.v(x)], to=_onnx_type(c.result))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
              "circular": "wrap"}


@_register("pad")
def _pad(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    pad = [int(p) for p in _arg(c, 1, "pad")]
    mode = _arg(c, 2, "mode", "constant")
    if mode == "circular" and g.opset < 19:
        raise OnnxExporterError("gt.onnx.export: pad(mode='circular') needs opset_version 19 "
                                "or later (ONNX Pad's 'wrap' mode)")
    n = x.dim()
    begins, ends = [0] * n, [0] * n
    for k in range(len(pad) // 2):   # pad's pairs run from the last dim backwards
        begins[n - 1 - k], ends[n - 1 - k] = pad[2 * k], pad[2 * k + 1]
    inputs = [g.v(x), g.ints(begins + ends)]
    value = _arg(c, 3, "value")
    if mode == "constant" and value:
        inputs.append(g.v(value, x))
    return g.node("Pad", inputs, mode=_PAD_MODES[mode])


@_register("hardtanh")
def _hardtanh(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    return g.node("Clip", [g.v(x), g.v(c.args[1], x), g.v(c.args[2], x)])


@_register("elu")
def _elu(g: Graph, c: Call, t: Any) -> str:
    x, alpha, scale, input_scale = c.args[:4]
    if scale != 1 or input_scale != 1:
        raise OnnxExporterError("gt.onnx.export: elu with scale or input_scale other than 1 "
                                "has no translation")
    return g.node("Elu", [g.v(x)], alpha=float(alpha))


@_register("softplus")
def _softplus(g: Graph, c: Call, t: Any) -> str:
    x, beta = c.args[0], c.args[1]
    # ONNX Softplus has no threshold: above it PyTorch returns x, which log1p(exp(x)) equals
    # to float precision there (torch.onnx exports it the same way).
    if beta == 1:
        return g.node("Softplus", [g.v(x)])
    scaled = g.node("Mul", [g.v(x), g.v(beta, x)])
    return g.node("Div", [g.node("Softplus", [scaled]), g.v(beta, x)])


@_register("_square")
def _square(g: Graph, c: Call, t: Any) -> str:
    x = g.v(c.args[0])
    return g.node("Mul", [x, x])


@_register("max", "min")
def _max(g: Graph, c: Call, t: Any) -> Any:
    import gputensor as gt
    x = c.args[0]
    other = _arg(c, 3, "other")
    dim = _arg(c, 1, "dim")
    if isinstance(dim, gt.Tensor):
        other, dim = dim, None
    if other is not None:
        return g.node("Max" if c.op == "max" else "Min", [g.v(x), g.v(other, x)])
    reduce = "ReduceMax" if c.op == "max" else "ReduceMin"
    if dim is None:
        return _reduce(g, reduce, x, None, False)
    keep = bool(_arg(c, 2, "keepdim", False))
    d = int(dim) % max(x.dim(), 1)
    values = _reduce(g, reduce, x, d, keep)
    indices = g.node("ArgMax" if c.op == "max" else "ArgMin", [g.v(x)], axis=d,
                     keepdims=int(keep), select_last_index=0)
    return [values, indices]


@_register("repeat")
def _repeat(g: Graph, c: Call, t: Any) -> str:
    x = c.args[0]
    reps = [int(r) for r in _sizes(c.args[1:])]
    name = g.v(x)
    if len(reps) > x.dim():   # repeat prepends dims first
        name = g.node("Reshape", [name, g.ints([1] * (len(reps) - x.dim()) + list(x.shape))])
    return g.node("Tile", [name, g.ints(reps)])


@_register("norm")
def _norm(g: Graph, c: Call, t: Any) -> str:
    p = _arg(c, 1, "p", "fro")
    if p not in ("fro", 2, 2.0, 1, 1.0) or _arg(c, 5, "dtype") is not None:
        raise OnnxExporterError(f"gt.onnx.export: norm(p={p!r}) has no translation")
    op = "ReduceL1" if p in (1, 1.0) else "ReduceL2"
    x = c.args[0]
    return _reduce(g, op, x, _arg(c, 2, "dim"), _arg(c, 3, "keepdim", False))


@_register("prod")
def _prod(g: Graph, c: Call, t: Any) -> str:
    if c.kwargs.get("dtype") is not None:
        raise OnnxExporterError("gt.onnx.export: prod(dtype=...) has no translation")
    return _reduce(g, "ReduceProd", c.args[0], _arg(c, 1, "dim"), _arg(c, 2, "keepdim", False))


@_register("cumsum")
def _cumsum(g: Graph, c: Call, t: Any) -> str:
    if c.kwargs.get("dtype") is not None:
        raise OnnxExporterError("gt.onnx.export: cumsum(dtype=...) has no translation")
    x = c.args[0]
    axis = g.const(np.asarray(int(c.args[1]) % max(x.dim(), 1), dtype=np.int64), "axis")
    return g.node("CumSum", [g.v(x), axis])
