"""Tests for gputensor/_tensor_str.py: reprs must match ``repr(torch_tensor)`` exactly."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys
import zlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import ml_dtypes
import numpy as np
import pytest


def _load_module() -> ModuleType:
    # Load by file path so the tests run whether or not the gputensor package is importable yet.
    path = pathlib.Path(__file__).resolve().parents[2] / "gputensor" / "_tensor_str.py"
    spec = importlib.util.spec_from_file_location("_gputensor_tensor_str_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


ts = _load_module()


@pytest.fixture(autouse=True)
def _restore_print_state() -> Iterator[None]:
    # Every test starts and ends with default options in both libraries.
    ts.set_printoptions(profile="default")
    yield
    ts.set_printoptions(profile="default")
    try:
        import torch
    except ImportError:
        return
    torch.set_printoptions(profile="default")
    torch.set_default_dtype(torch.float32)


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    torch = pytest.importorskip("torch")
    original = torch._tensor_str._add_suffixes

    def add_suffixes(tensor_str: str, suffixes: list[str], indent: int, force_newline: bool) -> str:
        # "gputensor.float64" is longer than "torch.float64", which moves the point where the
        # suffixes wrap; renaming before torch's own wrapping logic runs keeps the comparison exact.
        # The device suffix is injected here too, since there is no GPU to make torch print it.
        renamed = [s.replace("torch.", "gputensor.") for s in suffixes]
        return original(tensor_str, _FAKE_DEVICE + renamed, indent, force_newline)

    monkeypatch.setattr(torch._tensor_str, "_add_suffixes", add_suffixes)
    return torch


# Suffixes prepended to torch's own (device='...' comes first in PyTorch's list).
_FAKE_DEVICE: list[str] = []


def _to_numpy(t: Any) -> np.ndarray:
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        # numpy has no bfloat16; reinterpret the bits (keeps the strides, so views stay views).
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _ours(t: Any, **overrides: Any) -> str:
    import torch

    kwargs: dict[str, Any] = {
        "dtype_name": str(t.dtype).removeprefix("torch."),
        "is_default_dtype": t.dtype == torch.get_default_dtype(),
        "default_dtype_name": str(torch.get_default_dtype()).removeprefix("torch."),
        "requires_grad": t.requires_grad,
        "grad_fn_name": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
    }
    kwargs.update(overrides)
    return ts.format_tensor(_to_numpy(t), **kwargs)


def _expected(t: Any) -> str:
    # The torch fixture has already renamed torch.<dtype> in the suffixes.
    return repr(t)


def _check(t: Any, **overrides: Any) -> None:
    assert _ours(t, **overrides) == _expected(t)


# ---------------------------------------------------------------------------------------------
# Value sets, each tried with every dtype that can hold it
# ---------------------------------------------------------------------------------------------

nan, inf = math.nan, math.inf

FLOAT_VALUES: dict[str, list[Any]] = {
    "fractions": [1.5, -2.25, 3.0],
    "integral": [1.0, 2.0, -3.0, 100.0],
    "zeros": [0.0, 0.0],
    "neg_zero": [-0.0, 0.0],
    "neg_zero_with_one": [-0.0, 1.0],
    "neg_zero_fraction": [-0.0, 1.5],
    "small_ratio_sci": [1.0, 2000.0],
    "tiny_sci": [1e-5, 1.0],
    "huge_sci": [1e9, 1.0],
    "huge_integral": [123456789.0, 1.0],
    "just_below_sci": [1.0, 999.0, 0.5],
    "rounding_carry": [9.99999, 0.5],
    "nan_inf": [nan, inf, -inf, 1.5],
    "nan_only": [nan],
    "inf_only": [inf, -inf],
    "nan_with_integral": [nan, 1.0, -2.0],
    "nan_with_sci": [nan, 1e10, 1.0],
    "zero_nan": [0.0, nan],
    "negatives": [-1e-3, -5.0, -0.25],
    "long_row": [i * 1.37 - 20 for i in range(40)],
    "long_integral_row": [float(i) for i in range(60)],
}

FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("values", FLOAT_VALUES.values(), ids=FLOAT_VALUES.keys())
def test_float_values(torch: ModuleType, dtype: str, values: list[float]) -> None:
    _check(torch.tensor(values, dtype=getattr(torch, dtype)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "values",
    [[1e-120, 1.0], [1e150, -1.0], [-1e-300, 1e300], [5e-324, 1.0]],
    ids=["e-120", "e+150", "e-300_e+300", "denormal"],
)
def test_three_digit_exponents(torch: ModuleType, dtype: str, values: list[float]) -> None:
    # Only float64 keeps these magnitudes; float32 turns them into 0/inf, also worth a look.
    _check(torch.tensor(values, dtype=getattr(torch, dtype)))


INT_VALUES: dict[str, list[int]] = {
    "small": [1, 2, 3],
    "mixed_sign": [-5, 10, 0, 7],
    "wide": [0, 100, 9],
    "long_row": list(range(50)),
}
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("values", INT_VALUES.values(), ids=INT_VALUES.keys())
def test_int_values(torch: ModuleType, dtype: str, values: list[int]) -> None:
    if dtype == "uint8":
        values = [abs(v) for v in values]
    _check(torch.tensor(values, dtype=getattr(torch, dtype)))


def test_int64_extremes(torch: ModuleType) -> None:
    _check(torch.tensor([-(2**63), 2**63 - 1, 0]))


@pytest.mark.parametrize(
    "values",
    [[True, False], [True], [False, False, True, True, False]],
    ids=["pair", "single", "five"],
)
def test_bool_values(torch: ModuleType, values: list[bool]) -> None:
    _check(torch.tensor(values))


COMPLEX_VALUES: dict[str, list[complex]] = {
    "basic": [1 + 2j, 3 - 4j],
    "fractions": [1.5 - 0.25j, -2.125 + 3j],
    "pure_real": [1 + 0j, 2 + 0j],
    "pure_imag": [1j, -2j],
    "sci_imag": [1 + 1e-6j, 2 + 3j],
    "sci_real": [1e10 + 1j, 2 + 3j],
    "nan_inf": [complex(nan, 1), complex(1, inf), complex(-inf, nan)],
    "neg_zero": [complex(-0.0, -0.0), complex(0.0, -0.0), complex(-0.0, 0.0)],
    "long_row": [complex(i * 0.5, -i) for i in range(30)],
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("values", COMPLEX_VALUES.values(), ids=COMPLEX_VALUES.keys())
def test_complex_values(torch: ModuleType, dtype: str, values: list[complex]) -> None:
    real = torch.tensor([v.real for v in values], dtype=torch.float64)
    imag = torch.tensor([v.imag for v in values], dtype=torch.float64)
    # torch.complex keeps signed zeros and nan/inf parts exactly as given.
    _check(torch.complex(real, imag).to(getattr(torch, dtype)))


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------

ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + ["bool", "complex64", "complex128"]


def _random(torch: ModuleType, shape: tuple[int, ...], dtype: str, scale: float = 10.0) -> Any:
    # crc32, not hash(): str hashes change between runs, and the data should not.
    gen = torch.Generator().manual_seed(zlib.crc32(repr((shape, dtype)).encode()))
    if dtype == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.startswith(("int", "uint")):
        low = 0 if dtype == "uint8" else -100
        return torch.randint(low, 100, shape, generator=gen, dtype=getattr(torch, dtype))
    if dtype.startswith("complex"):
        return (torch.randn(shape, generator=gen, dtype=torch.complex128) * scale).to(
            getattr(torch, dtype)
        )
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(
        getattr(torch, dtype)
    )


SHAPES = [(), (1,), (5,), (2, 3), (3, 1), (2, 3, 4), (2, 1, 2, 3)]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_shapes(torch: ModuleType, dtype: str, shape: tuple[int, ...]) -> None:
    _check(_random(torch, shape, dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4), (3, 0)], ids=str)
def test_empty(torch: ModuleType, dtype: str, shape: tuple[int, ...]) -> None:
    _check(torch.zeros(shape, dtype=getattr(torch, dtype)))


@pytest.mark.parametrize(
    "value,dtype",
    [
        (3.5, "float32"),
        (3.0, "float32"),
        (-0.0, "float32"),
        (1e-8, "float32"),
        (1e20, "float64"),
        (nan, "float32"),
        (-inf, "float64"),
        (0.1, "float16"),
        (0.1, "bfloat16"),
        (7, "int64"),
        (-7, "int8"),
        (True, "bool"),
        (1 + 2j, "complex64"),
        (-1.5 - 0.5j, "complex128"),
    ],
)
def test_zero_dim(torch: ModuleType, value: Any, dtype: str) -> None:
    _check(torch.tensor(value, dtype=getattr(torch, dtype)))


def test_non_contiguous_views(torch: ModuleType) -> None:
    base = _random(torch, (4, 6), "float32")
    _check(base.t())
    _check(base[:, ::2])
    _check(base.flip(0)[1:])
    _check(torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1))
    _check(_random(torch, (5, 4), "bfloat16").t())
    _check(_random(torch, (3, 4), "complex64").t())
    # Negative strides only exist on the numpy side.
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::-2]
    expected = _expected(torch.tensor(arr.copy()))
    got = ts.format_tensor(arr, dtype_name="float32", is_default_dtype=True)
    assert got == expected


# ---------------------------------------------------------------------------------------------
# Summarization and line wrapping
# ---------------------------------------------------------------------------------------------

LARGE_SHAPES = [(1001,), (2000,), (40, 40), (3, 1000), (1000, 3), (10, 10, 20), (8, 8, 8, 8)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool", "complex64"])
@pytest.mark.parametrize("shape", LARGE_SHAPES, ids=str)
def test_summarized(torch: ModuleType, dtype: str, shape: tuple[int, ...]) -> None:
    _check(_random(torch, shape, dtype))


def test_summarized_widths_ignore_hidden_elements(torch: ModuleType) -> None:
    # The huge/fractional values sit in the hidden middle, so they must not affect the format.
    t = torch.ones(2000)
    t[1000] = 1e12
    t[1001] = 0.5
    _check(t)
    m = torch.ones(50, 50, dtype=torch.int64)
    m[25, 25] = -123456789
    _check(m)


def test_exactly_at_threshold(torch: ModuleType) -> None:
    _check(torch.arange(1000.0))
    _check(torch.arange(1001.0))


@pytest.mark.parametrize("shape", [(100,), (7, 30), (3, 2, 25)], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128"])
def test_line_wrapping(torch: ModuleType, shape: tuple[int, ...], dtype: str) -> None:
    _check(_random(torch, shape, dtype, scale=1000.0))


# ---------------------------------------------------------------------------------------------
# Print options
# ---------------------------------------------------------------------------------------------

OPTION_SETS: list[dict[str, Any]] = [
    {"precision": 2},
    {"precision": 0},
    {"precision": 10},
    {"threshold": 5},
    {"threshold": 0},
    {"threshold": 5, "edgeitems": 1},
    {"threshold": 5, "edgeitems": 0},
    {"edgeitems": 0},
    {"linewidth": 30},
    {"linewidth": 1},
    {"linewidth": 200},
    {"profile": "short"},
    {"profile": "full"},
    {"profile": "short", "precision": 6},
    {"sci_mode": True},
    {"sci_mode": False},
    {"precision": 3, "sci_mode": True, "linewidth": 50},
]

OPTION_TENSORS: dict[str, Callable[[ModuleType], Any]] = {
    "float_row": lambda torch: _random(torch, (12,), "float32"),
    "float_matrix": lambda torch: _random(torch, (4, 9), "float64", scale=1e-3),
    "float_3d": lambda torch: _random(torch, (3, 4, 5), "float32"),
    "integral_floats": lambda torch: torch.arange(-6.0, 6.0),
    "sci_values": lambda torch: torch.tensor([1e-6, 3.0, 12345.0]),
    "zeros_nan": lambda torch: torch.tensor([0.0, nan, -0.0]),
    "ints": lambda torch: torch.arange(30).reshape(5, 6),
    "bools": lambda torch: torch.arange(8) % 3 == 0,
    "complex": lambda torch: _random(torch, (2, 7), "complex64"),
    "scalar": lambda torch: torch.tensor(2.5),
    "large": lambda torch: _random(torch, (1200,), "float32"),
}


@pytest.mark.parametrize("make", OPTION_TENSORS.values(), ids=OPTION_TENSORS.keys())
@pytest.mark.parametrize(
    "options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
def test_printoptions_match_torch(
    torch: ModuleType, options: dict[str, Any], make: Callable[[ModuleType], Any]
) -> None:
    t = make(torch)
    torch.set_printoptions(**options)
    ts.set_printoptions(**options)
    assert ts.get_printoptions() == torch._tensor_str.get_printoptions()
    _check(t)


def test_printoptions_defaults_and_profiles() -> None:
    assert ts.get_printoptions() == {
        "precision": 4,
        "threshold": 1000,
        "edgeitems": 3,
        "linewidth": 80,
        "sci_mode": None,
    }
    ts.set_printoptions(profile="short")
    assert ts.get_printoptions()["precision"] == 2
    assert ts.get_printoptions()["edgeitems"] == 2
    ts.set_printoptions(profile="full")
    assert ts.get_printoptions()["threshold"] == math.inf
    ts.set_printoptions(sci_mode=True)
    assert ts.get_printoptions()["sci_mode"] is True
    # As in PyTorch, any call that omits sci_mode resets it.
    ts.set_printoptions(precision=3)
    assert ts.get_printoptions()["sci_mode"] is None


def test_set_printoptions_sequence_matches_torch(torch: ModuleType) -> None:
    for options in OPTION_SETS:
        torch.set_printoptions(**options)
        ts.set_printoptions(**options)
        assert ts.get_printoptions() == torch._tensor_str.get_printoptions()


def test_printoptions_context_manager_restores() -> None:
    ts.set_printoptions(precision=6, sci_mode=True)
    before = ts.get_printoptions()
    with ts.printoptions(precision=2, threshold=10):
        assert ts.get_printoptions()["precision"] == 2
        assert ts.get_printoptions()["threshold"] == 10
        # Omitting sci_mode resets it to None inside the block, as in PyTorch.
        assert ts.get_printoptions()["sci_mode"] is None
        values = np.array([1.23456, 2.0], dtype=np.float32)
        assert ts.format_tensor(values, dtype_name="float32", is_default_dtype=True) == (
            "tensor([1.23, 2.00])"
        )
    assert ts.get_printoptions() == before

    with pytest.raises(RuntimeError), ts.printoptions(linewidth=10):
        raise RuntimeError("restored even on error")
    assert ts.get_printoptions() == before


def test_printoptions_as_decorator() -> None:
    @ts.printoptions(precision=1)
    def render() -> str:
        return ts.format_tensor(np.array([1.25, 2.5]), dtype_name="float32", is_default_dtype=True)

    assert render() == "tensor([1.2, 2.5])"
    assert ts.get_printoptions()["precision"] == 4


# ---------------------------------------------------------------------------------------------
# Suffixes: dtype, default dtype, autograd, device, prefix
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_dtype_suffix_under_float64_default(torch: ModuleType, dtype: str) -> None:
    torch.set_default_dtype(torch.float64)
    _check(_random(torch, (3,), dtype))
    _check(torch.zeros(0, dtype=getattr(torch, dtype)))


def test_requires_grad_and_grad_fn(torch: ModuleType) -> None:
    x = torch.ones(2, requires_grad=True)
    _check(x)
    y = x * 2
    assert type(y.grad_fn).__name__ == "MulBackward0"
    _check(y, grad_fn_name="MulBackward0")
    _check(torch.ones(2, dtype=torch.float64, requires_grad=True) + 1)
    _check(torch.tensor(1.5, requires_grad=True))
    _check(torch.zeros(0, 3, dtype=torch.float64, requires_grad=True))


def test_suffixes_wrap_to_new_line(torch: ModuleType) -> None:
    # Rows that nearly fill the line push the suffixes onto their own lines.
    _check(torch.arange(11.0, dtype=torch.float64).mul(1.1).requires_grad_() * 3)
    _check(_random(torch, (2, 8), "float64").requires_grad_())
    _check(_random(torch, (9,), "float16") + 0)
    torch.set_printoptions(linewidth=40)
    ts.set_printoptions(linewidth=40)
    _check(torch.ones(3, dtype=torch.float64, requires_grad=True).exp())


def test_custom_prefix(torch: ModuleType) -> None:
    class MyTensor(torch.Tensor):
        pass

    t = _random(torch, (3, 4), "float32").as_subclass(MyTensor)
    assert repr(t).startswith("MyTensor(")
    _check(t, prefix="MyTensor(")


def test_device_suffix() -> None:
    f32 = np.array([1.0, 2.0], dtype=np.float32)
    assert ts.format_tensor(f32, dtype_name="float32", is_default_dtype=True, device="cuda:0") == (
        "tensor([1., 2.], device='cuda:0')"
    )
    got = ts.format_tensor(
        f32.astype(np.float64),
        dtype_name="float64",
        is_default_dtype=False,
        device="cuda:0",
        requires_grad=True,
    )
    assert got == "tensor([1., 2.], device='cuda:0', dtype=gputensor.float64, requires_grad=True)"
    got = ts.format_tensor(
        np.array([[1, 2], [3, 4]], dtype=np.int32),
        dtype_name="int32",
        is_default_dtype=False,
        device="cuda:1",
        grad_fn_name="AddBackward0",
    )
    # PyTorch's suffix arithmetic counts this last line as 81 wide, so grad_fn wraps.
    assert got == (
        "tensor([[1, 2],\n"
        "        [3, 4]], device='cuda:1', dtype=gputensor.int32,\n"
        "       grad_fn=<AddBackward0>)"
    )
    got = ts.format_tensor(
        np.zeros((0, 2), dtype=np.int64),
        dtype_name="int64",
        is_default_dtype=False,
        device="cuda:0",
    )
    assert got == "tensor([], device='cuda:0', size=(0, 2), dtype=gputensor.int64)"


@pytest.mark.parametrize(
    "make",
    [
        lambda torch: torch.tensor([1.0, 2.0]),
        lambda torch: _random(torch, (2, 30), "float64"),
        lambda torch: _random(torch, (9,), "int32"),
        lambda torch: torch.ones(3, requires_grad=True) * 2,
        lambda torch: torch.zeros(0, 4, dtype=torch.int64),
        lambda torch: torch.tensor(1.5, dtype=torch.float16),
    ],
    ids=["simple", "wide_float64", "int32", "grad_fn", "empty", "scalar"],
)
@pytest.mark.parametrize("device", ["cuda:0", "cuda:1"])
def test_device_suffix_matches_torch_layout(
    torch: ModuleType, make: Callable[[ModuleType], Any], device: str
) -> None:
    t = make(torch)
    _FAKE_DEVICE.append(f"device='{device}'")
    try:
        expected = _expected(t)
    finally:
        _FAKE_DEVICE.clear()
    assert _ours(t, device=device) == expected


# ---------------------------------------------------------------------------------------------
# Hand-written expectations (run even without torch)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values,dtype_name,is_default,expected",
    [
        (np.array(3.5, np.float32), "float32", True, "tensor(3.5000)"),
        (np.array([], np.float32), "float32", True, "tensor([])"),
        (np.array([], np.int64), "int64", False, "tensor([], dtype=gputensor.int64)"),
        (np.array([1 + 2j, 3 - 4j], np.complex64), "complex64", False, "tensor([1.+2.j, 3.-4.j])"),
        (np.array([1, -20, 3], np.int64), "int64", False, "tensor([  1, -20,   3])"),
        (np.array([1e-5, 1.0], np.float32), "float32", True, "tensor([1.0000e-05, 1.0000e+00])"),
        (np.array([nan, -inf, 2.0], np.float32), "float32", True, "tensor([nan, -inf, 2.])"),
        (np.array([True, False]), "bool", False, "tensor([ True, False])"),
        (
            np.array([0.5, 1.0], ml_dtypes.bfloat16),
            "bfloat16",
            False,
            "tensor([0.5000, 1.0000], dtype=gputensor.bfloat16)",
        ),
        (
            np.arange(8, dtype=np.float64).reshape(2, 2, 2),
            "float64",
            False,
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]],"
            " dtype=gputensor.float64)",
        ),
    ],
)
def test_hand_written(values: np.ndarray, dtype_name: str, is_default: bool, expected: str) -> None:
    assert ts.format_tensor(values, dtype_name=dtype_name, is_default_dtype=is_default) == expected


def test_summarized_hand_written() -> None:
    got = ts.format_tensor(np.arange(2000), dtype_name="int64", is_default_dtype=False)
    assert got == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
    with ts.printoptions(threshold=5, edgeitems=0):
        got = ts.format_tensor(np.ones((3, 3)), dtype_name="float32", is_default_dtype=True)
    assert got == "tensor([...], size=(3, 3))"
