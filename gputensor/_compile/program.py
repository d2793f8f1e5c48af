"""A captured call's steps moved onto buffers of their own, and their replay.

``retarget`` gives the recorded call's tensors private storage so that a replay never writes
into anything the caller kept from that call:
- each input's storage becomes a static buffer holding just the span of the inputs' elements
  (a replay copies the new inputs there first, as CUDA graphs' static inputs);
- each storage created during the capture (intermediates, outputs, constants made on the host)
  becomes a private copy, allocated once: a replay allocates nothing;
- any other tensor (parameters, buffers, tensors the function reads from elsewhere) is an
  external: the steps keep reading it live, and the compiled function guards that it still
  has the storage it had (``externals``).
Steps whose arguments the mapping cannot see through (a NumPy view of a captured buffer, a raw
device address into one) make the capture unreplayable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gputensor._tensor import Tensor
from gputensor.kernels.cuda.runtime import DevicePtr
from gputensor.profiler import hooks
from gputensor.storage.typed import TypedStorage
from gputensor.storage.untyped import UntypedStorage

from .capture import CHECK, COPY, KERNEL, Step


class CannotReplay(Exception):
    """The capture's steps cannot be moved onto private buffers (the reason is the message)."""


class GuardFailure(Exception):
    """A replayed check saw a different outcome than the capture did."""


def _span(t: Tensor) -> tuple[int, int]:
    """Bytes [start, end) of a tensor's elements within its storage (end == start if empty)."""
    isz = t._dtype.itemsize
    start = t._offset * isz
    if 0 in t._shape:
        return start, start
    return start, start + isz + sum((n - 1) * s * isz for n, s in zip(t._shape, t._stride,
                                                                       strict=True))


def _copy_bytes(dst: UntypedStorage, dst_off: int, src: UntypedStorage, src_off: int,
                n: int) -> None:
    if n:
        dst._driver.copy(dst._buf, dst_off, src._buf, src_off, n)


class Retarget:
    """The mapping from the recorded call's objects to the program's own."""

    def __init__(self, created: dict[int, UntypedStorage], inputs: Sequence[Tensor]) -> None:
        # id(original storage) -> (original, private storage, byte shift, private nbytes)
        self.storages: dict[int, tuple[UntypedStorage, UntypedStorage, int, int]] = {}
        self._memo: dict[int, Any] = {}
        self.externals: dict[int, Tensor] = {}
        spans: dict[int, tuple[UntypedStorage, int, int]] = {}
        for x in inputs:
            st = x._storage
            lo, hi = _span(x)
            if id(st) in spans:
                _, lo0, hi0 = spans[id(st)]
                lo, hi = min(lo, lo0), max(hi, hi0)
            spans[id(st)] = (st, lo, hi)
        for key, (st, lo, hi) in spans.items():
            private = UntypedStorage(hi - lo, device=st.device)
            _copy_bytes(private, 0, st, lo, hi - lo)
            self.storages[key] = (st, private, lo, hi - lo)
        for key, st in created.items():
            if key not in self.storages:
                private = UntypedStorage(st.nbytes(), device=st.device)
                _copy_bytes(private, 0, st, 0, st.nbytes())
                self.storages[key] = (st, private, 0, st.nbytes())

    # -- objects -----------------------------------------------------------------------------
    def tensor(self, t: Tensor) -> Tensor:
        memo = self._memo.get(id(t))
        if memo is not None:
            return memo[1]
        entry = self.storages.get(id(t._storage))
        if entry is None:
            base = t._base if t._base is not None else t
            self.externals[id(base)] = base
            out = t
        else:
            _, private, shift, size = entry
            lo, hi = _span(t)
            isz = t._dtype.itemsize
            if (lo - shift) % isz or lo < shift or hi - shift > size:
                raise CannotReplay("a view reaches outside the elements of the input it views")
            out = Tensor._make(private, t._dtype, t._shape, t._stride, (lo - shift) // isz)
        self._memo[id(t)] = (t, out)  # keeps t alive, so its id stays its own
        return out

    def _typed(self, ts: TypedStorage, offset: int) -> tuple[TypedStorage, int]:
        entry = self.storages.get(id(ts._untyped))
        if entry is None:
            return ts, offset
        _, private, shift, _ = entry
        isz = ts.dtype.itemsize
        if shift % isz:
            raise CannotReplay("a copy addresses an input's storage at an unaligned offset")
        out = object.__new__(type(ts))
        out._untyped, out.dtype = private, ts.dtype
        return out, offset - shift // isz

    def value(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, list | tuple):
            mapped = [self.value(v) for v in obj]
            return type(obj)(mapped) if isinstance(obj, list) else tuple(mapped)
        if isinstance(obj, dict):
            return {k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, UntypedStorage) and id(obj) in self.storages:
            return self.storages[id(obj)][1]
        if isinstance(obj, np.ndarray) and obj.ndim:
            for original, _, _, _ in self.storages.values():
                if original.device.type == "cpu" and np.may_share_memory(obj, original._buf):
                    raise CannotReplay("a kernel takes a NumPy view of a captured buffer")
        if isinstance(obj, DevicePtr):
            for original, _, _, _ in self.storages.values():
                buf = original._buf
                base = getattr(buf, "ptr", None)
                if base is not None and int(base) <= int(obj) < int(base) + original.nbytes():
                    raise CannotReplay("a kernel takes a raw device address of a captured "
                                       "buffer")
        return obj

    def step(self, s: Step) -> Step:
        if s.kind == COPY:
            dst, dst_off, src, src_off, count = s.args
            dst, dst_off = self._typed(dst, dst_off)
            src, src_off = self._typed(src, src_off)
            return Step(COPY, s.fn, (dst, dst_off, src, src_off, count))
        return Step(s.kind, s.fn, self.value(s.args), self.value(s.kwargs), s.backend, s.name,
                    s.result)


class Program:
    """Steps replayed in order: kernels called directly (through the profiler when one
    records), checks compared with their captured outcome."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.use_cuda_graph = False  # mode='reduce-overhead': replay as one CUDA graph
        self.cuda_graph: Any = None
        self.kernel_count = sum(s.kind == KERNEL for s in self.steps)
        # The common case, bound once: (fn, args, kwargs or None) per step, or a kernel's own
        # prebound call where it offers one (``fn.bind``: its arrays resolved once).
        self._plain = None if any(s.kind == CHECK for s in self.steps) else \
            [_bound(s) for s in self.steps]

    def run(self) -> None:
        if self.use_cuda_graph and hooks.active() is None:
            if self.cuda_graph is None:
                self._capture_cuda_graph()
            if self.cuda_graph is not None:
                self.cuda_graph.replay()
                return
        if self._plain is not None and hooks.active() is None:
            for fn, args, kwargs in self._plain:
                if kwargs is None:
                    fn(*args)
                else:
                    fn(*args, **kwargs)
            return
        self._run_steps(hooks.active())

    def _run_steps(self, rec: Any) -> None:
        for s in self.steps:
            if s.kind == KERNEL and rec is not None:
                rec.kernel(s.backend, s.name, s.fn, s.args, s.kwargs)
            elif s.kind == COPY and rec is not None:
                rec.copy(s.fn, *s.args)
            elif s.kind == CHECK:
                if s.fn(*s.args) != s.result:
                    raise GuardFailure(f"the check {getattr(s.fn, '__name__', s.fn)!r} saw a "
                                       "different outcome than when the function was captured")
            else:
                s.fn(*s.args, **s.kwargs)

    def _capture_cuda_graph(self) -> None:
        """Record the steps into a CUDA graph once (gt.cuda.graph): a program of CUDA kernels
        and device copies only; anything that cannot be captured keeps the step replay."""
        self.use_cuda_graph = False
        devices = set()
        for s in self.steps:
            if s.kind == KERNEL:
                devices.add(getattr(s.backend, "device_type", None))
                devices |= {t.device for t in _tensors(s.args)}
            elif s.kind == COPY:
                devices |= {s.args[0].device, s.args[2].device}
            else:
                return
        cuda = [d for d in devices if not isinstance(d, str)]
        if not self.steps or any(d != "cuda" for d in devices if isinstance(d, str)) or \
                len(set(cuda)) != 1 or cuda[0].type != "cuda":
            return
        from gputensor import cuda as gt_cuda

        graph = gt_cuda.CUDAGraph()
        try:
            with gt_cuda.device(cuda[0].index), gt_cuda.graph(graph):
                self._run_steps(None)
        except RuntimeError:
            return  # a step reads back or synchronises: not capturable
        self.cuda_graph = graph
        self.use_cuda_graph = True


def _bound(s: Step) -> tuple[Any, tuple, dict | None]:
    bind = getattr(s.fn, "bind", None) if s.kind == KERNEL else None
    call = bind(*s.args, **s.kwargs) if bind is not None else None
    if call is not None:
        return call, (), None
    return s.fn, s.args, s.kwargs or None


def _tensors(obj: Any) -> list[Tensor]:
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, list | tuple):
        return [t for v in obj for t in _tensors(v)]
    return []
