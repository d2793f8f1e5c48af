"""CUDA paths that landed after the last run on a real GPU (2026-11-26): the fused RNN
recurrences (kernels/cuda/rnn.cu), CUDA graph capture and gt.compile's reduce-overhead replay,
cuFFT/cuSOLVER behind gt.fft/gt.linalg, the special functions' CUDA C, DLPack with PyTorch's
CUDA tensors and DDP on NCCL. Each compares the GPU with the CPU backend (or SciPy)."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt


def _close(gpu: gt.Tensor, cpu: gt.Tensor, tol: float) -> None:
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().cpu().numpy(), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_fused_recurrence_matches_the_cpu(mode: str) -> None:
    gt.manual_seed(0)
    cpu = getattr(gt.nn, mode)(12, 16, num_layers=2, bidirectional=True, batch_first=True)
    gpu = getattr(gt.nn, mode)(12, 16, num_layers=2, bidirectional=True,
                               batch_first=True).cuda()
    gpu.load_state_dict(cpu.state_dict())
    x = gt.randn(3, 9, 12, dtype=gt.float32)
    xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
    outc, outg = cpu(xc)[0], gpu(xg)[0]
    _close(outg, outc, 1e-5)
    outc.square().sum().backward()
    outg.square().sum().backward()
    _close(xg.grad, xc.grad, 1e-4)
    for (name, pc), pg in zip(cpu.named_parameters(), gpu.parameters(), strict=True):
        assert pg.grad is not None, name
        _close(pg.grad, pc.grad, 1e-4)


def test_cuda_graph_capture_and_replay() -> None:
    x = gt.randn(256, 64, device="cuda")
    w = gt.randn(64, 32, device="cuda")
    s = gt.cuda.Stream()
    s.wait_stream(gt.cuda.current_stream())
    with gt.cuda.stream(s):  # warm-up outside the capture, as PyTorch's recipe
        (x @ w).relu().sum(0)
    gt.cuda.current_stream().wait_stream(s)
    g = gt.cuda.CUDAGraph()
    with gt.cuda.graph(g):
        y = (x @ w).relu().sum(0) * 2 + 1
    for _ in range(2):
        x.copy_(gt.randn(256, 64, device="cuda"))
        g.replay()
        gt.cuda.synchronize()
        want = (x.cpu() @ w.cpu()).relu().sum(0) * 2 + 1
        _close(y, want, 1e-4)


def _tiny_step(model: gt.nn.Module, opt: gt.optim.Optimizer, x: gt.Tensor,
               y: gt.Tensor) -> gt.Tensor:
    opt.zero_grad()
    loss = gt.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compiled_training_matches_eager(mode: str | None) -> None:
    def build() -> gt.nn.Module:
        gt.manual_seed(0)
        return gt.nn.Sequential(gt.nn.Linear(20, 64), gt.nn.GELU(), gt.nn.LayerNorm(64),
                                gt.nn.Linear(64, 5)).cuda()
    x = gt.randn(32, 20, device="cuda")
    y = gt.randint(0, 5, (32,), device="cuda")
    eager, comp = build(), build()
    f = gt.compile(comp, mode=mode)
    opt_e = gt.optim.AdamW(eager.parameters(), lr=1e-2)
    opt_c = gt.optim.AdamW(comp.parameters(), lr=1e-2)
    for _ in range(4):
        le = _tiny_step(eager, opt_e, x, y)
        lc = _tiny_step(f, opt_c, x, y)
        assert abs(le.item() - lc.item()) < 1e-5
    for pe, pc in zip(eager.parameters(), comp.parameters(), strict=True):
        _close(pc, pe, 1e-5)


def test_fft_on_cufft_matches_the_cpu() -> None:
    x = gt.randn(4, 96, dtype=gt.float64)
    z = gt.randn(6, 10, dtype=gt.complex128)
    xg, zg = x.cuda(), z.cuda()
    _close(gt.fft.rfft(xg, norm="ortho"), gt.fft.rfft(x, norm="ortho"), 1e-10)
    _close(gt.fft.irfft(gt.fft.rfft(xg), n=96), x, 1e-10)
    _close(gt.fft.fft2(zg), gt.fft.fft2(z), 1e-10)
    _close(gt.fft.ihfft(xg), gt.fft.ihfft(x), 1e-10)
    w = gt.hann_window(64, dtype=gt.float64)
    _close(gt.stft(xg, 64, hop_length=16, window=w.cuda(), return_complex=True),
           gt.stft(x, 64, hop_length=16, window=w, return_complex=True), 1e-10)
    xg.requires_grad_()
    gt.fft.rfft(xg).abs().sum().backward()
    xc = x.clone().requires_grad_()
    gt.fft.rfft(xc).abs().sum().backward()
    _close(xg.grad, xc.grad, 1e-8)


@pytest.mark.parametrize("dtype", [gt.float32, gt.complex64, gt.float64])
def test_batched_factorizations_in_place_match_the_cpu(dtype) -> None:
    """kernels/cuda/ops/lapack_batched.py: potrfBatched (potrf above order 64), getrfBatched
    and getrsBatched on the outputs, info from lapack.cu / getrfBatched."""
    gt.manual_seed(2)
    tol = 1e-4 if dtype in (gt.float32, gt.complex64) else 1e-9
    for batch, n in ((256, 8), (2, 100)):
        a = gt.randn(batch, n, n, dtype=dtype)
        spd = a @ a.mH / n + gt.eye(n, dtype=dtype)
        g = spd.cuda()
        for upper in (False, True):
            _close(gt.linalg.cholesky(g, upper=upper), gt.linalg.cholesky(spd, upper=upper), tol)
        bad = spd.clone()
        bad[1, 3, 3] = -5
        assert gt.linalg.cholesky_ex(bad.cuda()).info.tolist() == \
            gt.linalg.cholesky_ex(bad).info.tolist()
        b = gt.randn(batch, n, 3, dtype=dtype)
        _close(gt.linalg.solve(g, b.cuda()), gt.linalg.solve(spd, b), tol * 10)
        _close(gt.linalg.inv(g), gt.linalg.inv(spd), tol * 10)
    if dtype is not gt.complex64:
        x, w = gt.randn(2, 4000, dtype=dtype), gt.hann_window(256, dtype=dtype)
        _close(gt.stft(x.cuda(), 256, 64, window=w.cuda(), return_complex=True),
               gt.stft(x, 256, 64, window=w, return_complex=True), tol * 10)


def test_linalg_on_cusolver_matches_the_cpu() -> None:
    gt.manual_seed(1)
    a = gt.randn(3, 7, 7, dtype=gt.float64)
    spd = a @ a.mT + 7 * gt.eye(7, dtype=gt.float64)
    b = gt.randn(3, 7, 2, dtype=gt.float64)
    ag, spdg, bg = a.cuda(), spd.cuda(), b.cuda()
    _close(gt.linalg.solve(ag, bg), gt.linalg.solve(a, b), 1e-9)
    _close(gt.linalg.cholesky(spdg), gt.linalg.cholesky(spd), 1e-9)
    _close(gt.linalg.inv(ag), gt.linalg.inv(a), 1e-8)
    _close(gt.linalg.det(ag), gt.linalg.det(a), 1e-9)
    _close(gt.linalg.eigvalsh(spdg), gt.linalg.eigvalsh(spd), 1e-9)
    _close(gt.linalg.svdvals(ag), gt.linalg.svdvals(a), 1e-9)
    q, r = gt.linalg.qr(ag)
    _close(q @ r, a, 1e-9)
    _close(q.mT @ q, gt.eye(7, dtype=gt.float64).expand(3, 7, 7), 1e-9)
    u, s, vh = gt.linalg.svd(ag, full_matrices=False)
    _close(u @ gt.diag_embed(s) @ vh, a, 1e-9)
    with pytest.raises(gt.linalg.LinAlgError):
        gt.linalg.cholesky(-spdg)
    # info is LAPACK's first exactly zero pivot of U, small and large (a singular inverse
    # came back finite from CuPy, with info 0)
    for n in (3, 70):
        sing = np.tile(np.eye(n), (3, 1, 1))
        sing[1, 1, 1] = 0
        sing[2] = 0
        want = gt.linalg.inv_ex(gt.tensor(sing)).info.tolist()
        assert want == [0, 2, 1]
        assert gt.linalg.inv_ex(gt.tensor(sing, device="cuda")).info.tolist() == want
        rhs = gt.ones(3, n, 1, dtype=gt.float64, device="cuda")
        assert gt.linalg.solve_ex(gt.tensor(sing, device="cuda"), rhs).info.tolist() == want
        with pytest.raises(gt.linalg.LinAlgError, match="Batch element 1"):
            gt.linalg.inv(gt.tensor(sing, device="cuda"))
    ag.requires_grad_()
    gt.linalg.solve(ag, bg).sum().backward()
    ac = a.clone().requires_grad_()
    gt.linalg.solve(ac, b).sum().backward()
    _close(ag.grad, ac.grad, 1e-8)


@pytest.mark.parametrize("name", ["erfinv", "lgamma", "digamma", "i0", "special.ndtri",
                                  "special.erfcx", "special.i1e", "special.bessel_j0"])
def test_special_functions_match_scipy(name: str) -> None:
    scipy_special = pytest.importorskip("scipy.special")
    fn = gt
    for part in name.split("."):
        fn = getattr(fn, part)
    ref = {"erfinv": "erfinv", "lgamma": "gammaln", "digamma": "digamma", "i0": "i0",
           "special.ndtri": "ndtri", "special.erfcx": "erfcx", "special.i1e": "i1e",
           "special.bessel_j0": "j0"}[name]
    lo, hi = {"erfinv": (-0.999, 0.999), "special.ndtri": (1e-6, 1 - 1e-6)}.get(name, (0.1, 30))
    x = np.linspace(lo, hi, 4001)
    got = fn(gt.tensor(x, device="cuda")).cpu().numpy()
    np.testing.assert_allclose(got, getattr(scipy_special, ref)(x), rtol=1e-10, atol=1e-12)


def test_dlpack_with_torch_cuda_tensors() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    t = gt.arange(6.0, device="cuda").reshape(2, 3)
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == t.data_ptr() and tt.is_cuda
    tt[0, 0] = 7.0
    torch.cuda.synchronize()
    assert t[0, 0].item() == 7.0
    back = gt.from_dlpack(torch.ones(4, device="cuda") * 3)
    assert back.device.type == "cuda" and back.tolist() == [3.0] * 4


def test_ddp_on_nccl_world_size_one_matches_plain_training(unused_port: int) -> None:
    import gputensor.distributed as dist
    if not dist.is_nccl_available():
        pytest.skip("no NCCL library for CuPy on this machine (the nvidia-nccl wheel)")
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{unused_port}", rank=0,
                            world_size=1)
    try:
        def build() -> gt.nn.Module:
            gt.manual_seed(0)
            return gt.nn.Sequential(gt.nn.Linear(10, 32), gt.nn.ReLU(),
                                    gt.nn.Linear(32, 4)).cuda()
        plain, wrapped = build(), build()
        ddp = gt.nn.parallel.DistributedDataParallel(wrapped, device_ids=[0],
                                                     bucket_cap_mb=0.001)
        x = gt.randn(16, 10, device="cuda")
        y = gt.randint(0, 4, (16,), device="cuda")
        opt_p = gt.optim.SGD(plain.parameters(), lr=0.1)
        opt_d = gt.optim.SGD(ddp.parameters(), lr=0.1)
        for _ in range(3):
            _tiny_step(plain, opt_p, x, y)
            _tiny_step(ddp, opt_d, x, y)
        for pp, pd in zip(plain.parameters(), wrapped.parameters(), strict=True):
            _close(pd, pp, 1e-6)
    finally:
        dist.destroy_process_group()
