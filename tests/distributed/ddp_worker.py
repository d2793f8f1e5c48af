"""Run under ``mpiexec -n N``: DistributedDataParallel against a single-process run on the
global batch (same parameters after 5 SGD steps to 1e-6, bit-identical across ranks),
no_sync accumulation, unused parameters and gradient_as_bucket_view."""

from __future__ import annotations

import sys

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn
from gputensor.demo import build_model
from gputensor.nn.parallel import DistributedDataParallel as DDP


def batches(steps: int, per_rank: int, size: int) -> list[tuple[gt.Tensor, gt.Tensor]]:
    gen = gt.Generator().manual_seed(1234)
    return [(gt.randn(per_rank * size, 1, 8, 8, generator=gen),
             gt.randint(0, 10, (per_rank * size,), generator=gen)) for _ in range(steps)]


def flat_params(model: nn.Module) -> np.ndarray:
    return np.concatenate([p.detach().cpu().numpy().ravel() for p in model.parameters()])


def same_on_every_rank(values: np.ndarray, what: str) -> None:
    got = [None] * dist.get_world_size()
    dist.all_gather_object(got, values.tobytes())
    assert all(g == got[0] for g in got), f"{what} differ between ranks"


def train(model: nn.Module, data: list, rank: int, size: int, per_rank: int,
          accumulate: int = 1, no_sync: bool = False) -> None:
    opt = gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        opt.zero_grad()
        xs = x[rank * per_rank:(rank + 1) * per_rank] if rank >= 0 else x
        ys = y[rank * per_rank:(rank + 1) * per_rank] if rank >= 0 else y
        chunks = list(zip(xs.chunk(accumulate), ys.chunk(accumulate), strict=True))
        for i, (cx, cy) in enumerate(chunks):
            ctx = model.no_sync() if no_sync and i < len(chunks) - 1 else _null()
            with ctx:
                loss = nn.functional.cross_entropy(model(cx), cy) / accumulate
                loss.backward()
        opt.step()


class _null:
    def __enter__(self) -> None:
        pass

    def __exit__(self, *a: object) -> None:
        pass


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head_a, self.head_b = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

    def forward(self, x: gt.Tensor, use_b: bool) -> gt.Tensor:
        h = self.body(x).relu()
        return self.head_b(h) if use_b else self.head_a(h)


def main(device: str) -> None:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    per_rank, steps = 4, 5
    data = [(x.to(device), y.to(device)) for x, y in batches(steps, per_rank, size)]
    for kw in ({}, {"gradient_as_bucket_view": True, "bucket_cap_mb": 0.01}):
        gt.manual_seed(rank)  # different inits: DDP must broadcast rank 0's
        ddp = DDP(build_model().to(device), **kw)
        gt.manual_seed(0)
        single = build_model().to(device)
        train(ddp, data, rank, size, per_rank)
        train(single, data, -1, size, per_rank)
        same_on_every_rank(flat_params(ddp.module), "parameters")
        np.testing.assert_allclose(flat_params(ddp.module), flat_params(single), atol=1e-6,
                                   err_msg=f"DDP {kw} vs single process")
        assert len(ddp.reducer._buckets) > (1 if kw else 0)
    # no_sync: two micro-batches, the first without communication
    gt.manual_seed(0)
    ddp = DDP(build_model().to(device))
    gt.manual_seed(0)
    single = build_model().to(device)
    train(ddp, data, rank, size, per_rank, accumulate=2, no_sync=True)
    train(single, data, -1, size, per_rank, accumulate=2)
    np.testing.assert_allclose(flat_params(ddp.module), flat_params(single), atol=1e-6,
                               err_msg="no_sync accumulation")
    # find_unused_parameters: rank 1 uses head_b, the others head_a; head_b is used somewhere
    gt.manual_seed(0)
    model = DDP(TwoHeads().to(device), find_unused_parameters=True)
    x = gt.ones(3, 4, device=device)
    model(x, use_b=rank == 1).sum().backward()
    heads = {name: p.grad for name, p in model.module.named_parameters()}
    assert heads["head_a.weight"] is not None and heads["head_b.weight"] is not None
    if size > 1:  # only one rank fed head_b: the average is its gradient / size
        ref = TwoHeads().to(device)
        ref.load_state_dict(model.module.state_dict())
        ref(x, use_b=True).sum().backward()
        np.testing.assert_allclose(heads["head_b.weight"].cpu().numpy(),
                                   ref.head_b.weight.grad.cpu().numpy() / size, atol=1e-6)
    # a parameter nobody uses keeps grad None
    model = DDP(TwoHeads().to(device), find_unused_parameters=True)
    model(x, use_b=False).sum().backward()
    assert model.module.head_b.weight.grad is None
    # without find_unused_parameters an unused parameter is an error at the next forward
    model = DDP(TwoHeads().to(device))
    model(x, use_b=False).sum().backward()
    try:
        model(x, use_b=False)
    except RuntimeError as e:
        assert "Expected to have finished reduction in the prior iteration" in str(e)
    else:
        raise AssertionError("expected the unfinished-reduction error")
    if rank == 0:
        print(f"ok ddp world size {size}, device {device}")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
