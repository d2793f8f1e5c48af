"""``sharding_filter`` (ShardingFilter): every ``num_of_instances``-th element, for one of
several workers or ranks (the DataLoader applies the sharding in each worker)."""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum
from typing import Any

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ..utils.common import sized_len

__all__ = ["SHARDING_PRIORITIES", "ShardingFilterIterDataPipe"]


class SHARDING_PRIORITIES(IntEnum):
    DEFAULT = 1
    DISTRIBUTED = 2
    MULTIPROCESSING = 3


class _ShardingIterDataPipe(IterDataPipe):
    def apply_sharding(self, num_of_instances: int, instance_id: int,
                       sharding_group: SHARDING_PRIORITIES) -> None:
        raise NotImplementedError


@functional_datapipe("sharding_filter")
class ShardingFilterIterDataPipe(_ShardingIterDataPipe):
    """``dp.sharding_filter(sharding_group_filter=None)``: after ``apply_sharding(n, i)``,
    only the elements whose position is ``i`` modulo ``n``. Groups (distributed, then
    multiprocessing) compose: n = n_dist * n_mp."""

    def __init__(self, source_datapipe: IterDataPipe, sharding_group_filter: Any = None) -> None:
        super().__init__()
        self.source_datapipe = source_datapipe
        self.sharding_group_filter = sharding_group_filter
        self.groups: dict[int, tuple[int, int]] = {}
        self.num_of_instances = 1
        self.instance_id = 0
        self._update_num_of_instances()

    def apply_sharding(self, num_of_instances: int, instance_id: int,
                       sharding_group: SHARDING_PRIORITIES = SHARDING_PRIORITIES.DEFAULT,
                       ) -> None:
        if instance_id >= num_of_instances:
            raise ValueError(f"instance_id({instance_id}) should be smaller than "
                             f"num_of_instances({num_of_instances})")
        default = SHARDING_PRIORITIES.DEFAULT
        mixed = bool(self.groups) and default not in self.groups if sharding_group == default \
            else default in self.groups
        if mixed:
            raise RuntimeError("ShardingFilter cannot mix DEFAULT and non DEFAULT groups")
        self.groups[sharding_group] = (num_of_instances, instance_id)
        self._update_num_of_instances()

    def _update_num_of_instances(self) -> None:
        active = [self.groups[k] for k in sorted(self.groups, reverse=True)
                  if self.sharding_group_filter is None or k == self.sharding_group_filter]
        self.num_of_instances, self.instance_id = 1, 0
        for n, i in active:
            self.instance_id += self.num_of_instances * i
            self.num_of_instances *= n

    def __iter__(self) -> Iterator:
        for i, item in enumerate(self.source_datapipe):
            if i % self.num_of_instances == self.instance_id:
                yield item

    def __len__(self) -> int:
        n = sized_len(self, self.source_datapipe)
        return n // self.num_of_instances + (
            1 if self.instance_id < n % self.num_of_instances else 0)
