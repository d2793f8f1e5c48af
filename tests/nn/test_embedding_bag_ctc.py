"""EmbeddingBag and CTC loss: values and gradients against PyTorch (every bag mode, offsets and
2-D bags, empty bags, per_sample_weights, padding_idx, include_last_offset, max_norm,
scale_grad_by_freq, sparse gradients; CTC with both target layouts, every reduction, blank not
0, impossible alignments, unbatched input, zero-length inputs), the modules, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
from gputensor.nn import functional as F
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional

MODES = ["sum", "mean", "max"]
TOL = {gt.float64: (1e-10, 1e-10), gt.float32: (1e-5, 1e-5)}


def _weight(rows, cols, device, dtype=gt.float64, seed=0):
    arr = random_array((rows, cols), dtype, seed=seed)
    g = gt.tensor(arr, dtype=dtype, device=device).requires_grad_()
    return g, torch.from_numpy(arr.copy()).requires_grad_()


def _ints(values, device):
    arr = np.asarray(values, dtype=np.int64)
    return gt.tensor(arr, device=device), torch.from_numpy(arr.copy())


def _backward(g_out, t_out, device, seed=7):
    """Backpropagate one random upstream gradient through both outputs."""
    up = random_array(tuple(t_out.shape), gt.float64, seed=seed)
    (g_out * gt.tensor(up, dtype=g_out.dtype, device=device)).sum().backward()
    (t_out * torch.from_numpy(up).to(t_out.dtype)).sum().backward()


def _check_bag(device, idx, offsets=None, dtype=gt.float64, psw=None, rows=9, **kwargs):
    """Run embedding_bag on both sides; compare the output and every gradient."""
    gw, tw = _weight(rows, 4, device, dtype)
    gi, ti = _ints(idx, device)
    go, to = (None, None) if offsets is None else _ints(offsets, device)
    gp = tp = None
    if psw is not None:
        arr = random_array(np.shape(idx), dtype, seed=3)
        gp = gt.tensor(arr, device=device).requires_grad_()
        tp = torch.from_numpy(arr.copy()).requires_grad_()
    g_out = F.embedding_bag(gi, gw, go, per_sample_weights=gp, **kwargs)
    t_out = TF.embedding_bag(ti, tw, to, per_sample_weights=tp, **kwargs)
    atol, rtol = TOL[dtype]
    assert_close(g_out, t_out.detach(), atol=atol, rtol=rtol)
    _backward(g_out, t_out, device)
    grad = gw.grad.to_dense() if kwargs.get("sparse") else gw.grad
    assert_close(grad, tw.grad.to_dense() if kwargs.get("sparse") else tw.grad,
                 atol=atol, rtol=rtol)
    if psw is not None:
        assert_close(gp.grad, tp.grad, atol=atol, rtol=rtol)
    return gw, tw


# == embedding_bag ==============================================================================
_IDX = [1, 4, 4, 2, 0, 7, 3, 3, 8, 5]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("offsets", [[0, 3, 3, 7], [0, 1, 2, 10], [0], [0, 10]],
                         ids=["empty-middle", "empty-last", "one-bag", "empty-last-2"])
def test_offsets(device, mode, offsets):
    _check_bag(device, _IDX, offsets, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_two_dim_input_matches_offsets(device, mode):
    idx = [[1, 4, 2], [0, 0, 7], [3, 8, 5]]
    _check_bag(device, idx, mode=mode)
    gw, _ = _weight(9, 4, device)
    flat = F.embedding_bag(_ints(np.ravel(idx), device)[0], gw, _ints([0, 3, 6], device)[0],
                           mode=mode)
    assert_close(F.embedding_bag(_ints(idx, device)[0], gw, mode=mode), flat.detach().cpu())


@pytest.mark.parametrize("mode", MODES)
def test_include_last_offset(device, mode):
    _check_bag(device, _IDX, [0, 3, 3, 7, 10], mode=mode, include_last_offset=True)
    _check_bag(device, _IDX, [0, 10], mode=mode, include_last_offset=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding_idx", [3, -6, 0])
def test_padding_idx(device, mode, padding_idx):
    # bag 2 is padding only: a zero row, and the padding row gets no gradient
    idx = [1, 3, 4, 3, 3, 0, 3, 5]
    _check_bag(device, idx, [0, 3, 3, 5, 5], mode=mode, padding_idx=padding_idx)
    _check_bag(device, [[1, 3], [3, 3], [0, 2]], mode=mode, padding_idx=padding_idx)


def test_per_sample_weights(device):
    _check_bag(device, _IDX, [0, 3, 3, 7], psw=True, mode="sum")
    _check_bag(device, [[1, 4], [4, 2], [0, 2]], psw=True, mode="sum")
    _check_bag(device, [1, 3, 4, 3, 2], [0, 2], psw=True, mode="sum", padding_idx=3)


def test_int32_indices_and_float32(device):
    gw, tw = _weight(9, 4, device, gt.float32)
    for mode in MODES:
        g = F.embedding_bag(gt.tensor(_IDX, dtype=gt.int32, device=device), gw,
                            gt.tensor([0, 4], dtype=gt.int32, device=device), mode=mode)
        t = TF.embedding_bag(torch.tensor(_IDX, dtype=torch.int32), tw,
                             torch.tensor([0, 4], dtype=torch.int32), mode=mode)
        assert_close(g, t.detach(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq(device, mode):
    # PyTorch 2.13's CPU embedding_bag divides by the wrong count when a once-seen index sorts
    # after a repeated one (pytorch/pytorch#190063), so the reference is F.embedding's scaling
    # (the documented one, which PyTorch's CUDA embedding_bag also gives) reduced per bag.
    gw, tw = _weight(9, 4, device)
    gi, ti = _ints(_IDX, device)
    g_out = F.embedding_bag(gi, gw, _ints([0, 4, 6], device)[0], mode=mode,
                            scale_grad_by_freq=True)
    rows = TF.embedding(ti, tw, scale_grad_by_freq=True)
    t_out = torch.stack([rows[a:b].sum(0) if mode == "sum" else rows[a:b].mean(0)
                         for a, b in [(0, 4), (4, 6), (6, 10)]])
    assert_close(g_out, t_out.detach(), atol=1e-10, rtol=1e-10)
    _backward(g_out, t_out, device)
    assert_close(gw.grad, tw.grad, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("mode", MODES)
def test_max_norm(device, mode):
    gw, tw = _check_bag(device, _IDX, [0, 4, 6], mode=mode, max_norm=1.0)
    assert_close(gw.detach(), tw.detach(), atol=1e-10, rtol=1e-10)   # renormed in place
    used = sorted(set(_IDX))
    assert np.all(np.linalg.norm(gw.detach().cpu().numpy()[used], axis=1) <= 1.0 + 1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_sparse_gradient(device, mode):
    gw, _ = _check_bag(device, _IDX, [0, 4, 4, 6], mode=mode, sparse=True, padding_idx=4)
    assert gw.grad.layout is gt.sparse_coo


def test_empty_input(device):
    gw, tw = _weight(5, 3, device)
    out = F.embedding_bag(gt.zeros(0, dtype=gt.int64, device=device), gw,
                          gt.tensor([0, 0], device=device))
    assert_close(out, torch.zeros(2, 3, dtype=torch.float64))
    out = F.embedding_bag(gt.zeros(0, 3, dtype=gt.int64, device=device), gw)
    assert tuple(out.shape) == (0, 3)
    # (2, 0): two empty fixed-size bags (PyTorch raises 'step must be nonzero' here)
    out = F.embedding_bag(gt.zeros(2, 0, dtype=gt.int64, device=device), gw, mode="max")
    assert_close(out, torch.zeros(2, 3, dtype=torch.float64))
    out.sum().backward()
    assert_close(gw.grad, torch.zeros(5, 3, dtype=torch.float64))


def test_module(device):
    bag = gt.nn.EmbeddingBag(6, 3, mode="max", padding_idx=-2, include_last_offset=True,
                             max_norm=2.0, device=device, dtype=gt.float64)
    ref = torch.nn.EmbeddingBag(6, 3, mode="max", padding_idx=-2, include_last_offset=True,
                                max_norm=2.0)
    assert repr(bag) == repr(ref) == \
        "EmbeddingBag(6, 3, max_norm=2.0, mode='max', padding_idx=4)"
    assert repr(gt.nn.EmbeddingBag(5, 2)) == repr(torch.nn.EmbeddingBag(5, 2))
    assert repr(gt.nn.EmbeddingBag(5, 2, norm_type=1.0, scale_grad_by_freq=True, mode="sum")) \
        == repr(torch.nn.EmbeddingBag(5, 2, norm_type=1.0, scale_grad_by_freq=True, mode="sum"))
    assert bag.weight.dtype is gt.float64 and bag.weight.requires_grad
    assert float(bag.weight[4].abs().sum()) == 0
    assert set(dict(bag.named_parameters())) == {"weight"}

    arr = random_array((6, 3), gt.float64, seed=1)
    g = gt.nn.EmbeddingBag.from_pretrained(gt.tensor(arr, device=device), mode="sum")
    t = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(arr.copy()), mode="sum")
    assert not g.weight.requires_grad and repr(g) == repr(t)
    gi, ti = _ints([1, 4, 4, 2, 0, 5], device)
    go, to = _ints([0, 2], device)
    gp = gt.tensor(np.arange(6.0), device=device)
    assert_close(g(gi, go, gp), t(ti, to, torch.arange(6.0, dtype=torch.float64)))
    g = gt.nn.EmbeddingBag.from_pretrained(gt.tensor(arr, device=device), freeze=False)
    assert g.weight.requires_grad
    with pytest.raises(AssertionError, match="2-dimensional"):
        gt.nn.EmbeddingBag.from_pretrained(gt.tensor(arr[0]))
    with pytest.raises(AssertionError, match="padding_idx must be within num_embeddings"):
        gt.nn.EmbeddingBag(4, 2, padding_idx=4)
    with pytest.raises(AssertionError, match="Shape of weight"):
        gt.nn.EmbeddingBag(4, 2, _weight=gt.zeros(3, 2))


def _bag_error_cases():
    i = [1, 2, 3, 4, 5]
    f64 = "float64"
    return {
        "first-offset": dict(input=i, offsets=[1, 3]),
        "last-offset": dict(input=i, offsets=[0, 3, 7]),
        "last-offset-incl": dict(input=i, offsets=[0, 3, 6], include_last_offset=True),
        "index-high": dict(input=[1, 2, 10], offsets=[0, 2]),
        "index-neg": dict(input=[1, 2, -1], offsets=[0, 2]),
        "mode": dict(input=i, offsets=[0, 2], mode="foo"),
        "max-sparse": dict(input=i, offsets=[0, 2], mode="max", sparse=True),
        "max-freq": dict(input=i, offsets=[0, 2], mode="max", scale_grad_by_freq=True),
        "psw-mean": dict(input=i, offsets=[0, 2], psw=(5, f64)),
        "psw-shape": dict(input=i, offsets=[0, 2], mode="sum", psw=(4, f64)),
        "psw-dtype": dict(input=i, offsets=[0, 2], mode="sum", psw=(5, "float32")),
        "weight-1d": dict(input=i, offsets=[0, 2], weight=(3,)),
        "weight-int": dict(input=i, offsets=[0, 2], weight_dtype="int32"),
        "offsets-2d-input": dict(input=[i], offsets=[0, 2]),
        "no-offsets": dict(input=i),
        "offsets-2d": dict(input=i, offsets=[[0, 2]]),
        "input-3d": dict(input=[[i]]),
        "float-input": dict(input=i, input_dtype="float32", offsets=[0, 2]),
        "float-offsets": dict(input=i, offsets=[0, 2], offsets_dtype="float32"),
        "padding-high": dict(input=i, offsets=[0, 2], padding_idx=10),
        "padding-low": dict(input=i, offsets=[0, 2], padding_idx=-11),
    }


def _make_bag_args(lib, case):
    tensor = gt.tensor if lib is gt else torch.tensor
    dt = lambda name: getattr(lib, name)   # noqa: E731
    w_shape = case.get("weight", (10, 3))
    weight = lib.ones(*w_shape, dtype=dt(case.get("weight_dtype", "float64")))
    args = [tensor(case["input"], dtype=dt(case.get("input_dtype", "int64"))), weight]
    kwargs = {k: case[k] for k in ("mode", "sparse", "scale_grad_by_freq", "padding_idx",
                                   "include_last_offset") if k in case}
    if "offsets" in case:
        kwargs["offsets"] = tensor(case["offsets"], dtype=dt(case.get("offsets_dtype", "int64")))
    if "psw" in case:
        n, name = case["psw"]
        kwargs["per_sample_weights"] = lib.ones(n, dtype=dt(name))
    return args, kwargs


@pytest.mark.parametrize("name", list(_bag_error_cases()))
def test_embedding_bag_errors(name):
    case = _bag_error_cases()[name]
    t_args, t_kwargs = _make_bag_args(torch, case)
    with pytest.raises(Exception) as t_err:
        TF.embedding_bag(*t_args, **t_kwargs)
    g_args, g_kwargs = _make_bag_args(gt, case)
    with pytest.raises(type(t_err.value)) as g_err:
        F.embedding_bag(*g_args, **g_kwargs)
    expected = str(t_err.value).split("\n")[0].replace("torch.", "gputensor.")
    expected = expected.replace("<class 'gputensor.Tensor'>",
                                "<class 'gputensor._tensor.Tensor'>")
    assert str(g_err.value) == expected


# == ctc_loss ===================================================================================
def _ctc_inputs(T, N, C, S, seed=0, blank=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, C))
    labels = [c for c in range(C) if c != blank]
    targets = rng.choice(labels, (N, S))
    return x, targets


def _ctc_pair(x, targets, in_lens, tg_lens, device, layout="padded", dtype=gt.float64,
              log_softmax=True, lengths_as="tensor", **kwargs):
    """ctc_loss on both sides from the same logits; returns outputs and logits leaves."""
    gx = gt.tensor(x, dtype=dtype, device=device).requires_grad_()
    tx = torch.tensor(x, dtype=getattr(torch, dtype.name)).requires_grad_()
    if layout == "concat":
        targets = np.concatenate([targets[n, :k] for n, k in enumerate(tg_lens)])
    if lengths_as == "tensor":
        gl = (gt.tensor(in_lens, device=device), gt.tensor(tg_lens, device=device))
        tl = (torch.tensor(in_lens), torch.tensor(tg_lens))
    else:
        gl = tl = (tuple(in_lens), tuple(tg_lens))
    g_lp = gx.log_softmax(-1) if log_softmax else gx
    t_lp = tx.log_softmax(-1) if log_softmax else tx
    g = F.ctc_loss(g_lp, gt.tensor(targets, device=device), *gl, **kwargs)
    t = TF.ctc_loss(t_lp, torch.tensor(targets), *tl, **kwargs)
    return g, t, gx, tx


def _check_ctc(g, t, gx, tx, device, tol=1e-8):
    assert_close(g, t.detach(), atol=tol, rtol=tol)
    _backward(g, t, device)
    assert_close(gx.grad, tx.grad, atol=tol, rtol=tol)


_CTC_CASES = {   # (T, N, C, S), input lengths, target lengths
    "batch1": ((6, 1, 4, 3), [6], [3]),
    "batch3": ((8, 3, 5, 4), [8, 5, 7], [4, 2, 0]),
    "batch4-short": ((10, 4, 6, 5), [10, 9, 3, 10], [5, 1, 1, 3]),
}


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("layout", ["padded", "concat"])
@pytest.mark.parametrize("case", list(_CTC_CASES))
def test_ctc_parity(device, reduction, layout, case):
    shape, in_lens, tg_lens = _CTC_CASES[case]
    x, targets = _ctc_inputs(*shape)
    targets[0, 1] = targets[0, 0]   # a repeated label: the skip transition is barred
    _check_ctc(*_ctc_pair(x, targets, in_lens, tg_lens, device, layout, reduction=reduction),
               device)


@pytest.mark.parametrize("log_softmax", [True, False], ids=["logits", "log_probs"])
def test_ctc_blank_not_zero_and_log_probs_gradient(device, log_softmax):
    # the gradient for log_probs itself is PyTorch's exp(log_probs) - posterior
    x, targets = _ctc_inputs(7, 2, 5, 3, seed=1, blank=3)
    _check_ctc(*_ctc_pair(x, targets, [7, 6], [3, 2], device, blank=3, reduction="sum",
                          log_softmax=log_softmax), device)
    x, targets = _ctc_inputs(7, 2, 5, 3, seed=2, blank=4)
    _check_ctc(*_ctc_pair(x, targets, [5, 7], [2, 3], device, "concat", blank=4,
                          lengths_as="tuple", log_softmax=log_softmax), device)


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_ctc_impossible_alignment(device, zero_infinity, reduction):
    # entry 0 needs 3 labels in 2 frames; entry 2 needs 4 frames for "1 1" plus 1: 3 < 4
    x, targets = _ctc_inputs(6, 3, 4, 3, seed=3)
    targets[2] = [1, 1, 2]
    g, t, gx, tx = _ctc_pair(x, targets, [2, 5, 4], [3, 2, 3], device, reduction=reduction,
                             zero_infinity=zero_infinity)
    _check_ctc(g, t, gx, tx, device)   # inf/NaN where PyTorch has them
    assert bool(gt.isinf(g).any()) != zero_infinity


def test_ctc_zero_lengths(device):
    x, targets = _ctc_inputs(5, 3, 4, 2, seed=4)
    _check_ctc(*_ctc_pair(x, targets, [0, 0, 5], [0, 1, 2], device, reduction="none"), device)
    g, t, gx, tx = _ctc_pair(x, targets, [0, 0, 0], [0, 1, 0], device, reduction="sum")
    _check_ctc(g, t, gx, tx, device)   # no frames at all: constant losses, zero gradients
    g, t, gx, tx = _ctc_pair(x, targets[:, :0], [5, 3, 4], [0, 0, 0], device)
    _check_ctc(g, t, gx, tx, device)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_ctc_unbatched(device, reduction):
    x, targets = _ctc_inputs(6, 1, 4, 3, seed=5)
    gx = gt.tensor(x[:, 0], device=device).requires_grad_()
    tx = torch.tensor(x[:, 0]).requires_grad_()
    g = F.ctc_loss(gx.log_softmax(-1), gt.tensor(targets[0], device=device), gt.tensor(6),
                   gt.tensor(3), reduction=reduction)
    t = TF.ctc_loss(tx.log_softmax(-1), torch.tensor(targets[0]), torch.tensor(6),
                    torch.tensor(3), reduction=reduction)
    assert tuple(g.shape) == tuple(t.shape) == ()
    _check_ctc(g, t, gx, tx, device)


def test_ctc_float32_and_module(device):
    x, targets = _ctc_inputs(9, 2, 6, 4, seed=6)
    _check_ctc(*_ctc_pair(x, targets, [9, 8], [4, 3], device, dtype=gt.float32), device,
               tol=2e-5)
    loss = gt.nn.CTCLoss(blank=5, reduction="sum", zero_infinity=True)
    ref = torch.nn.CTCLoss(blank=5, reduction="sum", zero_infinity=True)
    assert repr(loss) == repr(ref) == "CTCLoss()"
    assert (loss.blank, loss.reduction, loss.zero_infinity) == (5, "sum", True)
    lp = gt.tensor(x, device=device).log_softmax(-1)
    got = loss(lp, gt.tensor(targets, device=device), (9, 8), (4, 3))
    want = ref(torch.tensor(x).log_softmax(-1), torch.tensor(targets), (9, 8), (4, 3))
    assert_close(got, want, atol=1e-10, rtol=1e-10)


def _ctc_error_cases():
    return {
        "input-too-long": dict(il=[7, 5]),
        "target-too-long": dict(tl=[4, 2]),
        "target-lengths-size": dict(tl=[3, 2, 1]),
        "input-lengths-size": dict(il=[6]),
        "blank-high": dict(blank=4),
        "blank-neg": dict(blank=-1),
        "reduction": dict(reduction="foo"),
        "float-input-lengths": dict(il_dtype="float32"),
        "float-target-lengths": dict(tl_dtype="float32"),
        "half": dict(dtype="float16"),
        "long-log-probs": dict(dtype="int64"),
        "concat-size": dict(targets="concat4"),
        "batch-size": dict(targets="batch1"),
        "neg-target-length": dict(tl=[-1, 2]),
        "neg-input-length": dict(il=[-1, 5]),
        "targets-3d": dict(targets="3d"),
        "log-probs-4d": dict(lp="4d"),
        "log-probs-1d": dict(lp="1d"),
        "mixed-lengths": dict(il=(6, 5)),
        "empty": dict(lp="empty"),
        "empty-4d": dict(lp="empty4d"),
    }


def _make_ctc_args(lib, case):
    tensor = gt.tensor if lib is gt else torch.tensor
    rng = np.random.default_rng(0)
    lp = tensor(rng.standard_normal((6, 2, 4))).log_softmax(2)
    lp = lp.to(getattr(lib, case.get("dtype", "float64")))
    if case.get("lp") == "4d":
        lp = lp.unsqueeze(0)
    elif case.get("lp") == "1d":
        lp = lp[:, 0, 0]
    elif case.get("lp") == "empty":
        lp = lp[:0]
    elif case.get("lp") == "empty4d":
        lp = lp[:0].unsqueeze(0)
    tg = tensor([[1, 2, 3], [2, 2, 1]])
    tg = {"concat4": tg.reshape(-1)[:4], "batch1": tg[:1], "3d": tg.unsqueeze(0)}.get(
        case.get("targets"), tg)
    il = case.get("il", [6, 5])
    il = il if isinstance(il, tuple) else tensor(il).to(getattr(lib, case.get("il_dtype",
                                                                              "int64")))
    tl = tensor(case.get("tl", [3, 2])).to(getattr(lib, case.get("tl_dtype", "int64")))
    return (lp, tg, il, tl), {k: case[k] for k in ("blank", "reduction") if k in case}


@pytest.mark.parametrize("name", list(_ctc_error_cases()))
def test_ctc_errors(name):
    case = _ctc_error_cases()[name]
    args, kwargs = _make_ctc_args(torch, case)
    with pytest.raises(Exception) as t_err:
        TF.ctc_loss(*args, **kwargs)
    args, kwargs = _make_ctc_args(gt, case)
    with pytest.raises(type(t_err.value)) as g_err:
        F.ctc_loss(*args, **kwargs)
    if not isinstance(t_err.value, TypeError):   # PyTorch's argument parser words its own
        assert str(g_err.value) == str(t_err.value)


def test_ctc_label_out_of_range():
    # PyTorch reads out of bounds here; gputensor says what is wrong
    lp = gt.zeros(4, 1, 3).log_softmax(2)
    with pytest.raises(RuntimeError, match=r"target labels must be in \[0, 3\), but got 5"):
        F.ctc_loss(lp, gt.tensor([[1, 5]]), (4,), (2,))
    # padding past a target's length is never read, whatever it holds
    got = F.ctc_loss(lp, gt.tensor([[1, -1]]), (4,), (1,))
    want = TF.ctc_loss(torch.zeros(4, 1, 3).log_softmax(2), torch.tensor([[1, 0]]), (4,), (1,))
    assert_close(got, want)
