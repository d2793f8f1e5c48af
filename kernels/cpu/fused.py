"""The CPU backend's fused elementwise kernels (gt.compile's fusion, gputensor/_compile/
fusion.py): one Numba loop over a run of elementwise ops, each op's expression an inlined
function, values kept in registers between ops, only live results stored.

Every op computes as its own kernel does: operands cast to its compute dtype, the result
rounded to its output dtype (``np.float32(...)`` where the unfused kernel's store would round),
so fused and unfused results are equal bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor.kernels.layout import broadcast_strides, merge_dims
from gputensor.kernels.registry import CPU

from .codegen import load_module, vocabulary_hash
from .elementwise import INPUT_NAMES, PARALLEL_THRESHOLD, _scalar

_CASTS = {D.bool: "np.bool_"}


def _cast(dt: D.dtype) -> str:
    return _CASTS.get(dt, f"np.{dt.np_dtype.name}")


def fused_source(group: Any, ndim: int, parallel: bool) -> str:
    """The module source of a group's kernel over ``ndim`` loop dims:
    kernel(outputs..., inputs..., scalars...), arrays already viewed with the loop's shape."""
    lines = ["import numpy as np", "from numba import njit, prange",
             "from gputensor.kernels.cpu.scalar_fns import *  # noqa: F403",
             f"# vocabulary {vocabulary_hash()}", ""]
    for j, f in enumerate(group.ops):
        args = ", ".join(INPUT_NAMES[:f.op.arity] + tuple(f.op.params))
        lines += ["@njit(inline='always', error_model='numpy')", f"def op{j}({args}):",
                  f"    return {f.op.expr}", ""]
    outs = [f"O{k}" for k in range(len(group.outputs))]
    ins = [f"I{k}" for k in range(len(group.inputs))]
    idx = ", ".join(f"i{k}" for k in range(ndim))
    scalars: list[str] = []
    indent = "    " * (ndim + 1)
    body = []
    for j, f in enumerate(group.ops):
        cast = _cast(f.compute)
        operands = []
        for kind, v in f.operands:
            if kind == "in":
                operands.append(f"{cast}(I{v}[{idx}])")
            elif kind == "val":
                operands.append(f"{cast}(v{v})")
            else:
                scalars.append(f"s{len(scalars)}")
                operands.append(scalars[-1])
        for _ in f.params:
            scalars.append(f"s{len(scalars)}")
            operands.append(scalars[-1])
        body.append(f"{indent}v{j} = {_cast(f.out_dtype)}(op{j}({', '.join(operands)}))")
        if f.store is not None:
            body.append(f"{indent}O{f.store}[{idx}] = v{j}")
    lines += [f"@njit(cache=True, parallel={parallel}, error_model='numpy')",
              f"def kernel({', '.join([*outs, *ins, *scalars])}):"]
    for k in range(ndim):
        loop = "prange" if parallel and k == 0 else "range"
        lines.append(f"{'    ' * (k + 1)}for i{k} in {loop}(O0.shape[{k}]):")
    return "\n".join(lines + body) + "\n"


def _scalar_args(group: Any) -> list[Any]:
    """Constants and params in the order fused_source names them, in each op's compute
    dtype as the unfused kernel converts them."""
    values = []
    for f in group.ops:
        cdt = f.compute.np_dtype
        values += [_scalar(v, cdt) for kind, v in f.operands if kind == "const"]
        values += [_scalar(p, cdt) for p in f.params]
    return values


def _loop_views(group: Any) -> list[np.ndarray]:
    """Every array viewed with the loop's (merged) shape: inputs broadcast by zero strides;
    dims contiguous in every array merged, so contiguous groups loop over one dim."""
    shape = group.shape or (1,)
    arrays = [t._host.reshape(1) if not t._shape else t._host
              for t in (*group.outputs, *group.inputs)]
    strides = [broadcast_strides(shape, a.shape, a.strides) for a in arrays]
    mshape, mstrides = merge_dims(shape, strides)
    return [np.lib.stride_tricks.as_strided(a, mshape, st)
            for a, st in zip(arrays, mstrides, strict=True)]


def make_fused(group: Any) -> Callable[[], None]:
    """A prebound call of the group's kernel on its (static) tensors."""
    views = _loop_views(group)
    parallel = views[0].size >= PARALLEL_THRESHOLD
    kernel = load_module("fused", fused_source(group, views[0].ndim, parallel)).kernel
    args = (*views, *_scalar_args(group))

    def run() -> None:
        kernel(*args)

    run.__name__ = run.__qualname__ = group.name
    return run


CPU.fuse_elementwise = make_fused
