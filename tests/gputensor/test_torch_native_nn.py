"""torch.* native nn functions (torch.lstm/gru/rnn_*, the cells, native_batch_norm/
layer_norm/group_norm/dropout, the norm helpers, the SyncBatchNorm building blocks,
embedding_bag, ctc_loss, convolution, grid_sampler*, affine_grid_generator and the 1-d pools)
against PyTorch on cpu and emulated cuda: every output (second outputs included) and the
gradients of every differentiable input."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
I, H, L, B = 3, 4, 5, 3
# _n draws from here; _call reseeds it, so arrays drawn inside a case's maker are the same for
# the torch call and the gputensor call.
_DRAW = {"rng": np.random.default_rng(5)}


def _n(*shape: int, scale: float = 1.0) -> np.ndarray:
    return _DRAW["rng"].standard_normal(shape) * scale


def _rnn_params(gates: int, layers: int, bidir: bool, bias: bool, proj: int = 0
                ) -> list[np.ndarray]:
    out = []
    for layer in range(layers):
        for _ in range(2 if bidir else 1):
            width = I if layer == 0 else (proj or H) * (2 if bidir else 1)
            out += [_n(gates * H, width, scale=0.5), _n(gates * H, proj or H, scale=0.5)]
            if bias:
                out += [_n(gates * H, scale=0.5), _n(gates * H, scale=0.5)]
            if proj:
                out.append(_n(proj, H, scale=0.5))
    return out


_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
_BATCH_SIZES = np.array([3, 3, 2, 1])


def _rnn_case(mode: str, packed: bool, bidir: bool = True, bias: bool = True,
              batch_first: bool = False, unbatched: bool = False, proj: int = 0,
              layers: int = 2) -> Callable:
    params = _rnn_params(_GATES[mode], layers, bidir, bias, proj)
    states = layers * (2 if bidir else 1)
    batch = 1 if unbatched else B
    h_shape = (states, proj or H) if unbatched else (states, batch, proj or H)
    c_shape = (states, H) if unbatched else (states, batch, H)
    h0, c0 = _n(*h_shape), _n(*c_shape)
    if packed:
        data = _n(int(_BATCH_SIZES.sum()), I)
    elif unbatched:
        data = _n(L, I)
    else:
        data = _n(B, L, I) if batch_first else _n(L, B, I)

    def make(t: Callable) -> tuple:
        hx = [t(h0, True), t(c0, True)] if mode == "lstm" else t(h0, True)
        ps = [t(p, True) for p in params]
        if packed:
            return (t(data, True), t(_BATCH_SIZES, cpu=True), hx, ps, bias, layers, 0.0, True,
                    bidir)
        return t(data, True), hx, ps, bias, layers, 0.0, True, bidir, batch_first
    return make


def _cell_case(mode: str, b_ih: bool, b_hh: bool) -> Callable:
    g = _GATES[mode.replace("_cell", "")]
    x, h, c = _n(B, I), _n(B, H), _n(B, H)
    w_ih, w_hh, bi, bh = _n(g * H, I), _n(g * H, H), _n(g * H), _n(g * H)

    def make(t: Callable) -> tuple:
        hx = [t(h, True), t(c, True)] if mode == "lstm_cell" else t(h, True)
        return (t(x, True), hx, t(w_ih, True), t(w_hh, True), t(bi, True) if b_ih else None,
                t(bh, True) if b_hh else None)
    return make


X4, X3 = _n(4, 3, 5), _n(2, 6, 4)
CH3, CH6 = RNG.uniform(0.5, 1.5, 3), RNG.uniform(0.5, 1.5, 6)
EMB_W = _n(10, 3)
EMB_IDX = np.array([1, 2, 4, 5, 4, 3, 2, 9, 9])
EMB_OFF = np.array([0, 4, 4, 7])
LOG_PROBS = np.log(np.random.default_rng(3).dirichlet(np.ones(5), size=(8, 2)))
CTC_TARGETS = np.array([[1, 2, 2], [3, 1, 0]])


def _cases() -> dict[str, tuple[str, Callable]]:
    """case id -> (function name, args from a tensor maker t(array, requires_grad, cpu=))."""
    cases: dict[str, tuple[str, Callable]] = {}
    for mode in _GATES:
        cases[f"{mode}-input"] = (mode, _rnn_case(mode, False))
        cases[f"{mode}-input-batch_first"] = (mode, _rnn_case(mode, False, batch_first=True,
                                                              bias=False))
        cases[f"{mode}-packed"] = (mode, _rnn_case(mode, True))
        cases[f"{mode}-packed-nobias"] = (mode, _rnn_case(mode, True, bidir=False, bias=False,
                                                          layers=1))
    cases["rnn_tanh-unbatched"] = ("rnn_tanh", _rnn_case("rnn_tanh", False, unbatched=True))
    cases["rnn_relu-unbatched"] = ("rnn_relu", _rnn_case("rnn_relu", False, unbatched=True,
                                                         bidir=False))
    cases["lstm-proj"] = ("lstm", _rnn_case("lstm", False, proj=2))
    cases["lstm-packed-proj"] = ("lstm", _rnn_case("lstm", True, proj=2, bidir=False))
    for cell in ("lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"):
        for b_ih, b_hh in ((True, True), (False, False), (True, False), (False, True)):
            cases[f"{cell}-{int(b_ih)}{int(b_hh)}"] = (cell, _cell_case(cell, b_ih, b_hh))
    cases["native_batch_norm-train"] = ("native_batch_norm", lambda t: (
        t(X4, True), t(CH3, True), t(_n(3), True), t(np.zeros(3)), t(np.ones(3)), True, 0.3,
        1e-5))
    cases["native_batch_norm-train-noaffine"] = ("native_batch_norm", lambda t: (
        t(X4, True), None, None, None, None, True, 0.1, 1e-3))
    cases["native_batch_norm-eval"] = ("native_batch_norm", lambda t: (
        t(X4, True), t(CH3, True), t(_n(3), True), t(_n(3)), t(CH3), False, 0.1, 1e-5))
    cases["native_layer_norm"] = ("native_layer_norm", lambda t: (
        t(X4, True), [3, 5], t(_n(3, 5), True), t(_n(3, 5), True), 1e-5))
    cases["native_layer_norm-noaffine"] = ("native_layer_norm", lambda t: (
        t(X4, True), [5], None, None, 1e-3))
    cases["native_group_norm"] = ("native_group_norm", lambda t: (
        t(X3, True), t(CH6, True), t(_n(6), True), 2, 6, 4, 3, 1e-5))
    cases["native_group_norm-4d"] = ("native_group_norm", lambda t: (
        t(_n(2, 4, 2, 3), True), None, None, 2, 4, 6, 2, 1e-4))
    for dim in (0, 1, 2, -1):
        cases[f"norm_except_dim-{dim}"] = ("norm_except_dim", lambda t, d=dim: (
            t(X4, True), 2, d))
    cases["norm_except_dim-pow3"] = ("norm_except_dim", lambda t: (t(X4, True), 3, 1))
    cases["norm_except_dim-1d"] = ("norm_except_dim", lambda t: (t(_n(5), True), 2, 0))
    cases["frobenius_norm"] = ("frobenius_norm", lambda t: (t(X4, True), [1, 2]))
    cases["frobenius_norm-keepdim"] = ("frobenius_norm", lambda t: (t(X4, True), [0], True))
    cases["nuclear_norm"] = ("nuclear_norm", lambda t: (t(_n(4, 3), True),))
    cases["nuclear_norm-keepdim"] = ("nuclear_norm", lambda t: (t(_n(4, 3), True), True))
    cases["nuclear_norm-dim"] = ("nuclear_norm", lambda t: (t(X4, True), [0, 2], True))
    for mode in (0, 1, 2):
        for pad in (None, 2, -1):
            cases[f"embedding_bag-{mode}-{pad}"] = ("embedding_bag", lambda t, m=mode, p=pad: (
                t(EMB_W, True), t(EMB_IDX), t(EMB_OFF), False, m, False, None, False, p))
    cases["embedding_bag-psw"] = ("embedding_bag", lambda t: (
        t(EMB_W, True), t(EMB_IDX), t(EMB_OFF), False, 0, False,
        t(np.abs(_n(9)), True), False))
    cases["embedding_bag-last-offset"] = ("embedding_bag", lambda t: (
        t(EMB_W, True), t(EMB_IDX.astype(np.int32)), t(np.array([0, 4, 9], np.int32)), False,
        1, False, None, True))
    for mode in (0, 1, 2):
        cases[f"embedding_bag-{mode}-empty"] = ("embedding_bag", lambda t, m=mode: (
            t(EMB_W, True), t(np.zeros(0, np.int64)), t(np.array([0, 0])), False, m, False,
            None, False))
    cases["embedding_bag-2-float32"] = ("embedding_bag", lambda t: (
        t(EMB_W.astype(np.float32), True), t(EMB_IDX), t(EMB_OFF), False, 2, False, None,
        False, 4))
    cases["embedding_bag-0-float32"] = ("embedding_bag", lambda t: (
        t(EMB_W.astype(np.float32), True), t(EMB_IDX), t(EMB_OFF), False, 0, False, None,
        False))
    for red in (0, 1, 2):
        cases[f"ctc_loss-list-{red}"] = ("ctc_loss", lambda t, r=red: (
            t(LOG_PROBS, True), t(CTC_TARGETS), [8, 6], [3, 2], 0, r, False))
    cases["ctc_loss-tensor"] = ("ctc_loss", lambda t: (
        t(LOG_PROBS, True), t(CTC_TARGETS), t(np.array([8, 6])), t(np.array([3, 2])), 4, 1,
        True))
    cases["convolution-1d"] = ("convolution", lambda t: (
        t(_n(2, 4, 9), True), t(_n(6, 2, 3), True), t(_n(6), True), [2], [1], [2], False, [0],
        2))
    cases["convolution-2d"] = ("convolution", lambda t: (
        t(_n(1, 2, 6, 5), True), t(_n(3, 2, 2, 3), True), None, [1, 2], [1, 0], [1], False,
        [0], 1))
    cases["convolution-3d"] = ("convolution", lambda t: (
        t(_n(1, 2, 4, 4, 3), True), t(_n(2, 2, 2, 2, 2), True), t(_n(2), True), [1], [0],
        [1], False, [0], 1))
    cases["convolution-transposed-2d"] = ("convolution", lambda t: (
        t(_n(1, 4, 3, 3), True), t(_n(4, 3, 2, 2), True), t(_n(6), True), [2], [1], [1], True,
        [1], 2))
    cases["convolution-transposed-1d"] = ("convolution", lambda t: (
        t(_n(2, 2, 5), True), t(_n(2, 3, 3), True), None, [3], [0], [2], True, [2], 1))
    grid2, grid3 = RNG.uniform(-1.2, 1.2, (2, 3, 4, 2)), RNG.uniform(-1.2, 1.2, (1, 2, 3, 2, 3))
    for interp in (0, 1, 2):
        for padding in (0, 1, 2):
            for name in ("grid_sampler", "grid_sampler_2d"):
                cases[f"{name}-{interp}-{padding}"] = (name, lambda t, i=interp, p=padding: (
                    t(_n(2, 2, 4, 5), True), t(grid2, True), i, p, i == 1))
    for interp in (0, 1):
        for padding in (0, 1, 2):
            for name in ("grid_sampler", "grid_sampler_3d"):
                cases[f"{name}-3d-{interp}-{padding}"] = (name, lambda t, i=interp, p=padding: (
                    t(_n(1, 2, 3, 4, 3), True), t(grid3, True), i, p, p == 2))
    cases["affine_grid_generator-2d"] = ("affine_grid_generator", lambda t: (
        t(_n(2, 2, 3), True), [2, 1, 4, 5], False))
    cases["affine_grid_generator-3d"] = ("affine_grid_generator", lambda t: (
        t(_n(1, 3, 4), True), [1, 1, 2, 3, 4], True))
    cases["adaptive_max_pool1d"] = ("adaptive_max_pool1d", lambda t: (t(_n(2, 3, 10), True),
                                                                       [4]))
    cases["adaptive_max_pool1d-2d"] = ("adaptive_max_pool1d", lambda t: (t(_n(3, 7), True),
                                                                          [3]))
    cases["max_pool1d_with_indices"] = ("max_pool1d_with_indices", lambda t: (
        t(_n(2, 3, 11), True), [3]))
    cases["max_pool1d_with_indices-full"] = ("max_pool1d_with_indices", lambda t: (
        t(_n(2, 3, 11), True), [3], [2], [1], [2], True))
    return cases


CASES = _cases()


def _call(lib, name: str, make: Callable, device: str) -> tuple[object, list]:
    leaves: list = []

    def t(a: np.ndarray, grad: bool = False, cpu: bool = False):
        x = torch.tensor(a) if lib is torch else gt.tensor(a, device="cpu" if cpu else device)
        if grad:
            x.requires_grad_(True)
            leaves.append(x)
        return x

    _DRAW["rng"] = np.random.default_rng(11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # frobenius/nuclear_norm's deprecation, LSTM proj
        out = getattr(lib, name)(*make(t))
    return out, leaves


def _flat(out: object) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_native_function_matches_torch(device: str, case: str) -> None:
    name, make = CASES[case]
    want, t_leaves = _call(torch, name, make, device)
    got, g_leaves = _call(gt, name, make, device)
    want, got = _flat(want), _flat(got)
    assert len(got) == len(want)
    weights, t_terms, g_terms = [], [], []
    for w, g in zip(want, got, strict=True):
        if w is None:
            assert g is None
            continue
        assert tuple(g.shape) == tuple(w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert str(g.device).split(":")[0] == device.split(":")[0]
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-7, atol=1e-9)
        assert g.requires_grad == w.requires_grad
        if w.requires_grad:
            weights.append(RNG.standard_normal(tuple(w.shape)))
            t_terms.append((w * torch.tensor(weights[-1])).sum())
            g_terms.append((g * gt.tensor(weights[-1], device=device)).sum())
    if not t_terms:
        return
    t_grads = torch.autograd.grad(sum(t_terms), t_leaves, allow_unused=True)
    g_grads = gt.autograd.grad(sum(g_terms), g_leaves, allow_unused=True)
    for tg, gg in zip(t_grads, g_grads, strict=True):
        if tg is None:
            assert gg is None or not _np(gg).any()
            continue
        if tg.layout == torch.sparse_coo:
            tg = tg.to_dense()
        np.testing.assert_allclose(_np(gg), _np(tg), rtol=1e-6, atol=1e-8)


def test_native_batch_norm_updates_running_stats_like_torch(device: str) -> None:
    stats = {}
    for lib, dev in ((torch, "cpu"), (gt, device)):
        rm, rv = lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)
        if lib is gt:
            rm, rv = rm.to(dev), rv.to(dev)
        x = lib.tensor(X4) if lib is torch else gt.tensor(X4, device=dev)
        lib.native_batch_norm(x, None, None, rm, rv, True, 0.3, 1e-5)
        stats[lib.__name__] = (_np(rm), _np(rv))
    for a, b in zip(stats["gputensor"], stats["torch"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_native_norms_half_statistics_dtypes(device: str, dtype: str) -> None:
    """The statistics come back in the input's half dtype, as from PyTorch's CPU kernels."""
    x = _n(2, 4, 3)
    tx, gx = torch.tensor(x).to(getattr(torch, dtype)), gt.tensor(x, device=device).to(
        getattr(gt, dtype))
    pairs = [(torch.native_layer_norm(tx, [3], None, None, 1e-5),
              gt.native_layer_norm(gx, [3], None, None, 1e-5)),
             (torch.native_group_norm(tx, None, None, 2, 4, 3, 2, 1e-5),
              gt.native_group_norm(gx, None, None, 2, 4, 3, 2, 1e-5)),
             (torch.native_batch_norm(tx, None, None, None, None, True, 0.1, 1e-5),
              gt.native_batch_norm(gx, None, None, None, None, True, 0.1, 1e-5))]
    pairs.append((torch.native_batch_norm(tx, None, None, torch.zeros(4), torch.ones(4), False,
                                          0.1, 1e-5),
                  gt.native_batch_norm(gx, None, None, gt.zeros(4, device=device),
                                       gt.ones(4, device=device), False, 0.1, 1e-5)))
    for want, got in pairs:
        for w, g in zip(want, got, strict=True):
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
            np.testing.assert_allclose(_np(g.float()), _np(w.float()), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_native_dropout_mask_and_scale(device: str, p: float) -> None:
    gt.manual_seed(0)
    x = gt.tensor(_n(200, 50), device=device, requires_grad=True)
    out, mask = gt.native_dropout(x, p, True)
    assert mask.dtype == gt.bool and tuple(mask.shape) == (200, 50)
    scale = 0.0 if p == 1 else 1 / (1 - p)
    np.testing.assert_allclose(_np(out), _np(x) * _np(mask) * scale, rtol=1e-12)
    kept = _np(mask).mean()
    assert abs(kept - (1 - p)) < 0.03
    out.sum().backward()
    np.testing.assert_allclose(_np(x.grad), _np(mask) * scale)
    t_out, t_mask = torch.native_dropout(torch.tensor(_n(200, 50)), p, True)
    assert t_mask.dtype == torch.bool and abs(t_mask.double().mean().item() - (1 - p)) < 0.03


def test_native_dropout_eval_and_none(device: str) -> None:
    x = gt.tensor(_n(4, 5), device=device)
    out, mask = gt.native_dropout(x, 0.5, False)
    assert bool(mask.all()) and out.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(_np(out), _np(x))
    _, mask = gt.native_dropout(gt.ones(2000, device=device), 0.5, None)   # None: training
    assert not bool(mask.all())
    with pytest.raises(RuntimeError, match="bernoulli_ expects p"):
        gt.native_dropout(x, 1.5, True)


@pytest.mark.parametrize("args", [(), (2,), (3, [0, 1, 2], False, None),
                                  (1.5, [], False, None), (None, [0, 1, 2], False, None)])
def test_native_norm_matches_torch_sparse(device: str, args: tuple) -> None:
    """PyTorch has only a sparse kernel: compare the dense result with it."""
    x = _n(4, 3, 5)
    want = torch.native_norm(torch.tensor(x).to_sparse(), *args)
    got = gt.native_norm(gt.tensor(x, device=device), *args)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), _np(want.to_dense()), rtol=1e-6)


def test_native_norm_dtype_and_keepdim(device: str) -> None:
    """What the sparse kernel refuses (dtype, keepdim, partial dims): as vector_norm."""
    x = _n(4, 3, 5).astype(np.float32)
    got = gt.native_norm(gt.tensor(x, device=device), 3, [1], True, gt.float64)
    want = torch.linalg.vector_norm(torch.tensor(x), 3, [1], True, dtype=torch.float64)
    assert got.dtype == gt.float64 and tuple(got.shape) == (4, 1, 5)
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)


def test_deprecated_norms_warn() -> None:
    with pytest.warns(UserWarning, match="frobenius_norm is deprecated"):
        gt.frobenius_norm(gt.ones(2, 2), [0, 1])
    with pytest.warns(UserWarning, match="nuclear_norm is deprecated"):
        gt.nuclear_norm(gt.ones(2, 2))
    with pytest.raises(RuntimeError, match="Expected at most 2 dimensions, but got 3"):
        gt.frobenius_norm(gt.ones(2, 2, 2), [0, 1, 2])


def test_embedding_renorm_matches_torch(device: str) -> None:
    w = _n(6, 4, scale=2.0)
    want = torch.tensor(w)
    got = gt.tensor(w, device=device)
    idx = np.array([[0, 2], [2, 5]])
    r_t = torch.embedding_renorm_(want, torch.tensor(idx), 1.5, 3.0)
    r_g = gt.embedding_renorm_(got, gt.tensor(idx, device=device), 1.5, 3.0)
    assert r_g is got and r_t is want
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12)


# -- SyncBatchNorm building blocks (CUDA-only in PyTorch) ----------------------------------------
def _split_batches(device: str) -> tuple[np.ndarray, list, list]:
    x = _n(7, 3, 4, 2) * 2 + 1
    parts = [x[:3], x[3:4], x[4:]]
    return x, parts, [gt.tensor(p, device=device) for p in parts]


def test_sync_bn_forward_equals_batch_norm_of_the_whole_batch(device: str) -> None:
    """Per-rank stats, gathered with their counts, then elemt on each rank, give PyTorch's
    training-mode batch norm of the concatenated batch (and its running statistics)."""
    x, parts, g_parts = _split_batches(device)
    w, b = CH3, _n(3)
    eps, momentum = 1e-5, 0.2
    stats = [gt.batch_norm_stats(p, eps) for p in g_parts]
    mean = gt.stack([s[0] for s in stats])
    invstd = gt.stack([s[1] for s in stats])
    counts = gt.tensor([p.shape[0] * 8 for p in parts], dtype=gt.float64, device=device)
    rm, rv = gt.zeros(3, dtype=gt.float64, device=device), gt.ones(3, dtype=gt.float64,
                                                                    device=device)
    g_mean, g_invstd = gt.batch_norm_gather_stats_with_counts(g_parts[0], mean, invstd, rm, rv,
                                                              momentum, eps, counts)
    gw, gb = gt.tensor(w, device=device), gt.tensor(b, device=device)
    out = gt.cat([gt.batch_norm_elemt(p, gw, gb, g_mean, g_invstd, eps) for p in g_parts])
    t_rm, t_rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    want, t_mean, t_invstd = torch.native_batch_norm(torch.tensor(x), torch.tensor(w),
                                                     torch.tensor(b), t_rm, t_rv, True,
                                                     momentum, eps)
    np.testing.assert_allclose(_np(out), _np(want), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(g_mean), _np(t_mean), rtol=1e-12)
    np.testing.assert_allclose(_np(g_invstd), _np(t_invstd), rtol=1e-10)
    np.testing.assert_allclose(_np(rm), _np(t_rm), rtol=1e-12)
    np.testing.assert_allclose(_np(rv), _np(t_rv), rtol=1e-10)


def test_sync_bn_gather_stats_equal_counts(device: str) -> None:
    x = _n(4, 3, 5)
    parts = [gt.tensor(x[:2], device=device), gt.tensor(x[2:], device=device)]
    stats = [gt.batch_norm_stats(p, 1e-5) for p in parts]
    mean, invstd = gt.batch_norm_gather_stats(
        parts[0], gt.stack([s[0] for s in stats]), gt.stack([s[1] for s in stats]), None, None,
        0.1, 1e-5, 10)
    want = torch.native_batch_norm(torch.tensor(x), None, None, None, None, True, 0.1, 1e-5)
    np.testing.assert_allclose(_np(mean), _np(want[1]), rtol=1e-12)
    np.testing.assert_allclose(_np(invstd), _np(want[2]), rtol=1e-10)


def test_sync_bn_backward_equals_batch_norm_gradients(device: str) -> None:
    """backward_reduce on each rank, the sums added across ranks, then backward_elemt on
    each rank give PyTorch's batch-norm gradients of the whole batch."""
    x, parts, g_parts = _split_batches(device)
    w, b, dy = CH3, _n(3), _n(*x.shape)
    eps = 1e-5
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    out, t_mean, t_invstd = torch.native_batch_norm(tx, tw, tb, None, None, True, 0.1, eps)
    out.backward(torch.tensor(dy))
    mean, invstd = gt.tensor(_np(t_mean), device=device), gt.tensor(_np(t_invstd),
                                                                     device=device)
    gw = gt.tensor(w, device=device)
    dys = [gt.tensor(d, device=device) for d in (dy[:3], dy[3:4], dy[4:])]
    reduced = [gt.batch_norm_backward_reduce(d, p, mean, invstd, gw, True, True, True)
               for d, p in zip(dys, g_parts, strict=True)]
    sum_dy = sum(r[0] for r in reduced)
    sum_dy_xmu = sum(r[1] for r in reduced)
    np.testing.assert_allclose(_np(sum(r[2] for r in reduced)), _np(tw.grad), rtol=1e-10)
    np.testing.assert_allclose(_np(sum(r[3] for r in reduced)), _np(tb.grad), rtol=1e-10)
    count = gt.tensor([p.shape[0] * 8 for p in parts], dtype=gt.int32, device=device)
    gi = gt.cat([gt.batch_norm_backward_elemt(d, p, mean, invstd, gw, sum_dy, sum_dy_xmu,
                                              count) for d, p in zip(dys, g_parts, strict=True)])
    np.testing.assert_allclose(_np(gi), _np(tx.grad), rtol=1e-9, atol=1e-12)


def test_sync_bn_backward_reduce_flags(device: str) -> None:
    x = gt.tensor(_n(2, 3, 4), device=device)
    mean, invstd = gt.batch_norm_stats(x, 1e-5)
    res = gt.batch_norm_backward_reduce(x, x, mean, invstd, None, False, True, False)
    assert res[0] is None and res[1] is None and res[3] is None
    assert tuple(res[2].shape) == (3,)


def test_sync_bn_stats_of_half_input_are_float32(device: str) -> None:
    x = _n(4, 3, 5)
    mean, invstd = gt.batch_norm_stats(gt.tensor(x, device=device).half(), 1e-5)
    assert mean.dtype == invstd.dtype == gt.float32
    np.testing.assert_allclose(_np(mean), x.mean((0, 2)), rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(_np(invstd), 1 / np.sqrt(x.var((0, 2)) + 1e-5), rtol=1e-2)


def test_batch_norm_update_stats_matches_torch(device: str) -> None:
    x = _n(4, 3, 5)
    t_rm, t_rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    rm, rv = gt.zeros(3, dtype=gt.float64, device=device), gt.ones(3, dtype=gt.float64,
                                                                    device=device)
    want = torch.batch_norm_update_stats(torch.tensor(x), t_rm, t_rv, 0.3)
    got = gt.batch_norm_update_stats(gt.tensor(x, device=device), rm, rv, 0.3)
    for a, b in zip((*got, rm, rv), (*want, t_rm, t_rv), strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


# -- errors and gradcheck --------------------------------------------------------------------
def test_rnn_argument_errors(device: str) -> None:
    x = gt.randn(L, B, I, device=device)
    h = gt.zeros(1, B, H, device=device)
    w_ih, w_hh, b = (gt.randn(H, I, device=device), gt.randn(H, H, device=device),
                     gt.randn(H, device=device))
    with pytest.raises(RuntimeError, match="incorrect number of RNN parameters"):
        gt.rnn_tanh(x, h, [w_ih, w_hh, b], True, 1, 0.0, False, False, False)
    with pytest.raises(IndexError, match="Dimension out of range"):   # as PyTorch's
        gt.gru(x[:, 0], h[:, 0], [w_ih.repeat(3, 1), w_hh.repeat(3, 1)], False, 1, 0.0, False,
               False, False)
    with pytest.raises(RuntimeError, match="lstm expects two hidden states"):
        gt.lstm(x, [h], [w_ih, w_hh], False, 1, 0.0, False, False, False)
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        gt.rnn_tanh(x, gt.zeros(1, B + 1, H, device=device), [w_ih, w_hh], False, 1, 0.0,
                    False, False, False)
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Int"):
        gt.rnn_tanh(x[0], gt.tensor([2, 1], dtype=gt.int32), h[:, :2], [w_ih, w_hh], False, 1,
                    0.0, False, False)
    with pytest.raises(RuntimeError, match="doesn't match hidden0 batch size"):
        gt.rnn_tanh_cell(x[0], h[0, :1], w_ih, w_hh)
    with pytest.raises(RuntimeError, match="lstm_cell expects two hidden states"):
        gt.lstm_cell(x[0], [h[0]], gt.randn(4 * H, I, device=device),
                     gt.randn(4 * H, H, device=device))


def test_rnn_dropout_between_layers_in_training(device: str) -> None:
    x = gt.randn(L, B, I, device=device, dtype=gt.float64)
    h = gt.zeros(2, B, H, device=device, dtype=gt.float64)
    ps = [gt.tensor(p, device=device) for p in _rnn_params(1, 2, False, False)]
    base = gt.rnn_tanh(x, h, ps, False, 2, 0.5, False, False, False)[0]
    gt.manual_seed(1)
    dropped = gt.rnn_tanh(x, h, ps, False, 2, 0.5, True, False, False)[0]
    gt.manual_seed(1)
    again = gt.rnn_tanh(x, h, ps, False, 2, 0.5, True, False, False)[0]
    assert not np.allclose(_np(base), _np(dropped))
    np.testing.assert_array_equal(_np(dropped), _np(again))


def test_native_group_norm_checks(device: str) -> None:
    x = gt.randn(2, 6, 4, device=device)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        gt.native_group_norm(x, None, None, 2, 6, 4, 4, 1e-5)
    with pytest.raises(RuntimeError, match="Expected input to have 60 elements"):
        gt.native_group_norm(x, None, None, 2, 6, 5, 3, 1e-5)


def test_grid_sampler_mode_checks(device: str) -> None:
    x, grid = gt.randn(1, 1, 3, 3, device=device), gt.zeros(1, 2, 2, 2, device=device)
    with pytest.raises(RuntimeError, match="interpolation_mode"):
        gt.grid_sampler(x, grid, 3, 0, False)
    with pytest.raises(RuntimeError, match="expected 5D input"):
        gt.grid_sampler_3d(x, grid, 0, 0, False)


@pytest.mark.parametrize("name", ["lstm_cell", "native_group_norm", "native_layer_norm",
                                  "gru-packed"])
def test_gradcheck(device: str, name: str) -> None:
    rng = np.random.default_rng(1)

    def t(*shape: int):
        return gt.tensor(rng.standard_normal(shape) * 0.5, device=device, requires_grad=True)

    if name == "lstm_cell":
        args = (t(2, 3), t(2, 2), t(2, 2), t(8, 3), t(8, 2), t(8))

        def fn(x, h, c, wi, wh, b):
            return gt.lstm_cell(x, [h, c], wi, wh, b, None)
    elif name == "native_group_norm":
        args = (t(2, 4, 3), t(4), t(4))

        def fn(x, w, b):
            return gt.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)
    elif name == "native_layer_norm":
        args = (t(2, 3, 4), t(3, 4), t(3, 4))

        def fn(x, w, b):
            return gt.native_layer_norm(x, [3, 4], w, b, 1e-5)[0]
    else:
        args = (t(5, 2), t(1, 3, 2), t(6, 2), t(6, 2), t(6), t(6))
        sizes = gt.tensor([3, 1, 1])

        def fn(x, h, wi, wh, bi, bh):
            return gt.gru(x, sizes, h, [wi, wh, bi, bh], True, 1, 0.0, False, False)
    assert gt.autograd.gradcheck(fn, args)
