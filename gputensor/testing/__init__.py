"""gputensor.testing: ``assert_close`` and ``make_tensor`` (PyTorch's ``torch.testing``).

``assert_close`` walks nested sequences and mappings and compares each leaf pair: ``None``,
booleans, Python/NumPy numbers, and tensor-likes (gputensor tensors, NumPy arrays). Tensors are
compared with ``gt.isclose`` on their device after the attribute checks (shape, layout,
stride, device, dtype), with PyTorch's default tolerances per dtype and its error messages.
"""

from __future__ import annotations

import cmath
import collections.abc
import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

import gputensor as gt

from ._filecheck import FileCheck as FileCheck  # torch.testing.FileCheck (not in __all__)

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# {dtype: (rtol, atol)}; every other dtype compares exactly.
_DTYPE_PRECISIONS = {
    gt.float16: (0.001, 1e-5),
    gt.bfloat16: (0.016, 1e-5),
    gt.float32: (1.3e-6, 1e-5),
    gt.float64: (1e-7, 1e-7),
    gt.complex64: (1.3e-6, 1e-5),
    gt.complex128: (1e-7, 1e-7),
}


class _ErrorMeta(Exception):
    """A failed comparison: the exception type to raise, its message and the item path."""

    def __init__(self, type: type[Exception], msg: str, *, id: tuple[Any, ...] = ()) -> None:
        super().__init__(msg)
        self.type, self.msg, self.id = type, msg, id

    def to_error(self, msg: str | Callable[[str], str] | None = None) -> Exception:
        if isinstance(msg, str):
            return self.type(msg)
        generated = self.msg
        if self.id:
            generated += "\n\nThe failure occurred for item " + "".join(str([i]) for i in self.id)
        return self.type(msg(generated) if callable(msg) else generated)


class _Unsupported(Exception):
    """This pair kind cannot handle the inputs: try the next one."""


def _default_tolerances(*dtypes: Any, precisions: dict | None = None) -> tuple[float, float]:
    precisions = precisions or _DTYPE_PRECISIONS
    rtols, atols = zip(*[precisions.get(d, (0.0, 0.0)) for d in dtypes], strict=True)
    return max(rtols), max(atols)


def _tolerances(*dtypes: Any, rtol: float | None, atol: float | None, id: tuple[Any, ...]
                ) -> tuple[float, float]:
    if (rtol is None) ^ (atol is None):
        raise _ErrorMeta(ValueError, f"Both 'rtol' and 'atol' must be either specified or "
                                     f"omitted, but got no {'rtol' if rtol is None else 'atol'}.",
                         id=id)
    if rtol is not None:
        return rtol, atol
    return _default_tolerances(*dtypes)


# -- messages ------------------------------------------------------------------------------------
def _mismatch_msg(*, default_identifier: str, identifier: str | Callable[[str], str] | None,
                  extra: str | None, abs_diff: float, abs_idx: Any, atol: float,
                  rel_diff: float, rel_idx: Any, rtol: float) -> str:
    equality = rtol == 0 and atol == 0

    def diff_line(kind: str, diff: float, idx: Any, tol: float) -> str:
        line = (f"{kind.title()} difference: {diff}" if idx is None
                else f"Greatest {kind} difference: {diff} at index {idx}")
        return line + ("" if equality else f" (up to {tol} allowed)") + "\n"

    if identifier is None:
        identifier = default_identifier
    elif callable(identifier):
        identifier = identifier(default_identifier)
    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f"{extra.strip()}\n"
    msg += diff_line("absolute", abs_diff, abs_idx, atol)
    msg += diff_line("relative", rel_diff, rel_idx, rtol)
    return msg.strip()


def _scalar_mismatch_msg(actual: Any, expected: Any, *, rtol: float, atol: float,
                         identifier: str | Callable[[str], str] | None = None) -> str:
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _mismatch_msg(default_identifier="Scalars", identifier=identifier,
                         extra=f"Expected {expected} but got {actual}.", abs_diff=abs_diff,
                         abs_idx=None, atol=atol, rel_diff=rel_diff, rel_idx=None, rtol=rtol)


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, mod = divmod(flat, size)
        index.append(mod)
    return tuple(reversed(index))


def _tensor_mismatch_msg(actual: Any, expected: Any, matches: Any, *, rtol: float, atol: float,
                         identifier: str | Callable[[str], str] | None = None) -> str:
    n = matches.numel()
    mismatches = n - int(matches.sum())
    extra = f"Mismatched elements: {mismatches} / {n} ({mismatches / n:.1%})"
    a, e, m = actual.flatten(), expected.flatten(), matches.flatten()
    if not a.dtype.is_floating_point and not a.dtype.is_complex:
        a, e = a.to(gt.int64), e.to(gt.int64)   # no overflow, and bool can subtract
    abs_diff = (a - e).abs()
    abs_diff[m] = 0   # only mismatches count
    max_abs, abs_at = abs_diff.max(0)
    rel_diff = abs_diff / e.abs()
    rel_diff[m] = 0
    max_rel, rel_at = rel_diff.max(0)
    return _mismatch_msg(default_identifier="Tensor-likes", identifier=identifier, extra=extra,
                         abs_diff=max_abs.item(), abs_idx=_unravel(int(abs_at), matches.shape),
                         atol=atol, rel_diff=max_rel.item(),
                         rel_idx=_unravel(int(rel_at), matches.shape), rtol=rtol)


# -- pairs ---------------------------------------------------------------------------------------
class _Pair:
    def __init__(self, actual: Any, expected: Any, *, id: tuple[Any, ...] = (),
                 **unused: Any) -> None:
        self.actual, self.expected, self.id = actual, expected, id

    def _fail(self, type: type[Exception], msg: str) -> NoReturn:
        raise _ErrorMeta(type, msg, id=self.id)

    def compare(self) -> None:
        raise NotImplementedError


class _NonePair(_Pair):
    def __init__(self, actual: Any, expected: Any, **options: Any) -> None:
        if not (actual is None or expected is None):
            raise _Unsupported
        super().__init__(actual, expected, **options)

    def compare(self) -> None:
        if not (self.actual is None and self.expected is None):
            self._fail(AssertionError, f"None mismatch: {self.actual} is not {self.expected}")


class _BooleanPair(_Pair):
    def __init__(self, actual: Any, expected: Any, **options: Any) -> None:
        if not all(isinstance(x, bool | np.bool_) for x in (actual, expected)):
            raise _Unsupported
        super().__init__(*(bool(x) for x in (actual, expected)), **options)

    def compare(self) -> None:
        if self.actual is not self.expected:
            self._fail(AssertionError,
                       f"Booleans mismatch: {self.actual} is not {self.expected}")


class _NumberPair(_Pair):
    _TYPE_TO_DTYPE = {int: gt.int64, float: gt.float64, complex: gt.complex128}

    def __init__(self, actual: Any, expected: Any, *, id: tuple[Any, ...] = (),
                 rtol: float | None = None, atol: float | None = None, equal_nan: bool = False,
                 check_dtype: bool = False, **options: Any) -> None:
        if not all(isinstance(x, int | float | complex | np.number) for x in (actual, expected)):
            raise _Unsupported
        actual, expected = (x.item() if isinstance(x, np.number) else x
                            for x in (actual, expected))
        super().__init__(actual, expected, id=id)
        self.rtol, self.atol = _tolerances(*(self._TYPE_TO_DTYPE[type(x)]
                                             for x in (actual, expected)),
                                           rtol=rtol, atol=atol, id=id)
        self.equal_nan, self.check_dtype = equal_nan, check_dtype

    def compare(self) -> None:
        a, e = self.actual, self.expected
        if self.check_dtype and type(a) is not type(e):
            self._fail(AssertionError, f"The (d)types do not match: {type(a)} != {type(e)}.")
        if a == e or (self.equal_nan and cmath.isnan(a) and cmath.isnan(e)):
            return
        abs_diff = abs(a - e)
        if cmath.isfinite(abs_diff) and abs_diff <= self.atol + self.rtol * abs(e):
            return
        self._fail(AssertionError, _scalar_mismatch_msg(a, e, rtol=self.rtol, atol=self.atol))


class _TensorLikePair(_Pair):
    def __init__(self, actual: Any, expected: Any, *, id: tuple[Any, ...] = (),
                 allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 **options: Any) -> None:
        if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
            raise _Unsupported
        if not allow_subclasses and type(actual) is not type(expected):
            raise _Unsupported
        actual, expected = self._to_tensor(actual), self._to_tensor(expected)
        super().__init__(actual, expected, id=id)
        self.rtol, self.atol = _tolerances(actual.dtype, expected.dtype, rtol=rtol, atol=atol,
                                           id=id)
        self.equal_nan = equal_nan
        self.check_device, self.check_dtype = check_device, check_dtype
        self.check_layout, self.check_stride = check_layout, check_stride

    @staticmethod
    def _to_tensor(x: Any) -> Any:
        if isinstance(x, gt.Tensor):
            return x
        try:
            return gt.as_tensor(x)
        except Exception:
            raise _Unsupported from None

    def compare(self) -> None:
        a, e = self.actual, self.expected
        self._compare_attributes(a, e)
        a, e = self._equalize(a, e)
        if a.layout == gt.sparse_coo:
            self._compare_sparse_coo(a, e)
        elif a.layout in (gt.sparse_csr, gt.sparse_csc, gt.sparse_bsr, gt.sparse_bsc):
            self._compare_sparse_compressed(a, e)
        else:
            self._compare_close(a, e, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)

    def _compare_attributes(self, a: Any, e: Any) -> None:
        def mismatch(name: str, x: Any, y: Any) -> NoReturn:
            self._fail(AssertionError,
                       f"The values for attribute '{name}' do not match: {x} != {y}.")

        if a.shape != e.shape:
            mismatch("shape", a.shape, e.shape)
        if a.layout != e.layout:
            if self.check_layout:
                mismatch("layout", a.layout, e.layout)
        elif a.layout == gt.strided and self.check_stride and a.stride() != e.stride():
            mismatch("stride()", a.stride(), e.stride())
        if self.check_device and a.device != e.device:
            mismatch("device", a.device, e.device)
        if self.check_dtype and a.dtype != e.dtype:
            mismatch("dtype", a.dtype, e.dtype)

    @staticmethod
    def _equalize(a: Any, e: Any) -> tuple[Any, Any]:
        if a.device != e.device:
            a, e = a.cpu(), e.cpu()
        if a.dtype != e.dtype:
            dtype = gt.promote_types(a.dtype, e.dtype)
            a, e = a.to(dtype), e.to(dtype)
        if a.layout != e.layout:
            a = a.to_dense() if a.layout != gt.strided else a
            e = e.to_dense() if e.layout != gt.strided else e
        return a, e

    def _compare_sparse_coo(self, a: Any, e: Any) -> None:
        if a.sparse_dim() != e.sparse_dim():
            self._fail(AssertionError, f"The number of sparse dimensions in sparse COO tensors "
                                       f"does not match: {a.sparse_dim()} != {e.sparse_dim()}")
        if a._nnz() != e._nnz():
            self._fail(AssertionError, f"The number of specified values in sparse COO tensors "
                                       f"does not match: {a._nnz()} != {e._nnz()}")
        self._compare_close(a._indices(), e._indices(), rtol=0, atol=0, equal_nan=False,
                            identifier="Sparse COO indices")
        self._compare_close(a._values(), e._values(), rtol=self.rtol, atol=self.atol,
                            equal_nan=self.equal_nan, identifier="Sparse COO values")

    def _compare_sparse_compressed(self, a: Any, e: Any) -> None:
        """PyTorch's order: nnz, compressed indices, plain indices (exact, in a common index
        dtype: int32 and int64 may meet), then the values."""
        fmt = a.layout.name[7:].upper()
        if a._nnz() != e._nnz():
            self._fail(AssertionError, f"The number of specified values in sparse {fmt} tensors "
                                       f"does not match: {a._nnz()} != {e._nnz()}")
        row = a.layout in (gt.sparse_csr, gt.sparse_bsr)
        names = ("crow_indices", "col_indices") if row else ("ccol_indices", "row_indices")
        ai, ei = (getattr(a, names[0])(), getattr(e, names[0])())
        idt = gt.promote_types(ai.dtype, ei.dtype)
        for name in names:
            self._compare_close(getattr(a, name)().to(idt), getattr(e, name)().to(idt), rtol=0,
                                atol=0, equal_nan=False, identifier=f"Sparse {fmt} {name}")
        self._compare_close(a.values(), e.values(), rtol=self.rtol, atol=self.atol,
                            equal_nan=self.equal_nan, identifier=f"Sparse {fmt} values")

    def _compare_close(self, a: Any, e: Any, *, rtol: float, atol: float, equal_nan: bool,
                       identifier: str | None = None) -> None:
        a, e = a.detach(), e.detach()
        matches = gt.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
        if bool(matches.all()):
            return
        if a.shape == ():
            msg = _scalar_mismatch_msg(a.item(), e.item(), rtol=rtol, atol=atol,
                                       identifier=identifier)
        else:
            msg = _tensor_mismatch_msg(a, e, matches, rtol=rtol, atol=atol,
                                       identifier=identifier)
        self._fail(AssertionError, msg)


_PAIR_TYPES = (_NonePair, _BooleanPair, _NumberPair, _TensorLikePair)
_PAIR_NAMES = {_NonePair: "NonePair", _BooleanPair: "BooleanPair", _NumberPair: "NumberPair",
               _TensorLikePair: "TensorLikePair"}


def _originate_pairs(actual: Any, expected: Any, *, id: tuple[Any, ...] = (),
                     **options: Any) -> list[_Pair]:
    seq = collections.abc.Sequence
    if isinstance(actual, seq) and not isinstance(actual, str) and \
            isinstance(expected, seq) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise _ErrorMeta(AssertionError, f"The length of the sequences mismatch: "
                                             f"{len(actual)} != {len(expected)}", id=id)
        return [p for i in range(len(actual))
                for p in _originate_pairs(actual[i], expected[i], id=(*id, i), **options)]
    mapping = collections.abc.Mapping
    if isinstance(actual, mapping) and isinstance(expected, mapping):
        a_keys, e_keys = set(actual.keys()), set(expected.keys())
        if a_keys != e_keys:
            raise _ErrorMeta(AssertionError,
                             f"The keys of the mappings do not match:\n"
                             f"Missing keys in the actual mapping: {sorted(e_keys - a_keys)}\n"
                             f"Additional keys in the actual mapping: {sorted(a_keys - e_keys)}",
                             id=id)
        keys: Any = a_keys
        with contextlib.suppress(Exception):   # deterministic order when keys sort
            keys = sorted(keys)
        return [p for k in keys
                for p in _originate_pairs(actual[k], expected[k], id=(*id, k), **options)]
    for pair_type in _PAIR_TYPES:
        try:
            return [pair_type(actual, expected, id=id, **options)]
        except _Unsupported:
            continue
        except _ErrorMeta:
            raise
        except Exception as error:
            raise RuntimeError(
                f"Originating a {_PAIR_NAMES[pair_type]}() at item "
                f"{''.join(str([i]) for i in id)} with\n\n{type(actual).__name__}(): {actual}"
                f"\n\nand\n\n{type(expected).__name__}(): {expected}\n\nresulted in the "
                f"unexpected exception above.") from error
    raise _ErrorMeta(TypeError, f"No comparison pair was able to handle inputs of type "
                                f"{type(actual)} and {type(expected)}.", id=id)


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True,
                 rtol: float | None = None, atol: float | None = None, equal_nan: bool = False,
                 check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False, msg: str | Callable[[str], str] | None = None
                 ) -> None:
    """Raises ``AssertionError`` unless ``actual`` and ``expected`` are close:
    ``|actual - expected| <= atol + rtol * |expected|`` elementwise (PyTorch's rules, default
    tolerances per dtype and messages); ``msg`` replaces (str) or edits (callable) the
    message."""
    __tracebackhide__ = True
    try:
        pairs = _originate_pairs(actual, expected, allow_subclasses=allow_subclasses, rtol=rtol,
                                 atol=atol, equal_nan=equal_nan, check_device=check_device,
                                 check_dtype=check_dtype, check_layout=check_layout,
                                 check_stride=check_stride)
    except _ErrorMeta as meta:
        raise meta.to_error() from None
    for pair in pairs:
        try:
            pair.compare()
        except _ErrorMeta as meta:
            raise meta.to_error(msg) from None


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None,
                    atol: float | None = None, equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated: ``assert_close`` with looser defaults and no dtype check."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be "
                  "removed in a future release. Please use `torch.testing.assert_close()` "
                  "instead. You can find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning,
                  stacklevel=2)
    if not isinstance(actual, gt.Tensor):
        actual = gt.tensor(actual)
    if not isinstance(expected, gt.Tensor):
        expected = gt.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = _default_tolerances(actual.dtype, expected.dtype, precisions={
            gt.float16: (1e-3, 1e-3), gt.float32: (1e-4, 1e-5), gt.float64: (1e-5, 1e-8)})
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=True, check_dtype=False, check_stride=False, msg=msg or None)


# -- make_tensor ---------------------------------------------------------------------------------
_INTEGRAL = (gt.uint8, gt.int8, gt.int16, gt.int32, gt.int64)
_FLOATING = (gt.float16, gt.bfloat16, gt.float32, gt.float64)
_COMPLEX = (gt.complex64, gt.complex128)


def make_tensor(*shape: int | Sequence[int], dtype: gt.dtype, device: str | gt.device,
                low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False,
                exclude_zero: bool = False, memory_format: Any = None) -> gt.Tensor:
    """A tensor of ``shape`` with values drawn uniformly from ``[low, high)`` (defaults per
    dtype: bool [0, 2), unsigned [0, 10), signed ints [-9, 10), floating/complex [-9, 9));
    bounds are clamped to the dtype's finite range."""

    def low_high(lowest: float, highest: float, default_low: float, default_high: float
                 ) -> tuple[float, float]:
        lo = low if low is not None else default_low
        hi = high if high is not None else default_high
        if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got low={lo} and high={hi}")
        if lo == hi and dtype in _FLOATING + _COMPLEX:
            warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or "
                          "complex types is deprecated since 2.1 and will be removed in 2.3. "
                          "Use `torch.full(...)` instead.", FutureWarning, stacklevel=3)
        elif lo >= hi:
            raise ValueError(f"`low` must be less than `high`, but got {lo} >= {hi}")
        elif hi < lowest or lo >= highest:
            raise ValueError(f"The value interval specified by `low` and `high` is [{lo}, {hi}), "
                             f"but {dtype} only supports [{lowest}, {highest})")
        lo, hi = min(max(lo, lowest), highest), min(max(hi, lowest), highest)
        if dtype is gt.bool or dtype in _INTEGRAL:
            # ceil both: values stay >= low, and randint's high is exclusive
            return math.ceil(lo), math.ceil(hi)
        return lo, hi

    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    if requires_grad and (dtype is gt.bool or dtype in _INTEGRAL):
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:   # twice as many columns, every other one taken (offset 1)
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is gt.bool:
        lo, hi = low_high(0, 2, 0, 2)
        result = gt.randint(lo, hi, shape, device=device, dtype=dtype)
    elif dtype in _INTEGRAL:
        info = gt.iinfo(dtype)
        # randint samples int64 bounds: int64's maximum itself is out of reach
        lo, hi = low_high(info.min, info.max + (dtype is not gt.int64), -9, 10)
        result = gt.randint(lo, hi, shape, device=device, dtype=dtype)
    elif dtype in _FLOATING + _COMPLEX:
        info = gt.finfo(dtype)
        lo, hi = low_high(info.min, info.max, -9, 9)
        result = gt.empty(shape, device=device, dtype=dtype)
        target = gt.view_as_real(result) if dtype in _COMPLEX else result
        if hi - lo >= gt.finfo(dtype).max:   # uniform_ needs a finite range width
            target.uniform_(lo / 2, hi / 2).mul_(2)
        else:
            target.uniform_(lo, hi)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        f"torch.testing.make_tensor(). To request support, file an issue at: "
                        f"https://github.com/pytorch/pytorch/issues")
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dtype is gt.bool or dtype in _INTEGRAL \
            else gt.finfo(dtype).tiny
    if dtype in _FLOATING + _COMPLEX:
        result.requires_grad = requires_grad
    return result
