"""CPU elementwise kernels generated from each op's one expression.

For an op and a pattern of operands (array or scalar), two kinds of Numba kernel are generated:
a flat 1-D loop for the contiguous, same-shape case (parallel above a size threshold), and an
N-d nested loop over broadcast, strided views after adjacent dims are merged. NumPy views of
the tensors are passed straight in (no copies) unless an operand's dtype differs from the
compute dtype, or the dtype is one Numba cannot compute in (float16/bfloat16 compute in float32).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import CPU as _CPU_DEVICE
from gputensor._tensor import _STRIDES_CACHE, Tensor, contiguous_strides
from gputensor._threads import granted_threads
from gputensor.kernels.allocation import wrap_cpu
from gputensor.kernels.layout import broadcast_strides, is_dense, merge_dims
from gputensor.kernels.registry import CPU, OpDef
from gputensor.storage.allocator import host_bytes

from .codegen import load_module, vocabulary_hash

PARALLEL_THRESHOLD = 1 << 17
HEAVY_FLOPS = 10           # flops per element from which an op is a heavy one
HEAVY_PARALLEL_THRESHOLD = 1 << 15
INPUT_NAMES = ("a", "b", "c")
# Numba cannot compute in these; kernels run in float32 and the result is cast back.
_NUMBA_COMPUTE = {D.float16: np.dtype(np.float32), D.bfloat16: np.dtype(np.float32)}
# Ops whose expression is one correctly rounded IEEE operation in float32/float64 (add/sub
# with alpha 1): NumPy's ufunc gives the same bits and costs ~1 us less to call than a Numba
# kernel, which is most of a small op's time. Used on the contiguous fast path only.
_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "true_divide": np.divide}
_UFUNC_DTYPES = (D.float32, D.float64)
_F32, _F64 = _UFUNC_DTYPES
# (a Python int outside D.SCALAR_INT_MIN..END: the lanes decline, the frontend's plan raises)
_INT_MIN, _INT_END = D.SCALAR_INT_MIN, D.SCALAR_INT_END
# shape -> its (cached) contiguous strides where the binary lane may run (non-empty, at least
# 1-d, below the parallel size), else False; tensors from wrap_cpu hold that very tuple.
_LANE_STRIDES: dict[tuple[int, ...], Any] = {}


def _lane_layout(a: Any) -> Any:
    """``a``'s strides when it may take a lane (a float32/float64 CPU tensor, contiguous, at
    least 1-d and below the parallel size), else None."""
    if type(a) is not Tensor:
        return None
    dt = a._dtype
    if dt is not _F32 and dt is not _F64:
        return None
    st = _LANE_STRIDES.get(a._shape)
    if st is None:
        st = _lane_strides(a._shape)
    return st if (a._stride is st or a._stride == st) and a._storage.device is _CPU_DEVICE \
        else None


def _lane_strides(shape: tuple[int, ...]) -> Any:
    st = contiguous_strides(shape)
    if not shape or not 0 < math.prod(shape) < PARALLEL_THRESHOLD or \
            _STRIDES_CACHE.get(shape) is not st:
        st = False
    if len(_LANE_STRIDES) < 4096:
        _LANE_STRIDES[shape] = st
    return st

try:  # NumPy 2's errstate is this context variable: set directly, it costs ~0.3 us, not 1.3
    from numpy._core._ufunc_config import _extobj_contextvar as _FP_STATE
    from numpy._core.umath import _make_extobj
    _FP_QUIET = _make_extobj(all="ignore")
except ImportError:  # pragma: no cover - other NumPy layouts take np.errstate
    _FP_STATE = None


def _quiet_ufunc(ufunc: np.ufunc, arrays: list[Any], out: np.ndarray) -> None:
    """``ufunc(*arrays, out=out)`` without NumPy's floating-point warnings: PyTorch says
    nothing about 1/0, inf - inf or an overflow to inf."""
    if _FP_STATE is None:
        with np.errstate(all="ignore"):
            ufunc(*arrays, out=out)
        return
    token = _FP_STATE.set(_FP_QUIET)
    try:
        ufunc(*arrays, out=out)
    finally:
        _FP_STATE.reset(token)


def _ufunc_operands(inputs: list[Any], compute: D.dtype) -> list[Any] | None:
    """The operands as NumPy arrays (strided, broadcastable views) and scalars of the compute
    dtype, or None when one needs a cast (the Numba kernels convert those)."""
    arrays: list[Any] = []
    for x in inputs:
        tx = type(x)
        if tx is float or tx is int:
            arrays.append(_scalar(x, compute.np_dtype))
        elif isinstance(x, Tensor) and x._dtype is compute:
            arrays.append(x._host)
        else:
            return None
    return arrays


def _unscaled(params: tuple, compute: D.dtype) -> bool:
    """Whether add/sub's ``alpha * b`` is ``b`` itself (NumPy's ufunc may then run): alpha 1
    on real dtypes. PyTorch multiplies a complex b by alpha even when it is 1, so an
    infinite part next to a NaN one spreads NaN ((nan - inf j) (1 + 0j) is nan + nan j)."""
    return not params or (params[0] == 1 and not compute.is_complex)


def _kernel_source(op: OpDef, pattern: tuple[bool, ...], ndim: int, parallel: bool,
                   fixed: tuple = ()) -> str:
    """Source of one kernel: pattern[i] says whether input i is an array (else a scalar);
    ``fixed`` holds the values of ``op.specialize``'s params, constants of this kernel (the
    arguments keep their places, so every kernel of the op is called alike)."""
    names = INPUT_NAMES[:op.arity]
    args = ["out"] + [n.upper() if arr else n for n, arr in zip(names, pattern, strict=True)]
    args += list(op.params)
    idx = ", ".join(f"i{k}" for k in range(ndim)) if ndim else "0"
    lines = [
        "import numpy as np",
        "from numba import njit, prange",
        "from gputensor.kernels.cpu.scalar_fns import *  # noqa: F403",
        f"# vocabulary {vocabulary_hash()}",
        "",
        f"@njit(cache=True, parallel={parallel}, error_model='numpy')",
        f"def kernel({', '.join(args)}):",
    ]
    lines += [f"    {name} = {int(value)!r}" for name, value in zip(op.specialize, fixed,
                                                                   strict=True)]
    indent = "    "
    for k in range(ndim):
        rng = "prange" if (k == 0 and parallel) else "range"
        lines.append(f"{indent}for i{k} in {rng}(out.shape[{k}]):")
        indent += "    "
    for n, arr in zip(names, pattern, strict=True):
        if arr:
            lines.append(f"{indent}{n} = {n.upper()}[{idx}]")
    lines.append(f"{indent}out[{idx}] = {op.expr}")
    return "\n".join(lines) + "\n"


def _scalar(value: Any, cdt: np.dtype) -> Any:
    """A Python/NumPy scalar in the compute dtype; out-of-range ints wrap like PyTorch's casts,
    and a float past a narrower float's range is its infinity, without NumPy's warning."""
    try:
        if cdt in _NARROW_FLOATS:
            with np.errstate(over="ignore"):
                return cdt.type(value)
        return cdt.type(value)
    except OverflowError:
        return np.array(value).astype(cdt)[()]


_NARROW_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.complex64))


def _numbers_as(operands: list[Any], compute: D.dtype) -> list[Any]:
    """The Python numbers among ``operands`` as scalars of the compute dtype (arrays kept)."""
    return [x if type(x) is not float and type(x) is not int else _scalar(x, compute.np_dtype)
            for x in operands]


def _to_compute(a: np.ndarray, compute: D.dtype, cdt: np.dtype) -> np.ndarray:
    """An array operand in the kernel's dtype. An operand of another dtype than a
    float16/bfloat16 compute dtype is rounded to it first (through float32, as PyTorch converts
    its operands), so int32 70000 is inf in float16 arithmetic, not 70000."""
    if compute in _NUMBA_COMPUTE and a.dtype != compute.np_dtype:
        with np.errstate(over="ignore"):    # overflow to inf is the intended rounding
            a = a.astype(np.float32).astype(compute.np_dtype)
    return a.astype(cdt)


def memory_flat(t: Tensor) -> np.ndarray:
    """A dense CPU tensor's elements as one 1-D array in memory order (no copy)."""
    n = math.prod(t._shape)
    if not n:   # an empty view's offset may lie past its storage
        return np.empty(0, t._dtype.np_dtype)
    return np.ndarray((n,), t._dtype.np_dtype, host_bytes(t._storage._buf),
                      t._offset * t._dtype.itemsize)


def _broadcast_strides(a: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Byte strides of ``a`` broadcast to ``shape`` (0 where it repeats)."""
    return broadcast_strides(shape, a.shape, a.strides)


def make_kernel(op: OpDef) -> Callable[..., None]:
    cache: dict[tuple, Callable] = {}

    fixed_at = tuple(op.params.index(name) for name in op.specialize)
    # Ops of many flops per element (transcendentals) go parallel sooner: starting the prange
    # costs ~4 us on 2 cores, and exp of 64K float32 ran in 15 us on 2 threads against 23 on one.
    heavy = getattr(op.cost, "flops_per_element", 0) >= HEAVY_FLOPS
    parallel_from = HEAVY_PARALLEL_THRESHOLD if heavy else PARALLEL_THRESHOLD

    def goes_parallel(n: int) -> bool:
        """Whether n elements run in the prange kernel (on one thread it only costs more)."""
        return n >= PARALLEL_THRESHOLD or (n >= parallel_from and granted_threads() > 1)

    def get(pattern: tuple[bool, ...], ndim: int, parallel: bool, params: tuple = ()
            ) -> Callable:
        fixed = tuple(int(params[i]) for i in fixed_at)
        key = (pattern, ndim, parallel, fixed)
        fn = cache.get(key)
        if fn is None:
            src = _kernel_source(op, pattern, ndim, parallel, fixed)
            fn = cache[key] = load_module(f"ew_{op.name}", src).kernel
        return fn

    all_arrays = (True,) * op.arity
    serial_flat: list[Callable] = []  # the most common kernel, looked up once
    ufunc = _UFUNCS.get(op.name)
    # A same-dtype copy is data movement only: NumPy's strided copy loops run permuted and
    # broadcast copies 2-7x faster than the generated kernel's nested loops below the size
    # where the kernel goes parallel.
    plain_copy = op.name == "_copy"
    param_cache: dict[tuple, tuple] = {}  # scalar params converted to the compute dtype
    memo: list[tuple] = [(None, None, None)]  # the last (params, compute, converted)

    def run(out: Tensor, inputs: list[Any], params: tuple, compute: D.dtype) -> None:
        o = out._np if out._np_buf is out._storage._buf else out._host
        if plain_copy and o.size < PARALLEL_THRESHOLD:
            src = inputs[0]
            if isinstance(src, Tensor) and src._dtype is out._dtype:
                if o.size:
                    np.copyto(o, src._host)
                return
        if params:
            last = memo[0]  # one tuple, swapped whole, so threads never see a torn entry
            if params is last[0] and compute is last[1]:  # e.g. the op's defaults, call after call
                params = last[2]
            else:
                converted = param_cache.get((params, compute))
                if converted is None:
                    if len(param_cache) > 256:
                        param_cache.clear()
                    pdt = _NUMBA_COMPUTE.get(compute, compute.np_dtype)
                    converted = param_cache[params, compute] = tuple(_scalar(p, pdt)
                                                                     for p in params)
                memo[0] = (params, compute, converted)
                params = converted
        # Fast path: inputs with the output's shape and strides, in its dtype, the strides
        # contiguous (identity checks: contiguous strides come from one cache) or a dense
        # permutation (an output that keeps its inputs' layout): one flat loop over memory.
        shape, stride = out._shape, out._stride
        contiguous = _STRIDES_CACHE.get(shape) is stride
        if out._dtype is compute and compute not in _NUMBA_COMPUTE and \
                (contiguous or is_dense(shape, stride)):
            arrays = []
            scalars = False
            for x in inputs:
                tx = type(x)
                if tx is float or tx is int:
                    arrays.append(_scalar(x, compute.np_dtype))
                    scalars = True
                    continue
                if not isinstance(x, Tensor) or x._dtype is not compute or x._shape != shape or \
                        (x._stride is not stride and x._stride != stride):
                    break
                if contiguous:
                    a = x._np if x._np_buf is x._storage._buf else x._host
                    arrays.append(a if a.ndim == 1 else a.reshape(-1))
                else:
                    arrays.append(memory_flat(x))
            else:
                n = o.size
                if not n:
                    return  # nothing to compute, so nothing to compile
                if not contiguous:
                    o = memory_flat(out)
                if ufunc is not None and compute in _UFUNC_DTYPES and \
                        _unscaled(params, compute) and n < PARALLEL_THRESHOLD:
                    _quiet_ufunc(ufunc, arrays, o if o.ndim == 1 else o.reshape(-1))
                    return
                par = goes_parallel(n)
                if scalars:
                    fn = get(tuple(type(x) is not float and type(x) is not int
                                   for x in inputs), 1, par, params)
                elif par or fixed_at:
                    fn = get(all_arrays, 1, par, params)
                elif serial_flat:
                    fn = serial_flat[0]
                else:
                    fn = get(all_arrays, 1, False)
                    serial_flat.append(fn)
                fn(o if o.ndim == 1 else o.reshape(-1), *arrays, *params)
                return
        if ufunc is not None and compute in _UFUNC_DTYPES and out._dtype is compute and \
                _unscaled(params, compute) and o.size < PARALLEL_THRESHOLD:
            # Broadcast or strided small operands: NumPy's broadcasting loops, the same IEEE
            # operation (the Numba path's views and strided kernel cost ~25 us at 64x64)
            arrays = _ufunc_operands(inputs, compute)
            if arrays is not None:
                if o.size:
                    _quiet_ufunc(ufunc, arrays, o)
                return
        cdt = _NUMBA_COMPUTE.get(compute, compute.np_dtype)
        # Numba cannot store float16/bfloat16: compute into a float32 buffer and cast back.
        target = np.empty(o.shape, np.float32) if out.dtype in _NUMBA_COMPUTE else o
        shape = o.shape
        n = o.size
        operands = []
        pattern = []
        flat = o.flags.c_contiguous
        for x in inputs:
            if isinstance(x, Tensor):
                a = x._host
                if a.size == 1 and n != 1:  # a broadcast scalar, in the compute dtype first
                    value = a.reshape(-1)[0]   # (float16 math sees int32 2**31 - 1 as inf)
                    if cdt is not compute.np_dtype and a.dtype != compute.np_dtype:
                        with np.errstate(over="ignore"):
                            value = _scalar(value, compute.np_dtype)
                    operands.append(_scalar(value, cdt))
                    pattern.append(False)
                    continue
                if a.dtype != cdt:
                    a = _to_compute(a, compute, cdt)
                flat = flat and a.shape == shape and a.flags.c_contiguous
                operands.append(a)
                pattern.append(True)
            else:
                operands.append(_scalar(x, cdt))
                pattern.append(False)
        pattern = tuple(pattern)
        if n == 0:
            return
        if flat:
            fn = get(pattern, 1, goes_parallel(n), params)
            args = [a.reshape(-1) if p else a for a, p in zip(operands, pattern, strict=True)]
            fn(target.reshape(-1), *args, *params)
        else:
            # Broadcast by zero strides on the original (writeable) arrays: read-only
            # broadcast_to views would make Numba compile a second signature per kernel.
            arrays = [a for a, p in zip(operands, pattern, strict=True) if p]
            all_strides = [target.strides] + [_broadcast_strides(a, shape) for a in arrays]
            ts = target.strides
            if any(ts[d] < ts[d + 1] for d in range(len(ts) - 1)):
                # A permuted output (it keeps its inputs' layout): loop in its memory order,
                # so dims that are dense in every operand merge into one.
                order = sorted(range(len(ts)), key=ts.__getitem__, reverse=True)
                shape = tuple(shape[d] for d in order)
                all_strides = [tuple(st[d] for d in order) for st in all_strides]
            mshape, mstrides = merge_dims(shape, all_strides)
            views = [np.lib.stride_tricks.as_strided(a, mshape, st)
                     for a, st in zip([target] + arrays, mstrides, strict=True)]
            it = iter(views[1:])
            args = [next(it) if p else a for a, p in zip(operands, pattern, strict=True)]
            fn = get(pattern, len(mshape), goes_parallel(n), params)
            fn(views[0], *args, *params)
        if target is not o:
            with np.errstate(over="ignore"):   # float32 past float16's range is inf, silently
                o[...] = target

    def bind(out: Tensor, inputs: list[Any], params: tuple, compute: D.dtype
             ) -> Callable[[], None] | None:
        """The fast path's call resolved once for tensors whose buffers stay put (gt.compile's
        replay): its arrays, converted params and kernel bound; None off the fast path."""
        shape = out._shape
        if out._dtype is not compute or compute in _NUMBA_COMPUTE or \
                out._stride != contiguous_strides(shape) or not out.numel():
            return None
        arrays, pattern = [], []
        for x in inputs:
            if type(x) is float or type(x) is int:
                arrays.append(_scalar(x, compute.np_dtype))
                pattern.append(False)
            elif isinstance(x, Tensor) and x._dtype is compute and x._shape == shape and \
                    x._stride == out._stride:
                arrays.append(x._host.reshape(-1))
                pattern.append(True)
            else:
                return None
        pdt = _NUMBA_COMPUTE.get(compute, compute.np_dtype)
        converted = tuple(_scalar(p, pdt) for p in params)
        fn = get(tuple(pattern), 1, goes_parallel(out.numel()), converted)
        args = (out._host.reshape(-1), *arrays, *converted)
        return lambda: fn(*args)

    def allocating(inputs: tuple, params: tuple, compute: D.dtype) -> Tensor | None:
        """The op's result as a new tensor straight from NumPy's ufunc (no separate empty, no
        out= plumbing), for the frontend's fast path: C-contiguous tensor operands of one
        shape (at least 1-d, below the parallel size) in the compute dtype that is also the
        result's, Python numbers (never with float16/bfloat16 tensors: the frontend sends
        those through its narrowing rule), alpha 1. NumPy's and ml_dtypes' 16-bit loops
        compute each operation in float and round once, as PyTorch's kernels do. None where
        ``run`` must serve."""
        if not _unscaled(params, compute):
            return None
        shape = None
        arrays = []
        for x in inputs:
            tx = type(x)
            if tx is float or tx is int:
                arrays.append(x)   # (rounded to the dtype below, quietly)
                continue
            if x._stride is not _STRIDES_CACHE.get(x._shape) or x._dtype is not compute:
                return None
            if shape is None:
                shape = x._shape
            arrays.append(x._np if x._np_buf is x._storage._buf else x._host)
        if not shape or math.prod(shape) >= PARALLEL_THRESHOLD:
            return None  # 0-d (NumPy returns a scalar), empty or big: run's kernels
        if _FP_STATE is None:
            with np.errstate(all="ignore"):
                return wrap_cpu(ufunc(*_numbers_as(arrays, compute)), compute, shape)
        token = _FP_STATE.set(_FP_QUIET)
        try:
            result = ufunc(*_numbers_as(arrays, compute))
        finally:
            _FP_STATE.reset(token)
        return wrap_cpu(result, compute, shape)

    def make_lane(record: Callable[[Tensor, Any, Any], None]) -> Callable:
        """The whole binary op for the frontend's commonest call, checks included, in one
        pass; ``record(result, a, b)`` is called when an operand requires grad."""

        def lane(a: Any, b: Any) -> Tensor | None:
            """``a`` a float32/float64 CPU tensor, contiguous, at least 1-d and below the
            parallel size, ``b`` a tensor of the same dtype, shape and strides or a Python
            number: the result. None for anything else (the frontend's plan runs)."""
            st = _lane_layout(a)
            if st is None:
                return None
            dt, shape, grad = a._dtype, a._shape, a._requires_grad
            tb = type(b)
            if tb is Tensor:
                if b._dtype is not dt or b._shape != shape or b._stride != st or \
                        b._storage.device is not _CPU_DEVICE:
                    return None
                y = b._np if b._np_buf is b._storage._buf else b._host
                grad = grad or b._requires_grad
            elif tb is float or (tb is int and _INT_MIN <= b < _INT_END):
                y = b   # (rounded to the dtype below, quietly: 1e300 is inf in float32)
            else:
                return None
            x = a._np if a._np_buf is a._storage._buf else a._host
            if _FP_STATE is None:
                with np.errstate(all="ignore"):
                    result = ufunc(x, y if y is not b else dt.np_dtype.type(b))
            else:
                token = _FP_STATE.set(_FP_QUIET)
                try:
                    result = ufunc(x, y if y is not b else dt.np_dtype.type(b))
                finally:
                    _FP_STATE.reset(token)
            t = wrap_cpu(result, dt, shape, st)
            if grad:
                record(t, a, b)
            return t
        return lane

    def inplace_lane(a: Any, b: Any) -> Tensor | None:
        """``a.<op>_(b)`` for the same operands as the lane, ``b`` in other memory than
        ``a``'s and no operand (nor ``a``'s base) requiring grad: ``a``, written. None for
        anything else (the in-place frontend's checks and autograd run)."""
        st = _lane_layout(a)
        if st is None or a._requires_grad or (a._base is not None and a._base._requires_grad):
            return None
        dt, shape = a._dtype, a._shape
        tb = type(b)
        if tb is Tensor:
            if b._dtype is not dt or b._shape != shape or b._stride != st or \
                    b._storage.device is not _CPU_DEVICE or b._requires_grad or \
                    b._storage is a._storage:
                return None
            y = b._np if b._np_buf is b._storage._buf else b._host
        elif tb is float or (tb is int and _INT_MIN <= b < _INT_END):
            y = b
        else:
            return None
        x = a._np if a._np_buf is a._storage._buf else a._host
        if _FP_STATE is None:
            with np.errstate(all="ignore"):
                ufunc(x, y if y is not b else dt.np_dtype.type(b), out=x)
        else:
            token = _FP_STATE.set(_FP_QUIET)
            try:
                ufunc(x, y if y is not b else dt.np_dtype.type(b), out=x)
            finally:
                _FP_STATE.reset(token)
        a._storage._version += 1
        return a

    def make_unary_lane(record: Callable[[Tensor, Any], None] | None) -> Callable:
        """The whole unary op for the frontend's commonest call; ``record(result, a)`` is
        called when ``a`` requires grad (None: such calls take the frontend)."""

        def unary_lane(a: Any) -> Tensor | None:
            """``<op>(a)`` of a parameterless unary op whose result keeps the dtype, for ``a``
            as the binary lane takes it: the flat serial kernel on a new array. None for
            anything else (the frontend's fast path or plan runs)."""
            st = _lane_layout(a)
            if st is None or (a._requires_grad and record is None):
                return None
            x = a._np if a._np_buf is a._storage._buf else a._host
            if heavy and goes_parallel(x.size):
                fn = get(all_arrays, 1, True)   # the prange kernel, without the frontend
            else:
                fn = serial_flat[0] if serial_flat else None
                if fn is None:
                    fn = get(all_arrays, 1, False)
                    serial_flat.append(fn)
            dt, shape = a._dtype, a._shape
            o = np.empty(shape, dt.np_dtype)
            fn(o if len(shape) == 1 else o.reshape(-1), x if len(shape) == 1 else x.reshape(-1))
            t = wrap_cpu(o, dt, shape, st)
            if a._requires_grad:
                record(t, a)
            return t
        return unary_lane

    run._gt_elementwise_op = op  # type: ignore[attr-defined]  (what gt.compile fuses)
    run.bind = bind  # type: ignore[attr-defined]
    if op.arity == 1 and not op.params and not plain_copy:
        run.make_unary_lane = make_unary_lane  # type: ignore[attr-defined]
    if ufunc is not None:
        run.allocating = allocating  # type: ignore[attr-defined]
        run.make_lane = make_lane  # type: ignore[attr-defined]
        run.inplace_lane = inplace_lane  # type: ignore[attr-defined]
    return run


CPU.elementwise_factory = make_kernel
