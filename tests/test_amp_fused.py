"""GradScaler's fused ops against PyTorch's CPU kernels: ``_amp_foreach_non_finite_check_and_
unscale_`` (inf/NaN/finite mixes, many tensors of different sizes and layouts, every float
dtype, one kernel per device and dtype) and ``_amp_update_scale_`` (growth, backoff, overflow
guard), and GradScaler training steps built on them."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.kernels.cpu import amp as cpu_amp
from gputensor.kernels.cuda import device as cuda_device

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "bfloat16"]

# (shape of the base tensor, view taken of it): contiguous, transposed, strided slices,
# permuted, offset, 0-d, empty, and sizes that straddle the CUDA kernel's 4096-element chunks.
LAYOUTS = [
    ((7,), lambda x: x),
    ((3, 5), lambda x: x.t()),
    ((4, 6), lambda x: x[:, ::2]),
    ((2, 3, 4), lambda x: x.permute(2, 0, 1)),
    ((5, 4), lambda x: x[1:]),
    ((3, 4, 5), lambda x: x[..., 1]),
    ((), lambda x: x),
    ((0, 3), lambda x: x),
    ((4100,), lambda x: x),
    ((3, 3000), lambda x: x[:, 1::3]),
    ((1,), lambda x: x),
    ((6, 1, 4), lambda x: x.transpose(0, 2)),
]


def _values(rng: np.random.Generator, shape: tuple, poison: str) -> np.ndarray:
    a = (rng.standard_normal(shape) * 300).astype(np.float32)
    if a.size and poison != "finite":
        flat = a.reshape(-1)
        at = rng.integers(0, flat.size, 2)
        flat[at] = {"inf": [np.inf, -np.inf], "nan": [np.nan, 1.0], "both": [np.nan, np.inf]}[
            poison]
    return a


def _run_both(device: str, dtype: str, arrays: list, views: list, inv: float, found: float):
    """The op on gputensor (device) and torch (CPU) over the same data; returns both bases
    and found_inf values as float64 arrays."""
    out = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        dt = getattr(lib, dtype)
        bases = [lib.tensor(a, device=dev).to(dt) for a in arrays]
        grads = [view(b) for b, view in zip(bases, views, strict=True)]
        found_inf = lib.full((1,), found, device=dev)
        inv_scale = lib.full((1,), inv, device=dev)
        lib._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        out.append(([b.cpu().double().numpy() for b in bases],
                    float(found_inf.cpu().item())))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("poison", ["finite", "inf", "nan", "both"])
def test_unscale_matches_torch(device, dtype, poison):
    rng = np.random.default_rng(DTYPES.index(dtype) * 10 + len(poison))
    arrays = [_values(rng, shape, "finite") for shape, _ in LAYOUTS]
    # Only one tensor in the middle of the list holds the inf/NaN.
    arrays[3] = _values(rng, LAYOUTS[3][0], poison)
    views = [view for _, view in LAYOUTS]
    for inv in (0.25, 1.0 / 3.0, 1.0, 2.0 ** -16):
        (got, got_found), (want, want_found) = _run_both(device, dtype, arrays, views, inv, 0.0)
        assert got_found == want_found == (0.0 if poison == "finite" else 1.0)
        for g, w in zip(got, want, strict=True):  # views' untouched elements included
            np.testing.assert_array_equal(g, w)


def test_found_inf_is_only_ever_set(device):
    """Pre-zeroing is the caller's job: a set flag stays set after finite grads."""
    arrays, views = [np.ones(3, np.float32)], [lambda x: x]
    (got, got_found), (want, want_found) = _run_both(device, "float32", arrays, views, 0.5, 1.0)
    assert got_found == want_found == 1.0
    np.testing.assert_array_equal(got[0], want[0])


def test_large_group_runs_parallel_and_matches(device):
    """Past the CPU kernel's parallel threshold (and many CUDA chunks)."""
    rng = np.random.default_rng(5)
    sizes = [70000, 1, 66000, 37, 4096]
    arrays = [_values(rng, (n,), "finite") for n in sizes]
    arrays[2][12345] = np.nan
    assert sum(sizes) >= cpu_amp.PARALLEL_THRESHOLD
    views = [lambda x: x] * len(sizes)
    (got, got_found), (want, want_found) = _run_both(device, "float32", arrays, views, 0.125,
                                                     0.0)
    assert got_found == want_found == 1.0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_mixed_dtypes_and_empty_list(device):
    rng = np.random.default_rng(3)
    arrays = [_values(rng, (5,), "finite") for _ in range(4)]
    results = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        grads = [lib.tensor(a, device=dev).to(getattr(lib, dt))
                 for a, dt in zip(arrays, ["float32", "float64", "float16", "float32"],
                                  strict=True)]
        grads[1][2] = float("inf")
        found = lib.zeros(1, device=dev)
        lib._amp_foreach_non_finite_check_and_unscale_(grads, found, lib.full((1,), 0.5,
                                                                              device=dev))
        lib._amp_foreach_non_finite_check_and_unscale_([], found, lib.full((1,), 0.5,
                                                                          device=dev))
        results.append(([g.cpu().double().numpy() for g in grads], float(found.cpu().item())))
    (got, gf), (want, wf) = results
    assert gf == wf == 1.0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def _count_unscale_kernels(monkeypatch, device: str) -> list:
    """Record every unscale kernel the op runs: CUDA launches, or CPU Numba calls."""
    seen: list = []
    if device.startswith("cuda"):
        def observe(src, name, grid, block, shared, run):
            if name.startswith("amp_foreach_unscale"):
                seen.append(name)
            run()
        monkeypatch.setattr(cuda_device, "launch_observer", observe)
    else:
        for fn in ("_unscale_serial", "_unscale_parallel"):
            real = getattr(cpu_amp, fn)
            monkeypatch.setattr(cpu_amp, fn,
                                lambda *a, _real=real, _fn=fn: (seen.append(_fn), _real(*a)))
    return seen


def test_one_kernel_per_dtype_group(device, monkeypatch):
    grads = [gt.randn(n, device=device) for n in (3, 4000, 1, 17)] + \
        [gt.randn(4, 5, device=device, dtype=gt.float16).t(), gt.randn(9, device=device,
                                                                      dtype=gt.float16)]
    seen = _count_unscale_kernels(monkeypatch, device)
    gt._amp_foreach_non_finite_check_and_unscale_(grads, gt.zeros(1, device=device),
                                                  gt.full((1,), 0.5, device=device))
    assert len(seen) == 2  # float32 and float16, whatever the number of tensors
    if device.startswith("cuda"):
        assert sorted(seen) == ["amp_foreach_unscale_f16", "amp_foreach_unscale_f32"]


def test_errors_match_torch(device):
    cases = [
        (lambda lib, d: ([lib.ones(2, dtype=lib.int32, device=d)], lib.zeros(1, device=d),
                         lib.ones(1, device=d)), NotImplementedError, "not implemented for 'Int'"),
        (lambda lib, d: ([lib.ones(2, device=d)], lib.zeros(2, device=d),
                         lib.ones(1, device=d)), RuntimeError, "found_inf must be a 1-element"),
        (lambda lib, d: ([lib.ones(2, device=d)], lib.zeros(1, device=d),
                         lib.ones(1, device=d, dtype=lib.float64)), RuntimeError,
         "inv_scale must be a float tensor."),
        (lambda lib, d: ([lib.ones(3, device=d).expand(2, 3)], lib.zeros(1, device=d),
                         lib.ones(1, device=d)), RuntimeError,
         "more than one element of the written-to tensor refers to a single memory location"),
    ]
    for make, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            torch._amp_foreach_non_finite_check_and_unscale_(*make(torch, "cpu"))
        with pytest.raises(exc, match=msg):
            gt._amp_foreach_non_finite_check_and_unscale_(*make(gt, device))
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor."):
        gt._amp_update_scale_(gt.ones(1, device=device), gt.zeros(1, device=device),
                              gt.zeros(1, device=device), 2.0, 0.5, 3)
    with pytest.raises(RuntimeError, match="current_scale must be a 1-element tensor."):
        gt._amp_update_scale_(gt.ones(2, device=device),
                              gt.zeros(1, dtype=gt.int32, device=device),
                              gt.zeros(1, device=device), 2.0, 0.5, 3)


@pytest.mark.parametrize("start,growth,backoff,interval", [
    (65536.0, 2.0, 0.5, 2), (3.0, 1.7, 0.3, 1), (3.0e38, 2.0, 0.5, 1), (1.0, 1.0001, 0.9, 3)])
def test_update_scale_matches_torch(device, start, growth, backoff, interval):
    flags = [0.0, 0.0, 1.0, 0.0, float("nan"), 0.0, 0.0, 0.0, 3.0, 0.0, 0.0]
    history = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        scale = lib.full((), start, device=dev)
        tracker = lib.zeros((), dtype=lib.int32, device=dev)
        seq = []
        for f in flags:
            out = lib._amp_update_scale_(scale, tracker, lib.full((1,), f, device=dev), growth,
                                         backoff, interval)
            assert out is scale
            seq.append((float(scale.cpu().item()), int(tracker.cpu().item())))
        history.append(seq)
    assert history[0] == history[1]


# -- GradScaler on the fused ops ------------------------------------------------------------------
def _train(lib, device: str, steps: list[float]) -> tuple[list, list, int]:
    """A two-layer MLP trained through GradScaler; ``steps`` scales the loss per step (inf
    makes that step's gradients overflow). Returns the parameters, the scale and growth
    tracker after each step, and the unscale kernels of the last step."""
    lib.manual_seed(0)
    gen = np.random.default_rng(0)
    w1 = lib.tensor(gen.standard_normal((8, 4)).astype(np.float32), device=device,
                    requires_grad=True)
    b1 = lib.tensor(gen.standard_normal(8).astype(np.float32), device=device,
                    requires_grad=True)
    w2 = lib.tensor(gen.standard_normal((1, 8)).astype(np.float32), device=device,
                    requires_grad=True)
    x = lib.tensor(gen.standard_normal((16, 4)).astype(np.float32), device=device)
    y = lib.tensor(gen.standard_normal((16, 1)).astype(np.float32), device=device)
    opt = lib.optim.SGD([w1, b1, w2], lr=0.05, momentum=0.9)
    scaler = lib.amp.GradScaler(device.split(":")[0], init_scale=2.0 ** 10, growth_interval=2)
    trace = []
    for factor in steps:
        opt.zero_grad()
        h = lib.relu(x @ w1.t() + b1)
        loss = ((h @ w2.t() - y) ** 2).mean() * factor
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        trace.append(([p.detach().cpu().numpy().copy() for p in (w1, b1, w2)],
                      scaler.get_scale(), scaler._get_growth_tracker()))
    return trace


def test_grad_scaler_training_matches_torch(device, monkeypatch):
    steps = [1.0, 1.0, float("inf"), 1.0, 1.0, 1.0, float("nan"), 1.0]
    want = _train(torch, "cpu", steps)
    seen = _count_unscale_kernels(monkeypatch, device)
    got = _train(gt, device, steps)
    assert len(seen) == len(steps)  # one fused kernel per step for the three float32 grads
    for (gp, gs, gtr), (wp, ws, wtr) in zip(got, want, strict=True):
        assert (gs, gtr) == (ws, wtr)
        for g, w in zip(gp, wp, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_grad_scaler_sparse_and_dense_grads_match_torch(device):
    """Sparse gradients keep their own path next to the fused dense one."""
    results = []
    for lib, dev in ((gt, device), (torch, "cpu")):
        emb = lib.nn.Embedding(5, 3, sparse=True).to(dev)
        lin = lib.nn.Linear(3, 1).to(dev)
        with lib.no_grad():
            emb.weight.copy_(lib.arange(15.0, device=dev).reshape(5, 3))
            lin.weight.fill_(0.5)
            lin.bias.fill_(-1.0)
        opt = lib.optim.SGD([*emb.parameters(), *lin.parameters()], lr=0.1)
        scaler = lib.amp.GradScaler(dev.split(":")[0], init_scale=4.0, growth_interval=1)
        trace = []
        for factor in (1.0, float("inf"), 1.0):
            opt.zero_grad()
            loss = lin(emb(lib.tensor([1, 3, 1], device=dev))).sum() * factor
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            trace.append(([p.detach().cpu().numpy().copy() for p in opt.param_groups[0]["params"]],
                          scaler.get_scale()))
        results.append(trace)
    for (gp, gs), (wp, ws) in zip(*results, strict=True):
        assert gs == ws
        for g, w in zip(gp, wp, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
