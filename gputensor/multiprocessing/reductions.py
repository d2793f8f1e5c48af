"""How multiprocessing's pickler passes tensors and storages between processes: by reference.

``init_reductions`` registers these with ``multiprocessing.reduction.ForkingPickler``, the
pickler of every Queue, Pipe, Pool and spawned Process argument. A CPU storage is moved into
shared memory (``storage/shared.py``; the sender's storage is shared from then on, as in
PyTorch) and travels as a descriptor or a segment name; a CUDA storage travels as an IPC
handle of its device memory. Plain ``pickle`` and ``gt.save`` still copy the bytes.
"""

from __future__ import annotations

from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

from gputensor._tensor import Tensor
from gputensor.storage import shared
from gputensor.storage.untyped import UntypedStorage

_NON_LEAF = ("Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
             "autograd does not support crossing process boundaries.  If you just want to "
             "transfer the data, call detach() on the tensor before serializing (e.g., "
             "putting it on the queue).")


def rebuild_storage_fd(fd: Any, nbytes: int) -> UntypedStorage:
    seg = shared.attach_fd(fd.detach(), nbytes)
    return UntypedStorage._from_segment(seg)


def rebuild_storage_filename(name: str, nbytes: int) -> UntypedStorage:
    known = shared.attached(("name", name))
    if known is not None:
        return known
    return UntypedStorage._from_segment(shared.attach_name(name, nbytes))


def rebuild_storage_cuda(handle: Any, device_index: int, offset: int,
                         nbytes: int) -> UntypedStorage:
    from gputensor.cuda.ipc import open_storage
    return open_storage(handle, device_index, offset, nbytes)


def reduce_storage(storage: UntypedStorage) -> tuple:
    if storage.device.type == "cuda":
        from gputensor.cuda.ipc import export_storage
        return (rebuild_storage_cuda, export_storage(storage))
    if storage.device.type != "cpu":
        raise RuntimeError(f"cannot share a storage on {storage.device} between processes")
    seg = storage.share_memory_()._shm
    if seg.fd is not None:
        return (rebuild_storage_fd, (DupFd(seg.fd), storage.nbytes()))
    return (rebuild_storage_filename, (seg.name, storage.nbytes()))


def reduce_tensor(tensor: Tensor) -> tuple:
    """A tensor pickles as its storage, offset, shape and strides (and its class, so a
    Parameter stays one); the storage then goes through :func:`reduce_storage`."""
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(_NON_LEAF)
    return tensor.__reduce_ex__(2)


def init_reductions() -> None:
    """Register the reducers with multiprocessing's pickler (done at import; idempotent)."""
    from gputensor.nn.parameter import Parameter
    from gputensor.sparse._tensor import SparseTensor
    ForkingPickler.register(UntypedStorage, reduce_storage)
    for cls in (Tensor, Parameter, SparseTensor):
        ForkingPickler.register(cls, reduce_tensor)


__all__ = ["init_reductions", "rebuild_storage_cuda", "rebuild_storage_fd",
           "rebuild_storage_filename", "reduce_storage", "reduce_tensor"]
