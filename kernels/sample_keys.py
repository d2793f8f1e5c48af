"""Per-call Philox keys for the element-parallel samplers (gamma, Dirichlet, binomial).

Rejection samplers use a variable number of random numbers per element, so they cannot share
one sequential stream without running sequentially. Instead each call draws a 64-bit key from
the generator's own stream (advancing it by exactly one 64-bit word, on every device), and
element ``i`` then reads its private Philox4x32-10 stream ``(key, counter = (block, i))``, as
PyTorch's CUDA samplers give each thread its own Philox subsequence. The CPU (Numba) and CUDA
kernels compute the same streams, so a seed gives the same samples on both devices.
"""

from __future__ import annotations

from typing import Any

from gputensor._random import MT19937


def draw_key(gen: Any) -> tuple[int, int]:
    """One 64-bit word of ``gen``'s stream, as the two 32-bit halves of a Philox4x32 key."""
    with gen._lock:
        if gen.algorithm == MT19937:
            word = int(gen.mt.words64(1)[0])
        else:
            word = int(gen._rng.bit_generator.random_raw())
    return word & 0xFFFFFFFF, word >> 32
