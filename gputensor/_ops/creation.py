"""Tensor creation: gt.tensor, from_numpy, zeros/ones/full/empty, ranges, eye, *_like."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor import _memory_format as MF
from gputensor._compile.state import host_constant, host_read
from gputensor._device import CPU
from gputensor._device import device as Device
from gputensor._tensor import Tensor, contiguous_strides, new_shape
from gputensor.kernels.allocation import empty_with_strides
from gputensor.storage.untyped import UntypedStorage

from ._core import empty as alloc
from ._core import op, resolve_device, tensor_method
from ._scalar_range import check_creation_data, checked_fill_value
from .copying import convert


def _dtype_or_default(dtype: Any) -> D.dtype:
    return D.get_default_dtype() if dtype is None else D.to_dtype(dtype)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _host_to(arr: np.ndarray, dt: D.dtype, dev: Device) -> Tensor:
    """A new tensor on ``dev`` holding ``arr`` cast to ``dt``."""
    if dt in D.FLOAT8_DTYPES:  # PyTorch's rounding (through float), not ml_dtypes'
        return convert(_host_to(arr, D.float32, dev), dt, dev)
    if dev.type == "cpu":
        return host_constant(Tensor._from_np(np.array(arr, dtype=dt.np_dtype, order="C",
                                                      copy=True)))
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into shape (1,).
    return convert(Tensor._from_np(np.array(arr, order="C", copy=True)), dt, dev)


def _infer_from_python(data: Any, allow_big_ints: bool = False) -> tuple[np.ndarray, D.dtype]:
    """The data as a host array (no narrowing cast yet) and the dtype PyTorch would infer
    (``allow_big_ints``: Python ints beyond 64 bits stay an object array, for the caller's
    range check)."""
    try:
        with np.errstate(all="ignore"):
            arr = np.asarray(data)
    except ValueError as e:
        raise ValueError(f"expected a rectangular nested sequence of numbers: {e}") from None
    if allow_big_ints and arr.dtype == object and arr.size and \
            all(type(v) is int for v in arr.reshape(-1)):
        return arr, D.int64
    if arr.dtype == object or arr.dtype.kind in "USMm":
        raise TypeError(f"can't build a tensor from data of type {arr.dtype} "
                        f"(first element: {arr.reshape(-1)[:1].tolist()})")
    if isinstance(data, np.ndarray | np.generic | Tensor):
        return arr, D.from_numpy_dtype(arr.dtype)
    # Python floats take the default dtype; Python complex its complex twin; ints int64.
    if arr.dtype.kind == "f":
        return arr, D.get_default_dtype()
    if arr.dtype.kind == "c":
        return arr, D.get_default_dtype().to_complex()
    if arr.dtype.kind in "iu":
        return arr, D.int64
    return arr, D.from_numpy_dtype(arr.dtype)


def _uint64_ints(data: Any) -> np.ndarray | None:
    """Nested Python ints as uint64, range-checked with PyTorch's errors; None when ``data``
    holds anything else (the general path converts it)."""
    flat = np.array(data, dtype=object)
    values = flat.reshape(-1).tolist()
    if not values or not all(type(v) is int for v in values):
        return None
    for v in values:
        if v < 0:
            raise OverflowError("can't convert negative int to unsigned")
        if v >= 1 << 64:
            raise OverflowError("int too big to convert")
    return np.array(values, dtype=np.uint64).reshape(flat.shape)


@op(method=False, differentiable=False, vmap_exempt=True)
def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new tensor copying ``data`` (nested lists, numbers, arrays or tensors)."""
    if isinstance(data, Tensor):
        host_read("gt.tensor() of a tensor's values")
        data = data.detach().cpu()._host
    python_data = not isinstance(data, np.ndarray | np.generic)
    if python_data and dtype is not None and D.to_dtype(dtype).name == "uint64":
        exact = _uint64_ints(data)
        if exact is not None:   # Python ints past int64 (which inference makes floats)
            return _finish(_host_to(exact, D.to_dtype(dtype), resolve_device(device)),
                           requires_grad)
    arr, inferred = _infer_from_python(data, allow_big_ints=python_data)
    dt = inferred if dtype is None else D.to_dtype(dtype)
    if python_data:  # PyTorch's range checks of Python numbers (NumPy data converts as is)
        arr = check_creation_data(arr, dt, data)
    return _finish(_host_to(arr, dt, resolve_device(device)), requires_grad)


@op(method=False)
def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like tensor(), but shares memory with a tensor or a NumPy array when it can."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and (device is None or resolve_device(device).type == "cpu"):
        t = from_numpy(data)
        return t if dtype is None else t.to(dtype)
    if hasattr(data, "__dlpack__") or hasattr(data, "__cuda_array_interface__"):
        from gputensor._interop import asarray  # another library's array: share its memory
        return asarray(data, dtype=dtype, device=device)
    return tensor(data, dtype=dtype, device=device)


class _ArrayExtent:
    """Exposes the bytes spanned by a (possibly strided) array as one flat uint8 buffer."""

    def __init__(self, arr: np.ndarray, nbytes: int) -> None:
        self._arr = arr  # keeps the memory alive
        self.__array_interface__ = {"data": (arr.ctypes.data, not arr.flags.writeable),
                                    "shape": (nbytes,), "typestr": "|u1", "version": 3}


@op(method=False, differentiable=False, vmap_exempt=True)
def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``ndarray`` (no copy)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    dt = D.from_numpy_dtype(ndarray.dtype)
    isz = ndarray.itemsize
    if any(s < 0 for s in ndarray.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors "
                         "with negative strides are not currently supported. (You can probably "
                         "work around this by making a copy of your array with array.copy().)")
    if any(s % isz for s in ndarray.strides):
        raise ValueError(f"given numpy array strides {ndarray.strides} are not a multiple of the "
                         f"element byte size {isz}; copy the numpy array to reallocate memory")
    if not ndarray.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order")
    shape = ndarray.shape
    strides = tuple(s // isz for s in ndarray.strides)
    if ndarray.flags.c_contiguous:
        cs = contiguous_strides(shape)   # the cached tuple: fast paths compare by identity
        t = Tensor._make(UntypedStorage._wrap(ndarray, CPU), dt, shape,
                         cs if strides == cs else strides, 0)
        t._np, t._np_buf = ndarray, ndarray
        return t
    extent = 0 if 0 in shape else sum((n - 1) * s for n, s in zip(shape, ndarray.strides,
                                                                  strict=True)) + isz
    buf = np.asarray(_ArrayExtent(ndarray, extent))
    return Tensor._make(UntypedStorage._wrap(buf, CPU), dt, shape, strides, 0)


def scalar_tensor(value: Any, dtype: D.dtype | None = None, device: Any = None) -> Tensor:
    dt = D.scalar_dtype(value) if dtype is None else dtype
    return _host_to(np.asarray(value), dt, resolve_device(device))


def _size_kw(fn: str, args: tuple, size: Any) -> tuple:
    """The size given positionally (``zeros(2, 3)``, ``zeros((2, 3))``) or as ``size=``."""
    if size is None:
        return args
    if args:
        raise TypeError(f"{fn}() got multiple values for argument 'size'")
    return (size,)


def _filled(size: tuple, value: Any, dtype: Any, device: Any, requires_grad: bool,
            out: Tensor | None = None, zero: bool = False) -> Tensor:
    # zero: zeros, which (as zero_) takes every dtype, where fill_(0) refuses the shell dtypes
    dt = _dtype_or_default(dtype)
    dev = resolve_device(device)
    t = alloc(new_shape(size), dt, dev) if out is None else out.resize_(new_shape(size))
    t.zero_() if zero else t.fill_(value)
    t._storage._version = 0
    return _finish(t, requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def zeros(*args: Any, size: Any = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False, out: Tensor | None = None, layout: Any = None) -> Tensor:
    return _filled(_size_kw("zeros", args, size), 0, dtype, device, requires_grad, out,
                   zero=True)


@op(method=False, differentiable=False, vmap_exempt=True)
def ones(*args: Any, size: Any = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False, out: Tensor | None = None, layout: Any = None) -> Tensor:
    return _filled(_size_kw("ones", args, size), 1, dtype, device, requires_grad, out)


@op(method=False, differentiable=False, vmap_exempt=True)
def full(size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False, out: Tensor | None = None, layout: Any = None) -> Tensor:
    if dtype is None:
        dtype = D.scalar_dtype(fill_value.item() if isinstance(fill_value, Tensor)
                               else fill_value)
    return _filled((size,) if isinstance(size, int) else size, fill_value, dtype, device,
                   requires_grad, out)


@op(method=False, differentiable=False, vmap_exempt=True)
def empty(*args: Any, size: Any = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False, out: Tensor | None = None, layout: Any = None,
          pin_memory: bool = False, memory_format: Any = None) -> Tensor:
    size = _size_kw("empty", args, size)
    if out is not None:
        return out.resize_(new_shape(size))
    shape, dt, dev = new_shape(size), _dtype_or_default(dtype), resolve_device(device)
    if memory_format is None or memory_format is MF.contiguous_format:
        return _finish(alloc(shape, dt, dev), requires_grad)
    fmt = MF.check(memory_format, "empty")
    if fmt is MF.preserve_format:
        raise RuntimeError("empty: preserve_format needs a tensor to preserve (use empty_like)")
    return _finish(empty_with_strides(shape, MF.format_strides(shape, fmt), dt, dev),
                   requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def empty_strided(size: Any, stride: Any, *, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor with the given strides over storage that just holds it."""
    shape, strides = new_shape(size), tuple(int(s) for s in stride)
    if len(shape) != len(strides):
        raise RuntimeError(f"dimensionality of sizes ({len(shape)}) must match dimensionality "
                           f"of strides ({len(strides)})")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"empty_strided: negative strides are not supported, got strides "
                           f"{list(strides)} for sizes {list(shape)}")
    return _finish(empty_with_strides(shape, strides, _dtype_or_default(dtype),
                                      resolve_device(device)), requires_grad)


def empty_like_layout(input: Tensor, dtype: D.dtype, device: Device,
                      memory_format: Any, where: str) -> Tensor:
    """A new tensor shaped like ``input`` in ``memory_format``'s layout (by default
    preserve_format: the order of ``input``'s strides, as PyTorch's ``*_like``)."""
    fmt = MF.preserve_format if memory_format is None else MF.check(memory_format, where)
    if fmt is MF.contiguous_format or (fmt is MF.preserve_format and input.is_contiguous()):
        return alloc(input._shape, dtype, device)
    strides = MF.preserved_strides(input._shape, input._stride, fmt)
    return empty_with_strides(input._shape, strides, dtype, device)


def _like(name: str, fill: Any) -> None:
    def fn(input: Tensor, *args: Any, dtype: Any = None, device: Any = None,
           requires_grad: bool = False, layout: Any = None, memory_format: Any = None) -> Tensor:
        dt = input.dtype if dtype is None else D.to_dtype(dtype)
        dev = input.device if device is None else resolve_device(device)
        t = empty_like_layout(input, dt, dev, memory_format, name)
        if fill is not None:
            t.fill_(args[0] if fill == "arg" else fill)
            t._storage._version = 0
        return _finish(t, requires_grad)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input): a new tensor shaped like ``input``."
    op(name, method=False, differentiable=False)(fn)


for _name, _fill in (("zeros_like", 0), ("ones_like", 1), ("empty_like", None),
                     ("full_like", "arg")):
    _like(_name, _fill)


@op(method=False, differentiable=False, vmap_exempt=True)
def arange(start: Any = None, end: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None, requires_grad: bool = False,
           out: Tensor | None = None) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; ints give int64.
    ``arange(n)`` and ``arange(end=n)`` count from 0."""
    if end is None:
        if start is None:
            raise TypeError("arange() missing required argument 'end'")
        start, end = 0, start
    elif start is None:
        start = 0
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    # PyTorch's checks, in its order (a NaN step is not "> 0 or < 0")
    if not (vals[2] > 0 or vals[2] < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(vals[0]) and math.isfinite(vals[1])):
        raise RuntimeError(f"unsupported range: {vals[0]} -> {vals[1]}")
    if (vals[1] - vals[0]) / vals[2] < 0:
        raise RuntimeError(f"upper bound and larger bound inconsistent with step sign "
                           f"(start={vals[0]}, end={vals[1]}, step={vals[2]})")
    if dtype is None:
        is_float = any(isinstance(v, float) for v in vals)
        dtype = D.get_default_dtype() if is_float else D.int64
    dt = D.to_dtype(dtype)
    if not math.isfinite(vals[2]) and not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    n = math.ceil((vals[1] - vals[0]) / vals[2])
    if dt in _INTEGER_DTYPES:
        # PyTorch's integer kernel reads start, end and step as int64 (truncated: arange(2.5,
        # dtype=int64) is [0, 1]); only int64 also counts the elements from them
        vals = [int(v) for v in vals]
        if dt is D.int64:
            if vals[2] == 0:
                raise ValueError("step must be nonzero")
            num = vals[1] - vals[0] + vals[2] - (1 if vals[2] > 0 else -1)
            n = max(0, abs(num) // abs(vals[2]) * (1 if (num >= 0) == (vals[2] > 0) else -1))
    # Computed in float64/int64 like PyTorch's CPU kernel, then cast.
    arr = vals[0] + np.arange(n, dtype=np.float64 if dt.category >= D.FLOATING else np.int64) \
        * vals[2]
    t = _host_to(arr, dt, resolve_device(device))
    return _finish(t if out is None else out.resize_(t.shape).copy_(t), requires_grad)


_INTEGER_DTYPES = (D.uint8, D.int8, D.int16, D.int32, D.int64)


def _range_dtype(name: str, dtype: Any, *ends: Any) -> D.dtype:
    """The given dtype, else the default one (its complex form for a complex end)."""
    dt = D.get_default_dtype()
    if any(isinstance(v, complex) or (isinstance(v, Tensor) and v.is_complex()) for v in ends):
        inferred = D.complex128 if dt is D.float64 else D.complex64
        if dtype is not None and not D.to_dtype(dtype).is_complex:
            raise RuntimeError(f"gputensor.{name}(): inferred dtype c10::complex<"
                               f"{'double' if dt is D.float64 else 'float'}> can't be safely "
                               f"cast to passed dtype {D.to_dtype(dtype).legacy_name}")
        dt = inferred
    return dt if dtype is None else D.to_dtype(dtype)


def _range_end(v: Any, dt: D.dtype) -> Any:
    """An end of a range as PyTorch's kernels read it: converted to the result dtype like a
    fill value (checked; a negative integer wraps into an unsigned dtype), a NumPy scalar
    (float64 for an integer dtype, whose kernels step in double)."""
    v = checked_fill_value(v.item() if isinstance(v, Tensor) else v, dt)
    if dt in _INTEGER_DTYPES:
        return np.float64(np.array(int(v)).astype(dt.np_dtype))
    return dt.np_dtype.type(v)


def _from_both_ends(first: Any, last: Any, step: Any, steps: int, fused: bool = True
                    ) -> np.ndarray:
    """PyTorch's symmetric ramp: the first half counts up from ``first``, the second half down
    from ``last``, so both ends are exact (and an infinite step gives NaN, as there). In
    float32/float64 each element is one fused multiply-add where ``fused`` (linspace's kernel,
    as PyTorch's AVX2 build compiles it)."""
    dtype = np.asarray(step).dtype
    if fused and dtype in (np.float32, np.float64):
        from gputensor.kernels.cpu.random_torch_math import ramp_from_both_ends
        out = np.empty(steps, dtype)
        ramp_from_both_ends(first, last, step, out)
        return out
    i = np.arange(steps)
    front = i < steps // 2
    k = np.where(front, i, steps - 1 - i).astype(dtype)   # counted in integers, then cast
    with np.errstate(all="ignore"):
        return np.where(front, first + step * k, last - step * k)


@op(method=False, differentiable=False, vmap_exempt=True)
def linspace(start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = _range_dtype("linspace", dtype, start, end)
    if steps <= 1:      # ``start`` whatever ``end`` is
        arr = np.array([_range_end(start, dt) for _ in range(steps)], dtype=np.float64 if dt in
                       _INTEGER_DTYPES else dt.np_dtype)
    else:   # in the result dtype; integer results step in double and truncate
        first, last = _range_end(start, dt), _range_end(end, dt)
        if dt.is_complex:   # PyTorch steps each part by real arithmetic (no inf * 0j NaNs)
            arr = np.empty(steps, dt.np_dtype)
            for part in ("real", "imag"):
                a, b = getattr(first, part), getattr(last, part)
                setattr(arr, part, _from_both_ends(a, b, (b - a) / a.dtype.type(steps - 1),
                                                   steps))
        else:
            arr = _from_both_ends(first, last, (last - first) / first.dtype.type(steps - 1),
                                  steps)
    return _finish(_host_to(arr, dt, resolve_device(device)), requires_grad)


def _cpow(base: complex, x: np.ndarray) -> np.ndarray:
    """PyTorch's (glibc's cpow) base ** x = exp(x log base) in x's precision (where the
    product overflows), with C99's special values of the product and exp: 0 ** 0 is NaN,
    0 ** 2 is 0, inf ** 1 is inf + NaN i."""
    from gputensor.kernels.cpu.scalar_fns import _mul_c99
    with np.errstate(all="ignore"):
        lb = np.log(x.dtype.type(base))
        re = x.real * lb.real - x.imag * lb.imag
        im = x.real * lb.imag + x.imag * lb.real
        for i in np.flatnonzero(np.isnan(re) & np.isnan(im)):  # Annex G's inf recovery
            re[i], im[i] = _mul_c99(float(x.real[i]), float(x.imag[i]), float(lb.real),
                                    float(lb.imag))
        p = np.empty(x.shape, x.dtype)
        p.real, p.imag = re, im
        return np.exp(p)


def _complex_logspace(start: Any, end: Any, steps: int, base: float, dt: D.dtype) -> np.ndarray:
    """PyTorch's complex logspace: one element is libstdc++'s pow(double, complex) (polar form
    for a positive base); more step the exponents from both ends in the result dtype with
    c10::complex arithmetic, whose step (end - start) / (steps - 1) has a NaN part once either
    end is infinite (or their difference overflows), so every element is NaN then."""
    if steps == 0:
        return np.empty(0, dt.np_dtype)
    if steps == 1:
        s = complex(start.item() if isinstance(start, Tensor) else start)
        if not base > 0:
            v = complex(_cpow(base, np.array([s], np.complex128))[0])
        else:
            with np.errstate(all="ignore"):
                rho, theta = np.power(np.float64(base), s.real), s.imag * math.log(base)
                v = complex(rho * np.cos(theta), rho * np.sin(theta))
        return np.full(steps, checked_fill_value(v, dt), dt.np_dtype)    # checked like fill_
    first, last = _range_end(start, dt), _range_end(end, dt)
    f = first.real.dtype.type
    i = np.arange(steps)
    front = i < steps // 2
    k = np.where(front, i, steps - 1 - i).astype(f)
    with np.errstate(all="ignore"):
        dr, di = last.real - first.real, last.imag - first.imag
        scl, zero = f(1) / f(steps - 1), f(0)
        sr, si = (dr + di * zero) * scl, (di - dr * zero) * scl    # c10's division
        pr, pi = sr * k - si * zero, sr * zero + si * k              # step * k, term by term
        x = np.empty(steps, first.dtype)
        x.real = np.where(front, first.real + pr, last.real - pr)
        x.imag = np.where(front, first.imag + pi, last.imag - pi)
    return _cpow(complex(f(base)), x)


@op(method=False, differentiable=False, vmap_exempt=True)
def logspace(start: Any, end: Any, steps: int, base: float = 10.0, *, dtype: Any = None,
             device: Any = None, requires_grad: bool = False) -> Tensor:
    if steps < 0:
        raise RuntimeError(f"logspace: number of steps must be non-negative, got {steps}")
    dt = _range_dtype("logspace", dtype, start, end)
    if dt.is_complex:
        arr = _complex_logspace(start, end, steps, base, dt)
    elif steps <= 1:    # PyTorch fills base ** start, checked like a fill value
        with np.errstate(all="ignore"):
            value = np.power(np.float64(base), np.float64(start))
        arr = np.array([checked_fill_value(float(value), dt) for _ in range(steps)],
                       dtype=np.float64)
    else:   # the exponents step in double from the ends as the result dtype holds them
        first, last = _range_end(start, dt), _range_end(end, dt)
        step = np.float64(last - first) / (steps - 1)
        exps = _from_both_ends(np.float64(first), np.float64(last), step, steps, fused=False)
        with np.errstate(all="ignore"):
            arr = np.power(np.float64(base), exps)
    return _finish(_host_to(arr, dt, resolve_device(device)), requires_grad)


@op(method=False, differentiable=False, vmap_exempt=True)
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    dt = _dtype_or_default(dtype)
    return _finish(_host_to(np.eye(n, m), dt, resolve_device(device)), requires_grad)


def legacy_construct(dt: D.dtype, device: Any, args: tuple) -> Tensor:
    """gt.FloatTensor(2, 3) -> uninitialised; gt.FloatTensor([1, 2]) -> data; () -> empty."""
    dev = resolve_device(device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].to(dtype=dt, device=dev)
    if len(args) == 1 and not isinstance(args[0], int | np.integer):
        return tensor(args[0], dtype=dt, device=dev)
    return alloc(new_shape(args) if args else (0,), dt, dev)


def _rebuild_tensor(storage: Any, offset: int, shape: tuple, stride: tuple,
                    requires_grad: bool) -> Tensor:
    t = Tensor._make(storage._untyped, storage.dtype, tuple(shape), tuple(stride), offset)
    t._requires_grad = requires_grad
    return t


def _new_factory(name: str, make: Any) -> None:
    """Tensor.new_zeros/new_ones/new_empty/new_full/new_tensor: same dtype and device as self."""
    def method(self: Tensor, *args: Any, dtype: Any = None, device: Any = None,
               requires_grad: bool = False, **kwargs: Any) -> Tensor:
        dt = self.dtype if dtype is None else dtype
        dev = self.device if device is None else device
        return make(*args, dtype=dt, device=dev, requires_grad=requires_grad, **kwargs)
    method.__name__ = method.__qualname__ = name
    tensor_method(name)(method)


for _name, _make in (("new_zeros", zeros), ("new_ones", ones), ("new_empty", empty),
                     ("new_full", full), ("new_tensor", tensor)):
    _new_factory(_name, _make)


def _triangle_indices(name: str, mask: Any, row: int, col: int, offset: int, dtype: Any,
                      device: Any) -> Tensor:
    if row < 0 or col < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got row={row} col={col}")
    rows, cols = mask(row, offset, col)  # NumPy's, in row-major order as PyTorch's
    dt = D.int64 if dtype is None else D.to_dtype(dtype)
    return _host_to(np.stack([rows, cols]).astype(np.int64), dt, resolve_device(device))


@op(method=False, differentiable=False, vmap_exempt=True)
def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The (2, N) row and column indices of the lower triangle of a row x col matrix."""
    return _triangle_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


@op(method=False, differentiable=False, vmap_exempt=True)
def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The (2, N) row and column indices of the upper triangle of a row x col matrix."""
    return _triangle_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)
