"""The dtype registry: gt.float32 and friends, PyTorch's type promotion, finfo/iinfo."""

from __future__ import annotations

import builtins
from typing import Any

import ml_dtypes
import numpy as np

# Category order matters: promotion across categories picks the higher one.
BOOL, INTEGRAL, FLOATING, COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type. Instances are singletons registered in ``DTYPES``."""

    __slots__ = ("name", "itemsize", "np_dtype", "category", "is_signed", "legacy_name")

    def __init__(self, name: str, np_dtype: Any, category: int, legacy_name: str) -> None:
        self.name = name
        self.np_dtype = np.dtype(np_dtype)
        self.itemsize = self.np_dtype.itemsize
        self.category = category
        self.is_signed = name not in ("uint8", "bool")
        self.legacy_name = legacy_name  # "Float" -> FloatStorage / FloatTensor

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOATING

    @property
    def is_complex(self) -> bool:
        return self.category == COMPLEX

    def to_complex(self) -> dtype:
        return {float64: complex128, complex128: complex128}.get(self, complex64)

    def to_real(self) -> dtype:
        return {complex64: float32, complex128: float64}.get(self, self)

    def __repr__(self) -> str:
        return f"gputensor.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickles as the module-level singleton

    def __copy__(self) -> dtype:
        return self

    def __deepcopy__(self, memo: dict) -> dtype:
        return self


uint8 = dtype("uint8", np.uint8, INTEGRAL, "Byte")
int8 = dtype("int8", np.int8, INTEGRAL, "Char")
int16 = dtype("int16", np.int16, INTEGRAL, "Short")
int32 = dtype("int32", np.int32, INTEGRAL, "Int")
int64 = dtype("int64", np.int64, INTEGRAL, "Long")
float16 = dtype("float16", np.float16, FLOATING, "Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, FLOATING, "BFloat16")
float32 = dtype("float32", np.float32, FLOATING, "Float")
float64 = dtype("float64", np.float64, FLOATING, "Double")
complex64 = dtype("complex64", np.complex64, COMPLEX, "ComplexFloat")
complex128 = dtype("complex128", np.complex128, COMPLEX, "ComplexDouble")
bool = dtype("bool", np.bool_, BOOL, "Bool")  # noqa: A001 - PyTorch's public name

DTYPES: tuple[dtype, ...] = (
    uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
    complex64, complex128, bool,
)


class _LimitedDtype(dtype):
    """A dtype PyTorch supports only partly (uint16..64, float8/float4, the bit-width shells):
    kept out of ``DTYPES`` (so no typed storages, legacy types or kernel instantiations); the
    ops PyTorch runs for it are listed in gputensor/_limited.py, the rest raise its error.
    ``torch_name`` is the ScalarType name PyTorch's messages use ('UInt16')."""

    __slots__ = ("_signed", "torch_name")

    def __init__(self, name: str, np_dtype: Any, category: int, torch_name: str,
                 signed: builtins.bool | None) -> None:
        super().__init__(name, np_dtype, category, torch_name)
        self._signed = signed
        self.torch_name = torch_name

    @property  # type: ignore[override]
    def is_signed(self) -> builtins.bool:
        if self._signed is None:  # PyTorch's bits dtypes have no signedness
            raise RuntimeError("Bits types are undefined")
        return self._signed

    @is_signed.setter
    def is_signed(self, value: builtins.bool) -> None:  # the base __init__'s assignment
        pass


def _limited(name: str, np_dtype: Any, category: int, torch_name: str,
             signed: builtins.bool | None) -> _LimitedDtype:
    return _LimitedDtype(name, np_dtype, category, torch_name, signed)


uint16 = _limited("uint16", np.uint16, INTEGRAL, "UInt16", False)
uint32 = _limited("uint32", np.uint32, INTEGRAL, "UInt32", False)
uint64 = _limited("uint64", np.uint64, INTEGRAL, "UInt64", False)
float8_e4m3fn = _limited("float8_e4m3fn", ml_dtypes.float8_e4m3fn, FLOATING, "Float8_e4m3fn", True)
float8_e4m3fnuz = _limited("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, FLOATING,
                           "Float8_e4m3fnuz", True)
float8_e5m2 = _limited("float8_e5m2", ml_dtypes.float8_e5m2, FLOATING, "Float8_e5m2", True)
float8_e5m2fnuz = _limited("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, FLOATING,
                           "Float8_e5m2fnuz", True)
float8_e8m0fnu = _limited("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, FLOATING,
                          "Float8_e8m0fnu", False)
# Two float4 values packed in a byte: stored as raw bytes (ml_dtypes' float4 is unpacked).
float4_e2m1fn_x2 = _limited("float4_e2m1fn_x2", np.uint8, FLOATING, "Float4_e2m1fn_x2", True)
# Shell dtypes: PyTorch names them (empty/zeros/view work) but computes nothing with them.
for _bits in range(1, 8):
    globals()[f"int{_bits}"] = _limited(f"int{_bits}", np.int8, INTEGRAL, f"Int{_bits}", True)
    globals()[f"uint{_bits}"] = _limited(f"uint{_bits}", np.uint8, INTEGRAL, f"UInt{_bits}",
                                         False)
bits1x8 = _limited("bits1x8", np.uint8, INTEGRAL, "Bits1x8", None)
bits2x4 = _limited("bits2x4", np.uint8, INTEGRAL, "Bits2x4", None)
bits4x2 = _limited("bits4x2", np.uint8, INTEGRAL, "Bits4x2", None)
bits8 = _limited("bits8", np.uint8, INTEGRAL, "Bits8", None)
bits16 = _limited("bits16", np.uint16, INTEGRAL, "Bits16", None)

WIDE_UNSIGNED: tuple[_LimitedDtype, ...] = (uint16, uint32, uint64)
FLOAT8_DTYPES: tuple[_LimitedDtype, ...] = (
    float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu)
SHELL_DTYPES: tuple[_LimitedDtype, ...] = (
    float4_e2m1fn_x2, *(globals()[f"{k}{b}"] for k in ("int", "uint") for b in range(1, 8)),
    bits1x8, bits2x4, bits4x2, bits8, bits16)
# PyTorch's limited-support dtypes, outside DTYPES (see _LimitedDtype).
LIMITED_DTYPES: tuple[_LimitedDtype, ...] = (*WIDE_UNSIGNED, *FLOAT8_DTYPES, *SHELL_DTYPES)

ALIASES: dict[str, dtype] = {
    "float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
    "short": int16, "cfloat": complex64, "cdouble": complex128,
}
_BY_NP = {d.np_dtype: d for d in (*DTYPES, *WIDE_UNSIGNED, *FLOAT8_DTYPES)}
_BY_NAME = {**{d.name: d for d in (*DTYPES, *LIMITED_DTYPES)}, **ALIASES}

# A Python int becomes a 64-bit Scalar in PyTorch (int64, or uint64 past int64's max): one
# outside [SCALAR_INT_MIN, SCALAR_INT_END) cannot be converted, whatever the tensor's dtype.
SCALAR_INT_MIN, SCALAR_INT_END = -(1 << 63), 1 << 64

_default_dtype: dtype = float32


def from_numpy_dtype(np_dtype: Any) -> dtype:
    try:
        return _BY_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"numpy dtype {np_dtype!r} has no gputensor equivalent; supported: "
                        f"{', '.join(d.name for d in DTYPES)}") from None


def to_dtype(value: Any) -> dtype:
    """Accept a gt.dtype, a name ('float32'), a numpy dtype or a Python type."""
    if isinstance(value, dtype):
        return value
    if isinstance(value, str):
        name = value.removeprefix("gputensor.").removeprefix("torch.")
        if name in _BY_NAME:
            return _BY_NAME[name]
        raise TypeError(f"unknown dtype name {value!r}")
    if value is builtins.float:
        return _default_dtype
    if value is builtins.int:
        return int64
    if value is builtins.bool:
        return bool
    if value is builtins.complex:
        return _default_dtype.to_complex()
    return from_numpy_dtype(value)


def get_default_dtype() -> dtype:
    return _default_dtype


def set_default_dtype(d: dtype) -> None:
    global _default_dtype
    d = to_dtype(d)
    if d not in (float16, bfloat16, float32, float64):
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_dtype = d


def _promote_same_category(a: dtype, b: dtype) -> dtype:
    if a.category == INTEGRAL:
        return from_numpy_dtype(np.promote_types(a.np_dtype, b.np_dtype))
    if {a, b} == {float16, bfloat16}:
        return float32
    if a.category == COMPLEX:
        return a if a.itemsize >= b.itemsize else b
    return a if a.itemsize >= b.itemsize else b


def _build_promotion_table() -> dict[tuple[dtype, dtype], dtype]:
    table = {}
    for a in DTYPES:
        for b in DTYPES:
            if a is b:
                out = a
            elif a.category == b.category:
                out = _promote_same_category(a, b)
            else:
                hi, lo = (a, b) if a.category > b.category else (b, a)
                out = hi
                # complex + wider real keeps the real's precision: complex64 + float64 -> complex128
                if hi.category == COMPLEX and lo.category == FLOATING and lo.itemsize > 4:
                    out = complex128
            table[a, b] = out
    return table


_PROMOTION = _build_promotion_table()
# uint16/32/64 promote only with themselves and real floats (to the float); float8 and the
# shells only with themselves: every other pair raises PyTorch's error (``_promote``).
for _u in LIMITED_DTYPES:
    _PROMOTION[_u, _u] = _u
for _u in WIDE_UNSIGNED:
    for _f in (float16, bfloat16, float32, float64):
        _PROMOTION[_u, _f] = _PROMOTION[_f, _u] = _f


def _promote(a: dtype, b: dtype) -> dtype:
    out = _PROMOTION.get((a, b))
    if out is not None:
        return out
    names = f"{a.legacy_name} and {b.legacy_name}"
    if a.name.startswith("bits") or b.name.startswith("bits"):
        msg = f"Promotion from {names} is unsupported."
    elif a in FLOAT8_DTYPES or b in FLOAT8_DTYPES:
        msg = f"Promotion for Float8 Types is not supported, attempted to promote {names}"
    elif a in WIDE_UNSIGNED or b in WIDE_UNSIGNED:
        msg = (f"Promotion for uint16, uint32, uint64 types is not supported, attempted to "
               f"promote {names}")
    else:
        msg = f"Promotion from {names} is unsupported."
    raise RuntimeError(msg)


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """PyTorch's promote_types: the smallest dtype to which both inputs can be cast."""
    return _promote(to_dtype(type1), to_dtype(type2))


def scalar_dtype(value: Any) -> dtype:
    """The dtype a Python scalar takes when it takes part in promotion as a 'wrapped number'."""
    if isinstance(value, builtins.bool | np.bool_):
        return bool
    if isinstance(value, builtins.int | np.integer):
        return int64
    if isinstance(value, builtins.float | np.floating):
        return _default_dtype
    if isinstance(value, builtins.complex | np.complexfloating):
        return _default_dtype.to_complex()
    raise TypeError(f"expected a Tensor or a Python number, got {type(value).__name__}")


def _combine_categories(higher: dtype | None, lower: dtype | None) -> dtype | None:
    # Mirrors PyTorch's ResultTypeState: a lower-priority group only wins if its category is higher.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return higher.to_complex() if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type_of(dim_dtypes: list[dtype], zero_dim_dtypes: list[dtype],
                   scalar_dtypes: list[dtype]) -> dtype:
    """Promote three priority groups: dimensioned tensors > 0-dim tensors > Python scalars."""
    groups = []
    for group in (dim_dtypes, zero_dim_dtypes, scalar_dtypes):
        acc = None
        for d in group:
            acc = d if acc is None else _promote(acc, d)
        groups.append(acc)
    out = _combine_categories(_combine_categories(groups[0], groups[1]), groups[2])
    if out is None:
        raise TypeError("result_type needs at least one argument")
    return out


def can_cast(from_: dtype, to: dtype) -> builtins.bool:
    """PyTorch's can_cast: no casting to a lower category (float -> int, complex -> float...)."""
    return from_.category <= to.category


# float8 (eps, max, min, tiny) as PyTorch's numeric_limits give them.
_FLOAT8_FINFO = {
    float8_e4m3fn: (0.125, 448.0, -448.0, 2.0 ** -6),
    float8_e4m3fnuz: (0.125, 240.0, -240.0, 2.0 ** -7),
    float8_e5m2: (0.25, 57344.0, -57344.0, 2.0 ** -14),
    float8_e5m2fnuz: (0.125, 57344.0, -57344.0, 2.0 ** -15),
    float8_e8m0fnu: (1.0, 2.0 ** 127, 2.0 ** -127, 2.0 ** -127),
}


class finfo:
    """Machine limits of a floating-point dtype (PyTorch's gt.finfo)."""

    def __init__(self, type: dtype | None = None) -> None:  # noqa: A002 - PyTorch's arg name
        d = to_dtype(type) if type is not None else _default_dtype
        if d.category not in (FLOATING, COMPLEX):
            raise TypeError(f"finfo needs a floating point dtype, got {d}")
        d = d.to_real()
        if d in _FLOAT8_FINFO:  # PyTorch's constants (ml_dtypes differs for some)
            self._set(d, *_FLOAT8_FINFO[d])
            return
        if d is float4_e2m1fn_x2:
            raise TypeError("bad argument type for built-in operation")
        info = ml_dtypes.finfo(d.np_dtype) if d is bfloat16 else np.finfo(d.np_dtype)
        self.dtype = d.name
        self.bits = d.itemsize * 8
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = builtins.float(info.tiny)
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -builtins.int(info.precision)

    def _set(self, d: dtype, eps: builtins.float, max_: builtins.float, min_: builtins.float,
             tiny: builtins.float) -> None:
        self.dtype, self.bits = d.name, 8
        self.eps, self.max, self.min, self.tiny = eps, max_, min_, tiny
        self.smallest_normal = tiny
        self.resolution = 1.0  # 10 ** -floor(mantissa digits * log10(2)): 10 ** 0

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype (PyTorch's gt.iinfo)."""

    def __init__(self, type: dtype) -> None:  # noqa: A002 - PyTorch's arg name
        d = to_dtype(type)
        if d in SHELL_DTYPES:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        if d.category not in (INTEGRAL, BOOL):
            raise TypeError(f"iinfo needs an integer dtype, got {d}")
        info = np.iinfo(np.uint8 if d is bool else d.np_dtype)
        self.dtype = d.name
        self.bits = d.itemsize * 8
        self.max = 1 if d is bool else builtins.int(info.max)
        self.min = 0 if d is bool else builtins.int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# PyTorch's aliases as module attributes (gt.float, gt.long, ...).
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128
