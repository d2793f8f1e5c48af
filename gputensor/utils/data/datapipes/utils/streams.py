"""StreamWrapper: the file handle ``open_files`` yields, closed when dropped (a DataPipe that
discards an element, such as ``filter``, closes the streams inside it)."""

from __future__ import annotations

from typing import Any


class StreamWrapper:
    """Wraps an open file; attribute access goes to the file, and the file is closed when the
    wrapper is garbage-collected, unless closed before."""

    def __init__(self, file_obj: Any, name: str | None = None) -> None:
        self.file_obj = file_obj
        self.name = name
        self.closed = False

    @classmethod
    def close_streams(cls, v: Any, depth: int = 0) -> None:
        """Close every StreamWrapper inside ``v`` (dicts, lists and tuples, 10 levels)."""
        if depth > 10:
            return
        if isinstance(v, StreamWrapper):
            v.close()
        elif isinstance(v, dict):
            for item in v.values():
                cls.close_streams(item, depth + 1)
        elif isinstance(v, (list, tuple)):
            for item in v:
                cls.close_streams(item, depth + 1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["file_obj"], name)

    def close(self, *args: Any, **kwargs: Any) -> None:
        if not self.closed:
            self.file_obj.close(*args, **kwargs)
            self.closed = True

    def __del__(self) -> None:
        if not self.__dict__.get("closed", True):
            self.close()

    def __iter__(self) -> Any:
        yield from self.file_obj

    def __next__(self) -> Any:
        return next(self.file_obj)

    def __repr__(self) -> str:
        if self.name is None:
            return f"StreamWrapper<{self.file_obj!r}>"
        return f"StreamWrapper<{self.name},{self.file_obj!r}>"

    def __getstate__(self) -> Any:
        return self.file_obj

    def __setstate__(self, obj: Any) -> None:
        self.__dict__.update(file_obj=obj, name=None, closed=False)
