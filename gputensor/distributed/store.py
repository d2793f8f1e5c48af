"""Key-value stores with torch.distributed's API: ``HashStore`` (in process), ``FileStore`` (a
file several processes share), ``TCPStore`` (a threaded socket server in the master process)
and ``PrefixStore``. Processes rendezvous through them (``init_process_group``'s env://,
tcp:// and file:// methods) and the gloo backend exchanges its peers' addresses in them.

Every store keeps the same table (:class:`_Table`); an operation that must wait (``get`` of a
missing key, ``wait``, a blocking ``queue_pop``) waits up to the store's timeout and raises
``DistStoreError`` as PyTorch's stores do. TCPStore speaks its own length-prefixed protocol
(behaviour-compatible with PyTorch's TCPStore, not wire-compatible).
"""

from __future__ import annotations

import datetime
import fcntl
import math
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Sequence

from .errors import DistNetworkError, DistStoreError, QueueEmptyError

_DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)
_WORKERS_KEY = "init/"  # TCPStore's count of joined clients (a key, as PyTorch's)
_FILE_USERS_KEY = "cleanup/"  # FileStore's count of open handles


def _bytes(v: str | bytes | bytearray | Sequence[int]) -> bytes:
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


class _Table:
    """The store's state and its operations. ``apply`` returns None when the operation must
    wait for another process (the caller waits and retries)."""

    def __init__(self) -> None:
        self.kv: dict[str, bytes] = {}
        self.queues: dict[str, deque[bytes]] = {}

    def apply(self, op: str, args: list[bytes]) -> list[bytes] | None:
        kv = self.kv
        keys = [a.decode() for a in args]
        if op == "set":
            kv[keys[0]] = args[1]
            return []
        if op == "get":
            return [kv[keys[0]]] if keys[0] in kv else None
        if op == "add":
            value = int(kv.get(keys[0], b"0")) + int(args[1])
            kv[keys[0]] = str(value).encode()
            return [kv[keys[0]]]
        if op == "compare_set":
            key, expected, desired = keys[0], args[1], args[2]
            current = kv.get(key)
            if current is None:
                if expected:
                    return [expected]
                kv[key] = desired
                return [desired]
            if current == expected:
                kv[key] = desired
                return [desired]
            return [current]
        if op in ("wait", "multi_get"):
            if not all(k in kv for k in keys):
                return None
            return [kv[k] for k in keys] if op == "multi_get" else []
        if op == "check":
            return [b"1" if all(k in kv or k in self.queues for k in keys) else b"0"]
        if op == "delete_key":
            return [b"1" if kv.pop(keys[0], None) is not None else b"0"]
        if op == "num_keys":
            return [str(len(kv) + len(self.queues)).encode()]
        if op == "list_keys":
            return [k.encode() for k in [*kv, *self.queues]]
        if op == "multi_set":
            for k, v in zip(args[0::2], args[1::2], strict=True):
                kv[k.decode()] = v
            return []
        if op == "append":
            kv[keys[0]] = kv.get(keys[0], b"") + args[1]
            return []
        if op == "queue_push":
            self.queues.setdefault(keys[0], deque()).append(args[1])
            return []
        if op == "queue_len":
            return [str(len(self.queues.get(keys[0], ()))).encode()]
        if op == "queue_pop":
            q = self.queues.get(keys[0])
            if not q:
                if args[1] == b"0":
                    raise QueueEmptyError("queue is empty")
                return None
            item = q.popleft()
            if not q:
                del self.queues[keys[0]]
            return [item]
        raise ValueError(f"unknown store operation {op!r}")

    # FileStore keeps the table in its file.
    def encode(self) -> bytes:
        items: list[bytes] = [str(len(self.kv)).encode()]
        for k, v in self.kv.items():
            items += [k.encode(), v]
        return _frame(items)

    @staticmethod
    def decode(data: bytes) -> _Table:
        table = _Table()
        if data:
            items = _unframe(data)
            for i in range(int(items[0])):
                table.kv[items[1 + 2 * i].decode()] = items[2 + 2 * i]
        return table


def _timeout_error(keys: Sequence[bytes], timeout_s: float) -> DistStoreError:
    names = ", ".join(k.decode(errors="replace") for k in keys)
    return DistStoreError(f"wait timeout after {int(timeout_s * 1000)}ms, keys: {names}")


def _waiting_op(op: str, args: list[bytes]) -> list[bytes]:
    """The keys a waiting operation names (for the timeout message)."""
    return args[:1] if op in ("get", "queue_pop") else args


def _run_locked(table: _Table, cond: threading.Condition, op: str, args: list[bytes],
                timeout_s: float) -> list[bytes]:
    """Apply ``op`` to a table guarded by ``cond``, waiting (up to ``timeout_s``) while it
    must; changes wake the waiters."""
    with cond:
        result: list[list[bytes] | None] = [None]

        def ready() -> bool:
            result[0] = table.apply(op, args)
            return result[0] is not None
        if not cond.wait_for(ready, timeout_s):
            raise _timeout_error(_waiting_op(op, args), timeout_s)
        if op not in ("get", "wait", "multi_get", "check", "num_keys", "list_keys",
                      "queue_len"):
            cond.notify_all()
        return result[0]  # type: ignore[return-value]


class Store:
    """A key-value store processes share (PyTorch's ``torch.distributed.Store``). Subclasses
    implement ``_op(op, args, timeout_s)``."""

    def __init__(self, timeout: datetime.timedelta = _DEFAULT_TIMEOUT) -> None:
        self._timeout = timeout

    def _op(self, op: str, args: list[bytes], timeout_s: float) -> list[bytes]:
        raise NotImplementedError(f"{type(self).__name__} does not implement the store "
                                  f"operation {op!r}")

    def _call(self, op: str, *args: bytes, timeout: datetime.timedelta | None = None
              ) -> list[bytes]:
        limit = (timeout if timeout is not None else self._timeout).total_seconds()
        return self._op(op, list(args), limit)

    @property
    def timeout(self) -> datetime.timedelta:
        return self._timeout

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        self._timeout = timeout

    def set(self, key: str, value: str | bytes) -> None:
        self._call("set", _bytes(key), _bytes(value))

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting up to the timeout for another process to set it."""
        return self._call("get", _bytes(key))[0]

    def add(self, key: str, value: int) -> int:
        return int(self._call("add", _bytes(key), str(int(value)).encode())[0])

    def compare_set(self, key: str, expected_value: str | bytes,
                    desired_value: str | bytes) -> bytes:
        return self._call("compare_set", _bytes(key), _bytes(expected_value),
                          _bytes(desired_value))[0]

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        self._call("wait", *[_bytes(k) for k in keys], timeout=timeout)

    def check(self, keys: list[str]) -> bool:
        return self._call("check", *[_bytes(k) for k in keys])[0] == b"1"

    def delete_key(self, key: str) -> bool:
        return self._call("delete_key", _bytes(key))[0] == b"1"

    def num_keys(self) -> int:
        return int(self._call("num_keys")[0])

    def list_keys(self) -> list[str]:
        return [k.decode() for k in self._call("list_keys")]

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return self._call("multi_get", *[_bytes(k) for k in keys])

    def multi_set(self, keys: list[str], values: list[str | bytes]) -> None:
        if len(keys) != len(values):
            raise ValueError(f"multi_set: {len(keys)} keys but {len(values)} values")
        args = [b for k, v in zip(keys, values, strict=True) for b in (_bytes(k), _bytes(v))]
        self._call("multi_set", *args)

    def append(self, key: str, value: str | bytes) -> None:
        self._call("append", _bytes(key), _bytes(value))

    def queue_push(self, key: str, value: str | bytes) -> None:
        self._call("queue_push", _bytes(key), _bytes(value))

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        """The oldest item of queue ``key``; with ``block`` wait for one, else raise
        ``QueueEmptyError`` when the queue is empty."""
        return self._call("queue_pop", _bytes(key), b"1" if block else b"0")[0]

    def queue_len(self, key: str) -> int:
        return int(self._call("queue_len", _bytes(key))[0])

    def has_extended_api(self) -> bool:
        return True


class HashStore(Store):
    """A store in this process's memory (threads share it)."""

    def __init__(self) -> None:
        super().__init__()
        self._table, self._cond = _Table(), threading.Condition()

    def _op(self, op: str, args: list[bytes], timeout_s: float) -> list[bytes]:
        return _run_locked(self._table, self._cond, op, args, timeout_s)


class PrefixStore(Store):
    """``store`` with every key prefixed by ``prefix + "/"``."""

    def __init__(self, prefix: str, store: Store) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"PrefixStore: store must be a Store, got {type(store).__name__}")
        super().__init__(store.timeout)
        self._prefix, self.underlying_store = prefix, store

    def _call(self, op: str, *args: bytes, timeout: datetime.timedelta | None = None
              ) -> list[bytes]:
        # As PyTorch's: waits without an explicit timeout use the underlying store's (this
        # store's own set_timeout does not reach them).
        return super()._call(op, *args, timeout=timeout or self.underlying_store.timeout)

    def _op(self, op: str, args: list[bytes], timeout_s: float) -> list[bytes]:
        pre = f"{self._prefix}/".encode()
        if op == "multi_set":
            args = [pre + a if i % 2 == 0 else a for i, a in enumerate(args)]
        elif op in ("wait", "multi_get", "check"):
            args = [pre + a for a in args]
        elif op not in ("num_keys", "list_keys"):
            args = [pre + args[0], *args[1:]]
        out = self.underlying_store._op(op, args, timeout_s)
        if op == "list_keys":
            return [k[len(pre):] for k in out if k.startswith(pre)]
        return out


class FileStore(Store):
    """A store in ``file_name``, shared by the processes that open it (a file system they all
    see). Each operation reads and rewrites the file under an exclusive lock; waiting
    operations poll it. The last of ``world_size`` users to close it removes the file."""

    _POLL_S = 0.005

    def __init__(self, file_name: str, world_size: int = -1) -> None:
        super().__init__()
        self.path, self.world_size = str(file_name), int(world_size)
        self._closed = False
        users = self.add(_FILE_USERS_KEY, 1)
        if self.world_size > 0 and users > self.world_size:
            self.add(_FILE_USERS_KEY, -1)
            raise RuntimeError(f"FileStore {self.path}: more than world_size "
                               f"({self.world_size}) processes opened it")

    def _op(self, op: str, args: list[bytes], timeout_s: float) -> list[bytes]:
        if op.startswith("queue"):
            raise NotImplementedError("queue support is not implemented.")
        deadline = time.monotonic() + timeout_s
        while True:
            result = self._once(op, args)
            if result is not None:
                return result
            if time.monotonic() >= deadline:
                raise _timeout_error(_waiting_op(op, args), timeout_s)
            time.sleep(self._POLL_S)

    def _once(self, op: str, args: list[bytes]) -> list[bytes] | None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "r+b") as f:
                before = f.read()
                table = _Table.decode(before)
                result = table.apply(op, args)
                after = table.encode()
                if after != before:
                    f.seek(0)
                    f.write(after)
                    f.truncate()
            return result
        finally:
            os.close(fd)  # closing releases the lock

    def has_extended_api(self) -> bool:
        return False  # no queues, as PyTorch's FileStore

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.add(_FILE_USERS_KEY, -1) <= 0 and self.world_size > 0:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the file may be gone already
            pass


# -- TCPStore ---------------------------------------------------------------------------------
# A frame: item count (u32), then each item as its length (u64) and bytes. A request is
# [op, timeout_ms, *args]; a reply is [status, *results] (status ok / timeout / empty / error).
_OK, _TIMEOUT, _EMPTY, _ERROR = b"0", b"1", b"2", b"3"


def _frame(items: Sequence[bytes]) -> bytes:
    parts = [struct.pack("!I", len(items))]
    for item in items:
        parts += [struct.pack("!Q", len(item)), item]
    return b"".join(parts)


def _unframe(data: bytes) -> list[bytes]:
    (count,), pos, items = struct.unpack_from("!I", data), 4, []
    for _ in range(count):
        (n,) = struct.unpack_from("!Q", data, pos)
        items.append(data[pos + 8:pos + 8 + n])
        pos += 8 + n
    return items


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock`` (ConnectionError when the peer closes first)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise ConnectionError("connection closed by peer")
        got += k
    return bytes(buf)


def _read_frame(sock: socket.socket) -> list[bytes]:
    (count,) = struct.unpack("!I", recv_exact(sock, 4))
    items = []
    for _ in range(count):
        (n,) = struct.unpack("!Q", recv_exact(sock, 8))
        items.append(recv_exact(sock, n))
    return items


class _Server:
    """The master's server: a listening socket and one thread per client connection, all over
    one table."""

    def __init__(self, host: str, port: int, listen_fd: int | None) -> None:
        if listen_fd is not None:
            self.sock = socket.socket(fileno=listen_fd)
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.sock = socket.socket(family, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                self.sock.bind(("", port))
            except OSError as e:
                self.sock.close()
                raise DistNetworkError(f"The server socket has failed to listen on any local "
                                       f"network address. port: {port}, useIpv6: "
                                       f"{family == socket.AF_INET6}, code: {e.errno}, name: "
                                       f"{e.strerror}") from e
            self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.table, self.cond = _Table(), threading.Condition()
        self.users = 0
        threading.Thread(target=self._accept, daemon=True, name="TCPStore-accept").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="TCPStore-client").start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    op, ms, *args = _read_frame(conn)
                except (ConnectionError, OSError, struct.error):
                    return
                try:
                    reply = [_OK, *_run_locked(self.table, self.cond, op.decode(), args,
                                               int(ms) / 1000)]
                except QueueEmptyError as e:  # before its base class, DistStoreError
                    reply = [_EMPTY, str(e).encode()]
                except DistStoreError as e:
                    reply = [_TIMEOUT, str(e).encode()]
                except Exception as e:  # a bad request: answer it rather than drop the client
                    reply = [_ERROR, f"{type(e).__name__}: {e}".encode()]
                try:
                    conn.sendall(_frame(reply))
                except OSError:
                    return

    def close(self) -> None:
        self.sock.close()


_tenant_servers: dict[int, _Server] = {}  # multi_tenant: one server per port in this process
_tenant_lock = threading.Lock()


class TCPStore(Store):
    """A store served by the master process (``is_master=True``) over TCP; every process
    (the master too) is a client. With ``world_size`` and ``wait_for_workers`` the master's
    constructor waits until ``world_size`` clients have joined. ``port=0`` on the master picks
    a free port (read it back from ``.port``)."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout: datetime.timedelta = _DEFAULT_TIMEOUT,
                 wait_for_workers: bool = True, multi_tenant: bool = False,
                 master_listen_fd: int | None = None, use_libuv: bool = True) -> None:
        super().__init__(timeout)
        self.host, self.world_size = host_name, world_size
        # There is one server implementation (threads); use_libuv (PyTorch's choice between
        # its two servers) is recorded and reported as libuvBackend, as PyTorch does.
        self.libuvBackend = bool(use_libuv)
        self._server: _Server | None = None
        if is_master:
            with _tenant_lock:
                server = _tenant_servers.get(port) if multi_tenant and port else None
                if server is None:
                    server = _Server(host_name, port, master_listen_fd)
                    if multi_tenant:
                        _tenant_servers[server.port] = server
            self._server = server
            server.users += 1
            port = server.port
        self.port = int(port)
        self._lock = threading.Lock()
        self._sock = self._connect(timeout.total_seconds())
        if world_size is not None and world_size > 0:
            self.add(_WORKERS_KEY, 1)
            if is_master and wait_for_workers:
                self._wait_for_workers(world_size)

    def _connect(self, timeout_s: float) -> socket.socket:
        deadline = time.monotonic() + timeout_s
        delay = 0.01
        while True:
            try:
                sock = socket.create_connection((self.host, self.port),
                                                timeout=max(deadline - time.monotonic(), 0.1))
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as e:
                if time.monotonic() + delay >= deadline:
                    raise DistNetworkError(f"The client socket has timed out after "
                                           f"{int(timeout_s * 1000)}ms while trying to connect "
                                           f"to ({self.host}, {self.port}).") from e
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _wait_for_workers(self, world_size: int) -> None:
        deadline = time.monotonic() + self._timeout.total_seconds()
        while int(self._call("get", _WORKERS_KEY.encode())[0]) < world_size:
            if time.monotonic() >= deadline:
                raise DistStoreError(f"Timed out after "
                                     f"{math.ceil(self._timeout.total_seconds())} "
                                     f"seconds waiting for clients. "
                                     f"{int(self.get(_WORKERS_KEY))}/{world_size} clients "
                                     f"joined.")
            time.sleep(0.01)

    def local_address(self) -> str:
        """This process's address on the interface that reaches the master (where peers
        reach this process too)."""
        return self._sock.getsockname()[0]

    def _op(self, op: str, args: list[bytes], timeout_s: float) -> list[bytes]:
        request = _frame([op.encode(), str(int(timeout_s * 1000)).encode(), *args])
        with self._lock:  # one request in flight per client connection
            try:
                self._sock.sendall(request)
                status, *out = _read_frame(self._sock)
            except (ConnectionError, OSError) as e:
                raise DistNetworkError(f"TCPStore: lost the connection to the server at "
                                       f"{self.host}:{self.port} ({e})") from e
        if status == _OK:
            return out
        message = out[0].decode() if out else ""
        if status == _TIMEOUT:
            raise DistStoreError(message)
        if status == _EMPTY:
            raise QueueEmptyError(message)
        raise DistStoreError(f"TCPStore server error: {message}")

    def close(self) -> None:
        """Close this client (and the master's server, once its last user closes)."""
        self._sock.close()
        if self._server is not None:
            self._server.users -= 1
            if self._server.users == 0:
                self._server.close()
                with _tenant_lock:
                    if _tenant_servers.get(self._server.port) is self._server:
                        del _tenant_servers[self._server.port]
            self._server = None


__all__ = ["FileStore", "HashStore", "PrefixStore", "Store", "TCPStore"]
