"""``rendezvous(url, rank, world_size)``: how the processes of a job meet, as PyTorch's
``torch.distributed.rendezvous``: a handler per URL scheme (env://, tcp://, file:// built in;
``register_rendezvous_handler`` adds others) is a generator that yields
``(store, rank, world_size)``. ``init_process_group(init_method=...)`` goes through it.
"""

from __future__ import annotations

import datetime
import numbers
import os
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse, urlunparse

from .store import FileStore, Store, TCPStore

_handlers: dict[str, Callable[..., Iterator[tuple[Store, int, int]]]] = {}
_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def register_rendezvous_handler(scheme: str, handler: Callable[..., Iterator[Any]]) -> None:
    """Serve ``scheme://`` URLs with ``handler(url, **kwargs)``, a generator yielding
    ``(store, rank, world_size)``."""
    if scheme in _handlers:
        raise RuntimeError(f"Rendezvous handler for {scheme}:// already registered")
    _handlers[scheme] = handler


def _query(query: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in filter(None, query.split("&")))


def rendezvous(url: str, rank: int = -1, world_size: int = -1,
               **kwargs: Any) -> Iterator[tuple[Store, int, int]]:
    """The handler's generator for ``url``; ``rank``/``world_size`` (when not -1) are added
    to the URL's query, which may not name them already."""
    if not isinstance(url, (str, bytes)):
        raise RuntimeError(f"`url` must be a string. {type(url)}: {url}")
    if not isinstance(rank, numbers.Integral):
        raise RuntimeError(f"`rank` must be an integer. {rank}")
    if not isinstance(world_size, numbers.Integral):
        raise RuntimeError(f"`world_size` must be an integer. {world_size}")
    return _rendezvous(url, int(rank), int(world_size), **kwargs)


def _rendezvous(url: str, rank: int, world_size: int | None,
                **kwargs: Any) -> Iterator[tuple[Store, int, int]]:
    parsed = urlparse(url)
    size = -1 if world_size is None else world_size
    if world_size is None and parsed.scheme == "env":
        rank = int(os.environ.get("RANK", rank))
        size = int(os.environ.get("WORLD_SIZE", size))
    if rank != -1 or size != -1 or world_size is None:
        query = _query(parsed.query)
        if "rank" in query or "world_size" in query:
            raise AssertionError(f"The url: {url} has node-specific arguments(rank, "
                                 f"world_size) already.")
        if rank != -1:
            query["rank"] = str(rank)
        if size != -1 or world_size is None:
            query["world_size"] = str(size)
        parsed = parsed._replace(query="&".join(f"{k}={v}" for k, v in query.items()))
        url = urlunparse(parsed)
    if parsed.scheme not in _handlers:
        raise RuntimeError(f"No rendezvous handler for {parsed.scheme}://")
    return _handlers[parsed.scheme](url, **kwargs)


def _error(scheme: str, msg: str) -> ValueError:
    return ValueError(f"Error initializing torch.distributed using {scheme}:// rendezvous: "
                      f"{msg}")


def _rank_and_size(scheme: str, query: dict[str, str]) -> tuple[int, int]:
    if "rank" not in query:
        raise _error(scheme, "rank parameter missing")
    if "world_size" not in query:
        raise _error(scheme, "world size parameter missing")
    return int(query["rank"]), int(query["world_size"])


def _tcp_store(host: str, port: int, rank: int, world_size: int,
               timeout: datetime.timedelta) -> TCPStore:
    """Rank 0 serves the store, unless torchrun's agent serves it already
    (TORCHELASTIC_USE_AGENT_STORE): then every rank is a client."""
    if not 0 <= port < 2 ** 16:
        raise ValueError(f"port must have value from 0 to 65535 but was {port}.")
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
    return TCPStore(host, port, world_size, is_master=rank == 0 and not agent,
                    timeout=timeout, multi_tenant=True)


def _file_handler(url: str, **kwargs: Any) -> Iterator[tuple[Store, int, int]]:
    parsed = urlparse(url)
    if not parsed.path:
        raise _error("file", "path missing")
    rank, size = _rank_and_size("file", _query(parsed.query))
    yield FileStore(parsed.path, size), rank, size
    raise RuntimeError("Unable to perform rerendezvous using file:// method")


def _tcp_handler(url: str, timeout: datetime.timedelta = _DEFAULT_TIMEOUT,
                 **kwargs: Any) -> Iterator[tuple[Store, int, int]]:
    parsed = urlparse(url)
    if parsed.port is None:
        raise _error("tcp", "port number missing")
    rank, size = _rank_and_size("tcp", _query(parsed.query))
    yield _tcp_store(parsed.hostname or "127.0.0.1", parsed.port, rank, size, timeout), \
        rank, size
    raise RuntimeError("Unable to perform re-rendezvous using tcp:// method")


def _env_handler(url: str, timeout: datetime.timedelta = _DEFAULT_TIMEOUT,
                 **kwargs: Any) -> Iterator[tuple[Store, int, int]]:
    def env(var: str) -> str:
        value = os.environ.get(var)
        if not value:
            raise _error("env", f"environment variable {var} expected, but not set")
        return value
    query = _query(urlparse(url).query)
    rank = int(query["rank"]) if "rank" in query else int(env("RANK"))
    size = int(query["world_size"]) if "world_size" in query else int(env("WORLD_SIZE"))
    store = _tcp_store(env("MASTER_ADDR"), int(env("MASTER_PORT")), rank, size, timeout)
    yield store, rank, size
    raise RuntimeError("Unable to perform re-rendezvous using env:// method")


register_rendezvous_handler("tcp", _tcp_handler)
register_rendezvous_handler("env", _env_handler)
register_rendezvous_handler("file", _file_handler)
