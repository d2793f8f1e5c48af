"""``DeviceMesh`` and ``init_device_mesh``: the ranks of a job laid out as an n-D array, with
one process group per mesh dimension (the ranks that differ only in that coordinate).

Each dimension's groups are made by one split of the world's communicator (colour: which
line of that dimension a rank lies on), so every rank of the world takes part, as PyTorch's
``new_group`` calls require. A 1-D mesh over the whole world in rank order uses the default
group itself. Slicing by name (``mesh["dp"]``) returns a sub-mesh that shares its parent's
groups.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import process_group as P
from .process_group import ProcessGroup

_mesh_stack: list[DeviceMesh] = []  # meshes entered with ``with mesh:``


def _as_array(mesh: Any) -> np.ndarray:
    from gputensor._tensor import Tensor
    if isinstance(mesh, Tensor):
        mesh = mesh.detach().cpu().numpy()
    return np.array(mesh, dtype=np.int64)


def _line_split(full: np.ndarray, dim: int) -> tuple[list[np.ndarray], dict[int, int]]:
    """The lines of ``full`` along ``dim`` (each a 1-D array of ranks), and for each rank
    the index of its line."""
    lines = list(np.moveaxis(full, dim, -1).reshape(-1, full.shape[dim]))
    return lines, {int(r): i for i, line in enumerate(lines) for r in line}


class DeviceMesh:
    """``DeviceMesh(device_type, mesh, mesh_dim_names=...)``: ``mesh`` (an array of global
    ranks) must be the same on every rank; every rank of the world builds it together."""

    def __init__(self, device_type: str, mesh: Any = None, *,
                 mesh_dim_names: tuple[str, ...] | None = None,
                 backend_override: Any = None, _init_backend: bool = True) -> None:
        if mesh is None:
            raise TypeError("The mesh argument is required except for PRIVATE USAGE ONLY!")
        full = _as_array(mesh)
        self._device_type = device_type
        self._root_full = full              # the mesh this one was sliced from (or itself)
        self._root_dims = tuple(range(full.ndim))  # which of the root's dims this mesh has
        self._mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names else None
        self._groups: list[Any] = []
        overrides = self._overrides(backend_override, full.ndim)
        if _init_backend:
            self._setup_world()
            self._groups = [self._make_group(d, overrides[d]) for d in range(full.ndim)]

    # -- construction -------------------------------------------------------------------------
    def _setup_world(self) -> None:
        if not P.is_initialized():
            P.init_process_group()
        world_size = P.get_world_size()
        if self._root_full.size > world_size:
            raise RuntimeError(f"Mesh should not be bigger than default world size "
                               f"{world_size}, but found {self._root_full.size} ranks!")

    def _overrides(self, given: Any, ndim: int) -> list[str | None]:
        """Per dimension, the backend ``backend_override`` names for it ({dim or name:
        backend}, or a tuple per dimension; a (backend, options) pair keeps the backend)."""
        out: list[str | None] = [None] * ndim
        if given is None:
            return out
        items = given.items() if isinstance(given, dict) else enumerate(given)
        for dim, value in items:
            if isinstance(dim, str):
                dim = self._get_mesh_dim_by_name(dim)
            elif -ndim <= dim < 0:
                dim += ndim
            if not 0 <= dim < ndim:
                raise ValueError(f"Found invalid keys in backend_override: got {dim}, expected "
                                 f"integers in range [-{ndim}, {ndim}) or one of "
                                 f"{self._mesh_dim_names}")
            name = value[0] if isinstance(value, tuple) else value
            out[dim] = None if name is None else str(name)
        return out

    def _make_group(self, dim: int, backend: str | None = None) -> ProcessGroup | None:
        """This rank's group along ``dim`` (None when it is not in the mesh), on the world's
        backend or ``backend``."""
        world = P._world()
        full = self._root_full
        if backend is not None and P.Backend(backend) not in (world.name(), P.Backend.NCCL):
            raise ValueError(f"backend_override: a mesh dimension's groups are split from the "
                             f"default group's communicator, so they use its backend "
                             f"({world.name()!r}) or 'nccl' (CUDA tensors), not {backend!r}")
        if backend is not None and P.Backend(backend) == P.Backend.NCCL and \
                not P.is_nccl_available():
            raise RuntimeError("Distributed package doesn't have NCCL built in")
        if full.ndim == 1 and full.tolist() == list(range(world.size())) and backend is None:
            return world
        lines, line_of = _line_split(full, dim)
        me = world.rank()
        P._count_group()
        colour = line_of.get(me, world.engine.UNDEFINED)
        key = int(np.flatnonzero(lines[colour] == me)[0]) if me in line_of else 0
        comm = world.comm.Split(colour, key)
        if me not in line_of:
            return None
        pg = ProcessGroup(comm, [int(r) for r in lines[colour]], backend or world.name(),
                          world._use_nccl if backend is None else backend == P.Backend.NCCL,
                          world.engine)
        pg.group_desc = f"mesh_{self._mesh_dim_names[dim]}" if self._mesh_dim_names else \
            f"mesh_dim_{dim}"
        P._groups.append(pg)
        return pg

    @staticmethod
    def from_group(group: Any, device_type: str, mesh: Any = None, *,
                   mesh_dim_names: tuple[str, ...] | None = None) -> DeviceMesh:
        """A mesh over existing groups: one group (a 1-D mesh of its ranks) or one group
        per dimension of ``mesh``."""
        if isinstance(group, ProcessGroup):
            ranks = P.get_process_group_ranks(group)
            if mesh is not None and _as_array(mesh).tolist() != ranks:
                raise ValueError(f"Invalid mesh {mesh} for ProcessGroup with ranks {ranks}")
            dm = DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names,
                            _init_backend=False)
            dm._groups = [group]
            return dm
        groups = list(group)
        if not groups:
            raise ValueError("Expects at least one ProcessGroup to be passed")
        if mesh is None:
            raise ValueError("Must pass mesh if passing multiple ProcessGroups")
        if mesh_dim_names is None:
            raise ValueError("Must pass mesh_dim_names if passing multiple ProcessGroups")
        arr = _as_array(mesh)
        if arr.ndim != len(groups):
            raise ValueError(f"Expects mesh with ndim equal to number of ProcessGroups but got "
                             f"mesh {arr.tolist()} and {len(groups)} ProcessGroups")
        dm = DeviceMesh(device_type, arr, mesh_dim_names=mesh_dim_names, _init_backend=False)
        dm._groups = groups
        return dm

    # -- what it holds -----------------------------------------------------------------------
    def _coordinate_in_root(self) -> tuple[int, ...] | None:
        hit = np.argwhere(self._root_full == P.get_rank())
        return tuple(int(i) for i in hit[0]) if len(hit) else None

    def _local(self) -> np.ndarray:
        """This mesh's ranks: the root's, at this rank's coordinate on the dims it lacks."""
        if len(self._root_dims) == self._root_full.ndim:
            return self._root_full
        where = self._coordinate_in_root()
        if where is None:
            raise RuntimeError("In order to get the mesh Tensor of a DeviceMesh it needs to "
                               "either have all its original dimensions (e.g., no slicing) or "
                               "it needs to contain the local rank")
        index = tuple(slice(None) if d in self._root_dims else where[d]
                      for d in range(self._root_full.ndim))
        return self._root_full[index]

    @property
    def device_type(self) -> str:
        return self._device_type

    @property
    def mesh(self) -> Any:
        import gputensor as gt
        return gt.tensor(self._local(), dtype=gt.int32)

    @property
    def mesh_dim_names(self) -> tuple[str, ...] | None:
        return self._mesh_dim_names

    @property
    def ndim(self) -> int:
        return len(self._root_dims)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(self._root_full.shape[d]) for d in self._root_dims)

    def size(self, mesh_dim: int | None = None) -> int:
        if mesh_dim is not None:
            return self.shape[mesh_dim]
        return int(np.prod(self.shape, dtype=np.int64))

    def get_rank(self) -> int:
        return P.get_rank()

    def get_coordinate(self) -> tuple[int, ...] | None:
        """This rank's index along each dimension (None when it is not in the mesh)."""
        where = self._coordinate_in_root()
        return None if where is None else tuple(where[d] for d in self._root_dims)

    def _get_mesh_dim_by_name(self, name: str) -> int:
        if not self._mesh_dim_names:
            raise KeyError("No `mesh_dim_names` found.")
        if name not in self._mesh_dim_names:
            raise KeyError(f"Mesh dimension '{name}' does not exist.",
                           f"Available mesh dimensions are: mesh_dim_names="
                           f"{self._mesh_dim_names}")
        return self._mesh_dim_names.index(name)

    def get_group(self, mesh_dim: int | str | None = None) -> ProcessGroup:
        """The group of ``mesh_dim`` (a name or an index; may be left out on a 1-D mesh)."""
        if self.ndim > 1 and mesh_dim is None:
            raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions",
                               "Optional kwarg `mesh_dim` needs to be specified when "
                               "device_mesh.ndim > 1.",
                               "If you want to get the list of all the ProcessGroups in the "
                               "DeviceMesh,please use `get_all_groups()` instead.")
        if not self._groups:
            raise RuntimeError("DeviceMesh process groups not initialized!")
        dim = 0 if mesh_dim is None else (
            self._get_mesh_dim_by_name(mesh_dim) if isinstance(mesh_dim, str) else mesh_dim)
        group = self._groups[dim]
        if group is None:
            raise RuntimeError(f"Rank {P.get_rank()} is not part of this DeviceMesh, so it has "
                               f"no group for dimension {dim}")
        return group

    def get_all_groups(self) -> list[ProcessGroup]:
        return [self.get_group(i) for i in range(self.ndim)]

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        """This rank's index inside its group of ``mesh_dim``."""
        if self.ndim > 1 and mesh_dim is None:
            raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions",
                               "Optional kwarg `mesh_dim` needs to be specified when "
                               "device_mesh.ndim > 1.")
        return P.get_rank(self.get_group(0 if mesh_dim is None else mesh_dim))

    # -- slicing ------------------------------------------------------------------------------
    def __getitem__(self, mesh_dim_names: str | tuple[str, ...]) -> DeviceMesh:
        """The sub-mesh of the named dimensions (in this mesh's order) through this rank."""
        if not self._mesh_dim_names:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if names == self._mesh_dim_names:
            return self
        if not all(n in self._mesh_dim_names for n in names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names "
                           f"are {list(self._mesh_dim_names)}.")
        picked = [self._mesh_dim_names.index(n) for n in names]
        if picked != sorted(picked):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Mesh dim indices should "
                           f"be in ascending order.")
        sub = DeviceMesh(self._device_type, self._root_full, mesh_dim_names=names,
                         _init_backend=False)
        sub._root_dims = tuple(self._root_dims[i] for i in picked)
        sub._groups = [self._groups[i] for i in picked] if self._groups else []
        return sub

    # -- identity, printing, ``with`` -----------------------------------------------------------
    def _key(self) -> tuple:
        return (self._device_type, self._root_full.shape, tuple(self._root_full.ravel()),
                self._root_dims, self._mesh_dim_names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        strides = [int(np.prod(self._root_full.shape[d + 1:], dtype=np.int64))
                   for d in self._root_dims]
        shown = tuple(() if size == 1 else s for size, s in zip(self.shape, strides,
                                                                  strict=True))
        if self._mesh_dim_names:
            dims = "(" + ", ".join(f"{n}={s}" for n, s in zip(self._mesh_dim_names, self.shape,
                                                              strict=True)) + ")"
        else:
            dims = repr(self.shape)
        return f"DeviceMesh({dims}, '{self._device_type}', stride={shown!r})"

    def __enter__(self) -> DeviceMesh:
        _mesh_stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _mesh_stack.pop()


def init_device_mesh(device_type: str, mesh_shape: tuple[int, ...], *,
                     mesh_dim_names: tuple[str, ...] | None = None,
                     backend_override: Any = None) -> DeviceMesh:
    """A mesh of shape ``mesh_shape`` over ranks 0..N-1 in row-major order (initialising the
    default group first when needed), with a group per dimension."""
    if mesh_dim_names is not None:
        if len(set(mesh_dim_names)) != len(mesh_dim_names):
            raise RuntimeError(f"Each mesh_dim_name must be unique. Found repeated "
                               f"mesh_dim_name in mesh_dim_names {mesh_dim_names}")
        if len(mesh_shape) != len(mesh_dim_names):
            raise RuntimeError(f"mesh_shape and mesh_dim_names should have same length! Found "
                               f"len(mesh_dim_names): {len(mesh_dim_names)} and "
                               f"len(mesh_shape):{len(mesh_shape)}.")
    if device_type and not device_type.isalpha():
        raise RuntimeError(f"Device type with index is not supported but got {device_type}. ",
                           "If you maintained a 'torch.device' object, it's recommended to "
                           "pass in 'device.type'.")
    ranks = np.arange(int(np.prod(mesh_shape, dtype=np.int64))).reshape(tuple(mesh_shape))
    return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names,
                      backend_override=backend_override)
