"""gt.onnx.export: models of the nn zoo exported, run by onnxruntime, compared with eager."""

import io
import math

import numpy as np
import pytest

import gputensor as gt

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

nn = gt.nn


def _flat(x):
    if isinstance(x, tuple | list):
        return [t for i in x for t in _flat(i)]
    return [x]


def _ort_run(proto_bytes, feeds):
    sess = ort.InferenceSession(proto_bytes, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: f for n, f in zip(names, feeds, strict=True)})


def _check(model, args, atol=1e-5, **kw):
    buf = io.BytesIO()
    gt.onnx.export(model, args, buf, **kw)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    args = args if isinstance(args, tuple) else (args,)
    got = _ort_run(buf.getvalue(), [a.cpu().numpy() for a in args])
    if isinstance(model, nn.Module):
        model.eval()
    with gt.no_grad():
        ref = _flat(model(*args))
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r.cpu().numpy(), atol=atol, rtol=1e-5)
    return proto


class _EmbedAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = nn.Linear(8, 5)

    def forward(self, idx):
        x = self.emb(idx)
        y, _ = self.attn(x, x, x, need_weights=False)
        q = x.view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2)
        z = nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        z = z.transpose(1, 2).reshape(x.shape[0], x.shape[1], 8)
        return self.head(nn.functional.gelu(y + z)).log_softmax(-1)


class _Rnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True)
        self.gru = nn.GRU(6, 5)
        self.out = nn.Linear(5, 2)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, hz = self.gru(y.transpose(0, 1))
        return self.out(z[-1]).tanh(), h, c, hz


def _cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.MaxPool2d(2), nn.Dropout(0.3), nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2),
        nn.SiLU(inplace=True),
        nn.GroupNorm(2, 8), nn.AvgPool2d(2), nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1,
                                                               output_padding=1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3), nn.Softmax(-1))


@pytest.fixture(autouse=True)
def _seed():
    gt.manual_seed(0)


def test_mlp(device):
    m = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(),
                      nn.Linear(8, 3)).to(device)
    proto = _check(m, (gt.randn(5, 4, device=device),), input_names=["x"],
                   output_names=["y"])
    assert [i.name for i in proto.graph.input] == ["x"]
    assert [o.name for o in proto.graph.output] == ["y"]
    assert {i.name for i in proto.graph.initializer} >= {"0.weight", "0.bias", "4.weight"}


def test_cnn(device):
    m = _cnn().to(device)
    # Non-trivial running statistics, so the eval-mode batch norm is checked.
    m[1].running_mean.copy_(gt.randn(8, device=device))
    m[1].running_var.copy_(gt.rand(8, device=device) + 0.5)
    _check(m.eval(), (gt.randn(2, 3, 16, 16, device=device),), atol=1e-5)


def test_conv1d_and_elementwise(device):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(3, 4, 3, stride=2, padding=1)

        def forward(self, x):
            y = self.conv(x)
            y = gt.cat([y, y.exp().sqrt() - 1, (y.abs() + 1).log() / 2], dim=1)
            y = gt.where(y > 0, y ** 2, -y).clamp(-1.5, 1.5)
            a, b = y.split(6, dim=1)
            return (a * b).sum(-1), b.mean(dim=(1, 2), keepdim=True), y.amax(1), y[:, 1:4, ::2]
    _check(M().to(device), (gt.randn(2, 3, 10, device=device),))


def test_shape_and_indexing_ops(device):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(gt.randn(4, 5))
            self.conv = nn.Conv2d(2, 2, 3, padding="same")
            self.register_buffer("idx", gt.tensor([2, 0, 1]))

        def forward(self, x, y):
            a = gt.mm(x.reshape(-1, 4), self.w)                      # (6, 5)
            b = gt.bmm(y, y.permute(0, 2, 1))                        # (2, 3, 3)
            c = gt.index_select(b, 1, self.idx)[..., None, 1:]       # (2, 3, 1, 2)
            d = gt.stack([a[:, 0], a[:, -1]], dim=1).unsqueeze(0)    # (1, 6, 2)
            e = d.narrow(1, 2, 3).squeeze(0).expand(2, 3, 2)         # (2, 3, 2)
            f = gt.minimum(e, c.squeeze(2)) + gt.maximum(e, 0.5 * c[:, :, 0])
            m = b.tril(-1) != 0
            g = \
                b.masked_fill(m, 2.0).abs().rsqrt()
            h = nn.functional.leaky_relu(self.conv(y[:, None, :, :2].expand(2, 2, 3, 2)), 0.2)
            return f, g, h, y[1], y[:, gt.tensor([0, 2])]
    _check(M().to(device), (gt.randn(2, 3, 4, device=device), gt.randn(2, 3, 4, device=device)))


def test_activation_padding_and_reduction_ops(device):
    F = nn.functional

    def f(x, y):
        m = (x > 0).float()
        p = F.pad(x, (1, 2, 0, 1), value=0.5) + 0 * F.pad(x, (1, 2, 0, 1), mode="reflect")
        q = F.pad(x, (2, 0), mode="replicate")
        acts = F.relu6(x * 4) + F.hardtanh(x) + F.elu(x, 0.7) + F.softplus(x, beta=2) + \
            F.hardswish(x) + F.mish(x) + F.normalize(x, dim=1) + x.square()
        v, i = x.max(1)
        w, j = x.min(2, keepdim=True)
        return (m, p, q, acts, v, i, w, j, x.max(), gt.max(x, y), x.repeat(2, 1, 1, 1),
                x.norm(dim=1), x.prod(1), x.cumsum(2), x.double().sum(-1), x.long())
    args = (gt.randn(2, 3, 4, device=device), gt.randn(2, 3, 4, device=device))
    _check(f, args)


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_gelu_opsets(opset):
    m = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 4), nn.GELU("tanh"))
    proto = _check(m, (gt.randn(2, 3),), opset_version=opset)
    assert ("Gelu" in {n.op_type for n in proto.graph.node}) == (opset >= 20)


class _TinyGPT(nn.Module):
    """nanoGPT's shape: token + position embeddings, a masked attention written out with a
    registered causal buffer, tied output weights."""

    def __init__(self, vocab=11, n=8, heads=2, block=6):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n), nn.Embedding(block, n)
        self.ln = nn.LayerNorm(n)
        self.qkv, self.proj = nn.Linear(n, 3 * n), nn.Linear(n, n)
        self.mlp = nn.Sequential(nn.Linear(n, 4 * n), nn.GELU(), nn.Linear(4 * n, n))
        self.head = nn.Linear(n, vocab, bias=False)
        self.head.weight = self.wte.weight
        self.heads = heads
        self.register_buffer("bias", gt.tril(gt.ones(block, block)).view(1, 1, block, block))

    def forward(self, idx):
        b, t = idx.size()
        x = self.wte(idx) + self.wpe(gt.arange(0, t, dtype=gt.long, device=idx.device))
        q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], dim=2)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = nn.functional.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, -1))
        x = x + self.mlp(self.ln(x))
        return self.head(x[:, [-1], :])


def test_tiny_gpt(device):
    m = _TinyGPT().to(device)
    proto = _check(m, (gt.randint(0, 11, (2, 5), device=device),))
    assert sum(i.name == "wte.weight" for i in proto.graph.initializer) == 1  # tied, stored once


def test_transformer_encoder_layer(device):
    m = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True,
                                   activation="gelu").to(device)
    _check(m, (gt.randn(2, 6, 16, device=device),), atol=1e-5)


def test_lstm_gru(device):
    _check(_Rnn().to(device), (gt.randn(3, 5, 4, device=device),))


def test_embedding_attention(device):
    idx = gt.randint(0, 20, (2, 7), device=device)
    _check(_EmbedAttn().to(device), (idx,))


def test_dynamic_axes_batch(device):
    m = _cnn().to(device).eval()
    buf = io.BytesIO()
    gt.onnx.export(m, (gt.randn(2, 3, 16, 16, device=device),), buf, input_names=["img"],
                   output_names=["p"], dynamic_axes={"img": {0: "batch"}, "p": [0]})
    proto = onnx.load_from_string(buf.getvalue())
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "p_dynamic_axes_1"
    x = gt.randn(5, 3, 16, 16, device=device)
    (got,) = _ort_run(buf.getvalue(), [x.cpu().numpy()])
    with gt.no_grad():
        np.testing.assert_allclose(got, m(x).cpu().numpy(), atol=1e-5, rtol=1e-5)


def test_dynamic_axes_expand_and_merged_dims(device):
    class ViTish(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, 8, 4, stride=4)
            self.cls = nn.Parameter(gt.randn(1, 1, 8))
            self.pos = nn.Parameter(gt.randn(1, 5, 8))
            self.block = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)           # (B, 4, 8)
            x = gt.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            x = self.block(x)
            return x.reshape(-1, 8).view(x.shape[0], 5, 8)[:, 0]
    m = ViTish().to(device).eval()
    buf = io.BytesIO()
    gt.onnx.export(m, (gt.randn(2, 3, 8, 8, device=device),), buf,
                   dynamic_axes={"input_0": {0: "batch"}})
    x = gt.randn(4, 3, 8, 8, device=device)
    (got,) = _ort_run(buf.getvalue(), [x.cpu().numpy()])
    with gt.no_grad():
        np.testing.assert_allclose(got, m(x).cpu().numpy(), atol=1e-5, rtol=1e-5)


def test_dynamic_axes_sequence():
    m = _EmbedAttn().eval()
    buf = io.BytesIO()
    gt.onnx.export(m, (gt.randint(0, 20, (2, 7)),), buf, input_names=["idx"],
                   dynamic_axes={"idx": {0: "batch"}})
    x = gt.randint(0, 20, (3, 7))
    (got,) = _ort_run(buf.getvalue(), [x.numpy()])
    with gt.no_grad():
        np.testing.assert_allclose(got, m(x).numpy(), atol=1e-5, rtol=1e-5)
    # is_causal's mask is made for the traced length: a constant that follows the axis.
    with pytest.raises(gt.onnx.OnnxExporterError, match="depends on a dynamic axis"):
        gt.onnx.export(m, (gt.randint(0, 20, (2, 7)),), io.BytesIO(), input_names=["idx"],
                       dynamic_axes={"idx": {0: "batch", 1: "seq"}})


def test_constant_folding_off_and_params_as_inputs():
    m = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)).eval()
    m[1].running_var.fill_(2.0)
    x = gt.randn(1, 2, 5, 5)
    folded = _check(m, (x,))
    unfolded = _check(m, (x,), do_constant_folding=False)
    assert len(unfolded.graph.node) > len(folded.graph.node)
    buf = io.BytesIO()
    gt.onnx.export(m, (x,), buf, export_params=False)
    proto = onnx.load_from_string(buf.getvalue())
    names = [i.name for i in proto.graph.input]
    assert names[0] == "input_0" and "0.weight" in names and "1.bias" in names
    assert not any(i.name == "0.weight" for i in proto.graph.initializer)
    kept = onnx.load_from_string(_export_bytes(m, x, keep_initializers_as_inputs=True))
    assert {i.name for i in kept.graph.initializer} <= {i.name for i in kept.graph.input}


def _export_bytes(m, x, **kw):
    buf = io.BytesIO()
    gt.onnx.export(m, (x,), buf, **kw)
    return buf.getvalue()


def test_file_path_opset_and_modes(tmp_path, capsys):
    m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.GELU(approximate="tanh"))
    m.train()
    path = tmp_path / "m.onnx"
    gt.onnx.export(m, gt.randn(2, 3), str(path), opset_version=17, verbose=True)
    assert "Gemm" in capsys.readouterr().out
    proto = onnx.load(str(path))
    assert proto.opset_import[0].version == 17
    assert m.training  # the mode is restored after the eval-mode trace
    x = gt.randn(2, 3)
    m.eval()
    (got,) = _ort_run(path.read_bytes(), [x.numpy()])
    with gt.no_grad():
        np.testing.assert_allclose(got, m(x).numpy(), atol=1e-5, rtol=1e-5)


def test_is_in_onnx_export():
    seen = []

    class M(nn.Module):
        def forward(self, x):
            seen.append(gt.onnx.is_in_onnx_export())
            return x * 2
    assert not gt.onnx.is_in_onnx_export()
    _check(M(), (gt.randn(3),))
    assert seen[0] is True and not gt.onnx.is_in_onnx_export()


def test_errors():
    x = gt.randn(2, 3)
    with pytest.raises(gt.onnx.UnsupportedOperatorError, match="'var'"):
        gt.onnx.export(lambda t: t.var(0), (x,), io.BytesIO())
    with pytest.raises(gt.onnx.OnnxExporterError, match="cannot be traced"):
        gt.onnx.export(lambda t: t * 2 if t.sum() > 0 else t, (x,), io.BytesIO())
    def setitem(t):
        y = t * 1
        y[0] = 5.0   # an in-place write that is no elementwise op
        return y
    with pytest.raises(gt.onnx.OnnxExporterError, match="in place"):
        gt.onnx.export(setitem, (x,), io.BytesIO())
    with pytest.raises(gt.onnx.OnnxExporterError, match="dropout in training mode"):
        gt.onnx.export(nn.Dropout(0.5), (x,), io.BytesIO(),
                       training=gt.onnx.TrainingMode.TRAINING)
    with pytest.raises(gt.onnx.UnsupportedOperatorError, match="'randn'"):
        gt.onnx.export(lambda t: t + gt.randn(3), (x,), io.BytesIO())
    # argmax is not seen by the op hook: its result must not become a constant.
    with pytest.raises(gt.onnx.OnnxExporterError, match="does not trace.*_arg_extreme"):
        gt.onnx.export(lambda t: t + t.argmax(1, keepdim=True), (x,), io.BytesIO())
    with pytest.raises(ValueError, match="opset"):
        gt.onnx.export(nn.Linear(3, 3), (x,), io.BytesIO(), opset_version=9)
    with pytest.raises(ValueError, match="neither"):
        gt.onnx.export(nn.Linear(3, 3), (x,), io.BytesIO(), dynamic_axes={"nope": [0]})
    with pytest.raises(ValueError, match="operator_export_type"):
        gt.onnx.export(nn.Linear(3, 3), (x,), io.BytesIO(),
                       operator_export_type=gt.onnx.OperatorExportTypes.ONNX_ATEN)
    with pytest.raises(gt.onnx.OnnxExporterError, match="dynamic"):
        gt.onnx.export(nn.LSTM(3, 4), (gt.randn(5, 2, 3),), io.BytesIO(),
                       input_names=["x"], dynamic_axes={"x": [1]})


def _torch_twin(name):
    torch = pytest.importorskip("torch")
    if name == "cnn":
        tn = torch.nn
        return torch, tn.Sequential(
            tn.Conv2d(3, 8, 3, padding=1), tn.BatchNorm2d(8), tn.ReLU(), tn.MaxPool2d(2),
            tn.Dropout(0.3), tn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2), tn.SiLU(),
            tn.GroupNorm(2, 8), tn.AvgPool2d(2), tn.ConvTranspose2d(8, 4, 3, stride=2, padding=1,
                                                                   output_padding=1),
            tn.AdaptiveAvgPool2d(1), tn.Flatten(), tn.Linear(4, 3), tn.Softmax(-1)), _cnn(), \
            (2, 3, 16, 16)
    return torch, torch.nn.LSTM(4, 6, num_layers=2, batch_first=True), \
        nn.LSTM(4, 6, num_layers=2, batch_first=True), (3, 5, 4)


@pytest.mark.parametrize("name", ["cnn", "lstm"])
def test_same_outputs_as_torch_onnx_export(name):
    """PyTorch's own (TorchScript) exporter and ours, same weights: onnxruntime agrees."""
    import warnings
    torch, tm, m, shape = _torch_twin(name)
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                        for k, v in m.state_dict().items()})
    tm.eval()
    m.eval()
    x = gt.randn(*shape)
    ours, theirs = io.BytesIO(), io.BytesIO()
    gt.onnx.export(m, (x,), ours)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(tm, (torch.from_numpy(x.numpy()),), theirs, dynamo=False)
    a = _ort_run(ours.getvalue(), [x.numpy()])
    b = _ort_run(theirs.getvalue(), [x.numpy()])
    assert len(a) == len(b)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(u, v, atol=1e-5, rtol=1e-5)
