"""Tests for random number generation: gt.Generator, seeding and state, and the sampling ops."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import gputensor as gt
from tests.helpers import noncontiguous, requires_torch, to_numpy, torch

N = 10_000  # samples for the statistical checks: loose bounds, a few standard errors wide


@pytest.fixture(autouse=True)
def _keep_default_generator() -> Iterator[None]:
    """Tests may reseed the default generator; give the next test its state back."""
    state = gt.get_rng_state()
    seed = gt.initial_seed()
    yield
    gt.default_generator.manual_seed(seed)
    gt.set_rng_state(state)


def gen(seed: int = 0) -> gt.Generator:
    return gt.Generator().manual_seed(seed)


def values(t: gt.Tensor) -> np.ndarray:
    return to_numpy(t)


# -- one sampler per op, for the generic reproducibility tests --------------------------------
SAMPLERS: dict[str, Callable[[str, gt.Generator | None], gt.Tensor]] = {
    "rand": lambda d, g: gt.rand(3, 4, generator=g, device=d),
    "randn": lambda d, g: gt.randn(5, generator=g, device=d, dtype=gt.float64),
    "randint": lambda d, g: gt.randint(-5, 5, (7,), generator=g, device=d),
    "randperm": lambda d, g: gt.randperm(9, generator=g, device=d),
    "normal_tt": lambda d, g: gt.normal(gt.zeros(4, device=d), gt.ones(4, device=d),
                                        generator=g),
    "normal_size": lambda d, g: gt.normal(2.0, 3.0, (4,), generator=g, device=d),
    "bernoulli": lambda d, g: gt.bernoulli(gt.full((8,), 0.5, device=d), generator=g),
    "multinomial": lambda d, g: gt.multinomial(gt.ones(2, 6, device=d), 3, generator=g),
    "multinomial_repl": lambda d, g: gt.multinomial(gt.ones(6, device=d), 5, True,
                                                    generator=g),
    "poisson": lambda d, g: gt.poisson(gt.full((6,), 3.0, device=d), generator=g),
    "rand_like": lambda d, g: gt.rand_like(gt.zeros(5, device=d), generator=g),
    "randn_like": lambda d, g: gt.randn_like(gt.zeros(5, device=d), generator=g),
    "randint_like": lambda d, g: gt.randint_like(gt.zeros(5, device=d), 10, generator=g),
    "uniform_": lambda d, g: gt.empty(5, device=d).uniform_(-1, 1, generator=g),
    "normal_": lambda d, g: gt.empty(5, device=d).normal_(1, 2, generator=g),
    "random_": lambda d, g: gt.empty(5, dtype=gt.int32, device=d).random_(generator=g),
    "bernoulli_": lambda d, g: gt.empty(5, device=d).bernoulli_(0.3, generator=g),
    "exponential_": lambda d, g: gt.empty(5, device=d).exponential_(2, generator=g),
    "cauchy_": lambda d, g: gt.empty(5, device=d).cauchy_(generator=g),
    "log_normal_": lambda d, g: gt.empty(5, device=d).log_normal_(generator=g),
    "geometric_": lambda d, g: gt.empty(5, device=d).geometric_(0.4, generator=g),
}


# -- Generator ---------------------------------------------------------------------------------
def test_generator_defaults() -> None:
    g = gt.Generator()
    assert g.device == gt.device("cpu")
    assert gt.Generator(device="cpu").device.type == "cpu"
    assert g.initial_seed() == 67280421310721  # PyTorch's default seed
    assert g.manual_seed(5) is g
    assert g.initial_seed() == 5


def test_generator_seed_range() -> None:
    g = gt.Generator()
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1
    assert g.manual_seed(2**64 - 1).initial_seed() == 2**64 - 1
    assert g.manual_seed(np.int64(7)).initial_seed() == 7
    with pytest.raises(ValueError, match="out of range"):
        g.manual_seed(2**64)
    with pytest.raises(ValueError, match="out of range"):
        g.manual_seed(-(2**63) - 1)
    with pytest.raises(RuntimeError, match="expected a long, but got float"):
        g.manual_seed(1.5)
    with pytest.raises(RuntimeError, match="expected a long, but got str"):
        g.manual_seed("1")


def test_generator_seed_is_nondeterministic() -> None:
    g = gt.Generator()
    s1, s2 = g.seed(), gt.Generator().seed()
    assert isinstance(s1, int) and s1 != s2
    assert g.initial_seed() == s1
    a = gt.rand(4, generator=g)
    assert np.array_equal(values(a), values(gt.rand(4, generator=gen(s1))))


def test_global_seed_functions() -> None:
    assert gt.manual_seed(11) is gt.default_generator
    assert gt.initial_seed() == 11
    a = values(gt.rand(6))
    gt.manual_seed(11)
    assert np.array_equal(a, values(gt.rand(6)))
    s = gt.seed()
    assert gt.initial_seed() == s
    for name in ("Generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
                 "set_rng_state", "default_generator"):
        assert name in gt.__all__


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_seed_same_values(device: str, name: str) -> None:
    sample = SAMPLERS[name]
    a, b = values(sample(device, gen(123))), values(sample(device, gen(123)))
    np.testing.assert_array_equal(a, b)
    gt.manual_seed(7)
    c = values(sample(device, None))
    gt.manual_seed(7)
    np.testing.assert_array_equal(c, values(sample(device, None)))


@pytest.mark.parametrize("name", ["rand", "randn", "randint", "randperm", "normal_",
                                  "multinomial"])
def test_different_seeds_differ(device: str, name: str) -> None:
    sample = SAMPLERS[name]
    assert not np.array_equal(values(sample(device, gen(1))), values(sample(device, gen(2))))


def test_generators_are_independent(device: str) -> None:
    g1, g2 = gen(5), gen(5)
    first = values(gt.rand(4, generator=g1, device=device))
    gt.rand(100, generator=gen(5), device=device)  # a third generator doesn't disturb them
    gt.rand(100, device=device)  # nor does the default generator
    np.testing.assert_array_equal(first, values(gt.rand(4, generator=g2, device=device)))
    # the generator advanced: the next draw differs from the first
    assert not np.array_equal(first, values(gt.rand(4, generator=g1, device=device)))


def test_manual_seed_leaves_other_generators_alone(device: str) -> None:
    g = gen(3)
    gt.rand(3, generator=g, device=device)
    state = g.get_state()
    gt.manual_seed(99)
    assert g.initial_seed() == 3
    np.testing.assert_array_equal(values(state), values(g.get_state()))


def test_generator_draws_leave_default_alone() -> None:
    gt.manual_seed(4)
    before = values(gt.get_rng_state())
    gt.randn(50, generator=gen(1))
    np.testing.assert_array_equal(before, values(gt.get_rng_state()))


# -- state --------------------------------------------------------------------------------------
def test_state_round_trip() -> None:
    g = gen(42)
    gt.rand(3, generator=g)  # float32 draws leave a buffered half word in the state
    state = g.get_state()
    assert state.dtype is gt.uint8 and state.dim() == 1 and state.device.type == "cpu"
    a = values(gt.randn(17, generator=g))
    b = values(gt.randint(0, 100, (5,), generator=g))
    g.manual_seed(1)
    g.set_state(state)
    assert g.initial_seed() == 42
    np.testing.assert_array_equal(a, values(gt.randn(17, generator=g)))
    np.testing.assert_array_equal(b, values(gt.randint(0, 100, (5,), generator=g)))
    # the state moves to another generator, and get_state(set_state(s)) == s exactly
    other = gt.Generator().set_state(state)
    np.testing.assert_array_equal(values(other.get_state()), values(state))
    np.testing.assert_array_equal(a, values(gt.randn(17, generator=other)))


def test_state_is_a_copy() -> None:
    g = gen(1)
    state = g.get_state()
    gt.rand(10, generator=g)
    assert not np.array_equal(values(state), values(g.get_state()))


def test_rng_state_functions() -> None:
    gt.manual_seed(8)
    state = gt.get_rng_state()
    a = values(gt.rand(5))
    gt.set_rng_state(state)
    np.testing.assert_array_equal(a, values(gt.rand(5)))


def test_clone_state_and_pickle() -> None:
    g = gen(17)
    gt.rand(3, generator=g)
    for copy in (g.clone_state(), pickle.loads(pickle.dumps(g))):
        assert copy is not g and copy.initial_seed() == 17
        np.testing.assert_array_equal(values(gt.rand(5, generator=copy)),
                                      values(gt.rand(5, generator=g.clone_state())))


def test_philox_key_counter() -> None:
    g = gen(9)
    key, counter = g.philox_key_counter()
    assert key == (9, 0) and counter == (0, 0, 0, 0)
    gt.rand(8, dtype=gt.float64, generator=g)  # 8 words = 2 Philox blocks
    assert g.philox_key_counter()[1] == (2, 0, 0, 0)


def test_set_state_errors() -> None:
    g = gt.Generator()
    good = g.get_state()
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state([1, 2])
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state(good.float())
    with pytest.raises(RuntimeError, match="RNG state size to be 3"):
        g.set_state(gt.zeros(3, dtype=gt.uint8))
    with pytest.raises(RuntimeError, match="bad header"):
        g.set_state(gt.zeros(good.numel(), dtype=gt.uint8))


# -- shapes and dtypes ------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [gt.rand, gt.randn])
def test_factory_shapes_and_dtypes(device: str, fn: Callable) -> None:
    for size_args in ((2, 3), ((2, 3),), ([2, 3],), (gt.Size([2, 3]),)):
        t = fn(*size_args, device=device)
        assert t.shape == (2, 3) and t.dtype is gt.float32 and t.device == gt.device(device)
    assert fn(size=(4,), device=device).shape == (4,)
    assert fn((), device=device).shape == ()
    assert fn(0, 3, device=device).shape == (0, 3)
    for dt in (gt.float16, gt.bfloat16, gt.float64, gt.complex64, gt.complex128):
        assert fn(3, dtype=dt, device=device).dtype is dt
    t = fn(3, dtype=gt.float64, requires_grad=True, device=device)
    assert t.requires_grad and t.is_leaf
    gt.set_default_dtype(gt.float64)
    assert fn(2, device=device).dtype is gt.float64


def test_factory_out(device: str) -> None:
    out = gt.empty(5, dtype=gt.float64, device=device)
    r = gt.rand(2, 3, out=out)
    assert r is out and r.shape == (2, 3) and r.dtype is gt.float64
    out = gt.empty(0, dtype=gt.int32, device=device)
    assert gt.randint(10, (4,), out=out).dtype is gt.int32
    assert gt.randperm(4, out=out).shape == (4,)
    out = gt.empty(3, device=device)
    assert gt.randn(3, out=out, generator=gen(1)) is out
    np.testing.assert_array_equal(values(out), values(gt.randn(3, generator=gen(1))))


def test_randint_forms(device: str) -> None:
    assert gt.randint(5, (3,), device=device).dtype is gt.int64
    assert gt.randint(2, 5, (3,), device=device).shape == (3,)
    assert gt.randint(10, size=(2, 2), device=device).shape == (2, 2)
    assert gt.randint(low=2, high=10, size=(3,), device=device).shape == (3,)
    assert gt.randint(gt.tensor(3, device=device), [2], device=device).shape == (2,)
    assert gt.randint(0, 10, (3,), dtype=gt.float32, device=device).dtype is gt.float32
    t = gt.randint(0, 10, (3,), dtype=gt.float32, requires_grad=True, device=device)
    assert t.requires_grad


def test_randperm_dtypes(device: str) -> None:
    assert gt.randperm(5, device=device).dtype is gt.int64
    for dt in (gt.int16, gt.float32, gt.float16):
        t = gt.randperm(20, dtype=dt, device=device)
        assert t.dtype is dt
        assert sorted(values(t).tolist()) == list(range(20))
    assert gt.randperm(0, device=device).shape == (0,)


def test_like_factories(device: str) -> None:
    x = gt.zeros(2, 3, dtype=gt.float64, device=device)
    assert gt.rand_like(x).dtype is gt.float64 and gt.rand_like(x).shape == (2, 3)
    assert gt.randn_like(x, dtype=gt.float16).dtype is gt.float16
    r = gt.randint_like(x, 5)
    assert r.dtype is gt.float64 and ((values(r) >= 0) & (values(r) < 5)).all()
    r = gt.randint_like(x, 3, 5)
    assert ((values(r) >= 3) & (values(r) < 5)).all()
    r = gt.randint_like(x, low=3, high=5, dtype=gt.int8)
    assert r.dtype is gt.int8
    assert gt.rand_like(x, requires_grad=True).requires_grad


@requires_torch
@pytest.mark.parametrize("call", [
    "normal(zeros(3), ones(3))",
    "normal(zeros(3, 1), ones(4))",
    "normal(zeros(3, dtype=float64), ones(3))",
    "normal(zeros(3), ones(3, dtype=float64))",
    "normal(0., ones(2, 3, dtype=float64))",
    "normal(zeros(3, dtype=float16), 1.)",
    "normal(mean=zeros(2))",
    "normal(0., 1., (2, 3))",
    "normal(0, 1, (2,), dtype=float64)",
    "normal(zeros(2, dtype=complex64), 1.)",
    "bernoulli(full((3,), 0.5, dtype=float64))",
    "bernoulli(zeros(3, dtype=int64), 0.5)",
    "bernoulli(zeros(2, 2), p=0.3)",
    "multinomial(ones(4), 2)",
    "multinomial(ones(3, 4, dtype=float16), 6, True)",
    "multinomial(ones(0, 2), 1)",
    "poisson(full((3,), 2., dtype=float16))",
    "rand(2, 3, dtype=complex64)",
    "randint(0, 2, (3,), dtype=bool)",
    "randperm(4, dtype=float32)",
])
def test_shapes_and_dtypes_match_torch(device: str, call: str) -> None:
    def ns(mod: Any) -> dict[str, Any]:
        names = ("normal", "bernoulli", "multinomial", "poisson", "rand", "randint", "randperm",
                 "zeros", "ones", "full", "float16", "float32", "float64", "complex64", "bool",
                 "int64")
        return {n: getattr(mod, n) for n in names}
    expected = eval(call, ns(torch))
    g_ns = ns(gt)
    for fn in ("zeros", "ones", "full", "rand", "randint", "randperm"):
        g_ns[fn] = (lambda f: lambda *a, **k: f(*a, device=device, **k))(getattr(gt, fn))

    def normal(*a: Any, **k: Any) -> gt.Tensor:
        # The float-mean/float-std form is a factory and takes the device; the tensor forms
        # follow their (already on-device) tensor arguments and refuse a device argument.
        if not any(isinstance(v, gt.Tensor) for v in (*a, *k.values())):
            k["device"] = device
        return gt.normal(*a, **k)
    g_ns["normal"] = normal
    actual = eval(call, g_ns)
    assert tuple(actual.shape) == tuple(expected.shape)
    assert actual.dtype is getattr(gt, str(expected.dtype).removeprefix("torch."))
    assert actual.device == gt.device(device)


def test_method_forms(device: str) -> None:
    p = gt.full((2, 4), 0.5, device=device)
    assert p.bernoulli().shape == (2, 4)
    assert p.bernoulli(p=0.2, generator=gen(1)).shape == (2, 4)
    assert p.multinomial(3).shape == (2, 3)
    assert p.multinomial(num_samples=8, replacement=True).dtype is gt.int64


# -- value ranges -----------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [gt.float16, gt.bfloat16, gt.float32, gt.float64])
def test_rand_is_half_open(device: str, dt: gt.dtype) -> None:
    v = values(gt.rand(N, dtype=dt, device=device, generator=gen(0))).astype(np.float64)
    assert v.min() >= 0.0 and v.max() < 1.0
    assert len(np.unique(v)) > 100  # not collapsed onto a few values


@pytest.mark.parametrize("dt", [gt.float16, gt.bfloat16, gt.float32])
def test_uniform_stays_below_to(device: str, dt: gt.dtype) -> None:
    t = gt.empty(N, dtype=dt, device=device).uniform_(10.0, 11.0, generator=gen(0))
    v = values(t).astype(np.float64)
    top = 11.0
    assert v.min() >= 10.0 and v.max() < top and v.max() > 10.5


def test_randint_bounds(device: str) -> None:
    v = values(gt.randint(-3, 4, (N,), generator=gen(0), device=device))
    assert v.min() == -3 and v.max() == 3  # low inclusive, high exclusive
    assert set(np.unique(v)) == set(range(-3, 4))
    v = values(gt.randint(250, 256, (1000,), dtype=gt.uint8, device=device))
    assert v.min() >= 250 and v.max() <= 255
    v = values(gt.randint(2, (1000,), dtype=gt.bool, device=device))
    assert v.dtype == np.bool_ and v.any() and not v.all()
    big = values(gt.randint(-(2**63), 2**63 - 1, (100,), device=device))
    assert big.min() < -(2**60) and big.max() > 2**60


def test_randperm_is_permutation(device: str) -> None:
    for n in (1, 2, 100, 1000):
        v = values(gt.randperm(n, generator=gen(n), device=device))
        np.testing.assert_array_equal(np.sort(v), np.arange(n))
    assert not np.array_equal(values(gt.randperm(1000, device=device)), np.arange(1000))


@pytest.mark.parametrize("dt,lo,hi", [(gt.int8, 0, 127), (gt.uint8, 0, 255), (gt.bool, 0, 1),
                                      (gt.float16, 0, 2048)])
def test_random_default_range(device: str, dt: gt.dtype, lo: int, hi: int) -> None:
    v = values(gt.empty(N, dtype=dt, device=device).random_(generator=gen(0)))
    v = v.astype(np.int64)
    assert v.min() >= lo and v.max() <= hi and v.max() > hi // 2


def test_random_forms(device: str) -> None:
    t = gt.empty(1000, dtype=gt.int64, device=device)
    v = values(t.random_(5))
    assert v.min() == 0 and v.max() == 4
    v = values(t.random_(3, 6))
    assert v.min() == 3 and v.max() == 5
    v = values(t.random_(to=4))
    assert v.min() == 0 and v.max() == 3
    v = values(t.random_(-2, None))
    assert v.min() >= -2 and v.max() > 2**60
    v = values(t.random_(**{"from": 10}, to=12))
    assert set(np.unique(v)) == {10, 11}
    v = values(gt.empty(1000, device=device).random_(-2, 2))
    assert set(np.unique(v)) == {-2.0, -1.0, 0.0, 1.0}


def test_bernoulli_extremes(device: str) -> None:
    p = gt.tensor([0.0, 1.0, 0.0, 1.0], device=device)
    for _ in range(5):
        np.testing.assert_array_equal(values(gt.bernoulli(p)), [0, 1, 0, 1])
    x = gt.empty(3, 4, dtype=gt.bool, device=device)
    assert values(x.bernoulli_(1.0)).all()
    assert not values(x.bernoulli_(0.0)).any()
    out = gt.empty(4, dtype=gt.int64, device=device)
    assert gt.bernoulli(p, out=out) is out
    np.testing.assert_array_equal(values(out), [0, 1, 0, 1])


def test_multinomial_values(device: str) -> None:
    probs = gt.tensor([[0.0, 1.0, 0.0, 3.0], [2.0, 0.0, 0.0, 0.0]], device=device)
    repl = values(gt.multinomial(probs, 500, replacement=True, generator=gen(0)))
    assert set(np.unique(repl[0])) == {1, 3} and (repl[1] == 0).all()  # zeros never drawn
    for seed in range(10):
        w = gt.tensor([0.1, 5.0, 0.0, 2.0, 0.3], device=device)
        v = values(gt.multinomial(w, 4, generator=gen(seed)))
        assert len(set(v.tolist())) == 4  # without replacement: distinct
        assert 2 not in v.tolist()[:3]  # the zero-weight category comes only after the others
    full = values(gt.multinomial(gt.ones(3, 7, device=device), 7))
    for row in full:
        np.testing.assert_array_equal(np.sort(row), np.arange(7))


# -- statistics -------------------------------------------------------------------------------
def _check_moments(v: np.ndarray, mean: float, std: float, tol: float = 0.05) -> None:
    v = np.asarray(v, dtype=np.float64)
    assert abs(v.mean() - mean) < tol * max(std, 1.0), (v.mean(), mean)
    assert abs(v.std() - std) < tol * max(std, 1.0), (v.std(), std)


def test_statistics_uniform_and_normal(device: str) -> None:
    _check_moments(values(gt.rand(N, device=device, generator=gen(0))), 0.5, 12 ** -0.5)
    _check_moments(values(gt.randn(N, device=device, generator=gen(1))), 0.0, 1.0)
    t = gt.empty(N, dtype=gt.float64, device=device)
    _check_moments(values(t.uniform_(-2, 4, generator=gen(2))), 1.0, 6 * 12 ** -0.5)
    _check_moments(values(t.normal_(3, 2, generator=gen(3))), 3.0, 2.0)
    _check_moments(values(gt.normal(-1.0, 0.5, (N,), device=device)), -1.0, 0.5)
    mean = gt.full((N,), 5.0, device=device)
    std = gt.full((N,), 3.0, device=device)
    _check_moments(values(gt.normal(mean, std)), 5.0, 3.0)
    _check_moments(values(gt.normal(mean, 0.1)), 5.0, 0.1)
    _check_moments(values(gt.normal(2.0, std)), 2.0, 3.0)
    _check_moments(values(gt.randn(N, dtype=gt.bfloat16, device=device)), 0.0, 1.0)


def test_statistics_complex(device: str) -> None:
    v = values(gt.randn(N, dtype=gt.complex64, device=device, generator=gen(0)))
    _check_moments(v.real, 0.0, 0.5 ** 0.5)
    _check_moments(v.imag, 0.0, 0.5 ** 0.5)
    v = values(gt.empty(N, dtype=gt.complex128, device=device).normal_(2, 2))
    _check_moments(v.real, 2.0, 2 ** 0.5)
    _check_moments(v.imag, 2.0, 2 ** 0.5)
    v = values(gt.rand(N, dtype=gt.complex64, device=device))
    _check_moments(v.imag, 0.5, 12 ** -0.5)


def test_statistics_other_distributions(device: str) -> None:
    t = gt.empty(N, dtype=gt.float64, device=device)
    _check_moments(values(t.exponential_(4.0, generator=gen(0))), 0.25, 0.25)
    _check_moments(np.log(values(t.log_normal_(1.0, 0.5))), 1.0, 0.5)
    v = values(t.geometric_(0.25))
    assert v.min() >= 1 and (v == np.round(v)).all()
    _check_moments(v, 4.0, (0.75 / 0.25**2) ** 0.5, tol=0.1)
    v = values(t.cauchy_(3.0, 0.5))
    assert abs(np.median(v) - 3.0) < 0.05
    assert abs(np.percentile(v, 75) - 3.5) < 0.1  # quartiles at median +- sigma
    _check_moments(values(gt.poisson(gt.full((N,), 6.0, device=device))), 6.0, 6 ** 0.5)


def test_statistics_discrete(device: str) -> None:
    p = gt.full((N,), 0.3, device=device)
    assert abs(values(gt.bernoulli(p, generator=gen(0))).mean() - 0.3) < 0.03
    assert abs(values(gt.empty(N, device=device).bernoulli_(0.7)).mean() - 0.7) < 0.03
    ramp = gt.tensor([[0.1], [0.9]], device=device)
    v = values(gt.empty(2, N, device=device).bernoulli_(ramp))  # p broadcasts over columns
    assert abs(v[0].mean() - 0.1) < 0.03 and abs(v[1].mean() - 0.9) < 0.03
    w = gt.tensor([1.0, 2.0, 0.0, 7.0], device=device)
    counts = np.bincount(values(gt.multinomial(w, N, True, generator=gen(1))), minlength=4)
    np.testing.assert_allclose(counts / N, [0.1, 0.2, 0.0, 0.7], atol=0.02)
    v = values(gt.randint(0, 10, (N,), device=device))
    np.testing.assert_allclose(np.bincount(v, minlength=10) / N, 0.1, atol=0.02)
    firsts = [int(values(gt.multinomial(w, 2, generator=gen(s)))[0]) for s in range(300)]
    assert abs(firsts.count(3) / 300 - 0.7) < 0.1  # the first pick follows the weights


# -- in place -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method,args", [
    ("uniform_", (-1.5, 2.5)), ("normal_", (1.0, 3.0)), ("random_", (1, 5)),
    ("bernoulli_", (0.5,)), ("exponential_", (1.0,)), ("cauchy_", ()), ("log_normal_", ()),
    ("geometric_", (0.5,)),
])
def test_inplace_noncontiguous(device: str, method: str, args: tuple) -> None:
    base = gt.full((4, 6), -7.0, device=device)
    view = base[:, ::2]
    assert not view.is_contiguous()
    v0 = view._version
    r = getattr(view, method)(*args, generator=gen(0))
    assert r is view and view._version == v0 + 1
    b = values(base)
    assert (b[:, 1::2] == -7.0).all()  # untouched between the strided elements
    assert (b[:, ::2] != -7.0).all()
    # same samples as the contiguous version with the same generator seed
    dense = getattr(gt.empty(4, 3, device=device), method)(*args, generator=gen(0))
    np.testing.assert_array_equal(values(view), values(dense))


def test_noncontiguous_inputs(device: str) -> None:
    p = noncontiguous(gt.full((3, 4), 1.0, device=device))
    assert values(gt.bernoulli(p)).all()
    mean = noncontiguous(gt.full((3, 4), 10.0, device=device))
    v = values(gt.normal(mean, 0.0))
    np.testing.assert_array_equal(v, np.full((3, 4), 10.0, dtype=np.float32))
    w = noncontiguous(gt.tensor([[0.0, 1.0, 0.0]], device=device))
    np.testing.assert_array_equal(values(gt.multinomial(w, 3, True)), [[1, 1, 1]])


def test_fresh_outputs_have_version_zero(device: str) -> None:
    assert gt.rand(3, device=device)._version == 0
    assert gt.bernoulli(gt.full((3,), 0.5, device=device))._version == 0


def test_host_fallback_matches_device_kernels(device: str, monkeypatch: Any) -> None:
    """A backend without sampling kernels gets host samples copied in: same values."""
    from gputensor._ops import random as random_ops
    direct = {n: values(f(device, gen(5))) for n, f in SAMPLERS.items()}
    monkeypatch.setattr(random_ops, "_device_kernel", lambda dev, name: None)
    for name, sample in SAMPLERS.items():
        np.testing.assert_array_equal(values(sample(device, gen(5))), direct[name], err_msg=name)
    view = gt.zeros(4, 6, device=device)[:, ::2]
    view.uniform_(1, 2)
    assert view._version == 1 and (values(view) >= 1).all()
    out = gt.empty(0, dtype=gt.int64, device=device)
    assert gt.multinomial(gt.ones(3, device=device), 2, out=out) is out


# -- errors -------------------------------------------------------------------------------------
def _errors(d: str) -> list[tuple[Callable[[], Any], type, str]]:
    z = gt.zeros(3, device=d)
    zi = gt.zeros(3, dtype=gt.int64, device=d)
    return [
        (lambda: gt.rand(3, dtype=gt.int64, device=d), RuntimeError, "floating point"),
        (lambda: gt.randn(3, dtype=gt.bool, device=d), RuntimeError, "floating point"),
        (lambda: gt.rand(-1, device=d), RuntimeError, "negative dimension"),
        (lambda: gt.rand(2.0, device=d), TypeError, "size"),
        (lambda: gt.rand(device=d), TypeError, "size"),
        (lambda: gt.rand(2, dtype=gt.float32, out=gt.empty(2, dtype=gt.float64, device=d)),
         RuntimeError, "does not match dtype of out"),
        (lambda: gt.rand(2, generator=3), TypeError, "Generator"),
        (lambda: gt.randint(5, 5, (3,), device=d), RuntimeError, "from=5 >= to=5"),
        (lambda: gt.randint(0, 300, (3,), dtype=gt.uint8, device=d), RuntimeError,
         "to - 1 is out of bounds"),
        (lambda: gt.randint(-1, 3, (3,), dtype=gt.uint8, device=d), RuntimeError,
         "from is out of bounds"),
        (lambda: gt.randint(0, 3, (3,), dtype=gt.bool, device=d), RuntimeError,
         "out of bounds"),
        (lambda: gt.randint(0, 10.5, (3,), device=d), TypeError, "'high' must be int"),
        (lambda: gt.randint(10, 3, device=d), TypeError, "'size' must be tuple"),
        (lambda: gt.randint(10, device=d), TypeError, "high"),
        (lambda: gt.randint(0, 10, (3,), requires_grad=True, device=d), RuntimeError,
         "require gradients"),
        (lambda: gt.randperm(-1, device=d), RuntimeError, "negative dimension"),
        (lambda: gt.randperm(3.0, device=d), TypeError, "'n' must be int"),
        (lambda: gt.randperm(3000, dtype=gt.float16, device=d), RuntimeError,
         "cannot be greater than 2049"),
        (lambda: gt.randperm(300, dtype=gt.uint8, device=d), RuntimeError, "greater than 256"),
        (lambda: gt.randperm(3, dtype=gt.bool, device=d), RuntimeError, "Bool"),
        (lambda: gt.normal(z, -1.0), RuntimeError, "std >= 0.0"),
        (lambda: gt.normal(z, -gt.ones(3, device=d)), RuntimeError, "all elements of std"),
        (lambda: gt.normal(z, gt.full((), float("nan"), device=d)), RuntimeError, "std >= 0"),
        (lambda: gt.normal(0.0, -1.0, (2,), device=d), RuntimeError, "std >= 0.0"),
        (lambda: gt.normal(0.0, 1.0), TypeError, "size"),
        (lambda: gt.normal(z, gt.ones(4, device=d)), RuntimeError, "must match the size"),
        (lambda: gt.normal(zi, 1.0), RuntimeError, "Long"),
        (lambda: gt.normal(0.0, 1.0, (2,), dtype=gt.int64, device=d), RuntimeError, "Long"),
        (lambda: gt.normal(z, 1.0, (3,)), TypeError, "size"),
        (lambda: gt.bernoulli(gt.tensor([1.5], device=d)), RuntimeError, r"\[0, 1\]"),
        (lambda: gt.bernoulli(gt.tensor([-0.5], device=d)), RuntimeError, r"\[0, 1\]"),
        (lambda: gt.bernoulli(gt.tensor([float("nan")], device=d)), RuntimeError,
         r"\[0, 1\]"),
        (lambda: gt.bernoulli(zi), RuntimeError, "floating point"),
        (lambda: gt.bernoulli(z, 1.3), RuntimeError, r"p to be in \[0, 1\], but got p=1.3"),
        (lambda: z.bernoulli_(-0.1), RuntimeError, r"\[0, 1\]"),
        (lambda: z.bernoulli_(gt.tensor([1.5, 0, 0], device=d)), RuntimeError, r"\[0, 1\]"),
        (lambda: z.bernoulli_(gt.tensor([0, 1, 1], device=d)), RuntimeError, "floating point"),
        (lambda: z.bernoulli_(gt.full((2, 3), 0.5, device=d)), RuntimeError, "expanded"),
        (lambda: gt.multinomial(gt.tensor([0.2, 0.8], device=d), 3), RuntimeError,
         "without replacement"),
        (lambda: gt.multinomial(gt.tensor([1, 2], device=d), 1), RuntimeError,
         "floating-point dtypes for input, got: Long"),
        (lambda: gt.multinomial(gt.tensor([0.2, -0.8], device=d), 1), RuntimeError,
         "element < 0"),
        (lambda: gt.multinomial(gt.tensor([0.0, float("inf")], device=d), 1, True),
         RuntimeError, "inf"),
        (lambda: gt.multinomial(gt.tensor([[1.0, 1.0], [0.0, 0.0]], device=d), 1),
         RuntimeError, "sum of probabilities <= 0"),
        (lambda: gt.multinomial(gt.ones(2, 0, device=d), 1, True), RuntimeError,
         "sum of probabilities <= 0"),
        (lambda: gt.multinomial(gt.ones(2, device=d), 0), RuntimeError, "n_sample <= 0"),
        (lambda: gt.multinomial(gt.full((), 0.2, device=d), 1), RuntimeError, "1 or 2 dim"),
        (lambda: gt.multinomial(gt.ones(2, 2, 2, device=d), 1), RuntimeError, "1 or 2 dim"),
        (lambda: gt.multinomial(gt.ones(2, device=d), 1, out=gt.empty(1, dtype=gt.int32,
                                                                      device=d)),
         RuntimeError, "Long tensor out, got: Int"),
        (lambda: gt.poisson(gt.full((3,), -2.0, device=d)), RuntimeError, "non-negative"),
        (lambda: gt.poisson(zi), RuntimeError, "Long"),
        (lambda: z.uniform_(2, 1), RuntimeError, "from=2 > to=1"),
        (lambda: zi.uniform_(), RuntimeError, "Long"),
        (lambda: z.normal_(0, -1), RuntimeError, "std >= 0.0"),
        (lambda: zi.normal_(), RuntimeError, "Long"),
        (lambda: z.exponential_(0), RuntimeError, "lambda > 0.0"),
        (lambda: zi.exponential_(), RuntimeError, "must be a floating point"),
        (lambda: z.cauchy_(0, -1), RuntimeError, "sigma > 0.0"),
        (lambda: z.log_normal_(1, 0), RuntimeError, "std > 0.0"),
        (lambda: z.geometric_(1), RuntimeError, r"\(0, 1\)"),
        (lambda: gt.zeros(3, dtype=gt.bool, device=d).geometric_(0.5), RuntimeError, "Bool"),
        (lambda: z.random_(1.5), TypeError, "must be int"),
        (lambda: zi.random_(5, 3), RuntimeError, "from=5 >= to=3"),
        (lambda: gt.zeros(3, dtype=gt.uint8, device=d).random_(300), RuntimeError,
         "out of bounds"),
        (lambda: gt.zeros(3, dtype=gt.complex64, device=d).random_(), RuntimeError,
         "ComplexFloat"),
        (lambda: z.uniform_(wrong=1), TypeError, "unexpected keyword"),
    ]


def test_errors(device: str) -> None:
    for fn, exc, match in _errors(device):
        with pytest.raises(exc, match=match):
            fn()


def test_errors_write_nothing(device: str) -> None:
    t = gt.full((3,), 0.25, device=device)
    with pytest.raises(RuntimeError):
        t.bernoulli_(gt.tensor([0.5, 2.0, 0.5], device=device))
    np.testing.assert_array_equal(values(t), [0.25] * 3)
    assert t._version == 0
