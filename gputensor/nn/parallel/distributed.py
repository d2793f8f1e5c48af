"""``DistributedDataParallel``: one model replica per process, gradients averaged as backward
produces them.

At construction rank 0's parameters and buffers are broadcast to every rank. The parameters
that need gradients are grouped into buckets (in reverse registration order, which is roughly
the order backward produces their gradients; the first bucket is small so communication starts
early, the others ``bucket_cap_mb``). A post-accumulate-grad hook on each parameter marks it
ready; when a bucket's parameters are all ready, their gradients are copied into the bucket's
flat buffer and an asynchronous all-reduce starts, overlapping the rest of backward. A
callback queued on the engine waits for the buckets at the end of backward and writes the
averages back into ``.grad`` (or makes ``.grad`` a view of the bucket with
``gradient_as_bucket_view``). With ``find_unused_parameters`` (or ``static_graph``) the
parameters the forward did not reach are marked ready at once, and a used-anywhere mask is
all-reduced so that parameters no rank used keep ``grad`` None, as in PyTorch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gputensor import distributed as dist
from gputensor.autograd import engine as _engine
from gputensor.autograd.grad_mode import no_grad
from gputensor.nn.modules.module import Module

_FIRST_BUCKET_BYTES = 1024 * 1024
_DEFAULT_BUCKET_MB = 25


class _Bucket:
    def __init__(self, params: list[Any]) -> None:
        import gputensor as gt
        self.params = params
        self.offsets, total = [], 0
        for p in params:
            self.offsets.append(total)
            total += p.numel()
        self.flat = gt.zeros(total, dtype=params[0].dtype, device=params[0].device)
        self.pending = len(params)
        self.work: Any = None

    def view(self, i: int) -> Any:
        p = self.params[i]
        return self.flat[self.offsets[i]:self.offsets[i] + p.numel()].view(p.shape)


def _bucketize(params: list[Any], cap_bytes: int) -> list[list[Any]]:
    """Consecutive parameters of one dtype/device, up to ``cap_bytes`` per bucket (the first
    bucket up to 1 MiB)."""
    buckets: list[list[Any]] = []
    current: list[Any] = []
    size, limit = 0, min(_FIRST_BUCKET_BYTES, cap_bytes)
    for p in params:
        nbytes = p.numel() * p.element_size()
        if current and (size + nbytes > limit or p.dtype is not current[0].dtype
                        or p.device != current[0].device):
            buckets.append(current)
            current, size, limit = [], 0, cap_bytes
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class DistributedDataParallel(Module):
    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None) -> None:
        super().__init__()
        if device_mesh is not None or mixed_precision is not None or \
                delay_all_reduce_named_params is not None or param_to_hook_all_reduce is not None:
            raise NotImplementedError("DistributedDataParallel: device_mesh, mixed_precision "
                                      "and the delayed all-reduce options are not supported")
        if device_ids is not None and len(device_ids) != 1:
            raise ValueError("device_ids can only be None or contain a single element.")
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.process_group = dist.process_group.resolve(process_group)
        self.dim, self.broadcast_buffers = dim, broadcast_buffers
        self.find_unused_parameters = find_unused_parameters or static_graph
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self._world = self.process_group.size()
        if init_sync:
            self._sync_module_states()
        cap = int((_DEFAULT_BUCKET_MB if bucket_cap_mb is None else bucket_cap_mb) * 2 ** 20)
        self._buckets = [_Bucket(b) for b in _bucketize(list(reversed(params)), cap)]
        self._where = {id(p): (b, i) for b in self._buckets for i, p in enumerate(b.params)}
        self._params = params
        self._armed = False      # a backward of this iteration will reduce
        self._finalized = True   # the last armed backward reduced every bucket
        self._queued = False     # the end-of-backward callback is queued
        self._next = 0           # the next bucket to reduce
        self._used: set[int] = set()
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params]

    # -- construction and forward ---------------------------------------------------------------
    def _sync_module_states(self) -> None:
        tensors = [t for t in (*self.module.parameters(), *self.module.buffers())]
        with no_grad():
            for t in tensors:
                dist.broadcast(t.data if t.requires_grad else t, src=self.process_group.ranks[0],
                               group=self.process_group)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self._finalized:
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one. This error indicates that your module has parameters that were not "
                "used in producing loss. You can enable unused parameter detection by passing "
                "the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`")
        if self.broadcast_buffers:
            with no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, src=self.process_group.ranks[0], group=self.process_group)
        out = self.module(*inputs, **kwargs)
        import gputensor as gt
        if gt.is_grad_enabled() and self.require_backward_grad_sync:
            self._prepare(out)
        return out

    def _prepare(self, out: Any) -> None:
        """Arm the reduction for the backward of ``out``; with unused-parameter detection,
        find the parameters the graph does not reach (they are ready at once)."""
        self._armed, self._finalized, self._queued, self._next = True, False, False, 0
        for b in self._buckets:
            b.pending, b.work = len(b.params), None
        self._used = {id(p) for p in self._params}
        if self.find_unused_parameters:
            self._used = _reached_leaves(out)
            for p in self._params:
                if id(p) not in self._used:
                    self._mark(p)

    # -- backward ---------------------------------------------------------------------------------
    def _grad_ready(self, p: Any) -> None:
        if not self._armed:
            return  # no_sync, or a backward this iteration did not arm
        if not self._queued:
            _engine.queue_callback(self._finish)
            self._queued = True
        self._mark(p)

    def _mark(self, p: Any) -> None:
        bucket, i = self._where[id(p)]
        with no_grad():
            view = bucket.view(i)
            if p.grad is None or id(p) not in self._used:
                view.zero_()
            else:
                view.copy_(p.grad)
        bucket.pending -= 1
        # Buckets are reduced in index order on every rank (collectives on one communicator
        # must be issued in the same order everywhere), each as soon as it and all before it
        # are complete.
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            ready = self._buckets[self._next]
            ready.work = dist.all_reduce(ready.flat, group=self.process_group, async_op=True)
            self._next += 1

    def _finish(self) -> None:
        """End of backward: wait for every bucket, write the averages into ``.grad``."""
        import gputensor as gt
        missing = [b for b in self._buckets if b.work is None]
        if missing:
            return  # some parameters got no gradient: the next forward raises
        used_anywhere = None
        if self.find_unused_parameters:
            mask = gt.tensor([1 if id(p) in self._used else 0 for p in self._params],
                             dtype=gt.int32, device=self._params[0].device)
            dist.all_reduce(mask, group=self.process_group)
            used_anywhere = {id(p) for p, m in zip(self._params, mask.tolist(), strict=True)
                             if m}
        with no_grad():
            for b in self._buckets:
                b.work.wait()
                b.flat.div_(self._world)
                for i, p in enumerate(b.params):
                    if used_anywhere is not None and id(p) not in used_anywhere:
                        continue
                    if self.gradient_as_bucket_view:
                        p.grad = b.view(i)
                    elif p.grad is None:
                        p.grad = b.view(i).clone()
                    else:
                        p.grad.copy_(b.view(i))
        self._armed, self._finalized = False, True

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradients accumulate locally inside; the first backward after it reduces them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def __getstate__(self) -> dict:
        raise RuntimeError("DistributedDataParallel cannot be pickled: save .module instead")


def _reached_leaves(out: Any) -> set[int]:
    """ids of the leaf tensors the autograd graph of ``out`` (a tensor or a nest of them)
    reaches."""
    from gputensor._tensor import Tensor
    from gputensor.autograd.graph import AccumulateGrad
    roots, stack = [], [out]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            if x.grad_fn is not None:
                roots.append(x.grad_fn)
            elif x.requires_grad:
                roots.append(("leaf", x))
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    seen_nodes, leaves = set(), set()
    while roots:
        node = roots.pop()
        if isinstance(node, tuple):
            leaves.add(id(node[1]))
            continue
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
            continue
        for edge in node.next_functions:
            if edge is not None and edge[0] is not None:
                roots.append(edge[0])
    return leaves


__all__ = ["DistributedDataParallel"]
