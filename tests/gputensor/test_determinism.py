"""gt.use_deterministic_algorithms: the CUDA kernels that accumulate floats with atomics
refuse to run (or warn) with the mode on; integer accumulation, extrema and the CPU never
alert; the switches behave as PyTorch's."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import pytest

import gputensor as gt
import gputensor.nn.functional as F

torch = pytest.importorskip("torch")


@pytest.fixture
def deterministic() -> Iterator[None]:
    gt.use_deterministic_algorithms(True)
    yield
    gt.use_deterministic_algorithms(False)


def _index_add(dt, dev):
    return gt.zeros(4, dtype=dt, device=dev).index_add_(0, gt.tensor([0, 1, 1], device=dev),
                                                        gt.ones(3, dtype=dt, device=dev))


def _scatter_sum(dt, dev):
    return gt.zeros(4, dtype=dt, device=dev).scatter_reduce_(
        0, gt.tensor([0, 1, 1], device=dev), gt.ones(3, dtype=dt, device=dev), "sum")


def _put_accumulate(dt, dev):
    return gt.zeros(4, dtype=dt, device=dev).index_put_(
        (gt.tensor([1, 1], device=dev),), gt.ones(2, dtype=dt, device=dev), accumulate=True)


def _embedding_backward(dt, dev):
    w = gt.ones(5, 3, dtype=dt, device=dev, requires_grad=True)
    F.embedding(gt.tensor([1, 1, 2], device=dev), w).sum().backward()
    return w.grad


def _max_pool_backward(dt, dev):
    x = gt.arange(16, dtype=dt, device=dev).reshape(1, 1, 4, 4).requires_grad_()
    F.max_pool2d(x, 2).sum().backward()
    return x.grad


FLOAT_ATOMICS: dict[str, Callable] = {
    "index_add": _index_add, "scatter_reduce": _scatter_sum, "index_put": _put_accumulate,
    "embedding_backward": _embedding_backward, "max_pool2d_backward": _max_pool_backward}


@pytest.mark.parametrize("name", FLOAT_ATOMICS)
def test_float_atomics_on_cuda_refuse_or_warn(deterministic, name: str) -> None:
    if not gt.cuda.is_available():
        pytest.skip("needs a CUDA runtime (CI runs the emulator)")
    run = FLOAT_ATOMICS[name]
    with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
        run(gt.float32, "cuda")
    gt.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match="does not have a deterministic implementation"):
        got = run(gt.float32, "cuda")
    assert gt.equal(got.cpu(), run(gt.float32, "cpu"))  # it still ran, and right


@pytest.mark.parametrize("name", ["index_add", "scatter_reduce", "index_put"])
def test_exact_accumulation_and_the_cpu_never_alert(deterministic, device: str,
                                                    name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _ = FLOAT_ATOMICS[name](gt.int64, device)
        if device == "cpu":
            _ = FLOAT_ATOMICS[name](gt.float32, device)
    x = gt.zeros(4, device=device).scatter_reduce_(0, gt.tensor([0, 0], device=device),
                                                   gt.ones(2, device=device), "amax")
    assert x.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_switches_behave_as_torchs() -> None:
    assert gt.are_deterministic_algorithms_enabled() is False
    gt.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert gt.are_deterministic_algorithms_enabled() is True
        assert gt.is_deterministic_algorithms_warn_only_enabled() is True
    finally:
        gt.use_deterministic_algorithms(False)
    assert gt.is_deterministic_algorithms_warn_only_enabled() is False
    for lib in (torch, gt):
        with pytest.raises(TypeError, match="must be bool"):
            lib.use_deterministic_algorithms(1)
