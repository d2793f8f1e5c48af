"""Whether a Python number fits the dtype it is written into, with PyTorch's rules and messages.

Two families of PyTorch checks:
- ops that write one scalar into a tensor (``fill_``, ``full``, ``x[i] = v``, ``masked_fill``,
  ``index_fill``) convert it with c10's ``checked_convert``: an integer must lie in the
  dtype's range (an unsigned dtype also takes negatives down to ``-max``, which wrap); a float
  written into an integer dtype must be finite and in range (``lowest`` is 0 for unsigned); a
  finite float written into a floating dtype must not exceed its largest finite value (inf and
  NaN pass); a complex number into a real dtype must have a zero imaginary part. bool takes
  anything. The error names the C++ type: "value cannot be converted to type uint8_t without
  overflow".
- ``gt.tensor(data, dtype=...)`` from Python numbers checks integer dtypes only (floats
  overflow to inf), names the dtype the NumPy way ("type uint8"), refuses complex numbers for a
  real dtype with Python's own TypeErrors, and refuses integers beyond int64 where PyTorch's
  argument parser does ("Overflow when unpacking long long").

``x[i] = v`` checks a value for a float16/bfloat16 tensor as a double (PyTorch wraps it in a
double tensor first, so it rounds to inf instead of raising). PyTorch's one-element ``fill_``
fast path skips the check for float16/bfloat16; this module does not (one rule for every
size).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gputensor import _dtype as D

_C10_NAMES = {
    D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t", D.int32: "int", D.int64: "int64_t",
    D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double",
    D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>",
}
# Integer dtypes: (lowest, max); floating dtypes (and complex ones, per component): max.
_INT_RANGE = {d: (int(np.iinfo(d.np_dtype).min), int(np.iinfo(d.np_dtype).max))
              for d in (D.uint8, D.int8, D.int16, D.int32, D.int64)}
_FLOAT_MAX = {D.float16: 65504.0, D.bfloat16: float(np.finfo(np.float32).max) * (1 - 2**-8),
              D.float32: float(np.finfo(np.float32).max), D.float64: math.inf,
              D.complex64: float(np.finfo(np.float32).max), D.complex128: math.inf}


def check_python_int(v: int) -> None:
    """PyTorch's OverflowError for a Python int no 64-bit Scalar holds."""
    if v >= D.SCALAR_INT_END:
        raise OverflowError("int too big to convert")
    if v < D.SCALAR_INT_MIN:
        raise OverflowError("can't convert negative int to unsigned")


def _overflow(dtype: D.dtype) -> RuntimeError:
    return RuntimeError(f"value cannot be converted to type {_C10_NAMES[dtype]} without overflow")


def _float_fits(f: float, dtype: D.dtype) -> bool:
    if dtype in _INT_RANGE:
        lo, hi = _INT_RANGE[dtype]
        return float(lo) <= f <= float(hi)  # compared as doubles, as c10 does (NaN fails)
    return f != f or math.isinf(f) or abs(f) <= _FLOAT_MAX[dtype]


def checked_fill_value(value: Any, dtype: D.dtype) -> Any:
    """``value`` (a Python or NumPy number) as a fill-like op writes it into a tensor of
    ``dtype``: raises as PyTorch does when it cannot be converted; a complex number with a zero
    imaginary part written into a real dtype is its real part."""
    if isinstance(value, bool | np.bool_):
        return value
    if isinstance(value, int | np.integer):
        v = int(value)
        check_python_int(v)   # whatever the dtype
        if dtype is D.bool:
            return bool(v)
        rng = _INT_RANGE.get(dtype)
        if rng is None:
            ok = abs(float(v)) <= _FLOAT_MAX[dtype]
        else:
            lo, hi = rng
            ok = -hi <= v <= hi if lo == 0 else lo <= v <= hi  # unsigned: negatives wrap
    elif dtype is D.bool:  # any nonzero number, a complex one included, is True
        return bool(value) if isinstance(value, float | complex | np.number) else value
    elif isinstance(value, float | np.floating):
        ok = _float_fits(float(value), dtype)
    elif isinstance(value, complex | np.complexfloating):
        z = complex(value)
        if dtype.is_complex:
            ok = _float_fits(z.real, dtype) and _float_fits(z.imag, dtype)
        else:
            ok = z.imag == 0 and _float_fits(z.real, dtype)
            value = z.real
    else:
        return value  # not a number: the op's own argument check reports it
    if not ok:
        raise _overflow(dtype)
    return value


def check_creation_data(arr: np.ndarray, dtype: D.dtype, data: Any = None) -> np.ndarray:
    """``gt.tensor``'s checks of Python data (``arr`` as NumPy read it from ``data``) for
    ``dtype``; returns the array to cast (integers beyond int64 become floats for a floating
    dtype)."""
    kind = arr.dtype.kind
    big = kind == "O" or (kind == "u" and arr.dtype.itemsize == 8)  # ints past int64's range
    if big and (dtype.is_floating_point or dtype.is_complex):
        return arr.astype(np.float64)
    if big and dtype is D.bool:
        return arr != 0
    if big and dtype is D.uint64 and arr.size and int(arr.min()) >= 0 and \
            int(arr.max()) < 1 << 64:
        return arr.astype(np.uint64)
    if kind == "O" or (big and arr.size and int(arr.max()) > _INT_RANGE[D.int64][1]):
        raise ValueError("Overflow when unpacking long long")
    if big:
        arr = arr.astype(np.int64)
        kind = "i"
    if dtype is D.bool or kind == "b":
        return arr
    rng = _INT_RANGE.get(dtype)
    if kind == "c" and not dtype.is_complex:
        if rng is not None and arr.size:
            # PyTorch converts element by element: a real value out of range before the first
            # complex one raises its overflow error ([300, 1+2j] as uint8)
            flat = arr.reshape(-1)
            if data is not None:   # the first complex object, even one with no imaginary part
                values = _python_values(data)
                end = next((i for i, v in enumerate(values)
                            if isinstance(v, complex | np.complexfloating)), len(values))
                head_data: Any = values[:end]
            else:
                first = np.flatnonzero(flat.imag != 0)
                end = first[0] if first.size else flat.size
                head_data = None
            head = flat[:end].real
            if head.size:
                check_creation_data(head, dtype, head_data)
        raise TypeError("must be real number, not complex" if dtype.is_floating_point
                        else "'complex' object cannot be interpreted as an integer")
    if rng is None or not arr.size or kind not in "iuf":
        return arr
    lo, hi = rng
    if kind == "f" and data is not None and arr.size and (
            (lo == 0 and float(arr.min()) < 0) or float(np.abs(arr).max()) >= _EXACT_FLOAT):
        # ints and floats mixed into an integer dtype: PyTorch converts element by element,
        # so a negative int wraps into an unsigned dtype where a negative float overflows
        # ([0.5, -3] -> [0, 253]), and a big int keeps the digits a double would round away
        # ([2**63 - 1, 0.5] as int64)
        return _integer_elements(data, arr.shape, dtype, lo, hi)
    if kind == "f":
        bad = not np.isfinite(arr).all() or float(arr.min()) < float(lo) or \
            float(arr.max()) > float(hi)
    else:
        bad = int(arr.max()) > hi or int(arr.min()) < (-hi if lo == 0 else lo)
    if bad:
        raise RuntimeError(f"value cannot be converted to type {dtype.np_dtype.name} without "
                           f"overflow")
    return arr


_EXACT_FLOAT = 2.0 ** 53  # from here on a double no longer holds every integer


def _python_values(data: Any) -> list:
    """Nested Python data's numbers, flat, each with its own Python type."""
    return np.array(data, dtype=object).reshape(-1).tolist()


def _integer_elements(data: Any, shape: tuple[int, ...], dtype: D.dtype, lo: int,
                      hi: int) -> np.ndarray:
    """Python numbers as an integer dtype one by one, with each one's own check: an int in
    range (for an unsigned dtype in [-max, max], negatives wrapping), a float finite and in
    range, truncated toward zero."""
    values = _python_values(data)
    out = np.empty(len(values), dtype.np_dtype)
    for i, v in enumerate(values):
        if isinstance(v, int | np.integer):
            v = int(v)
            if lo == 0:
                ok = -hi <= v <= hi
                v %= hi + 1
            else:
                ok = lo <= v <= hi
        else:
            f = float(v)   # compared as doubles, as c10 does: 2.0**63 passes for int64 ...
            ok = math.isfinite(f) and float(lo) <= f <= float(hi)
            v = int(f) if ok else 0
            if v > hi:     # ... and converts to the x86 "integer indefinite", int64's lowest
                v = lo
        if not ok:
            raise RuntimeError(f"value cannot be converted to type {dtype.np_dtype.name} "
                               f"without overflow")
        out[i] = v
    return out.reshape(shape)
