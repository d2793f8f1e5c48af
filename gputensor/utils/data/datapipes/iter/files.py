"""Files: ``list_files`` (FileLister), ``open_files`` (FileOpener) and ``read_from_stream``
(StreamReader)."""

from __future__ import annotations

import fnmatch
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ..utils.streams import StreamWrapper
from .utils import IterableWrapperIterDataPipe

__all__ = ["FileListerIterDataPipe", "FileOpenerIterDataPipe", "StreamReaderIterDataPipe"]


def match_masks(name: str, masks: str | list[str]) -> bool:
    """Whether ``name`` matches a glob of ``masks`` (no masks: everything matches)."""
    if not masks:
        return True
    if isinstance(masks, str):
        masks = [masks]
    return any(fnmatch.fnmatch(name, m) for m in masks)


def _pathnames(root: str, masks: str | list[str], recursive: bool, abspath: bool,
               non_deterministic: bool) -> Iterator[str]:
    if os.path.isfile(root):
        path = os.path.abspath(root) if abspath else root
        if match_masks(os.path.basename(path), masks):
            yield path
        return

    def onerror(err: OSError) -> None:
        warnings.warn(f"{err.filename} : {err.strerror}", stacklevel=2)
        raise err

    for path, dirs, files in os.walk(root, onerror=onerror):
        if abspath:
            path = os.path.abspath(path)
        if not non_deterministic:
            files.sort()
            dirs.sort()  # in place: os.walk descends in this order
        for f in files:
            if match_masks(f, masks):
                yield os.path.join(path, f)
        if not recursive:
            break


def _no_length(dp: Any, length: int) -> int:
    if length == -1:
        raise TypeError(f"{type(dp).__name__} instance doesn't have valid length")
    return length


@functional_datapipe("list_files")
class FileListerIterDataPipe(IterDataPipe[str]):
    """``FileLister(root=".", masks="", *, recursive=False, abspath=False,
    non_deterministic=False, length=-1)``: the paths of the files under each root (sorted
    unless ``non_deterministic``) whose names match ``masks``."""

    def __init__(self, root: str | Sequence[str] | IterDataPipe = ".",
                 masks: str | list[str] = "", *, recursive: bool = False,
                 abspath: bool = False, non_deterministic: bool = False,
                 length: int = -1) -> None:
        super().__init__()
        if isinstance(root, str):
            root = [root]
        if not isinstance(root, IterDataPipe):
            root = IterableWrapperIterDataPipe(root)
        self.datapipe = root
        self.masks = masks
        self.recursive = recursive
        self.abspath = abspath
        self.non_deterministic = non_deterministic
        self.length = length

    def __iter__(self) -> Iterator[str]:
        for path in self.datapipe:
            yield from _pathnames(path, self.masks, self.recursive, self.abspath,
                                  self.non_deterministic)

    def __len__(self) -> int:
        return _no_length(self, self.length)


@functional_datapipe("open_files")
class FileOpenerIterDataPipe(IterDataPipe[tuple]):
    """``FileOpener(datapipe, mode="r", encoding=None, length=-1)``: (path, stream) for each
    path (modes "r", "rt", "t", "rb", "b")."""

    def __init__(self, datapipe: Iterable[str], mode: str = "r", encoding: str | None = None,
                 length: int = -1) -> None:
        super().__init__()
        self.datapipe = datapipe
        self.mode = mode
        self.encoding = encoding
        if mode not in ("b", "t", "rb", "rt", "r"):
            raise ValueError(f"Invalid mode {mode}")
        if "b" in mode and encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        self.length = length

    def __iter__(self) -> Iterator[tuple]:
        mode = "r" + self.mode if self.mode in ("b", "t") else self.mode
        for pathname in self.datapipe:
            if not isinstance(pathname, str):
                raise TypeError(f"Expected string type for pathname, but got {type(pathname)}")
            yield pathname, StreamWrapper(open(pathname, mode, encoding=self.encoding))  # noqa: SIM115

    def __len__(self) -> int:
        return _no_length(self, self.length)


@functional_datapipe("read_from_stream")
class StreamReaderIterDataPipe(IterDataPipe[tuple]):
    """``StreamReader(datapipe, chunk=None)``: (path, data) reading each stream in chunks of
    ``chunk`` (None: all at once), closing it at its end."""

    def __init__(self, datapipe: IterDataPipe, chunk: int | None = None) -> None:
        self.datapipe = datapipe
        self.chunk = chunk

    def __iter__(self) -> Iterator[tuple]:
        for furl, stream in self.datapipe:
            while True:
                d = stream.read(self.chunk)
                if not d:
                    stream.close()
                    break
                yield furl, d
