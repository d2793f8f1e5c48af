"""Autocast: ops run in a lower-precision dtype where that is safe, PyTorch's policy.

Inside ``gt.autocast(device_type, dtype)``, the ops of three lists cast their floating-point
tensor arguments on that device type before running (PyTorch's autocast op lists):

- ``lower``: matmul, linear, convolutions, bmm/baddbmm/addmm... run in ``dtype`` (float16 or
  bfloat16): float32 inputs are cast, float64 ones are left alone;
- ``fp32``: exp, log, pow, sum, prod, cumsum, softmax, norms, losses... run in float32 (16-bit
  inputs are cast up), where 16 bits lose too much;
- ``promote``: addcmul, addcdiv, atan2, cross, dot... cast every input to the widest floating
  dtype among them.

Every other op runs in its inputs' dtypes with the usual promotion. The casts are ordinary
differentiable ``.to(dtype)`` calls, so gradients reach float32 parameters in float32. A cast
of a leaf tensor that requires grad (a parameter) is cached until the outermost autocast
region exits, so a weight used several times is cast once. An op's own inner ops do not cast
again (PyTorch runs the op below its autocast layer).

The lists differ by device type (``TABLES``: on the CPU, only losses and a few reductions run
in float32, and cat/stack promote). Ops get their policy in two ways: op-registry frontends by
name (``wrap_ops``, called before the Tensor methods are installed) and nn.functional
functions at the end of their module (``apply``). The state
is per thread and per device type, as PyTorch's; with no region active anywhere, a wrapped op
costs one check of a module-level counter.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from gputensor import _dtype as D

# PyTorch's autocast op lists (aten/src/ATen/autocast_mode.cpp), for the ops and functions
# gputensor has. They differ by device type: on the CPU only losses and a few reductions are
# kept in float32, and cat/stack promote.
_LOWER = ("matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "linear", "conv1d", "conv2d",
          "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
          "scaled_dot_product_attention")
_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
           "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
           "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss", "poisson_nll_loss",
           "triplet_margin_loss", "multilabel_soft_margin_loss")
TABLES: dict[str, dict[str, str]] = {
    "cuda": {**dict.fromkeys((*_LOWER, "addmv", "mv"), "lower"),
             **dict.fromkeys(("pow", "exp", "expm1", "log", "log10", "log1p", "log2",
                              "reciprocal", "rsqrt", "sinh", "cosh", "tan", "acos", "asin",
                              "cumprod", "cumsum", "prod", "sum", "norm", "softmax",
                              "log_softmax", "softmin", "softplus", "cdist", "layer_norm",
                              "group_norm", "cosine_similarity", "gaussian_nll_loss",
                              *_LOSSES), "fp32"),
             **dict.fromkeys(("addcdiv", "addcmul", "atan2", "cross", "dot", "index_put",
                              "scatter_add", "tensordot"), "promote")},
    "cpu": {**dict.fromkeys(_LOWER, "lower"),
            **dict.fromkeys(("prod", "cdist", *_LOSSES), "fp32"),
            **dict.fromkeys(("cat", "stack", "index_copy"), "promote")},
}
DEFAULT_DTYPES = {"cuda": D.float16, "cpu": D.bfloat16}
# Device types whose autocast state PyTorch keeps (torch.set_autocast_ipu_enabled, ...) though
# gputensor has no such device: readable and settable, never applied to an op.
STATE_ONLY_DTYPES = {"ipu": D.float16, "xla": D.bfloat16}
SUPPORTED_DTYPES = {"cuda": (D.float16, D.bfloat16), "cpu": (D.bfloat16, D.float16)}


class _State(threading.local):
    """This thread's autocast state: per device type (enabled, dtype), the depth of policy
    ops running (inner ops do not cast again), the nesting of regions and the cast cache."""

    def __init__(self) -> None:
        self.enabled = dict.fromkeys((*DEFAULT_DTYPES, *STATE_ONLY_DTYPES), False)
        self.dtype = {**DEFAULT_DTYPES, **STATE_ONLY_DTYPES}
        self.cache_enabled = True
        self.depth = 0
        self.nesting = 0
        self.cache: dict[int, tuple[Any, Any]] = {}


_state = _State()
_active = 0  # regions enabled right now, over all threads: the fast check of every policy op
_active_lock = threading.Lock()


def _set_active(delta: int) -> None:
    global _active
    with _active_lock:
        _active += delta


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (None: CUDA, PyTorch's old meaning)."""
    return _state.enabled.get("cuda" if device_type is None else device_type, False)


def set_autocast_enabled(device_type: str, enabled: bool | None = None) -> None:
    """Turn autocast on or off for ``device_type`` in this thread (PyTorch's low-level switch;
    ``set_autocast_enabled(enabled)`` alone means CUDA)."""
    if enabled is None:
        device_type, enabled = "cuda", bool(device_type)
    _check_device_type(device_type)
    was = _state.enabled[device_type]
    _state.enabled[device_type] = bool(enabled)
    if was != bool(enabled):
        _set_active(1 if enabled else -1)


def get_autocast_dtype(device_type: str) -> D.dtype:
    _check_device_type(device_type)
    return _state.dtype[device_type]


def set_autocast_dtype(device_type: str, dtype: D.dtype) -> None:
    _check_device_type(device_type)
    _state.dtype[device_type] = dtype


def clear_autocast_cache() -> None:
    _state.cache.clear()


def _check_device_type(device_type: Any, state_only: bool = True) -> None:
    if device_type not in DEFAULT_DTYPES and not (state_only and device_type in STATE_ONLY_DTYPES):
        raise RuntimeError(f"User specified an unsupported autocast device_type "
                           f"'{device_type}'; gputensor autocasts 'cuda' and 'cpu'")


# -- casting -------------------------------------------------------------------------------------
def _is_tensor(x: Any) -> bool:
    return hasattr(x, "_storage") and hasattr(x, "is_floating_point")


def _cast(t: Any, dtype: D.dtype) -> Any:
    if t.dtype is dtype:
        return t
    cacheable = _state.cache_enabled and t.requires_grad and t.grad_fn is None
    if cacheable:
        hit = _state.cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1].dtype is dtype:
            return hit[1]
    out = t.to(dtype)
    if cacheable:
        _state.cache[id(t)] = (t, out)  # holds t: its id stays unique while cached
    return out


def _target(name: str, t: Any, widest: dict[str, D.dtype]) -> D.dtype | None:
    """The dtype ``t`` runs in when op ``name`` autocasts (None: as it is)."""
    if not t.is_floating_point() or t.is_sparse:
        return None
    dev = t.device.type
    if not _state.enabled.get(dev, False):
        return None
    policy = TABLES[dev].get(name)
    if policy is None:
        return None
    if policy == "lower":
        return None if t.dtype is D.float64 else _state.dtype[dev]
    if policy == "fp32":
        return D.float32 if t.dtype in (D.float16, D.bfloat16) else None
    return widest.get(dev)


def _widest(args: tuple, kwargs: dict) -> dict[str, D.dtype]:
    out: dict[str, D.dtype] = {}
    for a in (*args, *kwargs.values()):
        for t in (a if type(a) is list or type(a) is tuple else (a,)):
            if _is_tensor(t) and t.is_floating_point():
                dev = t.device.type
                cur = out.get(dev)
                out[dev] = t.dtype if cur is None else D.promote_types(cur, t.dtype)
    return out


def _cast_args(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    widest = _widest(args, kwargs) if "promote" in (TABLES["cuda"].get(name),
                                                    TABLES["cpu"].get(name)) else {}

    def one(a: Any) -> Any:
        if _is_tensor(a):
            dt = _target(name, a, widest)
            return a if dt is None else _cast(a, dt)
        if type(a) is list or type(a) is tuple:  # e.g. a list of tensors
            return type(a)(one(b) for b in a)
        return a

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def autocasting(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``fn`` is op ``name`` of the autocast tables (a no-op for names in none)."""
    if not any(name in table for table in TABLES.values()):
        return lambda fn: fn

    def deco(fn: Callable) -> Callable:
        if getattr(fn, "_gt_autocast", None) is not None:
            return fn

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            if not _active:
                return fn(*args, **kwargs)
            st = _state
            if st.depth or not (st.enabled["cuda"] or st.enabled["cpu"]):
                return fn(*args, **kwargs)
            args, kwargs = _cast_args(name, args, kwargs)
            st.depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                st.depth -= 1

        run._gt_autocast = name  # type: ignore[attr-defined]
        return run
    return deco


def apply(namespace: dict[str, Any], names: tuple[str, ...]) -> None:
    """Give the functions ``names`` of a module's ``namespace`` their autocast policy (at the
    end of the module, so every importer gets the wrapped function)."""
    for name in names:
        namespace[name] = autocasting(name)(namespace[name])


def wrap_ops(ops: dict[str, Any]) -> None:
    """Give the op-registry frontends in the tables their policy (before the namespace and
    Tensor methods take the frontends)."""
    for name in sorted({n for table in TABLES.values() for n in table}):
        op = ops.get(name)
        if op is None or op.frontend is None:
            continue
        original = op.frontend
        op.frontend = autocasting(name)(original)
        # The module that declared the op hands out the wrapped frontend too (nn.functional
        # imports some ops from there: F.conv2d must be gt.conv2d, autocast included).
        module = sys.modules.get(getattr(original, "__module__", ""))
        if module is not None and getattr(module, name, None) is original:
            setattr(module, name, op.frontend)


# -- the context manager -----------------------------------------------------------------------
class autocast:
    """``with gt.autocast(device_type, dtype=None, enabled=True, cache_enabled=None):`` (also
    a decorator). ``dtype`` defaults to float16 on CUDA and bfloat16 on the CPU."""

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        _check_device_type(device_type, state_only=False)
        self.device = device_type
        self.fast_dtype = DEFAULT_DTYPES[device_type] if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        if self._enabled and device_type == "cuda":
            from gputensor import cuda

            if not cuda.is_available():
                warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                              "Disabling", stacklevel=2)
                self._enabled = False
        if self._enabled and self.fast_dtype not in SUPPORTED_DTYPES[device_type]:
            names = ", ".join(str(d) for d in SUPPORTED_DTYPES[device_type])
            warnings.warn(f"In {device_type} autocast, but the target dtype {self.fast_dtype} "
                          f"is not supported ({names} are). Disabling autocast.", stacklevel=2)
            self._enabled = False

    def __enter__(self) -> autocast:
        st = _state
        self._prev = (st.enabled[self.device], st.dtype[self.device], st.cache_enabled)
        st.nesting += 1
        st.dtype[self.device] = self.fast_dtype
        st.cache_enabled = self._cache_enabled
        set_autocast_enabled(self.device, self._enabled)
        return self

    def __exit__(self, *exc: object) -> None:
        st = _state
        enabled, dtype, cache = self._prev
        set_autocast_enabled(self.device, enabled)
        st.dtype[self.device] = dtype
        st.cache_enabled = cache
        st.nesting -= 1
        if st.nesting == 0:
            st.cache.clear()  # PyTorch drops its cast cache when the outermost region exits

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(self.device, self.fast_dtype, self._enabled,
                                self._cache_enabled):
                return fn(*args, **kwargs)
        return decorated


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`{old}(args...)` is deprecated. Please use `{new}(args...)` instead.",
                  FutureWarning, stacklevel=3)


class cuda_autocast(autocast):
    """``gt.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True)``
    (deprecated in PyTorch, still used by many programs)."""

    def __init__(self, enabled: bool = True, dtype: Any = D.float16,
                 cache_enabled: bool = True) -> None:
        _deprecated("torch.cuda.amp.autocast", "torch.amp.autocast('cuda', args...)")
        super().__init__("cuda", dtype, enabled, cache_enabled)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with autocast("cuda", self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return decorated


class cpu_autocast(autocast):
    """``gt.cpu.amp.autocast(enabled=True, dtype=bfloat16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype: Any = D.bfloat16,
                 cache_enabled: bool = True) -> None:
        _deprecated("torch.cpu.amp.autocast", "torch.amp.autocast('cpu', args...)")
        super().__init__("cpu", dtype, enabled, cache_enabled)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with autocast("cpu", self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return decorated


# -- custom autograd functions ------------------------------------------------------------------
def custom_fwd(fwd: Callable | None = None, *, device_type: str,
               cast_inputs: Any = None) -> Callable:
    """For a custom Function's ``forward``: with ``cast_inputs``, run it with autocast off and
    its floating tensors on ``device_type`` cast to ``cast_inputs`` when autocast was on;
    without, run it in the autocast state of the caller (and remember it for backward)."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    _check_device_type(device_type, state_only=False)

    @functools.wraps(fwd)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0] if args else None
        on = is_autocast_enabled(device_type)
        if ctx is not None:
            ctx._fwd_used_autocast = on
            ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None or not on:
            return fwd(*args, **kwargs)

        def one(a: Any) -> Any:
            if _is_tensor(a) and a.is_floating_point() and a.device.type == device_type:
                return a.to(cast_inputs)
            return a

        with autocast(device_type, enabled=False):
            return fwd(*(one(a) for a in args), **{k: one(v) for k, v in kwargs.items()})
    return run


def custom_bwd(bwd: Callable | None = None, *, device_type: str) -> Callable:
    """For a custom Function's ``backward``: run it in the autocast state its forward ran in."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _check_device_type(device_type, state_only=False)

    @functools.wraps(bwd)
    def run(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        on = getattr(ctx, "_fwd_used_autocast", False)
        dtype = getattr(ctx, "_dtype", DEFAULT_DTYPES[device_type])
        with autocast(device_type, dtype=dtype, enabled=on):
            return bwd(ctx, *args, **kwargs)
    return run
