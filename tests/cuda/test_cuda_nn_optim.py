"""CUDA backend nn kernels (kernels/cuda/nn.cu: batch/layer/group norm, NLL loss, embedding)
and fused optimizer steps (kernels/cuda/optim.cu), run through the CPU emulator and compared
with the CPU backend on the same inputs.

The shared suites (tests/nn, tests/optim) check these ops against PyTorch through whole models;
this file covers what they do not: sizes that cross block boundaries, (N, C) and (N, C, S)
layouts, 16-bit floats, non-contiguous inputs, error reporting for bad targets/indices read
back from the device, bit-exact optimizer steps, and an NVRTC compile for real GPUs. Every
test calls the private frontends (or the registered kernels) directly, so it needs no CUDA
kernel outside these two files (besides the elementwise copy for ``contiguous``).
"""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops import nn as N
from gputensor._ops._core import empty
from gputensor.kernels.cuda.ops import nn as cuda_nn
from gputensor.kernels.registry import CPU, CUDA
from tests.helpers import synced


@pytest.fixture(autouse=True)
def _needs_cuda(request: pytest.FixtureRequest) -> None:
    """Everything but the NVRTC compile runs kernels, on the emulator (or a GPU)."""
    if not request.node.name.startswith("test_sources_compile") and not gt.cuda.is_available():
        pytest.skip("needs the CUDA emulator (GPUTENSOR_CUDA_EMULATOR=1)")

FLOATS = (gt.float32, gt.float64, gt.float16, gt.bfloat16)
# (rtol, atol) between the backends: sums run in another order on the device, and the layer
# and group norm backward sums its rows in the data's dtype as the CPU does.
TOL = {gt.float32: (2e-5, 2e-5), gt.float64: (1e-12, 1e-12), gt.float16: (2e-2, 2e-2),
       gt.bfloat16: (5e-2, 5e-2)}


def _arr(shape, seed=0, low=-2.0, high=2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def _both(a: np.ndarray, dtype: gt.dtype) -> tuple[gt.Tensor, gt.Tensor]:
    return gt.tensor(a, dtype=dtype), gt.tensor(a, dtype=dtype, device="cuda")


def _np(t: gt.Tensor) -> np.ndarray:
    return np.asarray(t.cpu().numpy()).astype(np.float64)


def _close(got, want, dtype) -> None:
    rtol, atol = TOL[dtype]
    for g, w in zip(got, want, strict=True):
        if g is None:
            assert w is None
            continue
        np.testing.assert_allclose(_np(g), _np(w), rtol=rtol, atol=atol)


# -- batch norm ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(300, 5), (4, 3, 70), (2, 40, 3, 3), (1, 2, 1),
                                   (9000, 3), (2, 3, 5000), (40, 70)])
@pytest.mark.parametrize("split", [False, True])
def test_batch_norm_matches_cpu(dtype, shape, split, monkeypatch):
    """split: channels cut into parts of 16 positions (several blocks per channel)."""
    if split:
        monkeypatch.setattr(cuda_nn, "_BN_MIN_PART", 16)
    c = shape[1]
    (x, xc), (w, wc), (b, bc) = (_both(_arr(shape, 0), dtype), _both(_arr(c, 1), dtype),
                                 _both(_arr(c, 2), dtype))
    (rm, rmc), (rv, rvc) = _both(_arr(c, 3), dtype), _both(_arr(c, 4, 0.5, 1.5), dtype)
    with gt.no_grad():
        want = N._batch_norm([x, w, b], rm, rv, 0.1, 1e-5)
        got = N._batch_norm([xc, wc, bc], rmc, rvc, 0.1, 1e-5)
        _close(got, want, dtype)
        _close((rmc, rvc), (rm, rv), dtype)
        g, gc = _both(_arr(shape, 5), dtype)
        want = N._batch_norm_backward(g, x, w, want[1], want[2], 1e-5)
        got = N._batch_norm_backward(gc, xc, wc, got[1], got[2], 1e-5)
        _close(got, want, dtype)


def test_batch_norm_without_affine_or_stats_noncontiguous():
    a = _arr((6, 8, 5), 7)
    x = gt.tensor(a).transpose(0, 2)[:, ::2]       # (5, 4, 6) strided
    xc = gt.tensor(a, device="cuda").transpose(0, 2)[:, ::2]
    with gt.no_grad():
        want = N._batch_norm([x], None, None, 0.1, 1e-5)
        got = N._batch_norm([xc], None, None, 0.1, 1e-5)
        _close(got, want, gt.float32)
        want = N._batch_norm_backward(x, x, None, want[1], want[2], 1e-5)
        got = N._batch_norm_backward(xc, xc, None, got[1], got[2], 1e-5)
        _close(got, want, gt.float32)


def test_batch_norm_strided_running_stats_updated_in_place():
    x, xc = _both(_arr((7, 4, 3), 0), gt.float32)
    (rm, rmc), (rv, rvc) = _both(_arr(8, 1), gt.float32), _both(_arr(8, 2, 0.5, 1.0), gt.float32)
    with gt.no_grad():
        N._batch_norm([x], rm[::2], rv[1::2], 0.2, 1e-5)
        N._batch_norm([xc], rmc[::2], rvc[1::2], 0.2, 1e-5)
    _close((rmc, rvc), (rm, rv), gt.float32)


def test_batch_norm_float16_input_wider_params():
    """float32 weights, float64 running mean (updated through a float32 scratch copy)."""
    x, xc = _both(_arr((8, 3, 4), 0), gt.float16)
    (w, wc), (rm, rmc) = _both(_arr(3, 1), gt.float32), _both(_arr(3, 2), gt.float64)
    with gt.no_grad():
        want = N._batch_norm([x, w, w], rm, None, 0.3, 1e-5)
        got = N._batch_norm([xc, wc, wc], rmc, None, 0.3, 1e-5)
    assert got[0].dtype is gt.float16 and got[1].dtype is gt.float32
    _close(got, want, gt.float16)
    _close((rmc,), (rm,), gt.float32)


# -- layer and group norm --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,ndim", [((7, 10), 1), ((3, 600), 1), ((2, 3, 4, 5), 2),
                                        ((1500, 3), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_cpu(dtype, shape, ndim, affine):
    norm = shape[len(shape) - ndim:]
    x, xc = _both(_arr(shape, 0), dtype)
    w, wc = _both(_arr(norm, 1), dtype) if affine else (None, None)
    b, bc = _both(_arr(norm, 2), dtype) if affine else (None, None)
    ts, tsc = [x] + ([w, b] if affine else []), [xc] + ([wc, bc] if affine else [])
    with gt.no_grad():
        want = N._layer_norm(ts, ndim, 1e-5)
        got = N._layer_norm(tsc, ndim, 1e-5)
        _close(got, want, dtype)
        g, gc = _both(_arr(shape, 5), dtype)
        want = N._layer_norm_backward(g, x, w, want[1], want[2], ndim, 1e-5)
        got = N._layer_norm_backward(gc, xc, wc, got[1], got[2], ndim, 1e-5)
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 8, 40), 2), ((4, 6), 2),
                                          ((2, 4, 6, 7), 4), ((2, 64, 3), 8)])
@pytest.mark.parametrize("split", [False, True])
def test_group_norm_matches_cpu(dtype, shape, groups, split, monkeypatch):
    """split: the weight gradients' batch reduction cut into parts of one sample."""
    if split:
        monkeypatch.setattr(cuda_nn, "_COL_MIN_ROWS", 1)
    c = shape[1]
    x, xc = _both(_arr(shape, 0), dtype)
    (w, wc), (b, bc) = _both(_arr(c, 1), dtype), _both(_arr(c, 2), dtype)
    with gt.no_grad():
        want = N._group_norm([x, w, b], groups, 1e-5)
        got = N._group_norm([xc, wc, bc], groups, 1e-5)
        _close(got, want, dtype)
        g, gc = _both(_arr(shape, 5), dtype)
        want = N._group_norm_backward(g, x, w, want[1], want[2], groups, 1e-5)
        got = N._group_norm_backward(gc, xc, wc, got[1], got[2], groups, 1e-5)
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", [gt.float32, gt.bfloat16, gt.float64])
def test_rows_without_shared_memory_cache_give_the_same_bits(dtype, monkeypatch):
    x = gt.tensor(_arr((5, 6, 70), 0), dtype=dtype, device="cuda")
    w = gt.tensor(_arr(6, 1), dtype=dtype, device="cuda")
    with gt.no_grad():
        cached = [*N._layer_norm([x], 2, 1e-5), *N._group_norm([x, w, w], 3, 1e-5)]
        monkeypatch.setattr(cuda_nn, "_ROW_CACHE_BYTES", 0)
        direct = [*N._layer_norm([x], 2, 1e-5), *N._group_norm([x, w, w], 3, 1e-5)]
    for a, b in zip(cached, direct, strict=True):
        np.testing.assert_array_equal(_np(a), _np(b))


def test_layer_norm_noncontiguous_input():
    a = _arr((12, 9), 3)
    x, xc = gt.tensor(a).t(), gt.tensor(a, device="cuda").t()
    with gt.no_grad():
        _close(N._layer_norm([xc], 1, 1e-5), N._layer_norm([x], 1, 1e-5), gt.float32)


# -- NLL loss --------------------------------------------------------------------------------
def _targets(shape, classes, seed=0, ignore=None):
    t = np.random.default_rng(seed).integers(0, classes, shape)
    if ignore is not None:
        t.reshape(-1)[::7] = ignore
    return gt.tensor(t), gt.tensor(t, device="cuda")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("shape", [(5,), (700, 4), (3, 5, 4, 2)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("one_block", [True, False])
def test_nll_loss_matches_cpu(dtype, reduction, shape, weighted, one_block, monkeypatch):
    """Both reducing paths: one block that finalises its own result (up to
    _NLL_ONE_BLOCK_ITEMS items), and block partials plus a finalize launch."""
    if not one_block:
        monkeypatch.setattr(cuda_nn, "_NLL_ONE_BLOCK_ITEMS", 0)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0], *shape[2:])
    x, xc = _both(_arr(shape, 0, -3.0, 0.0), dtype)
    w, wc = _both(_arr(c, 1, 0.5, 2.0), dtype) if weighted else (None, None)
    t, tc = _targets(tshape, c, 2, ignore=1 if len(shape) > 1 else None)
    with gt.no_grad():
        want = N._nll_loss(x, t, w, reduction, 1)
        got = N._nll_loss(xc, tc, wc, reduction, 1)
        _close((got,), (want,), dtype)
        g, gc = _both(_arr(want._shape, 4), dtype)
        want = N._nll_loss_backward(g, shape, t, w, reduction, 1)
        got = N._nll_loss_backward(gc, shape, tc, wc, reduction, 1)
        _close((got,), (want,), dtype)


def test_nll_loss_reduces_in_one_launch_per_pass(monkeypatch):
    """A classifier's mean loss costs one forward launch and two backward ones (the counted
    weights, then the gradient), as PyTorch's kernels do; past the one-block size, partials
    and a finalize."""
    from gputensor.kernels.cuda import device

    names: list[str] = []
    monkeypatch.setattr(device, "launch_observer",
                        lambda src, name, grid, block, shared, run: (names.append(name), run()))
    xc = gt.tensor(_arr((128, 10), 0, -3.0, 0.0), dtype=gt.float32, device="cuda")
    _, tc = _targets((128,), 10, 2)
    g = gt.tensor(np.ones(()), dtype=gt.float32, device="cuda")
    with gt.no_grad():
        N._nll_loss(xc, tc, None, 1, -100)
        assert names == ["nn_nll_fwd_f32"]
        names.clear()
        N._nll_loss_backward(g, (128, 10), tc, None, 1, -100)
        assert names == ["nn_nll_weight_sum_f32", "nn_nll_bwd_f32"]
        monkeypatch.setattr(cuda_nn, "_NLL_ONE_BLOCK_ITEMS", 64)
        xc = gt.tensor(_arr((700, 10), 0, -3.0, 0.0), dtype=gt.float32, device="cuda")
        _, tc = _targets((700,), 10, 2)
        names.clear()
        N._nll_loss(xc, tc, None, 1, -100)
        assert names == ["nn_nll_fwd_f32", "nn_nll_finalize_f32"]


def test_nll_loss_all_ignored_mean_is_nan():
    xc = gt.tensor(_arr((4, 3), 0), device="cuda")
    tc = gt.tensor(np.full(4, -100), device="cuda")
    with gt.no_grad():
        assert np.isnan(_np(N._nll_loss(xc, tc, None, 1, -100)))
        assert _np(N._nll_loss(xc, tc, None, 2, -100)) == 0


@pytest.mark.parametrize("bad", [7, -3])
def test_nll_loss_bad_target_raises_on_cuda(bad):
    """Two bad targets: the error names one of them (on a GPU, whichever thread claims the
    record first: an H200 reported the later one)."""
    xc = gt.tensor(_arr((300, 5), 0), device="cuda")
    t = np.zeros(300, np.int64)
    t[257] = bad
    t[290] = 9
    tc = gt.tensor(t, device="cuda")
    message = rf"Target ({bad}|9) is out of bounds. \(the input has 5 classes\)"
    with gt.no_grad(), pytest.raises(IndexError, match=message):
        synced(N._nll_loss(xc, tc, None, 1, -100))
    with gt.no_grad(), pytest.raises(IndexError, match=message):
        synced(N._nll_loss(xc, tc, None, 0, -100))
    g = gt.tensor(np.ones(()), dtype=gt.float32, device="cuda")
    with gt.no_grad(), pytest.raises(IndexError, match=message):
        synced(N._nll_loss_backward(g, (300, 5), tc, None, 1, -100))


# -- embedding -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [*FLOATS, gt.int64, gt.uint8])
@pytest.mark.parametrize("index_dtype", [gt.int64, gt.int32])
def test_embedding_forward_matches_cpu(dtype, index_dtype):
    wa = _arr((50, 7), 0, -100, 100)
    w, wc = _both(wa, dtype)
    ia = np.random.default_rng(1).integers(0, 50, (30, 40))
    i, ic = gt.tensor(ia, dtype=index_dtype), gt.tensor(ia, dtype=index_dtype, device="cuda")
    out = empty((30, 40, 7), dtype, gt.device("cpu"))
    outc = empty((30, 40, 7), dtype, gt.device("cuda"))
    CPU.kernel("_embedding")(out, w, i)
    CUDA.kernel("_embedding")(outc, wc, ic)
    np.testing.assert_array_equal(_np(outc), _np(out))


def test_embedding_bad_index_raises_on_cuda():
    wc = gt.tensor(_arr((10, 3), 0), device="cuda")
    ic = gt.tensor(np.array([1, 2, 12, 3, -1]), device="cuda")
    outc = empty((5, 3), gt.float32, gt.device("cuda"))
    with pytest.raises(IndexError, match="index out of range in self: index 12 with 10"):
        synced(CUDA.kernel("_embedding")(outc, wc, ic))
    g = gt.tensor(_arr((5, 3), 1), dtype=gt.float32, device="cuda")
    with pytest.raises(IndexError, match="index out of range in self"):
        synced(CUDA.kernel("_embedding_backward")(outc, g, ic, -1, False))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("padding_idx,freq", [(-1, False), (3, False), (-1, True), (0, True)])
def test_embedding_backward_matches_cpu(dtype, padding_idx, freq):
    ia = np.random.default_rng(1).integers(0, 20, (25, 30))
    i, ic = gt.tensor(ia), gt.tensor(ia, device="cuda")
    # Small integers: the atomic sums are exact in any order (frequency scaling aside).
    g, gc = _both(np.round(_arr((25, 30, 6), 2, -4, 4)), dtype)
    with gt.no_grad():
        want = N._embedding_backward(g, i, 20, padding_idx, freq)
        got = N._embedding_backward(gc, ic, 20, padding_idx, freq)
    _close((got,), (want,), dtype)


# -- fused optimizers: bit for bit -----------------------------------------------------------
def _params(dtype, seed=0, sizes=(1, 300, 70)):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype.np_dtype) for n in sizes]


def _run(name, dtype, states, steps, **kw):
    """Three steps of kernel ``name`` on CPU and CUDA copies; returns both tensor lists."""
    out = {}
    for dev in ("cpu", "cuda"):
        ps = [gt.tensor(a, device=dev) for a in _params(dtype, 0)]
        gs = [gt.tensor(a, device=dev) for a in _params(dtype, 1)]
        st = [[gt.tensor(np.abs(a), device=dev) for a in _params(dtype, 2 + k)]
              for k in range(states)]
        fn = (CPU if dev == "cpu" else CUDA).kernel(name)
        for step in range(1, steps + 1):
            extra = ([float(step)] * len(ps),) if name != "_fused_sgd" else ([step == 1] * 3,)
            fn(ps, gs, *st, *extra, **kw)
        out[dev] = ps + [t for s in st for t in s]
    return out["cpu"], out["cuda"]


def _same(cpu, cuda):
    for a, b in zip(cpu, cuda, strict=True):
        np.testing.assert_array_equal(b.cpu().numpy(), a.numpy())


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
@pytest.mark.parametrize("kw", [
    dict(weight_decay=0.0, amsgrad=False, maximize=False, decoupled_weight_decay=False),
    dict(weight_decay=0.1, amsgrad=True, maximize=True, decoupled_weight_decay=False),
    dict(weight_decay=0.01, amsgrad=False, maximize=False, decoupled_weight_decay=True)])
def test_fused_adam_bit_exact(dtype, kw):
    _same(*_run("_fused_adam", dtype, 3, 3, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, **kw))


def test_fused_adam_one_launch_per_dtype_and_step(monkeypatch):
    """Adam updates the tensors that share a dtype and a step count in one launch (a table of
    addresses), a step count of its own in another, and empty tensors in none. The results
    stay bit-exact with the CPU kernel."""
    from gputensor.kernels.cuda import device

    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, amsgrad=True,
              maximize=False, decoupled_weight_decay=True)
    sizes = (300, 1, 0, 70, 5)
    steps = [3.0, 3.0, 3.0, 2.0, 3.0]
    out = {}
    names: list[str] = []
    monkeypatch.setattr(device, "launch_observer",
                        lambda src, name, grid, block, shared, run: (names.append(name), run()))
    for dev in ("cpu", "cuda"):
        ps = [gt.tensor(a, device=dev) for a in _params(gt.float32, 0, sizes)]
        gs = [gt.tensor(a, device=dev) for a in _params(gt.float32, 1, sizes)]
        st = [[gt.tensor(np.abs(a), device=dev) for a in _params(gt.float32, 2 + k, sizes)]
              for k in range(3)]
        names.clear()
        (CPU if dev == "cpu" else CUDA).kernel("_fused_adam")(ps, gs, *st, steps, **kw)
        out[dev] = ps + [t for s_ in st for t in s_]
    assert names == ["optim_adam_multi_f32", "optim_adam_multi_f32"]
    _same(out["cpu"], out["cuda"])


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
@pytest.mark.parametrize("kw", [
    dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False),
    dict(momentum=0.9, dampening=0.1, weight_decay=0.01, nesterov=False, maximize=True),
    dict(momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=True, maximize=False)])
def test_fused_sgd_bit_exact(dtype, kw):
    _same(*_run("_fused_sgd", dtype, 1, 3, lr=0.05, **kw))


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64])
@pytest.mark.parametrize("kw", [dict(lr_decay=0.0, weight_decay=0.0, maximize=False),
                                dict(lr_decay=0.01, weight_decay=0.1, maximize=True)])
def test_fused_adagrad_bit_exact(dtype, kw):
    _same(*_run("_fused_adagrad", dtype, 1, 3, lr=0.1, eps=1e-10, **kw))


def test_fused_kernels_bump_versions():
    p = gt.tensor(np.ones(4, np.float32), device="cuda")
    g = gt.tensor(np.ones(4, np.float32), device="cuda")
    s = gt.tensor(np.zeros(4, np.float32), device="cuda")
    v0, s0 = p._version, s._version
    CUDA.kernel("_fused_adagrad")([p], [g], [s], [1.0], lr=0.1, lr_decay=0.0,
                                  weight_decay=0.0, eps=1e-10, maximize=False)
    assert p._version == v0 + 1 and s._version == s0 + 1


# -- NVRTC: the sources compile for real GPUs ------------------------------------------------
# -- races: the same bits with each block's threads run in reverse order ---------------------
def _reduction_results() -> list[np.ndarray]:
    x = gt.tensor(_arr((6, 40, 33), 0), device="cuda")
    g = gt.tensor(_arr((6, 40, 33), 1), device="cuda")
    w = gt.tensor(_arr(40, 2), device="cuda")
    rows = gt.tensor(_arr((50, 70), 3), device="cuda")
    t = gt.tensor(np.random.default_rng(4).integers(0, 70, 50), device="cuda")
    with gt.no_grad():
        bn = N._batch_norm([x, w, w], None, None, 0.1, 1e-5)
        out = [*bn, *N._batch_norm_backward(g, x, w, bn[1], bn[2], 1e-5)]
        ln = N._layer_norm([rows], 1, 1e-5)
        out += [*ln, *N._layer_norm_backward(rows, rows, None, ln[1], ln[2], 1, 1e-5)]
        for groups in (4, 20):  # 33-element channels: a warp per channel; then 2 per group
            gn = N._group_norm([x, w, w], groups, 1e-5)
            out += [*gn, *N._group_norm_backward(g, x, w, gn[1], gn[2], groups, 1e-5)]
        out.append(N._nll_loss(rows, t, None, 1, -100))
    return [np.asarray(o.cpu().numpy()) for o in out]


def test_results_do_not_depend_on_thread_order(monkeypatch):
    from gputensor.kernels.cuda import device

    runtime = device.runtime()
    if type(runtime).__name__ != "EmulatorRuntime":
        pytest.skip("thread order is only controllable on the emulator")
    want = _reduction_results()
    module = nn_module()
    launch = type(module).launch

    def reversed_launch(self, *args, **kwargs):
        return launch(self, *args, **{**kwargs, "reverse_threads": True})

    monkeypatch.setattr(type(module), "launch", reversed_launch)
    for got, exp in zip(_reduction_results(), want, strict=True):
        np.testing.assert_array_equal(got, exp)


def nn_module():
    """The compiled nn.cu module on the active runtime."""
    from gputensor.kernels.cuda import device

    return cuda_nn.SRC._modules[id(device.runtime())][1]
