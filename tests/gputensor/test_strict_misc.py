"""Small PyTorch parities from the strictness issue (issue 15): one-step linspace/logspace with
an infinite end, duplicate-dim and 0-dim errors, in-place abs of complex, nll_loss of
non-floating input, index_put dtype rules. Each case runs on both libraries and must give the
same values or the same exception type and message."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import gputensor as gt


def _run(fn: Callable[[Any, str], Any], lib: Any, device: str) -> tuple[str, Any]:
    try:
        r = fn(lib, device)
    except (RuntimeError, IndexError, TypeError, ValueError, NotImplementedError) as e:
        return type(e).__name__, str(e).split("\nException raised from")[0]
    if hasattr(r, "dtype"):  # values and dtype name
        return "ok", (r.tolist(), str(r.dtype).split(".")[-1])
    return "ok", r


def _set(x: Any, index: Any, value: Any) -> Any:
    x[index] = value
    return x


CASES: dict[str, Callable[[Any, str], Any]] = {
    "linspace one step to inf": lambda lib, d: lib.linspace(1, math.inf, 1, device=d),
    "logspace one step to inf, int64": lambda lib, d: lib.logspace(
        -5, math.inf, 1, dtype=lib.int64, device=d),
    "sum over a repeated dim": lambda lib, d: lib.ones(2, 3, device=d).sum(dim=(1, -1)),
    "complex abs_": lambda lib, d: lib.tensor([1 + 1j], device=d).abs_(),
    "real abs_": lambda lib, d: lib.tensor([-1.0], device=d).abs_(),
    "nll_loss of complex": lambda lib, d: lib.nn.functional.nll_loss(
        lib.zeros(2, 3, dtype=lib.complex64, device=d), lib.tensor([0, 1], device=d)),
    "nll_loss of int64": lambda lib, d: lib.nn.functional.nll_loss(
        lib.zeros(2, 3, dtype=lib.int64, device=d), lib.tensor([0, 1], device=d)),
    "index_put_ of another dtype": lambda lib, d: lib.zeros(2, device=d).index_put_(
        (lib.tensor([0], device=d),), lib.tensor([5], device=d)),
    "setitem list index, another dtype": lambda lib, d: _set(
        lib.zeros(2, device=d), [0], lib.tensor([5.0], dtype=lib.float64, device=d)),
    "setitem mask, 0-dim of another dtype": lambda lib, d: _set(
        lib.zeros(2, device=d), lib.tensor([True, False], device=d),
        lib.tensor(5.0, dtype=lib.float64, device=d)),
    "setitem slice, another dtype": lambda lib, d: _set(
        lib.zeros(2, device=d), slice(0, 1), lib.tensor([5], device=d)),
    "movedim of 0-dim": lambda lib, d: lib.movedim(lib.tensor(1.0, device=d), 0, -1),
    "movedim of 0-dim, dim 1": lambda lib, d: lib.movedim(lib.tensor(1.0, device=d), 1, 0),
    "unbind of 0-dim": lambda lib, d: lib.tensor(1.0, device=d).unbind(),
    "narrow of 0-dim": lambda lib, d: lib.tensor(1.0, device=d).narrow(0, 0, 1),
    "unflatten of 0-dim": lambda lib, d: lib.tensor(1.0, device=d).unflatten(0, (1,)),
    "unique(dim=0) of 0-dim": lambda lib, d: lib.unique(lib.tensor(1.0, device=d), dim=0),
    "any over dim=()": lambda lib, d: lib.tensor([[1.0, 0.0]], device=d).any(dim=()),
    "all over dim=[] of uint8": lambda lib, d: lib.tensor([[1, 0]], dtype=lib.uint8,
                                                          device=d).all(dim=[]),
    "sum over dim=()": lambda lib, d: lib.tensor([[1.0, 2.0]], device=d).sum(dim=()),
    "clamp with a 0-dim tensor and a number": lambda lib, d: lib.clamp(
        lib.tensor([1, 5], dtype=lib.int32, device=d),
        lib.tensor(0.5, dtype=lib.float64, device=d), 2),
    "clamp with a 0-dim tensor only": lambda lib, d: lib.clamp(
        lib.tensor([1, 5], dtype=lib.int32, device=d), lib.tensor(0.5, dtype=lib.float64,
                                                                   device=d)),
    "clamp uint8 with max 300": lambda lib, d: lib.zeros(3, dtype=lib.uint8, device=d).clamp(
        max=300),
    "clamp uint8 with min -1": lambda lib, d: lib.zeros(3, dtype=lib.uint8, device=d).clamp(
        min=-1),
    "index_copy_ of a lower-rank source": lambda lib, d: lib.zeros(2, 3, device=d).index_copy_(
        0, lib.tensor([0], device=d), lib.tensor([1.0, 2.0, 3.0], device=d)),
    "complex mean over an empty dim": lambda lib, d: lib.zeros(
        0, 2, dtype=lib.complex64, device=d).mean(0),
    "complex var over an empty dim": lambda lib, d: lib.zeros(
        0, 2, dtype=lib.complex128, device=d).var(0),
    "complex std over an empty dim": lambda lib, d: lib.zeros(
        0, 2, dtype=lib.complex64, device=d).std(0),
}


def test_an_impossible_cpu_allocation_is_pytorchs_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="can't allocate memory: you tried to allocate "
                                           "4611686018427387904 bytes"):
        gt.empty(2**40, 2**20)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(device: str, name: str) -> None:
    want = _run(CASES[name], torch, "cpu")
    got = _run(CASES[name], gt, device)
    if want[0] == "ok" == got[0] and isinstance(want[1], tuple):
        assert got[1][1] == want[1][1]  # dtype
        np.testing.assert_allclose(np.asarray(got[1][0], dtype=complex),
                                   np.asarray(want[1][0], dtype=complex), equal_nan=True)
    elif want[0] == "ok" == got[0]:
        assert len(got[1]) == len(want[1])  # a tuple of tensors (unbind)
    else:
        assert got == want


def _backward_twice(lib: Any, device: str, body: Callable[[Any], Any]) -> Any:
    x = lib.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = body(x).sum()
    y.backward()
    y.backward()
    return x.grad


TWICE = {"add": lambda x: x + 1, "sub of a view": lambda x: x.view(2, 1).t() - 3,
         "mul by a number": lambda x: x * 2, "mul": lambda x: x * x, "exp": lambda x: x.exp(),
         "neg then add": lambda x: -x + 2}


@pytest.mark.parametrize("name", sorted(TWICE))
def test_a_second_backward_runs_where_no_saved_tensor_is_needed(device: str, name: str) -> None:
    """PyTorch frees saved tensors (and number operands) after backward, not the graph."""
    case = CASES_TWICE = lambda lib, d: _backward_twice(lib, d, TWICE[name])  # noqa: E731
    want = _run(case, torch, "cpu")
    got = _run(CASES_TWICE, gt, device)
    assert got[0] == want[0]
    if want[0] == "ok":
        assert got[1] == want[1]
    else:  # gputensor's message also names the node
        assert got[1].startswith("Trying to backward through the graph a second time")


@pytest.mark.parametrize("vals", [[2.0, math.inf, 0.0], [0.0, math.inf, 3.0],
                                  [math.inf, 0.0, 0.0], [-math.inf, 2.0, 0.0, 5.0]])
def test_prod_backward_with_zeros_and_infinities(device: str, vals: list) -> None:
    """PyTorch's exclusive-cumprod gradient where a zero is present (no 0 * inf / inf)."""
    t = torch.tensor(vals, requires_grad=True)
    t.prod().backward()
    x = gt.tensor(vals, device=device, requires_grad=True)
    x.prod().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), t.grad.numpy())
    t2 = torch.tensor([vals, vals[::-1]], requires_grad=True)
    t2.prod(1).sum().backward()
    x2 = gt.tensor([vals, vals[::-1]], device=device, requires_grad=True)
    x2.prod(1).sum().backward()
    np.testing.assert_array_equal(x2.grad.cpu().numpy(), t2.grad.numpy())


@pytest.mark.parametrize("exponent", [1, 2, 3, -1, -2, 0, 1 + 0j, 3.0])
def test_complex_integer_powers_are_exact(device: str, exponent: Any) -> None:
    """Small integer powers multiply (NumPy's and PyTorch's CPU results), not exp(b log a)."""
    vals = [1j, 1 + 1j, 0.5 - 2j, -3 + 0.25j]
    want = (torch.tensor(vals) ** exponent).numpy()
    got = (gt.tensor(vals, device=device) ** exponent).cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    assert (gt.tensor([1j], device=device) ** exponent).cpu().numpy().real[0] == \
        (torch.tensor([1j]) ** exponent).numpy().real[0]
