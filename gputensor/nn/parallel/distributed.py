"""``DistributedDataParallel``: one model replica per process, gradients averaged as backward
produces them.

At construction rank 0's parameters and buffers are broadcast to every rank. The gradient
machinery is ``gt.distributed.Reducer`` (``distributed/reducer.py``): buckets of parameters
in reverse registration order, each all-reduced (or passed to the communication hook that
``register_comm_hook`` installs, as a ``GradBucket``) as soon as backward has filled it,
and the results written into ``.grad`` when backward ends. ``no_sync()`` accumulates locally;
with ``find_unused_parameters`` (or ``static_graph``) parameters the forward did not reach
are handled as in PyTorch.

DDP is a ``Joinable``: inside ``with ddp.join():`` (or ``Join([ddp, ...])``) a rank that ran
out of inputs shadows the collectives of the ranks still training (buffer broadcasts from a
training rank, zero gradient buckets), and when all have joined the last joiner's parameters
and buffers are broadcast. Under ``gt.compile`` DDP's forward (its collectives and gradient
hooks) runs eagerly with one graph-break warning and its module is compiled on its own, as
torch.compile skips DDP's forward and compiles the wrapped module.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from gputensor import distributed as dist
from gputensor._compile import state as _compile_state
from gputensor.autograd.grad_mode import no_grad
from gputensor.distributed import reducer as _reducer
from gputensor.distributed.algorithms.join import Join, Joinable, JoinHook
from gputensor.nn.modules.module import Module

_DEFAULT_BUCKET_MB = 25


class _DDPJoinHook(JoinHook):
    """What a joined rank runs for DDP each iteration the others still train: their buffer
    broadcast, the backward-sync flag, then (if they sync) the bucket all-reduces with zeros
    and the used-parameter mask; at the end, the last joiner's model is broadcast."""

    def __init__(self, ddp: DistributedDataParallel, divide_by_initial_world_size: bool
                 ) -> None:
        if not isinstance(ddp, DistributedDataParallel):
            raise AssertionError("DDP join hook requires passing in a DistributedDataParallel "
                                 f"instance as the state, got {type(ddp).__name__}")
        ddp.logger._set_uneven_input_join()
        ddp._divide_by_initial_world_size = divide_by_initial_world_size
        self.ddp = ddp

    def main_hook(self) -> None:
        ddp = self.ddp
        ddp._sync_buffers(joined=True)
        if not ddp._check_global_requires_backward_grad_sync(is_joined_rank=True):
            return
        ddp.reducer._match_all_reduce_for_bwd_pass()
        if ddp.find_unused_parameters:
            ddp.reducer._match_unused_params_allreduce()

    def post_hook(self, is_last_joiner: bool) -> None:
        self.ddp._sync_final_model(is_last_joiner)


class DistributedDataParallel(Module, Joinable):
    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None) -> None:
        super().__init__()
        Joinable.__init__(self)
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
        self._divide_by_initial_world_size = True
        self._join_works: list[Any] = []  # the forward's join all-reduces nobody waits for
        # gt.compile of this DDP compiles the wrapped module on its own (see forward).
        self.__dict__["_compiled_module"] = None
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
    def _sync_module_states(self, src: int = 0, buffers: bool = True) -> None:
        """Broadcast the parameters (and buffers) of group rank ``src``."""
        tensors = [p.data if p.requires_grad else p for p in self.module.parameters()]
        self._broadcast(tensors + (list(self.module.buffers()) if buffers else []), src,
                        "the broadcast of the model's state")

    def _broadcast(self, tensors: list[Any], src: int, what: str) -> None:
        pg = self.process_group
        with no_grad():
            works = [dist.broadcast(t, src=pg.ranks[src], group=pg, async_op=True)
                     for t in tensors]
            for w in works:
                _reducer.wait_for(w, pg, what)

    def _sync_buffers(self, joined: bool = False) -> None:
        """The forward's buffer broadcast: from rank 0, or under join from the highest rank
        still training (a joined rank's buffers are stale)."""
        buffers = list(self.module.buffers())
        if not (self.broadcast_buffers and buffers):
            return
        src = self._find_common_rank(not joined) if self._join_config.enable or joined else 0
        self._broadcast(buffers, src, "the broadcast of the module's buffers")

    def _find_common_rank(self, candidate: bool) -> int:
        """The highest group rank among the ranks that pass ``candidate=True``."""
        import gputensor as gt
        pg = self.process_group
        rank = gt.tensor([dist.get_rank(pg) if candidate else -1],
                         device=self.join_device)
        _reducer.wait_for(dist.all_reduce(rank, op=dist.ReduceOp.MAX, group=pg,
                                          async_op=True), pg, "the join context's all-reduce")
        if int(rank.item()) < 0:
            raise ValueError("BUG! Expected rank_cond to be true for at least one process.")
        return int(rank.item())

    def _check_global_requires_backward_grad_sync(self, is_joined_rank: bool) -> bool | None:
        """Under join, tell the joined ranks whether this iteration's backward reduces (an
        all-reduce of 1 per training rank that syncs); a joined rank gets the answer."""
        import gputensor as gt
        syncs = not is_joined_rank and gt.is_grad_enabled() and self.require_backward_grad_sync
        flag = gt.tensor([1.0 if syncs else 0.0], device=self.join_device)
        work = dist.all_reduce(flag, group=self.process_group, async_op=True)
        if not is_joined_rank:
            self._join_works.append(work)  # kept (its buffer too) until the next forward
            return None
        _reducer.wait_for(work, self.process_group, "the join context's all-reduce")
        return bool(flag.item())

    def _wait_join_works(self) -> None:
        for work in self._join_works:
            _reducer.wait_for(work, self.process_group, "the join context's all-reduce")
        self._join_works.clear()

    def _sync_final_model(self, is_last_joiner: bool) -> None:
        """After join: every rank takes the state of the highest-ranked last joiner."""
        self._wait_join_works()
        self._sync_module_states(self._find_common_rank(is_last_joiner), self.broadcast_buffers)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        import gputensor as gt
        module = self._module_to_call()
        self._wait_join_works()
        grad_sync = gt.is_grad_enabled() and self.require_backward_grad_sync
        if grad_sync:
            self.logger.set_runtime_stats_and_log()
            self.reducer.prepare_for_forward()
        work = Join.notify_join_context(self)
        self.reducer._set_forward_pass_work_handle(work, self._divide_by_initial_world_size)
        if work is not None:
            self._join_works.append(work)
        self._sync_buffers()
        if self._join_config.enable:
            self._check_global_requires_backward_grad_sync(is_joined_rank=False)
        out = module(*inputs, **kwargs)
        if grad_sync:
            self.reducer.prepare_for_backward(out)
        return out

    def _module_to_call(self) -> Any:
        """The wrapped module, or its compiled form once ``gt.compile`` reached this forward:
        a capture cannot replay DDP's collectives and gradient hooks, so the compiled call
        breaks the graph here (running DDP eagerly from then on, one warning) and the module
        alone is compiled, as torch.compile does with DDP."""
        if _compile_state.is_capturing():
            _compile_state.host_effect(
                "DistributedDataParallel's collectives and gradient hooks (DDP's forward runs "
                "eagerly; the wrapped module is compiled on its own)")
            if self._compiled_module is None:
                from gputensor._compile.api import OptimizedModule
                from gputensor._compile.compiled import CompiledFunction
                compiled = isinstance(self.module, OptimizedModule) or \
                    "_compiled_call_impl" in self.module.__dict__  # Module.compile()
                if not compiled:
                    self.__dict__["_compiled_module"] = CompiledFunction(
                        self.module.__call__, modules=list(self.module.modules()))
            return self.module
        return self._compiled_module or self.module

    # -- join (uneven inputs) -------------------------------------------------------------------
    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False) -> Join:
        """A context manager for training on uneven inputs: ranks that run out of inputs
        shadow the others' collectives until all are done, then the last joiner's model is
        broadcast. Gradients are divided by the world size, or with
        ``divide_by_initial_world_size=False`` by the number of ranks still training;
        ``throw_on_early_termination=True`` raises on every rank once one runs out."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs: Any) -> JoinHook:
        return _DDPJoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self) -> Any:
        return next(self.module.parameters()).device

    @property
    def join_process_group(self) -> Any:
        return self.process_group

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
