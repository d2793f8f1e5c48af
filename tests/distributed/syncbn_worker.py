"""Run under ``mpiexec -n N``: SyncBatchNorm on each rank's slice of a global batch equals
BatchNorm on the whole batch (outputs, running statistics, input gradients; weight and bias
gradients summed over ranks), and convert_sync_batchnorm keeps the state."""

from __future__ import annotations

import sys

import numpy as np

import gputensor as gt
import gputensor.distributed as dist
from gputensor import nn


def main(device: str) -> None:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    gen = gt.Generator().manual_seed(7)
    per = 3
    x_all = (gt.randn(per * size, 4, 5, 5, generator=gen) * 3 + 1).to(device)
    dy_all = gt.randn(per * size, 4, 5, 5, generator=gen).to(device)
    ref = nn.BatchNorm2d(4).to(device)
    with gt.no_grad():
        ref.weight.copy_(gt.linspace(0.5, 2.0, 4))
        ref.bias.copy_(gt.linspace(-1.0, 1.0, 4))
    sync = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(4)).to(device))
    sync[0].load_state_dict(ref.state_dict())
    assert isinstance(sync[0], nn.SyncBatchNorm)
    xr = x_all.clone().requires_grad_(True)
    ref(xr).backward(dy_all)
    mine = x_all[rank * per:(rank + 1) * per].clone().requires_grad_(True)
    out = sync(mine)
    out.backward(dy_all[rank * per:(rank + 1) * per])
    with gt.no_grad():
        want_out = ref.eval()(x_all)[rank * per:(rank + 1) * per]  # eval: uses updated stats
    ref.train()
    np.testing.assert_allclose(sync[0].running_mean.cpu().numpy(),
                               ref.running_mean.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(sync[0].running_var.cpu().numpy(),
                               ref.running_var.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(mine.grad.cpu().numpy(),
                               xr.grad[rank * per:(rank + 1) * per].cpu().numpy(), atol=1e-5)
    for name in ("weight", "bias"):
        g = getattr(sync[0], name).grad.clone()
        dist.all_reduce(g)
        np.testing.assert_allclose(g.cpu().numpy(), getattr(ref, name).grad.cpu().numpy(),
                                   atol=1e-4)
    # the training output is normalised with the global batch statistics
    gmean = x_all.mean((0, 2, 3)).reshape(1, 4, 1, 1)
    gvar = x_all.var((0, 2, 3), correction=0).reshape(1, 4, 1, 1)
    expect = (x_all - gmean) / (gvar + 1e-5).sqrt() * ref.weight.reshape(1, 4, 1, 1) + \
        ref.bias.reshape(1, 4, 1, 1)
    np.testing.assert_allclose(out.detach().cpu().numpy(),
                               expect[rank * per:(rank + 1) * per].detach().cpu().numpy(),
                               atol=1e-4)
    assert want_out.shape == out.shape
    if rank == 0:
        print(f"ok syncbn world size {size}, device {device}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
