"""gt.distributed: PyTorch's process groups, collectives and stores.

CPU engines: "gloo" (TCP between the ranks, which meet through a store: env://, tcp://,
file:// or ``store=``; launch with ``gputensor-run --standalone --nproc-per-node N`` or any
launcher that sets torchrun's variables) and "mpi" (``mpiexec -n 2 python train.py``; under
MPI's launcher "gloo" runs on MPI too). CUDA tensors use NCCL through CuPy where it exists.
"""

from __future__ import annotations

from .collectives import (
    P2POp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
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
    reduce_scatter_tensor,
    scatter,
    scatter_object_list,
    send,
    send_object_list,
)
from .errors import DistBackendError, DistError, DistNetworkError, DistStoreError, QueueEmptyError
from .process_group import (
    Backend,
    GroupMember,
    ProcessGroup,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
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
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore

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
]
