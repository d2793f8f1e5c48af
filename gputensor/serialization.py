"""gt.save / gt.load: PyTorch's checkpoint semantics over a zip archive.

A checkpoint is an uncompressed (ZIP_STORED) zip holding

- ``version`` and ``byteorder``: the format version and the byte order of the storage records;
- ``data.pkl``: the pickled object structure. A tensor pickles as a call to one of the rebuild
  functions below with (storage, dtype, offset, shape, stride, requires_grad); the storage is a
  *persistent id* ``("storage", key, location, nbytes, dtype name)`` so its bytes stay out of the
  pickle;
- ``data/<key>``: each storage's raw bytes, written once however many tensors view it, so views
  that shared a storage share one again after loading.

``load(weights_only=True)`` (the default) unpickles with an allowlist of globals and never runs
the BUILD opcode, so a checkpoint cannot execute code; other modules allow their classes with
``register_safe_global``.
"""

from __future__ import annotations

import collections
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
from gputensor._device import device as Device
from gputensor._device import to_device
from gputensor._size import Size
from gputensor._tensor import Tensor, contiguous_strides
from gputensor.storage.typed import TypedStorage
from gputensor.storage.untyped import UntypedStorage

FORMAT_VERSION = 1
DEFAULT_PROTOCOL = 4  # >= 3, so bytes objects pickle without any global (allowlist stays small)

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


# -- the allowlist ---------------------------------------------------------------------------------
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
    """Register several globals at once (PyTorch's ``torch.serialization.add_safe_globals``)."""
    for obj in objs:
        register_safe_global(obj)


def get_safe_globals() -> list[Any]:
    return list(_SAFE_GLOBALS.values())


# -- rebuild functions (the only callables a weights-only checkpoint names) ---------------------
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


def _allow_defaults() -> None:
    for obj in (collections.OrderedDict, collections.defaultdict, set, frozenset, complex, slice,
                range, bytearray, dict, list, tuple, int, float, bool, str, bytes,
                Device, Size, Tensor, _rebuild_tensor, _rebuild_tensor_subclass,
                _rebuild_typed_storage, _rebuild_sparse_coo):
        register_safe_global(obj)
    for dt in D.DTYPES:  # dtypes pickle by name as module-level singletons of gputensor._dtype
        _SAFE_GLOBALS["gputensor._dtype", dt.name] = dt


_allow_defaults()


# -- saving ----------------------------------------------------------------------------------------
class _Pickler(pickle.Pickler):
    """Pickles tensors by reference to their storages, collecting each storage once."""

    def __init__(self, file: IO[bytes], protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: dict[int, tuple[str, UntypedStorage]] = {}  # id -> (key, storage)
        self.dtype_hints: dict[int, D.dtype] = {}  # id -> the dtype its first viewer used

    def persistent_id(self, obj: Any) -> tuple | None:
        if not isinstance(obj, UntypedStorage):
            return None
        entry = self.storages.get(id(obj))
        if entry is None:  # holding the storage keeps its id unique for the whole save
            entry = self.storages[id(obj)] = (str(len(self.storages)), obj)
        hint = self.dtype_hints.get(id(obj))
        return ("storage", entry[0], str(obj.device), obj.nbytes(),
                None if hint is None else hint.name)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor) and obj._sparse:
            # A sparse tensor: its indices and values tensors (pickled as above) and its size.
            return (_rebuild_sparse_coo, (obj._indices(), obj._values(),
                                          tuple(map(int, obj._shape)), bool(obj.is_coalesced()),
                                          bool(obj.requires_grad)))
        if isinstance(obj, Tensor):
            self.dtype_hints.setdefault(id(obj._storage), obj._dtype)
            # Plain ints: a NumPy int in a shape would pickle as a global weights_only refuses.
            args = (obj._storage, obj._dtype, int(obj._offset), tuple(map(int, obj._shape)),
                    tuple(map(int, obj._stride)), bool(obj.requires_grad))
            state = {k: v for k, v in getattr(obj, "__dict__", {}).items()
                     if not k.startswith("_") and k not in _UNSAVED_ATTRS}
            if type(obj) is Tensor and not state:
                return (_rebuild_tensor, args)
            return (_rebuild_tensor_subclass, (type(obj), *args, state))
        if isinstance(obj, TypedStorage):
            self.dtype_hints.setdefault(id(obj._untyped), obj.dtype)
            return (_rebuild_typed_storage, (obj._untyped, obj.dtype))
        return NotImplemented


def _zipinfo(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_STORED
    return info


def _storage_bytes(storage: UntypedStorage) -> memoryview:
    """The storage's bytes on the host: a view on the CPU, a copy through the device driver."""
    return memoryview(np.ascontiguousarray(storage._host_bytes()))


def _write_archive(obj: Any, f: IO[bytes], protocol: int) -> None:
    data = io.BytesIO()
    pickler = _Pickler(data, protocol)
    pickler.dump(obj)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(_zipinfo("version"), f"{FORMAT_VERSION}\n")
        zf.writestr(_zipinfo("byteorder"), sys.byteorder)
        zf.writestr(_zipinfo("data.pkl"), data.getbuffer())
        for key, storage in pickler.storages.values():
            zf.writestr(_zipinfo(f"data/{key}"), _storage_bytes(storage))


def save(obj: Any, f: FileLike, pickle_protocol: int = DEFAULT_PROTOCOL) -> None:
    """Save ``obj`` (tensors, storages and any picklable containers of them) to ``f``.

    ``f`` is a path or a binary file object. A path is written through a temporary file in the
    same folder that replaces it at the end, so a failed save leaves the old file intact.
    """
    if not isinstance(pickle_protocol, int) or not 3 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"pickle_protocol must be an int in [3, {pickle.HIGHEST_PROTOCOL}], "
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


# -- loading ---------------------------------------------------------------------------------------
class _Archive:
    """Reads the records of one checkpoint, turning every format problem into a clear error."""

    def __init__(self, fp: IO[bytes], name: str) -> None:
        self.fp, self.name = fp, name
        try:
            self.zf = zipfile.ZipFile(fp)
        except Exception as e:  # zipfile runs no user code: any failure means a bad file
            raise self.error(f"not a readable zip archive ({e}); the file is truncated, "
                             f"corrupt or was not written by gputensor.save") from e
        version = self.read("version").decode("ascii", "replace").strip()
        if not version.isdigit():
            raise self.error(f"invalid format version record {version!r}")
        if int(version) > FORMAT_VERSION:
            raise self.error(f"format version {version} is newer than this gputensor reads "
                             f"({FORMAT_VERSION}); upgrade gputensor")
        self.byteorder = self.read("byteorder").decode("ascii", "replace").strip()
        if self.byteorder not in ("little", "big"):
            raise self.error(f"invalid byteorder record {self.byteorder!r}")

    def error(self, what: str) -> _ArchiveError:
        return _ArchiveError(f"gputensor.load({self.name}): {what}")

    def info(self, record: str) -> zipfile.ZipInfo:
        try:
            return self.zf.getinfo(record)
        except KeyError:
            raise self.error(f"the archive has no {record!r} record (truncated or not written "
                             f"by gputensor.save)") from None

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
        buf = np.empty(nbytes, np.uint8)
        if info.compress_type == zipfile.ZIP_STORED:
            self._read_stored(info, buf)
        else:  # re-zipped with compression by some tool: let zipfile inflate it
            buf[:] = np.frombuffer(self.read(record), np.uint8)
        if hint is not None and hint.itemsize > 1 and self.byteorder != sys.byteorder:
            unit = hint.itemsize // 2 if hint.is_complex else hint.itemsize
            buf.view(f"u{unit}").byteswap(inplace=True)
        return UntypedStorage._wrap(buf, to_device("cpu"))

    def _read_stored(self, info: zipfile.ZipInfo, buf: np.ndarray) -> None:
        """Read straight into ``buf`` (no intermediate bytes object) and check the CRC."""
        fp, record = self.fp, info.filename
        fp.seek(info.header_offset)
        header = fp.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise self.error(f"record {record!r} has a bad local header")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        fp.seek(info.header_offset + 30 + name_len + extra_len)
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

    def persistent_load(self, pid: Any) -> UntypedStorage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _CorruptCheckpoint(f"unknown persistent id {pid!r:.80}")
        _, key, location, nbytes, hint = pid
        if not (isinstance(key, str) and key.isdigit() and isinstance(location, str)
                and type(nbytes) is int and nbytes >= 0
                and (hint is None or hint in _DTYPES_BY_NAME)):
            raise _CorruptCheckpoint(f"invalid storage reference {pid!r:.120}")
        storage = self.loaded.get(key)
        if storage is None:
            host = self.archive.read_storage(key, nbytes, hint and _DTYPES_BY_NAME[hint])
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
    """weights_only=False: any global, still with storages read from their records."""


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
    raise WeightsOnlyUnpicklingError(
        f"weights_only load refused to set the state of a {type(target).__name__} object (the "
        f"BUILD opcode). Only load files you trust with weights_only=False.")


class _WeightsOnlyUnpickler(_LoaderMixin, pickle._Unpickler):
    """weights_only=True: globals only from the allowlist, and no BUILD beyond a state_dict's
    ``_metadata``."""

    dispatch = {**pickle._Unpickler.dispatch, _BUILD: _guarded_build}

    def find_class(self, module: str, name: str) -> Any:
        obj = _SAFE_GLOBALS.get((module, name))
        if obj is None:
            raise WeightsOnlyUnpicklingError(
                f"weights_only load refused the global {module}.{name}: it is not in the "
                f"allowlist. If you trust this file, load it with weights_only=False (which can "
                f"run arbitrary code), or allow the class with "
                f"gputensor.serialization.register_safe_global({name}).")
        return obj


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


def load(f: FileLike, map_location: MapLocation = None, *, weights_only: bool = True) -> Any:
    """Load an object saved by :func:`save`.

    ``map_location``: None (each storage back to the device it was saved from), a device or
    string (everything there), a dict mapping saved location strings (``{'cuda:0': 'cpu'}``),
    or ``callable(storage, location) -> storage or None`` receiving each storage on the CPU.
    ``weights_only=True`` refuses any global outside the allowlist, so it never runs code from
    the file; ``weights_only=False`` trusts the file completely.
    """
    _check_map_location(map_location)
    fp, name, owned = _open_for_read(f)
    try:
        archive = _Archive(fp, name)
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
           "WeightsOnlyUnpicklingError", "FORMAT_VERSION", "DEFAULT_PROTOCOL"]
