"""The opt-in PyTorch CPU stream (MT19937): same seed, exactly PyTorch's CPU numbers.

Every comparison is exact (bit for bit) against torch on the CPU, over several seeds, sizes
on both sides of PyTorch's 16-element normal fill, float32 and float64.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import gputensor as gt
import gputensor.nn.functional  # noqa: F401 - gt.nn.functional, as torch.nn.functional
import gputensor.random as grandom
import gputensor.utils.data  # noqa: F401 - gt.utils.data, as torch.utils.data
from gputensor import _random
from tests.helpers import requires_torch, torch

# PyTorch's own CPU numbers depend on the build it runs: these are its x86-64 AVX2 build's
# (fused multiply-adds; the AVX2 float32 normal kernel), which AVX512 machines share except,
# possibly, for float32 normals of 16+ elements.
_CAPABILITY = torch.backends.cpu.get_cpu_capability() if torch is not None else ""
pytestmark = [requires_torch, pytest.mark.skipif(
    _CAPABILITY not in ("AVX2", "AVX512"), reason=f"PyTorch CPU capability {_CAPABILITY}")]
avx2_normals = pytest.mark.skipif(_CAPABILITY != "AVX2",
                                  reason="float32 normal fill of PyTorch's AVX2 kernel")

SEEDS = (0, 1, 2**40 + 7)
SIZES = (1, 7, 15, 16, 17, 1000)
FLOATS = ["float32", "float64"]


@pytest.fixture(autouse=True)
def torch_stream() -> Iterator[None]:
    """Switch the default CPU generator to MT19937 for the test; restore everything after."""
    was_on = grandom.torch_cpu_stream_enabled()
    state, seed = gt.get_rng_state(), gt.initial_seed()
    grandom.use_torch_cpu_stream(True)
    yield
    grandom.use_torch_cpu_stream(was_on)
    gt.default_generator.manual_seed(seed)
    gt.set_rng_state(state)


def arr(x: Any) -> np.ndarray:
    if isinstance(x, gt.Tensor | torch.Tensor):
        if x.dtype in (gt.bfloat16, torch.bfloat16):
            x = x.float()
        return x.detach().numpy()
    return np.asarray(x)


def same(fn: Callable[..., Any], *args: Any, seeds: tuple[int, ...] = SEEDS) -> None:
    """Run ``fn(lib, *args)`` with lib = gputensor and lib = torch after seeding each with
    the same seed, compare exactly; then draw once more to check both streams stand at the
    same place."""
    for s in seeds:
        gt.manual_seed(s)
        ours, ours_after = arr(fn(gt, *args)), gt.rand(3).numpy()
        torch.manual_seed(s)
        theirs, theirs_after = arr(fn(torch, *args)), torch.rand(3).numpy()
        np.testing.assert_array_equal(ours, theirs, err_msg=f"seed {s}, args {args}")
        np.testing.assert_array_equal(ours_after, theirs_after, err_msg=f"position, seed {s}")


def T(lib: Any, name: str) -> Any:  # noqa: N802 - the dtype ``name`` of either library
    return getattr(lib, name)


# -- uniform and normal ------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOATS)
def test_rand_and_uniform(name: str) -> None:
    for n in SIZES:
        same(lambda L, n: L.rand(n, dtype=T(L, name)), n)
        same(lambda L, n: L.empty(n, dtype=T(L, name)).uniform_(-0.37, 2.5), n)


@avx2_normals
@pytest.mark.parametrize("name", FLOATS)
def test_randn_and_normal(name: str) -> None:
    def three_calls(L: Any, n: int) -> np.ndarray:
        # randn(3) in between takes (and leaves) the generator's cached second normal
        return np.concatenate([L.randn(k, dtype=T(L, name)).numpy() for k in (n, 3, n)])

    for n in SIZES:
        same(three_calls, n)
        same(lambda L, n: L.empty(n, dtype=T(L, name)).normal_(0.3, 1.7), n)
        same(lambda L, n: L.normal(2.0, 3.0, (n,), dtype=T(L, name)), n)


@avx2_normals
@pytest.mark.parametrize("name", FLOATS)
def test_normal_with_tensor_parameters(name: str) -> None:
    for n in (7, 40):
        same(lambda L, n: L.normal(L.arange(n, dtype=T(L, name)), L.rand(n, dtype=T(L, name))),
             n)
        same(lambda L, n: L.normal(L.arange(n, dtype=T(L, name)), 0.5), n)
        same(lambda L, n: L.normal(0.5, L.rand(n, dtype=T(L, name))), n)


@avx2_normals
def test_large_and_strided_outputs() -> None:
    same(lambda L: L.randn(10**6), seeds=(0,))
    same(lambda L: L.randn(10**5 + 3, dtype=L.float64), seeds=(0,))
    same(lambda L: L.randn(7, 9))

    def into_views(L: Any, fill: str) -> Any:
        base = L.zeros(40, 50)  # views are drawn in memory order, serially
        getattr(base.t(), fill)()
        getattr(base[:, ::2], fill)()
        return base

    same(into_views, "normal_")
    same(into_views, "uniform_")


@avx2_normals
def test_complex_and_like_factories() -> None:
    for name in ("complex64", "complex128"):
        for n in (3, 20):
            same(lambda L, n, name: L.randn(n, dtype=T(L, name)), n, name)
            same(lambda L, n, name: L.rand(n, dtype=T(L, name)), n, name)
    same(lambda L: L.rand_like(L.zeros(3, 4)))
    same(lambda L: L.randn_like(L.zeros(3, 8)))
    same(lambda L: L.randint_like(L.zeros(3, 8), 10))


@avx2_normals
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_reduced_precision(name: str) -> None:
    same(lambda L: L.rand(30, dtype=T(L, name)))
    same(lambda L: L.empty(30, dtype=T(L, name)).uniform_(-1.3, 2.1))
    same(lambda L: L.randn(9, dtype=T(L, name)))
    # 16+ elements: PyTorch's AVX2 build rounds ~0.1% of these to the other neighbour
    gt.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = arr(gt.randn(4096, dtype=T(gt, name))), arr(torch.randn(4096, dtype=T(torch,
                                                                                           name)))
    assert (ours == theirs).mean() > 0.99
    np.testing.assert_allclose(ours, theirs, rtol=1e-2, atol=1e-2)


# -- integers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("low,high", [(0, 10), (-5, 2**28 - 6), (-5, 2**28 - 5), (0, 2**31 - 1),
                                      (-3, 2**33), (-(2**62), 2**62)])
def test_randint_ranges(low: int, high: int) -> None:
    # a range of 2**28 or more draws 64-bit words (whatever the dtype), below it 32-bit ones
    for n in SIZES:
        same(lambda L, n: L.randint(low, high, (n,)), n)
    if high < 2**31:
        same(lambda L: L.randint(low, high, (17,), dtype=L.int32))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", FLOATS)
def test_randint_float_dtypes(name: str) -> None:
    for low, high in ((0, 10), (-3, 2**40)):  # float ends are first made representable
        same(lambda L, low, high: L.randint(low, high, (17,), dtype=T(L, name)), low, high)
    same(lambda L: L.randint(0, 65504, (30,), dtype=L.float16))


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "int32", "int64", "bool", "float16",
                                  "bfloat16", "float32", "float64"])
def test_random_(name: str) -> None:
    same(lambda L: L.empty(50, dtype=T(L, name)).random_())
    same(lambda L: L.empty(50, dtype=T(L, name)).random_(2))
    if name not in ("bool", "uint8", "int8"):
        same(lambda L: L.empty(50, dtype=T(L, name)).random_(-3, 100))
    if name == "int64":
        same(lambda L: L.empty(9, dtype=L.int64).random_(-(2**63), None))


def test_randperm() -> None:
    for n in (0,) + SIZES + (100_000,):
        same(lambda L, n: L.randperm(n), n)
    same(lambda L: L.randperm(40, dtype=L.float32))


def test_randperm_large_n_algorithm() -> None:
    """n >= 2**32 / 20 runs the inside-out shuffle on 64-bit words (too big to compare with
    torch here): check that kernel against a direct transcription on a small n."""
    from gputensor.kernels.cpu import random_torch as RT
    words = np.arange(1, 40, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    perm = np.empty(39, dtype=np.int64)
    RT._shuffle_inside_out(words, perm)
    ref: list[int] = []
    for i, w in enumerate(words.tolist()):
        z = w % (i + 1)
        ref.append(i)
        ref[i], ref[z] = ref[z], i
    assert perm.tolist() == ref


# -- bernoulli, dropout and the one-uniform-per-element samplers -------------------------------
@pytest.mark.parametrize("name", FLOATS)
def test_bernoulli(name: str) -> None:
    for n in SIZES:
        same(lambda L, n: L.empty(n, dtype=T(L, name)).bernoulli_(0.3), n)
        same(lambda L, n: L.bernoulli(L.rand(n, dtype=T(L, name))), n)
        same(lambda L, n: L.empty(n, dtype=T(L, name)).bernoulli_(L.rand(n, dtype=L.float64)), n)
    same(lambda L: L.empty(20, dtype=L.int64).bernoulli_(0.5))


@pytest.mark.parametrize("name", FLOATS)
def test_dropout(name: str) -> None:
    x = np.random.default_rng(0).standard_normal((50, 40)).astype(name)
    for p in (0.1, 0.5):
        same(lambda L, p: L.nn.functional.dropout(L.tensor(x), p), p)
    same(lambda L: L.nn.Dropout(0.3)(L.tensor(x[:3, :5])))


@pytest.mark.parametrize("name", FLOATS)
def test_exponential_cauchy_log_normal_geometric(name: str) -> None:
    for n in (1, 17, 1000):
        same(lambda L, n: L.empty(n, dtype=T(L, name)).exponential_(1.5), n)
        same(lambda L, n: L.empty(n, dtype=T(L, name)).cauchy_(0.2, 1.3), n)
        same(lambda L, n: L.empty(n, dtype=T(L, name)).log_normal_(0.2, 0.7), n)
        same(lambda L, n: L.empty(n, dtype=T(L, name)).geometric_(0.3), n)


@pytest.mark.parametrize("name", FLOATS)
def test_multinomial_and_poisson(name: str) -> None:
    def draw(L: Any, k: int, replacement: bool) -> Any:
        return L.multinomial(L.rand(3, 10, dtype=T(L, name)), k, replacement)

    for k in (1, 4, 10):  # without replacement: the largest p / Exp(1) keys
        same(draw, k, False)
    for k in (1, 7, 500):  # with replacement (one sample takes the path above)
        same(draw, k, True)
    same(lambda L: L.multinomial(L.rand(50, dtype=T(L, name)), 5))
    rates = [0.5, 3.0, 0.0, 12.0, 100.0, 1e4] + list(np.linspace(0, 40, 100))
    same(lambda L: L.poisson(L.tensor(rates, dtype=T(L, name))))


# -- modules and data ------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOATS)
def test_default_module_initialisation(name: str) -> None:
    def params(L: Any) -> np.ndarray:
        nn, dt = L.nn, T(L, name)
        mods = [nn.Linear(20, 30, dtype=dt), nn.Linear(3, 1, dtype=dt),
                nn.Conv1d(4, 5, 2, dtype=dt), nn.Conv2d(3, 8, 3, dtype=dt),
                nn.Conv3d(2, 2, 2, dtype=dt), nn.ConvTranspose2d(3, 4, 3, dtype=dt)]
        return np.concatenate([p.detach().numpy().ravel() for m in mods for p in m.parameters()])

    same(params)


def test_dataloader_and_samplers() -> None:
    def epochs(L: Any, **kw: Any) -> list[int]:
        data = L.utils.data
        loader = data.DataLoader(data.TensorDataset(L.arange(100)), batch_size=8, **kw)
        return [i for _ in range(3) for b in loader for i in b[0].tolist()]

    same(lambda L: epochs(L, shuffle=True))
    same(lambda L: list(L.utils.data.RandomSampler(range(30), replacement=True, num_samples=70)))
    same(lambda L: list(L.utils.data.SubsetRandomSampler([3, 8, 11, 20, 7])))
    same(lambda L: list(L.utils.data.WeightedRandomSampler([0.1, 1.0, 0.0, 3.0], 40)))


# -- generators and state ----------------------------------------------------------------------
def test_generator_objects() -> None:
    for s in SEEDS:
        g, tg = gt.Generator(algorithm="mt19937").manual_seed(s), torch.Generator().manual_seed(s)
        np.testing.assert_array_equal(gt.randn(20, generator=g).numpy(),
                                      torch.randn(20, generator=tg).numpy())
        assert g.initial_seed() == tg.initial_seed() == s
    assert gt.Generator().algorithm == "mt19937"  # follows the switch, like torch.Generator()
    assert gt.Generator(algorithm="philox").algorithm == "philox"
    with pytest.raises(ValueError, match="CPU-only"):
        gt.Generator("cuda", algorithm="mt19937")
    with pytest.raises(ValueError, match="unknown algorithm"):
        gt.Generator(algorithm="xorshift")


def test_state_is_pytorchs_layout() -> None:
    for s in SEEDS:
        gt.manual_seed(s)
        torch.manual_seed(s)
        np.testing.assert_array_equal(gt.get_rng_state().numpy(), torch.get_rng_state().numpy())
        gt.randn(3, dtype=gt.float64)  # leaves a cached normal in both
        torch.randn(3, dtype=torch.float64)
        np.testing.assert_array_equal(gt.get_rng_state().numpy(), torch.get_rng_state().numpy())
    # torch's state bytes load here and continue torch's stream (cache included)
    torch.manual_seed(11)
    torch.rand(1000)
    torch.randn(5, dtype=torch.float64)
    gt.set_rng_state(gt.tensor(torch.get_rng_state().numpy()))
    np.testing.assert_array_equal(gt.randn(3, dtype=gt.float64).numpy(),
                                  torch.randn(3, dtype=torch.float64).numpy())
    with pytest.raises(RuntimeError, match="RNG state size to be 128"):
        gt.set_rng_state(gt.Generator(algorithm="philox").get_state())


def test_state_round_trips() -> None:
    g = gt.Generator(algorithm="mt19937").manual_seed(5)
    gt.randn(7, generator=g, dtype=gt.float64)  # mid-stream, with a cached normal
    state = g.get_state()
    first = gt.randn(40, generator=g).numpy()
    g.set_state(state)
    np.testing.assert_array_equal(gt.randn(40, generator=g).numpy(), first)
    g.set_state(state)
    clone = g.clone_state()
    copy = pickle.loads(pickle.dumps(g))
    for other in (clone, copy):
        assert other.algorithm == "mt19937"
        np.testing.assert_array_equal(gt.randn(40, generator=other).numpy(), first)
    assert g.initial_seed() == 5
    new = g.seed()
    assert g.initial_seed() == new
    assert gt.rand(1, generator=g).item() == gt.rand(
        1, generator=gt.Generator(algorithm="mt19937").manual_seed(new)).item()
    gt.manual_seed(2**64 - 1)  # -1 wraps; the twister is keyed by the low 32 bits
    torch.manual_seed(-1)
    assert gt.initial_seed() == torch.initial_seed()
    np.testing.assert_array_equal(gt.rand(5).numpy(), torch.rand(5).numpy())


def test_cuda_tensors_take_host_samples_from_an_mt_generator() -> None:
    if not gt.cuda.is_available():
        pytest.skip("no CUDA device (or emulator)")
    g = gt.Generator(algorithm="mt19937").manual_seed(3)
    on_gpu = gt.randn(20, generator=g, device="cuda").cpu().numpy()
    torch_vals = torch.randn(20, generator=torch.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(on_gpu, torch_vals)
    assert _random.default_generator_for(gt.device("cuda:0")).algorithm == "philox"


# -- the default stays Philox -------------------------------------------------------------------
def test_switch_off_restores_philox(monkeypatch: pytest.MonkeyPatch) -> None:
    grandom.use_torch_cpu_stream(False)
    assert not grandom.torch_cpu_stream_enabled()
    assert gt.default_generator.algorithm == "philox" and gt.Generator().algorithm == "philox"
    gt.manual_seed(3)
    philox = np.random.Generator(np.random.Philox(key=3))
    np.testing.assert_array_equal(gt.rand(6, dtype=gt.float64).numpy(), philox.random(6))
    assert gt.get_rng_state().numel() == _random.STATE_BYTES
    grandom.use_torch_cpu_stream(True)
    assert gt.default_generator.algorithm == "mt19937"
    monkeypatch.setenv("GPUTENSOR_CPU_RNG", "MT19937")
    assert _random._env_cpu_algorithm() == "mt19937"
    monkeypatch.setenv("GPUTENSOR_CPU_RNG", "")
    assert _random._env_cpu_algorithm() == "philox"
    monkeypatch.setenv("GPUTENSOR_CPU_RNG", "pcg")
    with pytest.raises(ValueError, match="GPUTENSOR_CPU_RNG"):
        _random._env_cpu_algorithm()


def test_math_helpers_are_exact() -> None:
    """The fused multiply-add really rounds once (the samplers depend on it)."""
    from gputensor.kernels.cpu import random_torch_math as M
    x = np.array([1.0 + 2.0**-30], dtype=np.float64)
    out = np.empty(1)
    M.affine(x, 1.0 - 2.0**-30, -1.0, out)  # (1 + e)(1 - e) - 1 = -e**2, lost without FMA
    assert out[0] == -(2.0**-60)
    assert math.isclose(float(M._log_ps(np.float32(0.3))), math.log(0.3), rel_tol=1e-6)
