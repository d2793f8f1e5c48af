"""DistributedSampler against PyTorch's: the same slices, padding and trimming."""

from __future__ import annotations

import pytest
import torch

import gputensor as gt
from gputensor.utils.data import DistributedSampler


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False),
                                                   (2, 5, False), (7, 2, True), (0, 2, False)])
def test_unshuffled_slices_match_torch(n: int, replicas: int, drop_last: bool) -> None:
    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(data, replicas, rank, shuffle=False,
                                                     drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_shuffled_slices_split_one_permutation_per_epoch() -> None:
    data = list(range(11))
    samplers = [DistributedSampler(data, 3, r, seed=5) for r in range(3)]
    first = [list(s) for s in samplers]
    perm = gt.randperm(11, generator=gt.Generator().manual_seed(5)).tolist()
    padded = perm + perm[:1]  # 11 -> 12 = 3 x 4, padded from the front
    assert first == [padded[r::3] for r in range(3)]
    for s in samplers:
        s.set_epoch(1)
    again = [list(s) for s in samplers]
    assert again != first
    assert set(sum(again, [])) == set(data)


def test_rank_is_checked() -> None:
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval "
                                         r"\[0, 2\]"):
        DistributedSampler(list(range(4)), 3, 3)
