"""Process groups: the default (world) group made by ``init_process_group`` and the subgroups
of ``new_group``, each a communicator over its member ranks: MPI's (``_mpi``), or the gloo
engine's (``_gloo``: TCP between the ranks, which meet through a store) with the same API.

Ranks that ``src``/``dst`` arguments name are global (world) ranks, as in PyTorch;
``group_src``/``group_dst`` name ranks inside the group.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

from . import _gloo, _mpi
from .pg_methods import ProcessGroupMethods
from .store import PrefixStore, Store

default_pg_timeout = datetime.timedelta(minutes=30)

# CPU engines: "gloo" is TCP between the ranks (_gloo.py), except in processes MPI's launcher
# started, where it (and "mpi") runs on MPI; "nccl" is NCCL through CuPy for CUDA tensors (CPU
# tensors and Python objects use the CPU engine, which also bootstraps NCCL).
_CPU_BACKENDS = ("mpi", "gloo")
_inits = 0  # default groups made in this process: each rendezvous gets keys of its own


class Backend(str):
    """A backend name (``Backend.MPI == "mpi"``)."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"
    FAKE = "fake"

    # PyTorch's tables of names (which of them this build can run: is_backend_available).
    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE]
    default_device_backend_map: dict[str, str] = {"cpu": GLOO, "cuda": NCCL, "xpu": XCCL,
                                                  "mps": GLOO}
    backend_capability: dict[str, list[str]] = {
        GLOO: ["cpu", "cuda"], NCCL: ["cuda"], XCCL: ["xpu"], UCC: ["cpu", "cuda"],
        MPI: ["cpu", "cuda"], FAKE: ["cpu", "cuda", "hpu", "xpu"]}

    def __new__(cls, name: str) -> Backend:
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name!r}")
        return str.__new__(cls, name.lower())


class ProcessGroup(ProcessGroupMethods):
    """A set of ranks and the communicator they talk over."""

    def __init__(self, comm: Any, ranks: list[int], backend: str, nccl: bool = False,
                 engine: Any = _mpi) -> None:
        self.comm, self.ranks, self._backend = comm, list(ranks), Backend(backend)
        self.engine = engine      # the communicator's module: _mpi or _gloo
        self._use_nccl = nccl     # CUDA tensors go through NCCL (else MPI, staged on the host)
        self._nccl: Any = None    # the NCCL communicator, made at the first CUDA collective
        self.bound_device_id: Any = None
        self._devices: dict[str, Backend] | None = None  # "cpu:gloo,cuda:nccl": device -> backend
        self.group_desc = "undefined"
        self._name = str(_group_count)  # every rank counts every group made (PyTorch's names)

    @property
    def group_name(self) -> str:
        return self._name

    def nccl_for(self, t: Any) -> Any:
        """The NCCL communicator for CUDA tensor ``t`` (None: the host engine serves it). A
        group made from a device:backend string refuses tensors of a device it does not
        name, as PyTorch does."""
        if self._devices is not None:
            device = "cuda" if getattr(t, "is_cuda", False) else "cpu"
            if device not in self._devices:
                raise RuntimeError(f"No backend type associated with device type {device}")
        if not (self._use_nccl and getattr(t, "is_cuda", False)):
            return None
        if self._nccl is None:
            from ._nccl import Communicator
            self._nccl = Communicator(self.comm, t.device.index or 0)
        return self._nccl

    def timeout_s(self) -> float:
        """How long this group's waits last: the gloo engine's per-communicator limit, or the
        group's ``_timeout`` (MPI waits are polled against it; MPI has no limit of its own)."""
        own = getattr(self.comm, "timeout_s", None)
        if own is not None:
            return float(own)
        transport = getattr(self.comm, "t", None)
        if transport is not None:
            return float(transport.timeout_s)
        return getattr(self, "_timeout", default_pg_timeout).total_seconds()

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def name(self) -> str:
        return self._backend

    def group_rank(self, global_rank: int, what: str = "rank") -> int:
        try:
            return self.ranks.index(int(global_rank))
        except ValueError:
            raise ValueError(f"Global {what} {global_rank} is not part of group with ranks "
                             f"{self.ranks}") from None

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self._backend!r}, ranks={self.ranks})"


class GroupMember:
    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


class group:  # noqa: N801 - PyTorch's name
    WORLD: ProcessGroup | None = None


_groups: list[ProcessGroup] = []
_group_count = 0  # groups made since the default one (members or not): their names


def _count_group() -> None:
    global _group_count
    _group_count += 1


def _world() -> ProcessGroup:
    if GroupMember.WORLD is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group.")
    return GroupMember.WORLD


def resolve(group_: Any) -> ProcessGroup:
    """The group a collective runs on (None: the world); non-members may not call it."""
    if group_ is None or group_ is GroupMember.WORLD:
        return _world()
    if group_ is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("this rank is not a member of the group (new_group returned "
                         "GroupMember.NON_GROUP_MEMBER here)")
    if not isinstance(group_, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup, got {type(group_).__name__}")
    return group_


def is_available() -> bool:
    return True  # the gloo engine needs nothing beyond the standard library


def is_mpi_available() -> bool:
    return _mpi.available()


def is_gloo_available() -> bool:
    return True


def is_nccl_available() -> bool:
    from . import _nccl
    return _nccl.available()


def is_initialized() -> bool:
    return GroupMember.WORLD is not None


def _abort_on_uncaught(comm: Any) -> None:
    """An uncaught exception on one rank aborts the whole job (the others would otherwise wait
    forever in their next collective), as mpi4py's ``-m mpi4py`` runner does."""
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        time.sleep(0.5)  # let the launcher forward the traceback before the job is torn down
        comm.Abort(1)
    sys.excepthook = hook


def _launched_by_mpi() -> bool:
    return "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ


def _uses_mpi(name: str, init_method: str | None, store: Any) -> bool:
    """Whether the default group runs on MPI: asked for by name, or a process of an MPI job
    (mpiexec) joining through env://, or a lone process with no rendezvous variables (MPI's
    one-process world)."""
    if name == Backend.MPI:
        return True
    if store is not None or init_method not in (None, "env://"):
        return False
    if _launched_by_mpi():
        return True
    return not ({"RANK", "MASTER_ADDR"} & set(os.environ)) and _mpi.available()


def device_backends(backend: Any) -> dict[str, Backend] | None:
    """The device -> backend map of a ``"cpu:gloo,cuda:nccl"``-style string (None for a plain
    name or None). A group has one host engine (gloo or MPI): it serves CPU tensors, and CUDA
    tensors staged through host memory unless CUDA's backend is NCCL."""
    if backend is None or ":" not in str(backend):
        return None
    from .backends import BackendConfig
    pairs = BackendConfig(Backend(backend)).device_backend_map
    allowed = {"cpu": _CPU_BACKENDS, "cuda": (*_CPU_BACKENDS, Backend.NCCL)}
    for device, be in pairs.items():
        if be not in allowed.get(device, ()):
            raise ValueError(f"Invalid backend '{be}' for device type '{device}' in "
                             f"'{backend}' (gputensor has cpu: 'gloo', 'mpi'; cuda: 'nccl', "
                             f"'gloo', 'mpi')")
    engines = {be for be in pairs.values() if be != Backend.NCCL}
    if len(engines) > 1:
        raise ValueError(f"'{backend}' names two host engines ({', '.join(sorted(engines))}); "
                         f"a gputensor group runs one: name the same one for cpu and cuda")
    return pairs


def _engine_of(backend: Any, devices: dict[str, Backend] | None) -> tuple[Backend, bool]:
    """(the host engine's or NCCL's name, whether CUDA tensors were asked to use NCCL)."""
    if devices is None:
        name = Backend(backend or "mpi")
        return name, name == Backend.NCCL
    host = next((be for be in devices.values() if be != Backend.NCCL), Backend.NCCL)
    return Backend(host), devices.get("cuda") == Backend.NCCL


def _rendezvous(init_method: str | None, rank: int, world_size: int,
                timeout: datetime.timedelta) -> tuple[Store, int, int]:
    """The store the processes meet in, and this process's rank and the world size, from the
    rendezvous handler of ``init_method``'s scheme (``rendezvous.py``): env:// (MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE), tcp://host:port or file:///path (rank and world_size as
    arguments or ?rank=..&world_size=.. in the URL), or a registered one."""
    from .rendezvous import rendezvous
    url = init_method or "env://"
    parsed = urlparse(url)
    if parsed.scheme in ("tcp", "file"):
        query = {k: int(v[-1]) for k, v in parse_qs(parsed.query).items()
                 if k in ("rank", "world_size")}
        if query.get("rank", rank) < 0 or query.get("world_size", world_size) <= 0:
            raise ValueError(f"{parsed.scheme}:// rendezvous needs rank and world_size (as "
                             f"arguments or in the URL's query), got rank={rank}, "
                             f"world_size={world_size}")
    return next(rendezvous(url, rank, world_size, timeout=timeout))


def _close_on_uncaught(comm: Any) -> None:
    """An uncaught exception closes this rank's connections, so the peers' collectives fail
    (DistNetworkError) instead of waiting for it, and its own waiting threads end."""
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        previous(kind, value, tb)
        comm.t.close()
    hook.previous = previous  # type: ignore[attr-defined]  # destroy_process_group restores it
    sys.excepthook = hook


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1,
                       rank: int = -1, store: Any = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None) -> None:
    """Join the job's processes into the default group: through a store (``store``, or the
    rendezvous of ``init_method``: env:// by default) on the gloo engine, or, under MPI's
    launcher, as the MPI job's processes (``world_size``/``rank``, when given, must agree)."""
    global _inits, _group_count
    if GroupMember.WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    _group_count = 0
    from . import _nccl
    devices = device_backends(backend)
    name, wants_nccl = _engine_of(backend, devices)
    if wants_nccl and not _nccl.available():
        raise RuntimeError("Distributed package doesn't have NCCL built in")
    if name not in (*_CPU_BACKENDS, Backend.NCCL):
        raise ValueError(f"Invalid backend: '{backend}' (available: 'mpi', 'gloo', 'nccl')")
    if init_method is not None and store is not None:
        raise ValueError("Cannot specify both init_method and store.")
    # Like PyTorch's default "cpu:gloo,cuda:nccl": CUDA tensors use NCCL where it exists.
    use_nccl = wants_nccl or (backend is None and _nccl.available())
    if not _uses_mpi(name, init_method, store):
        limit = timeout or default_pg_timeout
        if store is not None:
            if world_size <= 0:
                raise ValueError("world_size must be positive if using store")
            if rank < 0:
                raise ValueError("rank must be non-negative if using store")
            if not isinstance(store, Store):
                raise TypeError(f"store must be a gt.distributed.Store, got "
                                f"{type(store).__name__}")
        else:
            store, rank, world_size = _rendezvous(init_method, rank, world_size, limit)
        if not 0 <= rank < world_size:
            raise ValueError(f"Invalid rank {rank} for world size {world_size}")
        _inits += 1
        comm = _gloo.world(PrefixStore(f"default_pg/{_inits}", store), rank, world_size,
                           limit.total_seconds())
        pg = ProcessGroup(comm, list(range(world_size)), backend or "gloo", use_nccl, _gloo)
        pg._store, pg._devices = store, devices
        _close_on_uncaught(comm)
        GroupMember.WORLD = group.WORLD = pg
        _groups.append(pg)
        return
    if init_method not in (None, "env://") or store is not None:
        raise ValueError(f"init_method={init_method!r}/store: the MPI backend joins the "
                         f"processes its launcher started; launch with mpiexec (or "
                         f"gputensor.distributed.run) and use the default env://")
    world = _mpi.mpi().COMM_WORLD
    size, me = world.Get_size(), world.Get_rank()
    env_size = os.environ.get("WORLD_SIZE")
    if env_size is not None and int(env_size) != size:
        raise RuntimeError(f"WORLD_SIZE={env_size} but the MPI job has {size} process(es): "
                           f"start the processes with mpiexec -n {env_size} (MPI joins only "
                           f"the processes of one MPI job)")
    if world_size not in (-1, size) or rank not in (-1, me):
        raise ValueError(f"init_process_group(world_size={world_size}, rank={rank}) does not "
                         f"match the MPI job (world size {size}, this process rank {me})")
    pg = ProcessGroup(world.Dup(), list(range(size)), backend if devices else name, use_nccl)
    pg._devices = devices
    pg._timeout = timeout or default_pg_timeout  # MPI has no limit of its own: waits poll it
    GroupMember.WORLD = group.WORLD = pg
    _groups.append(pg)
    if size > 1:
        _abort_on_uncaught(world)


def destroy_process_group(group_: ProcessGroup | None = None) -> None:
    """Free ``group_``'s communicator (None: every group, and leave the default one)."""
    targets = list(_groups) if group_ is None else [resolve(group_)]
    for pg in targets:
        if pg in _groups:
            _groups.remove(pg)
        if pg._nccl is not None:
            pg._nccl.destroy()
        pg.comm.Free()
    if group_ is None or group_ is GroupMember.WORLD:
        GroupMember.WORLD = group.WORLD = None
        if hasattr(sys.excepthook, "previous"):  # the gloo world's hook: its comm is gone
            sys.excepthook = sys.excepthook.previous


def new_group(ranks: list[int] | None = None, timeout: Any = None, backend: Any = None,
              pg_options: Any = None, use_local_synchronization: bool = False,
              group_desc: Any = None, device_id: Any = None, sort_ranks: bool = True) -> Any:
    """A group of ``ranks`` (every rank of the world must call this, as in PyTorch); ranks
    outside it get ``GroupMember.NON_GROUP_MEMBER``."""
    world = _world()
    members = list(range(world.size())) if ranks is None else [int(r) for r in ranks]
    if sort_ranks:
        members = sorted(members)
    for r in members:
        if not 0 <= r < world.size():
            raise ValueError(f"new_group: rank {r} is out of range for world size "
                             f"{world.size()}")
    me = world.rank()
    _count_group()
    comm = world.comm.Split(0 if me in members else world.engine.UNDEFINED,
                            members.index(me) if me in members else 0)
    if me not in members:
        return GroupMember.NON_GROUP_MEMBER
    devices = world._devices if backend is None else device_backends(backend)
    use_nccl = world._use_nccl if backend is None else _engine_of(backend, devices)[1]
    pg = ProcessGroup(comm, members, world.name() if backend is None else backend, use_nccl,
                      world.engine)
    pg._devices = devices
    pg._timeout = getattr(world, "_timeout", default_pg_timeout)
    if timeout is not None:  # (a gloo communicator inherits its parent's otherwise)
        _set_pg_timeout(timeout, pg)
    _groups.append(pg)
    return pg


def get_rank(group: Any = None) -> int:  # noqa: A002 - PyTorch's name
    """This process's rank in ``group`` (-1 when it is not a member)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).rank()


def get_world_size(group: Any = None) -> int:  # noqa: A002
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).size()


def get_backend(group: Any = None) -> Backend:  # noqa: A002
    return resolve(group)._backend


def get_backend_config(group: Any = None) -> str:  # noqa: A002
    """The group's device:backend pairs (``"cpu:gloo,cuda:gloo"``, ``"cpu:mpi,cuda:nccl"``),
    as PyTorch's BackendConfig prints them: CUDA tensors go to NCCL when the group uses it,
    else to the CPU engine through host memory."""
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified")
    pg = resolve(group)
    if pg._devices is not None:
        return ",".join(f"{device}:{be}" for device, be in pg._devices.items())
    if pg._backend == Backend.NCCL:
        return "cuda:nccl"
    return f"cpu:{pg._backend},cuda:{Backend.NCCL if pg._use_nccl else pg._backend}"


def _set_pg_timeout(timeout: datetime.timedelta, group: Any = None) -> None:  # noqa: A002
    """Let the group's waits last ``timeout``: the gloo engine's communicator of the group,
    and the limit its MPI waits are polled against (MPI has none of its own)."""
    pg = resolve(group)
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                        f"{type(timeout).__name__}")
    pg._timeout = timeout
    if hasattr(pg.comm, "timeout_s"):
        pg.comm.timeout_s = timeout.total_seconds()


def get_process_group_ranks(group: Any) -> list[int]:  # noqa: A002
    return list(resolve(group).ranks)


def get_global_rank(group: Any, group_rank: int) -> int:  # noqa: A002
    return resolve(group).ranks[group_rank]


def get_group_rank(group: Any, global_rank: int) -> int:  # noqa: A002
    return resolve(group).group_rank(global_rank)


def get_pg_count() -> int:
    return len(_groups)


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """LOCAL_RANK from the launcher's environment (MPICH's MPI_LOCALRANKID too)."""
    for var in ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank "
                       "to allow `get_node_local_rank` to work, assuming you are not running "
                       "in a multi-device context and want the code to run locally instead.")
