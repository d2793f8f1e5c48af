"""CUDA graphs (torch.cuda.graphs): ``CUDAGraph``, the ``graph`` capture context and
``graph_pool_handle``, over the runtime's ``begin_capture``/``end_capture``
(kernels/cuda/runtime.py): CuPy's stream capture on a GPU, a recorded launch list on the
emulator, so CI runs captures and replays.

While a capture is open nothing runs: kernels, copies and cuBLAS calls are recorded; host
reads and device synchronisation raise PyTorch's "operation not permitted when stream is
capturing"; memory freed meanwhile stays reserved for the graph (its work may still use it)
until ``reset()``. Tensors allocated during the capture are the graph's static buffers: fill
the static inputs, ``replay()``, read the static outputs.
"""

from __future__ import annotations

import gc
from typing import Any

from gputensor.kernels.cuda import device as _device
from gputensor.kernels.cuda import errors as _errors

from . import streams

_MODES = ("global",)


class CUDAGraph:
    """One captured CUDA graph (torch.cuda.CUDAGraph)."""

    def __init__(self, keep_graph: bool = False) -> None:
        self._graph: Any = None
        self._runtime: Any = None
        self._capturing = False

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        """Begin capturing the current stream's work (``gt.cuda.graph`` calls this on a side
        stream). ``pool``: a ``graph_pool_handle()`` or another graph's ``pool()``."""
        if capture_error_mode not in _MODES:
            raise NotImplementedError(f"capture_error_mode={capture_error_mode!r}: gputensor "
                                      "captures in 'global' mode")
        if self._graph is not None or self._capturing:
            raise RuntimeError("This CUDAGraph instance already owns a captured graph. To "
                               "capture a new graph, create a new instance.")
        rt = _device.runtime()
        rt.begin_capture()
        self._runtime, self._capturing = rt, True
        self._pool = pool

    def capture_end(self) -> None:
        if not self._capturing:
            raise RuntimeError("CUDAGraph::capture_end called without capture_begin")
        self._capturing = False
        self._graph = self._runtime.end_capture()

    def replay(self) -> None:
        """Launch the captured work on the current stream."""
        if self._graph is None:
            raise RuntimeError("Called CUDAGraph::replay without a preceding successful "
                               "capture.")
        self._graph.launch()
        _errors.launched(self._runtime.device_index)  # an index error the replay recorded

    def reset(self) -> None:
        """Free the graph and the memory it kept."""
        if self._graph is not None:
            self._graph.release()
        self._graph = None

    def pool(self) -> Any:
        """A handle to this graph's memory pool, for ``capture_begin(pool=...)``."""
        return getattr(self, "_pool", None) or graph_pool_handle()

    def __del__(self) -> None:
        if getattr(self, "_graph", None) is not None:
            self._graph.release()


def graph_pool_handle() -> tuple[int, int]:
    """An opaque memory-pool handle (torch.cuda.graph_pool_handle). gputensor keeps each
    graph's freed blocks for that graph, so graphs given one handle do not share blocks."""
    return (0, id(object()))


class graph:  # noqa: N801 - PyTorch's name
    """Capture the block's CUDA work into ``cuda_graph`` (torch.cuda.graph): synchronises,
    collects garbage and empties the cache, then captures on a side stream (``stream``, else
    a shared capture stream)."""

    default_capture_stream: streams.Stream | None = None

    def __init__(self, cuda_graph: CUDAGraph, pool: Any = None,
                 stream: streams.Stream | None = None,
                 capture_error_mode: str = "global") -> None:
        if stream is None:
            if graph.default_capture_stream is None:
                graph.default_capture_stream = streams.Stream()
            stream = graph.default_capture_stream
        self.cuda_graph, self.pool = cuda_graph, pool
        self.capture_error_mode = capture_error_mode
        self.stream_ctx = streams.stream(stream)

    def __enter__(self) -> None:
        from . import empty_cache, synchronize

        synchronize()
        gc.collect()
        empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.cuda_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(*exc)


def is_current_stream_capturing() -> bool:
    """Whether the current device's runtime is capturing a CUDA graph."""
    rt = _device.active()
    return bool(rt is not None and rt.capturing)


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """CUDA-graphed versions of callables or modules (torch.cuda.make_graphed_callables):
    each one's forward and its backward are captured into two graphs on ``sample_args``
    (after ``num_warmup_iters`` eager iterations), and the returned callable is one autograd
    node whose forward copies its inputs into the static inputs and replays the forward graph
    (returning its static outputs) and whose backward replays the backward graph. A module is
    returned with ``forward`` replaced while its training flag is the one it was graphed in."""
    import gputensor as gt
    from gputensor.nn.modules.module import Module

    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError("make_graphed_callables: pass one tuple of sample args per callable")
    graphed = []
    for fn, args in zip(callables, sample_args, strict=True):
        args = tuple(args) if isinstance(args, tuple | list) else (args,)
        if not all(isinstance(a, gt.Tensor) for a in args):
            raise TypeError("In the beta API, sample_args for each callable must contain only "
                            "Tensors. Other types are not allowed.")
        if isinstance(fn, Module) and (fn._forward_hooks or fn._forward_pre_hooks or
                                       fn._backward_hooks):
            raise RuntimeError("Modules must not have hooks registered at the time they are "
                               "passed. However, registering hooks on modules after passing "
                               "them through make_graphed_callables is allowed.")
        params = tuple(p for p in fn.parameters() if p.requires_grad) \
            if isinstance(fn, Module) else ()
        graphed.append(_graph_one(fn, args, params, num_warmup_iters, allow_unused_input,
                                  pool))
    return graphed[0] if just_one else tuple(graphed)


def _graph_one(fn: Any, args: tuple, params: tuple, warmup: int, allow_unused: bool,
               pool: Any) -> Any:
    import gputensor as gt
    from gputensor.nn.modules.module import Module

    inputs = args + params
    diff_inputs = tuple(t for t in inputs if t.requires_grad)

    def grads_of(outs: tuple, grad_outs: tuple) -> tuple:
        pairs = [(o, g) for o, g in zip(outs, grad_outs, strict=True) if o.requires_grad]
        if not pairs or not diff_inputs:
            return (None,) * len(diff_inputs)
        return gt.autograd.grad([o for o, _ in pairs], diff_inputs, [g for _, g in pairs],
                                allow_unused=allow_unused)

    side = graph.default_capture_stream or streams.Stream()
    graph.default_capture_stream = side
    with streams.stream(side):
        for _ in range(warmup):
            outs = _as_tuple(fn(*args))
            grads_of(outs, tuple(gt.ones_like(o) for o in outs))
    fwd = CUDAGraph()
    with graph(fwd, pool=pool):
        static_outs = _as_tuple(fn(*args))
    static_grad_outs = tuple(gt.empty_like(o) if o.requires_grad else None
                             for o in static_outs)
    bwd = CUDAGraph()
    with graph(bwd, pool=pool):
        static_grads = grads_of(static_outs, static_grad_outs)
    grads_by_input = iter(static_grads)
    static_grad_inputs = tuple(next(grads_by_input) if t.requires_grad else None
                               for t in inputs)

    class Graphed(gt.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *new_inputs: Any) -> Any:
            for static, new in zip(args, new_inputs[:len(args)], strict=True):
                if static.data_ptr() != new.data_ptr():
                    static.copy_(new)
            fwd.replay()
            return tuple(o.detach() for o in static_outs)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            for static, g in zip(static_grad_outs, grads, strict=True):
                if static is not None and g is not None and static.data_ptr() != g.data_ptr():
                    static.copy_(g)
            bwd.replay()
            return tuple(None if g is None else g.detach() for g in static_grad_inputs)

    returns_tuple = isinstance(static_outs, tuple) and len(static_outs) != 1

    def functionalized(*user_args: Any) -> Any:
        out = Graphed.apply(*user_args, *params)
        out = out if isinstance(out, tuple) else (out,)
        return out if returns_tuple else out[0]

    functionalized.graphs = (fwd, bwd)  # type: ignore[attr-defined]
    if isinstance(fn, Module):
        training, original = fn.training, fn.forward

        def forward(*user_args: Any, **kwargs: Any) -> Any:
            if fn.training == training and not kwargs:
                return functionalized(*user_args)
            return original(*user_args, **kwargs)

        fn.forward = forward
        return fn
    return functionalized


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)
