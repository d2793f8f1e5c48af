"""gt.fft, the windows, stft and istft against PyTorch (values, dtypes, shapes, errors) on every
device, and their gradients (the three primitives have samples in
tests/autograd/samples_fft.py; stft/istft are composites, gradchecked here)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from gputensor.autograd import gradcheck
from tests.helpers import assert_close, assert_same_error, random_array, requires_torch, torch

pytestmark = requires_torch

C2C = ["fft", "ifft"]
R2C = ["rfft", "ihfft"]
C2R = ["irfft", "hfft"]
ND = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
TWO_D = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"]
REAL_INPUT = {"rfft", "ihfft", "rfftn", "ihfftn", "rfft2", "ihfft2"}
TOL = {gt.float32: 1e-4, gt.complex64: 1e-4, gt.float64: 1e-10, gt.complex128: 1e-10}


def _pair(shape: tuple[int, ...], dtype: gt.dtype, device: str, seed: int = 0
          ) -> tuple[gt.Tensor, Any]:
    a = random_array(shape, dtype, seed=seed)
    return gt.tensor(a, dtype=dtype, device=device), torch.from_numpy(np.array(a, copy=True))


def _expected(t: Any) -> Any:
    return t.resolve_conj() if isinstance(t, torch.Tensor) else t


def _compare(name: str, shape: tuple[int, ...], dtype: gt.dtype, device: str,
             *args: Any, **kwargs: Any) -> None:
    g, t = _pair(shape, dtype, device)
    expected = _expected(getattr(torch.fft, name)(t, *args, **kwargs))
    actual = getattr(gt.fft, name)(g, *args, **kwargs)
    assert actual.device == gt.device(device)
    tol = TOL.get(actual.dtype, 1e-4)
    assert_close(actual, expected, atol=tol, rtol=tol)


def test_names_cover_torch_fft() -> None:
    names = set(torch.fft.__all__) | {n for n in dir(torch.fft) if "fft" in n and n[0] != "_"}
    assert names <= set(gt.fft.__all__)
    assert all(callable(getattr(gt.fft, n)) for n in gt.fft.__all__)


# -- transforms ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,dtype", [
    (name, dt) for name in C2C + R2C + C2R
    for dt in (gt.float32, gt.float64, gt.complex64, gt.complex128)
    if not (name in REAL_INPUT and dt.is_complex)])  # (complex input errors: test_errors)
@pytest.mark.parametrize("size", [8, 9])
def test_one_dim(device: str, name: str, dtype: gt.dtype, size: int) -> None:
    _compare(name, (3, size), dtype, device)


@pytest.mark.parametrize("name", C2C + R2C + C2R)
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 5, 12])
def test_one_dim_n_norm_dim(device: str, name: str, norm: str | None, n: int | None) -> None:
    dtype = gt.float64 if name in REAL_INPUT else gt.complex128
    _compare(name, (6, 3, 7), dtype, device, n, 0, norm)
    _compare(name, (6, 3, 7), dtype, device, n=n, dim=-2, norm=norm)


@pytest.mark.parametrize("name", ND + TWO_D)
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_n_dim(device: str, name: str, norm: str | None) -> None:
    dtype = gt.float64 if name in REAL_INPUT else gt.complex128
    _compare(name, (4, 5, 6), dtype, device, norm=norm)
    _compare(name, (4, 5, 6), dtype, device, s=(3, 8), norm=norm)
    _compare(name, (4, 5, 6), dtype, device, s=(7, -1), dim=(2, 0), norm=norm)
    _compare(name, (4, 5, 6), dtype, device, dim=(0, 1), norm=norm)
    if name in ND:
        _compare(name, (4, 5, 6), dtype, device, dim=1, norm=norm)
        _compare(name, (4, 5, 6), dtype, device, s=(3, 4, 9), norm=norm)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "irfftn", "hfftn"])
def test_n_dim_of_real_and_integer_input(device: str, name: str) -> None:
    _compare(name, (4, 6), gt.float32, device)
    _compare(name, (4, 6), gt.int64, device)


@pytest.mark.parametrize("dtype", [gt.int32, gt.int64, gt.bool, gt.uint8])
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "rfftn"])
def test_integer_input_promotes_to_default_dtype(device: str, dtype: gt.dtype, name: str) -> None:
    _compare(name, (2, 6), dtype, device)


def test_default_dtype_float64(device: str) -> None:
    gt.set_default_dtype(gt.float64)
    torch_default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _compare("fft", (5,), gt.int64, device)
        _compare("irfft", (5,), gt.int32, device)
    finally:
        torch.set_default_dtype(torch_default)


def test_noncontiguous_and_strided_input(device: str) -> None:
    a = random_array((6, 10), gt.complex64)
    g = gt.tensor(a, device=device).t()[:, ::2]
    t = torch.from_numpy(a).t()[:, ::2]
    for name in ("fft", "ifft", "irfft", "hfft", "fft2", "irfftn"):
        assert_close(getattr(gt.fft, name)(g), _expected(getattr(torch.fft, name)(t)),
                     atol=1e-4, rtol=1e-4)
    r = gt.tensor(a.real.copy(), device=device).t()
    assert_close(gt.fft.rfft(r, dim=0), torch.fft.rfft(torch.from_numpy(a.real.copy()).t(), dim=0),
                 atol=1e-4, rtol=1e-4)


def test_zero_dim_transform_copies(device: str) -> None:
    g, t = _pair((3, 4), gt.complex64, device)
    got = gt.fft.fftn(g, dim=())
    assert_close(got, torch.fft.fftn(t, dim=()))
    assert got.data_ptr() != g.data_ptr()
    assert_close(gt.fft.fftn(gt.tensor(2.5, device=device)), torch.fft.fftn(torch.tensor(2.5)))


def test_empty_batch(device: str) -> None:
    g = gt.zeros((0, 4), dtype=gt.complex64, device=device)
    assert gt.fft.fft(g, dim=1).shape == (0, 4)
    assert gt.fft.rfft(gt.zeros((0, 6), device=device)).shape == (0, 4)
    assert gt.fft.irfft(g).shape == (0, 6)


@pytest.mark.parametrize("name", ["irfftn", "hfftn", "ifftn", "rfftn", "ihfftn"])
def test_input_unchanged(device: str, name: str) -> None:
    dtype = gt.float64 if name in REAL_INPUT else gt.complex128
    g, _ = _pair((4, 5, 6), dtype, device)
    before = g.cpu().numpy().copy()
    getattr(gt.fft, name)(g)
    getattr(gt.fft, name)(g.transpose(0, 2), s=(3, 4))
    np.testing.assert_array_equal(g.cpu().numpy(), before)


def test_large_transform_uses_threads(device: str) -> None:
    # above the one-thread threshold of the CPU kernel: the parallel path gives the same values
    g, t = _pair((3, 1 << 15), gt.float32, device)
    assert_close(gt.fft.rfft(g), torch.fft.rfft(t), atol=2e-3, rtol=1e-4)
    c, tc = _pair((1 << 14, 5), gt.complex128, device)
    assert_close(gt.fft.ifft(c, dim=0), torch.fft.ifft(tc, dim=0), atol=1e-10, rtol=1e-10)


def test_cpu_kernels_without_the_pocketfft_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    # the public scipy.fft fallback of kernels/cpu/fft.py gives the same results
    import scipy.fft

    from gputensor.kernels.cpu import fft as cpu_fft

    monkeypatch.setattr(cpu_fft, "_engines", lambda: (scipy.fft, None))
    for name, dtype in (("fft", gt.complex64), ("ifft", gt.complex128), ("rfft", gt.float64),
                        ("irfftn", gt.complex128), ("ihfft2", gt.float32)):
        for norm in (None, "ortho", "forward"):
            _compare(name, (4, 7), dtype, "cpu", norm=norm)


def test_gradgradcheck(device: str) -> None:
    from gputensor.autograd import gradgradcheck

    x = gt.tensor(random_array((2, 5), gt.float64), device=device, requires_grad=True)
    assert gradgradcheck(lambda x: gt.fft.irfft(gt.fft.rfft(x) * (0.5 + 0.5j), n=7), (x,))
    assert gradgradcheck(lambda x: gt.view_as_real(gt.fft.fft(x, norm="ortho")), (x,))


def test_round_trips(device: str) -> None:
    x = gt.tensor(random_array((3, 16), gt.float64), device=device)
    assert_close(gt.fft.irfft(gt.fft.rfft(x), n=16), x.cpu().numpy(), atol=1e-12, rtol=1e-12)
    assert_close(gt.fft.ifft(gt.fft.fft(x)).real, x.cpu().numpy(), atol=1e-12, rtol=1e-12)
    assert_close(gt.fft.ihfft(gt.fft.hfft(gt.fft.ihfft(x))), gt.fft.ihfft(x).cpu().numpy(),
                 atol=1e-12, rtol=1e-12)


# -- out= ------------------------------------------------------------------------------------------
def test_out(device: str) -> None:
    g, t = _pair((4, 8), gt.float32, device)
    out = gt.empty(0, dtype=gt.complex128, device=device)
    t_out = torch.empty(0, dtype=torch.complex128)
    res = gt.fft.fft(g, out=out)
    assert res is out
    assert_close(out, torch.fft.fft(t, out=t_out), atol=1e-5, rtol=1e-5)
    out = gt.empty((4, 14), device=device)
    gt.fft.irfft(g.to(gt.complex64), out=out)
    assert_close(out, torch.fft.irfft(t.to(torch.complex64)), atol=1e-5, rtol=1e-5)
    out = gt.empty(0, dtype=gt.complex64, device=device)
    gt.fft.rfft2(g, out=out)
    assert_close(out, torch.fft.rfft2(t), atol=1e-5, rtol=1e-5)


def test_out_errors(device: str) -> None:
    g, t = _pair((4, 8), gt.float32, device)
    assert_same_error(lambda: gt.fft.fft(g, out=gt.empty(4, 8, device=device)),
                      lambda: torch.fft.fft(t, out=torch.empty(4, 8)))
    assert_same_error(lambda: gt.fft.rfft(g, out=gt.empty(4, 5, device=device)),
                      lambda: torch.fft.rfft(t, out=torch.empty(4, 5)))
    c = g.to(gt.complex64)
    assert_same_error(
        lambda: gt.fft.irfft(c, out=gt.empty(4, 14, dtype=gt.complex64, device=device)),
        lambda: torch.fft.irfft(t.to(torch.complex64), out=torch.empty(4, 14,
                                                                       dtype=torch.complex64)))
    leaf = gt.ones(4, requires_grad=True, device=device)
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic"):
        gt.fft.rfft(leaf, out=gt.empty(0, dtype=gt.complex64, device=device))


# -- errors ----------------------------------------------------------------------------------------
ERRORS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("n_zero", lambda m, x: m.fft.fft(x, n=0)),
    ("n_negative", lambda m, x: m.fft.rfft(x.real, n=-1)),
    ("dim_range", lambda m, x: m.fft.fft(x, dim=2)),
    ("dim_tuple", lambda m, x: m.fft.fft(x, dim=(0,))),
    ("norm", lambda m, x: m.fft.fft(x, norm="foo")),
    ("norm_nd", lambda m, x: m.fft.irfftn(x, norm="sideways")),
    ("dims_unique", lambda m, x: m.fft.fftn(x, dim=(0, 0))),
    ("dims_unique_negative", lambda m, x: m.fft.rfft2(x.real, dim=(1, -1))),
    ("s_too_long", lambda m, x: m.fft.fftn(x, s=(1, 2, 3))),
    ("s_dim_length", lambda m, x: m.fft.fftn(x, s=(3,), dim=(0, 1))),
    ("s_zero", lambda m, x: m.fft.fft2(x, s=(0, 4))),
    ("s_negative", lambda m, x: m.fft.fftn(x, s=(-2, 4))),
    ("irfft_one_bin", lambda m, x: m.fft.irfft(x[:, :1])),
    ("irfftn_one_bin", lambda m, x: m.fft.irfftn(x[:, :1])),
    ("rfft_complex", lambda m, x: m.fft.rfft(x)),
    ("ihfft_complex", lambda m, x: m.fft.ihfft(x)),
    ("rfftn_complex", lambda m, x: m.fft.rfftn(x)),
    ("rfft2_complex", lambda m, x: m.fft.rfft2(x)),
    ("ihfftn_complex", lambda m, x: m.fft.ihfftn(x)),
    ("irfftn_no_dims", lambda m, x: m.fft.irfftn(x, dim=())),
    ("hfftn_no_dims", lambda m, x: m.fft.hfftn(x, dim=())),
    ("rfftn_no_dims", lambda m, x: m.fft.rfftn(x.real, dim=())),
    ("ihfftn_no_dims", lambda m, x: m.fft.ihfftn(x.real, dim=())),
    ("scalar", lambda m, x: m.fft.fft(x[0, 0])),
    ("empty_dim", lambda m, x: m.fft.fft(x[:, :0])),
    ("half", lambda m, x: m.fft.fft(x.real.half())),
    ("bfloat16", lambda m, x: m.fft.rfft(x.real.bfloat16())),
    ("half_c2r", lambda m, x: m.fft.irfft(x.real.half())),
    ("half_nd", lambda m, x: m.fft.rfftn(x.real.half())),
    ("shift_dim", lambda m, x: m.fft.fftshift(x, dim=5)),
    ("shift_no_dims", lambda m, x: m.fft.ifftshift(x, dim=[])),
]


@pytest.mark.parametrize("case", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors(device: str, case: Callable[[Any, Any], Any]) -> None:
    g, t = _pair((4, 8), gt.complex64, device)
    assert_same_error(lambda: case(gt, g), lambda: case(torch, t))


# -- frequencies and shifts ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n", [0, 1, 6, 7])
def test_frequencies(device: str, name: str, n: int) -> None:
    for kwargs in ({}, {"d": 0.25}, {"dtype": gt.float64}, {"dtype": gt.float16, "d": 2.0}):
        t_kwargs = {k: (getattr(torch, v.name) if k == "dtype" else v) for k, v in kwargs.items()}
        got = getattr(gt.fft, name)(n, device=device, **kwargs)
        assert got.device == gt.device(device)
        assert_close(got, getattr(torch.fft, name)(n, **t_kwargs), atol=1e-3, rtol=1e-3)
    out = gt.empty(0, dtype=gt.float64, device=device)
    assert getattr(gt.fft, name)(n, 0.5, out=out) is out
    assert_close(out, getattr(torch.fft, name)(n, 0.5, out=torch.empty(0, dtype=torch.float64)))
    assert getattr(gt.fft, name)(n, requires_grad=True).requires_grad


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_frequency_errors(name: str) -> None:
    for args, kwargs, t_kwargs in (((5,), {"dtype": gt.int64}, {"dtype": torch.int64}),
                                   ((5,), {"dtype": gt.complex64}, {"dtype": torch.complex64}),
                                   ((-5,), {}, {})):
        assert_same_error(lambda: getattr(gt.fft, name)(*args, **kwargs),  # noqa: B023
                          lambda: getattr(torch.fft, name)(*args, **t_kwargs))  # noqa: B023


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
def test_shifts(device: str, name: str) -> None:
    g, t = _pair((5, 6, 3), gt.float32, device)
    for kwargs in ({}, {"dim": 0}, {"dim": (1, -1)}):
        assert_close(getattr(gt.fft, name)(g, **kwargs), getattr(torch.fft, name)(t, **kwargs))
    # the shifts undo each other and the frequencies come out ordered
    freq = gt.fft.fftfreq(7, device=device)
    assert_close(gt.fft.ifftshift(gt.fft.fftshift(freq)), freq.cpu().numpy())


# -- autograd through the public functions ---------------------------------------------------------
@pytest.mark.parametrize("name", ND + TWO_D + ["hfft", "ihfft"])
def test_gradcheck_public(device: str, name: str) -> None:
    x = gt.tensor(random_array((3, 4, 2), gt.float64), device=device, requires_grad=True)

    def fn(x: gt.Tensor) -> gt.Tensor:
        z = x[..., 0] if name in REAL_INPUT else gt.view_as_complex(x)
        y = getattr(gt.fft, name)(z, norm="ortho")
        return gt.view_as_real(y) if y.dtype.is_complex else y

    assert gradcheck(fn, (x,))


def test_grad_matches_torch(device: str) -> None:
    a = random_array((4, 9), gt.float64)
    w = random_array((4, 5), gt.complex128, seed=1)
    g = gt.tensor(a, device=device, requires_grad=True)
    t = torch.from_numpy(a.copy()).requires_grad_(True)
    (gt.fft.rfft(g, norm="ortho") * gt.tensor(w, device=device)).real.sum().backward()
    (torch.fft.rfft(t, norm="ortho") * torch.from_numpy(w)).real.sum().backward()
    assert_close(g.grad, t.grad, atol=1e-12, rtol=1e-12)


# -- windows ---------------------------------------------------------------------------------------
WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("length", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows(device: str, name: str, length: int, periodic: bool) -> None:
    for dt in (None, gt.float64, gt.float16, gt.bfloat16):
        kwargs = {} if dt is None else {"dtype": dt}
        t_kwargs = {} if dt is None else {"dtype": getattr(torch, dt.name)}
        got = getattr(gt, name)(length, periodic, device=device, **kwargs)
        assert got.device == gt.device(device)
        tol = {gt.float16: 2e-3, gt.bfloat16: 1e-2}.get(dt, 1e-6)
        assert_close(got, getattr(torch, name)(length, periodic, **t_kwargs), atol=tol, rtol=tol)


def test_window_parameters(device: str) -> None:
    for args in ((7, True, 0.3), (7, False, 0.3, 0.2), (6, True, 0.5, 0.5)):
        assert_close(gt.hamming_window(*args, device=device), torch.hamming_window(*args),
                     atol=1e-6, rtol=1e-6)
    for args in ((9, True, 3.0), (9, False, 0.5), (10, True)):
        assert_close(gt.kaiser_window(*args, dtype=gt.float64, device=device),
                     torch.kaiser_window(*args, dtype=torch.float64), atol=1e-12, rtol=1e-12)
    w = gt.hann_window(5, requires_grad=True, device=device)
    assert w.requires_grad and w.is_leaf


@pytest.mark.parametrize("name", WINDOWS)
def test_window_errors(name: str) -> None:
    assert_same_error(lambda: getattr(gt, name)(-1), lambda: getattr(torch, name)(-1))
    assert_same_error(lambda: getattr(gt, name)(5, dtype=gt.int64),
                      lambda: getattr(torch, name)(5, dtype=torch.int64))
    assert_same_error(lambda: getattr(gt, name)(5, dtype=gt.complex64),
                      lambda: getattr(torch, name)(5, dtype=torch.complex64))


# -- stft / istft ----------------------------------------------------------------------------------
STFT_CASES = [
    {"n_fft": 16},
    {"n_fft": 16, "hop_length": 5, "normalized": True},
    {"n_fft": 15, "win_length": 10, "window": "hann"},
    {"n_fft": 16, "window": "hamming", "center": False},
    {"n_fft": 16, "window": "hann", "pad_mode": "constant", "onesided": False},
    {"n_fft": 12, "win_length": 8, "window": "hann", "center": False, "align_to_window": True},
    {"n_fft": 12, "win_length": 8, "window": "hann", "center": False, "align_to_window": False},
    {"n_fft": 16, "window": "hann", "return_complex": False},
]


def _window_args(kwargs: dict, device: str) -> tuple[dict, dict]:
    g_kw, t_kw = dict(kwargs), dict(kwargs)
    name = kwargs.get("window")
    if name is not None:
        length = kwargs.get("win_length", kwargs["n_fft"])
        g_kw["window"] = getattr(gt, f"{name}_window")(length, dtype=gt.float64, device=device)
        t_kw["window"] = getattr(torch, f"{name}_window")(length, dtype=torch.float64)
    g_kw.setdefault("return_complex", True)
    t_kw.setdefault("return_complex", True)
    return g_kw, t_kw


@pytest.mark.parametrize("kwargs", STFT_CASES, ids=[str(i) for i in range(len(STFT_CASES))])
@pytest.mark.parametrize("shape", [(100,), (2, 77)])
def test_stft(device: str, kwargs: dict, shape: tuple[int, ...]) -> None:
    g, t = _pair(shape, gt.float64, device)
    g_kw, t_kw = _window_args(kwargs, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.stft(t, **t_kw)
        got = gt.stft(g, **g_kw)
    assert_close(got, expected, atol=1e-10, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_close(g.stft(**g_kw), expected, atol=1e-10, rtol=1e-10)


def test_stft_complex_and_float32(device: str) -> None:
    g, t = _pair((2, 64), gt.complex64, device)
    window = gt.hann_window(16, device=device)
    assert_close(gt.stft(g, 16, window=window), torch.stft(t, 16, window=torch.hann_window(16)),
                 atol=1e-4, rtol=1e-4)
    g, t = _pair((64,), gt.float32, device)
    assert_close(gt.stft(g, 16, 4, window=window, return_complex=True),
                 torch.stft(t, 16, 4, window=torch.hann_window(16), return_complex=True),
                 atol=1e-4, rtol=1e-4)


STFT_ERRORS: list[tuple[str, Callable[[Any, Any, Any], Any]]] = [
    ("no_return_complex", lambda m, x, w: m.stft(x, 16, window=w)),
    ("n_fft_long", lambda m, x, w: m.stft(x, 200, window=m.ones(200, dtype=x.dtype),
                                          return_complex=True, center=False)),
    ("hop_zero", lambda m, x, w: m.stft(x, 16, hop_length=0, window=w, return_complex=True)),
    ("win_long", lambda m, x, w: m.stft(x, 16, win_length=20, window=w, return_complex=True)),
    ("window_size", lambda m, x, w: m.stft(x, 16, window=w[:8], return_complex=True)),
    ("three_d", lambda m, x, w: m.stft(x.reshape(1, 2, 50), 16, window=w,
                                       return_complex=True, center=False)),
    ("integer", lambda m, x, w: m.stft(x.long(), 16, window=w, return_complex=True,
                                       center=False)),
    ("align_center", lambda m, x, w: m.stft(x, 16, window=w, return_complex=True,
                                            align_to_window=True)),
    ("onesided_complex", lambda m, x, w: m.stft(x * 1j, 16, window=w, onesided=True)),
    ("istft_real", lambda m, x, w: m.istft(x, 16, window=w)),
    ("istft_bins", lambda m, x, w: m.istft(m.stft(x, 16, window=w, return_complex=True), 18,
                                           window=w)),
    ("istft_nola", lambda m, x, w: m.istft(m.stft(x, 16, window=w, return_complex=True), 16,
                                           window=w, center=False)),
    ("istft_onesided_complex", lambda m, x, w: m.istft(
        m.stft(x, 16, window=w, return_complex=True), 16, window=w, return_complex=True)),
    ("istft_4d", lambda m, x, w: m.istft(m.zeros(2, 3, 9, 5, dtype=m.complex64), 16)),
    ("istft_hop", lambda m, x, w: m.istft(m.zeros(9, 5, dtype=m.complex64), 16, hop_length=20)),
    ("istft_win", lambda m, x, w: m.istft(m.zeros(9, 5, dtype=m.complex64), 16, win_length=20)),
    ("istft_window_size", lambda m, x, w: m.istft(m.zeros(9, 5, dtype=m.complex64), 16,
                                                  window=w[:8])),
    ("istft_empty", lambda m, x, w: m.istft(m.zeros(9, 0, dtype=m.complex64), 16)),
    ("stft_n_fft_vs_win", lambda m, x, w: m.stft(x, 200, win_length=100, window=m.ones(100),
                                                 return_complex=True, center=False)),
    ("istft_1d", lambda m, x, w: m.istft(m.stft(x, 16, window=w, return_complex=True)[0], 16,
                                         window=w)),
]


@pytest.mark.parametrize("case", [c[1] for c in STFT_ERRORS], ids=[c[0] for c in STFT_ERRORS])
def test_stft_errors(case: Callable[[Any, Any, Any], Any]) -> None:
    g, t = _pair((100,), gt.float32, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_error(lambda: case(gt, g, gt.hann_window(16)),
                          lambda: case(torch, t, torch.hann_window(16)))


ISTFT_CASES = [
    {"n_fft": 16, "window": "hann"},
    {"n_fft": 16, "window": "hann", "hop_length": 3, "normalized": True},
    {"n_fft": 15, "win_length": 12, "window": "hamming", "length": 70},
    {"n_fft": 16, "window": "hann", "length": 140},
    {"n_fft": 16},
    {"n_fft": 16, "window": "hann", "onesided": False, "return_complex": True},
]


@pytest.mark.parametrize("kwargs", ISTFT_CASES, ids=[str(i) for i in range(len(ISTFT_CASES))])
@pytest.mark.parametrize("shape", [(100,), (2, 77)])
def test_istft(device: str, kwargs: dict, shape: tuple[int, ...]) -> None:
    g, t = _pair(shape, gt.float64, device)
    g_kw, t_kw = _window_args(kwargs, device)
    s_kw = {k: v for k, v in g_kw.items() if k in ("n_fft", "hop_length", "win_length",
                                                     "window", "normalized", "onesided")}
    ts_kw = {k: v for k, v in t_kw.items() if k in s_kw}
    i_kw = dict(g_kw, return_complex=kwargs.get("return_complex", False))
    ti_kw = dict(t_kw, return_complex=kwargs.get("return_complex", False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec_t = torch.stft(t, return_complex=True, **ts_kw)
        spec_g = gt.stft(g, return_complex=True, **s_kw)
        expected = torch.istft(spec_t, **ti_kw)
        got = gt.istft(spec_g, **i_kw)
        assert_close(got, expected, atol=1e-10, rtol=1e-10)
        assert_close(spec_g.istft(**i_kw), expected, atol=1e-10, rtol=1e-10)


def test_stft_istft_gradcheck(device: str) -> None:
    window = gt.hann_window(8, dtype=gt.float64, device=device)
    x = gt.tensor(random_array((24,), gt.float64), device=device, requires_grad=True)

    def analyse(x: gt.Tensor) -> gt.Tensor:
        return gt.view_as_real(gt.stft(x, 8, 2, window=window, return_complex=True))

    def round_trip(x: gt.Tensor) -> gt.Tensor:
        spec = gt.stft(x, 8, 2, window=window, return_complex=True) * (0.5 + 0.2j)
        return gt.istft(spec, 8, 2, window=window, length=24)

    assert gradcheck(analyse, (x,))
    assert gradcheck(round_trip, (x,))


FUSED_CASES = [  # (shape, stft keywords): calls that record nothing take _stft_r2c/_istft_c2r
    ((400,), {"n_fft": 64, "hop_length": 16}),
    ((2, 301), {"n_fft": 32, "hop_length": 7, "normalized": True}),
    ((300,), {"n_fft": 30, "win_length": 20, "hop_length": 10}),
    ((2, 200), {"n_fft": 32, "hop_length": 8, "center": False}),
    ((500,), {"n_fft": 8, "hop_length": 2}),
    ((3, 2000), {"n_fft": 256, "hop_length": 64}),
]


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", FUSED_CASES, ids=[str(i) for i in range(len(FUSED_CASES))])
def test_stft_istft_fused(device: str, case: tuple, dtype: gt.dtype) -> None:
    """The fused path against PyTorch (values, dtype, strides: frames outermost) and against
    the op-by-op composite a recorded call takes; istft of its result (length given, the
    two-sided spectrum's first half); a strided signal."""
    shape, kw = case
    g, t = _pair(shape, dtype, device)
    win = kw.get("win_length", kw["n_fft"])
    g_kw = dict(kw, window=gt.hamming_window(win, dtype=dtype, device=device),
                return_complex=True)
    t_kw = dict(kw, window=torch.hamming_window(win, dtype=t.dtype), return_complex=True)
    tol = TOL[dtype]
    expected = torch.stft(t, **t_kw)
    got = gt.stft(g, **g_kw)
    assert got.dtype == dtype.to_complex() and got.stride() == expected.stride()
    assert_close(got, expected, atol=tol, rtol=tol)
    recorded = gt.stft(g.detach().requires_grad_(True), **g_kw)
    assert recorded.grad_fn is not None and got.grad_fn is None
    assert_close(got, recorded.detach(), atol=tol, rtol=tol)
    i_kw = {k: v for k, v in g_kw.items() if k != "return_complex"}
    ti_kw = {k: v for k, v in t_kw.items() if k != "return_complex"}
    length = shape[-1] - 3
    assert_close(gt.istft(got, length=length, **i_kw),
                 torch.istft(expected, length=length, **ti_kw), atol=tol, rtol=tol)
    two_sided = gt.stft(g, onesided=False, **g_kw)
    assert_close(gt.istft(two_sided, onesided=False, **i_kw),
                 torch.istft(torch.stft(t, onesided=False, **t_kw), onesided=False, **ti_kw),
                 atol=tol, rtol=tol)
    strided_g, strided_t = _pair((*shape[:-1], 2 * shape[-1]), dtype, device, seed=1)
    assert_close(gt.stft(strided_g[..., ::2], **g_kw), torch.stft(strided_t[..., ::2], **t_kw),
                 atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [gt.float32, gt.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_rfft_long_signal(device: str, dtype: gt.dtype, norm: str) -> None:
    """One long power-of-two signal (the CPU's four-step path, >= 2^17 points) and a strided
    one (pocketfft's single call) against PyTorch."""
    g, t = _pair((1 << 18,), dtype, device)
    tol = TOL[dtype] * 10
    assert_close(gt.fft.rfft(g, norm=norm), torch.fft.rfft(t, norm=norm), atol=tol, rtol=tol)
    assert_close(gt.fft.rfft(g[::2], norm=norm), torch.fft.rfft(t[::2], norm=norm), atol=tol,
                 rtol=tol)
