"""Sparse compressed layouts (CSR/CSC/BSR/BSC) against PyTorch, on cpu and emulated cuda."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import gputensor as gt

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message="Sparse .* support is in beta")

LAYOUTS = ["csr", "csc", "bsr", "bsc"]


def _dense(seed: int = 0, shape: tuple = (4, 6)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, shape)
    a[rng.uniform(size=shape) < 0.5] = 0
    a[0:2, 2:4] = 0          # an all-zero 2x2 block
    return a


def _convert(x, lay: str):
    f = getattr(x, "to_sparse_" + lay)
    return f((2, 2)) if lay.startswith("b") else f()


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if hasattr(t, "numpy") else np.asarray(t)


def _same_parts(g, t) -> None:
    assert g.layout.name == str(t.layout).split(".")[1]
    assert tuple(g.shape) == tuple(t.shape)
    names = ("crow_indices", "col_indices") if t.layout in (torch.sparse_csr, torch.sparse_bsr) \
        else ("ccol_indices", "row_indices")
    for n in names:
        np.testing.assert_array_equal(_np(getattr(g, n)()), getattr(t, n)().numpy())
    np.testing.assert_allclose(_np(g.values()), t.values().detach().numpy())
    assert g._nnz() == t._nnz()


@pytest.mark.parametrize("lay", LAYOUTS)
def test_dense_to_compressed_and_back(device, lay):
    a = _dense()
    g = _convert(gt.tensor(a, device=device), lay)
    t = _convert(torch.tensor(a), lay)
    _same_parts(g, t)
    assert g.device == gt.device(device)
    np.testing.assert_array_equal(_np(g.to_dense()), a)
    assert g.is_sparse_csr == (lay == "csr") and not g.is_sparse
    assert g.sparse_dim() == 2 and g.dense_dim() == 0
    coo = g.to_sparse()
    assert coo.layout is gt.sparse_coo
    np.testing.assert_array_equal(_np(coo.to_dense()), a)


@pytest.mark.parametrize("src", ["coo", "csr", "csc"])
@pytest.mark.parametrize("lay", LAYOUTS)
def test_conversions_between_layouts(device, src, lay):
    a = _dense(1)
    g = gt.tensor(a, device=device).to_sparse() if src == "coo" else \
        _convert(gt.tensor(a, device=device), src)
    t = torch.tensor(a).to_sparse() if src == "coo" else _convert(torch.tensor(a), src)
    _same_parts(_convert(g, lay), _convert(t, lay))


def test_hybrid_csr(device):
    a = _dense(2, (3, 4, 2))
    g = gt.tensor(a, device=device).to_sparse_csr(dense_dim=1)
    t = torch.tensor(a).to_sparse_csr(dense_dim=1)
    _same_parts(g, t)
    assert g.dense_dim() == 1
    np.testing.assert_array_equal(_np(g.to_dense()), a)


def test_accessor_errors(device):
    c = gt.tensor(_dense(), device=device).to_sparse_csr()
    with pytest.raises(RuntimeError, match="ccol_indices expected sparse column compressed "
                                           "tensor layout but got SparseCsr"):
        c.ccol_indices()
    with pytest.raises(RuntimeError, match="row_indices expected"):
        gt.row_indices_copy(c)
    np.testing.assert_array_equal(_np(gt.crow_indices_copy(c)), _np(c.crow_indices()))
    np.testing.assert_array_equal(_np(gt.col_indices_copy(c)), _np(c.col_indices()))
    s = c.t()
    np.testing.assert_array_equal(_np(gt.ccol_indices_copy(s)), _np(c.crow_indices()))
    np.testing.assert_array_equal(_np(gt.row_indices_copy(s)), _np(c.col_indices()))
    with pytest.raises(RuntimeError, match="do not have is_contiguous"):
        c.is_contiguous()
    with pytest.raises(RuntimeError, match="not supported for sparse_csr"):
        c.exp()


def test_constructors(device):
    crow, col, vals = [0, 2, 3, 5], [0, 2, 2, 0, 1], [1., 2, 3, 4, 5]
    for name in ("csr", "csc"):
        g = getattr(gt, f"sparse_{name}_tensor")(crow, col, vals, device=device)
        t = getattr(torch, f"sparse_{name}_tensor")(crow, col, vals)
        _same_parts(g, t)
        np.testing.assert_array_equal(_np(g.to_dense()), t.to_dense().numpy())
    bv = np.arange(8.).reshape(2, 2, 2)
    for name in ("bsr", "bsc"):
        g = getattr(gt, f"sparse_{name}_tensor")([0, 1, 2], [0, 1], bv, (4, 4), device=device)
        t = getattr(torch, f"sparse_{name}_tensor")([0, 1, 2], [0, 1], torch.tensor(bv), (4, 4))
        _same_parts(g, t)
        np.testing.assert_array_equal(_np(g.to_dense()), t.to_dense().numpy())
    g = gt.sparse_compressed_tensor(gt.tensor(crow, dtype=gt.int32),
                                    gt.tensor(col, dtype=gt.int32), vals, (3, 3),
                                    layout=gt.sparse_csr, device=device)
    assert g.crow_indices().dtype is gt.int32 and g.layout is gt.sparse_csr


BAD = [
    ("crow0", ([1, 2, 3, 5], [0, 2, 2, 0, 1], [1.] * 5, (3, 3))),
    ("crowlast", ([0, 2, 3, 4], [0, 2, 2, 0, 1], [1.] * 5, (3, 3))),
    ("coloob", ([0, 2, 3, 5], [0, 3, 2, 0, 1], [1.] * 5, (3, 3))),
    ("colneg", ([0, 2, 3, 5], [-1, 0, 2, 0, 1], [1.] * 5, (3, 3))),
    ("unsorted", ([0, 2, 3, 5], [2, 0, 2, 0, 1], [1.] * 5, (3, 3))),
    ("crowlen", ([0, 2, 5], [0, 2, 2, 0, 1], [1.] * 5, (3, 3))),
    ("nnz", ([0, 2, 3, 5], [0, 2, 2, 0, 1], [1.] * 4, (3, 3))),
    ("size1d", ([0, 2, 3, 5], [0, 2, 2, 0, 1], [1.] * 5, (3,))),
]


@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_constructor_invariants(device, case):
    crow, col, vals, size = case[1]
    with pytest.raises(RuntimeError) as want:
        torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), torch.tensor(vals), size,
                                check_invariants=True)
    with pytest.raises(RuntimeError) as got:
        gt.sparse_csr_tensor(crow, col, vals, size, device=device, check_invariants=True)
    assert str(got.value) == str(want.value).splitlines()[0]


def test_constructor_dtype_errors(device):
    with pytest.raises(RuntimeError, match="must have the same dtype, bot got Long and Int"):
        gt.sparse_csr_tensor(gt.tensor([0, 1]), gt.tensor([0], dtype=gt.int32), [1.],
                             device=device)
    with pytest.raises(RuntimeError, match="dtype must be Int or Long, but got Float"):
        gt.sparse_csr_tensor(gt.tensor([0., 1]), gt.tensor([0.]), [1.], device=device)
    with pytest.raises(RuntimeError, match="expected sparse compressed tensor layout but got "
                                           "Sparse"):
        gt.sparse_compressed_tensor([0, 1], [0], [1.], layout=gt.sparse_coo)
    with pytest.raises(RuntimeError, match=r"divisible by given blocksize \(2,2\)"):
        gt.ones(3, 4, device=device).to_sparse_bsr((2, 2))
    with pytest.raises(RuntimeError, match=r"dense_dim argument must be in \[0,0\] range"):
        gt.ones(2, 2, device=device).to_sparse_csr(dense_dim=1)
    with pytest.raises(RuntimeError, match="expected SparseCsr or SparseCsc layout but got "
                                           "SparseBsr"):
        gt.ones(4, 4, device=device).to_sparse_bsr((2, 2)).to_sparse_csr()


@pytest.mark.parametrize("lay", ["csr", "csc", "bsr"])
def test_mm_forward_and_grads(device, lay):
    a = _dense(3, (4, 6))
    b = np.random.default_rng(4).uniform(-1, 1, (6, 3))
    for sparse_grad in (False, True):
        g = _convert(gt.tensor(a, device=device), lay)
        t = _convert(torch.tensor(a), lay)
        if sparse_grad:
            g.requires_grad_()
            t.requires_grad_()
        dense_grad = lay != "bsr" or not sparse_grad
        gb = gt.tensor(b, device=device, requires_grad=dense_grad)
        tb = torch.tensor(b, requires_grad=dense_grad)
        go, to = gt.mm(g, gb), torch.mm(t, tb)
        np.testing.assert_allclose(_np(go), to.detach().numpy(), rtol=1e-12)
        if lay == "bsr" and dense_grad:   # PyTorch has no BSC @ dense for the backward
            with pytest.raises(RuntimeError, match="Strided \\+ SparseBsc @ Strided"):
                torch.mm(t, tb).sum().backward()
            with pytest.raises(RuntimeError, match="Strided \\+ SparseBsc @ Strided"):
                go.sum().backward()
            continue
        (go * go).sum().backward()
        (to * to).sum().backward()
        if dense_grad:
            np.testing.assert_allclose(_np(gb.grad), tb.grad.numpy(), rtol=1e-12)
        if sparse_grad:
            assert g.grad.layout is gt.strided
            np.testing.assert_allclose(_np(g.grad), t.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(_np(g @ gt.tensor(b[:, 0], device=device)),
                               (t.detach() @ torch.tensor(b[:, 0])).numpy(), rtol=1e-12)


def test_mm_values_grad_and_gradcheck(device):
    crow, col = [0, 2, 3, 5], [0, 2, 2, 0, 1]
    v = np.array([1., 2, 3, 4, 5])
    b = np.random.default_rng(5).uniform(-1, 1, (3, 2))
    gv = gt.tensor(v, device=device, requires_grad=True)
    tv = torch.tensor(v, requires_grad=True)
    gs = gt.sparse_csr_tensor(crow, col, gv, (3, 3))
    ts = torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(col), tv, (3, 3))
    gb, tb = gt.tensor(b, device=device), torch.tensor(b)
    (gt.mm(gs * 2, gb) ** 2).sum().backward()
    (torch.mm(ts * 2, tb) ** 2).sum().backward()
    np.testing.assert_allclose(_np(gv.grad), tv.grad.numpy(), rtol=1e-12)
    gv.grad = None
    gt.sparse_csr_tensor(crow, col, gv, (3, 3)).t().to_dense().sum().backward()
    np.testing.assert_array_equal(_np(gv.grad), np.ones(5))

    def f(vals, dense):
        return gt.mm(gt.sparse_csr_tensor(crow, col, vals, (3, 3)), dense)
    assert gt.autograd.gradcheck(f, (gt.tensor(v, device=device, requires_grad=True),
                                     gt.tensor(b, device=device, requires_grad=True)))


def test_addmm_and_dense_at_csr(device):
    a, b = _dense(6, (4, 4)), np.random.default_rng(7).uniform(-1, 1, (4, 4))
    g, t = gt.tensor(a, device=device).to_sparse_csr(), torch.tensor(a).to_sparse_csr()
    gb, tb = gt.tensor(b, device=device), torch.tensor(b)
    np.testing.assert_allclose(_np(gt.addmm(gb, g, gb, beta=0.5, alpha=2)),
                               torch.addmm(tb, t, tb, beta=0.5, alpha=2).numpy(), rtol=1e-12)
    np.testing.assert_allclose(_np(gb @ g), (tb @ t).numpy(), rtol=1e-12)
    np.testing.assert_allclose(_np(gt.matmul(g, gb)), torch.matmul(t, tb).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(4x4 and 3x3\)"):
        gt.mm(g, gt.ones(3, 3, dtype=gt.float64, device=device))
    with pytest.raises(RuntimeError, match="SparseBsc"):
        gt.mm(gt.tensor(a, device=device).to_sparse_bsc((2, 2)), gb)


@pytest.mark.parametrize("lay", LAYOUTS)
def test_scalar_mul_sum_transpose(device, lay):
    a = _dense(8)
    g, t = _convert(gt.tensor(a, device=device), lay), _convert(torch.tensor(a), lay)
    _same_parts(g * 3, t * 3)
    _same_parts(3 * g, 3 * t)
    _same_parts(g.t(), t.t())
    _same_parts(g.transpose(0, 1), t.transpose(0, 1))
    np.testing.assert_allclose(_np(g.sum()), t.sum().numpy())
    assert g.sum(dtype=gt.float32).dtype is gt.float32


def test_add_csr(device):
    a, b = _dense(9), _dense(10)
    g, t = gt.tensor(a, device=device).to_sparse_csr(), torch.tensor(a).to_sparse_csr()
    _same_parts(g + g, t + t)
    _same_parts(gt.add(g, g, alpha=2), torch.add(t, t, alpha=2))
    g2, t2 = gt.tensor(b, device=device).to_sparse_csr(), torch.tensor(b).to_sparse_csr()
    np.testing.assert_allclose(_np((g + g2).to_dense()), (t + t2).to_dense().numpy())
    np.testing.assert_allclose(_np(g + gt.tensor(b, device=device)), (t + torch.tensor(b)).numpy())
    with pytest.raises(RuntimeError, match="crow_indices expected sparse row compressed tensor "
                                           "layout but got SparseCsc"):
        g.t() + g.t()
    with pytest.raises(RuntimeError, match="not supported for sparse_csr"):
        g.sum(0) if False else g.exp()
    with pytest.raises(RuntimeError, match="reduction operations on CSR tensors with "
                                           "keepdim=False is unsupported"):
        g.sum(0)


def test_to_clone_detach_and_devices(device):
    a = _dense(11)
    g = gt.tensor(a).to_sparse_csr().to(device)
    assert g.device == gt.device(device) and g.crow_indices().device == gt.device(device)
    back = g.cpu()
    assert back.device.type == "cpu" and back.layout is gt.sparse_csr
    if device.startswith("cuda"):
        up = back.cuda()
        assert up.device.type == "cuda" and up.col_indices().device.type == "cuda"
        np.testing.assert_array_equal(_np(up.to_dense()), a)
    v = gt.tensor(a, requires_grad=True)
    moved = v.to_sparse_csr().to(device)
    moved.to_dense().sum().backward()      # the gradient moves back through .to()
    np.testing.assert_array_equal(_np(v.grad), (a != 0).astype(float))
    h = g.to(gt.float32)
    assert h.dtype is gt.float32 and h.crow_indices().dtype is gt.int64
    c = g.clone()
    assert c.layout is gt.sparse_csr and c.values().data_ptr() != g.values().data_ptr()
    np.testing.assert_array_equal(_np(c.to_dense()), a)
    r = g.detach().requires_grad_()
    assert r.requires_grad and not g.requires_grad


@pytest.mark.parametrize("lay", LAYOUTS)
def test_save_load_roundtrip(device, lay, tmp_path):
    a = _dense(12)
    g = _convert(gt.tensor(a, device=device), lay)
    buf = io.BytesIO()
    gt.save({"m": g}, buf)
    buf.seek(0)
    back = gt.load(buf)["m"]
    assert back.layout is g.layout and back.device == g.device
    np.testing.assert_array_equal(_np(back.to_dense()), a)
    # the same file loads in PyTorch
    buf.seek(0)
    t = torch.load(buf, map_location="cpu")["m"]
    _same_parts(g, t)
    # and a PyTorch file loads here
    tbuf = io.BytesIO()
    torch.save(_convert(torch.tensor(a), lay), tbuf)
    tbuf.seek(0)
    _same_parts(gt.load(tbuf), _convert(torch.tensor(a), lay))


def test_load_rejects_invalid_indices(tmp_path):
    t = torch.sparse_csr_tensor(torch.tensor([0, 2, 3, 5]), torch.tensor([0, 3, 2, 0, 1]),
                                torch.ones(5), (3, 3))
    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    with pytest.raises(Exception, match="0 <= col_indices < ncols"):
        gt.load(buf)


def test_leaf_gradient_layouts(device):
    """PyTorch: a leaf CSR's gradient is masked (CSR) through to_dense/values, dense through
    sum and the products."""
    a = _dense(13, (3, 3))
    for f in (lambda x: x.to_dense().sum(), lambda x: x.values().sum(),
              lambda x: (x + x).sum(), lambda x: (x * 2).to_dense().sum()):
        g = gt.tensor(a, device=device).to_sparse_csr().requires_grad_()
        t = torch.tensor(a).to_sparse_csr().requires_grad_()
        f(g).backward()
        f(t).backward()
        assert g.grad.layout.name == str(t.grad.layout).split(".")[1]
        np.testing.assert_allclose(_np(g.grad.to_dense()), t.grad.to_dense().numpy())
    d = gt.tensor(a, device=device, requires_grad=True)
    td = torch.tensor(a, requires_grad=True)
    d.to_sparse_csr().to_dense().sum().backward()
    td.to_sparse_csr().to_dense().sum().backward()
    np.testing.assert_array_equal(_np(d.grad), td.grad.numpy())


def test_inplace(device):
    a = _dense(14)
    g, t = gt.tensor(a, device=device).to_sparse_csr(), torch.tensor(a).to_sparse_csr()
    v = g._version
    g.mul_(2)
    t.mul_(2)
    assert g._version == v + 1
    g.add_(g)
    t.add_(t)
    g.neg_()
    t.neg_()
    _same_parts(g, t)
    vals = gt.ones(5, dtype=gt.float64, device=device, requires_grad=True)
    s = gt.sparse_csr_tensor([0, 2, 3, 5], [0, 2, 2, 0, 1], vals, (3, 3)) * 1
    s.mul_(3)
    s.to_dense().sum().backward()
    np.testing.assert_array_equal(_np(vals.grad), np.full(5, 3.0))
    leaf = gt.tensor(a, device=device).to_sparse_csr().requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.mul_(2)
    s2 = gt.sparse_csr_tensor([0, 2, 3, 5], [0, 2, 2, 0, 1], vals, (3, 3))
    s2.mul_(2)   # the constructor's node needs s2 unchanged, as in PyTorch
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: "
                                           r"\[SparseCsrgputensor.DoubleTensor \[3, 3\]\]"):
        s2.to_dense().sum().backward()


def test_to_sparse_layout_argument(device):
    a = _dense(15, (4, 4))
    for lay, bs in (("csr", None), ("csc", None), ("bsr", (2, 2)), ("bsc", (2, 2))):
        g = gt.tensor(a, device=device).to_sparse(layout=getattr(gt, "sparse_" + lay),
                                                  blocksize=bs)
        t = torch.tensor(a).to_sparse(layout=getattr(torch, "sparse_" + lay), blocksize=bs)
        _same_parts(g, t)
    h = gt.tensor(_dense(16, (3, 4, 2)), device=device)
    assert h.to_sparse(dense_dim=1).sparse_dim() == 2
    with pytest.raises(RuntimeError, match="blocksize"):
        gt.tensor(a, device=device).to_sparse(blocksize=(2, 2))


def test_repr_matches_torch(device):
    a = _dense(17, (3, 4))
    for lay in LAYOUTS[:2]:
        g, t = _convert(gt.tensor(a), lay), _convert(torch.tensor(a), lay)
        assert repr(g) == repr(t).replace("torch.", "gputensor.")


def test_gradcheck_blocked_and_csc(device):
    b = np.random.default_rng(18).uniform(-1, 1, (4, 3))
    bv = np.random.default_rng(19).uniform(-1, 1, (2, 2, 2))

    def bsr(vals, dense):
        return gt.mm(gt.sparse_bsr_tensor([0, 1, 2], [1, 0], vals, (4, 4)), dense)

    def csc(vals, dense):
        return gt.mm(gt.sparse_csc_tensor([0, 1, 3, 3, 4], [2, 0, 3, 1], vals, (4, 4)) * 2,
                     dense)
    assert gt.autograd.gradcheck(bsr, (gt.tensor(bv, device=device, requires_grad=True),
                                       gt.tensor(b, device=device)))
    assert gt.autograd.gradcheck(csc, (gt.tensor(bv.reshape(-1)[:4], device=device,
                                                 requires_grad=True),
                                       gt.tensor(b, device=device, requires_grad=True)))


@pytest.mark.parametrize("lay", LAYOUTS)
def test_empty(device, lay):
    g, t = _convert(gt.zeros(4, 4, dtype=gt.float64, device=device), lay), \
        _convert(torch.zeros(4, 4, dtype=torch.float64), lay)
    _same_parts(g, t)
    assert float(g.sum()) == 0.0 and g.to_sparse()._nnz() == 0
    if lay != "bsc":
        np.testing.assert_array_equal(_np(g @ gt.ones(4, 2, dtype=gt.float64, device=device)),
                                      np.zeros((4, 2)))
    e = gt.sparse_csr_tensor([0, 0, 0], [], gt.zeros(0, device=device), (2, 3),
                             check_invariants=True)
    assert e.col_indices().dtype is gt.int64
    np.testing.assert_array_equal(_np(e.to_dense()), np.zeros((2, 3)))


def test_assert_close_and_copies(device):
    import copy
    import pickle
    a = _dense(20)
    for lay in LAYOUTS:
        g = _convert(gt.tensor(a, device=device), lay)
        gt.testing.assert_close(g, g.clone())
        gt.testing.assert_close(copy.deepcopy(g), g)
        gt.testing.assert_close(pickle.loads(pickle.dumps(g)), g)
        with pytest.raises(AssertionError, match=f"Sparse {lay.upper()} values"):
            gt.testing.assert_close(g * 2, g)
    c = gt.tensor(a, device=device).to_sparse_csr()
    with pytest.raises(AssertionError, match="number of specified values in sparse CSR"):
        gt.testing.assert_close(c, gt.tensor(a + 5, device=device).to_sparse_csr())


def test_a_compressed_leaf_accumulates_its_gradient_over_two_backwards(device):
    # the second backward goes through AccumulateGrad's layout-contract check, which must not
    # read a compressed parameter's strides
    grads = []
    for L, d in ((gt, device), (torch, "cpu")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's "CSR support is in beta"
            w = L.tensor([[1.0, 0.0], [0.0, 2.0]], device=d).to_sparse_csr().requires_grad_()
        for _ in range(2):
            L.mm(w, L.ones(2, 2, device=d)).sum().backward()
        grads.append((str(w.grad.layout).split(".")[-1], w.grad.to_dense().cpu().tolist()))
    assert grads[0] == grads[1]
