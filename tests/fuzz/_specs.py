"""The argument generators per op: ``SPECS[name](d) -> Call``.

Elementwise ops are built generically from their registry declaration (arity, params,
in-place form); every other op has a one-line generator naming its argument kinds (a tensor,
a dim, an index tensor, split sizes, ...) through the ``Drawer`` helpers, which draw
valid values most of the time and out-of-range ones now and then."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gputensor.kernels.registry import OPS

from ._gen import COMPLEX, DEV, DT, DTYPES, FLOATS, INTS, NUMERIC, REAL, Call, Drawer, Recipe

Spec = Callable[[Drawer], Call]
SPECS: dict[str, Spec] = {}

# Ops deliberately outside this fuzz test, with the reason (tests/fuzz/test_fuzz_registry.py
# checks that every public registry op is either generated here or listed).
EXCLUDED = {
    **{n: "linear algebra: numerically conditioned inputs needed; tests/gputensor/test_linalg*"
       for n in ("addbmm", "addmm", "addmv", "baddbmm", "bmm", "cdist", "chain_matmul",
                 "cholesky", "cholesky_inverse", "cholesky_solve", "cross", "det", "dot",
                 "einsum", "inner", "inverse", "kron", "linear", "logdet", "matmul",
                 "matrix_exp", "matrix_power", "mm", "mv", "outer", "pinverse", "qr",
                 "slogdet", "svd", "tensordot", "triangular_solve", "vdot", "lu",
                 "lu_solve", "lu_unpack")},
    **{n: "nn convolution/pooling: tests/nn" for n in (
        "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool1d",
        "avg_pool2d", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d")},
    "stft": "spectral: tests/gputensor/test_fft.py", "istft": "spectral: test_fft.py",
    "get_device": "the answer is the device itself (PyTorch runs on the CPU here)",
    "from_numpy": "takes a NumPy array, no device; tests/gputensor/test_creation.py",
}


def spec(*names: str) -> Callable[[Spec], Spec]:
    def deco(fn: Spec) -> Spec:
        for n in names:
            SPECS[n] = functools.partial(_named, fn, n) if _takes_name(fn) else fn
        return fn
    return deco


def _named(fn: Callable[[Drawer, str], Call], name: str, d: Drawer) -> Call:
    return fn(d, name)


def _takes_name(fn: Callable) -> bool:
    return fn.__code__.co_argcount == 2


def form(d: Drawer, name: str, method: bool = True, inplace: bool = False) -> str:
    options = ["fn", "fn"]
    if method and hasattr(torch.Tensor, name):
        options.append("method")
    if inplace and hasattr(torch.Tensor, name + "_"):
        options.append("inplace")
    if not hasattr(torch, name):
        options = [o for o in options if o != "fn"] or ["F"]
    return d.pick(options)


def operand(d: Drawer, x: Recipe, dtypes: list[str] = DTYPES, scalars: tuple = (
        "int", "float", "bool", "special")) -> Any:
    """Another operand of an elementwise op: a tensor, a 0-d tensor or a Python scalar."""
    kind = d.pick(["tensor", "tensor", "tensor", "zerod"] + ["scalar", "scalar"] * bool(scalars))
    if kind == "tensor":
        return d.like(x, dtypes if d.chance(0.5) else None)
    if kind == "zerod":
        return d.tensor((), dtypes)
    return d.scalar(scalars)


# -- elementwise ops (registry expressions), built from the declaration ------------------------
_PARAMS: dict[str, Callable[[Drawer], dict]] = {
    "add": lambda d: {"alpha": d.scalar(("int", "float", "bool"))} if d.chance(0.4) else {},
    "sub": lambda d: {"alpha": d.scalar(("int", "float", "bool"))} if d.chance(0.4) else {},
    "addcdiv": lambda d: {"value": d.scalar(("int", "float"))} if d.chance(0.4) else {},
    "addcmul": lambda d: {"value": d.scalar(("int", "float"))} if d.chance(0.4) else {},
    "elu": lambda d: {"alpha": d.pick([1.0, 0.5, 2])} if d.chance(0.5) else {},
    "gelu": lambda d: {"approximate": d.pick(["none", "tanh", "bad"])} if d.chance(0.5) else {},
    "hardtanh": lambda d: {"min_val": d.pick([-1.0, 0.5, -2]), "max_val": d.pick([1.0, 0.25])},
    "leaky_relu": lambda d: {"negative_slope": d.pick([0.01, 0.2, 2])} if d.chance(0.5) else {},
    "nan_to_num": lambda d: {k: d.pick([None, 0.0, 5.0, -1e300, 1e300]) for k in
                             ("nan", "posinf", "neginf") if d.chance(0.5)},
    "round": lambda d: {"decimals": d.pick([0, 1, 2, -1])} if d.chance(0.5) else {},
    "softplus": lambda d: {"beta": d.pick([1.0, 2.0, 0.5]), "threshold": d.pick([20.0, 1.0])}
    if d.chance(0.5) else {},
}
_F_ONLY = {"elu", "gelu", "hardtanh", "leaky_relu", "silu", "softplus"}


@functools.cache
def _torch_takes(name: str, what: str) -> bool:
    """Whether torch.<name> takes a Python-number second operand ("scalar") or ``out=``
    ("out"): calls PyTorch would refuse for their signature alone are not generated."""
    fn = getattr(torch, name, None)
    if fn is None:
        return False
    n = OPS[name].arity
    args: list[Any] = [torch.ones(2) for _ in range(n)]
    kw: dict = {}
    if what == "scalar" and n >= 2:
        args[1] = 2
    else:
        kw["out"] = torch.empty(2, dtype=torch.bool if name in _BOOL_OUT else torch.float32)
    try:
        fn(*args, **kw)
    except TypeError:
        return False
    except RuntimeError:
        pass
    return True


_BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "signbit",
             "logical_and", "logical_or", "logical_xor", "logical_not"}


def elementwise(d: Drawer, name: str) -> Call:
    op = OPS[name]
    x = d.tensor()
    args: list[Any] = [x]
    scalars = ("int", "float", "bool", "special") if op.arity < 2 or \
        _torch_takes(name, "scalar") else ()
    for _ in range(op.arity - 1):
        args.append(operand(d, x, scalars=scalars))
    kwargs = _PARAMS.get(name, lambda d: {})(d)
    if name in _F_ONLY:
        f = "F" if not (hasattr(torch.Tensor, name + "_") and d.chance(0.2)) else "inplace"
        if name in ("hardtanh", "leaky_relu", "elu") and f == "F" and d.chance(0.3):
            kwargs["inplace"] = True
    else:
        f = form(d, name, inplace=op.inplace)
    if f == "fn" and d.chance(0.15) and _torch_takes(name, "out"):
        kwargs["out"] = d.tensor(d.broadcastable(x.shape), layout=False)
    exact_gelu = name == "gelu" and kwargs.get("approximate", "none") == "none"
    checker = "gelu_at_inf" if exact_gelu else "rsqrt_reduced" if name == "rsqrt" else "exact"
    return Call(name, tuple(args), kwargs, f, checker)


for _n, _op in OPS.items():
    if _op.expr is not None and not _n.startswith("_"):
        SPECS[_n] = functools.partial(_named, elementwise, _n)


# -- composite elementwise -------------------------------------------------------------------
@spec("clamp")
def _clamp(d: Drawer) -> Call:
    x = d.tensor()
    # Both bounds numbers or both tensors (or None): PyTorch's signature takes no mix.
    if d.bool():
        lo, hi = (d.pick([None, d.scalar(("int", "float", "special"))]) for _ in range(2))
    else:
        lo, hi = (d.pick([None, d.like(x, REAL)]) for _ in range(2))
    return Call("clamp", (x, lo, hi), {}, form(d, "clamp", inplace=True))


@spec("clamp_min", "clamp_max")
def _clamp1(d: Drawer, name: str) -> Call:
    x = d.tensor()
    return Call(name, (x, operand(d, x, REAL, ("int", "float", "special"))), {},
                form(d, name, inplace=True))


_SIGNED_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


@spec("div")
def _div(d: Drawer) -> Call:
    x = d.tensor()
    kw = {"rounding_mode": d.pick([None, "trunc", "floor", "bad"])} if d.chance(0.6) else {}
    other = operand(d, x)
    bits = _SIGNED_BITS.get(x.dtype)
    if type(other) is int and bits and (other + 1) % (1 << bits) == 0 and \
            kw.get("rounding_mode") in ("trunc", "floor"):
        # a Python int that wraps to -1 in x's dtype (2**63 - 1 in int32): PyTorch's
        # INT_MIN / -1 traps (SIGFPE) and takes the oracle down (seed 14811); gputensor wraps
        other = 3
    return Call("div", (x, other), kw, form(d, "div", inplace=True))


@spec("float_power", "ldexp", "logaddexp2", "xlogy", "rsub")
def _binary(d: Drawer, name: str) -> Call:
    x = d.tensor()
    inplace = name in ("float_power", "ldexp")
    scalars = ("int", "float", "bool", "special") if name in ("float_power", "xlogy", "rsub") \
        else ()
    return Call(name, (x, operand(d, x, scalars=scalars)), {}, form(d, name, method=name != "rsub",
                                                     inplace=inplace))


@spec("square", "conj", "positive", "isneginf", "isposinf", "resolve_conj", "resolve_neg",
      "is_conj", "is_neg", "isreal", "real", "imag", "atleast_1d", "atleast_2d", "atleast_3d",
      "ravel", "adjoint", "fliplr", "flipud", "argwhere", "msort", "clone", "view_as_real",
      "corrcoef", "trace", "t")
def _unary(d: Drawer, name: str) -> Call:
    min_nd = {"fliplr": 1, "flipud": 1, "trace": 1, "corrcoef": 1, "t": 0}.get(name, 0)
    x = d.tensor(d.shape(min_nd=min_nd))
    # x.real / x.imag are properties in PyTorch: only the function form is called.
    f = "fn" if name in ("real", "imag") else form(d, name, inplace=name == "square")
    return Call(name, (x,), {}, f)


@spec("lerp")
def _lerp(d: Drawer) -> Call:
    x = d.tensor(dtype=d.pick([FLOATS + COMPLEX, DTYPES]))
    w = d.pick([d.scalar(("float", "int", "special")), d.like(x)])
    return Call("lerp", (x, d.like(x), w), {}, form(d, "lerp", inplace=True))


@spec("where")
def _where(d: Drawer) -> Call:
    x = d.tensor()
    cond = d.tensor(d.broadcastable(x.shape), "bool" if d.chance(0.9) else "uint8")
    if d.chance(0.1):
        return Call("where", (cond,), {}, "fn")
    return Call("where", (cond, operand(d, x), operand(d, x)), {}, "fn")


@spec("isclose", "allclose")
def _isclose(d: Drawer, name: str) -> Call:
    x = d.tensor()
    kw = {k: d.pick([0.0, 1e-5, 0.1]) for k in ("rtol", "atol") if d.chance(0.4)}
    if d.chance(0.4):
        kw["equal_nan"] = d.bool()
    return Call(name, (x, d.like(x, DTYPES if d.chance(0.3) else None)), kw, form(d, name))


@spec("equal", "is_same_size")
def _equal(d: Drawer, name: str) -> Call:
    x = d.tensor()
    return Call(name, (x, d.like(x)), {}, form(d, name))


@spec("complex", "polar")
def _complex(d: Drawer, name: str) -> Call:
    x = d.tensor(dtype=d.pick([FLOATS, DTYPES]))
    return Call(name, (x, d.like(x, x.dtype if d.chance(0.8) else None)), {}, "fn")


@spec("view_as_complex")
def _view_as_complex(d: Drawer) -> Call:
    shape = (*d.shape(max_nd=2), 2 if d.chance(0.9) else 3)
    return Call("view_as_complex", (d.tensor(shape, layout=d.chance(0.3)),), {},
                form(d, "view_as_complex"))


@spec("logit")
def _logit(d: Drawer) -> Call:
    kw = {"eps": d.pick([None, 1e-6, 0.25])} if d.chance(0.5) else {}
    return Call("logit", (d.tensor(low=-0.5, high=1.5),), kw, form(d, "logit", inplace=True))


@spec("polygamma")
def _polygamma(d: Drawer) -> Call:
    # Off the poles (non-positive integers), where both libraries return arbitrary huge values.
    return Call("polygamma", (d.pick([0, 1, 2, 3, -1]), d.tensor(low=0.01, high=6)), {}, "fn")


@spec("mvlgamma")
def _mvlgamma(d: Drawer) -> Call:
    return Call("mvlgamma", (d.tensor(low=0, high=6), d.pick([1, 2, 3, 0])), {},
                form(d, "mvlgamma", inplace=True))


# -- reductions ------------------------------------------------------------------------------
def _red_kwargs(d: Drawer, x: Recipe, dim: Any, keep: bool = True) -> dict:
    kw: dict = {}
    if dim is not None:
        kw["dim"] = dim
    if keep and dim is not None and d.chance(0.4):
        kw["keepdim"] = d.bool()
    return kw


@spec("sum", "nansum", "mean", "nanmean", "amax", "amin", "all", "any", "count_nonzero",
      "logsumexp", "std", "var", "std_mean", "var_mean", "norm")
def _reduce_dims(d: Drawer, name: str) -> Call:
    x = d.tensor()
    dim = d.dims(x)
    if name == "logsumexp" and dim is None:
        dim = d.dim(x)
    kw = _red_kwargs(d, x, dim, keep=name != "count_nonzero")
    if name in ("sum", "nansum", "mean", "nanmean") and d.chance(0.25):
        kw["dtype"] = DT(d.dtype())
    if name in ("std", "var", "std_mean", "var_mean") and d.chance(0.4):
        kw["correction"] = d.pick([0, 1, 2, 0.5])
    if name == "norm" and d.chance(0.6):
        kw["p"] = d.pick([1, 2, 3, 0, float("inf"), -float("inf"), "fro", "nuc", 0.5])
    return Call(name, (x,), kw, form(d, name, method=name not in ("std_mean", "var_mean")))


@spec("prod", "argmax", "argmin", "max", "min", "median", "nanmedian", "aminmax")
def _reduce_dim(d: Drawer, name: str) -> Call:
    x = d.tensor()
    dim = d.dim(x, none=True) if d.chance(0.7) else None
    kw = _red_kwargs(d, x, dim, keep=dim is not None or name in ("argmax", "argmin"))
    if name == "prod" and d.chance(0.25):
        kw["dtype"] = DT(d.dtype())
    cmp = "values_only" if dim is not None and name in ("max", "min", "median", "nanmedian") \
        else "exact"
    return Call(name, (x,), kw, form(d, name), cmp)


@spec("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax")
def _scan(d: Drawer, name: str) -> Call:
    x = d.tensor()
    kw: dict = {}
    if name in ("cumsum", "cumprod", "softmax", "log_softmax") and d.chance(0.25):
        kw["dtype"] = DT(d.dtype())
    return Call(name, (x, d.dim(x)), kw, form(d, name))


@spec("kthvalue")
def _kthvalue(d: Drawer) -> Call:
    x = d.tensor()
    k = d.int(0, 5)
    return Call("kthvalue", (x, k, d.dim(x)), {"keepdim": d.bool()}, form(d, "kthvalue"),
                "values_only")


@spec("quantile", "nanquantile")
def _quantile(d: Drawer, name: str) -> Call:
    x = d.tensor(dtype=d.pick([FLOATS, DTYPES]))
    q = d.pick([0.5, 0.0, 1.0, 1.5, d.tensor((d.int(0, 3),), x.dtype, low=0, high=1,
                                             specials=False)])
    kw: dict = {"dim": d.dim(x, none=True)}
    if d.chance(0.4):
        kw["interpolation"] = d.pick(["linear", "lower", "higher", "midpoint", "nearest", "x"])
    return Call(name, (x, q), kw, form(d, name))


# -- views and shape ops -----------------------------------------------------------------------
def _reshape_target(d: Drawer, shape: tuple) -> list[int]:
    n = int(np.prod(shape, dtype=np.int64))
    kind = d.pick(["flat", "split", "minus1", "bad", "same"])
    if kind == "flat":
        return [n]
    if kind == "same":
        return list(shape)
    if kind == "bad":
        return [n + 1]
    out = [1] if n == 0 else []
    m = n
    for f in (2, 3, 5):
        while m % f == 0 and m > 1 and d.chance(0.6):
            out.append(f)
            m //= f
    out.append(m)
    if n == 0:
        out = [0, *out]
    if kind == "minus1":
        out[d.int(0, len(out) - 1)] = -1
    return out


@spec("reshape", "view")
def _reshape(d: Drawer, name: str) -> Call:
    x = d.tensor()
    target = _reshape_target(d, x.shape)
    if name == "view":
        return Call("view", (x, *target), {}, "method")
    return Call("reshape", (x, tuple(target)), {}, form(d, name))


@spec("flatten")
def _flatten(d: Drawer) -> Call:
    x = d.tensor()
    return Call("flatten", (x, d.dim(x), d.dim(x)), {}, form(d, "flatten"))


@spec("unsqueeze")
def _unsqueeze(d: Drawer) -> Call:
    x = d.tensor()
    return Call("unsqueeze", (x, d.dim(len(x.shape) + 1)), {}, form(d, "unsqueeze"))


@spec("squeeze")
def _squeeze(d: Drawer) -> Call:
    x = d.tensor(tuple(d.pick([1, 1, 2, 0]) for _ in range(d.int(0, 3))))
    args = (x,) if d.chance(0.3) else (x, d.dims(x) if d.chance(0.3) else d.dim(x))
    return Call("squeeze", args, {}, form(d, "squeeze"))


@spec("transpose")
def _transpose(d: Drawer) -> Call:
    x = d.tensor()
    return Call("transpose", (x, d.dim(x), d.dim(x)), {}, form(d, "transpose"))


@spec("permute")
def _permute(d: Drawer) -> Call:
    x = d.tensor()
    perm = list(d.rng.permutation(len(x.shape)).tolist())
    if perm and d.chance(0.2):
        perm[0] = perm[-1]
    if d.chance(0.1):
        perm.append(0)
    return Call("permute", (x, tuple(perm)), {}, form(d, "permute"))


@spec("movedim")
def _movedim(d: Drawer) -> Call:
    x = d.tensor()
    if d.chance(0.6):
        return Call("movedim", (x, d.dim(x), d.dim(x)), {}, form(d, "movedim"))
    k = d.int(0, len(x.shape))
    return Call("movedim", (x, tuple(d.dim(x) for _ in range(k)),
                            tuple(d.dim(x) for _ in range(k))), {}, form(d, "movedim"))


@spec("narrow", "narrow_copy")
def _narrow(d: Drawer, name: str) -> Call:
    x = d.tensor()
    dim = d.dim(x)
    n = x.shape[dim] if x.shape and -len(x.shape) <= dim < len(x.shape) else 2
    return Call(name, (x, dim, d.int(-n - 1, n + 1), d.int(-1, n + 1)), {}, form(d, name))


@spec("select")
def _select(d: Drawer) -> Call:
    x = d.tensor()
    return Call("select", (x, d.dim(x), d.int(-5, 5)), {}, form(d, "select"))


@spec("unbind")
def _unbind(d: Drawer) -> Call:
    x = d.tensor()
    return Call("unbind", (x, d.dim(x)), {}, form(d, "unbind"))


@spec("unflatten")
def _unflatten(d: Drawer) -> Call:
    x = d.tensor()
    dim = d.dim(x)
    n = x.shape[dim] if x.shape and -len(x.shape) <= dim < len(x.shape) else 1
    return Call("unflatten", (x, dim, tuple(_reshape_target(d, (n,)))), {}, form(d, "unflatten"))


@spec("unfold")
def _unfold(d: Drawer) -> Call:
    x = d.tensor()
    return Call("unfold", (x, d.dim(x), d.int(0, 4), d.int(0, 3)), {}, "method")


@spec("diagonal")
def _diagonal(d: Drawer) -> Call:
    x = d.tensor()
    return Call("diagonal", (x, d.int(-3, 3), d.dim(x), d.dim(x)), {}, form(d, "diagonal"))


@spec("expand", "broadcast_to")
def _expand(d: Drawer, name: str) -> Call:
    x = d.tensor()
    target = [d.pick([s, s, -1, 3]) if s == 1 else d.pick([s, s, s, -1, s + 1]) for s in x.shape]
    target = [d.int(0, 3) for _ in range(d.int(0, 2))] + target
    if name == "expand":
        return Call("expand", (x, *target), {}, "method")
    return Call(name, (x, tuple(target)), {}, form(d, name))


@spec("as_strided")
def _as_strided(d: Drawer) -> Call:
    x = d.tensor(layout=False)
    size = d.shape(max_nd=3)
    stride = tuple(d.int(0, 3) for _ in size)
    args = (x, size, stride) + ((d.int(0, 2),) if d.chance(0.5) else ())
    return Call("as_strided", args, {}, form(d, "as_strided"))


@spec("as_strided_scatter")
def _as_strided_scatter(d: Drawer) -> Call:
    x = d.tensor(layout=False)
    size = d.shape(max_nd=2)
    stride = tuple(d.int(1, 3) for _ in size)
    return Call("as_strided_scatter", (x, d.tensor(size, x.dtype), size, stride), {},
                form(d, "as_strided_scatter"))


@spec("flip")
def _flip(d: Drawer) -> Call:
    x = d.tensor()
    dims = d.dims(x)
    dims = () if dims is None else (dims,) if isinstance(dims, int) else dims
    return Call("flip", (x, dims), {}, form(d, "flip"))


@spec("roll")
def _roll(d: Drawer) -> Call:
    x = d.tensor()
    if d.chance(0.3):
        return Call("roll", (x, d.int(-5, 5)), {}, form(d, "roll"))
    k = d.int(1, 2)
    return Call("roll", (x, tuple(d.int(-5, 5) for _ in range(k)),
                         tuple(d.dim(x) for _ in range(k if d.chance(0.9) else k + 1))),
                {}, form(d, "roll"))


@spec("rot90")
def _rot90(d: Drawer) -> Call:
    x = d.tensor()
    return Call("rot90", (x, d.int(-3, 5), (d.dim(x), d.dim(x))), {}, form(d, "rot90"))


@spec("repeat", "tile")
def _repeat(d: Drawer, name: str) -> Call:
    x = d.tensor()
    reps = tuple(d.int(0, 3) for _ in range(d.int(0, len(x.shape) + 1)))
    if name == "repeat":
        return Call("repeat", (x, *reps), {}, "method")
    return Call("tile", (x, reps), {}, form(d, "tile"))


@spec("repeat_interleave")
def _repeat_interleave(d: Drawer) -> Call:
    x = d.tensor()
    dim = d.dim(x, none=True)
    n = x.shape[dim] if dim is not None and x.shape and -len(x.shape) <= dim < len(x.shape) \
        else int(np.prod(x.shape, dtype=np.int64))
    reps = d.pick([d.int(0, 3), Recipe(d.rng.integers(-1 if d.chance(0.1) else 0, 3,
                                                        (n if d.chance(0.9) else 1,)),
                                       "int64", [], (n,))])
    kw = {"dim": dim} if dim is not None else {}
    return Call("repeat_interleave", (x, reps), kw, form(d, "repeat_interleave"))


@spec("chunk", "unsafe_chunk")
def _chunk(d: Drawer, name: str) -> Call:
    x = d.tensor()
    return Call(name, (x, d.int(0, 5), d.dim(x)), {}, form(d, name))


@spec("split", "unsafe_split", "split_with_sizes", "unsafe_split_with_sizes")
def _split(d: Drawer, name: str) -> Call:
    x = d.tensor(d.shape(min_nd=1))
    dim = d.dim(x)
    n = x.shape[dim] if -len(x.shape) <= dim < len(x.shape) else 2
    sizes: Any = d.sizes_for(n)
    if name in ("split", "unsafe_split") and d.chance(0.6):
        sizes = d.int(0, 3)
    return Call(name, (x, sizes, dim), {}, form(d, name))


@spec("tensor_split", "hsplit", "vsplit", "dsplit")
def _tensor_split(d: Drawer, name: str) -> Call:
    x = d.tensor()
    arg = d.int(0, 4) if d.chance(0.5) else sorted(d.int(-2, 5) for _ in range(d.int(0, 3)))
    if name == "tensor_split":
        return Call(name, (x, arg, d.dim(x)), {}, form(d, name))
    return Call(name, (x, arg), {}, form(d, name))


def _tensors(d: Drawer, n_min: int = 0) -> list[Recipe]:
    x = d.tensor()
    out = [x]
    for _ in range(d.int(n_min, 2)):
        shape = list(x.shape)
        if shape and d.chance(0.6):
            shape[d.int(0, len(shape) - 1)] = d.int(0, 3)
        out.append(d.tensor(tuple(shape) if d.chance(0.9) else d.shape(),
                            x.dtype if d.chance(0.6) else None))
    return out


@spec("cat", "stack")
def _cat(d: Drawer, name: str) -> Call:
    ts = _tensors(d)
    nd = len(ts[0].shape) + (1 if name == "stack" else 0)
    kw = {"dim": d.dim(nd)} if d.chance(0.7) else {}
    return Call(name, (ts if d.chance(0.1) else tuple(ts),), kw, "fn")


@spec("hstack", "vstack", "dstack", "column_stack")
def _stacks(d: Drawer, name: str) -> Call:
    return Call(name, (_tensors(d),), {}, "fn")


@spec("broadcast_tensors", "block_diag", "atleast_1d", "atleast_2d")
def _variadic(d: Drawer, name: str) -> Call:
    if name == "block_diag":
        ts = [d.tensor(d.shape(max_nd=2)) for _ in range(d.int(0, 3))]
    else:
        x = d.tensor()
        ts = [x] + [d.like(x) for _ in range(d.int(0, 2))]
    return Call(name, tuple(ts), {}, "fn")


@spec("cartesian_prod", "meshgrid")
def _grid(d: Drawer, name: str) -> Call:
    dt = d.dtype()
    ts = [d.tensor((d.int(0, 3),) if d.chance(0.9) else d.shape(), dt if d.chance(0.8) else None)
          for _ in range(d.int(1, 3))]
    kw = {"indexing": d.pick(["ij", "xy"])} if name == "meshgrid" else {}
    return Call(name, tuple(ts), kw, "fn")


@spec("diag", "diagflat")
def _diag(d: Drawer, name: str) -> Call:
    x = d.tensor(d.shape(max_nd=3 if d.chance(0.2) else 2))
    return Call(name, (x, d.int(-3, 3)), {}, form(d, name))


@spec("diag_embed")
def _diag_embed(d: Drawer) -> Call:
    x = d.tensor()
    nd = len(x.shape) + 1
    return Call("diag_embed", (x, d.int(-2, 2), d.dim(nd), d.dim(nd)), {}, form(d, "diag_embed"))


@spec("tril", "triu")
def _tri(d: Drawer, name: str) -> Call:
    x = d.tensor()
    return Call(name, (x, d.int(-3, 3)), {}, form(d, name, inplace=True))


@spec("diff")
def _diff(d: Drawer) -> Call:
    x = d.tensor()
    kw: dict = {"n": d.int(0, 3), "dim": d.dim(x)}
    if d.chance(0.3):
        kw["prepend"] = d.tensor(x.shape, x.dtype)
    if d.chance(0.3):
        kw["append"] = d.tensor(d.broadcastable(x.shape), x.dtype)
    return Call("diff", (x,), kw, form(d, "diff"))


def _gather_index(d: Drawer, x: Recipe, dim: int) -> Recipe:
    nd = len(x.shape)
    if not (-max(nd, 1) <= dim < max(nd, 1)):
        return d.index(2, (2,) * nd)
    dim %= max(nd, 1)
    shape = tuple(d.int(0, s) for s in x.shape) if nd else ()
    if nd and d.chance(0.8):
        shape = tuple(d.int(0, 4) if i == dim else s for i, s in enumerate(shape))
    size = x.shape[dim] if nd else 1
    return d.index(size, shape if d.chance(0.95) else (*shape, 1))


@spec("gather", "take_along_dim")
def _gather(d: Drawer, name: str) -> Call:
    x = d.tensor()
    dim = d.dim(x)
    idx = _gather_index(d, x, dim)
    if name == "gather":
        return Call("gather", (x, dim, idx), {}, form(d, name))
    if d.chance(0.2):
        return Call(name, (x, d.index(int(np.prod(x.shape)), (d.int(0, 4),))), {}, form(d, name))
    return Call(name, (x, idx, dim), {}, form(d, name))


@spec("index_select")
def _index_select(d: Drawer) -> Call:
    x = d.tensor()
    dim = d.dim(x)
    size = x.shape[dim] if x.shape and -len(x.shape) <= dim < len(x.shape) else 1
    return Call("index_select", (x, dim, d.index(size, (d.int(0, 4),))), {},
                form(d, "index_select"))


@spec("take")
def _take(d: Drawer) -> Call:
    x = d.tensor()
    return Call("take", (x, d.index(int(np.prod(x.shape)), d.shape(max_nd=2))), {},
                form(d, "take"))


@spec("pad")
def _pad(d: Drawer) -> Call:
    x = d.tensor()
    pads = [d.int(-1, 2) for _ in range(2 * d.int(0, max(1, len(x.shape))))]
    kw = {"value": d.scalar(("int", "float"))} if d.chance(0.3) else {}
    return Call("pad", (x, tuple(pads)), kw, "F")


# -- scatter and index writes ------------------------------------------------------------------
def _unique_index(d: Drawer, size: int, k: int) -> Recipe:
    """A 1-d int64 index of ``k`` distinct positions (writes without duplicates)."""
    k = min(k, size)
    return Recipe(d.rng.permutation(size)[:k].astype(np.int64), "int64", [], (k,))


def _scatter_index(d: Drawer, x: Recipe, dim: int, unique: bool) -> Recipe:
    nd = len(x.shape)
    if not unique or nd == 0 or not (-nd <= dim < nd):
        return _gather_index(d, x, dim)
    dim %= nd
    shape = [d.int(0, s) for s in x.shape]
    cols = int(np.prod([s for i, s in enumerate(shape) if i != dim], dtype=np.int64))
    idx = np.stack([d.rng.permutation(x.shape[dim])[:shape[dim]] for _ in range(cols)], -1) \
        if cols else np.zeros((shape[dim], 0), np.int64)
    moved = [s for i, s in enumerate(shape) if i != dim]
    idx = np.moveaxis(idx.reshape(shape[dim], *moved), 0, dim).astype(np.int64)
    return Recipe(idx, "int64", [], tuple(shape))


@spec("scatter", "scatter_add", "scatter_reduce")
def _scatter(d: Drawer, name: str) -> Call:
    x = d.tensor(layout=d.chance(0.3))
    dim = d.dim(x)
    reduce = d.pick(["sum", "prod", "mean", "amax", "amin"]) if name == "scatter_reduce" else None
    idx = _scatter_index(d, x, dim, unique=name == "scatter" or reduce == "mean")
    src = d.tensor(idx.shape, x.dtype if d.chance(0.85) else None)
    f = form(d, name, inplace=True)
    if name == "scatter":
        if d.chance(0.3):
            return Call(name, (x, dim, idx), {"value": d.scalar(("int", "float"))}, f)
        return Call(name, (x, dim, idx, src), {}, f)
    if name == "scatter_add":
        return Call(name, (x, dim, idx, src), {}, f)
    return Call(name, (x, dim, idx, src, reduce), {"include_self": d.bool()}, f)


def _index_args(d: Drawer, unique: bool) -> tuple[Recipe, int, Recipe, tuple]:
    x = d.tensor(layout=d.chance(0.3))
    dim = d.dim(x)
    nd = len(x.shape)
    size = x.shape[dim] if nd and -nd <= dim < nd else 1
    k = d.int(0, 4)
    idx = _unique_index(d, size, k) if unique and d.chance(0.9) else d.index(size, (k,))
    src_shape = list(x.shape) if nd else []
    if nd and -nd <= dim < nd:
        src_shape[dim] = idx.shape[0]
    return x, dim, idx, tuple(src_shape)


@spec("index_add", "index_copy", "index_reduce")
def _index_write(d: Drawer, name: str) -> Call:
    x, dim, idx, src_shape = _index_args(d, unique=name == "index_copy")
    src = d.tensor(src_shape if d.chance(0.9) else d.shape(), x.dtype if d.chance(0.85) else None)
    f = form(d, name, inplace=True)
    if name == "index_reduce":
        red = d.pick(["prod", "mean", "amax", "amin"])
        return Call(name, (x, dim, idx, src, red), {"include_self": d.bool()}, f)
    kw = {"alpha": d.scalar(("int", "float"))} if name == "index_add" and d.chance(0.3) else {}
    return Call(name, (x, dim, idx, src), kw, f)


@spec("index_fill")
def _index_fill(d: Drawer) -> Call:
    x, dim, idx, _ = _index_args(d, unique=False)
    val = d.pick([d.scalar(), d.tensor((), x.dtype)])
    return Call("index_fill", (x, dim, idx, val), {}, form(d, "index_fill", inplace=True))


@spec("masked_fill", "masked_scatter", "masked_select")
def _masked(d: Drawer, name: str) -> Call:
    x = d.tensor()
    mask = d.tensor(d.broadcastable(x.shape), "bool" if d.chance(0.9) else "uint8")
    f = form(d, name, inplace=name != "masked_select")
    if name == "masked_fill":
        return Call(name, (x, mask, d.pick([d.scalar(), d.tensor((), DTYPES)])), {}, f)
    if name == "masked_scatter":
        n = int(np.prod(x.shape, dtype=np.int64)) + d.pick([0, 0, 1, -1])
        return Call(name, (x, mask, d.tensor((max(n, 0),), x.dtype)), {}, f)
    return Call(name, (x, mask), {}, f)


@spec("put")
def _put(d: Drawer) -> Call:
    x = d.tensor(layout=False)
    n = int(np.prod(x.shape, dtype=np.int64))
    acc = d.bool()
    idx = d.index(n, (d.int(0, 4),)) if acc or d.chance(0.1) else _unique_index(d, n, d.int(0, 4))
    src = d.tensor(idx.shape, x.dtype if d.chance(0.9) else None)
    return Call("put", (x, idx, src, acc), {}, form(d, "put", inplace=True))


@spec("index_put", "index_put_")
def _index_put(d: Drawer, name: str) -> Call:
    x = d.tensor(d.shape(min_nd=1), layout=d.chance(0.3))
    acc = d.bool()
    if d.chance(0.3):
        mask = d.tensor(x.shape[:d.int(1, len(x.shape))], "bool", layout=False)
        indices: tuple = (mask,)
        vals = d.tensor((), x.dtype if d.chance(0.9) else None)
    else:
        k = d.int(0, 3)
        idx = d.index(x.shape[0], (k,)) if acc or d.chance(0.1) else \
            _unique_index(d, x.shape[0], k)
        indices = (idx,)
        vals = d.tensor(d.pick([(), (idx.shape[0], *x.shape[1:]), x.shape[1:]]),
                        x.dtype if d.chance(0.9) else None)
    if name == "index_put_":
        return Call(name, (x, indices, vals, acc), {}, d.pick(["fn", "method"]))
    return Call(name, (x, indices, vals, acc), {}, form(d, name, inplace=True))


@spec("select_scatter")
def _select_scatter(d: Drawer) -> Call:
    x = d.tensor(d.shape(min_nd=1))
    dim = d.dim(x)
    shp = tuple(s for i, s in enumerate(x.shape) if i != dim % max(len(x.shape), 1))
    return Call("select_scatter", (x, d.tensor(shp, x.dtype), dim, d.int(-3, 3)), {},
                form(d, "select_scatter"))


@spec("slice_scatter")
def _slice_scatter(d: Drawer) -> Call:
    x = d.tensor(d.shape(min_nd=1))
    dim = d.dim(x)
    start, end, step = d.pick([None, 0, 1, -1]), d.pick([None, 2, 5]), d.pick([1, 2])
    n = x.shape[dim] if -len(x.shape) <= dim < len(x.shape) else 0
    k = len(range(n)[slice(start, end, step)])
    shp = list(x.shape)
    if -len(x.shape) <= dim < len(x.shape):
        shp[dim] = k
    return Call("slice_scatter", (x, d.tensor(tuple(shp), x.dtype), dim, start, end, step), {},
                form(d, "slice_scatter"))


@spec("diagonal_scatter")
def _diagonal_scatter(d: Drawer) -> Call:
    x = d.tensor(d.shape(min_nd=2))
    off = d.int(-2, 2)
    n = len(np.diagonal(np.empty(x.shape[:2]), off))
    src = d.tensor((*x.shape[2:], n), x.dtype)
    return Call("diagonal_scatter", (x, src, off), {}, form(d, "diagonal_scatter"))


# -- sorting, searching, counting ----------------------------------------------------------------
@spec("sort", "argsort")
def _sort(d: Drawer, name: str) -> Call:
    x = d.tensor()
    stable = d.bool()
    kw = {"descending": d.bool(), "stable": stable}
    cmp = "exact" if stable else ("values_only" if name == "sort" else "argsort")
    kw["dim"] = d.dim(x)    # keyword: torch.argsort takes stable= only with dim=
    return Call(name, (x,), kw, form(d, name), cmp)


@spec("topk")
def _topk(d: Drawer) -> Call:
    x = d.tensor()
    return Call("topk", (x, d.int(0, 4), d.dim(x)), {"largest": d.bool()}, form(d, "topk"),
                "values_only")


@spec("unique", "unique_consecutive")
def _unique(d: Drawer, name: str) -> Call:
    x = d.tensor(low=-2, high=2)
    kw = {"return_inverse": d.bool(), "return_counts": d.bool()}
    if d.chance(0.4):
        kw["dim"] = d.dim(x)
    nan_slots = name == "unique" and "dim" not in kw
    return Call(name, (x,), kw, form(d, name), "unique_nans" if nan_slots else "exact")


@spec("nonzero")
def _nonzero(d: Drawer) -> Call:
    x = d.tensor(low=-1, high=1)
    return Call("nonzero", (x,), {"as_tuple": d.bool()}, form(d, "nonzero"))


@spec("bincount")
def _bincount(d: Drawer) -> Call:
    x = d.tensor((d.int(0, 5),) if d.chance(0.9) else d.shape(), INTS if d.chance(0.9) else None,
                 low=-1 if d.chance(0.1) else 0, high=6, specials=False)
    kw: dict = {}
    if d.chance(0.4):
        kw["weights"] = d.tensor(x.shape, d.pick(FLOATS + ["int64"]))
    if d.chance(0.4):
        kw["minlength"] = d.int(-1, 8)
    return Call("bincount", (x,), kw, form(d, "bincount"))


@spec("bucketize", "searchsorted")
def _search(d: Drawer, name: str) -> Call:
    dt = d.pick([*INTS, "float32", "float64"])
    n = d.int(0, 5)
    b = Recipe(np.sort(d.values((n,), dt)), dt, [], (n,))
    x = d.pick([d.tensor(dtype=dt if d.chance(0.8) else None), d.scalar(("int", "float"))])
    kw: dict = {"right": d.bool()}
    if d.chance(0.3):
        kw["out_int32"] = True
    if name == "bucketize":
        return Call(name, (x, b), kw, "fn")
    return Call(name, (b, x), kw, "fn")


@spec("histc")
def _histc(d: Drawer) -> Call:
    x = d.tensor(dtype=d.pick([FLOATS, DTYPES]))
    return Call("histc", (x,), {"bins": d.int(0, 6), "min": d.pick([0, -2.0]),
                                "max": d.pick([0, 3.0, -3.0])}, form(d, "histc"))


@spec("isin")
def _isin(d: Drawer) -> Call:
    x = d.tensor(low=-3, high=3)
    y = d.pick([d.tensor(dtype=x.dtype, low=-3, high=3), d.scalar(("int", "float"))])
    return Call("isin", (x, y), {"invert": d.bool()}, "fn")


# -- statistics and extras -----------------------------------------------------------------------
@spec("cov")
def _cov(d: Drawer) -> Call:
    x = d.tensor(d.shape(max_nd=2 if d.chance(0.9) else 3), dtype=d.pick([FLOATS + COMPLEX,
                                                                          DTYPES]))
    kw = {"correction": d.pick([0, 1, 2])} if d.chance(0.5) else {}
    observations = x.shape[-1] if len(x.shape) else 1
    zero_divisor = x.dtype in COMPLEX and kw.get("correction", 1) == observations
    return Call("cov", (x,), kw, form(d, "cov"), "zero_divisor_cov" if zero_divisor else "exact")


@spec("trapezoid", "cumulative_trapezoid")
def _trapz(d: Drawer, name: str) -> Call:
    y = d.tensor()
    kw: dict = {"dim": d.dim(y)}
    if d.chance(0.3):
        kw["dx"] = d.pick([0.5, 2])
    return Call(name, (y,), kw, "fn")


@spec("dist")
def _dist(d: Drawer) -> Call:
    x = d.tensor()
    return Call("dist", (x, d.like(x), d.pick([2, 1, 0, 3.5, float("inf")])), {}, form(d, "dist"))


@spec("renorm")
def _renorm(d: Drawer) -> Call:
    x = d.tensor(dtype=d.pick([FLOATS + COMPLEX, DTYPES]))
    return Call("renorm", (x, d.pick([1, 2, 0.5, -1]), d.dim(x), d.pick([1.0, 0.5, -1.0])), {},
                form(d, "renorm", inplace=True))


@spec("addr")
def _addr(d: Drawer) -> Call:
    dt = d.dtype()
    a, b = d.tensor((d.int(0, 3),), dt), d.tensor((d.int(0, 3),), dt if d.chance(0.8) else None)
    m = d.tensor(d.broadcastable((a.shape[0], b.shape[0])), dt)
    kw = {k: d.scalar(("int", "float")) for k in ("beta", "alpha") if d.chance(0.3)}
    return Call("addr", (m, a, b), kw, form(d, "addr", inplace=True))


@spec("combinations")
def _combinations(d: Drawer) -> Call:
    x = d.tensor((d.int(0, 4),) if d.chance(0.9) else d.shape())
    return Call("combinations", (x, d.int(0, 3)), {"with_replacement": d.bool()}, "fn")


@spec("vander")
def _vander(d: Drawer) -> Call:
    x = d.tensor((d.int(0, 4),) if d.chance(0.9) else d.shape(), low=-2, high=2)
    return Call("vander", (x,), {"N": d.pick([None, 0, 2, 4]), "increasing": d.bool()}, "fn")


@spec("unravel_index")
def _unravel(d: Drawer) -> Call:
    shape = tuple(d.int(1, 4) for _ in range(d.int(0, 3)))
    n = int(np.prod(shape, dtype=np.int64))
    return Call("unravel_index", (d.index(n, d.shape(max_nd=2)), shape), {}, "fn")


@spec("is_nonzero")
def _is_nonzero(d: Drawer) -> Call:
    return Call("is_nonzero", (d.tensor(d.pick([(), (1,), (1, 1), (2,), (0,)])),), {}, "fn")


# -- creation ------------------------------------------------------------------------------------
def _size(d: Drawer) -> tuple:
    return tuple(d.pick([0, 1, 2, 3, -1]) if d.chance(0.1) else d.int(0, 3)
                 for _ in range(d.int(0, 3)))


def _create_kw(d: Drawer, dtypes: list[str] = DTYPES) -> dict:
    kw: dict = {"device": DEV}
    if d.chance(0.7):
        kw["dtype"] = DT(d.pick(dtypes))
    return kw


@spec("zeros", "ones", "empty")
def _zeros(d: Drawer, name: str) -> Call:
    return Call(name, (_size(d),), _create_kw(d), "fn", "meta" if name == "empty" else "exact")


@spec("full")
def _full(d: Drawer) -> Call:
    return Call("full", (_size(d), d.scalar(("int", "float", "bool", "special", "complex"))),
                _create_kw(d), "fn")


@spec("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
      "randint_like")
def _like(d: Drawer, name: str) -> Call:
    x = d.tensor()
    kw = _create_kw(d)
    kw.pop("device")
    args: tuple = (x,)
    if name == "full_like":
        args = (x, d.scalar(("int", "float", "bool", "special", "complex")))
    if name == "randint_like":
        args = (x, d.int(1, 5))
    meta = name in ("empty_like", "rand_like", "randn_like", "randint_like")
    return Call(name, args, kw, "fn", "meta" if meta else "exact")


@spec("empty_strided")
def _empty_strided(d: Drawer) -> Call:
    size = _size(d)
    return Call("empty_strided", (size, tuple(d.int(0, 3) for _ in size)), _create_kw(d), "fn",
                "meta")


@spec("tensor", "as_tensor")
def _tensor(d: Drawer, name: str) -> Call:
    kinds = ("int", "float", "bool", "special", "complex")
    shape = d.shape(max_nd=2)
    data: Any = d.scalar(kinds)
    if shape:
        data = np.empty(shape, object)
        for i in np.ndindex(*shape):
            data[i] = d.scalar(kinds if d.chance(0.2) else d.pick([("int",), ("float",)]))
        data = data.tolist()
    kw = _create_kw(d)
    return Call(name, (data,), kw, "fn")


@spec("arange")
def _arange(d: Drawer) -> Call:
    vals = [d.pick([0, 1, 3, -2, 2.5, 0.5, 7]) for _ in range(d.int(1, 3))]
    if len(vals) == 3 and d.chance(0.2):
        vals[2] = d.pick([0, -1, float("inf"), float("nan")])
    return Call("arange", tuple(vals), _create_kw(d, NUMERIC), "fn")


@spec("linspace", "logspace")
def _linspace(d: Drawer, name: str) -> Call:
    a, b = (d.pick([0, 1, -2, 2.5, 10, float("inf")]) for _ in range(2))
    kw = _create_kw(d, NUMERIC)
    if name == "logspace" and d.chance(0.4):
        kw["base"] = d.pick([2.0, 10.0, 0.5])
    return Call(name, (a, b, d.int(-1, 5)), kw, "fn")


@spec("eye")
def _eye(d: Drawer) -> Call:
    args = (d.int(-1, 4),) + ((d.int(-1, 4),) if d.chance(0.5) else ())
    return Call("eye", args, _create_kw(d), "fn")


@spec("tril_indices", "triu_indices")
def _tri_indices(d: Drawer, name: str) -> Call:
    kw = {"device": DEV}
    if d.chance(0.3):
        kw["dtype"] = DT(d.pick(["int64", "int32", "float32"]))
    return Call(name, (d.int(0, 4), d.int(0, 4), d.int(-3, 3)), kw, "fn")


@spec("bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window")
def _window(d: Drawer, name: str) -> Call:
    return Call(name, (d.int(-1, 5), d.bool()), _create_kw(d, FLOATS + COMPLEX + ["int64"]),
                "fn")


# -- random sampling: shapes, dtypes and errors only -----------------------------------------
@spec("rand", "randn")
def _rand(d: Drawer, name: str) -> Call:
    return Call(name, _size(d), _create_kw(d), "fn", "meta")


@spec("randint")
def _randint(d: Drawer) -> Call:
    return Call("randint", (d.int(-1, 2), d.int(-1, 5), _size(d)), _create_kw(d), "fn", "meta")


@spec("randperm")
def _randperm(d: Drawer) -> Call:
    return Call("randperm", (d.int(-1, 5),), _create_kw(d), "fn", "meta")


@spec("normal")
def _normal(d: Drawer) -> Call:
    if d.chance(0.5):
        return Call("normal", (d.pick([0.0, 1.0]), d.pick([1.0, 0.0, -1.0]), _size(d)),
                    {"device": DEV}, "fn", "meta")
    m = d.tensor(dtype=FLOATS + COMPLEX)
    return Call("normal", (m, d.pick([1.0, 0.5])), {}, "fn", "meta")


@spec("bernoulli", "poisson")
def _bernoulli(d: Drawer, name: str) -> Call:
    x = d.tensor(dtype=d.pick([FLOATS, DTYPES]), low=0, high=1, specials=False)
    return Call(name, (x,), {}, "fn", "meta")


@spec("binomial")
def _binomial(d: Drawer) -> Call:
    shape = d.shape()
    count = d.tensor(shape, FLOATS, low=0, high=10, specials=False)
    prob = d.tensor(shape, count.dtype if d.chance(0.9) else FLOATS, low=0, high=1,
                    specials=False)
    return Call("binomial", (count, prob), {}, "fn", "meta")


@spec("multinomial")
def _multinomial(d: Drawer) -> Call:
    p = d.tensor(d.shape(min_nd=1, max_nd=2), FLOATS, low=0, high=1, specials=False)
    return Call("multinomial", (p, d.int(0, 3)), {"replacement": d.bool()}, "fn", "meta")


# -- Tensor indexing (__getitem__ / __setitem__) ---------------------------------------------
def _index_expr(d: Drawer, shape: tuple) -> Any:
    items: list[Any] = []
    dim = 0
    for _ in range(d.int(1, 3)):
        size = shape[dim] if dim < len(shape) else 1
        kind = d.pick(["int", "slice", "slice", "none", "ellipsis", "list", "tensor", "mask",
                       "bool"])
        if kind == "int":
            items.append(d.int(-size - 1, size))
        elif kind == "slice":
            items.append(slice(d.pick([None, 0, 1, -1, 5]), d.pick([None, 2, -1, 9]),
                               d.pick([None, 1, 2])))
        elif kind == "none":
            items.append(None)
            continue
        elif kind == "ellipsis":
            if Ellipsis not in items:
                items.append(Ellipsis)
            continue
        elif kind == "bool":
            items.append(d.bool())
            continue
        elif kind == "list":
            items.append([d.int(-size, max(size - 1, 0)) for _ in range(d.int(1, 3))])
        elif kind == "tensor":
            items.append(d.index(size, d.shape(max_nd=2) if d.chance(0.8) else ()))
        else:
            items.append(Recipe(d.rng.integers(0, 2, size).astype(np.bool_), "bool", [],
                                (size,)))
        dim += 1
    return tuple(items) if len(items) != 1 or d.chance(0.3) else items[0]


def getitem(lib: Any, x: Any, idx: Any) -> Any:
    return x[idx]


def setitem(lib: Any, x: Any, idx: Any, value: Any) -> Any:
    x[idx] = value
    return x


@spec("__getitem__")
def _getitem(d: Drawer) -> Call:
    x = d.tensor()
    return Call("__getitem__", (x, _index_expr(d, x.shape)), {}, getitem)


@spec("__setitem__")
def _setitem(d: Drawer) -> Call:
    x = d.tensor(layout=d.chance(0.2))
    val = d.pick([d.scalar(("int", "float", "bool", "special", "complex")),
                  d.tensor((), x.dtype if d.chance(0.8) else None),
                  d.tensor(x.shape[-1:], x.dtype)])
    return Call("__setitem__", (x, _index_expr(d, x.shape), val), {}, setitem)


# -- number theory, float bits, functional companions (gputensor/_ops/math_extras.py,
# creation_extras.py, shape_extras.py) ----------------------------------------------------------
@spec("gcd", "lcm")
def _gcd_lcm(d: Drawer, name: str) -> Call:
    # No INT_MIN/INT_MAX specials for lcm: where gcd is -1 (lcm(INT_MIN, 5)), PyTorch's
    # INT_MIN / -1 traps (SIGFPE) and takes the oracle down (tests/gputensor/test_more_math.py
    # checks gputensor's wrapped answer there).
    specials = name == "gcd"
    x = d.tensor(dtype=INTS if d.chance(0.85) else None, low=-60, high=60, specials=specials)
    shape = d.broadcastable(x.shape) if d.chance(0.9) else ()
    other = d.tensor(shape, INTS if d.chance(0.8) else x.dtype, low=-60, high=60,
                     specials=specials)
    return Call(name, (x, other), {}, form(d, name, inplace=True))


@spec("nextafter")
def _nextafter(d: Drawer) -> Call:
    x = d.tensor(dtype=FLOATS if d.chance(0.85) else None)
    other = d.like(x, FLOATS if d.chance(0.8) else None) if d.chance(0.9) else \
        d.tensor((), FLOATS)
    return Call("nextafter", (x, other), {}, form(d, "nextafter", inplace=True))


@spec("frexp", "conj_physical")
def _frexp(d: Drawer, name: str) -> Call:
    return Call(name, (d.tensor(),), {}, form(d, name, inplace=name == "conj_physical"))


@spec("nonzero_static")
def _nonzero_static(d: Drawer) -> Call:
    x = d.tensor(low=-1, high=1)
    kw = {"size": d.int(-1, 6), "fill_value": d.pick([-1, 0, 5])}
    return Call("nonzero_static", (x,), kw, form(d, "nonzero_static"))


def slice_inverse_of_slice(lib: Any, src: Any, dim: int, start: Any, end: Any, step: int) -> Any:
    """slice_inverse(src[start:end:step on dim], src, ...): its input must be such a slice."""
    index = [slice(None)] * src.dim()
    index[dim] = slice(start, end, step)
    return lib.slice_inverse(src[tuple(index)], src, dim, start, end, step)


@spec("slice_inverse")
def _slice_inverse(d: Drawer) -> Call:
    x = d.tensor(d.shape(min_nd=1))
    dim = d.int(0, len(x.shape) - 1)
    n = x.shape[dim]
    return Call("slice_inverse", (x, dim, d.pick([None, 0, 1, -1]), d.pick([None, n, 1, -1]),
                                  d.pick([1, 2])), {}, slice_inverse_of_slice)


@spec("fill")
def _fill(d: Drawer) -> Call:
    x = d.tensor()
    value = d.scalar(("int", "float", "bool", "special")) if d.bool() else \
        d.tensor(() if d.chance(0.9) else (2,))
    return Call("fill", (x, value), {}, "fn")


@spec("scalar_tensor")
def _scalar_tensor(d: Drawer) -> Call:
    return Call("scalar_tensor", (d.scalar(("int", "float", "bool", "special")),),
                _create_kw(d), "fn")


@spec("range")
def _range(d: Drawer) -> Call:
    vals = [d.pick([0, 1, 3, -2, 2.5, 0.5, 7]) for _ in range(d.int(2, 3))]
    if len(vals) == 3 and d.chance(0.2):
        vals[2] = d.pick([0, -1, float("inf")])
    kw = _create_kw(d, [*INTS, *FLOATS])
    if len(vals) == 3 and 0 < abs(vals[2]) < 1 and getattr(kw.get("dtype"), "name", "") in INTS:
        vals[2] = 1   # a step that truncates to 0 makes PyTorch divide by zero (SIGFPE)
    return Call("range", tuple(vals), kw, "fn")


@spec("empty_permuted")
def _empty_permuted(d: Drawer) -> Call:
    size = _size(d)
    layout = list(range(len(size)))
    d.rng.shuffle(layout)
    if layout and d.chance(0.1):
        layout[0] = d.pick([len(size), layout[-1]])
    return Call("empty_permuted", (size, tuple(layout)), _create_kw(d), "fn", "meta")


# -- histograms, mode, Householder QR, LOBPCG, removed functions --------------------------------
@spec("mode")
def _mode(d: Drawer) -> Call:
    x = d.tensor(low=-2, high=2)     # a small range: repeated values, so counts tie
    return Call("mode", (x, d.dim(x)), {"keepdim": d.bool()}, form(d, "mode"))


def _hist_range(d: Drawer, dims: int) -> Any:
    """(min, max) (a flat list of them per dim for histogramdd): valid mostly, empty, reversed
    or infinite now and then."""
    spans = [d.pick([(-2.0, 3.0), (-1.0, 1.5), (0.0, 0.0), (0.5, 0.5)])
             for _ in range(max(dims, 1))]
    if d.chance(0.15):
        spans[d.int(0, len(spans) - 1)] = d.pick([(1.0, -1.0), (-float("inf"), 1.0)])
    return spans[0] if dims == 0 else [v for span in spans for v in span]


@spec("histogram")
def _histogram(d: Drawer) -> Call:
    x = d.tensor(dtype=d.pick(["float32", "float64"] * 4 + [FLOATS, DTYPES]))
    n = d.int(2, 5) if d.chance(0.9) else d.int(0, 1)
    edges = np.sort(d.values((n,), x.dtype if x.dtype in FLOATS else "float32", specials=False))
    bins = d.pick([d.int(1, 6) if d.chance(0.9) else d.int(-1, 0),
                   Recipe(edges, x.dtype, [], (n,))])
    kw: dict = {}
    if d.chance(0.4) and isinstance(bins, int):
        kw["range"] = _hist_range(d, 0)
    if d.chance(0.4):
        kw["weight"] = d.tensor(x.shape if d.chance(0.9) else (2,),
                                x.dtype if d.chance(0.9) else None, low=0, high=3)
    if d.chance(0.4):
        kw["density"] = d.bool()
    return Call("histogram", (x, bins), kw, form(d, "histogram"))


@spec("histogramdd")
def _histogramdd(d: Drawer) -> Call:
    dims = d.int(1, 3)
    shape = (*d.shape(min_nd=1, max_nd=2), dims) if d.chance(0.9) else d.shape()
    x = d.tensor(shape, dtype=d.pick(["float32", "float64"] * 4 + [FLOATS, DTYPES]))
    kind = d.pick(["int", "ints", "edges"])
    if kind == "int":
        bins: Any = d.int(1, 4) if d.chance(0.9) else 0
    elif kind == "ints":
        bins = [d.int(1, 4) for _ in range(dims if d.chance(0.9) else dims + 1)]
    else:
        bins = []
        for _ in range(dims):
            n = d.int(2, 4) if d.chance(0.95) else 1
            edges = np.sort(d.values((n,), "float64", specials=False))
            bins.append(Recipe(edges, x.dtype, [], (n,)))
    kw: dict = {}
    if d.chance(0.4) and kind != "edges":
        kw["range"] = _hist_range(d, dims)
    if d.chance(0.4):
        kw["weight"] = d.tensor(shape[:-1], x.dtype if d.chance(0.9) else None, low=0, high=3)
    if d.chance(0.4):
        kw["density"] = d.bool()
    return Call("histogramdd", (x, bins), kw, "fn")


def _matrix(d: Drawer, square: bool = False) -> Recipe:
    """A (batch of) matrix with finite values (LAPACK's NaN propagation is unspecified)."""
    batch = d.shape(max_nd=1) if d.chance(0.3) else ()
    m = d.int(0, 4)
    n = m if square else d.int(0, 4)
    dtype = d.pick(["float32", "float64", "complex64", "complex128"] if d.chance(0.9)
                   else DTYPES)
    return d.tensor((*batch, m, n) if d.chance(0.95) else (m,), dtype, specials=False)


@spec("geqrf")
def _geqrf(d: Drawer) -> Call:
    return Call("geqrf", (_matrix(d),), {}, form(d, "geqrf"))


@spec("orgqr")
def _orgqr(d: Drawer) -> Call:
    a = _matrix(d)
    m, n = a.shape[-2:] if len(a.shape) >= 2 else (0, 0)
    k = min(m, n) if d.chance(0.8) else d.int(0, 4)
    if d.chance(0.8) and m < n:    # orgqr needs m >= n: mostly give it a tall matrix
        a = d.tensor((*a.shape[:-2], n, m), a.dtype, specials=False)
        k = min(k, m)
    tau = d.tensor((*a.shape[:-2], k), a.dtype if d.chance(0.9) else None, low=0, high=2,
                   specials=False)
    return Call("orgqr", (a, tau), {}, form(d, "orgqr"))


@spec("ormqr")
def _ormqr(d: Drawer) -> Call:
    a = _matrix(d)
    left = d.bool()
    m = a.shape[-2] if len(a.shape) >= 2 else 0
    k = min(m, a.shape[-1]) if d.chance(0.9) else d.int(0, 4)
    tau = d.tensor((*a.shape[:-2], k), a.dtype if d.chance(0.9) else None, low=0, high=2,
                   specials=False)
    r = d.int(0, 3)
    c_shape = (m, r) if left else (r, m)
    if d.chance(0.1):
        c_shape = (m + 1, r + 1)
    c = d.tensor((*a.shape[:-2], *c_shape), a.dtype if d.chance(0.9) else None,
                 specials=False)
    return Call("ormqr", (a, tau, c), {"left": left, "transpose": d.bool()}, form(d, "ormqr"))


@spec("lobpcg")
def _lobpcg(d: Drawer) -> Call:
    """A symmetric positive-definite A with separated eigenvalues and a fixed start X (LOBPCG
    otherwise starts from randn): the eigenpairs compare up to the eigenvectors' signs."""
    m = d.int(3, 9)
    n = d.int(1, 3)
    dtype = d.pick(["float64", "float32"])
    q, _ = np.linalg.qr(d.rng.uniform(-1, 1, (m, m)))
    spd = (q * (np.arange(1, m + 1) * 1.5) ** 2) @ q.T
    a = Recipe((spd + spd.T).astype(dtype) / 2, dtype, [], (m, m))
    x = d.tensor((m, n), dtype, layout=False, low=-1, high=1, specials=False)
    kw: dict = {"X": x, "largest": d.pick([None, True, False]),
                "method": d.pick([None, "ortho", "basic"]), "niter": d.pick([None, 40])}
    if d.chance(0.3):
        kw["k"] = d.int(1, n)
    return Call("lobpcg", (a,), kw, "fn", "eigenpairs")


@spec("eig", "symeig", "lstsq", "solve")
def _removed(d: Drawer, name: str) -> Call:
    """Functions PyTorch removed (they only raise its RuntimeError, in both libraries)."""
    x = d.tensor(d.shape(min_nd=2, max_nd=2), dtype=d.pick([["float32", "float64"], DTYPES]))
    if name in ("lstsq", "solve"):
        return Call(name, (x, d.tensor(x.shape, x.dtype)), {}, form(d, name))
    return Call(name, (x, d.bool()), {}, form(d, name))


@spec("hash_tensor")
def _hash_tensor(d: Drawer, name: str) -> Call:
    x = d.tensor()
    kw = _red_kwargs(d, x, d.dims(x))
    if d.chance(0.2):
        kw["mode"] = d.pick([0, 1])
    return Call(name, (x,), kw, form(d, name))
