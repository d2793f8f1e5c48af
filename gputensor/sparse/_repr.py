"""``repr`` of a sparse tensor, laid out like PyTorch's (torch/_tensor_str.py, sparse branch)."""

from __future__ import annotations

from typing import Any

from gputensor import _dtype as D
from gputensor._tensor_str import PRINT_OPTS, _tensor_str

_INDENT = len("tensor(")


def _part(t: Any, indent: int) -> str:
    from ._tensor import host_values
    arr = host_values(t)
    s = _tensor_str(arr, indent)
    if arr.size == 0:
        s += f", size={tuple(arr.shape)}"
    return s


def sparse_repr(x: Any) -> str:
    return parts_repr(x, (("indices", x._indices_t), ("values", x._values_t)), "sparse_coo", True)


def parts_repr(x: Any, parts: tuple, layout_name: str, force_newline: bool) -> str:
    """``tensor(<name>=tensor(...),\n <name>=..., size=..., nnz=..., layout=...)`` for a sparse
    tensor of any layout; ``force_newline``: the suffixes start a new line (COO does, the
    compressed layouts continue the values' line, as PyTorch prints them)."""
    body = (",\n" + " " * _INDENT).join(
        f"{name}=tensor(" + _part(t, _INDENT + len(name) + len("=tensor(")) + ")"
        for name, t in parts)
    # PyTorch's order: device, size, nnz, dtype (unless implied), layout, autograd.
    suffixes = [f"device='{x.device}'"] if x.device.type != "cpu" else []
    suffixes += [f"size={tuple(x._shape)}", f"nnz={x._nnz()}"]
    default = D.get_default_dtype()
    implied = (default, D.complex128 if default is D.float64 else D.complex64, D.int64, D.bool)
    if x._dtype not in implied:
        suffixes.append(f"dtype=gputensor.{x._dtype.name}")
    suffixes.append(f"layout=gputensor.{layout_name}")
    if x.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(x.grad_fn).__name__}>")
    elif x._requires_grad:
        suffixes.append("requires_grad=True")
    # PyTorch's _add_suffixes with force_newline for sparse tensors: the first suffix always
    # starts a new line; later ones wrap at the print line width.
    out = [body]
    last = len(body) - body.rfind("\n") + 1
    force = force_newline
    for s in suffixes:
        if force or last + len(s) + 2 > PRINT_OPTS.linewidth:
            out.append(",\n" + " " * _INDENT + s)
            last = _INDENT + len(s)
            force = False
        else:
            out.append(", " + s)
            last += len(s) + 2
    out.append(")")
    return "tensor(" + "".join(out)
