"""Run one call on gputensor and on PyTorch (the oracle) and classify the outcome.

Classes: "match" (both succeed, same shape, dtype, device and values within the dtype's
tolerance, NaN positions included), "both_raise" (compatible exception types), "gap"
(gputensor lacks the op or raises NotImplementedError where PyTorch works), "leniency"
(gputensor succeeds where PyTorch raises), "mismatch" (different results or exception types)
and "internal" (a NumPy/Numba/ctypes error or a bare Python error leaking from the library)."""

from __future__ import annotations

import os
import re
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import gputensor as gt
import gputensor.nn.functional as gF
from tests.helpers import ASYNC_NOTE, error_message, synced

from ._gen import Call, Dev, Recipe, materialize

CLASSES = ("match", "both_raise", "gap", "leniency", "mismatch", "internal")
FAILING = ("mismatch", "internal")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TESTS = os.path.join(_ROOT, "tests")
_THIRD_PARTY = ("numpy", "numba", "scipy", "llvmlite", "ctypes", "ml_dtypes")
# Python's own messages for programming errors: raised by library code, they are leaks.
_LEAK_MESSAGE = re.compile(
    r"(tuple|list|string) index out of range|object is not subscriptable|has no attribute"
    r"|unsupported operand type|not supported between instances|object is not iterable"
    r"|cannot unpack|values to unpack|invalid literal for int|object is not callable"
    r"|missing \d+ required positional|takes \d+ positional argument|division by zero"
    r"|object cannot be interpreted as an integer|only integer scalar arrays"
    r"|NoneType|can't multiply sequence|must be real number, not|cannot be interpreted as an"
    # NumPy's own messages
    r"|putmask|could not broadcast input array|operands could not be broadcast together"
    r"|setting an array element with a sequence"
    r"|is out of bounds for axis|axis \d+ is out of bounds|ufunc '")
_INTERNAL_TYPES = (KeyError, AttributeError, ZeroDivisionError, AssertionError, NameError,
                   UnboundLocalError, RecursionError, SystemError, MemoryError)

# Absolute and relative tolerance by result dtype.
TOL = {"float16": (1e-3, 4e-3), "bfloat16": (1e-2, 3e-2), "float32": (1e-5, 1e-4),
       "float64": (1e-10, 1e-7), "complex64": (1e-5, 1e-4), "complex128": (1e-10, 1e-7)}


@dataclass
class Outcome:
    cls: str
    detail: str = ""
    gt_exc: BaseException | None = None
    torch_exc: BaseException | None = None


def _library_frame(exc: BaseException) -> tuple[str, str]:
    """(innermost frame's file, the innermost third-party module) of a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1].filename if frames else ""
    third = ""
    for f in frames:
        for mod in _THIRD_PARTY:
            if f"{os.sep}{mod}{os.sep}" in f.filename and "gputensor" not in f.filename:
                third = mod
    return last, third


def is_internal(exc: BaseException) -> bool:
    mod = type(exc).__module__.split(".")[0]
    if mod in _THIRD_PARTY:
        return True
    last, third = _library_frame(exc)
    if third and last and not last.startswith(_ROOT):
        return True
    in_library = last.startswith(_ROOT) and not last.startswith(_TESTS)
    if not in_library:
        return False    # raised at the call boundary (a bad signature) or by the test
    if isinstance(exc, _INTERNAL_TYPES):
        return True
    return type(exc) in (IndexError, TypeError, ValueError, OverflowError) and \
        bool(_LEAK_MESSAGE.search(str(exc)))


def _builtin_base(exc: BaseException) -> type:
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls
    return Exception


def compatible(g: BaseException, t: BaseException) -> bool:
    """Same builtin exception family: one's builtin base is a subclass of the other's, so
    PyTorch's NotImplementedError for an unsupported dtype and a RuntimeError match (both are
    caught by ``except RuntimeError``), while IndexError vs RuntimeError does not."""
    gb, tb = _builtin_base(g), _builtin_base(t)
    return issubclass(gb, tb) or issubclass(tb, gb)


def resolve(call: Call, lib: Any, args: tuple, kwargs: dict) -> Any:
    """The callable for ``call`` in ``lib`` (None: gputensor lacks it)."""
    form = call.form
    if callable(form):
        return lambda: form(lib, *args, **kwargs)
    if form == "fn":
        fn = getattr(lib, call.name, None)
    elif form == "F":
        fn = getattr(F if lib is torch else gF, call.name, None)
    else:
        name = call.name + ("_" if form == "inplace" else "")
        fn = getattr(args[0], name, None)
        args = args[1:]
    if fn is None:
        return None
    return lambda: fn(*args, **kwargs)


def _run(call: Call, lib: Any, device: str) -> tuple[str, Any]:
    args = materialize(call.args, lib, device)
    kwargs = materialize(call.kwargs, lib, device)
    try:
        fn = resolve(call, lib, args, kwargs)
    except Exception as e:  # noqa: BLE001 -- a property that raises (x.imag of a real tensor)
        return "raise", e
    if fn is None:
        return "missing", None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn()
            if lib is gt and device.startswith("cuda"):
                synced()   # a kernel's error (a bad index) raises at the next sync, as on a GPU
            return "ok", (out, args)
    except Exception as e:  # noqa: BLE001 -- every exception is an outcome to classify
        if ASYNC_NOTE in str(e):   # compared by message: without the deferred error's note
            e = type(e)(error_message(e))
        return "raise", e


# -- result comparison ---------------------------------------------------------------------
def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype == torch.bfloat16:
            return x.float().numpy()
        if x.is_conj():
            x = x.resolve_conj()
        if x.is_neg():
            x = x.resolve_neg()
        return x.numpy()
    a = x.detach().cpu().numpy()
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _values_differ(a: np.ndarray, e: np.ndarray, dtype: str) -> str:
    if a.size == 0:
        return ""
    if dtype in TOL:
        atol, rtol = TOL[dtype]
        parts = [(a.real, e.real), (a.imag, e.imag)] if np.iscomplexobj(e) else [(a, e)]
        if np.iscomplexobj(e):
            # a complex value's error is measured against its modulus (a diagonal's zero
            # imaginary part next to a 2e9 real part is rounding noise at 1e-4)
            with np.errstate(invalid="ignore", over="ignore"):
                mag = np.abs(e.astype(np.complex128))
            atol = atol + rtol * np.where(np.isfinite(mag), mag, 0.0)
        for x, y in parts:
            x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                ok = np.isclose(x, y, atol=atol, rtol=rtol, equal_nan=True)
            if not ok.all():
                i = np.argwhere(~ok)[0]
                return f"values differ at {tuple(i)}: {x[tuple(i)]!r} vs torch {y[tuple(i)]!r}"
        return ""
    if not np.array_equal(a, e):
        i = np.argwhere(a != e)[0]
        return f"values differ at {tuple(i)}: {a[tuple(i)]!r} vs torch {e[tuple(i)]!r}"
    return ""


def compare(g: Any, t: Any, device: str, meta_only: bool = False, path: str = "") -> str:
    """'' when ``g`` (gputensor) matches ``t`` (PyTorch), else what differs."""
    if isinstance(t, torch.Tensor):
        if not isinstance(g, gt.Tensor):
            return f"{path}: {type(g).__name__} vs torch Tensor"
        tdt = str(t.dtype).removeprefix("torch.")
        if g.dtype.name != tdt:
            return f"{path}: dtype {g.dtype.name} vs torch {tdt}"
        if tuple(g.shape) != tuple(t.shape):
            return f"{path}: shape {tuple(g.shape)} vs torch {tuple(t.shape)}"
        if str(g.device) != str(gt.device(device)):
            return f"{path}: result on {g.device}, inputs on {device}"
        if meta_only:
            return ""
        d = _values_differ(_np(g), _np(t), tdt)
        return f"{path}: {d}" if d else ""
    if isinstance(t, tuple | list):
        if not isinstance(g, tuple | list) or len(g) != len(t):
            return f"{path}: {type(g).__name__} of {len(g) if hasattr(g, '__len__') else '?'}"\
                   f" vs torch {type(t).__name__} of {len(t)}"
        for i, (a, b) in enumerate(zip(g, t, strict=True)):
            d = compare(a, b, device, meta_only, f"{path}[{i}]")
            if d:
                return d
        return ""
    if isinstance(t, torch.dtype):
        return "" if str(g) == str(t).replace("torch.", "gputensor.") else f"{g} vs {t}"
    if isinstance(t, bool | int | float | complex):
        if type(g) is not type(t):
            return f"{path}: {type(g).__name__} {g!r} vs torch {type(t).__name__} {t!r}"
        if isinstance(t, float | complex) and np.isclose(g, t, equal_nan=True):
            return ""
        return "" if g == t else f"{path}: {g!r} vs torch {t!r}"
    return "" if g == t else f"{path}: {g!r} vs torch {t!r}"


def classify(call: Call, device: str) -> Outcome:
    ts, tres = _run(call, torch, "cpu")
    gs, gres = _run(call, gt, device)
    if gs == "missing":
        return Outcome("gap", "gputensor lacks it") if ts == "ok" else \
            Outcome("both_raise", "missing in gputensor")
    if gs == "raise" and ts == "raise" and type(gres) is type(tres) and str(gres) == str(tres):
        return Outcome("both_raise", "the same error", gres, tres)   # Python's own, as in torch
    if gs == "raise" and is_internal(gres):
        return Outcome("internal", f"{type(gres).__name__}: {gres}", gres,
                       tres if ts == "raise" else None)
    if ts == "missing":
        return Outcome("leniency", "torch lacks it")
    if gs == "raise" and ts == "raise":
        if compatible(gres, tres):
            return Outcome("both_raise", type(gres).__name__, gres, tres)
        return Outcome("mismatch", f"raises {type(gres).__name__}: {gres} | torch "
                                   f"{type(tres).__name__}: {tres}", gres, tres)
    if gs == "raise":
        if isinstance(gres, NotImplementedError):
            return Outcome("gap", f"NotImplementedError: {gres}", gres)
        return Outcome("mismatch", f"raises {type(gres).__name__}: {gres} | torch works", gres)
    if ts == "raise":
        return Outcome("leniency", f"torch raises {type(tres).__name__}: {tres}", None, tres)
    (gout, gargs), (tout, targs) = gres, tres
    meta = call.compare == "meta"
    if not _has_device_input(call):
        device = "cpu"     # no tensor or device argument: results live on the CPU
    d = CHECKERS[call.compare](gout, tout, targs, call, device) if call.compare in CHECKERS \
        else compare(gout, tout, device, meta)
    if not d and call.form == "inplace" and not meta:
        d = compare(gargs[0], targs[0], device, False, "self")
    return Outcome("mismatch", d) if d else Outcome("match")


def _has_device_input(obj: Any) -> bool:
    if isinstance(obj, Call):
        return _has_device_input(obj.args) or _has_device_input(obj.kwargs)
    if isinstance(obj, Recipe | Dev):
        return True
    if isinstance(obj, tuple | list):
        return any(_has_device_input(o) for o in obj)
    if isinstance(obj, dict):
        return any(_has_device_input(o) for o in obj.values())
    return False


# -- checkers for ops whose results are not unique (ties) ------------------------------------
def _values_only(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """Compare the values output, and only the shape/dtype of the indices (ties differ)."""
    d = compare(g[0], t[0], device)
    return d or compare(g[1], t[1], device, meta_only=True, path="[1]")


def _sorted_by_index(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """argsort: the indices must sort the input like PyTorch's (any order among ties)."""
    d = compare(g, t, device, meta_only=True)
    if d or g.numel() == 0 or t.dim() == 0:
        return d or compare(g, t, device)
    x, dim = targs[0], call.kwargs.get("dim", -1)
    tx = torch.from_numpy(_np(g).astype(np.int64))
    return compare(gt.tensor(_np(x.take_along_dim(tx, dim)), dtype=gt.float64),
                   x.take_along_dim(t, dim).to(torch.float64), "cpu", path="gathered")


def _unordered(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """Same multiset of values (sorted before comparing)."""
    d = compare(g, t, device, meta_only=True)
    if d or g.numel() == 0:
        return d
    a, e = np.sort(_np(g).ravel()), np.sort(_np(t).ravel())
    return _values_differ(a, e, str(t.dtype).removeprefix("torch."))


def _eigenpairs(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """(E, X) of an iterative eigensolver (lobpcg): E as usual, X up to each column's sign
    (compared through X diag(E) X^T, invariant to it), both to the solver's tolerance."""
    d = compare(g, t, device, meta_only=True)
    if d:
        return d
    (ge, gx), (te, tx) = (_np(v).astype(np.float64) for v in g), (_np(v).astype(np.float64)
                                                                  for v in t)
    tol = 1e-5 if str(t[0].dtype) == "torch.float64" else 1e-2
    scale = max(1.0, float(np.abs(te).max(initial=0)))
    if not np.allclose(ge, te, atol=tol * scale, rtol=tol):
        return f"[0]: eigenvalues {ge} vs torch {te}"
    gp, tp = (gx * ge) @ gx.T, (tx * te) @ tx.T
    if not np.allclose(gp, tp, atol=tol * scale, rtol=tol):
        return f"[1]: eigenvectors differ beyond sign: {gx} vs torch {tx}"
    return ""


def _zero_divisor_cov(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """cov of a complex input with correction == observations divides by zero: the diagonal's
    imaginary part is exactly 0 in the product, so 0/0 = nan (as PyTorch gives where its
    complex product keeps it zero; MKL's AVX-512 kernels leave rounding noise there, inf).
    That part must be nan; everything else as PyTorch's."""
    d = compare(g, t, device, meta_only=True)
    if d:
        return d
    got, want = _np(g).copy(), _np(t).copy()
    diagonal = np.eye(got.shape[0], dtype=bool) if got.ndim == 2 else np.ones((), bool)
    if not np.isnan(got.imag[diagonal]).all():
        return f"diagonal imaginary parts {got.imag[diagonal]} (0/0 is nan)"
    got.imag[diagonal] = want.imag[diagonal] = 0
    return _values_differ(got, want, str(t.dtype).removeprefix("torch."))


def _gelu_at_inf(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """gelu(+inf) is inf (PyTorch's scalar CPU path and float64 give it); PyTorch's vectorised
    CPU path for 16/32-bit floats gives nan on AVX-512 machines. Those elements must be inf;
    the rest as PyTorch's."""
    d = compare(g, t, device, meta_only=True)
    if d or not isinstance(t, torch.Tensor):
        return d or compare(g, t, device)
    x = call.args[0].build(torch, "cpu") if isinstance(call.args[0], Recipe) else None
    if x is None or x.shape != t.shape:
        return compare(g, t, device)
    at_inf = np.isposinf(_np(x).astype(np.float64))
    got, want = _np(g).astype(np.float64), _np(t).astype(np.float64)
    if not np.isposinf(got[at_inf]).all():
        return f"gelu(inf) gave {got[at_inf]}"
    got[at_inf] = want[at_inf] = 0
    return _values_differ(got, want, str(t.dtype).removeprefix("torch."))


def _rsqrt_reduced(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """rsqrt of float16/bfloat16: PyTorch's vectorised CPU loop rounds 1/sqrt(x) to the dtype
    once (as gputensor does); its scalar loop (a short tensor, a long one's tail) rounds
    sqrt(x) to the dtype first and then its reciprocal, one ulp apart where the double
    rounding falls on the other side (x = 2.2754 in float16: 0.6626, not 0.6631). Elements
    where both results are one of the two roundings match; the rest as PyTorch's."""
    d = compare(g, t, device, meta_only=True)
    if d or not isinstance(t, torch.Tensor):
        return d or compare(g, t, device)
    x = call.args[0].build(torch, "cpu") if isinstance(call.args[0], Recipe) else None
    if x is None or x.dtype not in (torch.float16, torch.bfloat16) or x.shape != t.shape:
        return compare(g, t, device)
    once = torch.rsqrt(x.float()).to(x.dtype)
    twice = (1 / torch.sqrt(x.float()).to(x.dtype).float()).to(x.dtype)
    got, want = _np(g).astype(np.float64), _np(t).astype(np.float64)
    roundings = [_np(r.to(t.dtype)).astype(np.float64) for r in (once, twice)]

    def one_of(v: np.ndarray) -> np.ndarray:
        return np.logical_or.reduce([(v == r) | (np.isnan(v) & np.isnan(r))
                                     for r in roundings])
    either = one_of(got) & one_of(want)
    got[either] = want[either] = 0
    return _values_differ(got, want, str(t.dtype).removeprefix("torch."))


def _unique_nans(g: Any, t: Any, targs: Any, call: Call, device: str) -> str:
    """unique (no dim) keeps every NaN as a value of its own, sorted last; which NaN slot each
    NaN input maps to in the inverse is the sort's order among ties (PyTorch's reverses it for
    some sizes: 36 float16 values with 4 NaNs mapped them to slots 29, 28, 27, 26). The NaN
    inputs must map to the NaN slots, each once; everything else exactly as PyTorch's."""
    d = compare(g, t, device, meta_only=True)
    if d or not (call.kwargs.get("return_inverse") and isinstance(t, tuple)):
        return d or compare(g, t, device)
    want_values = _np(t[0])
    if want_values.dtype.kind not in "fc":
        return compare(g, t, device)
    inverse, want_inverse = _np(g[1]).copy(), _np(t[1]).copy()
    at_nan = np.isin(want_inverse, np.flatnonzero(np.isnan(want_values)))
    if sorted(inverse[at_nan].tolist()) != sorted(want_inverse[at_nan].tolist()):
        return f"[1]: NaN inputs map to {inverse[at_nan]} vs torch {want_inverse[at_nan]}"
    inverse[at_nan] = want_inverse[at_nan] = -1
    return compare(g[0], t[0], device, path="[0]") or \
        _values_differ(inverse, want_inverse, "int64") or \
        (compare(g[2], t[2], device, path="[2]") if len(t) > 2 else "")


CHECKERS = {"values_only": _values_only, "argsort": _sorted_by_index, "unordered": _unordered,
            "eigenpairs": _eigenpairs, "zero_divisor_cov": _zero_divisor_cov,
            "gelu_at_inf": _gelu_at_inf, "rsqrt_reduced": _rsqrt_reduced,
            "unique_nans": _unique_nans}
