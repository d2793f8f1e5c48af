"""Fusing runs of elementwise steps of a captured program into one kernel per run.

A run is a sequence of consecutive elementwise kernel steps (kernels made by a backend's
elementwise factory, which mark themselves with ``_gt_elementwise_op``) with one output shape;
operands may have any strides and broadcast, and a storage the run writes is touched through
one view only. Within a run
an op's input that an earlier op of the run wrote becomes a value in registers; an output
nobody reads outside the run (in either program, nor as an output, placeholder or gradient of
the graph) is not stored at all. The backend renders the group (``Backend.fuse_elementwise``:
the CPU's Numba loop, kernels/cpu/fused.py) into one prebound call. Each op keeps its own
compute dtype and the rounding of its stored dtype, so fused results equal unfused ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputensor import _dtype as D
from gputensor._tensor import Tensor
from gputensor.kernels.registry import OpDef

from .capture import KERNEL, Step

_NO_FUSION = (D.float16, D.bfloat16)  # their kernels compute in float32 and cast back


@dataclass
class FusedOp:
    """One op of a group: operands are ("in", k) an input array, ("val", j) op j's value,
    ("const", v) a Python number; ``store`` is the output index it is written to, or None."""

    op: OpDef
    operands: list[tuple[str, Any]]
    params: tuple
    compute: D.dtype
    out_dtype: D.dtype
    store: int | None = None


@dataclass
class FusedGroup:
    shape: tuple[int, ...]
    inputs: list[Tensor] = field(default_factory=list)   # any strides, broadcast to shape
    outputs: list[Tensor] = field(default_factory=list)
    ops: list[FusedOp] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "fused_" + "_".join(f.op.name.strip("_") for f in self.ops)


def _view_key(t: Tensor) -> tuple:
    return (t._offset, t._shape, t._stride, t._dtype)


def _castable(src: D.dtype, dst: D.dtype) -> bool:
    """Input casts a fused loop may do as the eager kernel's astype would (value-exact)."""
    if src is dst or src is D.bool:
        return True
    if src.category < dst.category:
        return src.category == D.INTEGRAL and dst.itemsize >= 4 or dst.is_complex
    return src.category == dst.category and src.itemsize <= dst.itemsize and \
        src.is_signed == dst.is_signed


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    if len(shape) > len(to):
        return False
    return all(n in (1, m) for n, m in zip(shape, to[len(to) - len(shape):], strict=True))


def _elementwise(step: Step) -> OpDef | None:
    if step.kind != KERNEL or step.kwargs:
        return None
    op = getattr(step.fn, "_gt_elementwise_op", None)
    if op is None or len(step.args) != 4:
        return None
    out, inputs, _, compute = step.args
    if out._dtype in _NO_FUSION or compute in _NO_FUSION or not out.numel():
        return None
    for x in inputs:
        if isinstance(x, Tensor):
            if x._dtype in _NO_FUSION or not _castable(x._dtype, compute) or \
                    not _broadcasts(x._shape, out._shape):
                return None
        elif not isinstance(x, int | float | bool | complex):
            return None
    return op


def _tensors(obj: Any) -> Iterable[Tensor]:
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _tensors(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)


def _references(programs: Sequence[Sequence[Step]]) -> dict[int, set[tuple[int, int]]]:
    refs: dict[int, set[tuple[int, int]]] = {}
    for p, steps in enumerate(programs):
        for i, s in enumerate(steps):
            for t in _tensors((s.args, s.kwargs)):
                refs.setdefault(id(t._storage), set()).add((p, i))
            for a in s.args:
                if hasattr(a, "_untyped"):  # a typed storage (copy steps)
                    refs.setdefault(id(a._untyped), set()).add((p, i))
                elif hasattr(a, "_version") and hasattr(a, "_buf"):
                    refs.setdefault(id(a), set()).add((p, i))
    return refs


class _Builder:
    """Grows one group step by step; ``add`` says whether the step joined. A storage the run
    writes is touched through that one view only (reads of other storages may use any view):
    then each loop index sees exactly what the unfused ops saw at that element."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.group = FusedGroup(shape)
        self.reads: dict[int, set[tuple]] = {}   # storage id -> views read
        self.written: dict[int, tuple[int, tuple]] = {}  # storage id -> (op index, view)
        self.inputs: dict[tuple, int] = {}       # (storage id, view) -> input index
        self.indices: list[int] = []

    def add(self, index: int, step: Step, op: OpDef) -> bool:
        out, inputs, params, compute = step.args
        if out._shape != self.group.shape:
            return False
        okey = _view_key(out)
        sid = id(out._storage)
        if sid in self.written and self.written[sid][1] != okey:
            return False
        if any(v != okey for v in self.reads.get(sid, ())):
            return False
        for x in inputs:
            if isinstance(x, Tensor):
                w = self.written.get(id(x._storage))
                if w is not None and w[1] != _view_key(x):
                    return False
                if x is not out and id(x._storage) == sid and _view_key(x) != okey:
                    return False
        operands: list[tuple[str, Any]] = []
        for x in inputs:
            if not isinstance(x, Tensor):
                operands.append(("const", x))
                continue
            key = (id(x._storage), _view_key(x))
            self.reads.setdefault(key[0], set()).add(key[1])
            w = self.written.get(key[0])
            if w is not None:
                operands.append(("val", w[0]))
                continue
            k = self.inputs.get(key)
            if k is None:
                k = self.inputs[key] = len(self.group.inputs)
                self.group.inputs.append(x)
            operands.append(("in", k))
        self.written[sid] = (len(self.group.ops), okey)
        self.group.ops.append(FusedOp(op, operands, tuple(params), compute, out._dtype))
        self.indices.append(index)
        return True

    def finish(self, program: int, steps: Sequence[Step], refs: dict[int, set],
               pinned: set[int]) -> None:
        """Decide which values are stored: the last write of each storage that anything
        outside the run (or the graph's own outputs) may read."""
        inside = {(program, i) for i in self.indices}
        read_in = {key[0] for key in self.inputs}
        for sid, (j, _) in self.written.items():
            if sid in pinned or sid in read_in or not refs.get(sid, set()) <= inside:
                op = self.group.ops[j]
                op.store = len(self.group.outputs)
                self.group.outputs.append(steps[self.indices[j]].args[0])


def fuse(programs: Sequence[list[Step]], pinned: set[int]) -> list[list[Step]]:
    """The programs with each fusable run replaced by one step (runs of one op stay)."""
    refs = _references(programs)
    result = []
    for p, steps in enumerate(programs):
        out: list[Step] = []
        i = 0
        while i < len(steps):
            op = _elementwise(steps[i])
            fuser = getattr(steps[i].backend, "fuse_elementwise", None) if op else None
            if fuser is None:
                out.append(steps[i])
                i += 1
                continue
            builder = _Builder(steps[i].args[0]._shape)
            j = i
            while j < len(steps):
                opj = _elementwise(steps[j])
                if opj is None or steps[j].backend is not steps[i].backend or \
                        not builder.add(j, steps[j], opj):
                    break
                j += 1
            if j - i < 2:
                out.append(steps[i])
                i += 1
                continue
            builder.finish(p, steps, refs, pinned)
            group = builder.group
            fused = fuser(group)
            if fused is None:  # the backend declines this group
                out.extend(steps[i:j])
            else:
                fused.group = group  # type: ignore[attr-defined]  (what it runs, for tests)
                out.append(Step(KERNEL, fused, (), {}, steps[i].backend, group.name))
            i = j
        result.append(out)
    return result
