"""Random number generators: gt.Generator, the default generators and the global seed functions.

A Generator runs one of two streams (its ``algorithm``):

- ``"philox"`` (the default): NumPy's counter-based Philox4x64 keyed by the seed, so its whole
  state is a (key, counter) pair plus a few buffered words. A CUDA kernel reproduces the stream
  from that pair, so a seed gives the same numbers on the CPU and on a GPU. The state is a
  128-byte uint8 tensor.
- ``"mt19937"`` (CPU only, opt-in): PyTorch's CPU stream, a Mersenne Twister with PyTorch's
  seeding and normal cache (``gputensor/_mt19937.py``); with it the CPU samplers give PyTorch's
  CPU numbers for the same seed. The state is PyTorch's own 5056-byte layout.

``use_torch_cpu_stream(True)``, or ``GPUTENSOR_CPU_RNG=mt19937`` in the environment at import,
makes the default CPU generator (and every ``gt.Generator()`` made without ``algorithm=``) an
MT19937 one. CUDA generators stay Philox either way: PyTorch's CUDA stream is a different
Philox, so no switch could make CUDA numbers match PyTorch's anyway.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import device as Device
from gputensor._device import to_device
from gputensor._mt19937 import STATE_BYTES as MT_STATE_BYTES
from gputensor._mt19937 import MT19937Engine
from gputensor._tensor import Tensor

DEFAULT_SEED = 67280421310721  # PyTorch's default seed, so initial_seed() matches it
_U64 = 1 << 64
_MAGIC = int.from_bytes(b"GTPhilx1", "little")
# Layout of the state, in little-endian uint64 words.
_W_MAGIC, _W_SEED, _W_KEY, _W_COUNTER, _W_BUFFER, _W_POS, _W_HAS32, _W_U32 = \
    0, 1, 2, 4, 8, 12, 13, 14
_STATE_WORDS = 16
STATE_BYTES = _STATE_WORDS * 8


def _check_seed(seed: Any) -> int:
    if isinstance(seed, np.integer):
        seed = int(seed)
    if not isinstance(seed, int):
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    if not -(1 << 63) <= seed < _U64:
        raise ValueError(f"manual_seed: seed {seed} is out of range [-2**63, 2**64)")
    return seed % _U64  # negative seeds wrap like PyTorch's (-1 -> 2**64 - 1)


PHILOX, MT19937 = "philox", "mt19937"
ALGORITHMS = (PHILOX, MT19937)
_ENV_CPU_RNG = "GPUTENSOR_CPU_RNG"


def _env_cpu_algorithm() -> str:
    name = os.environ.get(_ENV_CPU_RNG, PHILOX).strip().lower() or PHILOX
    if name not in ALGORITHMS:
        raise ValueError(f"{_ENV_CPU_RNG}={name!r}: expected one of {ALGORITHMS}")
    return name


_cpu_algorithm = _env_cpu_algorithm()  # what a CPU Generator without algorithm= runs


def _resolve_algorithm(algorithm: str | None, dev: Device) -> str:
    if algorithm is None:
        return _cpu_algorithm if dev.type == "cpu" else PHILOX
    if algorithm not in ALGORITHMS:
        raise ValueError(f"Generator: unknown algorithm {algorithm!r}; expected one of "
                         f"{ALGORITHMS}")
    if algorithm == MT19937 and dev.type != "cpu":
        raise ValueError(f"Generator: the mt19937 stream is CPU-only (PyTorch's CPU stream); "
                         f"{dev.type} generators run Philox")
    return algorithm


class Generator:
    """A pseudo-random number generator (``gt.Generator(device='cpu')``), like torch.Generator.

    Pass it as ``generator=`` to the random ops; generators are independent of each other and
    of the default generator that ``gt.manual_seed`` seeds.

    ``algorithm`` is a gputensor extension (torch.Generator has no such argument):
    ``"philox"`` gives the same numbers on the CPU and on CUDA; ``"mt19937"`` (CPU only) gives
    PyTorch's CPU numbers for the same seed. ``None`` takes the process-wide CPU choice
    (``use_torch_cpu_stream``, ``GPUTENSOR_CPU_RNG``) on the CPU and Philox elsewhere.
    """

    def __init__(self, device: Any = "cpu", algorithm: str | None = None) -> None:
        self._device: Device = to_device(device)
        self._lock = threading.Lock()
        self._algorithm = _resolve_algorithm(algorithm, self._device)
        self._mt: MT19937Engine | None = None
        self._rng: np.random.Generator | None = None
        self.manual_seed(DEFAULT_SEED)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def algorithm(self) -> str:
        """``"philox"`` or ``"mt19937"`` (PyTorch's CPU stream)."""
        return self._algorithm

    @property
    def mt(self) -> MT19937Engine:
        """The MT19937 engine (word stream and normal cache) of an mt19937 generator."""
        if self._mt is None:
            raise RuntimeError("this generator runs Philox, not mt19937")
        return self._mt

    # -- seeding ---------------------------------------------------------------------------
    def manual_seed(self, seed: int) -> Generator:
        """Re-key the generator with ``seed`` and rewind its stream; returns ``self``.

        mt19937 keys the twister with the seed's low 32 bits, as PyTorch does (``initial_seed``
        still returns all 64)."""
        seed = _check_seed(seed)
        with self._lock:
            self._seed = seed
            if self._algorithm == MT19937:
                self._rng = None
                if self._mt is None:
                    self._mt = MT19937Engine(seed)
                else:
                    self._mt.reseed(seed)
            else:
                self._mt = None
                self._rng = np.random.Generator(np.random.Philox(key=seed))
        return self

    def seed(self) -> int:
        """Seed from the OS's entropy source and return the seed used."""
        s = int.from_bytes(os.urandom(8), "little") >> 1  # 63 bits: fits an int64 tensor too
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def _set_algorithm(self, algorithm: str) -> None:
        """Switch streams, re-seeding with the current initial seed (the default CPU
        generator's path under ``use_torch_cpu_stream``)."""
        self._algorithm = _resolve_algorithm(algorithm, self._device)
        self.manual_seed(self._seed)

    # -- state -----------------------------------------------------------------------------
    def get_state(self) -> Tensor:
        """The full state as a CPU uint8 tensor (set_state restores it exactly).

        Philox: 128 bytes of gputensor's own layout. mt19937: PyTorch's 5056-byte
        ``CPUGeneratorImplState``, so ``torch.get_rng_state()`` and this state interchange."""
        if self._algorithm == MT19937:
            with self._lock:
                return Tensor._from_np(self.mt.state_bytes())
        with self._lock:
            st = self._rng.bit_generator.state
        words = np.zeros(_STATE_WORDS, dtype="<u8")
        words[_W_MAGIC] = _MAGIC
        words[_W_SEED] = self._seed
        words[_W_KEY:_W_KEY + 2] = st["state"]["key"]
        words[_W_COUNTER:_W_COUNTER + 4] = st["state"]["counter"]
        words[_W_BUFFER:_W_BUFFER + 4] = st["buffer"]
        words[_W_POS] = st["buffer_pos"]
        words[_W_HAS32] = st["has_uint32"]
        words[_W_U32] = st["uinteger"]
        return Tensor._from_np(words.view(np.uint8).copy())

    def set_state(self, new_state: Tensor) -> Generator:
        """Restore a state returned by get_state of a generator of the same algorithm
        (an mt19937 one also takes ``torch.get_rng_state()``'s bytes)."""
        if self._algorithm == MT19937:
            raw = _state_bytes(new_state, MT_STATE_BYTES, "CPUGeneratorImplState")
            with self._lock:
                self.mt.load_state_bytes(raw)
                self._seed = self.mt.seed
            return self
        words = _state_words(new_state)
        st = {
            "bit_generator": "Philox",
            "state": {"counter": words[_W_COUNTER:_W_COUNTER + 4].astype(np.uint64),
                      "key": words[_W_KEY:_W_KEY + 2].astype(np.uint64)},
            "buffer": words[_W_BUFFER:_W_BUFFER + 4].astype(np.uint64),
            "buffer_pos": int(words[_W_POS]),
            "has_uint32": int(words[_W_HAS32]),
            "uinteger": int(words[_W_U32]),
        }
        bitgen = np.random.Philox()
        bitgen.state = st
        with self._lock:
            self._seed = int(words[_W_SEED])
            self._rng = np.random.Generator(bitgen)
        return self

    def clone_state(self) -> Generator:
        """A new generator on the same device with a copy of this one's state."""
        return Generator(self._device, self._algorithm).set_state(self.get_state())

    def philox_key_counter(self) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
        """The Philox4x64 (key, counter) pair a device kernel would continue the stream from."""
        if self._rng is None:
            raise RuntimeError("an mt19937 generator has no Philox key and counter")
        st = self._rng.bit_generator.state["state"]
        return tuple(int(k) for k in st["key"]), tuple(int(c) for c in st["counter"])

    def __reduce__(self) -> tuple:
        return (_rebuild_generator, (str(self._device), bytes(self.get_state().numpy()),
                                     self._algorithm))


def _state_bytes(state: Any, size: int, what: str) -> np.ndarray:
    """The bytes of a uint8 state tensor of exactly ``size`` elements."""
    if not isinstance(state, Tensor):
        raise TypeError(f"expected a gputensor.ByteTensor, but got {type(state).__name__}")
    if state.dtype is not D.uint8:
        raise TypeError(f"RNG state must be a gputensor.ByteTensor (uint8), got {state.dtype}")
    if state.numel() != size:
        raise RuntimeError(f"Expected a {what} of size {size} but found the input RNG state "
                           f"size to be {state.numel()}")
    return np.ascontiguousarray(state.detach().cpu().reshape(-1)._host)


def _state_words(state: Any) -> np.ndarray:
    words = _state_bytes(state, STATE_BYTES, "Philox generator state").view("<u8")
    if int(words[_W_MAGIC]) != _MAGIC:
        raise RuntimeError("set_state: the tensor is not a gputensor Philox generator state "
                           "(bad header)")
    if int(words[_W_POS]) > 4 or int(words[_W_HAS32]) > 1:
        raise RuntimeError("set_state: corrupted generator state (buffer position out of range)")
    return words


def _rebuild_generator(device: str, state: bytes, algorithm: str = PHILOX) -> Generator:
    arr = np.frombuffer(state, dtype=np.uint8).copy()
    return Generator(device, algorithm).set_state(Tensor._from_np(arr))


# -- default generators ----------------------------------------------------------------------
default_generator = Generator("cpu")
_device_defaults: dict[Device, Generator] = {}
_global_seed: int | None = None  # the last gt.manual_seed, for device generators made later


def default_generator_for(dev: Device) -> Generator:
    """The default generator of a device: gt.default_generator for the CPU, one per GPU."""
    if dev.type == "cpu":
        return default_generator
    gen = _device_defaults.get(dev)
    if gen is None:
        gen = _device_defaults[dev] = Generator(dev)
        if _global_seed is not None:
            gen.manual_seed(_global_seed)
    return gen


def manual_seed(seed: int) -> Generator:
    """Seed the default generators (CPU and every GPU) and return gt.default_generator."""
    global _global_seed
    seed = _check_seed(seed)
    _global_seed = seed
    for gen in _device_defaults.values():
        gen.manual_seed(seed)
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generators from OS entropy; returns the seed."""
    s = default_generator.seed()
    global _global_seed
    _global_seed = s
    for gen in _device_defaults.values():
        gen.manual_seed(s)
    return s


def initial_seed() -> int:
    """The seed of the default CPU generator."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default CPU generator's state as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default CPU generator's state from get_rng_state()."""
    default_generator.set_state(new_state)


# -- the PyTorch-compatible CPU stream switch -------------------------------------------------
def use_torch_cpu_stream(enabled: bool = True) -> None:
    """Run the default CPU generator on PyTorch's CPU stream (MT19937) or back on Philox.

    A gputensor extension: with it on, ``gt.manual_seed(s)`` followed by CPU sampling gives
    PyTorch's CPU numbers for seed ``s``, and ``gt.Generator()`` made without ``algorithm=``
    runs MT19937 too (as ``torch.Generator()`` does, e.g. in RandomSampler). Switching
    re-seeds the default CPU generator with its initial seed; call ``gt.manual_seed`` after.
    CUDA generators keep Philox, so CPU and CUDA numbers no longer agree while it is on.
    Setting ``GPUTENSOR_CPU_RNG=mt19937`` in the environment turns it on at import.
    """
    global _cpu_algorithm
    _cpu_algorithm = MT19937 if enabled else PHILOX
    if default_generator.algorithm != _cpu_algorithm:
        default_generator._set_algorithm(_cpu_algorithm)


def torch_cpu_stream_enabled() -> bool:
    """Whether the default CPU generator runs PyTorch's CPU stream (MT19937)."""
    return _cpu_algorithm == MT19937
