"""Process entry points for the multiprocessing tests (importable by spawned children)."""

from __future__ import annotations

import os

import gputensor as gt
import gputensor.multiprocessing as mp
from gputensor import nn


def add_one(queue_in: mp.Queue, queue_out: mp.Queue) -> None:
    """Receive tensors, write into them in place, send back what was seen."""
    items = queue_in.get()
    for t in items:
        t.add_(1)
    queue_out.put([(t.tolist(), t.is_shared(), t.data_ptr()) for t in items])


def views_share(queue_in: mp.Queue, queue_out: mp.Queue) -> None:
    a, b = queue_in.get()
    b[0] = 99.0  # b is a view of a's storage: a must see it
    queue_out.put((a.tolist(), a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()))


def describe(queue_in: mp.Queue, queue_out: mp.Queue) -> None:
    x = queue_in.get()
    queue_out.put((type(x).__name__, x.requires_grad, x.is_leaf, list(x.shape), x.stride(),
                   x.dtype == gt.float64))


def square(t: gt.Tensor) -> gt.Tensor:
    return t * t


def fill_rank(rank: int, shared: gt.Tensor) -> None:
    shared[rank] = rank + 1


def raise_in(rank: int) -> None:
    if rank == 1:
        raise ValueError("worker one failed on purpose")


def exit_with(rank: int, code: int) -> None:
    os._exit(code if rank == 0 else 0)


def hogwild_train(rank: int, model: nn.Module, steps: int, seed: int) -> None:
    """Hogwild: each process steps the shared parameters with its own optimizer."""
    gen = gt.Generator().manual_seed(seed + rank)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    w_true = gt.arange(4, dtype=gt.float32).reshape(1, 4) / 4
    for _ in range(steps):
        x = gt.randn(32, 4, generator=gen)
        y = x @ w_true.t()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def cuda_add_one(queue_in: mp.Queue, queue_out: mp.Queue) -> None:
    """Receive CUDA tensors (IPC), write into them, report what was seen."""
    items = queue_in.get()
    for t in items:
        t.add_(1)
    gt.cuda.synchronize(items[0].device)
    same = items[0].untyped_storage() is items[2].untyped_storage()
    queue_out.put(([(str(t.device), t.tolist()) for t in items], same))
    queue_in.get()  # hold the mappings until the parent has checked its side
