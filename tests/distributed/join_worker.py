"""Run as one of N processes (``mpiexec -n N`` or ``gputensor-run --standalone``):
``DistributedDataParallel.join()`` with uneven inputs (rank r has ``2 + r`` batches) against a
single process that applies, step by step, what PyTorch's semantics define: the mean loss of
each rank still training, summed and divided by the world size (or by the number of ranks
still training with ``divide_by_initial_world_size=False``); parameters to 1e-6 and
identical on every rank after the join (argv[1]: the device of the DDP runs). Also a comm
hook, ``no_sync``, unused parameters and buffers under join, the generic ``Join`` with a
second joinable, and ``throw_on_early_termination``."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn
from gputensor.distributed.algorithms.join import Join, Joinable, JoinHook
from gputensor.nn.parallel import DistributedDataParallel as DDP
from tests.distributed.ddp_worker import TwoHeads, flat_params, same_on_every_rank

PER_RANK = 3
DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"  # the DDP runs' device


def model(device: str = "cpu") -> nn.Module:
    gt.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)


def inputs(size: int) -> list[list[tuple[gt.Tensor, gt.Tensor]]]:
    """Per rank r, its 2 + r batches (the same tensors in every process)."""
    gen = gt.Generator().manual_seed(7)
    return [[(gt.randn(PER_RANK, 6, generator=gen), gt.randint(0, 3, (PER_RANK,), generator=gen))
             for _ in range(2 + r)] for r in range(size)]


def loss_of(net: nn.Module, x: gt.Tensor, y: gt.Tensor) -> gt.Tensor:
    return nn.functional.cross_entropy(net(x), y)


def reference(data: list, size: int, divide_by_initial_world_size: bool,
              accumulate: int = 1) -> np.ndarray:
    """One process: at step k the gradient is the sum of the mean-loss gradients of the ranks
    that still have a batch k, divided as DDP's join divides."""
    net = model()
    opt = gt.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for k in range(max(len(d) for d in data)):
        active = [d[k] for d in data if k < len(d)]
        divisor = size if divide_by_initial_world_size else len(active)
        opt.zero_grad()
        for part in range(accumulate):
            total = sum(loss_of(net, x.chunk(accumulate)[part], y.chunk(accumulate)[part])
                        for x, y in active)
            (total / (divisor * accumulate)).backward()
        opt.step()
    return flat_params(net)


def train(ddp: DDP, batches: list, accumulate: int = 1, **join_kwargs: Any) -> None:
    opt = gt.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    with ddp.join(**join_kwargs):
        for x, y in batches:
            opt.zero_grad()
            x, y = x.to(DEVICE), y.to(DEVICE)
            for part in range(accumulate):
                sync = part == accumulate - 1
                with ddp.no_sync() if not sync else contextlib.nullcontext():
                    loss = loss_of(ddp, x.chunk(accumulate)[part], y.chunk(accumulate)[part])
                    (loss / accumulate).backward()
            opt.step()


def check_against_reference(rank: int, size: int, data: list) -> None:
    for divide in (True, False):
        ddp = DDP(model(DEVICE), bucket_cap_mb=0.0001)  # several buckets to shadow
        assert len(ddp.reducer._buckets) > 1
        train(ddp, data[rank], divide_by_initial_world_size=divide)
        got = flat_params(ddp.module)
        same_on_every_rank(got, "parameters after join")
        np.testing.assert_allclose(got, reference(data, size, divide), atol=1e-6,
                                   err_msg=f"join, divide_by_initial_world_size={divide}")
        assert ddp._get_ddp_logging_data()["join_uneven_inputs"] == 1
    # a comm hook: the joined ranks run it on zero buckets (ALLREDUCE divides by the size)
    ddp = DDP(model(DEVICE))
    ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    train(ddp, data[rank])
    np.testing.assert_allclose(flat_params(ddp.module), reference(data, size, True),
                               atol=1e-6, err_msg="join with the ALLREDUCE comm hook")
    # no_sync micro-batches: the joined ranks skip the iterations that do not reduce
    ddp = DDP(model(DEVICE))
    train(ddp, data[rank], accumulate=3)
    np.testing.assert_allclose(flat_params(ddp.module), reference(data, size, True,
                                                                  accumulate=3),
                               atol=1e-6, err_msg="join with no_sync accumulation")
    # DDP still works as before after the join context closed (no join all-reduces left)
    x, y = data[0][0]
    loss_of(ddp, x.to(DEVICE), y.to(DEVICE)).backward()
    assert not ddp._join_config.enable


def check_unused_parameters_and_buffers(rank: int, size: int) -> None:
    """Unused-parameter masks are shadowed; buffers come from a training rank every step and
    from the last joiner at the end."""
    gt.manual_seed(rank)
    net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).to(DEVICE)
    heads = TwoHeads().to(DEVICE)
    body = nn.ModuleDict({"net": net, "heads": heads})

    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = body

        def forward(self, x: gt.Tensor, use_b: bool) -> gt.Tensor:
            return self.body["heads"](self.body["net"](x), use_b)

    ddp = DDP(Both(), find_unused_parameters=True)
    opt = gt.optim.SGD(ddp.parameters(), lr=0.1)
    gen = gt.Generator().manual_seed(rank)
    with ddp.join():
        for step in range(1 + 2 * rank):
            opt.zero_grad()
            x = gt.randn(5, 4, generator=gen).to(DEVICE) + rank
            ddp(x, use_b=step % 2 == 1).square().mean().backward()
            opt.step()
    same_on_every_rank(flat_params(ddp.module), "parameters (unused parameters, join)")
    buffers = np.concatenate([b.cpu().numpy().ravel() for b in ddp.module.buffers()])
    same_on_every_rank(buffers, "buffers after join")
    assert int(ddp.module.body["net"][1].num_batches_tracked) == 1 + 2 * (size - 1)


class Counter(Joinable):
    """PyTorch's test joinable: all-reduces a one per iteration (a zero once joined)."""

    def __init__(self, device: Any, group: Any) -> None:
        super().__init__()
        self.device, self.group, self.iterations = device, group, 0

    def step(self) -> None:
        Join.notify_join_context(self)
        ones = gt.ones(1, device=self.device)
        dist.all_reduce(ones, group=self.group)
        self.iterations += int(ones.item())

    def join_hook(self, **kwargs: Any) -> JoinHook:
        counter = self

        class Hook(JoinHook):
            def main_hook(self) -> None:
                zeros = gt.zeros(1, device=counter.device)
                dist.all_reduce(zeros, group=counter.group)
                counter.iterations += int(zeros.item())

            def post_hook(self, is_last_joiner: bool) -> None:
                counter.last = is_last_joiner
        return Hook()

    @property
    def join_device(self) -> Any:
        return self.device

    @property
    def join_process_group(self) -> Any:
        return self.group


def check_generic_join(rank: int, size: int, data: list) -> None:
    ddp = DDP(model(DEVICE))
    counter = Counter(gt.device(DEVICE), ddp.process_group)
    opt = gt.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    with Join([ddp, counter]):
        for x, y in data[rank]:
            opt.zero_grad()
            loss_of(ddp, x.to(DEVICE), y.to(DEVICE)).backward()
            opt.step()
            counter.step()
    # every rank counts the ranks training at each step: sum over steps of |active|
    assert counter.iterations == sum(2 + r for r in range(size)), counter.iterations
    assert counter.last == (rank == size - 1)
    np.testing.assert_allclose(flat_params(ddp.module), reference(data, size, True),
                               atol=1e-6, err_msg="Join([ddp, counter])")
    try:
        Join([])
    except ValueError as e:
        assert "requires at least one joinable" in str(e)
    else:
        raise AssertionError("Join([]) must raise")


def check_throw_on_early_termination(rank: int, size: int, data: list) -> None:
    ddp = DDP(model(DEVICE))
    try:
        train(ddp, data[rank], throw_on_early_termination=True)
    except RuntimeError as e:
        message = str(e)
    else:
        raise AssertionError("throw_on_early_termination must raise on every rank")
    expected = f"Rank {rank} exhausted all inputs." if rank == 0 else \
        "Detected at least one rank that exhausted inputs. Throwing across all ranks."
    assert message == expected, message
    assert not ddp._join_config.enable
    dist.barrier()


def main() -> None:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    data = inputs(size)
    check_against_reference(rank, size, data)
    check_unused_parameters_and_buffers(rank, size)
    check_generic_join(rank, size, data)
    check_throw_on_early_termination(rank, size, data)
    if rank == 0:
        print(f"ok join world size {size}, device {DEVICE}")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
