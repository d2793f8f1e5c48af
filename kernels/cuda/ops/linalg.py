"""The CUDA backend's matrix products (``_gemm``) and ``einsum``, on device tensors.

``_gemm(out, a, b, c, beta, alpha)`` has the CPU kernel's contract (kernels/cpu/linalg.py):
out = beta * c + alpha * (a @ b), batched, a: (*Ba, M, K), b: (*Bb, K, N), out: (*B, M, N), batch
dims broadcasting, any strides, c None or broadcastable to out (possibly out itself, for the
in-place add* ops); beta == 0 ignores c and alpha == 0 ignores the product.

Two engines serve it:
- floating and complex dtypes go to the runtime's cuBLAS-style column-major strided-batched
  ``gemm`` (cublasGemmStridedBatchedEx on a GPU; float16/bfloat16 accumulate in float32 on
  tensor cores; float32 uses TF32 exactly when ``gt.backends.cuda.matmul.allow_tf32`` /
  ``gt.set_float32_matmul_precision`` allow it). A row-major (M, N) result is the
  column-major (N, M) matrix ``out^T = b^T a^T``, so each operand whose matrix dims have a
  unit stride is read in place through the transpose flags (no copy); an operand whose batch
  dims do not merge into one stride is copied first (as PyTorch's matmul does), so every
  product is one call. The layout analysis is cached per layout (``_PLANS``).
- integer and bool dtypes run the tiled shared-memory kernel in linalg.cu, which takes all strides
  (batch strides in a small device array), so it never copies an operand. So do the real
  floating products made while a CUDA graph is being captured: CuPy's cuBLAS wrappers refuse
  a capturing stream (complex products there raise NotImplementedError).

einsum mirrors what NumPy's einsum does for the CPU kernel with products: repeated labels become
diagonal views, labels only one operand has are summed away (a product with a broadcast ones
vector), operands are contracted pairwise left to right as batched products, and the result is
permuted into the output. float16/bfloat16 einsums compute in float32, as on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from gputensor import _dtype as D
from gputensor._tensor import Tensor, contiguous_strides
from gputensor.backends.cuda import matmul as _matmul_flags
from gputensor.kernels.allocation import empty, kernel
from gputensor.kernels.layout import broadcast_strides
from gputensor.kernels.registry import CUDA
from gputensor.storage.allocator import driver_for

from ..device import (
    CONSTANTS_MAX,
    CudaSource,
    constant_array,
    grid_for,
    launch,
    runtime,
)
from ..dtypes import CTYPES, SHORT
from ..runtime import gemm_span

SOURCE = CudaSource("linalg.cu")

# cuBLAS-style gemm dtypes, and the tiled kernel's: (dtype, accumulator, host scalar type).
BLAS_DTYPES = (D.float16, D.bfloat16, D.float32, D.float64, D.complex64, D.complex128)
_ACC = {D.bool: ("bool", "bool"), D.float16: ("float", "float"),
        D.bfloat16: ("float", "float"), D.float32: ("float", "float"),
        D.float64: ("double", "double")}
TILED_DTYPES = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64, D.float16, D.bfloat16,
                D.float32, D.float64)
_TILE = 64       # output tile side of the tiled kernel (linalg.cu: BM = BN)
_THREADS = 16    # threads per block side
_MAX_GRID_YZ = 65535

SOURCE.instantiate(
    "gemm_{s}",
    "{T}* out, const {T}* a, const {T}* b, const {T}* c, {S} alpha, {S} beta, long long M, "
    "long long N, long long K, long long batch, long long a_sm, long long a_sk, long long b_sk, "
    "long long b_sn, long long c_sm, long long c_sn, long long o_sm, long long o_sn, "
    "const long long* meta",
    "gt_gemm::gemm_tiled<{T}, {A}, {S}>(out, a, b, c, alpha, beta, M, N, K, batch, a_sm, a_sk, "
    "b_sk, b_sn, c_sm, c_sn, o_sm, o_sn, meta)",
    [{"s": SHORT[d], "T": CTYPES[d], "A": _ACC.get(d, ("unsigned long long",))[0],
      "S": _ACC.get(d, (None, "long long"))[1]} for d in TILED_DTYPES])
SOURCE.instantiate("gt_zero_bytes", "unsigned char* p, long long nbytes",
                   "gt_fill_zero_bytes(p, nbytes)", [{}])



# -- small device helpers (shared with the convolution kernels) -------------------------------
def zero_(t: Tensor) -> None:
    """Fill a contiguous CUDA tensor with zeros (all-zero bits for every dtype)."""
    n = t.numel() * t._dtype.itemsize
    if n:
        launch(SOURCE, "gt_zero_bytes", grid_for(n), 256, [t, np.int64(n)])


def _float_pairs(t: Tensor) -> Tensor:
    """A complex tensor as the real tensor of its (re, im) pairs: shape (*shape, 2)."""
    real = D.float32 if t._dtype is D.complex64 else D.float64
    return Tensor._make(t._storage, real, (*t._shape, 2), tuple(2 * s for s in t._stride) + (1,),
                        2 * t._offset)


def copy_into(dst: Tensor, src: Tensor) -> None:
    """dst[...] = src (broadcast, cast to dst's dtype) with the CUDA ``_copy`` kernel; complex
    tensors of one dtype copy as pairs of reals (the elementwise kernels are real-only)."""
    if dst._dtype.is_complex:
        if src._dtype is not dst._dtype:
            raise TypeError(f"CUDA copy from {src._dtype} to {dst._dtype} is not supported")
        lead = dst.dim() - src.dim()
        src = Tensor._make(src._storage, src._dtype, (1,) * lead + src._shape,
                           (0,) * lead + src._stride, src._offset)
        dst, src = _float_pairs(dst), _float_pairs(src)
    kernel(dst, "_copy")(dst, [src], (), dst._dtype)


def materialize(t: Tensor, dtype: D.dtype | None = None) -> Tensor:
    """A new contiguous copy of ``t`` (broadcast dims expanded), optionally cast."""
    out = empty(t._shape, dtype or t._dtype, t.device)
    if out.numel():
        copy_into(out, t)
    return out


def ones(dtype: D.dtype, device: Any) -> Tensor:
    """A one-element CUDA tensor holding 1 (uploaded, a few bytes)."""
    t = empty((1,), dtype, device)
    driver_for("cuda").from_host(t._storage._buf, 0, np.ones(1, dtype.np_dtype))
    return t


# -- layouts --------------------------------------------------------------------------------------
def _bstrides(t: Tensor, shape: Sequence[int]) -> tuple[int, ...]:
    """``t``'s strides broadcast (right-aligned, 0 where it repeats) to ``shape``."""
    return broadcast_strides(shape, t._shape, t._stride)


def _blas_form(rows: int, cols: int, sr: int, sc: int) -> tuple[str, int] | None:
    """A logical row-major (rows, cols) matrix with strides (sr, sc) as op(X) of a stored
    column-major X: ('N', ld) when it is column-major itself, ('T', ld) when it is the
    transpose of one, None when neither dim has a unit stride (it needs a copy)."""
    if (sr == 1 or rows <= 1) and (cols <= 1 or sc >= max(1, rows)):
        return "N", max(1, rows, sc if cols > 1 else 1)
    if (sc == 1 or cols <= 1) and (rows <= 1 or sr >= max(1, cols)):
        return "T", max(1, cols, sr if rows > 1 else 1)
    return None


def _overlaps(out: Tensor, *others: Tensor | None) -> bool:
    return any(x is not None and x._storage is out._storage for x in others)


def _same_view(c: Tensor, out: Tensor) -> bool:
    """Whether ``c`` broadcast to out's shape addresses exactly out's elements."""
    if c._storage is not out._storage or c._offset != out._offset:
        return False
    cs = _bstrides(c, out._shape)
    return all(n == 1 or s == t for n, s, t in zip(out._shape, cs, out._stride, strict=True))


# -- the gemm -------------------------------------------------------------------------------------
@CUDA.register("_gemm")
def gemm(out: Tensor, a: Tensor, b: Tensor, c: Tensor | None, beta: Any, alpha: Any) -> None:
    """out = beta * c + alpha * (a @ b), batched (see the module docstring)."""
    gemm_into(out, a, b, c, beta, alpha)


def gemm_into(out: Tensor, a: Tensor, b: Tensor, c: Tensor | None = None, beta: Any = 0,
              alpha: Any = 1) -> None:
    """The ``_gemm`` kernel, callable by other CUDA kernels (convolutions, einsum)."""
    if out.numel() == 0:
        return
    dt = out._dtype
    if c is not None and beta == 0:
        c = None
    if c is not None and c._storage is out._storage and not _same_view(c, out):
        c = materialize(c)  # an overlapping but differently laid out addend: read it first
    target = out
    if _overlaps(out, a, b):  # the product must not overwrite its own operands
        target = empty(out._shape, dt, out.device)
    k = a._shape[-1] if alpha != 0 else 0
    rt = runtime()
    capturing = rt.capturing
    if dt in BLAS_DTYPES and (not capturing or rt.blas_captures):
        _blas_gemm(rt, target, a, b, c, beta, alpha, k)
    elif dt in TILED_DTYPES:
        # also the real floating products of a CUDA graph capture where cuBLAS cannot be
        # captured (no libcublas found for cublas_capture.py): a kernel launch captures
        _tiled_gemm(target, a, b, c, beta, alpha, k)
    elif capturing:
        raise NotImplementedError(f"{dt} matrix products cannot be captured in a CUDA graph: "
                                  f"CuPy's cuBLAS refuses capturing streams")
    else:
        raise TypeError(f"matrix products on CUDA do not support dtype {dt}")
    if target is not out:
        copy_into(out, target)


def _tiled_gemm(out: Tensor, a: Tensor, b: Tensor, c: Tensor | None, beta: Any, alpha: Any,
                k: int) -> None:
    shape = out._shape
    m, n = shape[-2:]
    bshape = shape[:-2]
    a_st, b_st = _bstrides(a, (*bshape, m, a._shape[-1])), _bstrides(b, (*bshape, b._shape[-2], n))
    c_st = _bstrides(c, shape) if c is not None else (0,) * len(shape)
    o_st = out._stride
    nb = len(bshape)
    meta = constant_array([nb, *bshape, *a_st[:nb], *b_st[:nb], *c_st[:nb], *o_st[:nb]])
    dt = out._dtype
    # Scalars as NumPy scalars of each parameter's C type (what the runtimes pass by value).
    if dt is D.bool:
        al, be = bool(alpha), bool(beta)  # Python bool: both runtimes pass 1 byte
    elif dt is D.float64:
        al, be = np.float64(alpha), np.float64(beta)
    elif dt.is_floating_point:
        al, be = np.float32(alpha), np.float32(beta)
    else:
        al, be = np.int64(alpha), np.int64(beta)
    batches = math.prod(bshape)
    grid = (-(-n // _TILE), min(-(-m // _TILE), _MAX_GRID_YZ), min(batches, _MAX_GRID_YZ))
    sizes = [m, n, k, batches, a_st[-2], a_st[-1], b_st[-2], b_st[-1], c_st[-2], c_st[-1],
             o_st[-2], o_st[-1]]
    launch(SOURCE, f"gemm_{SHORT[dt]}", grid, (_THREADS, _THREADS),
           [out, a if k else None, b if k else None, c, al, be, *map(np.int64, sizes), meta])


# (runtime, dtype, tf32, k > 0, layouts of out, a, b) -> _GemmPlan: what a product of that
# layout copies and the prepared BLAS call, so a training step's repeated products skip the
# layout analysis. Bounded like the elementwise layouts; a plan holds its runtime, so the
# runtime's id in the key cannot be reused while the entry exists.
_PLANS: dict[tuple, _GemmPlan] = {}


class _GemmPlan(NamedTuple):
    temp_out: bool                   # out is not BLAS-writable: compute into a fresh tensor
    a_copy: tuple[int, ...] | None   # shape to materialise a at first (None: read in place)
    b_copy: tuple[int, ...] | None
    swap: bool                       # computed as out^T = b^T a^T (out is row-major)
    run: Any                         # the runtime's prepared gemm: run(alpha, a, b, beta, c)
    spans: tuple[int, int, int]      # bytes a, b and the target span from their first element


def _blas_gemm(rt: Any, out: Tensor, a: Tensor, b: Tensor, c: Tensor | None, beta: Any,
               alpha: Any, k: int) -> None:
    dt = out._dtype
    tf32 = dt is D.float32 and _matmul_flags.allow_tf32
    key = (rt, dt, tf32, k != 0, out._shape, out._stride, a._shape, a._stride, b._shape,
           b._stride)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan_gemm(rt, dt, tf32, k, out._shape, out._stride, a._shape, a._stride,
                          b._shape, b._stride)
        if len(_PLANS) >= CONSTANTS_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    target = empty(out._shape, dt, out.device) if plan.temp_out else out
    if c is not None and not _same_view(c, target):
        copy_into(target, c)
    beta = beta if c is not None else 0
    pc = _operand_ptr(target, plan.spans[2])
    if k:
        if plan.a_copy is not None:
            a = materialize(_expanded(a, plan.a_copy))
        if plan.b_copy is not None:
            b = materialize(_expanded(b, plan.b_copy))
        pa, pb = _operand_ptr(a, plan.spans[0]), _operand_ptr(b, plan.spans[1])
        if plan.swap:
            pa, pb = pb, pa
        plan.run(alpha, pa, pb, beta, pc)
    else:  # no product: C = beta * C (or zeros), never reading a or b
        plan.run(alpha, pc, pc, beta, pc)
    if target is not out:
        copy_into(out, target)


def _operand_ptr(t: Tensor, span: int) -> int:
    """The address of ``t``'s first element, after checking that the ``span`` bytes the gemm
    touches from there lie inside its buffer (a view is in bounds by construction; this keeps
    a wrong plan from ever reaching past an allocation)."""
    buf = t._storage._buf
    off = t._offset * t._dtype.itemsize
    if off + span > buf.size:
        raise RuntimeError(f"gemm: an operand of shape {list(t._shape)}, strides "
                           f"{list(t._stride)} spans {span} bytes from byte offset {off}, past "
                           f"its {buf.size}-byte buffer")
    return int(buf.ptr) + off


def _expanded(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``t`` broadcast to ``shape`` (a view: 0 strides where it repeats)."""
    if t._shape == shape:
        return t
    return Tensor._make(t._storage, t._dtype, shape, _bstrides(t, shape), t._offset)


def _collapses(bshape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether one operand's batch dims merge into a single stride."""
    return not any(n != 1 for n in _batch_runs(bshape, strides)[0])


def _plan_gemm(rt: Any, dt: D.dtype, tf32: bool, k: int, shape: tuple[int, ...],
               o_st: tuple[int, ...], a_shape: tuple[int, ...], a_st: tuple[int, ...],
               b_shape: tuple[int, ...], b_st: tuple[int, ...]) -> _GemmPlan:
    """One strided-batched BLAS call for this layout. An operand whose matrix has no unit
    stride, or whose batch dims do not merge into one stride, is materialised first (the
    copy PyTorch's matmul makes too: one copy kernel and one product beat a loop of
    products); a target that BLAS cannot write is a fresh contiguous tensor."""
    m, n = shape[-2:]
    bshape = shape[:-2]
    # The result must be column-major as out^T (N, M) (a row-major out) or as out (M, N).
    t_st, temp = o_st, False
    if (_blas_form(n, m, o_st[-1], o_st[-2]) or ("",))[0] == "N":
        direct = False
    elif (_blas_form(m, n, o_st[-2], o_st[-1]) or ("",))[0] == "N":
        direct = True
    else:
        temp = True
    if temp or not _collapses(bshape, o_st[:-2]):
        t_st, temp, direct = contiguous_strides(shape), True, False
    copies: list[tuple[int, ...] | None] = [None, None]
    strides = []
    for i, (rows, cols, xs, xst) in enumerate(((m, a_shape[-1], a_shape, a_st),
                                               (b_shape[-2], n, b_shape, b_st))):
        full = (*bshape, rows, cols)
        if k and not _blas_form(rows, cols, *xst[-2:]):
            copies[i], xst = xs, contiguous_strides(xs)
        st = broadcast_strides(full, xs, xst)
        if k and not _collapses(bshape, st[:-2]):
            copies[i], st = full, contiguous_strides(full)
        strides.append(st)
    a_bst, b_bst = strides
    _, inner, (sa, sb, sc) = _batch_runs(bshape, a_bst[:-2], b_bst[:-2], t_st[:-2])
    np_dt, isz = dt.np_dtype, dt.itemsize
    if not k:
        rows, cols = (m, n) if direct else (n, m)
        ldc = (_blas_form(m, n, t_st[-2], t_st[-1]) if direct
               else _blas_form(n, m, t_st[-1], t_st[-2]))[1]
        run = rt.gemm_plan("N", "N", rows, cols, 0, max(1, rows), 1, ldc, np_dt, batch=inner,
                           stride_a=0, stride_b=0, stride_c=sc)
        spans = (0, 0, gemm_span("N", rows, cols, ldc, inner, sc) * isz)
        return _GemmPlan(temp, None, None, False, run, spans)
    # direct: C (M, N) = op(a) op(b); else C^T (N, M) = op(b^T) op(a^T), every dim pair swapped
    x, y, rows, cols, sx, sy, flip = (a_bst, b_bst, m, n, sa, sb, False) if direct else \
        (b_bst, a_bst, n, m, sb, sa, True)

    def pair(st: Sequence[int]) -> tuple[int, int]:
        return (st[-1], st[-2]) if flip else (st[-2], st[-1])

    ta, lda = _blas_form(rows, k, *pair(x))
    tb, ldb = _blas_form(k, cols, *pair(y))
    ldc = _blas_form(rows, cols, *pair(t_st))[1]
    run = rt.gemm_plan(ta, tb, rows, cols, k, lda, ldb, ldc, np_dt, batch=inner, stride_a=sx,
                       stride_b=sy, stride_c=sc, allow_tf32=tf32)
    span_x, span_y = gemm_span(ta, rows, k, lda, inner, sx), gemm_span(tb, k, cols, ldb, inner, sy)
    spans = (span_x, span_y) if direct else (span_y, span_x)
    spans = (*spans, gemm_span("N", rows, cols, ldc, inner, sc))
    return _GemmPlan(temp, copies[0], copies[1], not direct, run,
                     tuple(x * isz for x in spans))


def _batch_runs(bshape: Sequence[int], *strides: Sequence[int]
                ) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
    """Split batch dims into (outer dims to loop over, inner batch count, each operand's
    stride of the inner batch): the trailing dims merge while, for every operand,
    stride[d] == stride[d + 1] * size[d + 1] (size-1 dims always merge)."""
    dims = [d for d, n in enumerate(bshape) if n != 1]
    if not dims:
        return (), 1, tuple(0 for _ in strides)
    last = dims[-1]
    inner = bshape[last]
    inner_strides = [st[last] for st in strides]
    cut = len(dims) - 1
    while cut > 0:
        d = dims[cut - 1]
        if any(st[d] != st_in * inner for st, st_in in zip(strides, inner_strides, strict=True)):
            break
        inner *= bshape[d]
        cut -= 1
    outer = tuple(bshape[d] if d in dims[:cut] else 1 for d in range(len(bshape)))
    return outer, inner, tuple(inner_strides)


# -- einsum ---------------------------------------------------------------------------------------
_EINSUM_WORK = {D.float16: D.float32, D.bfloat16: D.float32}

Operand = tuple[Tensor, list[str]]


@CUDA.register("einsum")
def einsum(out: Tensor, operands: list[Tensor], equation: str, compute: D.dtype) -> None:
    """out = einsum(equation, *operands) in ``compute`` (the CPU kernel's contract: an explicit
    letters-only equation, every operand at the broadcast size of each of its labels)."""
    if out.numel() == 0:
        return
    lhs, out_term = equation.split("->")
    terms = lhs.split(",")
    if any(x.numel() == 0 for x in operands):
        zero_(out)  # a sum over an empty label (out is the frontend's fresh tensor)
        return
    work = _EINSUM_WORK.get(compute, compute)
    sizes = {lab: s for x, term in zip(operands, terms, strict=True)
             for lab, s in zip(term, x._shape, strict=True)}
    items = [_diagonal(x, term, work) for x, term in zip(operands, terms, strict=True)]
    cur = items[0]
    for i in range(1, len(items)):
        later = set(out_term).union(*(lab for _, lab in items[i + 1:]))
        left = _sum_out(cur, later | set(items[i][1]), sizes)
        right = _sum_out(items[i], later | set(left[1]), sizes)
        cur = _contract(left, right, later, sizes)
    x, labels = _sum_out(cur, set(out_term), sizes)
    perm = [labels.index(lab) for lab in out_term]
    copy_into(out, x._view(tuple(x._shape[p] for p in perm), tuple(x._stride[p] for p in perm),
                           x._offset))


def _diagonal(x: Tensor, term: str, work: D.dtype) -> Operand:
    """x with repeated labels taken as diagonals (a view), cast to ``work`` when needed."""
    labels: list[str] = []
    shape: list[int] = []
    strides: list[int] = []
    for lab, n, s in zip(term, x._shape, x._stride, strict=True):
        if lab in labels:
            strides[labels.index(lab)] += s
        else:
            labels.append(lab)
            shape.append(n)
            strides.append(s)
    v = x._view(tuple(shape), tuple(strides), x._offset)
    return (v if x._dtype is work else materialize(v, work)), labels


def _merge(dims: list[tuple[int, int]]) -> tuple[int, int] | None:
    """(size, stride) of consecutive dims merged into one, None if their strides don't nest."""
    dims = [(n, s) for n, s in dims if n != 1]
    if not dims:
        return 1, 1
    for (_, s0), (n1, s1) in zip(dims, dims[1:], strict=False):
        if s0 != s1 * n1:
            return None
    return math.prod(n for n, _ in dims), dims[-1][1]


def _matrix(x: Tensor, labels: list[str], batch: list[str], rows: list[str],
            cols: list[str]) -> Tensor:
    """x as (*batch, prod(rows), prod(cols)): a view, or a copy when the dims don't merge."""
    pos = {lab: i for i, lab in enumerate(labels)}
    dims = [(x._shape[pos[lab]], x._stride[pos[lab]]) for lab in batch + rows + cols]
    nb, nr = len(batch), len(rows)
    r, c = _merge(dims[nb:nb + nr]), _merge(dims[nb + nr:])
    if r is None or c is None:
        order = [pos[lab] for lab in batch + rows + cols]
        perm = x._view(tuple(x._shape[p] for p in order), tuple(x._stride[p] for p in order),
                       x._offset)
        x = materialize(perm)
        labels = batch + rows + cols
        return _matrix(x, labels, batch, rows, cols)
    shape = tuple(n for n, _ in dims[:nb]) + (r[0], c[0])
    return x._view(shape, tuple(s for _, s in dims[:nb]) + (r[1], c[1]), x._offset)


def _sum_out(item: Operand, keep: set[str], sizes: dict[str, int]) -> Operand:
    """Sum away the labels of ``item`` not in ``keep``: (kept, summed) @ ones(summed)."""
    x, labels = item
    kept = [lab for lab in labels if lab in keep]
    summed = [lab for lab in labels if lab not in keep]
    if not summed:
        return item
    res = empty(tuple(sizes[lab] for lab in kept), x._dtype, x.device)
    mat = _matrix(x, labels, [], kept, summed)
    one = ones(x._dtype, x.device)
    vec = one._view((mat._shape[1], 1), (0, 0), 0)
    gemm_into(res._view((mat._shape[0], 1), (1, 1), 0), mat, vec)
    return res, kept


def _contract(left: Operand, right: Operand, keep: set[str], sizes: dict[str, int]) -> Operand:
    """A batched product of two operands over their shared labels not in ``keep``."""
    (a, la), (b, lb) = left, right
    batch = [lab for lab in la if lab in lb and lab in keep]
    summed = [lab for lab in la if lab in lb and lab not in keep]
    rows = [lab for lab in la if lab not in lb]
    cols = [lab for lab in lb if lab not in la]
    am = _matrix(a, la, batch, rows, summed)
    bm = _matrix(b, lb, batch, summed, cols)
    labels = batch + rows + cols
    res = empty(tuple(sizes[lab] for lab in labels), a._dtype, a.device)
    m, n = am._shape[-2], bm._shape[-1]
    bshape = am._shape[:-2]
    gemm_into(res._view((*bshape, m, n), (*res._stride[:len(batch)], n, 1), 0), am, bm)
    return res, labels
