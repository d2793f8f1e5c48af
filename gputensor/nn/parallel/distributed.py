"""``DistributedDataParallel``: one model replica per process, gradients averaged as backward
produces them.

At construction rank 0's parameters and buffers are broadcast to every rank. The gradient
machinery is ``gt.distributed.Reducer`` (``distributed/reducer.py``): buckets of parameters
in reverse registration order, each all-reduced (or passed to the communication hook that
``register_comm_hook`` installs, as a ``GradBucket``) as soon as backward has filled it,
and the results written into ``.grad`` when backward ends. ``no_sync()`` accumulates locally;
with ``find_unused_parameters`` (or ``static_graph``) parameters the forward did not reach
are handled as in PyTorch.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from gputensor import distributed as dist
from gputensor.autograd.grad_mode import no_grad
from gputensor.distributed import reducer as _reducer
from gputensor.nn.modules.module import Module

_DEFAULT_BUCKET_MB = 25


class DistributedDataParallel(Module):
    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None) -> None:
        super().__init__()
        if mixed_precision is not None or delay_all_reduce_named_params is not None or \
                param_to_hook_all_reduce is not None:
            raise NotImplementedError("DistributedDataParallel: mixed_precision and the delayed "
                                      "all-reduce options are not supported")
        if device_mesh is not None:
            if process_group is not None:
                raise RuntimeError("Cannot specify both process_group and device_mesh "
                                   "arguments.")
            if device_mesh.ndim != 1:
                raise RuntimeError(f"Only 1D device mesh is supported, but got {device_mesh}.")
            process_group = device_mesh.get_group(mesh_dim=0)
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
        if init_sync:
            self._sync_module_states()
        cap = int((_DEFAULT_BUCKET_MB if bucket_cap_mb is None else bucket_cap_mb) * 2 ** 20)
        first = min(_reducer._FIRST_BUCKET_BYTES, cap)
        indices, limits = _reducer._compute_bucket_assignment_by_size(
            params, [first, cap], tensor_indices=list(range(len(params)))[::-1])
        self.reducer = dist.Reducer(params, indices, limits, self.process_group,
                                    bucket_bytes_cap=cap,
                                    find_unused_parameters=self.find_unused_parameters,
                                    gradient_as_bucket_view=gradient_as_bucket_view,
                                    first_bucket_bytes_cap=first)
        self.logger = dist.Logger(self.reducer)
        self.reducer.set_logger(self.logger)
        has_sync_bn = any(type(m).__name__ == "SyncBatchNorm" for m in module.modules())
        self.logger.set_construction_data_and_log(
            type(module).__name__, [] if device_ids is None else list(device_ids),
            -1 if output_device is None else int(getattr(output_device, "index", output_device)
                                                 or 0),
            broadcast_buffers, has_sync_bn, static_graph)

    # -- construction and forward ---------------------------------------------------------------
    def _sync_module_states(self) -> None:
        tensors = [t for t in (*self.module.parameters(), *self.module.buffers())]
        with no_grad():
            for t in tensors:
                dist.broadcast(t.data if t.requires_grad else t, src=self.process_group.ranks[0],
                               group=self.process_group)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        import gputensor as gt
        if gt.is_grad_enabled() and self.require_backward_grad_sync:
            self.logger.set_runtime_stats_and_log()
        self.reducer.prepare_for_forward()
        if self.broadcast_buffers:
            with no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, src=self.process_group.ranks[0], group=self.process_group)
        out = self.module(*inputs, **kwargs)
        if gt.is_grad_enabled() and self.require_backward_grad_sync:
            self.reducer.prepare_for_backward(out)
        return out

    # -- communication hooks ------------------------------------------------------------------
    def register_comm_hook(self, state: object, hook: Callable) -> None:
        """Reduce each gradient bucket with ``hook(state, bucket: dist.GradBucket)``, which
        returns a ``gt.futures.Future`` of the bucket's reduced buffer (the gradients it
        holds become those values: no averaging follows). Once, before training."""
        _check_comm_hook(hook)
        self.reducer.register_comm_hook(state, hook)
        self.logger._set_comm_hook_name(hook.__qualname__)

    def _register_builtin_comm_hook(self, comm_hook_type: Any) -> None:
        """``dist.BuiltinCommHookType.ALLREDUCE`` or ``FP16_COMPRESS``."""
        self.reducer.register_builtin_comm_hook(comm_hook_type)
        self.logger._set_comm_hook_name(str(comm_hook_type))

    def _get_ddp_logging_data(self) -> dict[str, Any]:
        return self.logger._get_ddp_logging_data()

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


def _check_comm_hook(hook: Any) -> None:
    """PyTorch's checks of a hook's signature (annotations may be strings under postponed
    evaluation)."""
    if not callable(hook):
        raise TypeError("Communication hook must be callable.")
    sig = inspect.signature(hook)
    bucket = sig.parameters["bucket"].annotation if "bucket" in sig.parameters else \
        inspect.Parameter.empty
    if bucket is not inspect.Parameter.empty and bucket is not dist.GradBucket and \
            not (isinstance(bucket, str) and bucket.endswith("GradBucket")):
        raise ValueError("Communication hook: bucket annotation should be dist.GradBucket.")
    ret = sig.return_annotation
    if ret is not inspect.Signature.empty and not (isinstance(ret, str) and "Future" in ret) \
            and getattr(getattr(ret, "__origin__", ret), "__name__", None) != "Future":
        raise ValueError("Communication hook: return annotation should be "
                         "torch.futures.Future[torch.Tensor].")


__all__ = ["DistributedDataParallel"]
