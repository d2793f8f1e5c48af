"""MemoryStats logs block events and folds them with NumPy: the folded counters must equal
eager, event-by-event counting (peaks included) whenever they are read, across folds, resets
and threads."""

from __future__ import annotations

import random
import threading

import pytest

from gputensor.kernels.cuda.memstats import POOLS, SMALL_BLOCK, MemoryStats


class EagerStats:
    """The reference: every counter updated at each event."""

    def __init__(self) -> None:
        self.c = {(s, p): [0, 0, 0, 0] for s in ("allocation", "allocated_bytes",
                                                  "requested_bytes") for p in POOLS}

    def block(self, requested: int, size: int, sign: int) -> None:
        pool = "small_pool" if size <= SMALL_BLOCK else "large_pool"
        for stat, v in (("allocation", 1), ("allocated_bytes", size),
                        ("requested_bytes", requested)):
            for p in ("all", pool):
                c = self.c[stat, p]
                c[0] += sign * v
                if sign > 0:
                    c[2] += v
                    c[1] = max(c[1], c[0])
                else:
                    c[3] += v

    def reset_peaks(self) -> None:
        for c in self.c.values():
            c[1] = c[0]

    def reset_accumulated(self) -> None:
        for c in self.c.values():
            c[2] = c[3] = 0

    def as_dict(self) -> dict[str, int]:
        return {f"{s}.{p}.{f}": v for (s, p), c in self.c.items()
                for f, v in zip(("current", "peak", "allocated", "freed"), c, strict=True)}


def _check(stats: MemoryStats, ref: EagerStats) -> None:
    got = stats.as_dict()
    for key, value in ref.as_dict().items():
        assert got[key] == value, key
        if key.startswith(("allocation.", "allocated_bytes.")):  # mirrored as active_*
            mirror = key.replace("allocation.", "active.").replace("allocated_bytes.",
                                                                     "active_bytes.")
            assert got[mirror] == value, key


@pytest.mark.parametrize("log_events", [1, 7, 4096])
def test_folded_counters_equal_eager_counting(monkeypatch, log_events):
    monkeypatch.setattr(MemoryStats, "LOG_EVENTS", log_events)
    rng = random.Random(log_events)
    stats, ref = MemoryStats(), EagerStats()
    live: list[tuple[int, int]] = []
    for step in range(3000):
        if live and rng.random() < 0.45:
            req, size = live.pop(rng.randrange(len(live)))
            stats.block(req, size, -1)
            ref.block(req, size, -1)
        else:
            req = rng.choice([1, 511, 4096, SMALL_BLOCK, SMALL_BLOCK + 1, 3 << 20])
            size = -(-req // 512) * 512
            live.append((req, size))
            stats.block(req, size, +1)
            ref.block(req, size, +1)
        if step % 500 == 250:
            _check(stats, ref)
        if step == 1000:
            stats.reset_peaks()
            ref.reset_peaks()
        if step == 2000:
            stats.reset_accumulated()
            ref.reset_accumulated()
    _check(stats, ref)
    assert stats.current("allocated_bytes") == sum(s for _, s in live)
    assert stats.peak("allocated_bytes") == ref.c["allocated_bytes", "all"][1]


def test_events_from_threads_are_never_lost_or_torn(monkeypatch):
    monkeypatch.setattr(MemoryStats, "LOG_EVENTS", 64)  # many folds while threads append
    stats = MemoryStats()

    def work(size: int) -> None:
        for _ in range(4000):
            stats.block(size - 3, size, +1)
            stats.block(size - 3, size, -1)

    threads = [threading.Thread(target=work, args=(512 * (i + 1),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    d = stats.as_dict()
    assert d["allocation.all.current"] == 0 and d["allocated_bytes.all.current"] == 0
    assert d["allocation.all.allocated"] == d["allocation.all.freed"] == 16000
    assert d["allocated_bytes.all.allocated"] == 4000 * 512 * (1 + 2 + 3 + 4)
    assert d["requested_bytes.all.freed"] == 4000 * (512 * 10 - 12)
    assert 1 <= d["allocation.all.peak"] <= 4
