"""Run as one of N processes (``mpiexec -n N``): DistributedDataParallel with ``gt.compile``
(the DDP-wrapped model, the wrapped module, ``Module.compile()`` in place), with
``gt.autocast`` (CPU, bfloat16) and with ``clip_grad_norm_`` after backward.

Compiled DDP's gradients equal eager DDP's to 1e-6 at every step (DDP's forward runs eagerly
after one graph-break warning, the wrapped module replays a captured graph); under autocast
the gradients are reduced in the parameters' dtype (float32) and equal the average of the
ranks' local autocast gradients computed in one process; clipping after backward matches a
single process clipping the global batch's gradient."""

from __future__ import annotations

import sys
import warnings

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn
from gputensor._compile.compiled import CompiledFunction
from gputensor.nn.parallel import DistributedDataParallel as DDP
from tests.distributed.ddp_worker import TwoHeads, flat_params, same_on_every_rank

PER_RANK, STEPS = 4, 3


def model() -> nn.Module:
    gt.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))


def global_batches(size: int) -> list[tuple[gt.Tensor, gt.Tensor]]:
    gen = gt.Generator().manual_seed(11)
    return [(gt.randn(PER_RANK * size, 6, generator=gen),
             gt.randint(0, 3, (PER_RANK * size,), generator=gen)) for _ in range(STEPS)]


def shard(t: gt.Tensor, rank: int) -> gt.Tensor:
    return t[rank * PER_RANK:(rank + 1) * PER_RANK]


def grads(net: nn.Module) -> np.ndarray:
    return np.concatenate([p.grad.numpy().ravel() for p in net.parameters()])


def step_grads(net: nn.Module, x: gt.Tensor, y: gt.Tensor, opt: gt.optim.Optimizer
               ) -> np.ndarray:
    opt.zero_grad()
    nn.functional.cross_entropy(net(x), y).backward()
    g = grads(net)
    opt.step()
    return g


def check_compile(rank: int, size: int, data: list) -> None:
    """gt.compile(DDP(m)), DDP(gt.compile(m)), DDP(m).compile() and both compiled against
    eager DDP."""
    eager = DDP(model())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outer = gt.compile(DDP(model()))
        inner = DDP(gt.compile(model()))
        in_place = DDP(model())
        in_place.compile()
        nested = gt.compile(DDP(gt.compile(model())))  # the module is not compiled again
        nets = [eager, outer, inner, in_place, nested]
        opts = [gt.optim.SGD(n.parameters(), lr=0.1, momentum=0.9) for n in nets]
        for x, y in data:
            got = [step_grads(n, shard(x, rank), shard(y, rank), o)
                   for n, o in zip(nets, opts, strict=True)]
            names = ("gt.compile(ddp)", "DDP(gt.compile(m))", "ddp.compile()", "nested")
            for name, g in zip(names, got[1:], strict=True):
                np.testing.assert_allclose(g, got[0], atol=1e-6, err_msg=name)
    breaks = [str(w.message) for w in caught if "graph break" in str(w.message)]
    assert len(breaks) == 3 and all("DistributedDataParallel" in b for b in breaks), breaks
    # the wrapped modules replayed captured graphs (one capture each, STEPS - 2 replays)
    compiled = [outer._orig_mod._compiled_module, inner.module.__dict__["_compiled"],
                in_place._compiled_module, nested._orig_mod.module.__dict__["_compiled"]]
    assert nested._orig_mod._compiled_module is None
    assert all(isinstance(c, CompiledFunction) and c.captures == 1 for c in compiled)
    for n in nets:
        same_on_every_rank(flat_params(n), "compiled DDP parameters")
        np.testing.assert_allclose(flat_params(n), flat_params(eager), atol=1e-6)
    # fullgraph=True cannot capture DDP's collectives: a clear GraphBreakError
    full = gt.compile(DDP(model()), fullgraph=True)
    try:
        full(shard(data[0][0], rank))
    except Exception as e:  # noqa: BLE001 - the type is the compiler's
        assert type(e).__name__ == "GraphBreakError" and "DistributedDataParallel" in str(e)
    else:
        raise AssertionError("fullgraph=True must raise at DDP's graph break")
    # unused-parameter detection sees through the compiled module's replay node
    two = gt.compile(DDP(TwoHeads(), find_unused_parameters=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            two.zero_grad()
            two(gt.ones(3, 4), use_b=False).sum().backward()
            assert two._orig_mod.module.head_b.weight.grad is None
            assert two._orig_mod.module.head_a.weight.grad is not None


def check_autocast(rank: int, size: int, data: list) -> None:
    ddp = DDP(model())
    x, y = data[0]
    with gt.autocast("cpu", dtype=gt.bfloat16):
        out = ddp(shard(x, rank))
        assert out.dtype is gt.bfloat16
        loss = nn.functional.cross_entropy(out, shard(y, rank))
    loss.backward()
    assert all(p.grad.dtype is gt.float32 for p in ddp.parameters())
    assert all(b.flat.dtype is gt.float32 for b in ddp.reducer._buckets)
    local = []
    for r in range(size):  # each rank's own autocast gradient, averaged in float32
        net = model()
        with gt.autocast("cpu", dtype=gt.bfloat16):
            part = nn.functional.cross_entropy(net(shard(x, r)), shard(y, r))
        part.backward()
        local.append(grads(net).astype(np.float64))
    np.testing.assert_allclose(grads(ddp), sum(local) / size, atol=1e-6, rtol=1e-6,
                               err_msg="autocast DDP gradients")
    # compiled DDP under autocast: the same gradients as eager DDP under autocast
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comp = gt.compile(DDP(model()))
        for _ in range(3):
            comp.zero_grad()
            with gt.autocast("cpu", dtype=gt.bfloat16):
                part = nn.functional.cross_entropy(comp(shard(x, rank)), shard(y, rank))
            part.backward()
            np.testing.assert_allclose(grads(comp), grads(ddp), atol=1e-6,
                                       err_msg="compiled DDP under autocast")


def check_clip_grad_norm(rank: int, size: int, data: list) -> None:
    ddp, single = DDP(model()), model()
    opt_d = gt.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    opt_s = gt.optim.SGD(single.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        for net, opt, xs, ys in ((ddp, opt_d, shard(x, rank), shard(y, rank)),
                                 (single, opt_s, x, y)):
            opt.zero_grad()
            nn.functional.cross_entropy(net(xs), ys).backward()
            norm = nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.05)
            assert float(norm) > 0.05  # the clipping is engaged
            opt.step()
    same_on_every_rank(flat_params(ddp.module), "clipped DDP parameters")
    np.testing.assert_allclose(flat_params(ddp.module), flat_params(single), atol=1e-6,
                               err_msg="clip_grad_norm_ after DDP's backward")


def main() -> None:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    data = global_batches(size)
    check_compile(rank, size, data)
    check_autocast(rank, size, data)
    check_clip_grad_norm(rank, size, data)
    if rank == 0:
        print(f"ok ddp compile autocast clip world size {size}")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
