"""PyTorch's CPU random engine: a 32-bit Mersenne Twister (MT19937) and its generator state.

PyTorch's CPU generator (``at::CPUGeneratorImpl``) runs the classic MT19937, seeded with
``init_genrand`` from the low 32 bits of the seed (the full 64-bit seed is only remembered
for ``initial_seed``). It hands out 32-bit words, and 64-bit ones made of two words, the first
in the high half. Box-Muller normals come in pairs; the second of a pair is cached in the
generator (``next_double_normal_sample``) for the next draw.

NumPy's ``MT19937`` runs the same twister in C but seeds it differently, so the key is made
here and loaded into it: the word stream is then PyTorch's, 32 bits per step.
The state serialises to PyTorch's own 5056-byte layout (``CPUGeneratorImplState``), so
``torch.get_rng_state()`` bytes load here and the other way round.
"""

from __future__ import annotations

import numpy as np

N = 624  # words in the twister's key
_U32 = 0xFFFFFFFF

# PyTorch's CPUGeneratorImplState (x86-64 layout): the legacy TH struct, then the float cache.
STATE_DTYPE = np.dtype({
    "names": ["seed", "left", "seeded", "next", "state", "normal_x", "normal_y", "normal_rho",
              "normal_is_valid", "float_normal", "float_normal_is_valid"],
    "formats": ["<u8", "<i4", "<i4", "<u8", ("<u8", N), "<f8", "<f8", "<f8", "<i4", "<f4",
                "u1"],
    "offsets": [0, 8, 12, 16, 24, 5016, 5024, 5032, 5040, 5048, 5052],
    "itemsize": 5056,
})
STATE_BYTES = STATE_DTYPE.itemsize


def seed_key(seed: int) -> np.ndarray:
    """The twister's key for ``seed`` (Matsumoto and Nishimura's init_genrand, 32-bit seed)."""
    key = np.empty(N, dtype=np.uint32)
    x = seed & _U32
    key[0] = x
    for i in range(1, N):
        x = (1812433253 * (x ^ (x >> 30)) + i) & _U32
        key[i] = x
    return key


class MT19937Engine:
    """The word stream and the normal caches of one PyTorch-compatible CPU generator."""

    __slots__ = ("seed", "next_double_normal", "next_float_normal", "_bits", "_fresh")

    def __init__(self, seed: int) -> None:
        self._bits = np.random.MT19937()
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """PyTorch's ``set_current_seed``: a new key, empty normal caches."""
        self.seed = seed
        self._load(seed_key(seed), N)
        self._fresh = True  # PyTorch reports next=0 (not 624) until the first draw
        self.next_double_normal: float | None = None
        self.next_float_normal: float | None = None

    def _load(self, key: np.ndarray, pos: int) -> None:
        self._bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}

    # -- words --------------------------------------------------------------------------------
    def words32(self, n: int) -> np.ndarray:
        """The next ``n`` 32-bit words (PyTorch's ``random()``), as uint64."""
        self._fresh = False
        return self._bits.random_raw(n)

    def words64(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit words (PyTorch's ``random64()``: first word high)."""
        w = self.words32(2 * n)
        return (w[0::2] << np.uint64(32)) | w[1::2]

    def snapshot(self) -> dict:
        """The twister's position, for ``rewind`` (samplers that draw ahead, then give back)."""
        return self._bits.state

    def rewind(self, snap: dict, words: int) -> None:
        """Return to ``snapshot``'s position and step ``words`` 32-bit words ahead."""
        self._bits.state = snap
        if words:
            self._bits.random_raw(words)

    # -- state (PyTorch's layout) -------------------------------------------------------------
    def state_bytes(self) -> np.ndarray:
        st = self._bits.state["state"]
        pos = int(st["pos"])
        rec = np.zeros((), dtype=STATE_DTYPE)
        rec["seed"] = self.seed
        rec["seeded"] = 1
        rec["state"] = st["key"].astype(np.uint64)
        # PyTorch counts down ``left`` to the next twist; a full pos (624) means "twist next".
        nxt = 0 if self._fresh else pos
        rec["next"], rec["left"] = nxt, (1 if pos == N else N + 1 - pos)
        if self.next_double_normal is not None:
            rec["normal_is_valid"], rec["normal_y"] = 1, self.next_double_normal
        if self.next_float_normal is not None:
            rec["float_normal_is_valid"], rec["float_normal"] = 1, self.next_float_normal
        return rec.reshape(1).view(np.uint8).copy()

    def load_state_bytes(self, raw: np.ndarray) -> None:
        """Restore from ``state_bytes()`` output (or ``torch.get_rng_state()``'s bytes)."""
        rec = raw.view(STATE_DTYPE)[0]
        left, nxt = int(rec["left"]), int(rec["next"])
        if not (rec["seeded"] and 0 < left <= N and nxt <= N):
            raise RuntimeError("Invalid mt19937 state")
        pos = N if left == 1 else nxt
        self._load((rec["state"] & _U32).astype(np.uint32), pos)
        self.seed = int(rec["seed"])
        self._fresh = left == 1 and nxt == 0
        self.next_double_normal = float(rec["normal_y"]) if rec["normal_is_valid"] else None
        self.next_float_normal = (float(rec["float_normal"]) if rec["float_normal_is_valid"]
                                  else None)
