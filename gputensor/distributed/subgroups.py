"""Groups made from other groups: ``new_subgroups`` (equal blocks of ranks),
``new_subgroups_by_enumeration`` (listed blocks), ``split_group`` (a parent group's
communicator split by colour) and ``shrink_group`` (a group without some ranks, made by the
others alone).

Unlike PyTorch's, ``split_group`` needs no device bound to the default group: both CPU
engines (MPI and the TCP "gloo" one) split their communicators natively.
"""

from __future__ import annotations

import datetime
import sys
from typing import Any

from . import _gloo
from . import process_group as P
from .debug import log
from .process_group import GroupMember, ProcessGroup

SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01


def new_subgroups(group_size: int | None = None, group: Any = None,  # noqa: A002
                  timeout: datetime.timedelta | None = None, backend: Any = None,
                  pg_options: Any = None, group_desc: str | None = None
                  ) -> tuple[Any, list[Any]]:
    """Split ``group`` (the world) into consecutive blocks of ``group_size`` ranks (default:
    the CUDA devices per machine). Returns this rank's block and every block."""
    if group_size is None:
        import gputensor as gt
        if not gt.cuda.is_available():
            raise ValueError("Default group size only takes effect when CUDA is available.If "
                             "your subgroup using a backend that does not depend on CUDA,please "
                             "pass in 'group_size' correctly.")
        group_size = gt.cuda.device_count()
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    world_size = P.get_world_size(group)
    if world_size < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size "
                         f"({world_size})")
    if world_size % group_size != 0:
        raise ValueError(f"The world size ({world_size}) must be divisible by "
                         f"'group_size={group_size}'")
    ranks = P.get_process_group_ranks(group)
    blocks = [ranks[i:i + group_size] for i in range(0, len(ranks), group_size)]
    return new_subgroups_by_enumeration(blocks, timeout, backend, pg_options, group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list: list[list[int]],
                                 timeout: datetime.timedelta | None = None, backend: Any = None,
                                 pg_options: Any = None, group_desc: str | None = None
                                 ) -> tuple[Any, list[Any]]:
    """One group per list of global ranks (lists may not overlap; a rank may be in none).
    Every rank of the world calls it. Returns this rank's group (None when it is in none)
    and every group (``GroupMember.NON_GROUP_MEMBER`` for those it is not in)."""
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    subgroups, mine, owner = [], None, {}
    me = P.get_rank()
    for ranks in ranks_per_subgroup_list:
        sub = P.new_group(ranks=ranks, timeout=timeout, backend=backend,
                          pg_options=pg_options, group_desc=group_desc)
        subgroups.append(sub)
        for r in ranks:
            if r in owner:
                raise ValueError(f"Rank {r} has appeared in both subgroup {owner[r]} and "
                                 f"{ranks}")
            owner[r] = ranks
            if r == me:
                mine = sub
                log.info("Rank %s is assigned to subgroup %s", r, ranks)
    return mine, subgroups


def split_group(parent_pg: ProcessGroup | None = None, split_ranks: list | None = None,
                timeout: datetime.timedelta | None = None, pg_options: Any = None,
                group_desc: str | None = None, backend: Any = None) -> ProcessGroup | None:
    """Split ``parent_pg`` (the world) into the blocks ``split_ranks`` lists, in ranks of
    the parent group; every member of the parent calls it with the same blocks. Returns this
    rank's block as a group, or None when it is in none."""
    if not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    world = P._world()
    parent = world if parent_pg is None else P.resolve(parent_pg)
    me_global = world.rank()
    if me_global not in parent.ranks:
        raise ValueError(f"Global rank {me_global} is not part of the parent group {parent}")
    if backend is not None:
        _check_backend_subset(parent, backend)
    me = parent.rank()
    mine, color = None, parent.engine.UNDEFINED
    for i, block in enumerate(split_ranks):
        if len(block) == 0:
            raise ValueError("the split group cannot be empty")
        if len(block) > world.size():
            raise ValueError("the split group's size should be less or equal to the "
                             "world_size set by init_process_group")
        if len(block) != len(set(block)):
            raise ValueError("the split group cannot have duplicate ranks")
        if mine is None and me in block:
            mine, color = sorted(int(r) for r in block), i
    P._count_group()
    comm = parent.comm.Split(color, me)
    if mine is None:
        return None
    pg = ProcessGroup(comm, [parent.ranks[r] for r in mine], parent.name(), parent._use_nccl,
                      parent.engine)
    pg.bound_device_id = parent.bound_device_id
    pg.group_desc = group_desc or f"{parent.group_desc}:split"
    P._groups.append(pg)
    return pg


def _check_backend_subset(parent: ProcessGroup, backend: Any) -> None:
    """``backend`` may only keep device:backend pairs the parent has (PyTorch's rule)."""
    from .backends import BackendConfig
    have = BackendConfig(P.Backend(P.get_backend_config(parent))).get_device_backend_map()
    want = BackendConfig(P.Backend(str(backend))).get_device_backend_map()
    for device, name in want.items():
        if device not in have:
            raise ValueError(f"Requested backend for device '{device}' is not present in the "
                             f"parent process group (parent backends: {dict(have)})")
        if have[device] != name:
            raise ValueError(f"Backend mismatch for device '{device}': parent has "
                             f"'{have[device]}', requested '{name}'. Backend names must match "
                             f"exactly when filtering split_group backends.")


def shrink_group(ranks_to_exclude: list[int], group: ProcessGroup | None = None,  # noqa: A002
                 shrink_flags: int = SHRINK_DEFAULT, pg_options: Any = None) -> ProcessGroup:
    """A new group of ``group``'s ranks (the world's) except ``ranks_to_exclude`` (ranks in
    the group), made by the remaining ranks alone; the old group is destroyed. Shrinking the
    default group destroys every other group and makes the new one the default (its ranks
    renumbered 0..n-1)."""
    if not isinstance(ranks_to_exclude, list):
        raise TypeError(f"ranks_to_exclude must be a list, but got "
                        f"{type(ranks_to_exclude).__name__}. Example: [1, 3, 5] to exclude "
                        f"ranks 1, 3, and 5.")
    if not ranks_to_exclude:
        raise ValueError("ranks_to_exclude cannot be empty. To shrink a group, you must "
                         "specify at least one rank to exclude. Example: [failed_rank_id]")
    if not isinstance(shrink_flags, int) or shrink_flags not in (SHRINK_DEFAULT, SHRINK_ABORT):
        raise ValueError(f"Invalid shrink_flags value: {shrink_flags}. Must be one of: "
                         f"SHRINK_DEFAULT ({SHRINK_DEFAULT}) or SHRINK_ABORT ({SHRINK_ABORT}). "
                         f"Use SHRINK_ABORT to abort ongoing operations before shrinking.")
    target = P._world() if group is None else P.resolve(group)
    size, me = target.size(), target.rank()
    if size <= 1:
        raise ValueError(f"Cannot shrink a process group with size {size}. Group must have at "
                         f"least 2 ranks to support shrinking.")
    excluded: set[int] = set()
    for i, r in enumerate(ranks_to_exclude):
        if not isinstance(r, int):
            raise TypeError(f"All elements in ranks_to_exclude must be integers. Element at "
                            f"index {i} is {type(r).__name__}: {r}")
        if not 0 <= r < size:
            raise ValueError(f"Rank {r} at index {i} is out of bounds for group size {size}. "
                             f"Valid ranks are in range [0, {size - 1}].")
        if r in excluded:
            raise ValueError(f"Duplicate rank {r} found in ranks_to_exclude at index {i}. "
                             f"Each rank can only be excluded once.")
        excluded.add(r)
    if len(excluded) >= size:
        raise ValueError(f"Cannot exclude all {size} ranks from process group. At least one "
                         f"rank must remain. Excluding {len(excluded)} ranks.")
    if me in excluded:
        raise RuntimeError(f"Current rank {me} is in the exclusion list and should not call "
                           f"shrink_group(). Only non-excluded ranks should participate in the "
                           f"shrinking operation. Excluded ranks should terminate their "
                           f"processes instead.")
    gone = sorted(excluded)
    is_default = target is GroupMember.WORLD
    if is_default:
        for pg in [g for g in P._groups if g is not target]:
            P.destroy_process_group(pg)
    if target.engine is _gloo:
        comm = target.comm.Exclude(gone)
    else:
        comm = target.comm.Create_group(target.comm.Get_group().Excl(gone))
    remaining = [r for i, r in enumerate(target.ranks) if i not in excluded]
    hook = sys.excepthook
    P.destroy_process_group(target)
    P._count_group()
    new = ProcessGroup(comm, list(range(len(remaining))) if is_default else remaining,
                       target.name(), target._use_nccl, target.engine)
    new.bound_device_id = target.bound_device_id
    new.group_desc = "default:shrunken" if is_default else f"{target.group_name}:shrunk"
    P._groups.append(new)
    if is_default:
        GroupMember.WORLD = P.group.WORLD = new
        sys.excepthook = hook  # the world's failure hook still applies
    return new
