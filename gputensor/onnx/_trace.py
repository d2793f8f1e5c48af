"""One forward call recorded as the sequence of ops it ran (torch.jit.trace's role).

The recorder is an op-hook handler (gputensor/_op_hook.py): it sees every outermost op with its
exact arguments and result, below autograd (composites show as the ops they call). The call
runs inside the compiler's ``Capture`` (gputensor/_compile/capture.py) with ``fullgraph=True``,
so a value read on the host (a data-dependent branch) or other Python-side effect stops the
export instead of silently baking one branch into the graph. Unlike gt.compile the export
replays no kernels, so kernels are run, not recorded, and one that returns data (an index
kernel's bound check) is no break: the ops around it are what is translated.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputensor._compile.capture import Capture, GraphBreakError
from gputensor._op_hook import OP_HOOK

from .errors import OnnxExporterError


class _ExportState(threading.local):
    exporting = False   # per thread; the class attribute is the default


_state = _ExportState()


def is_in_onnx_export() -> bool:
    """Whether this thread is inside ``gt.onnx.export``'s traced call."""
    return _state.exporting


@dataclass
class Call:
    """One recorded op: its registry name, arguments and result (a tensor or a tuple)."""

    op: str
    args: tuple
    kwargs: dict
    result: Any
    versions: dict       # id(tensor) -> version of each argument as the op read it
    out_versions: dict   # id(tensor) -> version of each result as the op left it


class Taint:
    """Which buffers hold data computed from the call's inputs, and which of them were
    written by kernels that ran outside any recorded op (an op the op hook does not see, such
    as argmax or an in-place form): a constant read from one of those is refused."""

    def __init__(self) -> None:
        self.depth = 0                         # > 0 while a recorded op computes
        self.tainted: dict[int, Any] = {}      # id(buffer) -> buffer
        self.unseen: dict[int, str] = {}       # id(buffer) -> the kernel that wrote it

    def add(self, tensors: list) -> None:
        for t in tensors:
            buf = t._storage._buf
            self.tainted[id(buf)] = buf

    def any(self, tensors: list) -> bool:
        return any(id(t._storage._buf) in self.tainted for t in tensors)

    def outside_op(self, name: str, buffers: list) -> None:
        if self.depth or not any(id(b) in self.tainted for b in buffers):
            return
        for b in buffers:
            self.tainted[id(b)] = b
            self.unseen.setdefault(id(b), name)


class _ExportCapture(Capture):
    """The compiler's capture, keeping only its graph-break detection, plus the taint of
    kernels run outside recorded ops."""

    def __init__(self, taint: Taint, calls: list[Call]) -> None:
        super().__init__(fullgraph=True)
        self.taint = taint
        self.calls = calls

    def kernel(self, backend: Any, name: str, fn: Callable[..., Any], args: Any,
               kwargs: dict[str, Any]) -> Any:
        taint = self.taint
        if not taint.depth and _is_inplace_elementwise(args) and taint.any(list(args[1])):
            # The in-place form of an elementwise op (x.div_(6), relu_), which the op hook
            # does not see: its kernel gets (self, inputs, params, dtype) with self first
            # among the inputs, so it is recorded as the op's call, as the hook would.
            operands = [t for t in args[1] if _is_tensor(t)]
            versions = {id(t): t._version for t in operands}
            result = self._run_kernel(backend, name, fn, args, kwargs)
            # The frontend bumps self's version once, right after its kernel returns.
            out = {id(args[0]): versions[id(args[0])] + 1}
            self.calls.append(Call(name, (*args[1], *args[2]), {}, args[0], versions, out))
            return result
        taint.outside_op(name, [t._storage._buf for t in _tensors((list(args), kwargs))])
        return self._run_kernel(backend, name, fn, args, kwargs)

    def copy(self, mover: Callable[..., None], dst: Any, dst_offset: int, src: Any,
             src_offset: int, count: int) -> None:
        self.taint.outside_op("copy", [src, dst])
        if self._inner is not None:
            self._inner.copy(mover, dst, dst_offset, src, src_offset, count)
        else:
            mover(dst, dst_offset, src, src_offset, count)

    def launch(self, source: str, name: str, grid: Any, block: Any, shared_bytes: int,
               run: Callable[[], None]) -> None:
        if self._inner is not None:
            self._inner.launch(source, name, grid, block, shared_bytes, run)
        else:
            run()

    def constant(self, t: Any) -> None:
        pass   # nothing is replayed

    def storage_created(self, storage: Any) -> None:
        pass   # nor retargeted


def _is_tensor(x: Any) -> bool:
    from gputensor import Tensor
    return isinstance(x, Tensor)


def _is_inplace_elementwise(args: Any) -> bool:
    return (len(args) == 4 and isinstance(args[1], list | tuple) and bool(args[1])
            and args[1][0] is args[0] and isinstance(args[2], list | tuple)
            and _is_tensor(args[0]))


def _tensors(x: Any) -> list:
    from gputensor import Tensor
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, list | tuple):
        return [t for i in x for t in _tensors(i)]
    if isinstance(x, dict):
        return [t for i in x.values() for t in _tensors(i)]
    return []


def trace(fn: Callable[..., Any], args: tuple, kwargs: dict
          ) -> tuple[list[Call], Any, Taint]:
    """Run ``fn(*args, **kwargs)`` once and return its op calls, its result and the taint
    of the inputs' data."""
    calls: list[Call] = []
    taint = Taint()
    taint.add(_tensors((args, kwargs)))

    def record(op: Any, a: tuple, kw: dict, compute: Callable[[], Any]) -> Any:
        operands = _tensors((a, kw))
        versions = {id(t): t._version for t in operands}
        taint.depth += 1
        try:
            result = compute()
        finally:
            taint.depth -= 1
        if taint.any(operands):
            taint.add(_tensors(result))
        out = {id(t): t._version for t in _tensors(result)}
        calls.append(Call(op if isinstance(op, str) else getattr(op, "name", str(op)),
                          a, dict(kw), result, versions, out))
        return result

    if _state.exporting:
        raise OnnxExporterError("gt.onnx.export: the model called gt.onnx.export while being "
                                "exported (nested exports are not supported)")
    _state.exporting = True
    OP_HOOK.push(record)
    try:
        with _ExportCapture(taint, calls):
            out = fn(*args, **kwargs)
    except GraphBreakError as e:
        raise OnnxExporterError(
            "gt.onnx.export: the model's forward cannot be traced into a static graph: "
            f"{str(e).split(': ', 1)[-1]}") from e
    finally:
        OP_HOOK.pop(record)
        _state.exporting = False
    return calls, out, taint
