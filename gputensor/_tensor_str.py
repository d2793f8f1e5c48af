"""Tensor printing: PyTorch's ``repr(tensor)`` layout for numpy-backed data, plus print options.

The output matches ``torch._tensor_str`` character for character (with ``gputensor.`` in place of
``torch.`` in dtype names). This module deliberately imports nothing from the rest of gputensor so
that the tensor class can call into it without import cycles: callers pass the data as a numpy
array together with the few facts about the tensor that the repr mentions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from types import TracebackType
from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["format_tensor", "get_printoptions", "printoptions", "set_printoptions"]


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()

_PROFILES: dict[str, dict[str, Any]] = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set options for printing tensors (same semantics as ``torch.set_printoptions``).

    Args:
        precision: digits after the decimal point for floating point output (default 4).
        threshold: number of elements above which the repr is summarized (default 1000).
        edgeitems: items shown at the start and end of each summarized dimension (default 3).
        linewidth: characters per line used to wrap long rows (default 80).
        profile: preset to start from: ``"default"``, ``"short"`` or ``"full"``; explicit
            arguments override it. Unknown names are ignored, as in PyTorch.
        sci_mode: force scientific notation on (True) or off (False); None picks it per tensor.
            Like PyTorch, every call sets it, so omitting it resets it to None.
    """
    if profile is not None and profile in _PROFILES:
        for key, value in _PROFILES[profile].items():
            setattr(PRINT_OPTS, key, value)
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Return the current print options as a dict that ``set_printoptions(**d)`` accepts."""
    return dataclasses.asdict(PRINT_OPTS)


class printoptions(contextlib.ContextDecorator):  # noqa: N801 - PyTorch's public name
    """Temporarily change print options; the previous options are restored on exit.

    Takes the same arguments as :func:`set_printoptions`. Usable as ``with`` or as a decorator.
    """

    def __init__(
        self,
        precision: int | None = None,
        threshold: float | None = None,
        edgeitems: int | None = None,
        linewidth: int | None = None,
        profile: str | None = None,
        sci_mode: bool | None = None,
    ) -> None:
        self._kwargs: dict[str, Any] = {
            "precision": precision,
            "threshold": threshold,
            "edgeitems": edgeitems,
            "linewidth": linewidth,
            "profile": profile,
            "sci_mode": sci_mode,
        }
        # A stack so that one instance can be re-entered (e.g. a decorated recursive function).
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> printoptions:
        self._saved.append(get_printoptions())
        set_printoptions(**self._kwargs)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        set_printoptions(**self._saved.pop())


# ---------------------------------------------------------------------------------------------
# Element formatting
# ---------------------------------------------------------------------------------------------


def _is_floating(dt: np.dtype) -> bool:
    if dt.kind == "f":
        return True
    # bfloat16 and the float8 types from ml_dtypes are numpy "void"-kind dtypes.
    if dt.kind == "V":
        try:
            ml_dtypes.finfo(dt)
        except (ValueError, TypeError, KeyError):
            return False
        return True
    return False


def _to_python_values(arr: np.ndarray) -> np.ndarray:
    """Widen to a dtype whose ``tolist()`` gives exact Python scalars.

    PyTorch formats every element as a Python float (a double); widening half, bfloat16 and
    float32 to float64 is exact, so the printed digits are the same.
    """
    dt = arr.dtype
    if dt.kind == "c":
        return arr.astype(np.complex128)
    if _is_floating(dt):
        return arr.astype(np.float64)
    if dt.kind == "V":  # e.g. ml_dtypes int4: print the integer values
        return arr.astype(np.int64)
    return arr


class _Formatter:
    """Chooses one width and notation for all elements of a (real) tensor, like PyTorch's."""

    def __init__(self, values: np.ndarray, floating: bool) -> None:
        self.floating_dtype = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)

        if not floating:
            # Only distinct values can differ in width; np.unique keeps this cheap for big tensors.
            for value in np.unique(flat).tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return

        nonzero_finite = flat[np.isfinite(flat) & (flat != 0)]
        if nonzero_finite.size == 0:
            return  # nothing to measure: zeros, nan and inf print in int mode at width 1

        absolute = np.abs(nonzero_finite)
        min_abs = float(absolute.min())
        max_abs = float(absolute.max())
        self.int_mode = bool(np.all(nonzero_finite == np.ceil(nonzero_finite)))
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = max_abs / min_abs > 1000.0 or max_abs > 1.0e8 or min_abs < 1.0e-4
        else:
            self.sci_mode = PRINT_OPTS.sci_mode

        precision = PRINT_OPTS.precision
        for value in np.unique(nonzero_finite).tolist():
            if self.sci_mode:
                width = len(f"{value:.{precision}e}")
            elif self.int_mode:
                width = len(f"{value:.0f}") + 1  # + 1 for the trailing "." of "3."
            else:
                width = len(f"{value:.{precision}f}")
            self.max_width = max(self.max_width, width)

    def width(self) -> int:
        return self.max_width

    def format(self, value: Any) -> str:
        if self.floating_dtype:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRINT_OPTS.precision}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                # The trailing dot marks a float tensor; nan/inf already look like floats.
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRINT_OPTS.precision}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


class _ElementFormatter:
    """Formats one element, either real or complex (real and imaginary parts sized separately)."""

    def __init__(self, real: _Formatter, imag: _Formatter | None = None) -> None:
        self.real = real
        self.imag = imag

    def element_length(self) -> int:
        # the element plus ", " between elements
        length = self.real.width() + 2
        if self.imag is not None:
            length += self.imag.width() + 1  # + 1 for the "j"
        return length

    def __call__(self, value: Any) -> str:
        if self.imag is None:
            return self.real.format(value)
        real_str = self.real.format(value.real)
        imag_str = (self.imag.format(value.imag) + "j").lstrip()
        # A sign already present (negative numbers, -0.) doubles as the separator.
        if imag_str[0] in "+-":
            return real_str + imag_str
        return real_str + "+" + imag_str


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


def _summarized_data(values: np.ndarray) -> np.ndarray:
    """The elements that stay visible after summarization (they alone decide widths)."""
    edge = PRINT_OPTS.edgeitems
    if values.ndim == 0:
        return values.reshape(-1)
    if values.ndim == 1:
        if values.shape[0] > 2 * edge:
            # values[-0:] is the whole array, so edgeitems=0 measures every element, as PyTorch.
            return np.concatenate((values[:edge], values[-edge:]))
        return values
    if not edge:
        return values.reshape(-1)[:0]
    if values.shape[0] > 2 * edge:
        rows = [values[i] for i in range(edge)]
        rows += [values[i] for i in range(values.shape[0] - edge, values.shape[0])]
    else:
        rows = list(values)
    return np.concatenate([_summarized_data(row).reshape(-1) for row in rows])


def _vector_str(values: np.ndarray, indent: int, summarize: bool, fmt: _ElementFormatter) -> str:
    edge = PRINT_OPTS.edgeitems
    elements_per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / fmt.element_length()))

    if summarize and not edge:
        data = ["..."]
    elif summarize and values.shape[0] > 2 * edge:
        data = (
            [fmt(v) for v in values[:edge].tolist()]
            + [" ..."]
            + [fmt(v) for v in values[-edge:].tolist()]
        )
    else:
        data = [fmt(v) for v in values.tolist()]

    lines = [
        ", ".join(data[i : i + elements_per_line]) for i in range(0, len(data), elements_per_line)
    ]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(
    values: np.ndarray, indent: int, summarize: bool, fmt: _ElementFormatter
) -> str:
    ndim = values.ndim
    if ndim == 0:
        return fmt(values.item())
    if ndim == 1:
        return _vector_str(values, indent, summarize, fmt)

    edge = PRINT_OPTS.edgeitems
    size = values.shape[0]
    if summarize and size > 2 * edge:
        slices = (
            [_tensor_str_with_formatter(values[i], indent + 1, summarize, fmt) for i in range(edge)]
            + ["..."]
            + [
                _tensor_str_with_formatter(values[i], indent + 1, summarize, fmt)
                for i in range(size - edge, size)
            ]
        )
    else:
        slices = [
            _tensor_str_with_formatter(values[i], indent + 1, summarize, fmt) for i in range(size)
        ]
    # Blank lines between slices grow with the rank: none between rows, one between matrices...
    return "[" + ("," + "\n" * (ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(values: np.ndarray, indent: int) -> str:
    if values.size == 0:
        return "[]"
    summarize = values.size > PRINT_OPTS.threshold
    is_complex = values.dtype.kind == "c"
    floating = is_complex or _is_floating(values.dtype)
    values = _to_python_values(values)

    def formatter_for(part: np.ndarray) -> _Formatter:
        return _Formatter(_summarized_data(part) if summarize else part, floating)

    if is_complex:
        fmt = _ElementFormatter(formatter_for(values.real), formatter_for(values.imag))
    else:
        fmt = _ElementFormatter(formatter_for(values))
    return _tensor_str_with_formatter(values, indent, summarize, fmt)


def _add_suffixes(tensor_str: str, suffixes: list[str], indent: int) -> str:
    parts = [tensor_str]
    # PyTorch's arithmetic, kept as is (it over-counts by 2 on a single-line repr) so that the
    # wrap points match.
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def format_tensor(
    values: np.ndarray,
    *,
    dtype_name: str,
    is_default_dtype: bool,
    device: str = "cpu",
    requires_grad: bool = False,
    grad_fn_name: str | None = None,
    prefix: str = "tensor(",
    default_dtype_name: str = "float32",
) -> str:
    """Render a tensor the way ``repr(torch_tensor)`` does.

    Args:
        values: the tensor's data (any shape, any layout); its numpy dtype drives formatting.
        dtype_name: gputensor dtype name, e.g. ``"float32"``; shown as ``dtype=gputensor.<name>``.
        is_default_dtype: whether the dtype equals the current default float dtype.
        device: device string; anything but ``"cpu"`` adds ``device='<device>'``.
        requires_grad: adds ``requires_grad=True`` when there is no ``grad_fn_name``.
        grad_fn_name: adds ``grad_fn=<name>``.
        prefix: text before the data; continuation lines are indented by its length.
        default_dtype_name: the current default float dtype's name; only consulted to tell
            whether a complex dtype is the implied one (complex128 for float64, else complex64).
    """
    values = np.asarray(values)
    indent = len(prefix)
    suffixes: list[str] = []
    if device != "cpu":
        suffixes.append(f"device='{device}'")

    default_complex = "complex128" if default_dtype_name == "float64" else "complex64"
    dtype_is_implied = is_default_dtype or dtype_name in (default_complex, "int64", "bool")
    dtype_suffix = f"dtype=gputensor.{dtype_name}"

    if values.size == 0:
        # Match NumPy: the shape is only implicit for the 1-d "[]".
        if values.ndim != 1:
            suffixes.append(f"size={tuple(values.shape)}")
        # No elements to infer the dtype from, so only the default float dtype goes unsaid.
        if not is_default_dtype:
            suffixes.append(dtype_suffix)
        tensor_str = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(values.shape)}")
        if not dtype_is_implied:
            suffixes.append(dtype_suffix)
        tensor_str = _tensor_str(values, indent)

    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")

    return _add_suffixes(prefix + tensor_str, suffixes, indent)
