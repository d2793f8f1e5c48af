"""Names of the torch namespace that PyTorch programs reach for, beyond the ops: aliases,
constants, thread control, ``torch.accelerator``, Tensor device predicates and ravel; each
compared with PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gputensor as gt
from gputensor._ops import ALIASES
from gputensor.kernels.registry import OPS
from tests.helpers import assert_close

torch = pytest.importorskip("torch")

ALIAS_PAIRS = [(alias, name) for name, aliases in ALIASES.items() for alias in aliases]


@pytest.mark.parametrize(("alias", "name"), ALIAS_PAIRS, ids=[a for a, _ in ALIAS_PAIRS])
def test_aliases_are_the_op_itself(alias: str, name: str) -> None:
    op = OPS[name]
    assert getattr(gt, alias) is op.frontend and hasattr(torch, alias)
    if op.method:
        assert getattr(gt.Tensor, alias) is getattr(gt.Tensor, name)
        assert hasattr(torch.Tensor, alias)
    if op.inplace and op.inplace_fn is not None:
        assert getattr(gt.Tensor, alias + "_") is getattr(gt.Tensor, name + "_")


@pytest.mark.parametrize("alias", ["arccos", "arcsinh", "arctanh", "multiply", "subtract",
                                   "negative", "greater", "less_equal", "not_equal", "fix",
                                   "absolute"])
def test_aliases_match_torch(device: str, alias: str) -> None:
    data = np.array([0.25, -0.5, 0.75, -0.125])
    x = gt.tensor(data, device=device)
    args = (x, x.flip(0)) if alias in ("multiply", "subtract", "greater", "less_equal",
                                        "not_equal") else (x,)
    targs = tuple(torch.from_numpy(a.cpu().numpy()) for a in args)
    assert_close(getattr(gt, alias)(*args), getattr(torch, alias)(*targs))


@pytest.mark.parametrize("name", ["asinh", "acosh", "atanh"])
def test_inverse_hyperbolic_gradients_match_torch(device: str, name: str) -> None:
    data = np.array([1.25, 1.5, 2.0]) if name == "acosh" else np.array([-0.5, 0.25, 0.75])
    x = gt.tensor(data, device=device, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    getattr(gt, name)(x).sum().backward()
    getattr(torch, name)(tx).sum().backward()
    assert_close(x.grad, tx.grad)


def test_constants_are_torchs() -> None:
    for name in ("inf", "pi", "e"):
        assert getattr(gt, name) == getattr(torch, name)
    assert math.isnan(gt.nan) and gt.newaxis is None is torch.newaxis
    x = gt.zeros(2, 3)
    assert tuple(x[gt.newaxis, :, None].shape) == (1, 2, 1, 3)


def test_num_threads_reach_the_cpu_kernels() -> None:
    import numba

    before = gt.get_num_threads()
    try:
        gt.set_num_threads(1)
        assert gt.get_num_threads() == 1 == numba.get_num_threads()
        from threadpoolctl import threadpool_info
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        assert blas and set(blas) == {1}  # one budget: BLAS follows
        gt.set_num_threads(10_000)  # capped at the threads Numba started with
        assert gt.get_num_threads() == numba.config.NUMBA_NUM_THREADS
        with pytest.raises(RuntimeError, match="positive integer"):
            gt.set_num_threads(0)
    finally:
        gt.set_num_threads(before)


@pytest.mark.parametrize("preset", [None, "12345"])
def test_openmp_spin_count_is_short_unless_the_user_set_one(preset) -> None:
    """Numba's OpenMP workers spin ~0.2 ms, not libgomp's ~17 ms, after a parallel loop (so
    they do not hold the cores BLAS's workers need); the variable is in place before the
    first parallel kernel loads libgomp, and a value the user set wins."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    if preset is not None:
        env["GOMP_SPINCOUNT"] = preset
    program = ("import os, gputensor, numba.np.ufunc.parallel as p\n"
               "print(os.environ['GOMP_SPINCOUNT'], p._is_initialized)")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    assert out == [preset or gt._threads.SPIN_COUNT, "False"]


def test_interop_threads_are_set_once_before_use(monkeypatch) -> None:
    from gputensor import _threads

    monkeypatch.setattr(_threads, "_interop", [])
    gt.set_num_interop_threads(3)
    assert gt.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="cannot set number of interop threads"):
        gt.set_num_interop_threads(2)
    monkeypatch.setattr(_threads, "_interop", [])
    assert gt.get_num_interop_threads() >= 1
    gt.set_num_interop_threads(2)  # reading the default does not fix it, as in PyTorch
    with pytest.raises(RuntimeError, match="expects a positive integer"):
        _threads.set_num_interop_threads(0)


def test_accelerator_answers_like_torch_on_this_machine() -> None:
    if gt.cuda.is_available():
        assert gt.accelerator.is_available()
        assert gt.accelerator.current_accelerator() == gt.device("cuda")
        assert gt.accelerator.device_count() == gt.cuda.device_count()
        assert gt.accelerator.current_device_index() == gt.cuda.current_device()
        gt.accelerator.synchronize()
    else:  # as PyTorch's CPU build answers
        assert gt.accelerator.is_available() is torch.accelerator.is_available() is False
        assert gt.accelerator.current_accelerator() is None
        assert gt.accelerator.device_count() == 0
        with pytest.raises(RuntimeError, match="none is available"):
            gt.accelerator.synchronize()


def test_device_predicates(device: str) -> None:
    x = gt.zeros(2, device=device)
    assert (x.is_xpu, x.is_mps, x.is_meta) == (False, False, False)
    assert x.is_cuda == (gt.device(device).type == "cuda")


def test_ravel_matches_torch(device: str) -> None:
    data = np.arange(12.0).reshape(3, 4)
    x = gt.tensor(data, device=device, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    for got, want in ((x.ravel(), tx.ravel()), (gt.ravel(x.t()), torch.ravel(tx.t()))):
        assert_close(got, want)
        (got * gt.arange(12.0, device=device)).sum().backward()
        (want * torch.arange(12.0)).sum().backward()
        assert_close(x.grad, tx.grad)
    assert x.ravel().data_ptr() == x.data_ptr()  # contiguous: a view
