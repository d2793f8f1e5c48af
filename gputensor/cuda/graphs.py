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
