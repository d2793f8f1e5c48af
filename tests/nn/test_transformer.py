"""Transformer, TransformerEncoder/Decoder and their layers against PyTorch: forward values and
the gradients of the inputs and of every parameter (eval mode, torch's state_dict copied
across), masks (bool, float, causal, key padding), causal-mask detection, state_dict names,
init, the causal mask generator and PyTorch's errors and warnings."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.nn.modules.transformer import _detect_is_causal_mask
from tests.helpers import assert_close, torch_dtype

torch = pytest.importorskip("torch")
from torch.nn.modules.transformer import (  # noqa: E402
    _detect_is_causal_mask as _torch_detect_is_causal_mask,
)

# torch's notes on its nested-tensor fast path (off for most layouts here; a prototype API).
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:torch")

E, HEADS, FF, N, S, T = 8, 2, 16, 2, 5, 4
TOLS = {gt.float64: {"atol": 1e-10, "rtol": 1e-9}, gt.float32: {"atol": 3e-5, "rtol": 1e-4}}


# -- helpers -------------------------------------------------------------------------------------
def _activation(spec, lib):
    """The activation argument for ``lib`` ("torch" or "gt") from a test spec."""
    if spec == "callable":   # a plain function: PyTorch's "activation_relu_or_gelu == 0" path
        return (lambda x: torch.tanh(x) * x) if lib == "torch" else (lambda x: gt.tanh(x) * x)
    if spec == "gelu_module":
        return torch.nn.GELU() if lib == "torch" else nn.GELU()
    return spec


def _ctor(ctor, lib):
    kw = dict(ctor)
    if "activation" in kw:
        kw["activation"] = _activation(kw["activation"], lib)
    return kw


def _load(g_mod, t_mod, device):
    state = {k: gt.tensor(v.detach().numpy(), device=device)
             for k, v in t_mod.state_dict().items()}
    result = g_mod.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def _pair(shape, device, seed, dtype):
    arr = np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype.np_dtype)
    return (gt.tensor(arr, device=device, requires_grad=True),
            torch.from_numpy(arr.copy()).requires_grad_())


def _bool_mask(shape, seed):
    """Random True (blocked) entries, never in column 0, so every row keeps a key."""
    arr = np.random.default_rng(seed).random(shape) < 0.35
    arr[..., 0] = False
    return arr


def _mask(kind, shape, seed, device, dtype):
    """(gt mask, torch mask) of ``kind``: bool / bool3d (True = blocked), float (additive,
    with some -inf), causal (float) or causal_bool, for a (rows, cols) or 3-D ``shape``."""
    if kind in ("causal", "causal_bool"):
        arr = np.triu(np.ones(shape, dtype=bool), 1)
        if kind == "causal":
            arr = np.where(arr, -np.inf, 0.0).astype(dtype.np_dtype)
    elif kind.startswith("bool"):
        arr = _bool_mask(shape, seed)
    else:
        blocked = _bool_mask(shape, seed)
        vals = np.random.default_rng(seed + 100).uniform(-1, 1, shape)
        arr = np.where(blocked, -np.inf, vals).astype(dtype.np_dtype)
    return gt.tensor(arr, device=device), torch.from_numpy(arr.copy())


def _masks(opts, shapes, device, dtype):
    """gt and torch keyword arguments for the mask options in ``opts``."""
    g_kw, t_kw = {}, {}
    for i, (name, kind) in enumerate(opts.items()):
        if name in shapes:
            g_kw[name], t_kw[name] = _mask(kind, shapes[name], 10 + i, device, dtype)
        elif name != "unbatched":
            g_kw[name] = t_kw[name] = kind      # is_causal flags
    return g_kw, t_kw


def _check(g_mod, t_mod, g_args, t_args, g_kw, t_kw, dtype):
    """Forward values, then the gradients of every input and parameter of a weighted sum."""
    tol = TOLS[dtype]
    g_out = g_mod(*g_args, **g_kw)
    t_out = t_mod(*t_args, **t_kw)
    assert_close(g_out, t_out, **tol)
    w = np.random.default_rng(99).uniform(-1, 1, tuple(t_out.shape)).astype(dtype.np_dtype)
    (g_out * gt.tensor(w, device=g_out.device)).sum().backward()
    (t_out * torch.from_numpy(w)).sum().backward()
    for g, t in zip(g_args, t_args, strict=True):
        assert_close(g.grad, t.grad, **tol)
    g_params = dict(g_mod.named_parameters())
    t_params = dict(t_mod.named_parameters())
    assert list(g_params) == list(t_params)
    for name, tp in t_params.items():
        assert g_params[name].grad is not None, name
        assert_close(g_params[name].grad, tp.grad, **tol)


def _seq(length, opts, batch_first):
    if opts.get("unbatched"):
        return (length, E)
    return (N, length, E) if batch_first else (length, N, E)


# -- encoder layer -------------------------------------------------------------------------------
# name -> (constructor kwargs, forward mask options)
ENCODER_LAYER_CASES = {
    "post_norm_relu": ({}, {}),
    "pre_norm": ({"norm_first": True}, {}),
    "gelu_batch_first": ({"activation": "gelu", "batch_first": True}, {}),
    "callable_activation": ({"activation": "callable"}, {"src_mask": "float"}),
    "gelu_module_pre_norm": ({"activation": "gelu_module", "norm_first": True}, {}),
    "float_mask": ({}, {"src_mask": "float"}),
    "bool_mask_pre_norm_batch_first": ({"norm_first": True, "batch_first": True},
                                       {"src_mask": "bool"}),
    "bool_mask_3d": ({}, {"src_mask": "bool3d"}),
    "key_padding_bool": ({}, {"src_key_padding_mask": "bool"}),
    "key_padding_float_with_float_mask": ({"batch_first": True},
                                          {"src_mask": "float", "src_key_padding_mask": "float"}),
    "causal": ({}, {"src_mask": "causal", "is_causal": True}),
    "causal_bool_key_padding": ({"batch_first": True, "norm_first": True},
                                {"src_mask": "causal_bool", "src_key_padding_mask": "bool",
                                 "is_causal": True}),
    "unbatched": ({"batch_first": True},
                  {"unbatched": True, "src_mask": "bool", "src_key_padding_mask": "bool"}),
    "no_bias": ({"bias": False}, {"src_mask": "bool"}),
}


@pytest.mark.parametrize("case", list(ENCODER_LAYER_CASES))
def test_encoder_layer_matches_torch(case, device):
    ctor, opts = ENCODER_LAYER_CASES[case]
    dtype = gt.float64
    torch.manual_seed(0)
    t_mod = torch.nn.TransformerEncoderLayer(E, HEADS, FF, **_ctor(ctor, "torch"),
                                             dtype=torch_dtype(dtype)).eval()
    g_mod = nn.TransformerEncoderLayer(E, HEADS, FF, **_ctor(ctor, "gt"), device=device,
                                       dtype=dtype).eval()
    _load(g_mod, t_mod, device)
    unbatched = opts.get("unbatched", False)
    shapes = {"src_mask": (N * HEADS, S, S) if opts.get("src_mask") == "bool3d" else (S, S),
              "src_key_padding_mask": (S,) if unbatched else (N, S)}
    g_kw, t_kw = _masks(opts, shapes, device, dtype)
    gx, tx = _pair(_seq(S, opts, ctor.get("batch_first", False)), device, 1, dtype)
    _check(g_mod, t_mod, [gx], [tx], g_kw, t_kw, dtype)


# -- decoder layer -------------------------------------------------------------------------------
DECODER_LAYER_CASES = {
    "post_norm": ({}, {}),
    "pre_norm_gelu_batch_first": ({"norm_first": True, "activation": "gelu",
                                   "batch_first": True}, {}),
    "causal_tgt_float_memory_mask": ({}, {"tgt_mask": "causal", "tgt_is_causal": True,
                                          "memory_mask": "float"}),
    "bool_masks_and_padding": ({"norm_first": True, "batch_first": True},
                               {"tgt_mask": "bool", "memory_mask": "bool",
                                "tgt_key_padding_mask": "bool",
                                "memory_key_padding_mask": "bool"}),
    "float_padding_callable": ({"activation": "callable"},
                               {"tgt_key_padding_mask": "float",
                                "memory_key_padding_mask": "float"}),
    "unbatched": ({}, {"unbatched": True, "tgt_mask": "causal_bool",
                       "memory_key_padding_mask": "bool"}),
}


@pytest.mark.parametrize("case", list(DECODER_LAYER_CASES))
def test_decoder_layer_matches_torch(case, device):
    ctor, opts = DECODER_LAYER_CASES[case]
    dtype = gt.float64
    torch.manual_seed(0)
    t_mod = torch.nn.TransformerDecoderLayer(E, HEADS, FF, **_ctor(ctor, "torch"),
                                             dtype=torch_dtype(dtype)).eval()
    g_mod = nn.TransformerDecoderLayer(E, HEADS, FF, **_ctor(ctor, "gt"), device=device,
                                       dtype=dtype).eval()
    _load(g_mod, t_mod, device)
    unbatched = opts.get("unbatched", False)
    shapes = {"tgt_mask": (T, T), "memory_mask": (T, S),
              "tgt_key_padding_mask": (T,) if unbatched else (N, T),
              "memory_key_padding_mask": (S,) if unbatched else (N, S)}
    g_kw, t_kw = _masks(opts, shapes, device, dtype)
    bf = ctor.get("batch_first", False)
    gt_tgt, t_tgt = _pair(_seq(T, opts, bf), device, 1, dtype)
    g_mem, t_mem = _pair(_seq(S, opts, bf), device, 2, dtype)
    _check(g_mod, t_mod, [gt_tgt, g_mem], [t_tgt, t_mem], g_kw, t_kw, dtype)


# -- stacks --------------------------------------------------------------------------------------
ENCODER_CASES = {
    # is_causal=None: the stack detects the causal mask and hands the hint to its layers.
    "final_norm_detected_causal": ({}, True, {"mask": "causal"}),
    "bool_mask_padding_batch_first": ({"batch_first": True, "norm_first": True}, True,
                                      {"mask": "bool", "src_key_padding_mask": "bool"}),
    "no_norm_float_padding": ({}, False, {"src_key_padding_mask": "float"}),
    "explicit_causal_bool": ({"batch_first": True}, True,
                             {"mask": "causal_bool", "is_causal": True}),
}


@pytest.mark.parametrize("case", list(ENCODER_CASES))
def test_encoder_matches_torch(case, device):
    ctor, final_norm, opts = ENCODER_CASES[case]
    dtype = gt.float64
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerEncoderLayer(E, HEADS, FF, **ctor, dtype=torch_dtype(dtype))
    t_norm = torch.nn.LayerNorm(E, dtype=torch_dtype(dtype)) if final_norm else None
    with warnings.catch_warnings():   # torch's note that its nested fast path is off
        warnings.simplefilter("ignore")
        t_mod = torch.nn.TransformerEncoder(t_layer, 2, t_norm).eval()
    g_layer = nn.TransformerEncoderLayer(E, HEADS, FF, **ctor, device=device, dtype=dtype)
    g_norm = nn.LayerNorm(E, device=device, dtype=dtype) if final_norm else None
    g_mod = nn.TransformerEncoder(g_layer, 2, g_norm).eval()
    _load(g_mod, t_mod, device)
    g_kw, t_kw = _masks(opts, {"mask": (S, S), "src_key_padding_mask": (N, S)}, device, dtype)
    gx, tx = _pair(_seq(S, opts, ctor.get("batch_first", False)), device, 1, dtype)
    _check(g_mod, t_mod, [gx], [tx], g_kw, t_kw, dtype)


@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_matches_torch(batch_first, device):
    dtype = gt.float64
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerDecoderLayer(E, HEADS, FF, batch_first=batch_first,
                                               dtype=torch_dtype(dtype))
    t_mod = torch.nn.TransformerDecoder(t_layer, 2, torch.nn.LayerNorm(
        E, dtype=torch_dtype(dtype))).eval()
    g_layer = nn.TransformerDecoderLayer(E, HEADS, FF, batch_first=batch_first, device=device,
                                         dtype=dtype)
    g_mod = nn.TransformerDecoder(g_layer, 2, nn.LayerNorm(E, device=device, dtype=dtype)).eval()
    _load(g_mod, t_mod, device)
    opts = {"tgt_mask": "causal", "memory_key_padding_mask": "float", "memory_mask": "float"}
    g_kw, t_kw = _masks(opts, {"tgt_mask": (T, T), "memory_mask": (T, S),
                               "memory_key_padding_mask": (N, S)}, device, dtype)
    gt_tgt, t_tgt = _pair(_seq(T, {}, batch_first), device, 1, dtype)
    g_mem, t_mem = _pair(_seq(S, {}, batch_first), device, 2, dtype)
    _check(g_mod, t_mod, [gt_tgt, g_mem], [t_tgt, t_mem], g_kw, t_kw, dtype)


# -- full model ----------------------------------------------------------------------------------
TRANSFORMER_CASES = {
    "post_norm_float_masks": ({}, gt.float64,
                              {"src_mask": "float", "tgt_mask": "causal",
                               "memory_mask": "float"}),
    "pre_norm_gelu_bool_padding": ({"norm_first": True, "activation": "gelu",
                                    "batch_first": True}, gt.float64,
                                   {"tgt_mask": "causal_bool", "src_key_padding_mask": "bool",
                                    "tgt_key_padding_mask": "bool",
                                    "memory_key_padding_mask": "bool"}),
    "unbatched": ({}, gt.float64, {"unbatched": True, "tgt_mask": "causal",
                                   "tgt_is_causal": True}),
    "float32": ({"batch_first": True}, gt.float32,
                {"src_mask": "bool", "tgt_mask": "causal_bool", "memory_mask": "bool"}),
}


@pytest.mark.parametrize("case", list(TRANSFORMER_CASES))
def test_transformer_matches_torch(case, device):
    ctor, dtype, opts = TRANSFORMER_CASES[case]
    torch.manual_seed(0)
    kw = {"d_model": E, "nhead": HEADS, "num_encoder_layers": 2, "num_decoder_layers": 1,
          "dim_feedforward": FF, **ctor}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_mod = torch.nn.Transformer(**kw, dtype=torch_dtype(dtype)).eval()
    g_mod = nn.Transformer(**kw, dtype=dtype).to(device).eval()
    _load(g_mod, t_mod, device)
    unbatched = opts.get("unbatched", False)
    shapes = {"src_mask": (S, S), "tgt_mask": (T, T), "memory_mask": (T, S),
              "src_key_padding_mask": (N, S), "tgt_key_padding_mask": (N, T),
              "memory_key_padding_mask": (N, S)}
    assert not unbatched or not any("padding" in k for k in opts)
    g_kw, t_kw = _masks(opts, shapes, device, dtype)
    bf = ctor.get("batch_first", False)
    g_src, t_src = _pair(_seq(S, opts, bf), device, 1, dtype)
    g_tgt, t_tgt = _pair(_seq(T, opts, bf), device, 2, dtype)
    _check(g_mod, t_mod, [g_src, g_tgt], [t_src, t_tgt], g_kw, t_kw, dtype)


def test_custom_encoder_and_decoder():
    torch.manual_seed(0)
    t_enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, HEADS, FF), 1,
                                        enable_nested_tensor=False)
    t_dec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, HEADS, FF), 1)
    t_mod = torch.nn.Transformer(E, HEADS, custom_encoder=t_enc, custom_decoder=t_dec).eval()
    g_enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, HEADS, FF), 1,
                                  enable_nested_tensor=False)
    g_dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, HEADS, FF), 1)
    g_mod = nn.Transformer(E, HEADS, custom_encoder=g_enc, custom_decoder=g_dec).eval()
    assert g_mod.encoder is g_enc and g_mod.decoder is g_dec
    assert list(g_mod.state_dict()) == list(t_mod.state_dict())
    _load(g_mod, t_mod, "cpu")
    g_src, t_src = _pair((S, N, E), "cpu", 1, gt.float32)
    g_tgt, t_tgt = _pair((T, N, E), "cpu", 2, gt.float32)
    _check(g_mod, t_mod, [g_src, g_tgt], [t_src, t_tgt], {}, {}, gt.float32)


def test_train_mode():
    torch.manual_seed(0)
    # With dropout 0 training mode computes what eval mode does, in both libraries.
    t_mod = torch.nn.Transformer(E, HEADS, 1, 1, FF, dropout=0.0, dtype=torch.float64)
    g_mod = nn.Transformer(E, HEADS, 1, 1, FF, dropout=0.0, dtype=gt.float64)
    _load(g_mod, t_mod, "cpu")
    assert g_mod.training
    g_src, t_src = _pair((S, N, E), "cpu", 1, gt.float64)
    g_tgt, t_tgt = _pair((T, N, E), "cpu", 2, gt.float64)
    _check(g_mod, t_mod, [g_src, g_tgt], [t_src, t_tgt], {}, {}, gt.float64)
    # Dropout is live in training mode and off in eval mode.
    g_mod = nn.Transformer(E, HEADS, 1, 1, FF, dropout=0.5)
    src, tgt = gt.randn(S, N, E), gt.randn(T, N, E)
    out = g_mod(src, tgt)
    out.sum().backward()
    assert all(p.grad is not None for p in g_mod.parameters())
    g_mod.eval()
    with gt.no_grad():
        a, b = g_mod(src, tgt), g_mod(src, tgt)
    assert gt.equal(a, b) and not gt.allclose(a, out.detach())


def test_encoder_matches_torch_inference_fast_path():
    """PyTorch's no-grad nested-tensor path agrees except at padded positions (zeros there)."""
    torch.manual_seed(0)
    t_mod = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
        E, HEADS, FF, batch_first=True), 2).eval()
    assert t_mod.use_nested_tensor
    g_mod = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, HEADS, FF, batch_first=True),
                                  2).eval()
    assert g_mod.enable_nested_tensor and not g_mod.use_nested_tensor
    _load(g_mod, t_mod, "cpu")
    x = np.random.default_rng(1).uniform(-1, 1, (N, S, E)).astype(np.float32)
    kpm = np.zeros((N, S), dtype=bool)
    kpm[0, 3:] = True
    with torch.no_grad():
        want = t_mod(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(kpm)).numpy()
    got = g_mod(gt.tensor(x), src_key_padding_mask=gt.tensor(kpm)).detach().numpy()
    np.testing.assert_allclose(got[~kpm], want[~kpm], atol=3e-5, rtol=1e-4)
    np.testing.assert_array_equal(want[kpm], 0)


# -- structure, init, masks, errors --------------------------------------------------------------
def test_state_dict_names_and_load():
    torch.manual_seed(0)
    t_mod = torch.nn.Transformer(E, HEADS, 2, 2, FF)
    g_mod = nn.Transformer(E, HEADS, 2, 2, FF)
    t_state, g_state = t_mod.state_dict(), g_mod.state_dict()
    assert list(g_state) == list(t_state)
    assert all(tuple(g_state[k].shape) == tuple(v.shape) for k, v in t_state.items())
    for name in ("encoder.layers.1.self_attn.in_proj_weight", "encoder.norm.bias",
                 "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.layers.1.norm3.weight",
                 "decoder.layers.1.linear2.bias"):
        assert name in g_state
    _load(g_mod, t_mod, "cpu")
    for k, v in t_mod.state_dict().items():
        np.testing.assert_array_equal(g_mod.state_dict()[k].numpy(), v.numpy())
    g_nb = nn.Transformer(E, HEADS, 1, 1, FF, bias=False)
    t_nb = torch.nn.Transformer(E, HEADS, 1, 1, FF, bias=False)
    assert list(g_nb.state_dict()) == list(t_nb.state_dict())
    assert repr(nn.Transformer(E, HEADS, 1, 1, FF)) == repr(torch.nn.Transformer(E, HEADS, 1, 1,
                                                                                 FF))


def test_stacks_hold_independent_copies():
    layer = nn.TransformerEncoderLayer(E, HEADS, FF)
    enc = nn.TransformerEncoder(layer, 3)
    assert len(enc.layers) == enc.num_layers == 3 and enc.norm is None and enc.mask_check
    weights = [m.linear1.weight for m in enc.layers]
    assert len({id(w) for w in weights} | {id(layer.linear1.weight)}) == 4
    for w in weights:   # copies of the prototype's values, not new draws
        np.testing.assert_array_equal(w.detach().numpy(), layer.linear1.weight.detach().numpy())
    with gt.no_grad():
        enc.layers[0].linear1.weight.zero_()
    assert not gt.equal(enc.layers[1].linear1.weight, enc.layers[0].linear1.weight)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, HEADS, FF), 2, nn.LayerNorm(E))
    assert len(dec.layers) == dec.num_layers == 2 and isinstance(dec.norm, nn.LayerNorm)
    assert dec.layers[0].self_attn is not dec.layers[1].self_attn


def test_defaults_and_init():
    layer = nn.TransformerEncoderLayer(E, HEADS)
    t_layer = torch.nn.TransformerEncoderLayer(E, HEADS)
    assert repr(layer) == repr(t_layer)
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1
    assert layer.norm1.eps == 1e-5 and not layer.norm_first and not layer.self_attn.batch_first
    model = nn.Transformer()
    assert (model.d_model, model.nhead, len(model.encoder.layers),
            len(model.decoder.layers)) == (512, 8, 6, 6)
    model = nn.Transformer(E, HEADS, 1, 1, FF)
    # xavier_uniform_ re-initialises every matrix; vectors keep their layers' init.
    for name, p in model.named_parameters():
        if p.dim() > 1:
            bound = math.sqrt(6 / (p.shape[0] + p.shape[1]))
            assert np.abs(p.detach().numpy()).max() <= bound, name
        elif "norm" in name:
            expected = 1.0 if name.endswith("weight") else 0.0
            np.testing.assert_array_equal(p.detach().numpy(), expected)


@pytest.mark.parametrize("spec", ["relu", "gelu", "relu_fn", "gelu_fn", "relu_module",
                                  "gelu_module", "callable"])
def test_activation_choice(spec):
    choices = {"relu_fn": (torch.nn.functional.relu, nn.functional.relu),
               "gelu_fn": (torch.nn.functional.gelu, nn.functional.gelu),
               "relu_module": (torch.nn.ReLU(), nn.ReLU())}
    t_act, g_act = choices.get(spec, (_activation(spec, "torch"), _activation(spec, "gt")))
    t_layer = torch.nn.TransformerEncoderLayer(E, HEADS, FF, activation=t_act)
    g_layer = nn.TransformerEncoderLayer(E, HEADS, FF, activation=g_act)
    assert g_layer.activation_relu_or_gelu == t_layer.activation_relu_or_gelu
    if spec in ("relu", "gelu"):
        assert g_layer.activation is getattr(nn.functional, spec)
        assert nn.TransformerDecoderLayer(E, HEADS, FF, activation=spec).activation is \
            getattr(nn.functional, spec)
    if spec.endswith("module"):   # a module activation is a registered child, as in PyTorch
        assert dict(g_layer.named_children())["activation"] is g_act


def test_generate_square_subsequent_mask(device):
    for sz in (1, 4):
        got = nn.Transformer.generate_square_subsequent_mask(sz, device=device)
        assert_close(got, torch.nn.Transformer.generate_square_subsequent_mask(sz))
        assert got.dtype == gt.float32 and got.device == gt.device(device)
    got = nn.Transformer.generate_square_subsequent_mask(3, device=device, dtype=gt.float64)
    want = torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64)
    assert_close(got, want)
    assert got.dtype == gt.float64
    np.testing.assert_array_equal(got.cpu().numpy(), [[0, -np.inf, -np.inf], [0, 0, -np.inf],
                                                      [0, 0, 0]])
    # Callable on an instance too (it is a staticmethod).
    inst = nn.Transformer(E, HEADS, 1, 1, FF)
    assert gt.equal(inst.generate_square_subsequent_mask(2), gt.tensor([[0.0, -math.inf],
                                                                        [0.0, 0.0]]))


def test_detect_is_causal_mask():
    causal = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    masks = {"none": None, "float_causal": causal, "bool_causal": np.isinf(causal),
             "float_other": np.zeros((4, 4), np.float32), "bool_other": np.isinf(causal).T,
             "wrong_size": causal[:3, :3], "batched": np.stack([causal, causal])}
    for name, m in masks.items():
        g_m = None if m is None else gt.tensor(m)
        t_m = None if m is None else torch.from_numpy(m)
        for hint in (None, True, False):
            for size in (None, 4):
                got = _detect_is_causal_mask(g_m, hint, size)
                assert got == _torch_detect_is_causal_mask(t_m, hint, size), (name, hint, size)


def test_errors_match_torch():
    for ctor in ("TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer"):
        for d_model, nhead in ((10, 3), (8, 0), (0, 2)):
            with pytest.raises(Exception) as t_err:
                getattr(torch.nn, ctor)(d_model, nhead)
            with pytest.raises(t_err.type):
                getattr(nn, ctor)(d_model, nhead)
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        nn.TransformerEncoderLayer(10, 3)
    with pytest.raises(ValueError, match="must be greater than 0"):
        nn.TransformerDecoderLayer(8, 0)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(E, HEADS, activation="tanh")
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.Transformer(E, HEADS, 1, 1, activation="tanh")

    model = nn.Transformer(E, HEADS, 1, 1, FF)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model(gt.randn(S, 2, E), gt.randn(T, 3, E))
    model_bf = nn.Transformer(E, HEADS, 1, 1, FF, batch_first=True)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model_bf(gt.randn(2, S, E), gt.randn(3, T, E))
    with pytest.raises(RuntimeError, match="feature number of src and tgt must be equal to"):
        model(gt.randn(S, 2, E), gt.randn(T, 2, E + 2))

    layer = nn.TransformerEncoderLayer(E, HEADS, FF)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        layer(gt.randn(S, N, E), is_causal=True)
    with pytest.raises(AssertionError, match="only bool and floating types of src_mask"):
        layer(gt.randn(S, N, E), src_mask=gt.zeros((S, S), dtype=gt.int64))
    with pytest.raises(AssertionError, match="only bool and floating types of src_key_padding"):
        layer(gt.randn(S, N, E), src_key_padding_mask=gt.zeros((N, S), dtype=gt.int64))


def test_mismatched_mask_types_warn_like_torch():
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerEncoderLayer(E, HEADS, FF).eval()
    g_layer = nn.TransformerEncoderLayer(E, HEADS, FF).eval()
    _load(g_layer, t_layer, "cpu")
    x = np.random.default_rng(0).uniform(-1, 1, (S, N, E)).astype(np.float32)
    mask = np.random.default_rng(1).uniform(-1, 1, (S, S)).astype(np.float32)
    kpm = _bool_mask((N, S), 2)
    message = "Support for mismatched src_key_padding_mask and src_mask is deprecated"
    with pytest.warns(UserWarning, match=message):
        want = t_layer(torch.from_numpy(x), src_mask=torch.from_numpy(mask),
                       src_key_padding_mask=torch.from_numpy(kpm))
    with pytest.warns(UserWarning, match=message):
        got = g_layer(gt.tensor(x), src_mask=gt.tensor(mask),
                      src_key_padding_mask=gt.tensor(kpm))
    assert_close(got, want.detach(), **TOLS[gt.float32])
