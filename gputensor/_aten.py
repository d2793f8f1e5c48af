"""``gt.ops.aten``: PyTorch's aten op objects (``OpOverloadPacket``/``OpOverload``) for the ops
of the registry, and the op the dispatcher reports for each call (gputensor/_op_hook.py).

``gt.ops.aten.<name>`` is a packet and ``gt.ops.aten.<name>.<overload>`` an overload, each one
object for the life of the process (so ``op in [gt.ops.aten.mm.default]`` compares identity)
and callable: every overload of a packet calls the same gputensor function, whose frontend
already takes every argument form of the overloads. The names are aten's:

- every registry op (``kernels/registry.py`` ``OPS``) under its own name, since most are
  aten's; those whose aten counterpart has no ``default`` overload expose aten's overload
  names (``add.Tensor``/``add.Scalar``, ``sum.dim_IntList``, ``transpose.int``, ...);
- aten ops that a registry op computes under another name (``_softmax`` for ``softmax``,
  ``convolution`` for the conv ops, ``native_layer_norm`` for ``_layer_norm``,
  ``native_dropout`` for dropout's ``_masked_scale``, ``embedding``, ``slice``/``index``), and
  the composite entry points ``layer_norm``/``dropout`` and the metadata queries of
  ``SAC_IGNORED_OPS``, each an adapter with aten's signature.

What the dispatcher reports (``reported_op``) is what ``TorchDispatchMode`` sees in PyTorch
below autograd, where the ops of a call are one registry op: the renamed ops above, and the
products PyTorch decomposes (``matmul`` reports ``dot``/``mv``/``mm``/``bmm`` by the operands'
dims, folding a >= 3-D operand against a 1-D/2-D one into ``mm``/``mv`` as PyTorch does;
``linear`` reports ``addmm`` with a bias and ``mm`` without; indexing reports ``select.int``
for one integer, ``slice.Tensor`` for one slice, else ``index.Tensor``; ``reshape`` reports
``view`` for a contiguous input, else ``_unsafe_view``). The overload follows
the call (``eq.Scalar`` for a Python number operand, ``sum.dim_IntList`` with a ``dim``).
PyTorch's view bookkeeping around a decomposed product (``t``, ``view``, ``_unsafe_view``)
has no counterpart, so it is not reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gputensor._tensor import Tensor
from gputensor.kernels.registry import OPS

__all__ = ["OpOverload", "OpOverloadPacket", "aten", "reported_op"]


class OpOverload:
    """One overload of an aten op (``torch._ops.OpOverload``): ``aten.mm.default``."""

    def __init__(self, packet: OpOverloadPacket, overload: str) -> None:
        self.overloadpacket = packet
        self._overloadname = overload
        self._opname = packet.__name__
        self.namespace = "aten"
        self.__name__ = f"{packet.__name__}.{overload}"
        self.__qualname__ = self.__name__
        self.__module__ = "gputensor.ops.aten"

    @property
    def op(self) -> Callable[..., Any]:
        """The gputensor function the overload calls."""
        return self.overloadpacket.op

    def name(self) -> str:
        """``aten::mm`` for a default overload, else ``aten::add.Tensor``."""
        base = f"aten::{self._opname}"
        return base if self._overloadname == "default" else f"{base}.{self._overloadname}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.overloadpacket.op(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverload(op='aten.{self._opname}', overload='{self._overloadname}')>"

    def __str__(self) -> str:
        return f"aten.{self.__name__}"


class OpOverloadPacket:
    """All overloads of one aten op (``torch._ops.OpOverloadPacket``): ``aten.mm``."""

    def __init__(self, name: str, fn: Callable[..., Any], overloads: Sequence[str]) -> None:
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = "gputensor.ops.aten"
        self._qualified_op_name = f"aten::{name}"
        self.op = fn
        self._overloads = {o: OpOverload(self, o) for o in overloads}

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        try:
            return self.__dict__["_overloads"][overload]
        except KeyError:
            raise AttributeError(f"The underlying op of 'aten.{self.__name__}' has no overload "
                                 f"name '{overload}'") from None

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._overloads))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.op(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='aten.{self.__name__}')>"

    def __str__(self) -> str:
        return f"aten.{self.__name__}"


# -- aten ops computed by a registry op of another name, with aten's signature ----------------
def _softmax(self: Tensor, dim: int, half_to_float: bool) -> Tensor:
    import gputensor as gt
    return gt.softmax(self, dim, gt.float32 if half_to_float else None)


def _log_softmax(self: Tensor, dim: int, half_to_float: bool) -> Tensor:
    import gputensor as gt
    return gt.log_softmax(self, dim, gt.float32 if half_to_float else None)


def _convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                 output_padding: Sequence[int], groups: int) -> Tensor:
    import gputensor as gt
    n = weight.dim() - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a 3-D, 4-D or 5-D weight, but got weight of "
                           f"size {list(weight.shape)}")
    if transposed:
        return getattr(gt, f"conv_transpose{n}d")(input, weight, bias, stride, padding,
                                                  output_padding, groups, dilation)
    return getattr(gt, f"conv{n}d")(input, weight, bias, stride, padding, dilation, groups)


def _native_dropout(input: Tensor, p: float, train: bool | None) -> tuple[Tensor, Tensor]:
    import gputensor as gt
    from gputensor._ops import nn as nn_ops
    if train is False or p == 0:
        return input.clone(), gt.ones_like(input, dtype=gt.bool)
    keep = 1.0 - p
    mask = gt.empty(input.shape, dtype=input.dtype, device=input.device).bernoulli_(keep)
    out = nn_ops._masked_scale(input, mask, 0.0 if keep == 0 else 1.0 / keep)
    return out, mask.bool()


def _native_layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None,
                       bias: Tensor | None, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    from gputensor._ops import nn as nn_ops
    from gputensor.nn.functional import _norm
    k = len(normalized_shape)
    out = _norm.layer_norm(input, normalized_shape, weight, bias, eps)  # checks the arguments
    _, mean, rstd = nn_ops._layer_norm(_norm._affine(input.detach(), None, None, ()), k, eps)
    stat_shape = tuple(input.shape[:input.dim() - k]) + (1,) * k
    return out, mean.view(stat_shape), rstd.view(stat_shape)


def _layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
                bias: Tensor | None = None, eps: float = 1e-5, cudnn_enable: bool = True
                ) -> Tensor:
    # cudnn_enable picks a backend kernel in PyTorch; it changes no result.
    import gputensor.nn.functional as F
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def _dropout(input: Tensor, p: float, train: bool) -> Tensor:
    import gputensor.nn.functional as F
    return F.dropout(input, p, train)


def _embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    import gputensor.nn.functional as F
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _slice(self: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> Tensor:
    from gputensor._tensor import normalize_dim
    d = normalize_dim(dim, self.dim())
    return self[(slice(None),) * d + (slice(start, end, step),)]


def _index(self: Tensor, indices: Sequence[Tensor | None]) -> Tensor:
    return self[tuple(slice(None) if i is None else i for i in indices)]


def _unsafe_view(self: Tensor, size: Sequence[int]) -> Tensor:
    return self.reshape(size)


def _method(name: str) -> Callable[..., Any]:
    def call(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, name)(*args, **kwargs)
    call.__name__ = name
    return call


# aten name -> (function, overloads); the registry's op of the same name is the function when
# it is None.
_ADAPTERS: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "_softmax": (_softmax, ("default",)),
    "_log_softmax": (_log_softmax, ("default",)),
    "convolution": (_convolution, ("default",)),
    "native_dropout": (_native_dropout, ("default",)),
    "native_layer_norm": (_native_layer_norm, ("default",)),
    "layer_norm": (_layer_norm, ("default",)),
    "dropout": (_dropout, ("default",)),
    "embedding": (_embedding, ("default",)),
    "slice": (_slice, ("Tensor",)),
    "index": (_index, ("Tensor",)),
    "_unsafe_view": (_unsafe_view, ("default",)),
    **{name: (_method(name), ("default",)) for name in (
        "detach", "size", "stride", "dim", "numel", "storage_offset", "is_contiguous")},
}

# Registry ops whose aten packet has no ``default`` overload, or more than one that a call
# can pick: aten's overload names (the first is reported unless _OVERLOAD_RULES picks).
_TENSOR_SCALAR = ("Tensor", "Scalar")
_OVERLOADS: dict[str, tuple[str, ...]] = {
    **{n: _TENSOR_SCALAR for n in (
        "add", "sub", "mul", "rsub", "true_divide", "remainder", "fmod", "eq", "ne", "lt", "le",
        "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
        "bitwise_right_shift", "floor_divide", "xlogy", "copysign")},
    "div": ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode"),
    "pow": ("Tensor_Tensor", "Tensor_Scalar", "Scalar"),
    "sum": ("default", "dim_IntList"), "nansum": ("default",), "mean": ("default", "dim"),
    "max": ("default", "dim", "other"), "min": ("default", "dim", "other"),
    "squeeze": ("default", "dim", "dims"), "softmax": ("int",), "log_softmax": ("int",),
    "where": ("self", "ScalarOther", "ScalarSelf", "Scalar", "default"),
    "clamp": ("default", "Tensor"), "masked_fill": ("Scalar", "Tensor"),
    "var": ("default", "dim", "correction"), "std": ("default", "dim", "correction"),
    "transpose": ("int",), "select": ("int",), "unbind": ("int",), "split": ("Tensor", "sizes"),
    "view": ("default", "dtype"),
}

# Registry op -> the aten op PyTorch's dispatcher sees for it (same name when absent).
_REPORTED_AS: dict[str, str] = {
    "softmax": "_softmax", "log_softmax": "_log_softmax", "_layer_norm": "native_layer_norm",
    "_masked_scale": "native_dropout", "_embedding": "embedding", "true_divide": "div",
    "_where": "where", "_clamp": "clamp",
    **{f"conv{n}": "convolution" for n in ("1d", "2d", "3d", "_transpose1d",
                                           "_transpose2d", "_transpose3d")},
}

_PACKETS: dict[str, OpOverloadPacket] = {}


def _packet(name: str) -> OpOverloadPacket | None:
    packet = _PACKETS.get(name)
    if packet is not None:
        return packet
    if name in _ADAPTERS:
        fn, overloads = _ADAPTERS[name]
    elif name in OPS and name.isidentifier() and not name.startswith("__"):
        fn, overloads = OPS[name].frontend, _OVERLOADS.get(name, ("default",))
    else:
        return None
    packet = _PACKETS[name] = OpOverloadPacket(name, fn, overloads)
    return packet


class _AtenNamespace:
    """``gt.ops.aten`` (``torch.ops.aten``)."""

    def __getattr__(self, name: str) -> OpOverloadPacket:
        packet = None if name.startswith("__") else _packet(name)
        if packet is None:
            raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
        return packet

    def __dir__(self) -> list[str]:
        return sorted(set(_ADAPTERS) | {n for n in OPS if n.isidentifier()
                                        and not n.startswith("__")})

    def __repr__(self) -> str:
        return "<gputensor.ops.aten>"


aten = _AtenNamespace()


# -- what a call reports ------------------------------------------------------------------------
def _is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _matmul(args: tuple, kwargs: dict) -> tuple[str, str]:
    a, b = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "other")
    if not (_is_tensor(a) and _is_tensor(b)):
        return "matmul", "default"
    d1, d2 = a.dim(), b.dim()
    if d1 == 1 and d2 == 1:
        return "dot", "default"
    if d1 <= 2 and d2 <= 2:
        return ("mv" if d2 == 1 else "mm"), "default"
    if d1 >= 3 and d2 <= 2:   # folded into one product
        return ("mv" if d2 == 1 else "mm"), "default"
    if d1 == 1 or (d1 == 2 and a.requires_grad):   # folded against b transposed
        return ("mv" if d1 == 1 else "mm"), "default"
    return "bmm", "default"


def _linear(args: tuple, kwargs: dict) -> tuple[str, str]:
    return ("addmm" if _arg(args, kwargs, 2, "bias") is not None else "mm"), "default"


def _getitem(args: tuple, kwargs: dict) -> tuple[str, str]:
    index = _arg(args, kwargs, 1, "index")
    if isinstance(index, int) and not isinstance(index, bool):
        return "select", "int"
    if isinstance(index, slice):
        return "slice", "Tensor"
    return "index", "Tensor"


def _reshape(args: tuple, kwargs: dict) -> tuple[str, str]:
    # PyTorch views a contiguous input; otherwise it copies, then _unsafe_view.
    x = _arg(args, kwargs, 0, "input")
    return ("view" if not _is_tensor(x) or x.is_contiguous() else "_unsafe_view"), "default"


def _tensor_or_scalar(position: int, name: str) -> Callable[[tuple, dict], str]:
    return lambda args, kwargs: \
        "Tensor" if _is_tensor(_arg(args, kwargs, position, name)) else "Scalar"


def _with_dim(overload: str) -> Callable[[tuple, dict], str]:
    return lambda args, kwargs: \
        "default" if _arg(args, kwargs, 1, "dim") is None else overload


def _div(args: tuple, kwargs: dict) -> str:
    mode = _arg(args, kwargs, 2, "rounding_mode")
    return "Tensor_mode" if mode is not None else "Tensor"


def _pow(args: tuple, kwargs: dict) -> str:
    base, exponent = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "exponent")
    if not _is_tensor(base):
        return "Scalar"
    return "Tensor_Tensor" if _is_tensor(exponent) else "Tensor_Scalar"


def _squeeze(args: tuple, kwargs: dict) -> str:
    dim = _arg(args, kwargs, 1, "dim")
    return "default" if dim is None else "dim" if isinstance(dim, int) else "dims"


def _clamp(args: tuple, kwargs: dict) -> str:
    bounds = (_arg(args, kwargs, 1, "min"), _arg(args, kwargs, 2, "max"))
    return "Tensor" if any(_is_tensor(b) for b in bounds) else "default"


def _max_min(args: tuple, kwargs: dict) -> str:
    dim = _arg(args, kwargs, 1, "dim")
    return "default" if dim is None else "other" if _is_tensor(dim) else "dim"


def _where(args: tuple, kwargs: dict) -> str:
    x, y = _arg(args, kwargs, 1, "input"), _arg(args, kwargs, 2, "other")
    if x is None and y is None:
        return "default"
    return {(True, True): "self", (True, False): "ScalarOther", (False, True): "ScalarSelf",
            (False, False): "Scalar"}[_is_tensor(x), _is_tensor(y)]


# Registry op -> a rule picking the reported op from the call's arguments.
_OP_RULES: dict[str, Callable[[tuple, dict], tuple[str, str]]] = {
    "matmul": _matmul, "linear": _linear, "__getitem__": _getitem, "reshape": _reshape,
    "_div_floor": lambda a, k: ("div", "Tensor_mode"),
    "_div_trunc": lambda a, k: ("div", "Tensor_mode")}
# aten name -> a rule picking the reported overload.
_OVERLOAD_RULES: dict[str, Callable[[tuple, dict], str]] = {
    **{n: _tensor_or_scalar(1, "other") for n in (
        "eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "rsub", "bitwise_and",
        "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
        "floor_divide", "xlogy", "copysign")},
    "masked_fill": _tensor_or_scalar(2, "value"), "div": _div, "pow": _pow,
    "sum": _with_dim("dim_IntList"), "mean": _with_dim("dim"), "squeeze": _squeeze,
    "var": lambda a, k: "correction", "std": lambda a, k: "correction",
    "max": _max_min, "min": _max_min, "clamp": _clamp, "where": _where,
}

_STATIC: dict[str, OpOverload] = {}


def reported_op(op: Any, args: tuple, kwargs: dict) -> Any:
    """The aten overload a call of registry op ``op`` (a name) stands for; a custom op (a
    ``CustomOpDef``, its own ``.default``) is itself."""
    if not isinstance(op, str):
        return op
    cached = _STATIC.get(op)
    if cached is not None:
        return cached
    rule = _OP_RULES.get(op)
    if rule is not None:
        name, overload = rule(args, kwargs)
        return getattr(_packet(name), overload)
    name = _REPORTED_AS.get(op, op)
    packet = _packet(name)
    if packet is None:   # a registry name that is no identifier
        raise RuntimeError(f"op {op!r} has no aten name")
    overload_rule = _OVERLOAD_RULES.get(name)
    if overload_rule is not None:
        return getattr(packet, overload_rule(args, kwargs))
    result = getattr(packet, packet.overloads()[0])
    _STATIC[op] = result
    return result
