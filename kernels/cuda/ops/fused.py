"""The CUDA backend's fused elementwise kernels (gt.compile's fusion, gputensor/_compile/
fusion.py): one generated ``__global__`` grid-stride loop per run of elementwise ops, each
op's rendered expression (elementwise_codegen.render_expr) an inlined device function, values
kept in registers between ops and only live results stored.

Each op computes as its own kernel does: operands loaded into its compute type (``scalar_t``,
widened like the unfused kernel's), its result stored into a register of its output dtype
(``gt::store``, the rounding a memory store does), so fused and unfused results are equal.
Operands with the loop's shape and contiguous strides index flat; otherwise a read-only layout
array (the merged shape and each operand's strides, zero where it broadcasts) gives each
operand's offset, as the unfused kernels' strided mode. Complex and 16-bit groups are not fused.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import contiguous_strides
from gputensor.kernels.registry import CUDA

from .. import device as _device
from .. import elementwise_codegen as E
from ..device import MAX_GRID, NVRTC_OPTIONS, DeviceArray, launch_kernel, runtime_of
from ..dtypes import CTYPES
from .elementwise import _first_element, _layout_values

_modules: dict[tuple[int, str], Any] = {}  # (id(runtime), source digest) -> kernel


def fusable(group: Any) -> bool:
    dts = [t._dtype for t in (*group.outputs, *group.inputs)]
    dts += [d for f in group.ops for d in (f.compute, f.out_dtype)]
    return not any(d.is_complex or d in (D.float16, D.bfloat16) for d in dts)


def fused_source(group: Any, name: str) -> str:
    """kernel(outputs..., inputs..., scalars..., n, meta): the group's loop."""
    parts = ['#include "common.cuh"\n#include "scalar_fns.cuh"\n'
             f"// scalar_fns.cuh {E._header_hash()}\n"]
    for j, f in enumerate(group.ops):
        ct, ft, wide = E.compute_types(f.compute)
        body = E.render_expr(E.effective_expr(f.op, f.compute), f.op.params, f.op.arity,
                             f.op.name)
        args = [f"const {wide} {n}" for n in E.INPUT_NAMES[:f.op.arity]]
        args += [f"const {ct} p_{p}" for p in f.op.params]
        parts.append(f"__device__ __forceinline__ auto {name}_op{j}({', '.join(args)}) {{\n"
                     f"    typedef {wide} scalar_t;\n    typedef {ft} gt_float_t;\n"
                     f"    return {body};\n}}\n")
    arrays = [*group.outputs, *group.inputs]
    params = [f"{CTYPES[t._dtype]}* __restrict__ O{k}" for k, t in enumerate(group.outputs)]
    params += [f"const {CTYPES[t._dtype]}* __restrict__ I{k}"
               for k, t in enumerate(group.inputs)]
    body, nscalar = [], 0
    for j, f in enumerate(group.ops):
        ct, _, wide = E.compute_types(f.compute)
        operands = []
        for kind, v in f.operands:
            if kind == "in":
                operands.append(f"gt::load<{wide}>(I{v}[o{len(group.outputs) + v}])")
            elif kind == "val":
                operands.append(f"gt::load<{wide}>(v{v})")
            else:
                params.append(f"{ct} s{nscalar}")
                operands.append(f"({wide})s{nscalar}")
                nscalar += 1
        for _ in f.op.params:
            params.append(f"{ct} s{nscalar}")
            operands.append(f"s{nscalar}")
            nscalar += 1
        out_t = CTYPES[f.out_dtype]
        body.append(f"        const {out_t} v{j} = gt::store<{out_t}>({name}_op{j}("
                    f"{', '.join(operands)}));\n")
        if f.store is not None:
            body.append(f"        O{f.store}[o{f.store}] = v{j};\n")
    params += ["long long n", "const long long* __restrict__ meta"]
    offsets = ", ".join(f"o{k} = i" for k in range(len(arrays)))
    strided = "".join(f"                o{k} += idx * meta[2 + nd + {k} * (nd + 1) + d];\n"
                      for k in range(len(arrays)))
    parts.append(
        f'extern "C" __global__ void {name}({", ".join(params)}) {{\n'
        f"    const int nd = meta == nullptr ? 0 : (int)meta[0];\n"
        f"    for (GT_GRID_STRIDE(i, n)) {{\n"
        f"        long long {offsets};\n"
        f"        if (meta != nullptr) {{\n"
        + "".join(f"            o{k} = 0;\n" for k in range(len(arrays))) +
        f"            long long rem = i;\n"
        f"            for (int d = nd - 1; d >= 0; --d) {{\n"
        f"                const long long size = meta[1 + d];\n"
        f"                const long long idx = rem % size;\n"
        f"                rem /= size;\n"
        f"{strided}"
        f"            }}\n"
        f"        }}\n"
        + "".join(body) +
        "    }\n}\n")
    return "\n".join(parts)


def _scalar_values(group: Any) -> list[Any]:
    values: list[Any] = []
    for f in group.ops:
        for kind, v in f.operands:
            if kind == "const":
                values += E.scalar_args(v, f.compute)
        for p in f.params:
            values += E.scalar_args(p, f.compute)
    return values


def make_fused(group: Any) -> Callable[[], None] | None:
    """A prebound launch of the group's kernel on its (static) tensors, or None (not fused)."""
    if not fusable(group):
        return None
    arrays = [*group.outputs, *group.inputs]
    index = arrays[0].device.index
    rt = runtime_of(index)
    shape = group.shape
    contiguous = contiguous_strides(shape)
    digest = hashlib.sha1(fused_source(group, "k").encode()).hexdigest()[:16]
    name = f"gt_fused_{digest}"
    with _device.on_device(index):  # the layout array and the module live on that device
        meta = None
        if any(t._shape != shape or t._stride != contiguous for t in arrays):
            layout = (shape, *((t._shape, t._stride) for t in arrays))
            meta = DeviceArray(_layout_values(layout, group.name))
        kernel = _modules.get((id(rt), name))
        if kernel is None:
            module = rt.compile(fused_source(group, name), name, options=NVRTC_OPTIONS)
            kernel = _modules[id(rt), name] = rt.get_kernel(module, name)
    n = math.prod(shape)
    args = [_first_element(t) for t in arrays] + _scalar_values(group)
    args += [n, None if meta is None else meta.ptr]
    grid = min(MAX_GRID, -(-n // E.BLOCK))
    go = rt.launcher(kernel, E.BLOCK)
    several = len(_device.runtimes()) > 1

    def launch() -> None:
        if _device.launch_observer is None:
            go(grid, args)
        else:
            launch_kernel(rt, kernel, grid, E.BLOCK, 0, args)

    def run() -> None:
        if several:
            with _device.on_device(index):
                launch()
        else:
            launch()

    run.meta = meta  # type: ignore[attr-defined]  (keeps the layout array alive)

    run.__name__ = run.__qualname__ = group.name
    run.source = fused_source(group, name)  # type: ignore[attr-defined]  (NVRTC tests)
    return run


CUDA.fuse_elementwise = make_fused
