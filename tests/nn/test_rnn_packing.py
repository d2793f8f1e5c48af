"""gt.nn.utils.rnn (packing / padding of variable-length sequences) and RNN/LSTM/GRU on packed
input, against PyTorch: layouts, values and gradients in float64, and the error messages.

Packed data rows are time-major by decreasing length and batch_sizes is a CPU int64 tensor, as
in PyTorch; the layers must run each sequence only over its own length and return the final
states at each sequence's last step in the caller's batch order.
"""

from __future__ import annotations

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn as nn
from gputensor.nn.utils import rnn as G
from tests.helpers import assert_close, random_array

torch = pytest.importorskip("torch")
R = torch.nn.utils.rnn

TOL = {"atol": 1e-10, "rtol": 1e-9}


def _pair(shape, device, seed):
    """The same random float64 tensor in gputensor (on ``device``) and torch, both requiring
    grad."""
    arr = random_array(shape, gt.float64, -1.0, 1.0, seed).astype(np.float64)
    g = gt.tensor(arr, device=device).requires_grad_()
    t = torch.from_numpy(arr.copy()).requires_grad_()
    return g, t


def _losses(g_outs, t_outs):
    """A scalar with a distinct random weight per element of each output, so every gradient
    entry matters."""
    g_loss, t_loss = 0, 0
    for i, (g, t) in enumerate(zip(g_outs, t_outs, strict=True)):
        w = random_array(tuple(t.shape), gt.float64, -1.0, 1.0, 50 + i).astype(np.float64)
        g_loss = g_loss + (g * gt.tensor(w, device=g.device)).sum()
        t_loss = t_loss + (t * torch.from_numpy(w)).sum()
    return g_loss, t_loss


def _assert_packed(gp, tp, device, tol=TOL):
    assert isinstance(gp, G.PackedSequence)
    assert_close(gp.data, tp.data, **tol)
    assert gp.data.device == gt.device(device)
    assert gp.batch_sizes.device.type == "cpu" and gp.batch_sizes.dtype == gt.int64
    assert gp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    for gi, ti in ((gp.sorted_indices, tp.sorted_indices),
                   (gp.unsorted_indices, tp.unsorted_indices)):
        if ti is None:
            assert gi is None
        else:
            assert gi.dtype == gt.int64 and gi.device == gt.device(device)
            assert gi.tolist() == ti.tolist()


# -- pack_padded_sequence / pad_packed_sequence -----------------------------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted,lengths", [(True, [4, 3, 3, 1]),
                                                    (False, [2, 4, 1, 4]),
                                                    (False, [3, 3, 3, 3])])
@pytest.mark.parametrize("total_length", [None, 6])
def test_pack_pad_roundtrip(device, batch_first, enforce_sorted, lengths, total_length):
    shape = (5, 4, 2) if not batch_first else (4, 5, 2)   # (T, B, *) or (B, T, *)
    g_in, t_in = _pair(shape, device, 1)
    gp = G.pack_padded_sequence(g_in, lengths, batch_first, enforce_sorted)
    tp = R.pack_padded_sequence(t_in, lengths, batch_first, enforce_sorted)
    _assert_packed(gp, tp, device)
    g_pad, g_len = G.pad_packed_sequence(gp, batch_first, -2.5, total_length)
    t_pad, t_len = R.pad_packed_sequence(tp, batch_first, -2.5, total_length)
    assert_close(g_pad, t_pad, **TOL)
    assert g_len.device.type == "cpu" and g_len.tolist() == t_len.tolist()
    g_loss, t_loss = _losses([g_pad, gp.data], [t_pad, tp.data])
    g_loss.backward()
    t_loss.backward()
    assert_close(g_in.grad, t_in.grad, **TOL)


def test_pack_lengths_as_tensor_and_trailing_dims(device):
    g_in, t_in = _pair((3, 2, 2, 3), device, 2)
    gp = G.pack_padded_sequence(g_in, gt.tensor([2, 3]), enforce_sorted=False)
    tp = R.pack_padded_sequence(t_in, torch.tensor([2, 3]), enforce_sorted=False)
    _assert_packed(gp, tp, device)
    # lengths given as int32 are converted, as in PyTorch
    gp32 = G.pack_padded_sequence(g_in, gt.tensor([3, 2], dtype=gt.int32))
    tp32 = R.pack_padded_sequence(t_in, torch.tensor([3, 2], dtype=torch.int32))
    _assert_packed(gp32, tp32, device)


def test_pack_integer_data_and_padding(device):
    arr = np.arange(12, dtype=np.int64).reshape(3, 4)   # (B, T) of ints, no trailing dims
    gp = G.pack_padded_sequence(gt.tensor(arr, device=device), [2, 4, 1], batch_first=True,
                                enforce_sorted=False)
    tp = R.pack_padded_sequence(torch.from_numpy(arr), [2, 4, 1], batch_first=True,
                                enforce_sorted=False)
    _assert_packed(gp, tp, device)
    assert_close(G.pad_packed_sequence(gp, True, padding_value=-1)[0],
                 R.pad_packed_sequence(tp, True, padding_value=-1)[0])


# -- pad_sequence / unpad_sequence / pack_sequence / unpack_sequence ------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(device, batch_first, padding_side):
    pairs = [_pair((n, 2), device, 10 + n) for n in (2, 4, 1)]
    g_out = G.pad_sequence([g for g, _ in pairs], batch_first, 0.5, padding_side)
    t_out = R.pad_sequence([t for _, t in pairs], batch_first, 0.5, padding_side)
    assert_close(g_out, t_out, **TOL)
    assert g_out.device == gt.device(device)
    g_loss, t_loss = _losses([g_out], [t_out])
    g_loss.backward()
    t_loss.backward()
    for g, t in pairs:
        assert_close(g.grad, t.grad, **TOL)


def test_pad_sequence_tensor_and_empty_sequence(device):
    arr = random_array((2, 3), gt.float64, -1, 1, 3).astype(np.float64)
    assert_close(G.pad_sequence(gt.tensor(arr, device=device)),
                 R.pad_sequence(torch.from_numpy(arr)))
    seqs = [np.ones((2, 3)), np.zeros((0, 3))]
    assert_close(G.pad_sequence([gt.tensor(s, device=device) for s in seqs], True),
                 R.pad_sequence([torch.from_numpy(s) for s in seqs], True))


def test_unpad_sequence(device):
    for batch_first in (False, True):
        g_in, t_in = _pair((3, 4, 2), device, 4)
        lengths = [3, 1, 2] if batch_first else [2, 3, 1, 3]
        g_out = G.unpad_sequence(g_in, gt.tensor(lengths), batch_first)
        # torch transposes its argument in place when batch_first=False; give it a clone
        t_out = R.unpad_sequence(t_in.clone(), torch.tensor(lengths), batch_first)
        assert len(g_out) == len(t_out)
        for g, t in zip(g_out, t_out, strict=True):
            assert_close(g, t, **TOL)
        g_loss, t_loss = _losses(g_out, t_out)
        g_loss.backward()
        t_loss.backward()
        assert_close(g_in.grad, t_in.grad, **TOL)


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_unpack_sequence(device, enforce_sorted):
    ns = (4, 2, 2, 1) if enforce_sorted else (2, 4, 1, 3)
    pairs = [_pair((n, 3), device, 20 + i) for i, n in enumerate(ns)]
    gp = G.pack_sequence([g for g, _ in pairs], enforce_sorted)
    tp = R.pack_sequence([t for _, t in pairs], enforce_sorted)
    _assert_packed(gp, tp, device)
    g_out, t_out = G.unpack_sequence(gp), R.unpack_sequence(tp)
    for g, t in zip(g_out, t_out, strict=True):
        assert_close(g, t, **TOL)
    g_loss, t_loss = _losses(g_out, t_out)
    g_loss.backward()
    t_loss.backward()
    for g, t in pairs:
        assert_close(g.grad, t.grad, **TOL)


def test_invert_permutation(device):
    perm = [3, 0, 2, 1]
    out = G.invert_permutation(gt.tensor(perm, device=device))
    assert out.tolist() == R.invert_permutation(torch.tensor(perm)).tolist()
    assert out.device == gt.device(device)
    assert G.invert_permutation(None) is None


# -- PackedSequence ---------------------------------------------------------------------------
def test_packed_sequence_class(device):
    x = gt.tensor(random_array((3, 3, 2), gt.float64, -1, 1, 5), device=device)
    p = G.pack_padded_sequence(x, [3, 1, 2], enforce_sorted=False)
    assert isinstance(p, tuple) and len(p) == 4
    data, batch_sizes, sorted_indices, unsorted_indices = p
    assert data is p.data and batch_sizes is p.batch_sizes
    assert p.is_cuda == (gt.device(device).type == "cuda")
    assert not p.is_pinned()
    assert p.to(gt.float64) is p and p.double() is p
    f = p.float()
    assert f.data.dtype == gt.float32 and f.batch_sizes is p.batch_sizes
    assert f.sorted_indices.tolist() == p.sorted_indices.tolist()
    c = p.cpu()
    assert c.data.device.type == "cpu" and c.sorted_indices.device.type == "cpu"
    assert c.unsorted_indices.device.type == "cpu" and c.batch_sizes.device.type == "cpu"
    if gt.device(device).type == "cuda":
        back = c.cuda(device)
        assert back.is_cuda and back.sorted_indices.device == gt.device(device)
        assert back.batch_sizes.device.type == "cpu"
        with pytest.raises(ValueError, match="batch_sizes should always be on CPU"):
            G.PackedSequence(data, batch_sizes.to(device))
    # (data, batch_sizes) tuple form; unsorted_indices derived from sorted_indices
    q = G.PackedSequence((data, batch_sizes), sorted_indices=sorted_indices)
    assert q.unsorted_indices.tolist() == unsorted_indices.tolist()
    assert "PackedSequence(data=" in repr(q)


# -- RNN / LSTM / GRU on packed input ---------------------------------------------------------
def _load_from_torch(g_mod, t_mod, device):
    state = {k: gt.tensor(v.detach().numpy(), device=device)
             for k, v in t_mod.state_dict().items()}
    result = g_mod.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


# (class name, constructor kwargs, lengths, enforce_sorted, whether h_0 (and c_0) are given)
LAYER_CASES = [
    ("RNN", {}, [4, 2, 1], True, False),
    ("RNN", {"num_layers": 2, "bidirectional": True}, [2, 4, 1], False, True),
    ("RNN", {"nonlinearity": "relu", "batch_first": True}, [1, 3, 4], False, True),
    ("LSTM", {"bidirectional": True}, [4, 4, 2], True, True),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}, [3, 1, 4], False,
     True),
    ("LSTM", {"num_layers": 2, "proj_size": 2}, [2, 4, 3], False, False),
    ("GRU", {"num_layers": 2}, [4, 3, 1], True, True),
    ("GRU", {"bidirectional": True, "batch_first": True}, [1, 4, 2], False, False),
]


@pytest.mark.parametrize("name,kwargs,lengths,enforce_sorted,with_hx", LAYER_CASES)
def test_layer_packed_matches_torch(device, name, kwargs, lengths, enforce_sorted, with_hx):
    torch.manual_seed(0)
    t_mod = getattr(torch.nn, name)(3, 4, dtype=torch.float64, **kwargs)
    g_mod = getattr(nn, name)(3, 4, dtype=gt.float64, device=device, **kwargs)
    _load_from_torch(g_mod, t_mod, device)
    batch_first = kwargs.get("batch_first", False)
    steps, batch = max(lengths), len(lengths)
    g_x, t_x = _pair((batch, steps, 3) if batch_first else (steps, batch, 3), device, 30)
    gp = G.pack_padded_sequence(g_x, lengths, batch_first, enforce_sorted)
    tp = R.pack_padded_sequence(t_x, lengths, batch_first, enforce_sorted)

    dirs = 2 if kwargs.get("bidirectional") else 1
    n = kwargs.get("num_layers", 1) * dirs
    g_states, t_states = [], []
    if with_hx:
        shapes = [(n, batch, kwargs.get("proj_size") or 4)]
        if name == "LSTM":
            shapes.append((n, batch, 4))
        for i, shape in enumerate(shapes):
            g, t = _pair(shape, device, 40 + i)
            g_states.append(g)
            t_states.append(t)
    g_hx = None if not with_hx else (tuple(g_states) if name == "LSTM" else g_states[0])
    t_hx = None if not with_hx else (tuple(t_states) if name == "LSTM" else t_states[0])

    g_out, g_h = g_mod(gp, g_hx)
    t_out, t_h = t_mod(tp, t_hx)
    _assert_packed(g_out, t_out, device)
    g_h = list(g_h) if name == "LSTM" else [g_h]
    t_h = list(t_h) if name == "LSTM" else [t_h]
    for g, t in zip(g_h, t_h, strict=True):
        assert_close(g, t, **TOL)
    g_pad, _ = G.pad_packed_sequence(g_out, batch_first)
    t_pad, _ = R.pad_packed_sequence(t_out, batch_first)
    assert_close(g_pad, t_pad, **TOL)

    g_loss, t_loss = _losses([g_out.data, *g_h], [t_out.data, *t_h])
    g_loss.backward()
    t_loss.backward()
    assert_close(g_x.grad, t_x.grad, **TOL)
    for g, t in zip(g_states, t_states, strict=True):
        assert_close(g.grad, t.grad, **TOL)
    for pname, tp_ in t_mod.named_parameters():
        gp_ = g_mod.get_parameter(pname)
        assert gp_.grad is not None, f"no gradient for {pname}"
        assert_close(gp_.grad, tp_.grad, **TOL)


def test_packed_final_state_is_each_sequences_last_step(device):
    """Independent of torch: each sequence's final state equals running it alone, unpadded
    (for the reverse direction too, which must start at the sequence's own last element)."""
    gt.manual_seed(0)
    mod = nn.GRU(2, 3, bidirectional=True, dtype=gt.float64, device=device)
    seqs = [gt.tensor(random_array((n, 2), gt.float64, -1, 1, 60 + n), device=device)
            for n in (2, 4, 3)]
    out, h_n = mod(G.pack_sequence(seqs, enforce_sorted=False))
    outs = G.unpack_sequence(out)
    for b, s in enumerate(seqs):
        alone_out, alone_h = mod(s.unsqueeze(1))
        assert_close(outs[b], alone_out.squeeze(1), **TOL)
        assert_close(h_n[:, b], alone_h[:, 0], **TOL)


# -- errors -----------------------------------------------------------------------------------
def test_pack_errors(device):
    x = gt.zeros(4, 3, 2, device=device)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when "
                                           "`enforce_sorted` is True"):
        G.pack_padded_sequence(x, [2, 3, 1])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        G.pack_padded_sequence(x, [3, 0, 0])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        G.pack_padded_sequence(x, [3, 2, 0], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to "
                                           r"batch_size, but got 2 \(batch_size=3\)"):
        G.pack_padded_sequence(x, [3, 2])
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 "
                                           "tensor, but got 2D cpu Long tensor"):
        G.pack_padded_sequence(x, gt.tensor([[3, 2, 1]]))
    with pytest.raises(RuntimeError, match="Cannot pack empty tensors."):
        G.pack_padded_sequence(gt.zeros(0, 3, 2, device=device), [1, 1, 1])
    with pytest.raises(RuntimeError, match="exceeds the padded length"):
        G.pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(IndexError, match="Dimension out of range"):
        G.pack_padded_sequence(gt.zeros(4, device=device), [3])
    if gt.device(device).type == "cuda":
        with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 "
                                               "tensor, but got 1D cuda:[0-9]+ Long tensor"):
            G.pack_padded_sequence(x, gt.tensor([3, 2, 1], device=device))


def test_pad_errors(device):
    p = G.pack_padded_sequence(gt.zeros(4, 3, 2, device=device), [3, 2, 1])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of "
                                         "the longest sequence in input, but got "
                                         "total_length=2 and max sequence length being 3"):
        G.pad_packed_sequence(p, total_length=2)
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        G.pad_sequence([])
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        G.pack_sequence([])
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, "
                                           "but got up."):
        G.pad_sequence([gt.zeros(2, device=device)], padding_side="up")
    with pytest.raises(RuntimeError, match="Expected iterable for input sequences"):
        G.pad_sequence(3)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size "
                                           r"of tensor b \(4\) at non-singleton dimension 1"):
        G.pad_sequence([gt.zeros(2, 3, device=device), gt.zeros(3, 4, device=device)])


def test_layer_packed_errors(device):
    mod = nn.LSTM(3, 4, dtype=gt.float64, device=device)
    p = G.pack_padded_sequence(gt.zeros(3, 2, 3, dtype=gt.float64, device=device), [3, 2])
    h = gt.zeros(1, 3, 4, dtype=gt.float64, device=device)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\), got "
                                           r"\[1, 3, 4\]"):
        mod(p, (h, h))
    bad = G.pack_padded_sequence(gt.zeros(3, 2, 2, dtype=gt.float64, device=device), [3, 2])
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. "
                                           "Expected 3, got 2"):
        mod(bad)
    with pytest.raises(ValueError, match="input must have the type"):
        mod(p.float())
