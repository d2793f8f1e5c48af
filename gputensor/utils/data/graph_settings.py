"""Settings applied across a DataPipe graph (torch.utils.data.graph_settings): sharding,
shuffling on/off and seeding. The DataLoader applies them: shuffle settings from its
``shuffle`` argument, one seed per iteration from its generator, and in each worker process
the sharding that gives every worker its own part of the stream."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import gputensor as gt

from .datapipes.iter.sharding import SHARDING_PRIORITIES, _ShardingIterDataPipe
from .graph import DataPipeGraph, traverse_dps

__all__ = ["apply_random_seed", "apply_sharding", "apply_shuffle_settings",
           "get_all_graph_pipes"]


def get_all_graph_pipes(graph: DataPipeGraph) -> list[Any]:
    """Every DataPipe of ``graph`` once, parents before their sources."""
    out: list[Any] = []
    seen: set[int] = set()

    def walk(g: DataPipeGraph) -> None:
        for dp_id, (dp, sub) in g.items():
            if dp_id not in seen:
                seen.add(dp_id)
                out.append(dp)
                walk(sub)
    walk(graph)
    return out


def _has_methods(dp: Any, *names: str) -> bool:
    return all(inspect.ismethod(getattr(dp, n, None)) for n in names)


def apply_sharding(datapipe: Any, num_of_instances: int, instance_id: int,
                   sharding_group: SHARDING_PRIORITIES = SHARDING_PRIORITIES.DEFAULT) -> Any:
    """Call ``apply_sharding`` on each sharding DataPipe (``sharding_filter``) of the graph;
    two on one branch would shard twice, which raises."""
    def walk(graph: DataPipeGraph, applied: Any) -> None:
        for dp, sub in graph.values():
            here = applied
            if isinstance(dp, _ShardingIterDataPipe) or _has_methods(dp, "apply_sharding"):
                if applied is not None:
                    raise RuntimeError("Sharding twice on a single pipeline is likely "
                                       "unintended and will cause data loss. Sharding already "
                                       f"applied to {applied} while trying to apply to {dp}")
                if len(inspect.signature(dp.apply_sharding).parameters) < 3:
                    dp.apply_sharding(num_of_instances, instance_id)
                else:
                    dp.apply_sharding(num_of_instances, instance_id,
                                      sharding_group=sharding_group)
                here = dp
            walk(sub, here)
    walk(traverse_dps(datapipe), None)
    return datapipe


def apply_shuffle_settings(datapipe: Any, shuffle: bool | None = None) -> Any:
    """Turn every shuffler of the graph on or off (None: leave them); ``shuffle=True`` on a
    graph without one appends ``.shuffle()`` (with a warning), as PyTorch does."""
    if shuffle is None:
        return datapipe
    shufflers = [dp for dp in get_all_graph_pipes(traverse_dps(datapipe))
                 if _has_methods(dp, "set_shuffle", "set_seed")]
    if not shufflers and shuffle:
        warnings.warn("`shuffle=True` was set, but the datapipe does not contain a `Shuffler`. "
                      "Adding one at the end. Be aware that the default buffer size might not "
                      "be sufficient for your task.", stacklevel=2)
        datapipe = datapipe.shuffle()
        shufflers = [datapipe]
    for s in shufflers:
        s.set_shuffle(shuffle)
    return datapipe


def apply_random_seed(datapipe: Any, rng: gt.Generator) -> Any:
    """Give every random DataPipe (one with ``set_seed``) a seed drawn from ``rng``."""
    for dp in get_all_graph_pipes(traverse_dps(datapipe)):
        if _has_methods(dp, "set_seed"):
            dp.set_seed(int(gt.empty((), dtype=gt.int64).random_(generator=rng).item()))
    return datapipe


def world() -> tuple[int, int]:
    """(world size, rank) of an initialized gt.distributed group, else (1, 0)."""
    from gputensor import distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def sharding_worker_init_fn(worker_init_fn: Any, world_size: int, rank: int,
                            worker_id: int) -> None:
    """The DataLoader's worker init for a DataPipe: shard the worker's copy of the graph
    across ranks first, then workers, then run the user's ``worker_init_fn``."""
    from .worker import get_worker_info

    info = get_worker_info()
    if info is None:
        raise AssertionError("Worker info is None in sharding worker init function")
    apply_sharding(info.dataset, info.num_workers * world_size, worker_id * world_size + rank)
    if worker_init_fn is not None:
        worker_init_fn(worker_id)
