"""The CUDA backend's elementwise kernels: each op's one expression rendered to CUDA C
(kernels/cuda/elementwise.py), compiled once per kernel spec and launched on device tensors.

Operands that are contiguous with the output's shape are indexed flat; anything else (strided,
broadcast, offset views, non-contiguous outputs) passes its shape and per-operand element
offsets and strides in a small device array, merged to as few dims as possible. A size-1 tensor
operand is broadcast by zero strides on the device, never read back to the host.
"""

from __future__ import annotations

import threading
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.layout import merge_dims
from gputensor.kernels.registry import CUDA, OpDef

from .. import elementwise as E
from ..device import NVRTC_OPTIONS, DeviceArray, launch_kernel, ptr, runtime

_kernels: dict[tuple[int, E.KernelSpec], Any] = {}  # (id(runtime), spec) -> compiled kernel
_lock = threading.Lock()


def _kernel(spec: E.KernelSpec) -> Any:
    rt = runtime()
    key = (id(rt), spec)
    k = _kernels.get(key)
    if k is None:
        with _lock:
            k = _kernels.get(key)
            if k is None:
                module = rt.compile(E.module_source([spec]), f"ew_{spec.kernel_name}",
                                    options=NVRTC_OPTIONS)
                k = _kernels[key] = rt.get_kernel(module, spec.kernel_name)
    return k


def _spec(op: OpDef, out: Tensor, inputs: list, compute: D.dtype) -> E.KernelSpec:
    for d in [out._dtype, compute] + [x._dtype for x in inputs if isinstance(x, Tensor)]:
        E._check_dtype(d, "operand", op.name)
    ins = tuple(x._dtype if isinstance(x, Tensor) else None for x in inputs)
    return E.KernelSpec(op.name, E._effective_expr(op, compute), tuple(op.params), out._dtype,
                        compute, ins)


def _layout(t: Tensor, shape: tuple[int, ...]) -> list[int]:
    """Element offset of t[0, ...] then its strides broadcast to ``shape``."""
    lead = len(shape) - len(t._shape)
    strides = [0] * lead + [0 if n == 1 and shape[lead + k] != 1 else s
                            for k, (n, s) in enumerate(zip(t._shape, t._stride, strict=True))]
    return [t._offset, *strides]


def make_kernel(op: OpDef):
    # Per (runtime, dtypes of out/compute/operands): the compiled kernel and its elements per
    # vector step, so a launch does no spec building or dtype checks after the first.
    prepared: dict[tuple, tuple[Any, int]] = {}

    def prepare(out: Tensor, inputs: list, compute: D.dtype) -> tuple[Any, int]:
        key = (id(runtime()), out._dtype, compute,
               *(x._dtype if isinstance(x, Tensor) else None for x in inputs))
        entry = prepared.get(key)
        if entry is None:
            spec = _spec(op, out, inputs, compute)
            entry = prepared[key] = (_kernel(spec), E.vector_width(spec))
        return entry

    def run(out: Tensor, inputs: list, params: tuple, compute: D.dtype) -> None:
        shape = out._shape
        n = out.numel()
        if n == 0:
            return
        kern, width = prepare(out, inputs, compute)
        arrays = [out] + [x for x in inputs if isinstance(x, Tensor)]
        contiguous = True
        for a in arrays:
            if a._shape != shape or not a.is_contiguous():
                contiguous = False
                break
        meta = None
        if contiguous:
            pointers = [ptr(a) for a in arrays]
        else:
            layouts = [_layout(a, shape) for a in arrays]
            mshape, mstrides = merge_dims(shape, [lay[1:] for lay in layouts], drop_ones=True)
            if len(mshape) > E.MAX_DIMS:
                raise ValueError(f"{op.name}: {len(mshape)} dims after merging; CUDA "
                                 f"elementwise kernels take at most {E.MAX_DIMS}")
            values = [len(mshape), *mshape]
            for lay, ms in zip(layouts, mstrides, strict=True):
                values += [lay[0], *ms]
            meta = DeviceArray(values)
            # Offsets live in meta: pass each storage's base address.
            pointers = [a._storage._buf.ptr for a in arrays]
        it = iter(pointers[1:])
        args: list[Any] = [pointers[0]]
        for x in inputs:
            args += [next(it)] if isinstance(x, Tensor) else E.scalar_args(x, compute)
        for p in params:
            args += E.scalar_args(p, compute)
        args += [n, meta.ptr if meta is not None else None]
        work = -(-n // width)
        grid = max(1, min(E.DEVICE_MAX_GRID, -(-work // E.BLOCK)))  # E.launch_grid, inlined
        launch_kernel(runtime(), kern, grid, E.BLOCK, 0, args)

    return run


CUDA.elementwise_factory = make_kernel
