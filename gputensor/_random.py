"""Random number generators: gt.Generator, the default generators and the global seed functions.

A Generator wraps NumPy's counter-based Philox4x64 bit generator keyed by the seed, so its whole
state is a (key, counter) pair plus a few buffered words. A CUDA kernel can reproduce the
stream from that pair. The state serialises to a fixed 128-byte uint8 tensor and back exactly.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from gputensor import _dtype as D
from gputensor._device import device as Device
from gputensor._device import to_device
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


class Generator:
    """A pseudo-random number generator (``gt.Generator(device='cpu')``), like torch.Generator.

    Pass it as ``generator=`` to the random ops; generators are independent of each other and
    of the default generator that ``gt.manual_seed`` seeds.
    """

    def __init__(self, device: Any = "cpu") -> None:
        self._device: Device = to_device(device)
        self._lock = threading.Lock()
        self.manual_seed(DEFAULT_SEED)

    @property
    def device(self) -> Device:
        return self._device

    # -- seeding ---------------------------------------------------------------------------
    def manual_seed(self, seed: int) -> Generator:
        """Re-key the generator with ``seed`` and rewind its counter; returns ``self``."""
        seed = _check_seed(seed)
        with self._lock:
            self._seed = seed
            self._rng = np.random.Generator(np.random.Philox(key=seed))
        return self

    def seed(self) -> int:
        """Seed from the OS's entropy source and return the seed used."""
        s = int.from_bytes(os.urandom(8), "little") >> 1  # 63 bits: fits an int64 tensor too
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    # -- state -----------------------------------------------------------------------------
    def get_state(self) -> Tensor:
        """The full state as a 128-byte CPU uint8 tensor (set_state restores it exactly)."""
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
        """Restore a state returned by get_state (of any gt.Generator)."""
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
        return Generator(self._device).set_state(self.get_state())

    def philox_key_counter(self) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
        """The Philox4x64 (key, counter) pair a device kernel would continue the stream from."""
        st = self._rng.bit_generator.state["state"]
        return tuple(int(k) for k in st["key"]), tuple(int(c) for c in st["counter"])

    def __reduce__(self) -> tuple:
        return (_rebuild_generator, (str(self._device), bytes(self.get_state().numpy())))


def _state_words(state: Any) -> np.ndarray:
    if not isinstance(state, Tensor):
        raise TypeError(f"expected a gputensor.ByteTensor, but got {type(state).__name__}")
    if state.dtype is not D.uint8:
        raise TypeError(f"RNG state must be a gputensor.ByteTensor (uint8), got {state.dtype}")
    if state.numel() != STATE_BYTES:
        raise RuntimeError(f"Expected a Philox generator state of {STATE_BYTES} bytes but found "
                           f"the input RNG state size to be {state.numel()}")
    raw = np.ascontiguousarray(state.detach().cpu().reshape(-1)._host)
    words = raw.view("<u8")
    if int(words[_W_MAGIC]) != _MAGIC:
        raise RuntimeError("set_state: the tensor is not a gputensor Philox generator state "
                           "(bad header)")
    if int(words[_W_POS]) > 4 or int(words[_W_HAS32]) > 1:
        raise RuntimeError("set_state: corrupted generator state (buffer position out of range)")
    return words


def _rebuild_generator(device: str, state: bytes) -> Generator:
    arr = np.frombuffer(state, dtype=np.uint8).copy()
    return Generator(device).set_state(Tensor._from_np(arr))


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
