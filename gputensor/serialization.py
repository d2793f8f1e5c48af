"""gt.save / gt.load: PyTorch's checkpoint format, so files cross between the two both ways.

A checkpoint is PyTorch's zip archive (``torch.save``'s layout since 1.6): every record under
one top-level folder (``archive/``), uncompressed, each storage's record 64-byte aligned:

- ``data.pkl``: the pickled object structure (protocol 2 by default, as PyTorch). A tensor
  pickles as a call to ``torch._utils._rebuild_tensor_v2`` (a Parameter wraps it in
  ``torch._utils._rebuild_parameter``, a sparse tensor is ``torch._utils._rebuild_sparse_tensor``)
  whose storage is a *persistent id* ``("storage", torch.<X>Storage, key, location, numel)``, so
  the bytes stay out of the pickle; dtypes, devices and shapes pickle as ``torch.float16``,
  ``torch.device``, ``torch.Size``. The names are PyTorch's (``gputensor/_torch_names.py``) and
  map to gputensor's own objects on load, so neither side imports the other.
- ``data/<key>``: each storage's raw bytes, written once however many tensors view it, so views
  that shared a storage share one again after loading (in either library).
- ``version`` ("3"), ``.format_version``, ``.storage_alignment`` and ``byteorder``.

``load`` also reads checkpoints of earlier gputensor versions (records at the archive's root,
``version`` 1). ``load(weights_only=True)`` (the default) unpickles with an allowlist of globals
and runs the BUILD opcode only on a state_dict's metadata and on classes the user allowed
(``add_safe_globals`` / ``safe_globals``), so a checkpoint cannot execute code.
"""

from __future__ import annotations

import _compat_pickle
import codecs
import collections
import contextlib
import io
import os
import pickle
import secrets
import stat
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterable
from typing import IO, Any

import numpy as np

from gputensor import _dtype as D
from gputensor import _layout as L
from gputensor import _memory_format as MF
from gputensor import _torch_names as TN
from gputensor._device import device as Device
from gputensor._device import to_device
from gputensor._size import Size
from gputensor._tensor import Tensor, contiguous_strides
from gputensor.storage.typed import TypedStorage
from gputensor.storage.untyped import UntypedStorage

FORMAT_VERSION = 3  # the ``version`` record PyTorch writes (gputensor before: 1, at the root)
DEFAULT_PROTOCOL = 2  # PyTorch's default
ARCHIVE_FOLDER = "archive"  # the top-level folder PyTorch names file objects' archives
STORAGE_ALIGNMENT = 64  # storage records start at multiples of this (mmap-able, aligned views)

FileLike = str | os.PathLike | IO[bytes]
MapLocation = None | str | Device | dict | Callable[[UntypedStorage, str], Any]

# Python attributes of a tensor that describe autograd state, never saved (PyTorch saves
# neither .grad nor the graph). Other private attributes are implementation detail too.
_UNSAVED_ATTRS = frozenset({"grad", "grad_fn"})
_DTYPES_BY_NAME = {d.name: d for d in D.DTYPES}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed, so saving the same object twice gives the same bytes


class WeightsOnlyUnpicklingError(pickle.UnpicklingError):
    """A ``weights_only=True`` load met a global (or opcode) outside the allowlist."""


class _CorruptCheckpoint(RuntimeError):
    """Raised inside the unpickler; ``load`` re-raises it naming the file."""


class _ArchiveError(RuntimeError):
    """A problem with the archive itself; the message already names the file."""


class _PlacementFailed(Exception):
    """Carries an error from map_location or a device move out of the unpickler, unwrapped."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


# -- the allowlist --------------------------------------------------------------------------------
_SAFE_GLOBALS: dict[tuple[str, str], Any] = {}


def register_safe_global(obj: Any) -> Any:
    """Let ``load(weights_only=True)`` accept ``obj`` (a class or function) as a pickle global.

    Tensor subclasses (nn.Parameter) must be registered to load as themselves. Returns ``obj``,
    so it works as a decorator.
    """
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        raise TypeError(f"register_safe_global needs a class or function with __module__ and "
                        f"__qualname__, got {obj!r}")
    _SAFE_GLOBALS[module, name] = obj
    return obj


def add_safe_globals(objs: Iterable[Any]) -> None:
    """Let ``load(weights_only=True)`` rebuild these classes and call these functions
    (PyTorch's ``torch.serialization.add_safe_globals``). An allowed class's instances may also
    get their pickled state set (the BUILD opcode), through ``__setstate__`` or their
    ``__dict__``, as PyTorch allows; Tensor classes never do."""
    for obj in objs:
        register_safe_global(obj)
        _USER_GLOBALS[obj.__module__, obj.__qualname__] = obj


def get_safe_globals() -> list[Any]:
    return list(_SAFE_GLOBALS.values())


def clear_safe_globals() -> None:
    """Forget every global a user allowed (gputensor's own stay allowed)."""
    for key in list(_USER_GLOBALS):
        _SAFE_GLOBALS.pop(key, None)
    _USER_GLOBALS.clear()
    _allow_defaults()


@contextlib.contextmanager
def safe_globals(objs: Iterable[Any]) -> Any:
    """Allow ``objs`` for ``weights_only`` loads inside the block only (PyTorch's
    ``torch.serialization.safe_globals``)."""
    objs = list(objs)
    before_safe, before_user = dict(_SAFE_GLOBALS), dict(_USER_GLOBALS)
    add_safe_globals(objs)
    try:
        yield
    finally:
        _SAFE_GLOBALS.clear()
        _SAFE_GLOBALS.update(before_safe)
        _USER_GLOBALS.clear()
        _USER_GLOBALS.update(before_user)


_USER_GLOBALS: dict[tuple[str, str], Any] = {}  # allowed by the user: BUILD may set their state


# -- rebuild functions (the only callables a weights-only checkpoint names) --------------------
def _check_view(storage: Any, dtype: Any, offset: Any, shape: Any, stride: Any) -> None:
    if not isinstance(storage, UntypedStorage):
        raise _CorruptCheckpoint(f"tensor record names a {type(storage).__name__}, not a storage")
    if not isinstance(dtype, D.dtype):
        raise _CorruptCheckpoint(f"tensor record has dtype {dtype!r}")
    ints_ok = (isinstance(shape, tuple) and isinstance(stride, tuple)
               and len(shape) == len(stride)
               and all(type(v) is int and v >= 0 for v in (offset, *shape, *stride)))
    if not ints_ok:
        raise _CorruptCheckpoint(f"tensor record has invalid shape {shape!r}, stride {stride!r} "
                                 f"or offset {offset!r}")
    if 0 in shape:
        return
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    if (last + 1) * dtype.itemsize > storage.nbytes():
        raise _CorruptCheckpoint(
            f"tensor of shape {list(shape)}, stride {list(stride)}, offset {offset} and dtype "
            f"{dtype} reaches byte {(last + 1) * dtype.itemsize}, but its storage has "
            f"{storage.nbytes()} bytes")


def _make_tensor(cls: type, storage: UntypedStorage, dtype: D.dtype, offset: int, shape: tuple,
                 stride: tuple, requires_grad: Any) -> Tensor:
    _check_view(storage, dtype, offset, shape, stride)
    if stride == contiguous_strides(shape):
        stride = contiguous_strides(shape)  # the cached tuple: ops' fast paths compare by identity
    t = cls._make(storage, dtype, shape, stride, offset)
    if requires_grad:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise _CorruptCheckpoint(f"a {dtype} tensor is recorded as requiring grad")
        t.requires_grad = True
    return t


def _rebuild_tensor(storage: UntypedStorage, dtype: D.dtype, offset: int, shape: tuple,
                    stride: tuple, requires_grad: bool) -> Tensor:
    return _make_tensor(Tensor, storage, dtype, offset, shape, stride, requires_grad)


def _rebuild_tensor_subclass(cls: Any, storage: UntypedStorage, dtype: D.dtype, offset: int,
                             shape: tuple, stride: tuple, requires_grad: bool,
                             state: dict) -> Tensor:
    """A Tensor subclass (or a tensor with Python attributes): built via ``cls._make``."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise _CorruptCheckpoint(f"tensor record names {cls!r}, which is not a Tensor class")
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and not k.startswith("_") and k not in _UNSAVED_ATTRS
            for k in state):
        raise _CorruptCheckpoint(f"tensor record has invalid attributes {state!r}")
    t = _make_tensor(cls, storage, dtype, offset, shape, stride, requires_grad)
    t.__dict__.update(state)
    return t


def _rebuild_sparse_coo(indices: Any, values: Any, size: Any, coalesced: Any,
                       requires_grad: Any) -> Tensor:
    """A sparse COO tensor, every index validated against its size (as a new one is)."""
    from gputensor.sparse import sparse_coo_tensor
    if not (isinstance(indices, Tensor) and isinstance(values, Tensor)
            and isinstance(size, tuple) and all(type(n) is int for n in size)
            and type(coalesced) is bool and type(requires_grad) is bool):
        raise _CorruptCheckpoint(f"sparse tensor record has invalid parts: indices "
                                 f"{type(indices).__name__}, values {type(values).__name__}, "
                                 f"size {size!r}")
    try:
        return sparse_coo_tensor(indices, values, size, is_coalesced=coalesced,
                                 requires_grad=requires_grad)
    except (RuntimeError, TypeError) as e:
        raise _CorruptCheckpoint(f"invalid sparse tensor record: {e}") from None


def _rebuild_typed_storage(storage: UntypedStorage, dtype: D.dtype) -> TypedStorage:
    if not isinstance(storage, UntypedStorage) or not isinstance(dtype, D.dtype):
        raise _CorruptCheckpoint(f"typed storage record has {type(storage).__name__} and "
                                 f"{dtype!r}")
    if storage.nbytes() % dtype.itemsize:
        raise _CorruptCheckpoint(f"storage of {storage.nbytes()} bytes is not a whole number "
                                 f"of {dtype} elements")
    return TypedStorage._wrap(storage, dtype)


# -- PyTorch's rebuild functions, as gputensor runs them -----------------------------------------
def _typed_parts(storage: Any) -> tuple[UntypedStorage, D.dtype]:
    if isinstance(storage, TypedStorage):
        return storage._untyped, storage.dtype
    raise _CorruptCheckpoint(f"tensor record names a {type(storage).__name__}, not a typed "
                             f"storage")


def _torch_rebuild_tensor_v3(storage: Any, storage_offset: Any, size: Any, stride: Any,
                             requires_grad: Any, backward_hooks: Any, dtype: Any,
                             metadata: Any = None) -> Tensor:
    """``torch._utils._rebuild_tensor_v3``: a view of an untyped storage as ``dtype`` (how
    PyTorch saves the dtypes without a typed storage class: uint16, float8, ...)."""
    if metadata:
        raise _CorruptCheckpoint(f"tensor record has metadata {metadata!r:.80}")
    if not isinstance(dtype, D.dtype):
        raise _CorruptCheckpoint(f"tensor record has dtype {dtype!r:.80}")
    untyped = storage if isinstance(storage, UntypedStorage) else _typed_parts(storage)[0]
    if not isinstance(size, tuple) or not isinstance(stride, tuple):
        raise _CorruptCheckpoint(f"tensor record has size {size!r:.80} and stride {stride!r:.80}")
    return _make_tensor(Tensor, untyped, dtype, storage_offset, tuple(size), tuple(stride),
                        requires_grad)


def _torch_rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any) -> Tensor:
    return _torch_rebuild_tensor_v2(storage, storage_offset, size, stride, False, None)


def _torch_rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any,
                             requires_grad: Any, backward_hooks: Any,
                             metadata: Any = None) -> Tensor:
    """``torch._utils._rebuild_tensor_v2``: a view of a typed storage (hooks are not saved by
    PyTorch either; ``metadata`` holds the conj/neg bits, which gputensor tensors never set)."""
    if metadata:
        raise _CorruptCheckpoint(f"tensor record has metadata {metadata!r:.80} (a lazily "
                                 f"conjugated or negated tensor): call .resolve_conj() / "
                                 f".resolve_neg() before torch.save")
    untyped, dtype = _typed_parts(storage)
    if not isinstance(size, tuple) or not isinstance(stride, tuple):
        raise _CorruptCheckpoint(f"tensor record has size {size!r:.80} and stride {stride!r:.80}")
    return _make_tensor(Tensor, untyped, dtype, storage_offset, tuple(size), tuple(stride),
                        requires_grad)


def _torch_rebuild_parameter(data: Any, requires_grad: Any, backward_hooks: Any) -> Any:
    from gputensor.nn.parameter import Parameter

    if not isinstance(data, Tensor) or type(requires_grad) is not bool:
        raise _CorruptCheckpoint(f"parameter record has {type(data).__name__} data")
    return Parameter(data, requires_grad)


def _set_state(obj: Any, state: Any) -> Any:
    """PyTorch's ``_set_obj_state``: a dict of attributes, or (dict, slots dict)."""
    parts = state if isinstance(state, tuple) else (state,)
    for part in parts:
        if part is None:
            continue
        if not isinstance(part, dict) or not all(
                isinstance(k, str) and not k.startswith("_") and k not in _UNSAVED_ATTRS
                for k in part):
            raise _CorruptCheckpoint(f"tensor record has invalid attributes {part!r:.120}")
        for k, v in part.items():
            setattr(obj, k, v)
    return obj


def _torch_rebuild_parameter_with_state(data: Any, requires_grad: Any, backward_hooks: Any,
                                        state: Any) -> Any:
    return _set_state(_torch_rebuild_parameter(data, requires_grad, backward_hooks), state)


def _torch_rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Tensor:
    """``torch._tensor._rebuild_from_type_v2``: a tensor subclass (or a tensor with Python
    attributes) rebuilt by ``func`` (one of the tensor rebuild functions) as ``new_type``."""
    if func is not _torch_rebuild_tensor_v2 or not isinstance(args, tuple) or len(args) < 5:
        raise _CorruptCheckpoint(f"subclass record rebuilds with {func!r:.80}")
    if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
        raise _CorruptCheckpoint(f"tensor record names {new_type!r:.80}, which is not a Tensor "
                                 f"class")
    storage, offset, size, stride, requires_grad = args[:5]
    untyped, dtype = _typed_parts(storage)
    t = _make_tensor(new_type, untyped, dtype, offset, tuple(size), tuple(stride), requires_grad)
    return _set_state(t, state)


def _torch_get_layout(name: Any) -> Any:
    layouts = {"torch.sparse_coo": L.sparse_coo, "torch.strided": L.strided,
               **{f"torch.{lay.name}": lay for lay in L.LAYOUTS}}
    if name not in layouts:
        raise _CorruptCheckpoint(f"unsupported layout {name!r:.60} (gputensor has strided and "
                                 f"sparse_coo tensors)")
    return layouts[name]


def _torch_rebuild_sparse_tensor(layout: Any, data: Any) -> Tensor:
    if layout in L.LAYOUTS[2:]:   # compressed: validated as a new one with check_invariants
        if not isinstance(data, tuple) or len(data) != 4:
            raise _CorruptCheckpoint(f"{layout.name} tensor record has {len(data)} parts")
        from gputensor.sparse._compressed_construct import sparse_compressed_tensor
        try:
            return sparse_compressed_tensor(*data[:3], tuple(data[3]), layout=layout,
                                            check_invariants=True)
        except (RuntimeError, TypeError) as e:
            raise _CorruptCheckpoint(f"invalid {layout.name} tensor record: {e}") from None
    if layout is not L.sparse_coo or not isinstance(data, tuple) or len(data) not in (3, 4):
        raise _CorruptCheckpoint(f"sparse tensor record has layout {layout!r:.40}")
    indices, values, size = data[:3]
    coalesced = data[3] if len(data) == 4 else False
    return _rebuild_sparse_coo(indices, values, tuple(size) if isinstance(size, tuple) else size,
                               bool(coalesced), False)


def _torch_globals() -> dict[tuple[str, str], Any]:
    """Every PyTorch global a checkpoint may name, mapped to gputensor's object for it."""
    out: dict[tuple[str, str], Any] = {
        ("torch._utils", "_rebuild_tensor_v2"): _torch_rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor_v3"): _torch_rebuild_tensor_v3,
        ("torch._utils", "_rebuild_tensor"): _torch_rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _torch_rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _torch_rebuild_parameter_with_state,
        ("torch._tensor", "_rebuild_from_type_v2"): _torch_rebuild_from_type_v2,
        ("torch._utils", "_rebuild_sparse_tensor"): _torch_rebuild_sparse_tensor,
        ("torch.serialization", "_get_layout"): _torch_get_layout,
        ("torch", "Size"): Size, ("torch", "device"): Device, ("torch", "Tensor"): Tensor,
        ("torch", "strided"): L.strided, ("torch", "sparse_coo"): L.sparse_coo,
        ("_codecs", "encode"): codecs.encode,  # protocol 2 pickles bytes through it
    }
    for dt, name in TN.TORCH_DTYPE_NAMES.items():
        out["torch", name] = dt
    for name in ("float", "double", "half", "cfloat", "cdouble", "long", "int", "short"):
        out["torch", name] = TN.torch_dtype(name)
    for name, cls in TN.STORAGE_CLASSES.items():
        out["torch", name] = cls
    out["torch.storage", TN.UNTYPED_STORAGE] = TN.STORAGE_CLASSES[TN.UNTYPED_STORAGE]
    for fmt in (MF.contiguous_format, MF.channels_last, MF.channels_last_3d,
                MF.preserve_format):
        out["torch", fmt._name] = fmt
    return out


def _allow_defaults() -> None:
    for obj in (collections.OrderedDict, collections.defaultdict, set, frozenset, complex, slice,
                range, bytearray, dict, list, tuple, int, float, bool, str, bytes,
                Device, Size, Tensor, _rebuild_tensor, _rebuild_tensor_subclass,
                _rebuild_typed_storage, _rebuild_sparse_coo):
        register_safe_global(obj)
    for dt in D.DTYPES:  # dtypes pickle by name as module-level singletons of gputensor._dtype
        _SAFE_GLOBALS["gputensor._dtype", dt.name] = dt
    _SAFE_GLOBALS.update(TORCH_GLOBALS)


TORCH_GLOBALS = _torch_globals()
_allow_defaults()


# -- saving ---------------------------------------------------------------------------------------
class _StorageRef:
    """A tensor's storage as the typed storage PyTorch pickles it as (its persistent id)."""

    __slots__ = ("untyped", "dtype")

    def __init__(self, untyped: UntypedStorage, dtype: D.dtype) -> None:
        self.untyped, self.dtype = untyped, dtype


class _LayoutByName:
    """A layout as PyTorch's sparse records name it: ``_get_layout("torch.sparse_coo")``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple:
        return (TN.GET_LAYOUT, (f"torch.{self.name}",))


_SPARSE_COO_LAYOUT = _LayoutByName("sparse_coo")


class _TensorData:
    """A Parameter's data: pickled as a plain tensor not requiring grad (PyTorch's layout)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor


def _public_state(t: Tensor) -> dict[str, Any]:
    return {k: v for k, v in getattr(t, "__dict__", {}).items()
            if not k.startswith("_") and k not in _UNSAVED_ATTRS}


class _Pickler(pickle._Pickler):
    """Pickles like ``torch.save``: PyTorch's globals by name (TorchName markers), tensors by
    reference to their storages, each storage collected once. The pure-Python pickler, since
    the names must be written without importing torch."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file: IO[bytes], protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: dict[int, tuple[str, UntypedStorage]] = {}  # id -> (key, storage)
        self.views: dict[int, D.dtype] = {}  # id(storage) -> the dtype it is pickled as

    def persistent_id(self, obj: Any) -> tuple | None:
        if isinstance(obj, _StorageRef):
            untyped, dtype = obj.untyped, obj.dtype
        elif isinstance(obj, TypedStorage):
            untyped, dtype = obj._untyped, obj.dtype
        elif isinstance(obj, UntypedStorage):
            untyped, dtype = obj, None
        else:
            return None
        view = dtype or D.uint8
        if self.views.setdefault(id(untyped), view) is not view:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                               "data as different types")
        entry = self.storages.get(id(untyped))
        if entry is None:  # holding the storage keeps its id unique for the whole save
            entry = self.storages[id(untyped)] = (str(len(self.storages)), untyped)
        numel = untyped.nbytes() // view.itemsize
        return ("storage", TN.storage_class_name(dtype), entry[0], str(untyped.device), numel)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            if obj._sparse and not obj.is_sparse:   # CSR/CSC/BSR/BSC: PyTorch's record
                return (TN.REBUILD_SPARSE, (_LayoutByName(obj.layout.name), (
                    obj._cidx, obj._pidx, obj._values_t, Size(tuple(map(int, obj._shape))))))
            if obj._sparse:
                return (TN.REBUILD_SPARSE, (_SPARSE_COO_LAYOUT, (
                    obj._indices(), obj._values(), Size(tuple(map(int, obj._shape))),
                    bool(obj.is_coalesced()))))
            args = self._tensor_args(obj, bool(obj.requires_grad))
            state = _public_state(obj)
            if type(obj._dtype) is D._LimitedDtype and type(obj) is Tensor and not state:
                # no typed storage class: an untyped storage and the dtype, as PyTorch writes
                return (TN.REBUILD_TENSOR_V3, (_StorageRef(obj._storage, None), *args[1:],
                                               obj._dtype))
            if type(obj) is Tensor and not state:
                return (TN.REBUILD_TENSOR_V2, args)
            if type(obj).__name__ == "Parameter" and type(obj).__module__ == \
                    "gputensor.nn.parameter" and not state:
                return (TN.REBUILD_PARAMETER, (_TensorData(obj), bool(obj.requires_grad),
                                               collections.OrderedDict()))
            return (TN.REBUILD_FROM_TYPE_V2, (TN.REBUILD_TENSOR_V2, type(obj), args, state))
        if isinstance(obj, _TensorData):
            return (TN.REBUILD_TENSOR_V2, self._tensor_args(obj.tensor, False))
        if isinstance(obj, Device):
            return (TN.DEVICE, (obj.type,) if obj.index is None else (obj.type, obj.index))
        if isinstance(obj, Size):
            return (TN.SIZE, (tuple(map(int, obj)),))
        return NotImplemented

    @staticmethod
    def _tensor_args(t: Tensor, requires_grad: bool) -> tuple:
        # Plain ints: a NumPy int in a shape would pickle as a global weights_only refuses.
        return (_StorageRef(t._storage, t._dtype), int(t._offset), tuple(map(int, t._shape)),
                tuple(map(int, t._stride)), requires_grad, collections.OrderedDict())

    def _save_torch_name(self, obj: TN.TorchName) -> None:
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    def _save_as_torch(self, obj: Any) -> None:
        """dtypes, layouts and memory formats: the torch module attribute of the same name."""
        name = obj.name if isinstance(obj, D.dtype | L.layout) else obj._name
        self.save(TN.TorchName("torch", TN.TORCH_DTYPE_NAMES.get(obj, name)
                               if isinstance(obj, D.dtype) else name))

    dispatch[TN.TorchName] = _save_torch_name
    dispatch[D.dtype] = _save_as_torch
    dispatch[D._LimitedDtype] = _save_as_torch
    dispatch[L.layout] = _save_as_torch
    dispatch[MF.memory_format] = _save_as_torch


def _zipinfo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_STORED
    return info


def _aligned_zipinfo(name: str, offset: int) -> zipfile.ZipInfo:
    """A record whose data starts at a multiple of STORAGE_ALIGNMENT: its local header (30
    bytes + name + extra field) is padded with an extra field (id 0x4246, as PyTorch's)."""
    info = _zipinfo(name)
    start = offset + 30 + len(name.encode("utf-8")) + 4
    pad = -start % STORAGE_ALIGNMENT
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
    return info


def _storage_bytes(storage: UntypedStorage) -> memoryview:
    """The storage's bytes on the host: a view on the CPU, a copy through the device driver."""
    return memoryview(np.ascontiguousarray(storage._host_bytes()))


def _write_archive(obj: Any, f: IO[bytes], protocol: int) -> None:
    data = io.BytesIO()
    pickler = _Pickler(data, protocol)
    pickler.dump(obj)
    top = ARCHIVE_FOLDER
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(_zipinfo(f"{top}/data.pkl"), data.getbuffer())
        zf.writestr(_zipinfo(f"{top}/.format_version"), "1")
        zf.writestr(_zipinfo(f"{top}/.storage_alignment"), str(STORAGE_ALIGNMENT))
        zf.writestr(_zipinfo(f"{top}/byteorder"), sys.byteorder)
        for key, storage in pickler.storages.values():
            name = f"{top}/data/{key}"
            zf.writestr(_aligned_zipinfo(name, zf.fp.tell()), _storage_bytes(storage))
        zf.writestr(_zipinfo(f"{top}/version"), f"{FORMAT_VERSION}\n")


def save(obj: Any, f: FileLike, pickle_protocol: int = DEFAULT_PROTOCOL) -> None:
    """Save ``obj`` (tensors, storages and any picklable containers of them) to ``f``.

    ``f`` is a path or a binary file object. A path is written through a temporary file in the
    same folder that replaces it at the end, so a failed save leaves the old file intact.
    """
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"pickle_protocol must be an int in [2, {pickle.HIGHEST_PROTOCOL}], "
                         f"got {pickle_protocol!r}")
    if not isinstance(f, str | bytes | os.PathLike):
        if isinstance(f, io.TextIOBase) or not hasattr(f, "write"):
            raise TypeError(f"save() needs a path or a binary file object opened for writing, "
                            f"got {f!r}")
        _write_archive(obj, f, pickle_protocol)
        return
    path = os.fsdecode(os.fspath(f))
    if os.path.islink(path):
        path = os.path.realpath(path)  # replace the link's target, as open(path, "wb") would
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise RuntimeError(f"cannot save to {path}: parent directory {parent} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot save to {path}: it is a directory")
    tmp = os.path.join(parent, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    try:
        with open(tmp, "xb") as out:  # "x": never clobber; plain open honours the umask
            _write_archive(obj, out, pickle_protocol)
            out.flush()
            os.fsync(out.fileno())
        if os.path.exists(path):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# -- loading --------------------------------------------------------------------------------------
class _Archive:
    """Reads the records of one checkpoint, turning every format problem into a clear error.
    PyTorch's layout keeps every record under one top-level folder (``prefix``); gputensor's
    files before it kept them at the root."""

    def __init__(self, fp: IO[bytes], name: str, mmap: np.ndarray | None = None) -> None:
        self.fp, self.name, self.mmap = fp, name, mmap
        try:
            self.zf = zipfile.ZipFile(fp)
        except Exception as e:  # zipfile runs no user code: any failure means a bad file
            raise self.error(f"not a readable zip archive ({e}); the file is truncated, "
                             f"corrupt or was not written by gputensor.save or torch.save") from e
        pickles = [n for n in self.zf.namelist()
                   if n == "data.pkl" or n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise self.error("the archive has no single data.pkl record (truncated, or not "
                             "written by gputensor.save or torch.save)")
        self.prefix = pickles[0][:-len("data.pkl")]
        version = self.read("version").decode("ascii", "replace").strip()
        if not version.isdigit():
            raise self.error(f"invalid format version record {version!r}")
        if int(version) > FORMAT_VERSION:
            raise self.error(f"format version {version} is newer than this gputensor reads "
                             f"({FORMAT_VERSION}); upgrade gputensor")
        if not self.prefix and int(version) != 1:
            raise self.error(f"records at the archive's root with format version {version}")
        # PyTorch's oldest zip files have no byteorder record: they are little-endian.
        self.byteorder = self.read("byteorder").decode("ascii", "replace").strip() \
            if self.has(f"{self.prefix}byteorder") else "little"
        if self.byteorder not in ("little", "big"):
            raise self.error(f"invalid byteorder record {self.byteorder!r}")

    def has(self, full_name: str) -> bool:
        try:
            self.zf.getinfo(full_name)
        except KeyError:
            return False
        return True

    def error(self, what: str) -> _ArchiveError:
        return _ArchiveError(f"gputensor.load({self.name}): {what}")

    def info(self, record: str) -> zipfile.ZipInfo:
        try:
            return self.zf.getinfo(self.prefix + record)
        except KeyError:
            raise self.error(f"the archive has no {record!r} record (truncated or not written "
                             f"by gputensor.save or torch.save)") from None

    def read(self, record: str) -> bytes:
        info = self.info(record)
        try:
            return self.zf.read(info)
        except Exception as e:
            raise self.error(f"record {record!r} is corrupt ({e})") from e

    def read_storage(self, key: str, nbytes: int, hint: D.dtype | None) -> UntypedStorage:
        """The record ``data/<key>`` as a new CPU storage of exactly ``nbytes`` bytes."""
        record = f"data/{key}"
        info = self.info(record)
        if info.file_size != nbytes:
            raise self.error(f"record {record!r} has {info.file_size} bytes, but the storage it "
                             f"holds has {nbytes}")
        if info.compress_type == zipfile.ZIP_STORED and self.mmap is not None:
            start = self._data_offset(info)
            if start % STORAGE_ALIGNMENT == 0 or nbytes == 0:  # else copy: aligned views only
                buf = self.mmap[start:start + nbytes]
                if self.byteorder != sys.byteorder:
                    buf = buf.copy()  # swapped, never in the file's mapping
                    _to_native_order(buf, hint)
                return UntypedStorage._wrap(buf, to_device("cpu"))
        buf = np.empty(nbytes, np.uint8)
        if info.compress_type == zipfile.ZIP_STORED:
            self._read_stored(info, buf)
        else:  # re-zipped with compression by some tool: let zipfile inflate it
            buf[:] = np.frombuffer(self.read(record), np.uint8)
        if self.byteorder != sys.byteorder:
            _to_native_order(buf, hint)
        return UntypedStorage._wrap(buf, to_device("cpu"))

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where a stored record's bytes start in the file (after its local header)."""
        fp, record = self.fp, info.filename
        fp.seek(info.header_offset)
        header = fp.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise self.error(f"record {record!r} has a bad local header")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_len + extra_len

    def _read_stored(self, info: zipfile.ZipInfo, buf: np.ndarray) -> None:
        """Read straight into ``buf`` (no intermediate bytes object) and check the CRC."""
        fp, record = self.fp, info.filename
        fp.seek(self._data_offset(info))
        view, done = memoryview(buf), 0
        while done < len(buf):
            n = fp.readinto(view[done:]) if hasattr(fp, "readinto") else None
            if n is None:  # a file object without readinto
                chunk = fp.read(len(buf) - done)
                n = len(chunk)
                view[done:done + n] = chunk
            if not n:
                raise self.error(f"record {record!r} is truncated ({done} of {len(buf)} bytes)")
            done += n
        if zlib.crc32(view) != info.CRC:
            raise self.error(f"record {record!r} is corrupt (CRC-32 mismatch)")


def _to_native_order(buf: np.ndarray, dtype: D.dtype | None) -> None:
    """Swap the bytes of a storage written in the other byte order, element by element (a
    complex number's two parts each)."""
    if dtype is not None and dtype.itemsize > 1:
        unit = dtype.itemsize // 2 if dtype.is_complex else dtype.itemsize
        buf.view(f"u{unit}").byteswap(inplace=True)


def _location_device(location: str) -> Device:
    try:
        return to_device(location)
    except (RuntimeError, TypeError, ValueError) as e:
        raise _CorruptCheckpoint(f"invalid storage location {location!r}") from e


def _move(storage: UntypedStorage, dev: Device) -> UntypedStorage:
    """Move through the copy table (as a uint8 typed storage), like every device move."""
    if storage.device == dev:
        return storage
    return TypedStorage._wrap(storage, D.uint8).to(dev)._untyped


def _restore(storage: UntypedStorage, location: str) -> UntypedStorage:
    """map_location=None: back to the device the storage was saved from."""
    dev = _location_device(location)
    if dev.type == "cuda":
        from gputensor import cuda
        if not cuda.is_available():
            raise _CorruptCheckpoint(
                f"a storage was saved on {location}, but CUDA is not available; pass "
                f"map_location='cpu' to gputensor.load to load it onto the CPU")
        if dev.index is not None and dev.index >= cuda.device_count():
            raise _CorruptCheckpoint(
                f"a storage was saved on {location}, but only {cuda.device_count()} CUDA "
                f"device(s) are available; pass map_location to choose another device")
    return _move(storage, dev)


def _check_map_location(map_location: Any) -> None:
    if map_location is None or callable(map_location) or isinstance(map_location, str | Device):
        return
    if isinstance(map_location, dict):
        for k, v in map_location.items():
            if not isinstance(k, str | Device) or not isinstance(v, str | Device):
                raise TypeError(f"map_location dict must map location strings to devices, got "
                                f"{k!r}: {v!r}")
        return
    raise TypeError(f"map_location must be None, a device or string, a dict or a callable, got "
                    f"{type(map_location).__name__}")


def _place(storage: UntypedStorage, location: str, map_location: MapLocation) -> UntypedStorage:
    """Apply map_location (PyTorch's contract) to a freshly read CPU storage."""
    if map_location is None:
        return _restore(storage, location)
    if isinstance(map_location, str | Device):
        return _move(storage, to_device(map_location))
    if isinstance(map_location, dict):
        mapping = {str(k): v for k, v in map_location.items()}
        target = mapping.get(location)
        return _restore(storage, location) if target is None else _move(storage,
                                                                         to_device(target))
    result = map_location(storage, location)
    if result is None:
        return _restore(storage, location)
    if isinstance(result, TypedStorage):
        result = result._untyped
    if not isinstance(result, UntypedStorage) or result.nbytes() != storage.nbytes():
        raise TypeError(f"map_location callable must return None or a storage of "
                        f"{storage.nbytes()} bytes, got {result!r:.80}")
    return result


class _LoaderMixin:
    """persistent_load shared by both unpicklers: each storage record is read once."""

    archive: _Archive
    map_location: MapLocation
    loaded: dict[str, UntypedStorage]

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _CorruptCheckpoint(f"unknown persistent id {pid!r:.80}")
        if isinstance(pid[1], TN.StorageClass):  # PyTorch's: (storage class, key, location, numel)
            _, cls, key, location, numel = pid
            if not (isinstance(key, str) and isinstance(location, str) and type(numel) is int
                    and numel >= 0):
                raise _CorruptCheckpoint(f"invalid storage reference {pid!r:.120}")
            dtype = cls.dtype
            storage = self._storage(key, location, numel * (dtype.itemsize if dtype else 1),
                                    dtype)
            return storage if dtype is None else TypedStorage._wrap(storage, dtype)
        # gputensor's own before PyTorch's layout: (key, location, nbytes, dtype name)
        _, key, location, nbytes, hint = pid
        if not (isinstance(key, str) and isinstance(location, str)
                and type(nbytes) is int and nbytes >= 0
                and (hint is None or hint in _DTYPES_BY_NAME)):
            raise _CorruptCheckpoint(f"invalid storage reference {pid!r:.120}")
        return self._storage(key, location, nbytes, hint and _DTYPES_BY_NAME[hint])

    def _storage(self, key: str, location: str, nbytes: int,
                 hint: D.dtype | None) -> UntypedStorage:
        if not key.isdigit():
            raise _CorruptCheckpoint(f"invalid storage key {key!r:.40}")
        storage = self.loaded.get(key)
        if storage is None:
            host = self.archive.read_storage(key, nbytes, hint)
            try:
                storage = _place(host, location, self.map_location)
            except _CorruptCheckpoint:
                raise
            except Exception as e:  # the user's map_location or a device move: not corruption
                raise _PlacementFailed(e) from e
            self.loaded[key] = storage
        elif storage.nbytes() != nbytes:
            raise _CorruptCheckpoint(f"storage {key} is referenced with {nbytes} bytes and "
                                     f"with {storage.nbytes()}")
        return storage


class _FullUnpickler(_LoaderMixin, pickle.Unpickler):
    """weights_only=False: any global, still with storages read from their records; PyTorch's
    names map to gputensor's objects (torch is never imported)."""

    def find_class(self, module: str, name: str) -> Any:
        obj = TORCH_GLOBALS.get((module, name))
        return obj if obj is not None else pickle.Unpickler.find_class(self, module, name)


# The pure-Python unpickler, so the BUILD opcode can be refused: it sets attributes on an
# object, and an allowed global (a dtype singleton, the Tensor class) must never be mutated.
_BUILD = pickle.BUILD[0]


def _guarded_build(self: pickle._Unpickler) -> None:
    target = self.stack[-2] if len(self.stack) > 1 else None
    state = self.stack[-1] if self.stack else None
    if type(target) is collections.OrderedDict and type(state) is dict and \
            all(type(k) is str for k in state):
        # state_dicts carry a `_metadata` attribute (PyTorch's layout): plain data on a plain
        # container, nothing that can run code.
        self.stack.pop()
        target.__dict__.update(state)
        return
    cls = type(target)
    if _USER_GLOBALS.get((cls.__module__, cls.__qualname__)) is cls and \
            not issubclass(cls, Tensor):
        # A class the user allowed (PyTorch's rule): its own __setstate__, else its __dict__.
        self.stack.pop()
        setstate = getattr(target, "__setstate__", None)
        if setstate is not None and getattr(cls, "__setstate__", None) is not \
                getattr(object, "__setstate__", None):
            setstate(state)
        else:
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            if state:
                target.__dict__.update(state)
            for k, v in (slots or {}).items():
                setattr(target, k, v)
        return
    raise WeightsOnlyUnpicklingError(
        f"weights_only load refused to set the state of a {type(target).__name__} object (the "
        f"BUILD opcode). Only load files you trust with weights_only=False.")


class _WeightsOnlyUnpickler(_LoaderMixin, pickle._Unpickler):
    """weights_only=True: globals only from the allowlist, and no BUILD beyond a state_dict's
    ``_metadata``."""

    dispatch = {**pickle._Unpickler.dispatch, _BUILD: _guarded_build}

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3:  # protocol 2 names Python 2 modules (__builtin__.set): map them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        obj = _SAFE_GLOBALS.get((module, name))
        if obj is None:
            raise WeightsOnlyUnpicklingError(
                f"weights_only load refused the global {module}.{name}: it is not in the "
                f"allowlist. If you trust this file, load it with weights_only=False (which can "
                f"run arbitrary code), or allow the class with "
                f"gputensor.serialization.register_safe_global({name}).")
        return obj


# -- PyTorch's format before 1.6 (not a zip) -------------------------------------------------------
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
LEGACY_PROTOCOL = 1001


class _LegacyLoaderMixin:
    """persistent_load of PyTorch's pre-zip format: a storage id is (storage class, key,
    location, numel, view metadata); its bytes follow the pickle, so each storage is created
    empty here (on its final device, as PyTorch does) and filled once the pickle is read."""

    map_location: MapLocation
    legacy: dict[str, tuple[UntypedStorage, UntypedStorage, D.dtype]]

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"
                and isinstance(pid[1], TN.StorageClass)):
            raise _CorruptCheckpoint(f"unknown persistent id {pid!r:.80} (a pickled Module "
                                     f"class? only tensors and plain data load without torch)")
        _, cls, key, location, numel, view = pid
        if not (isinstance(key, str) and isinstance(location, str) and type(numel) is int
                and numel >= 0):
            raise _CorruptCheckpoint(f"invalid storage reference {pid!r:.120}")
        if view is not None:
            raise _CorruptCheckpoint("storage views of PyTorch before 0.4 are not supported")
        dtype = cls.dtype or D.uint8
        entry = self.legacy.get(key)
        if entry is None:
            host = UntypedStorage._wrap(np.zeros(numel * dtype.itemsize, np.uint8),
                                        to_device("cpu"))
            try:
                placed = _place(host, location, self.map_location)
            except _CorruptCheckpoint:
                raise
            except Exception as e:
                raise _PlacementFailed(e) from e
            entry = self.legacy[key] = (host, placed, dtype)
        return entry[1] if cls.dtype is None else TypedStorage._wrap(entry[1], dtype)


class _LegacyFull(_LegacyLoaderMixin, pickle.Unpickler):
    find_class = _FullUnpickler.find_class


class _LegacyWeightsOnly(_LegacyLoaderMixin, _WeightsOnlyUnpickler):
    pass


def _load_legacy(fp: IO[bytes], name: str, map_location: MapLocation,
                 weights_only: bool) -> Any:
    """A checkpoint of ``torch.save(..., _use_new_zipfile_serialization=False)``: three small
    pickles (magic number, protocol, system info), the object's pickle, the list of storage
    keys, then each storage's element count (int64) and bytes."""
    def error(what: str) -> _ArchiveError:
        return _ArchiveError(f"gputensor.load({name}): {what}")

    header = _LegacyWeightsOnly(fp)  # plain ints and a dict: never any global
    header.legacy, header.map_location = {}, map_location
    try:
        magic, protocol, info = header.load(), header.load(), header.load()
    except Exception as e:
        raise error(f"not a readable checkpoint ({type(e).__name__}: {e})") from None
    if magic != LEGACY_MAGIC or protocol != LEGACY_PROTOCOL or not isinstance(info, dict):
        raise error(f"unsupported legacy checkpoint (protocol {protocol!r})")
    little = bool(info.get("little_endian", True))
    unpickler = (_LegacyWeightsOnly if weights_only else _LegacyFull)(fp)
    unpickler.legacy, unpickler.map_location = {}, map_location
    archive = _NamedFile(name)
    result = _unpickle(unpickler, archive, weights_only)
    try:
        keys = _LegacyWeightsOnly(fp).load()
    except Exception as e:
        raise error(f"the storage list is missing or corrupt ({e})") from None
    if not isinstance(keys, list) or set(keys) != set(unpickler.legacy):
        raise error("the storage list does not match the storages the pickle names")
    for key in keys:
        host, placed, dtype = unpickler.legacy[key]
        count = fp.read(8)
        if len(count) != 8:
            raise error(f"storage {key} is truncated")
        numel = int.from_bytes(count, "little" if little else "big", signed=True)
        if numel * dtype.itemsize != host.nbytes():
            raise error(f"storage {key} holds {numel} elements, but the pickle names "
                        f"{host.nbytes() // dtype.itemsize}")
        buf = host._buf
        if fp.readinto(buf) != buf.nbytes:
            raise error(f"storage {key} is truncated")
        if little != (sys.byteorder == "little"):
            _to_native_order(buf, dtype)
        if placed is not host:
            placed.copy_(host)
    return result


class _NamedFile:
    """What _unpickle needs of an archive when there is none: a name and an error maker."""

    def __init__(self, name: str) -> None:
        self.name = name

    def error(self, what: str) -> _ArchiveError:
        return _ArchiveError(f"gputensor.load({self.name}): {what}")


def _open_for_read(f: FileLike) -> tuple[IO[bytes], str, bool]:
    """(binary file, name for messages, whether we opened it and must close it)."""
    if isinstance(f, str | bytes | os.PathLike):
        path = os.fsdecode(os.fspath(f))
        return open(path, "rb"), path, True
    if isinstance(f, io.TextIOBase) or not hasattr(f, "read"):
        raise TypeError(f"load() needs a path or a binary file object opened for reading "
                        f"('rb'), got {f!r}")
    name = getattr(f, "name", None)
    name = str(name) if isinstance(name, str | bytes | os.PathLike) else f"<{type(f).__name__}>"
    seekable = getattr(f, "seekable", None)
    if not (seekable and seekable()):  # zip readers seek; buffer a stream in memory
        return io.BytesIO(f.read()), name, False
    return f, name, False


def load(f: FileLike, map_location: MapLocation = None, pickle_module: Any = None, *,
         weights_only: bool | None = None, mmap: bool | None = None) -> Any:
    """Load an object saved by :func:`save` or by ``torch.save``.

    ``map_location``: None (each storage back to the device it was saved from), a device or
    string (everything there), a dict mapping saved location strings (``{'cuda:0': 'cpu'}``),
    or ``callable(storage, location) -> storage or None`` receiving each storage on the CPU.
    ``weights_only`` (None means True, as in PyTorch 2.6+) refuses any global outside the
    allowlist, so it never runs code from the file; ``weights_only=False`` trusts the file
    completely. ``mmap=True`` (``f`` a path) maps the file instead of reading it: CPU storages
    view the mapping copy-on-write, so their pages are read on first use and writes never
    reach the file.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("load(): gputensor unpickles with its own unpickler; pass "
                         "pickle_module=None")
    weights_only = True if weights_only is None else bool(weights_only)
    _check_map_location(map_location)
    mapped = None
    if mmap:
        if not isinstance(f, str | bytes | os.PathLike):
            raise ValueError("load(mmap=True): f must be a file path in order to use the mmap "
                             "argument")
        path = os.fsdecode(os.fspath(f))
        mapped = np.memmap(path, np.uint8, mode="c") if os.path.getsize(path) else None
    fp, name, owned = _open_for_read(f)
    try:
        start = fp.tell()
        if not zipfile.is_zipfile(fp) and fp.seek(start) == start and fp.read(2) == b"\x80\x02":
            if mmap:
                raise RuntimeError("load(mmap=True) needs a zip checkpoint (PyTorch 1.6 or "
                                   "later); this file has PyTorch's older format")
            fp.seek(start)
            return _load_legacy(fp, name, map_location, weights_only)
        fp.seek(start)
        archive = _Archive(fp, name, mapped)
        data = archive.read("data.pkl")
        cls = _WeightsOnlyUnpickler if weights_only else _FullUnpickler
        unpickler = cls(io.BytesIO(data))
        unpickler.archive, unpickler.map_location, unpickler.loaded = archive, map_location, {}
        return _unpickle(unpickler, archive, weights_only)
    finally:
        if owned:
            fp.close()


def _unpickle(unpickler: Any, archive: _Archive, weights_only: bool) -> Any:
    try:
        return unpickler.load()
    except WeightsOnlyUnpicklingError as e:
        raise WeightsOnlyUnpicklingError(f"gputensor.load({archive.name}): {e}") from None
    except _CorruptCheckpoint as e:
        raise archive.error(str(e)) from e.__cause__
    except _ArchiveError:
        raise  # a storage record problem, already naming the file
    except _PlacementFailed as e:
        raise e.exc from None
    except (pickle.UnpicklingError, EOFError, UnicodeDecodeError, OverflowError) as e:
        # Errors of the pickle stream itself, whichever unpickler read it.
        raise archive.error(f"data.pkl is corrupt ({type(e).__name__}: {e})") from e
    except Exception as e:
        if not weights_only:
            raise  # an object's own unpickling code failed: its error is the clearest
        # Only our rebuild functions and plain constructors can run, so this is corruption.
        raise archive.error(f"data.pkl is corrupt ({type(e).__name__}: {e})") from e


__all__ = ["save", "load", "register_safe_global", "add_safe_globals", "get_safe_globals",
           "clear_safe_globals", "safe_globals", "WeightsOnlyUnpicklingError",
           "FORMAT_VERSION", "DEFAULT_PROTOCOL"]
