"""``gt.sparse_compressed_tensor`` and ``gt.sparse_csr_tensor``/``csc``/``bsr``/``bsc``, with
PyTorch's validation: the metadata checks (dims, dtypes, devices, sizes) always, the index
values (``check_invariants=True``) with one device read."""

from __future__ import annotations

from typing import Any

import gputensor as gt
from gputensor import _dtype as D
from gputensor._device import to_device
from gputensor._layout import sparse_bsc, sparse_bsr, sparse_csc, sparse_csr
from gputensor._tensor import Tensor, parse_size

from ._compressed_ops import sparse_compressed
from .compressed import BLOCKED, COMPRESSED, INDEX_NAMES, KEY, ROW_MAJOR, CompressedTensor

_INDEX_DTYPES = {D.int32: "Int", D.int64: "Long"}


def _as_tensor(x: Any, dtype: Any, device: Any) -> Tensor:
    if isinstance(x, Tensor):
        if x._sparse:
            raise TypeError(f"sparse_compressed_tensor: expected dense index and value tensors, "
                            f"got a {x.layout.name} one")
        return x if device is None and dtype is None else x.to(device=device, dtype=dtype)
    return gt.tensor(x, dtype=dtype, device=device)


def _check_invariants(cidx: Tensor, pidx: Tensor, n_plain: int, layout: Any) -> None:
    """PyTorch's index invariants, read back in one transfer."""
    cname, pname = INDEX_NAMES[layout]
    cnt = "ncols" if layout in ROW_MAJOR else "nrows"
    c = cidx.to(gt.int64)
    p = pidx.to(gt.int64)
    nnz = p._shape[0]
    first, last = c[0], c[-1]
    steps = c[1:] - c[:-1]
    zero = gt.zeros((), dtype=gt.int64, device=c.device)
    step_lo = steps.amin() if steps.numel() else zero
    step_hi = steps.amax() if steps.numel() else zero
    lo, hi = (p.amin(), p.amax()) if nnz else (zero, zero)
    if nnz > 1:
        comp = gt.searchsorted(c[1:].contiguous(), gt.arange(nnz, device=c.device), right=True)
        unsorted = ((comp[1:] == comp[:-1]) & (p[1:] <= p[:-1])).any().to(gt.int64)
    else:
        unsorted = zero
    vals = gt.stack([first, last, step_lo, step_hi, lo, hi, unsorted]).cpu().tolist()
    first, last, step_lo, step_hi, lo, hi, unsorted = vals
    if first != 0:
        raise RuntimeError(f"`{cname}[..., 0] == 0` is not satisfied.")
    if last != nnz:
        raise RuntimeError(f"`{cname}[..., -1] == nnz` is not satisfied.")
    if step_lo < 0 or step_hi > n_plain:
        raise RuntimeError(f"`0 <= {cname}[..., 1:] - {cname}[..., :-1] <= {cnt}` is not "
                           f"satisfied.")
    if nnz and (lo < 0 or hi >= n_plain):
        raise RuntimeError(f"`0 <= {pname} < {cnt}` is not satisfied.")
    if unsorted:
        n = "nrows" if layout in ROW_MAJOR else "ncols"
        raise RuntimeError(f"`{pname}[..., {cname}[..., i - 1]:{cname}[..., i]] for all i = 1, "
                           f"..., {n} are sorted and distinct along the last dimension values` "
                           f"is not satisfied.")


def sparse_compressed_tensor(compressed_indices: Any, plain_indices: Any, values: Any,
                             size: Any = None, *, dtype: Any = None, layout: Any = None,
                             device: Any = None, pin_memory: bool = False,
                             requires_grad: bool = False,
                             check_invariants: bool | None = None) -> CompressedTensor:
    """A CSR/CSC/BSR/BSC tensor from its compressed indices, plain indices and values."""
    if layout not in COMPRESSED:
        got = "none" if layout is None else KEY.get(layout, getattr(layout, "name", layout))
        raise RuntimeError(f"sparse_compressed_tensor expected sparse compressed tensor layout "
                           f"but got {got}")
    cname, pname = INDEX_NAMES[layout]
    dev = None if device is None else to_device(device)
    if dev is None:
        dev = next((x.device for x in (values, compressed_indices, plain_indices)
                    if isinstance(x, Tensor)), None)
    vals = _as_tensor(values, None if dtype is None else D.to_dtype(dtype), dev)
    # An empty index list has no element to infer an integer dtype from: take int64.
    cidx, pidx = (_as_tensor(x, D.int64 if not isinstance(x, Tensor) and len(x) == 0 else None,
                             dev) for x in (compressed_indices, plain_indices))
    for name, t in ((cname, cidx), (pname, pidx)):
        if t.device != vals.device:
            raise RuntimeError(f"Values and {name} need to be on the same device.")
    if cidx._dtype not in _INDEX_DTYPES or pidx._dtype not in _INDEX_DTYPES:
        bad = cidx._dtype if cidx._dtype not in _INDEX_DTYPES else pidx._dtype
        raise RuntimeError(f"{cname} and {pname} dtype must be Int or Long, but got "
                           f"{bad.legacy_name}")
    if cidx._dtype is not pidx._dtype:
        raise RuntimeError(f"{cname} and {pname} must have the same dtype, bot got "
                           f"{_INDEX_DTYPES[cidx._dtype]} and {_INDEX_DTYPES[pidx._dtype]}, "
                           f"respectively")
    if cidx.dim() != pidx.dim():
        raise RuntimeError(f"{cname} and {pname} dimensionalities must be equal but got "
                           f"{cidx.dim()} and {pidx.dim()}, respectively")
    if cidx.dim() != 1:
        raise RuntimeError(f"{layout.name}: batched compressed tensors ({cname} of "
                           f"{cidx.dim()} dims) are not supported by gputensor")
    block_dims = 2 if layout in BLOCKED else 0
    if vals.dim() <= block_dims:
        raise RuntimeError(f"values must have dimensionality > sum of batch and block "
                           f"dimensionalities (=0 + {block_dims}) but got {vals.dim()}")
    nnz = vals._shape[0]
    R, C = tuple(vals._shape[1:3]) if block_dims else (1, 1)
    dense_shape = tuple(vals._shape[1 + block_dims:])
    n_comp = cidx._shape[0] - 1
    if size is None:
        n_plain = int(pidx.amax().item()) + 1 if pidx.numel() else 0
        comp_size, plain_size = n_comp, n_plain
        if layout in ROW_MAJOR:
            size = (comp_size * R, plain_size * C, *dense_shape)
        else:
            size = (plain_size * R, comp_size * C, *dense_shape)
    else:
        size = tuple(parse_size((size,)))
        if len(size) != 2 + len(dense_shape):
            raise RuntimeError(f"tensor dimensionality must be sum of batch, base, and dense "
                               f"dimensionalities (=0 + 2 + {len(dense_shape)}) but got "
                               f"{len(size)}")
        if tuple(size[2:]) != dense_shape:
            raise RuntimeError(f"values' dense shape {list(dense_shape)} must match the dense "
                               f"sizes {list(size[2:])} of the tensor size {list(size)}")
        for d, b in ((0, R), (1, C)):
            if block_dims and size[d] % b:
                raise RuntimeError(f"tensor shape[{d}] (={size[d]}) must be divisible with "
                                   f"blocksize[{d}] (={b}) as defined by values shape")
    rows, cols = size[0] // R, size[1] // C
    n_comp_want, n_plain = (rows, cols) if layout in ROW_MAJOR else (cols, rows)
    if cidx._shape[0] != n_comp_want + 1:
        what = ("rows" if layout in ROW_MAJOR else "columns") + (" blocks" if block_dims else "")
        what = what.replace("rows blocks", "row blocks").replace("columns blocks",
                                                                 "column blocks")
        raise RuntimeError(f"{cname}.shape[-1] must be equal to the number of {what} + 1 "
                           f"(={n_comp_want + 1}), but got {cidx._shape[0]}")
    if pidx._shape[0] != nnz:
        raise RuntimeError(f"{pname}.shape[-1] must be equal to nnz (={nnz}) as defined by "
                           f"values.shape[0], but got {pidx._shape[0]}")
    if check_invariants:
        _check_invariants(cidx, pidx, n_plain, layout)
    if pin_memory:
        cidx, pidx, vals = cidx.pin_memory(), pidx.pin_memory(), vals.pin_memory()
    out = sparse_compressed(cidx.contiguous(), pidx.contiguous(), vals.contiguous(), size, layout)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _layout_constructor(layout: Any) -> Any:
    cname, pname = INDEX_NAMES[layout]

    def construct(compressed_indices: Any, plain_indices: Any, values: Any, size: Any = None,
                  *, dtype: Any = None, device: Any = None, pin_memory: bool = False,
                  requires_grad: bool = False,
                  check_invariants: bool | None = None) -> CompressedTensor:
        return sparse_compressed_tensor(compressed_indices, plain_indices, values, size,
                                        dtype=dtype, layout=layout, device=device,
                                        pin_memory=pin_memory, requires_grad=requires_grad,
                                        check_invariants=check_invariants)
    construct.__name__ = construct.__qualname__ = f"sparse_{layout.name[7:]}_tensor"
    construct.__doc__ = (f"A {layout.name} tensor from ``{cname}``, ``{pname}`` and "
                         f"``values`` (see ``sparse_compressed_tensor``).")
    return construct


sparse_csr_tensor = _layout_constructor(sparse_csr)
sparse_csc_tensor = _layout_constructor(sparse_csc)
sparse_bsr_tensor = _layout_constructor(sparse_bsr)
sparse_bsc_tensor = _layout_constructor(sparse_bsc)


def _index_copy(name: str, compressed: bool) -> Any:
    def copy(input: Tensor, *, out: Tensor | None = None) -> Tensor:
        if not isinstance(input, CompressedTensor):
            kind = "row" if name in ("crow_indices", "col_indices") else "column"
            layout = getattr(input, "layout", None)
            raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got "
                               f"{KEY.get(layout, 'Strided')}")
        r = input._index(name, compressed).clone()
        return r if out is None else out.resize_(r.shape).copy_(r)
    copy.__name__ = f"{name}_copy"
    copy.__doc__ = f"A copy of ``input.{name}()``."
    return copy


crow_indices_copy = _index_copy("crow_indices", True)
col_indices_copy = _index_copy("col_indices", False)
ccol_indices_copy = _index_copy("ccol_indices", True)
row_indices_copy = _index_copy("row_indices", False)

__all__ = ["ccol_indices_copy", "col_indices_copy", "crow_indices_copy", "row_indices_copy",
           "sparse_bsc_tensor", "sparse_bsr_tensor", "sparse_compressed_tensor",
           "sparse_csc_tensor", "sparse_csr_tensor"]
