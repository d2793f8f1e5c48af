"""gt.distributed: PyTorch's process groups, collectives and stores.

CPU engines: "gloo" (TCP between the ranks, which meet through a store: env://, tcp://,
file:// or ``store=``; launch with ``gputensor-run --standalone --nproc-per-node N`` or any
launcher that sets torchrun's variables) and "mpi" (``mpiexec -n 2 python train.py``; under
MPI's launcher "gloo" runs on MPI too). CUDA tensors use NCCL through CuPy where it exists.
"""

from __future__ import annotations

from datetime import timedelta

from .backends import (
    BackendConfig,
    ProcessGroupGloo,
    get_default_backend_for_device,
    is_backend_available,
    is_torchelastic_launched,
    is_ucc_available,
    is_xccl_available,
)
from .coalesced import all_gather_coalesced, all_reduce_coalesced
from .collectives import (
    P2POp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    batch_isend_irecv,
    broadcast,
    broadcast_object_list,
    gather,
    gather_object,
    irecv,
    isend,
    monitored_barrier,
    recv,
    recv_object_list,
    reduce,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
    scatter_object_list,
    send,
    send_object_list,
)
from .debug import (
    DebugLevel,
    breakpoint,
    get_debug_level,
    log,
    record_comm,
    set_debug_level,
    set_debug_level_from_env,
)
from .device_mesh import DeviceMesh, init_device_mesh
from .errors import DistBackendError, DistError, DistNetworkError, DistStoreError, QueueEmptyError
from .options import (
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    BuiltinCommHookType,
    GatherOptions,
    GroupName,
    RankType,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    supports_complex,
)
from .process_group import (
    Backend,
    GroupMember,
    ProcessGroup,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_backend_config,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_pg_count,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    new_group,
)
from .reduce_op import ReduceOp, reduce_op
from .reducer import (
    GradBucket,
    Logger,
    Reducer,
)
from .reducer import _compute_bucket_assignment_by_size as _compute_bucket_assignment_by_size
from .reducer import _register_builtin_comm_hook as _register_builtin_comm_hook
from .reducer import _register_comm_hook as _register_comm_hook
from .rendezvous import register_rendezvous_handler, rendezvous
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore
from .subgroups import new_subgroups, new_subgroups_by_enumeration, shrink_group, split_group

__all__ = [
    "DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "FileStore",
    "HashStore", "PrefixStore", "QueueEmptyError", "Store", "TCPStore",
    "Backend", "GroupMember", "P2POp", "ProcessGroup", "ReduceOp", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list",
    "default_pg_timeout", "destroy_process_group", "gather", "gather_object", "get_backend",
    "get_global_rank", "get_group_rank", "get_node_local_rank", "get_pg_count",
    "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group",
    "irecv", "is_available", "is_gloo_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "isend", "monitored_barrier", "new_group", "recv", "recv_object_list",
    "reduce", "reduce_op", "reduce_scatter", "reduce_scatter_tensor", "scatter",
    "scatter_object_list", "send", "send_object_list",
    "AllToAllOptions", "AllreduceCoalescedOptions", "AllreduceOptions", "BackendConfig",
    "BarrierOptions", "BroadcastOptions", "BuiltinCommHookType", "DebugLevel", "DeviceMesh",
    "GatherOptions", "GradBucket", "GroupName", "Logger", "ProcessGroupGloo", "RankType",
    "ReduceOptions", "ReduceScatterOptions", "Reducer", "ScatterOptions", "all_gather_coalesced",
    "all_gather_single", "all_reduce_coalesced", "breakpoint", "get_backend_config",
    "get_debug_level", "get_default_backend_for_device", "init_device_mesh",
    "is_backend_available", "is_torchelastic_launched", "is_ucc_available", "is_xccl_available",
    "log", "new_subgroups", "new_subgroups_by_enumeration", "record_comm",
    "reduce_scatter_single", "register_rendezvous_handler", "rendezvous", "set_debug_level",
    "set_debug_level_from_env", "shrink_group", "split_group", "supports_complex", "timedelta",
]
