"""MultiheadAttention and scaled_dot_product_attention against PyTorch: forward, backward,
masks, parameter layout and init."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
import gputensor.nn.functional as F
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"atol": 2e-5, "rtol": 1e-4}


def _pair(shape, device, seed, requires_grad=True):
    arr = random_array(shape, gt.float32, -1.0, 1.0, seed)
    g = gt.tensor(arr, device=device).requires_grad_(requires_grad)
    t = torch.from_numpy(arr.copy()).requires_grad_(requires_grad)
    return g, t


def _load_from_torch(g_mod, t_mod, device):
    state = {k: gt.tensor(v.detach().numpy(), device=device)
             for k, v in t_mod.state_dict().items()}
    result = g_mod.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def _loss(g, t, seed=50):
    w = random_array(tuple(t.shape), gt.float32, -1.0, 1.0, seed)
    return (g * gt.tensor(w, device=g.device)).sum(), (t * torch.from_numpy(w)).sum()


def _bool_mask(shape, seed, p=0.3):
    """A random bool mask (True with probability p) that leaves every row some False entry."""
    arr = np.random.default_rng(seed).random(shape) < p
    arr[..., 0] = False
    return arr


# name -> (constructor kwargs, forward options)
MHA_CASES = {
    "self": ({}, {}),
    "batch_first": ({"batch_first": True}, {}),
    "kdim_vdim": ({"kdim": 5, "vdim": 3}, {"cross": True}),
    "encoder_decoder": ({}, {"kv_shared": True}),
    "bias_kv_zero_attn": ({"add_bias_kv": True, "add_zero_attn": True},
                          {"key_padding_mask": "float", "attn_mask": "float"}),
    "bias_kv_batch_first_cross": ({"add_bias_kv": True, "batch_first": True, "kdim": 5,
                                   "vdim": 3}, {"cross": True, "key_padding_mask": "bool"}),
    "no_bias": ({"bias": False}, {"attn_mask": "bool"}),
    "unbatched_ignores_batch_first": ({"batch_first": True}, {"unbatched": True}),
    "unbatched": ({}, {"unbatched": True, "key_padding_mask": "bool"}),
    "kpm_float_per_head": ({"batch_first": True},
                           {"key_padding_mask": "float", "average_attn_weights": False}),
    "mask3d_no_weights": ({}, {"attn_mask": "bool3d", "need_weights": False}),
    "causal": ({}, {"attn_mask": "causal", "is_causal": True}),
    "causal_no_weights": ({"batch_first": True},
                          {"attn_mask": "causal", "is_causal": True, "need_weights": False}),
}


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_mha_matches_torch(case, device):
    ctor, opts = MHA_CASES[case]
    E, heads, L, S, N = 8, 2, 4, 5, 3
    torch.manual_seed(0)
    t_mod = torch.nn.MultiheadAttention(E, heads, **ctor)
    g_mod = nn.MultiheadAttention(E, heads, **ctor).to(device)
    _load_from_torch(g_mod, t_mod, device)

    unbatched = opts.get("unbatched", False)
    bf = ctor.get("batch_first", False)

    def shape(length, dim):
        if unbatched:
            return (length, dim)
        return (N, length, dim) if bf else (length, N, dim)

    cross = opts.get("cross") or opts.get("kv_shared")
    gq, tq = _pair(shape(L, E), device, 1)
    if cross:
        gk, tk = _pair(shape(S, ctor.get("kdim", E)), device, 2)
        if opts.get("kv_shared"):
            gv, tv = gk, tk
        else:
            gv, tv = _pair(shape(S, ctor.get("vdim", E)), device, 3)
        leaves = [(gq, tq), (gk, tk)] + ([] if gv is gk else [(gv, tv)])
    else:
        S = L
        gk = gv = gq
        tk = tv = tq
        leaves = [(gq, tq)]

    kw_g, kw_t = {}, {}
    kpm = opts.get("key_padding_mask")
    if kpm is not None:
        mask = _bool_mask((S,) if unbatched else (N, S), 7)
        if kpm == "float":
            mask = np.where(mask, -1e9, 0).astype(np.float32) + \
                random_array(mask.shape, gt.float32, -1, 1, 8)
        kw_g["key_padding_mask"] = gt.tensor(mask, device=device)
        kw_t["key_padding_mask"] = torch.from_numpy(mask)
    am = opts.get("attn_mask")
    if am is not None:
        if am == "causal":
            mask = np.triu(np.ones((L, S), dtype=bool), 1)
        elif am == "bool":
            mask = _bool_mask((L, S), 9)
        elif am == "bool3d":
            mask = _bool_mask((N * heads, L, S), 10)
        else:
            mask = random_array((L, S), gt.float32, -2, 2, 11)
        kw_g["attn_mask"] = gt.tensor(mask, device=device)
        kw_t["attn_mask"] = torch.from_numpy(mask)
    for name in ("need_weights", "average_attn_weights", "is_causal"):
        if name in opts:
            kw_g[name] = kw_t[name] = opts[name]

    g_out, g_w = g_mod(gq, gk, gv, **kw_g)
    t_out, t_w = t_mod(tq, tk, tv, **kw_t)
    assert_close(g_out, t_out, **TOL)
    if t_w is None:
        assert g_w is None
    else:
        assert_close(g_w, t_w, **TOL)

    g_loss, t_loss = _loss(g_out, t_out)
    if t_w is not None:
        gl2, tl2 = _loss(g_w, t_w, 51)
        g_loss, t_loss = g_loss + gl2, t_loss + tl2
    g_loss.backward()
    t_loss.backward()
    for g, t in leaves:
        assert_close(g.grad, t.grad, **TOL)
    for name, tp in t_mod.named_parameters():
        gp = g_mod.get_parameter(name)
        assert gp.grad is not None, name
        assert_close(gp.grad, tp.grad, **TOL)


def test_mha_fully_masked_rows():
    # need_weights=False goes through SDPA (zeros for rows with no key left); need_weights=True
    # runs a plain softmax (NaN rows), in both libraries.
    torch.manual_seed(0)
    t_mod = torch.nn.MultiheadAttention(4, 2)
    g_mod = nn.MultiheadAttention(4, 2)
    _load_from_torch(g_mod, t_mod, "cpu")
    gx, tx = _pair((3, 2, 4), "cpu", 1, requires_grad=False)
    kpm = np.zeros((2, 3), dtype=bool)
    kpm[0] = True
    for need in (True, False):
        g_out, g_w = g_mod(gx, gx, gx, key_padding_mask=gt.tensor(kpm), need_weights=need)
        t_out, t_w = t_mod(tx, tx, tx, key_padding_mask=torch.from_numpy(kpm),
                           need_weights=need)
        assert_close(g_out, t_out, **TOL)
        if need:
            assert_close(g_w, t_w, **TOL)


def test_mha_parameters_and_init():
    t_mod = torch.nn.MultiheadAttention(8, 4, add_bias_kv=True, kdim=6, vdim=5)
    g_mod = nn.MultiheadAttention(8, 4, add_bias_kv=True, kdim=6, vdim=5)
    assert sorted((k, tuple(v.shape)) for k, v in g_mod.state_dict().items()) == \
        sorted((k, tuple(v.shape)) for k, v in t_mod.state_dict().items())
    assert g_mod.in_proj_weight is None and g_mod.q_proj_weight is not None
    assert not g_mod._qkv_same_embed_dim and g_mod.head_dim == 2

    g_mod = nn.MultiheadAttention(8, 2)
    assert repr(g_mod) == repr(torch.nn.MultiheadAttention(8, 2))
    assert g_mod.q_proj_weight is None and g_mod.bias_k is None
    np.testing.assert_array_equal(g_mod.in_proj_bias.detach().numpy(), 0)
    np.testing.assert_array_equal(g_mod.out_proj.bias.detach().numpy(), 0)
    bound = math.sqrt(6 / (8 + 24))   # xavier_uniform_ on (3E, E)
    w = g_mod.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.std() > bound / 4
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="greater than 0"):
        nn.MultiheadAttention(0, 1)


def test_mha_dropout():
    # p = 1 drops every attention weight: the output is the out_proj bias, in both libraries.
    torch.manual_seed(0)
    t_mod = torch.nn.MultiheadAttention(4, 2, dropout=1.0)
    g_mod = nn.MultiheadAttention(4, 2, dropout=1.0)
    _load_from_torch(g_mod, t_mod, "cpu")
    with torch.no_grad():
        t_mod.out_proj.bias.uniform_(-1, 1)
    _load_from_torch(g_mod, t_mod, "cpu")
    gx, tx = _pair((3, 2, 4), "cpu", 1, requires_grad=False)
    for need in (True, False):
        assert_close(g_mod(gx, gx, gx, need_weights=need)[0],
                     t_mod(tx, tx, tx, need_weights=need)[0], **TOL)
    g_mod.eval()
    t_mod.eval()
    assert_close(g_mod(gx, gx, gx)[0], t_mod(tx, tx, tx)[0], **TOL)


def test_mha_errors():
    m = nn.MultiheadAttention(4, 2)
    x = gt.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match="is_causal"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=gt.zeros(3, 4))
    with pytest.raises(AssertionError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=gt.zeros(2, 4, dtype=gt.bool))
    with pytest.raises(AssertionError, match="embedding dimension"):
        m(gt.randn(3, 2, 5), gt.randn(3, 2, 5), gt.randn(3, 2, 5))
    with pytest.raises(AssertionError, match="only bool and floating"):
        m(x, x, x, attn_mask=gt.zeros(3, 3, dtype=gt.int64))
    with pytest.raises(AssertionError, match="3-D"):
        m(x, gt.randn(3, 4), gt.randn(3, 4))


# -- scaled_dot_product_attention ----------------------------------------------------------------
SDPA_CASES = {
    "plain": ({}, (2, 3, 4, 5), 6),
    "bool_mask": ({"attn_mask": "bool"}, (2, 3, 4, 5), 6),
    "float_mask_bcast": ({"attn_mask": "float"}, (2, 3, 4, 5), 6),
    "causal": ({"is_causal": True}, (2, 2, 4, 6), 6),
    "causal_wide_scale": ({"is_causal": True, "scale": 0.3}, (3, 5, 4), 3),
    "3d_bool_all_masked_row": ({"attn_mask": "bool_empty_row"}, (3, 4, 4), 4),
    "gqa": ({"enable_gqa": True}, (1, 4, 3, 4), 4),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_matches_torch(case, device):
    opts, q_shape, S = SDPA_CASES[case]
    opts = dict(opts)
    *batch, L, E = q_shape
    kv_batch = list(batch)
    if opts.get("enable_gqa"):
        kv_batch[-1] = batch[-1] // 2
    gq, tq = _pair(q_shape, device, 1)
    gk, tk = _pair((*kv_batch, S, E), device, 2)
    gv, tv = _pair((*kv_batch, S, E + 1), device, 3)
    mask = opts.pop("attn_mask", None)
    kw_g, kw_t = dict(opts), dict(opts)
    if mask is not None:
        if mask == "float":
            arr = random_array((L, S), gt.float32, -2, 2, 4)
        else:
            arr = np.random.default_rng(5).random((*batch, L, S)) < 0.6
            arr[..., 0] = True
            if mask == "bool_empty_row":
                arr[1, 2] = False
        kw_g["attn_mask"] = gt.tensor(arr, device=device)
        kw_t["attn_mask"] = torch.from_numpy(arr)
    g_out = F.scaled_dot_product_attention(gq, gk, gv, **kw_g)
    t_out = TF.scaled_dot_product_attention(tq, tk, tv, **kw_t)
    assert_close(g_out, t_out, **TOL)
    g_loss, t_loss = _loss(g_out, t_out)
    g_loss.backward()
    t_loss.backward()
    for g, t in ((gq, tq), (gk, tk), (gv, tv)):
        assert_close(g.grad, t.grad, **TOL)


def test_sdpa_dropout_and_errors():
    q = gt.randn(2, 3, 4)
    v = gt.randn(2, 5, 6)
    out = F.scaled_dot_product_attention(q, gt.randn(2, 5, 4), v, dropout_p=1.0)
    np.testing.assert_array_equal(out.numpy(), 0)
    gt.manual_seed(0)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    gt.manual_seed(0)
    np.testing.assert_array_equal(a, F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
                                  .numpy())
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, gt.ones(3, 3, dtype=gt.bool), is_causal=True)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        F.scaled_dot_product_attention(q, q, q, gt.zeros(3, 3, dtype=gt.float64))


def test_sdpa_gradcheck():
    gt.manual_seed(0)
    q, k, v = (gt.randn(1, 2, s, 3, dtype=gt.float64, requires_grad=True) for s in (2, 3, 3))
    mask = gt.tensor([[True, False, True], [True, True, False]])
    assert gt.autograd.gradcheck(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask), (q, k, v))


def test_sdpa_gradgradcheck():
    gt.manual_seed(1)
    q, k, v = (gt.randn(1, 2, 3, dtype=gt.float64, requires_grad=True) for _ in range(3))
    assert gt.autograd.gradgradcheck(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))
