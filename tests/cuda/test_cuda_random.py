"""CUDA sampling kernels (kernels/cuda/random.cu): the same seed gives the same numbers on the
CPU and on CUDA, and the generator advances identically, so draws interleave across devices.

The CPU kernels are NumPy's samplers on a Philox4x64-10 stream; the CUDA kernels compute the
words from the counter and reproduce them. Values that go through NumPy's SIMD ``exp``
(log_normal_) can differ in the last bit and are compared within a few ulps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import gputensor as gt

CUDA = "cuda:0"
needs_cuda = pytest.mark.skipif(not gt.cuda.is_available(), reason="no CUDA runtime")
N = 5000  # crosses many blocks and chain chunks; small enough for the emulator


def gen(seed: int = 7) -> gt.Generator:
    return gt.Generator().manual_seed(seed)


def state(g: gt.Generator) -> bytes:
    return bytes(g.get_state().numpy())


def both(fn: Callable[[str, gt.Generator], gt.Tensor], seed: int = 7
         ) -> tuple[np.ndarray, np.ndarray, bool]:
    """fn on the CPU and on CUDA from the same seed: values, values, same final state."""
    g_cpu, g_cuda = gen(seed), gen(seed)
    a = fn("cpu", g_cpu).numpy()
    b = fn(CUDA, g_cuda).cpu().numpy()
    return a, b, state(g_cpu) == state(g_cuda)


EXACT: dict[str, Callable[[str, gt.Generator], gt.Tensor]] = {
    "rand_f32": lambda d, g: gt.rand(N, generator=g, device=d),
    "rand_f64": lambda d, g: gt.rand(N, dtype=gt.float64, generator=g, device=d),
    "rand_f16": lambda d, g: gt.rand(N, dtype=gt.float16, generator=g, device=d),
    "rand_bf16": lambda d, g: gt.rand(N, dtype=gt.bfloat16, generator=g, device=d),
    "uniform_f16": lambda d, g: gt.empty(N, dtype=gt.float16, device=d).uniform_(
        10, 11, generator=g),
    "uniform_f32": lambda d, g: gt.empty(N, device=d).uniform_(-3, 2, generator=g),
    "randn_f32": lambda d, g: gt.randn(N, generator=g, device=d),
    "randn_f64": lambda d, g: gt.randn(N, dtype=gt.float64, generator=g, device=d),
    "randn_f16": lambda d, g: gt.randn(N, dtype=gt.float16, generator=g, device=d),
    "randn_bf16": lambda d, g: gt.randn(N, dtype=gt.bfloat16, generator=g, device=d),
    "normal_tensors": lambda d, g: gt.normal(gt.arange(N, dtype=gt.float32, device=d),
                                             gt.full((N,), 2.0, device=d), generator=g),
    "exponential_f32": lambda d, g: gt.empty(N, device=d).exponential_(2.0, generator=g),
    "cauchy_f32": lambda d, g: gt.empty(N, device=d).cauchy_(1.0, 2.0, generator=g),
    "geometric_search": lambda d, g: gt.empty(N, device=d).geometric_(0.4, generator=g),
    "geometric_inversion": lambda d, g: gt.empty(N, device=d).geometric_(0.05, generator=g),
    "randint_small": lambda d, g: gt.randint(-5, 5, (N,), generator=g, device=d),
    "randint_odd_range": lambda d, g: gt.randint(0, 3 * 2**30, (N,), generator=g, device=d),
    "randint_64bit": lambda d, g: gt.randint(-(2**62), 2**62 + 12345, (N,), generator=g,
                                             device=d),
    "random_i32": lambda d, g: gt.empty(N, dtype=gt.int32, device=d).random_(generator=g),
    "randperm": lambda d, g: gt.randperm(777, generator=g, device=d),
    "bernoulli_scalar": lambda d, g: gt.empty(N, device=d).bernoulli_(0.3, generator=g),
    "bernoulli_tensor": lambda d, g: gt.bernoulli(gt.rand(N, generator=gen(1), device=d),
                                                  generator=g),
    "multinomial": lambda d, g: gt.multinomial(
        gt.tensor([[0.1, 5.0, 0.0, 2.0, 0.3]] * 4, device=d), 4, generator=g),
    "multinomial_replacement": lambda d, g: gt.multinomial(
        gt.tensor([[0.1, 5.0, 0.0, 2.0, 0.3]] * 4, device=d), 300, True, generator=g),
    "poisson": lambda d, g: gt.poisson(gt.full((500,), 3.0, device=d), generator=g),
    "poisson_ptrs": lambda d, g: gt.poisson(gt.full((500,), 40.0, device=d), generator=g),
    "randn_complex64": lambda d, g: gt.randn(100, dtype=gt.complex64, generator=g, device=d),
    "randn_complex128": lambda d, g: gt.randn(100, dtype=gt.complex128, generator=g,
                                              device=d),
}


@needs_cuda
@pytest.mark.parametrize("name", sorted(EXACT))
def test_same_seed_same_numbers_across_devices(name: str) -> None:
    a, b, same_state = both(EXACT[name])
    np.testing.assert_array_equal(b, a)
    assert same_state, "the generator must advance by the same number of words"


@needs_cuda
@pytest.mark.parametrize("dt", [gt.float16, gt.float32, gt.float64])
def test_log_normal_is_ulp_close(dt: gt.dtype) -> None:
    """exp comes from NumPy's SIMD loops on the CPU (float32: reproduced on CUDA; float64:
    Intel SVML, not reproducible), so the values agree to a few ulps, usually exactly."""
    a, b, same_state = both(lambda d, g: gt.empty(N, dtype=dt, device=d).log_normal_(
        0.5, 0.75, generator=g))
    np.testing.assert_array_max_ulp(b.astype(np.float64), a.astype(np.float64),
                                    maxulp=4 if dt is gt.float64 else 2 ** 32)
    assert np.mean(a == b) > (0.9 if dt is gt.float64 else 0.999)
    assert same_state


@needs_cuda
def test_draws_interleave_across_devices() -> None:
    """One generator drives both devices: the stream continues where the other left off."""
    def draws(devs: list[str]) -> list[np.ndarray]:
        g = gen(11)
        out = []
        for d, f in zip(devs, [
                lambda d: gt.rand(7, generator=g, device=d),
                lambda d: gt.randn(13, generator=g, device=d),
                lambda d: gt.rand(5, dtype=gt.float16, generator=g, device=d),
                lambda d: gt.randint(0, 7, (9,), generator=g, device=d),
                lambda d: gt.randn(6, dtype=gt.float64, generator=g, device=d)], strict=True):
            t = f(d)
            out.append((t.cpu() if t.device.type == "cuda" else t).numpy())
        return out
    ref = draws(["cpu"] * 5)
    mixed = draws(["cpu", CUDA, CUDA, "cpu", CUDA])
    for r, m in zip(ref, mixed, strict=True):
        np.testing.assert_array_equal(m, r)


@needs_cuda
def test_default_cuda_generator_follows_manual_seed() -> None:
    gt.manual_seed(1234)
    a = gt.randn(50, device=CUDA).cpu().numpy()
    gt.manual_seed(1234)
    b = gt.randn(50).numpy()
    np.testing.assert_array_equal(a, b)


@needs_cuda
def test_noncontiguous_outputs_match_dense() -> None:
    base = gt.full((30, 40), -7.0, device=CUDA)
    view = base[:, ::2]
    view.normal_(generator=gen(3))
    dense = gt.empty(30, 20, device=CUDA).normal_(generator=gen(3))
    np.testing.assert_array_equal(view.cpu().numpy(), dense.cpu().numpy())
    assert (base.cpu().numpy()[:, 1::2] == -7.0).all()


@needs_cuda
def test_noncontiguous_parameters() -> None:
    p = gt.rand(40, 30, generator=gen(2), device=CUDA).t()  # transposed probabilities
    pc = p.cpu()
    a = gt.bernoulli(pc, generator=gen(4)).numpy()
    b = gt.bernoulli(p, generator=gen(4)).cpu().numpy()
    np.testing.assert_array_equal(b, a)
    w = gt.rand(8, 6, generator=gen(5), device=CUDA).t()
    np.testing.assert_array_equal(gt.multinomial(w, 3, generator=gen(6)).cpu().numpy(),
                                  gt.multinomial(w.cpu(), 3, generator=gen(6)).numpy())


@needs_cuda
def test_errors_are_reported_before_writing() -> None:
    t = gt.full((3,), 0.25, device=CUDA)
    with pytest.raises(RuntimeError, match=r"found p=2.0"):
        t.bernoulli_(gt.tensor([0.5, 2.0, 0.5], device=CUDA))
    np.testing.assert_array_equal(t.cpu().numpy(), [0.25] * 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        gt.poisson(gt.tensor([1.0, -1.0], device=CUDA))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        gt.normal(gt.zeros(2, device=CUDA), gt.tensor([1.0, -1.0], device=CUDA))
    with pytest.raises(RuntimeError, match="inf"):
        gt.multinomial(gt.tensor([1.0, float("inf")], device=CUDA), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        gt.multinomial(gt.tensor([[1.0, 0.0], [0.0, 0.0]], device=CUDA), 1)


@needs_cuda
def test_statistics_large() -> None:
    v = gt.randn(60_000, generator=gen(9), device=CUDA).cpu().numpy().astype(np.float64)
    assert abs(v.mean()) < 0.02 and abs(v.std() - 1.0) < 0.02
    u = gt.rand(60_000, dtype=gt.bfloat16, generator=gen(9), device=CUDA).cpu().numpy()
    assert u.min() >= 0 and u.max() < 1
