"""The CUDA backend's elementwise kernels: each op's one expression rendered to CUDA C
(kernels/cuda/elementwise_codegen.py), compiled once per kernel spec and launched on device tensors.

Operands that are contiguous with the output's shape are indexed flat; anything else (strided,
broadcast, offset views, non-contiguous outputs) passes the address of each operand's first
element and the shape and per-operand strides in a small read-only device array, merged to as
few dims as possible and cached per layout (``device.constant_array``), so a layout a training
step repeats is uploaded once. A size-1 tensor operand is broadcast by zero strides on the
device, never read back to the host.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import _STRIDES_CACHE, Tensor, contiguous_strides
from gputensor.kernels.layout import broadcast_strides, merge_dims
from gputensor.kernels.registry import CUDA, OpDef

from .. import device as _device
from .. import elementwise_codegen as E
from ..device import (
    CONSTANTS_MAX,
    MAX_GRID,
    NVRTC_OPTIONS,
    constant_array,
    launch_kernel,
    runtime,
)
from ..runtime import DevicePtr

_kernels: dict[tuple[int, E.KernelSpec], Any] = {}  # (id(runtime), spec) -> compiled kernel
_lock = threading.Lock()


def _kernel(spec: E.KernelSpec) -> Any:
    k = _kernels.get((id(runtime()), spec))
    if k is None:
        precompile([spec], f"ew_{spec.kernel_name}")
        k = _kernels[id(runtime()), spec]
    return k


def precompile(specs: Iterable[E.KernelSpec], name: str = "elementwise",
               options: Sequence[str] = ()) -> None:
    """Compile every spec the active runtime has not compiled yet into ONE module (one NVRTC
    or g++ run, disk-cached), so a workload that needs many kernels pays one compile, not one
    per kernel. ``options`` follow the backend's NVRTC options (the emulator keeps -O/-D/-f)."""
    rt = runtime()
    with _lock:
        todo = list(dict.fromkeys(s for s in specs if (id(rt), s) not in _kernels))
        if not todo:
            return
        module = rt.compile(E.module_source(todo), name, options=(*NVRTC_OPTIONS, *options))
        for s in todo:
            _kernels[id(rt), s] = rt.get_kernel(module, s.kernel_name)


def spec_for(op: OpDef, out: Tensor, inputs: Sequence[Any], compute: D.dtype) -> E.KernelSpec:
    """The kernel an elementwise launch of ``op`` runs for these operands (tensors or Python
    numbers) and compute dtype."""
    for d in [out._dtype, compute] + [x._dtype for x in inputs if isinstance(x, Tensor)]:
        E.check_dtype(d, "operand", op.name)
    ins = tuple(x._dtype if isinstance(x, Tensor) else None for x in inputs)
    return E.KernelSpec(op.name, E.effective_expr(op, compute), tuple(op.params), out._dtype,
                        compute, ins)


# (output shape, (shape, strides) of each operand) -> the kernel's layout values: the merged
# shape, then each operand's offset (0: pointers address the first element) and strides, 0
# where it broadcasts. Bounded like the metadata cache it feeds.
_LAYOUTS: dict[tuple, tuple[int, ...]] = {}


def _layout_values(key: tuple, name: str) -> tuple[int, ...]:
    values = _LAYOUTS.get(key)
    if values is not None:
        return values
    shape = key[0]
    strides = [broadcast_strides(shape, tshape, tstride) for tshape, tstride in key[1:]]
    mshape, mstrides = merge_dims(shape, strides, drop_ones=True)
    if len(mshape) > E.MAX_DIMS:
        raise ValueError(f"{name}: {len(mshape)} dims after merging; CUDA elementwise kernels "
                         f"take at most {E.MAX_DIMS}")
    out = [len(mshape), *mshape]
    for ms in mstrides:
        out += [0, *ms]
    if len(_LAYOUTS) >= CONSTANTS_MAX:
        _LAYOUTS.clear()
    values = _LAYOUTS[key] = tuple(out)
    return values


def _first_element(t: Tensor) -> DevicePtr:
    """``device.ptr`` for an operand the frontend already placed on this device."""
    base = t._storage._buf.ptr
    off = t._offset
    return base if not off else DevicePtr(int(base) + off * t._dtype.itemsize)


def make_kernel(op: OpDef):
    # Per (runtime, dtypes of out/compute/operands): the compiled kernel, its elements per
    # vector step and its prepared launcher, so a launch does no spec building or dtype checks
    # after the first.
    prepared: dict[tuple, tuple[Any, int, Any]] = {}

    def prepare(key: tuple, out: Tensor, inputs: list, compute: D.dtype) -> tuple[Any, int, Any]:
        spec = spec_for(op, out, inputs, compute)
        kern = _kernel(spec)
        entry = prepared[key] = (kern, E.vector_width(spec), key[0].launcher(kern, E.BLOCK))
        return entry

    # Runs once per elementwise op on CUDA, so it is written for CPython 3.11's costs: plain
    # loops rather than comprehensions (each of which is a function call there), few calls.
    def run(out: Tensor, inputs: list, params: tuple, compute: D.dtype) -> None:
        shape = out._shape
        n = math.prod(shape)
        if n == 0:
            return
        rt = runtime()
        key = [rt, out._dtype, compute]
        arrays = [out]
        for x in inputs:
            if isinstance(x, Tensor):
                arrays.append(x)
                key.append(x._dtype)
            else:
                key.append(None)
        key = tuple(key)
        entry = prepared.get(key)
        kern, width, go = entry if entry is not None else prepare(key, out, inputs, compute)
        cs = _STRIDES_CACHE.get(shape) or contiguous_strides(shape)
        meta = None
        for a in arrays:  # strides compared first: is_contiguous only for the odd cases
            if a._shape != shape or (a._stride != cs and not a.is_contiguous()):
                layout = [shape]
                for b in arrays:
                    layout.append((b._shape, b._stride))
                meta = constant_array(_layout_values(tuple(layout), op.name)).ptr
                break
        args: list[Any] = []
        for x in arrays:  # device.ptr of each operand, inlined (the frontend placed them)
            base, off = x._storage._buf.ptr, x._offset
            args.append(DevicePtr(int(base) + off * x._dtype.itemsize) if off else base)
        if len(arrays) <= len(inputs):  # Python numbers among the operands: in order
            args = args[:1]
            for x in inputs:
                if isinstance(x, Tensor):
                    args.append(_first_element(x))
                else:
                    args += E.scalar_args(x, compute)
        for p in params:
            args += E.scalar_args(p, compute)
        args.append(n)
        args.append(meta)
        work = -(-n // width)
        # enough threads for one vector chunk each (the contiguous path's unit of work),
        # bounded: the grid-stride loop covers the rest
        grid = (work + E.BLOCK - 1) // E.BLOCK
        if grid > MAX_GRID:
            grid = MAX_GRID
        if _device.launch_observer is None:
            go(grid, args)
        else:
            launch_kernel(rt, kern, grid, E.BLOCK, 0, args)

    run._gt_elementwise_op = op  # type: ignore[attr-defined]  (what gt.compile fuses)
    return run


CUDA.elementwise_factory = make_kernel
