"""torch.histogram / torch.histogramdd: bin edges, then one index_add of the weights.

PyTorch computes these on the CPU only; here they are composites (searchsorted, elementwise
ops, index_add), so they run on every device. Edge rules follow ATen's histogramdd kernel: an
element lands in bin ``i`` when ``edges[i] <= x < edges[i + 1]``, the right-most bin also takes
``x == edges[-1]``, and elements outside ``[edges[0], edges[-1]]`` (and NaN) are dropped. With
an int bin count the edges are ``linspace`` over ``range`` (default: the data's min and max, one
host read as in PyTorch; an empty range widens by 0.5 either side, NumPy's rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gputensor import _dtype as D
from gputensor import return_types
from gputensor._tensor import Tensor

from ._core import op
from .decompositions import deliver_all
from .shape import _is_int

# c10's type names, which the histogram messages print
_C10_NAMES = {D.float32: "float", D.float64: "double", D.float16: "c10::Half",
              D.bfloat16: "c10::BFloat16", D.int64: "long int", D.int32: "int",
              D.int16: "short int", D.int8: "signed char", D.uint8: "unsigned char",
              D.bool: "bool", D.complex64: "c10::complex<float>",
              D.complex128: "c10::complex<double>"}


def _c10(dt: D.dtype) -> str:
    return _C10_NAMES.get(dt, dt.legacy_name)


def _check_input(input: Any, fn: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if input.dtype not in (D.float32, D.float64, D.float16, D.bfloat16):
        raise NotImplementedError(f"\"histogramdd\" not implemented for "
                                  f"'{input.dtype.legacy_name}'")


def _check_weight(input: Tensor, weight: Tensor | None, shape: tuple[int, ...]) -> None:
    if weight is None:
        return
    if not isinstance(weight, Tensor):
        raise TypeError(f"histogramdd(): argument 'weight' must be Tensor, not "
                        f"{type(weight).__name__}")
    if tuple(weight.shape) != shape[:-1]:
        raise RuntimeError(f"gputensor.histogramdd: if weight tensor is provided it should have "
                           f"the same shape as the input tensor excluding its innermost dimension, "
                           f"but got input with shape {list(shape)} and weight with shape "
                           f"{list(weight.shape)}")
    if weight.dtype is not input.dtype:
        raise RuntimeError(f"gputensor.histogramdd: if weight tensor is provided, input tensor and "
                           f"weight tensor should have the same dtype, but got "
                           f"input({_c10(input.dtype)}), and weight({_c10(weight.dtype)})")
    if weight.device != input.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {input.device} and {weight.device}!")


def _check_count(n: int, dim: int) -> None:
    if n <= 0:
        raise RuntimeError(f"gputensor.histogram(): bins must be > 0, but got {n} for "
                           f"dimension {dim}")


def _outer_edges(x: Tensor, span: Sequence[float] | None) -> list[tuple[float, float]]:
    """(leftmost, rightmost) edge per dim: ``span`` (the range argument), else the data's
    extremes, else [0, 1]."""
    n = x.shape[-1]
    if span is not None:
        flat = [float(r) for r in span]
        if len(flat) != 2 * n:
            raise RuntimeError(f"gputensor.histogramdd: for a {n}-dimensional histogram range "
                               f"should have {2 * n} elements, but got {len(flat)}")
        bounds = list(zip(flat[0::2], flat[1::2], strict=True))
    elif x.numel():
        if x.dtype in (D.float16, D.bfloat16):
            # PyTorch's histogram kernels take 16-bit floats; its min/max read does not
            raise NotImplementedError(f"\"histogramdd\" not implemented for "
                                      f"'{x.dtype.legacy_name}'")
        lo, hi = x.amin(0).tolist(), x.amax(0).tolist()  # one host read, as PyTorch's .item()
        bounds = list(zip(lo, hi, strict=True))
    else:
        bounds = [(0.0, 1.0)] * n
    out = []
    for d, (lo, hi) in enumerate(bounds):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"gputensor.histogramdd: dimension {d}'s range [{_num(lo)}, "
                               f"{_num(hi)}] is not finite")
        if lo > hi:
            raise RuntimeError(f"gputensor.histogramdd: min should not exceed max, but got min "
                               f"{_num(lo)} max {_num(hi)} for dimension {d}")
        out.append((lo - 0.5, hi + 0.5) if lo == hi else (lo, hi))
    return out


def _num(v: float) -> str:
    """A double as C++'s ostream prints it (3, 2.5, nan, inf)."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:g}"


def _int_like(b: Any) -> bool:
    """An int, or a one-element integral (or bool) tensor: what PyTorch's parser takes as an
    item of an int list."""
    if isinstance(b, Tensor):
        return b.numel() == 1 and not (b.dtype.is_floating_point or b.dtype.is_complex)
    return _is_int(b)


def _parse_bins(bins: Any) -> Any:
    """histogramdd's bins as PyTorch's argument parser reads them, before any other check: a
    sequence whose first item is int-like is an int list (every item must be), any other
    sequence a tensor list."""
    if not isinstance(bins, list | tuple) or not bins:
        return bins
    if _int_like(bins[0]):
        for i, b in enumerate(bins):
            if not _int_like(b):
                raise TypeError(f"histogramdd(): argument 'bins' failed to unpack the object at "
                                f"pos {i + 1} with error \"type must be tuple of ints,but got "
                                f"{type(b).__name__}\"")
        return [int(b.item()) if isinstance(b, Tensor) else int(b) for b in bins]
    for i, b in enumerate(bins):
        if not isinstance(b, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                            f"{type(b).__name__}")
    return list(bins)


def _edges(x: Tensor, bins: Any, span: Sequence[float] | None) -> tuple[list[Tensor], list[bool]]:
    """One 1-d edge tensor per dim of the (M, N) sample matrix ``x``, and per dim whether
    they are bin-count edges that collapsed to one value in x's dtype (see _histogramdd)."""
    import gputensor as gt
    n = x.shape[-1]
    if isinstance(bins, Tensor) or (isinstance(bins, Sequence)
                                    and any(isinstance(b, Tensor) for b in bins)):
        seq = [bins] if isinstance(bins, Tensor) else list(bins)
        if len(seq) != n:
            raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                               "dimension of the input.")
        for d, b in enumerate(seq):
            if b.dim() != 1:
                raise RuntimeError(f"gputensor.histogramdd: bins tensor should have one dimension, "
                                   f"but got {b.dim()} dimensions in the bins tensor for "
                                   f"dimension {d}")
            _check_count(b.numel() - 1, d)
            if b.dtype is not x.dtype:
                raise RuntimeError(f"gputensor.histogramdd: input tensor and bins tensors should "
                                   f"have the same dtype, but got input with dtype "
                                   f"{_c10(x.dtype)} and bins for dimension {d} with dtype "
                                   f"{_c10(b.dtype)}")
            if b.device != x.device:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                                   f"least two devices, {x.device} and {b.device}!")
        return [b.clone() for b in seq], [False] * n
    counts = [int(bins)] * n if _is_int(bins) else [int(b) for b in bins]
    if len(counts) != n:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    for d, c in enumerate(counts):
        _check_count(c, d)
    outer = _outer_edges(x, span)
    ft = x.dtype.np_dtype.type
    return ([gt.linspace(lo, hi, c + 1, dtype=x.dtype, device=x.device)
             for (lo, hi), c in zip(outer, counts, strict=True)],
            [bool(ft(lo) == ft(hi)) for lo, hi in outer])


def _histogramdd(x: Tensor, edges: list[Tensor], collapsed: list[bool], weight: Tensor | None,
                 density: bool) -> Tensor:
    """The (bins_0, ..., bins_{N-1}) histogram of the rows of the (M, N) matrix ``x``.
    Along a ``collapsed`` dim (bin-count edges all one value v: 1e30 +- 0.5 in float) PyTorch's
    interpolating kernel computes the position 0 * bins / 0 = NaN; its local search from
    the NaN's INT64_MIN then lands every element (each == v) in bin 1 (0 when there is one)."""
    import gputensor as gt
    sizes = [e.numel() - 1 for e in edges]
    if not edges:  # no dims: PyTorch's 0-d zero
        return gt.zeros((), dtype=x.dtype, device=x.device)
    flat = gt.zeros((), dtype=D.int64, device=x.device)
    keep = gt.ones((), dtype=D.bool, device=x.device)
    for d, e in enumerate(edges):
        col = x[:, d]
        keep = keep & (col >= e[0]) & (col <= e[-1])  # NaN fails both: dropped
        # the bin whose left edge is the last one <= x; x == edges[-1] joins the last bin
        pos = (gt.searchsorted(e, col, right=True) - 1).clamp(0, sizes[d] - 1)
        if collapsed[d]:
            pos = pos.clamp(min(1, sizes[d] - 1), min(1, sizes[d] - 1))
        flat = flat * sizes[d] + pos
    w = gt.ones_like(x[:, 0]) if weight is None else weight
    w = gt.where(keep, w, gt.zeros((), dtype=x.dtype, device=x.device))
    hist = gt.zeros(math.prod(sizes), dtype=x.dtype, device=x.device)
    if x.shape[0]:
        hist = hist.index_add(0, flat, w)
    hist = hist.reshape(sizes)
    if density:
        hist = hist / hist.sum()
        for d, e in enumerate(edges):
            shape = [1] * len(sizes)
            shape[d] = sizes[d]
            hist = hist / e.diff().reshape(shape)
    return hist


@op(differentiable=True)
def histogram(input: Tensor, bins: Any = 100, *, range: Sequence[float] | None = None,
              weight: Tensor | None = None, density: bool = False,
              out: Any = None) -> return_types.histogram:
    """Histogram of all elements: ``bins`` equal-width bins over ``range`` (default: the
    data's min and max) or the 1-d tensor of edges ``bins``; returns (hist, bin_edges)."""
    _check_input(input, "histogram")
    if isinstance(bins, Tensor) and range is not None:
        raise TypeError("histogram() received an invalid combination of arguments - got "
                        "(Tensor, Tensor, range=...): a bins tensor takes no range")
    if not isinstance(bins, Tensor) and not _is_int(bins):
        raise TypeError(f"histogram(): argument 'bins' must be int or Tensor, not "
                        f"{type(bins).__name__}")
    x = input.reshape(-1, 1)
    if weight is not None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"histogram(): argument 'weight' must be Tensor, not "
                            f"{type(weight).__name__}")
        weight = weight.reshape(-1)
    _check_weight(input, weight, tuple(x.shape))
    import gputensor as gt
    with gt.no_grad():  # no derivative, as in PyTorch: the outputs get a raising node
        edges, collapsed = _edges(x, [bins] if isinstance(bins, Tensor) else bins, range)
        hist = _histogramdd(x, edges, collapsed, weight, bool(density))
    return deliver_all(return_types.histogram(hist, edges[0]), out, "histogram")


@op(method=False)
def histogramdd(input: Tensor, bins: Any, *, range: Sequence[float] | None = None,
                weight: Tensor | None = None, density: bool = False
                ) -> return_types.histogramdd:
    """N-d histogram of the points in the last dim of ``input``: ``bins`` is an int, one int
    per dim, or one edge tensor per dim; returns (hist, bin_edges)."""
    bins = _parse_bins(bins)
    if isinstance(input, Tensor) and input.dim() == 0 and _is_int(bins):
        # PyTorch's int-bins overload repeats bins input.size(-1) times before any check
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    _check_input(input, "histogramdd")
    if isinstance(bins, Tensor):
        raise TypeError("histogramdd() received an invalid combination of arguments - got "
                        "(Tensor, bins=Tensor), but expected one of: int bins, tuple of ints "
                        "bins, tuple of Tensors bins")
    if input.dim() < 2:
        raise RuntimeError("gputensor.histogramdd: input tensor should have at least 2 dimensions")
    x = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
    _check_weight(input, weight, tuple(input.shape))
    import gputensor as gt
    with gt.no_grad():  # no derivative, as in PyTorch: the outputs get a raising node
        edges, collapsed = _edges(x, bins, range)
        hist = _histogramdd(x, edges, collapsed, None if weight is None else weight.reshape(-1),
                            bool(density))
    return return_types.histogramdd(hist, tuple(edges))


__all__ = ["histogram", "histogramdd"]
