"""DDP's gradient reducer (PyTorch's ``dist.Reducer``), the ``GradBucket`` a communication
hook receives, and DDP's ``Logger``.

The parameters that need gradients are grouped into buckets (in reverse registration order,
which is roughly the order backward produces their gradients; the first bucket is small so
communication starts early, the others ``bucket_cap_mb``; inside a bucket parameters keep
registration order, as PyTorch's). A post-accumulate-grad hook on each parameter marks it
ready; when a bucket's parameters are all ready, their gradients are copied into the bucket's
flat buffer and its reduction starts: an asynchronous all-reduce, or the registered
communication hook (``hook(state, GradBucket) -> Future[Tensor]``). Buckets start strictly in
index order on every rank (one communicator needs one order). A callback queued on the
engine waits for them at the end of backward and writes the results into ``.grad`` (or makes
``.grad`` a view of the bucket with ``gradient_as_bucket_view``). With unused-parameter
detection the parameters the forward did not reach are marked ready at once, and a
used-anywhere mask is all-reduced so that parameters no rank used keep ``grad`` None.

Under DDP's ``join()`` the sums are divided by the world size or by the number of ranks still
training (the forward's join all-reduce counts them), and a rank that has joined shadows each
iteration's bucket all-reduces with zeros (``_match_all_reduce_for_bwd_pass``). Every wait is
bounded by the group's timeout (``wait_for``): a rank whose peers stopped running backward
fails with an error naming the likely cause instead of hanging (MPI's own waits never end).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputensor.autograd import engine as _engine
from gputensor.autograd.grad_mode import no_grad

from .collectives import Work, _StreamWork, all_reduce
from .debug import DebugLevel, get_debug_level, log
from .errors import DistBackendError, DistError
from .options import BuiltinCommHookType

_FIRST_BUCKET_BYTES = 1024 * 1024
_DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024


_UNEVEN_HINT = ("a peer is not running the same collectives; if the ranks have different "
                "numbers of inputs, train inside `with model.join():` "
                "(DistributedDataParallel.join)")


def wait_for(work: Any, pg: Any, what: str) -> Any:
    """``work.wait()`` (a ``Work`` or a Future), bounded by the group's timeout: MPI's requests
    are polled (its waits have no limit; the gloo engine enforces its own; an NCCL work only
    orders the stream), and a failure says what DDP was waiting for."""
    from . import process_group as P
    limit = pg.timeout_s()
    try:
        polls = pg.engine.__name__.endswith("_mpi") and not isinstance(work, _StreamWork)
        if polls and not _done(work):
            deadline, pause = time.monotonic() + limit, 2e-5
            while not _done(work):
                if time.monotonic() > deadline:
                    raise DistBackendError(f"rank {P.get_rank()} timed out after {limit:g} s")
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)
        return work.wait()
    except DistError as e:
        raise type(e)(f"DistributedDataParallel: waiting for {what}: {e} ({_UNEVEN_HINT})"
                      ) from e


def _done(work: Any) -> bool:
    return work.is_completed() if isinstance(work, Work) else work.done()


def _compute_bucket_assignment_by_size(params: Sequence[Any], bucket_size_limits: Sequence[int],
                                       expect_sparse_gradient: Sequence[bool] = (),
                                       tensor_indices: Sequence[int] = ()
                                       ) -> tuple[list[list[int]], list[int]]:
    """Indices of consecutive parameters (in ``tensor_indices`` order, default: given order)
    of one dtype/device per bucket, up to the next limit of ``bucket_size_limits`` bytes (the
    last limit repeats). Returns the buckets (each in ascending index order) and the limit
    each was filled against."""
    order = list(tensor_indices) or list(range(len(params)))
    buckets: list[list[int]] = []
    limits: list[int] = []
    current: list[int] = []
    size, which = 0, 0
    for i in order:
        p = params[i]
        nbytes = p.numel() * p.element_size()
        first = params[current[0]] if current else None
        if current and (size + nbytes > bucket_size_limits[which] or p.dtype is not first.dtype
                        or p.device != first.device):
            buckets.append(sorted(current))
            limits.append(bucket_size_limits[which])
            current, size = [], 0
            which = min(which + 1, len(bucket_size_limits) - 1)
        current.append(i)
        size += nbytes
    if current:
        buckets.append(sorted(current))
        limits.append(bucket_size_limits[which])
    return buckets, limits


class _Bucket:
    def __init__(self, index: int, params: list[Any]) -> None:
        import gputensor as gt
        self.index, self.params = index, params
        self.offsets, total = [], 0
        for p in params:
            self.offsets.append(total)
            total += p.numel()
        self.flat = gt.zeros(total, dtype=params[0].dtype, device=params[0].device)
        self.pending = len(params)
        self.work: Any = None    # the all-reduce in flight, or the hook's future

    def view(self, i: int) -> Any:
        p = self.params[i]
        return self.flat[self.offsets[i]:self.offsets[i] + p.numel()].view(p.shape)


class GradBucket:
    """What a DDP communication hook receives: one bucket of gradients, flattened into
    ``buffer()`` (``gradients()`` are views of it, in ``parameters()`` order)."""

    def __init__(self, bucket: _Bucket, is_last: bool) -> None:
        self._bucket, self._last = bucket, is_last

    def index(self) -> int:
        return self._bucket.index

    def buffer(self) -> Any:
        return self._bucket.flat

    def gradients(self) -> list[Any]:
        return [self._bucket.view(i) for i in range(len(self._bucket.params))]

    def parameters(self) -> list[Any]:
        return list(self._bucket.params)

    def is_last(self) -> bool:
        return self._last

    def set_buffer(self, buffer: Any) -> None:
        if buffer.numel() != self._bucket.flat.numel():
            raise RuntimeError(f"set_buffer: expected a buffer of {self._bucket.flat.numel()} "
                               f"elements, got {buffer.numel()}")
        self._bucket.flat = buffer.reshape(-1)


def _allreduce_hook(process_group: Any, bucket: GradBucket) -> Any:
    """BuiltinCommHookType.ALLREDUCE: the average of the bucket over the group."""
    buf = bucket.buffer().div_(process_group.size())
    return all_reduce(buf, group=process_group, async_op=True).get_future().then(
        lambda fut: fut.value()[0])


def _fp16_compress_hook(process_group: Any, bucket: GradBucket) -> Any:
    """BuiltinCommHookType.FP16_COMPRESS: the average, all-reduced in float16."""
    import gputensor as gt
    buf = bucket.buffer()
    compressed = buf.to(gt.float16).div_(process_group.size())

    def decompress(fut: Any) -> Any:
        with no_grad():
            buf.copy_(fut.value()[0])
        return buf
    return all_reduce(compressed, group=process_group, async_op=True).get_future().then(
        decompress)


class Reducer:
    """PyTorch's ``dist.Reducer(params, bucket_indices, per_bucket_size_limits,
    process_group, ...)``: owns the buckets and the gradient hooks of ``params``."""

    def __init__(self, params: Sequence[Any], bucket_indices: Sequence[Sequence[int]],
                 per_bucket_size_limits: Sequence[int], process_group: Any,
                 expect_sparse_gradients: Sequence[bool] = (),
                 bucket_bytes_cap: int = _DEFAULT_BUCKET_BYTES,
                 find_unused_parameters: bool = False, gradient_as_bucket_view: bool = False,
                 param_to_name_mapping: dict[int, str] | None = None,
                 first_bucket_bytes_cap: int = _FIRST_BUCKET_BYTES, **kwargs: Any) -> None:
        self._params = list(params)
        self.process_group = process_group
        self.bucket_bytes_cap = bucket_bytes_cap
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self._buckets = [_Bucket(i, [self._params[j] for j in idx])
                         for i, idx in enumerate(bucket_indices)]
        self._bucket_limits = list(per_bucket_size_limits)
        self._where = {id(p): (b, i) for b in self._buckets for i, p in enumerate(b.params)}
        self._index = {id(p): i for i, p in enumerate(self._params)}
        self._armed = False      # a backward of this iteration will reduce
        self._finalized = True   # the last armed backward reduced every bucket
        self._queued = False     # the end-of-backward callback is queued
        self._next = 0           # the next bucket to reduce
        self._used: set[int] = set()
        self._hook: tuple[Callable, Any] | None = None
        self._static_graph = False
        self._logger: Logger | None = None
        self._started_ns = 0
        self._backward_ns = [0] * len(self._params)
        # The join context's all-reduce of this iteration (the number of ranks training), and
        # whether the world size divides anyway (DDP.join's divide_by_initial_world_size).
        self._forward_work: Work | None = None
        self._static_world_size = True
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready)
                         for p in self._params]

    # -- set-up ---------------------------------------------------------------------------------
    def register_comm_hook(self, state: Any, hook: Callable[[Any, GradBucket], Any]) -> None:
        """Reduce each bucket with ``hook(state, bucket)``, a Future whose value is the
        bucket's reduced buffer (no division by the group size follows: the hook's result is
        the gradient)."""
        if self._hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                               "called once.")
        self._hook = (hook, state)

    def register_builtin_comm_hook(self, comm_hook_type: BuiltinCommHookType) -> None:
        hooks = {BuiltinCommHookType.ALLREDUCE: _allreduce_hook,
                 BuiltinCommHookType.FP16_COMPRESS: _fp16_compress_hook}
        if comm_hook_type not in hooks:
            raise TypeError(f"expected a BuiltinCommHookType, got {comm_hook_type!r}")
        self.register_comm_hook(self.process_group, hooks[comm_hook_type])

    def set_logger(self, logger: Logger) -> None:
        self._logger = logger

    def _set_static_graph(self) -> None:
        self._static_graph = True
        self.find_unused_parameters = True

    def _remove_autograd_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def get_backward_stats(self) -> list[int]:
        """Per parameter, the nanoseconds from the start of the last armed backward
        (``prepare_for_backward``) until its gradient was ready."""
        return list(self._backward_ns)

    # -- per iteration --------------------------------------------------------------------------
    def prepare_for_forward(self) -> None:
        if not self._finalized:
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one. This error indicates that your module has parameters that were not "
                "used in producing loss. You can enable unused parameter detection by passing "
                "the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`")

    def prepare_for_backward(self, outputs: Any) -> None:
        """Arm the reduction for the backward of ``outputs``; with unused-parameter
        detection, the parameters the graph does not reach are ready at once."""
        self._armed, self._finalized, self._queued, self._next = True, False, False, 0
        self._started_ns = time.perf_counter_ns()
        for b in self._buckets:
            b.pending, b.work = len(b.params), None
        self._used = {id(p) for p in self._params}
        if self.find_unused_parameters:
            self._used = _reached_leaves(outputs)
            for p in self._params:
                if id(p) not in self._used:
                    self._mark(p)

    def _grad_ready(self, p: Any) -> None:
        if not self._armed:
            return  # no_sync, or a backward this iteration did not arm
        if not self._queued:
            _engine.queue_callback(self._finish)
            self._queued = True
        self._backward_ns[self._index[id(p)]] = time.perf_counter_ns() - self._started_ns
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
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            self._launch(self._buckets[self._next])
            self._next += 1

    def _set_forward_pass_work_handle(self, work: Work | None,
                                      use_static_world_size: bool) -> None:
        self._forward_work, self._static_world_size = work, use_static_world_size

    def _div_factor(self) -> int:
        """What the summed gradients are divided by: the group size, or under join with
        ``divide_by_initial_world_size=False`` the number of ranks still training."""
        if self._forward_work is None or self._static_world_size:
            return self.process_group.size()
        wait_for(self._forward_work, self.process_group, "the join context's all-reduce")
        return int(self._forward_work.result()[0].item())

    def _launch(self, bucket: _Bucket) -> None:
        if self._hook is None:
            bucket.work = all_reduce(bucket.flat, group=self.process_group, async_op=True)
            return
        hook, state = self._hook
        bucket.work = hook(state, GradBucket(bucket, bucket.index == len(self._buckets) - 1))

    def _result(self, bucket: _Bucket, div_factor: int) -> Any:
        """The bucket's reduced gradients, flat: the hook's future value, or the all-reduce's
        sum divided by ``div_factor``."""
        what = f"the gradient all-reduce of bucket {bucket.index}"
        if self._hook is None:
            wait_for(bucket.work, self.process_group, what)
            return bucket.flat.div_(div_factor)
        value = wait_for(bucket.work, self.process_group, what)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        if not hasattr(value, "numel") or value.numel() != bucket.flat.numel():
            raise RuntimeError(f"The communication hook's future must hold a tensor of "
                               f"{bucket.flat.numel()} elements (the bucket's buffer), got "
                               f"{value!r}")
        if value is not bucket.flat:
            bucket.flat.copy_(value.reshape(-1))
        return bucket.flat

    def _finish(self) -> None:
        """End of backward: wait for every bucket, write the results into ``.grad``."""
        import gputensor as gt
        if any(b.work is None for b in self._buckets):
            return  # some parameters got no gradient: the next forward raises
        used_anywhere = None
        if self.find_unused_parameters:
            mask = gt.tensor([1 if id(p) in self._used else 0 for p in self._params],
                             dtype=gt.int32, device=self._params[0].device)
            wait_for(all_reduce(mask, group=self.process_group, async_op=True),
                     self.process_group, "the all-reduce of the used-parameter mask")
            used_anywhere = {id(p) for p, m in zip(self._params, mask.tolist(), strict=True)
                             if m}
        div_factor = self._div_factor() if self._hook is None else 1
        with no_grad():
            for b in self._buckets:
                self._result(b, div_factor)
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
        if self._logger is not None:
            self._logger._iteration_done()

    # -- a joined rank's side of an iteration (DDP's join hook) ----------------------------------
    def _match_all_reduce_for_bwd_pass(self) -> None:
        """The bucket reductions of one backward, in bucket order, each of a bucket of zeros
        (what this rank contributes once it has no inputs left)."""
        works = []
        for b in self._buckets:
            zeros = _Bucket(b.index, b.params)
            if self._hook is None:
                works.append(all_reduce(zeros.flat, group=self.process_group, async_op=True))
            else:
                hook, state = self._hook
                works.append(hook(state, GradBucket(zeros, b.index == len(self._buckets) - 1)))
        for b, work in zip(self._buckets, works, strict=True):
            wait_for(work, self.process_group,
                     f"the join-shadowed gradient all-reduce of bucket {b.index}")

    def _match_unused_params_allreduce(self) -> None:
        """The used-parameter mask of one backward: nothing used here."""
        import gputensor as gt
        mask = gt.zeros(len(self._params), dtype=gt.int32, device=self._params[0].device)
        wait_for(all_reduce(mask, group=self.process_group, async_op=True), self.process_group,
                 "the join-shadowed all-reduce of the used-parameter mask")


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


class Logger:
    """DDP's logging record (PyTorch's ``dist.Logger(reducer)``): what the model and its
    buckets look like and how iterations went, logged to the ``torch.distributed`` logger at
    ``DebugLevel.INFO`` and above, and read with ``ddp._get_ddp_logging_data()``."""

    def __init__(self, reducer: Reducer) -> None:
        self._reducer = reducer
        self._data: dict[str, Any] = {}

    def set_construction_data_and_log(self, module_name: str, device_ids: Sequence[int],
                                      output_device: int, broadcast_buffers: bool,
                                      has_sync_bn: bool, static_graph: bool) -> None:
        from . import process_group as P
        r, pg = self._reducer, self._reducer.process_group
        sizes = [b.flat.numel() * b.flat.element_size() for b in r._buckets]
        self._data.update({
            "backend_name": str(pg.name()),
            "bucket_sizes": ", ".join(str(s) for s in sizes),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "N/A"),
            "device_ids": ", ".join(str(d) for d in device_ids),
            "dtypes": ", ".join(sorted({_dtype_name(p.dtype) for p in r._params})),
            "master_addr": os.environ.get("MASTER_ADDR", "N/A"),
            "master_port": os.environ.get("MASTER_PORT", "N/A"),
            "module_name": module_name,
            "torch_distributed_debug": os.environ.get("TORCH_DISTRIBUTED_DEBUG", "N/A"),
            "broadcast_buffers": int(broadcast_buffers),
            "bucket_cap_bytes": r.bucket_bytes_cap,
            "find_unused_parameters": int(r.find_unused_parameters),
            "gradient_as_bucket_view": int(r.gradient_as_bucket_view),
            "has_sync_bn": int(has_sync_bn),
            "is_multi_device_module": 0,
            "iteration": 0,
            "num_parameter_tensors": len(r._params),
            "output_device": output_device,
            "rank": P.get_rank(pg),
            "static_graph": int(static_graph),
            "total_parameter_size_bytes": sum(p.numel() * p.element_size() for p in r._params),
            "world_size": pg.size(),
        })
        if get_debug_level() is not DebugLevel.OFF:
            log.info("DDP constructed: %s", self._data)

    def set_runtime_stats_and_log(self) -> None:
        """Record the last backward's timing (DDP calls it at each forward); logged at
        iterations 10, 20, 50, 100 and every 100th after, as PyTorch samples them."""
        stats = self._reducer.get_backward_stats()
        if any(stats):
            self._data["avg_backward_compute_time"] = max(stats)
        it = self._data.get("iteration", 0)
        if get_debug_level() is not DebugLevel.OFF and it and (it in (10, 20, 50)
                                                               or it % 100 == 0):
            log.info("DDP iteration %s: %s", it, self._data)

    def set_error_and_log(self, message: str) -> None:
        self._data["has_error"] = 1
        self._data["error"] = message
        log.error("DDP error: %s", message)

    def _set_comm_hook_name(self, name: str) -> None:
        self._data["comm_hook"] = name

    def _set_static_graph(self) -> None:
        self._data["static_graph"] = 1

    def _set_uneven_input_join(self) -> None:
        self._data["join_uneven_inputs"] = 1

    def _iteration_done(self) -> None:
        self._data["iteration"] = self._data.get("iteration", 0) + 1

    def _get_ddp_logging_data(self) -> dict[str, Any]:
        return dict(self._data)


def _dtype_name(dt: Any) -> str:
    """PyTorch's C++ scalar-type name ("float", "double", "c10::Half") as DDP logs it."""
    return {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16"}.get(str(dt).removeprefix("gputensor."),
                                             str(dt).split(".")[-1])


def _register_comm_hook(reducer: Reducer, state: Any, hook: Callable) -> None:
    """torch.distributed._register_comm_hook."""
    reducer.register_comm_hook(state, hook)


def _register_builtin_comm_hook(reducer: Reducer, comm_hook_type: BuiltinCommHookType) -> None:
    """torch.distributed._register_builtin_comm_hook."""
    reducer.register_builtin_comm_hook(comm_hook_type)
