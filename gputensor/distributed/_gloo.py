"""The gloo backend's engine: collectives over TCP between the ranks, with no MPI.

Each process listens on a port of its own and publishes ``host:port`` in the rendezvous store;
every pair of ranks then holds one connection (the higher rank dials). A reader thread per
connection drains incoming messages into a mailbox keyed by (source, communicator, tag), so a
send never waits for its receiver to be ready and no message order between pairs can
deadlock. :class:`Comm` offers the part of mpi4py's communicator API that ``collectives.py``
calls (``Iallreduce``, ``Ibcast``, ``Isend``, ``allgather`` ...), so the collective front-ends
are shared with the MPI backend. Collectives run in issue order on one worker thread per
communicator (``async_op`` returns at once); all-reduce and reduce-scatter are rings.
"""

from __future__ import annotations

import hashlib
import pickle
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from gputensor import _dtype as D

from .errors import DistBackendError, DistNetworkError
from .reduce_op import ReduceOp
from .store import Store, recv_exact

IN_PLACE = object()   # mpi4py's MPI.IN_PLACE counterpart
ANY_SOURCE = -1
UNDEFINED = -32766    # Split's colour for "not a member" (MPI's value)
_HEADER = struct.Struct("!qqQ")  # communicator id, tag, payload length


class Status:
    """Who sent a received message (``Get_source`` is the rank in the communicator)."""

    def __init__(self) -> None:
        self.source = -1

    def Get_source(self) -> int:  # noqa: N802 - mpi4py's name
        return self.source


def reduction(op: Any, dt: D.dtype, fn: str) -> Callable[..., Any]:
    """The NumPy ufunc that combines two ranks' values for ``op`` on ``dt`` (bool: the
    logical ones). AVG is a sum here; the front-end divides."""
    from ._mpi import check_op
    code = check_op(op, dt, fn, "gloo")
    if dt is D.bool:
        return {ReduceOp.SUM: np.logical_or, ReduceOp.AVG: np.logical_or,
                ReduceOp.PRODUCT: np.logical_and, ReduceOp.MIN: np.logical_and,
                ReduceOp.MAX: np.logical_or, ReduceOp.BAND: np.logical_and,
                ReduceOp.BOR: np.logical_or, ReduceOp.BXOR: np.logical_xor}[code]
    return {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply,
            ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and,
            ReduceOp.BOR: np.bitwise_or, ReduceOp.BXOR: np.bitwise_xor}[code]


class Request:
    """An operation in flight (mpi4py's Request API: ``Wait``, ``Test``, ``Waitall``)."""

    def __init__(self, future: Future | None = None,
                 poll: Callable[[bool], bool] | None = None,
                 value: Callable[[], Any] | None = None) -> None:
        self._future, self._poll, self._value = future, poll, value

    def Wait(self) -> Any:  # noqa: N802
        if self._future is not None:
            return self._future.result()
        if self._poll is not None:
            self._poll(True)
        return self._value() if self._value is not None else None

    def Test(self) -> bool:  # noqa: N802
        if self._future is not None:
            if self._future.done():
                self._future.result()  # raise the operation's error here
                return True
            return False
        return self._poll is None or self._poll(False)

    @classmethod
    def Waitall(cls, requests: Sequence[Request]) -> None:  # noqa: N802
        for r in requests:
            r.Wait()

    @classmethod
    def Testall(cls, requests: Sequence[Request]) -> bool:  # noqa: N802
        return all([r.Test() for r in requests])


def _done() -> Request:
    return Request()


class Transport:
    """This process's connections to every other rank, and the mailbox they fill."""

    def __init__(self, store: Store, rank: int, size: int, timeout_s: float) -> None:
        self.rank, self.size, self.timeout_s = rank, size, timeout_s
        self.peers: dict[int, socket.socket] = {}
        self.send_locks = {r: threading.Lock() for r in range(size)}
        self.mail: dict[tuple[int, int, int], deque[bytes]] = {}
        self.dead: dict[int, str] = {}
        self.cond = threading.Condition()
        self.closed = False
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("", 0))
        listener.listen(size)
        self.listener = listener
        host = store.local_address() if hasattr(store, "local_address") else \
            _own_address(store)
        store.set(f"gloo/addr/{rank}", f"{host}:{listener.getsockname()[1]}")
        threading.Thread(target=self._accept, daemon=True, name="gloo-accept").start()
        for peer in range(rank):  # dial the lower ranks; the higher ones dial us
            host, port = store.get(f"gloo/addr/{peer}").decode().rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=timeout_s)
            sock.settimeout(None)
            sock.sendall(struct.pack("!q", rank))
            self._attach(peer, sock)
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.peers) == size - 1, timeout_s):
                missing = sorted(set(range(size)) - set(self.peers) - {rank})
                raise DistNetworkError(f"gloo: ranks {missing} did not connect to rank {rank} "
                                       f"within {timeout_s:g} s")

    def _accept(self) -> None:
        for _ in range(self.size - 1 - self.rank):  # every higher rank dials once
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            (peer,) = struct.unpack("!q", recv_exact(sock, 8))
            self._attach(peer, sock)
        self.listener.close()

    def _attach(self, peer: int, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.cond:
            self.peers[peer] = sock
            self.cond.notify_all()
        threading.Thread(target=self._read, args=(peer, sock), daemon=True,
                         name=f"gloo-read-{peer}").start()

    def _read(self, peer: int, sock: socket.socket) -> None:
        try:
            while True:
                ctx, tag, n = _HEADER.unpack(recv_exact(sock, _HEADER.size))
                payload = recv_exact(sock, n)
                with self.cond:
                    self.mail.setdefault((peer, ctx, tag), deque()).append(payload)
                    self.cond.notify_all()
        except (ConnectionError, OSError) as e:
            with self.cond:
                self.dead[peer] = "closed its connection" if isinstance(e, ConnectionError) \
                    else str(e)
                self.cond.notify_all()

    def send(self, peer: int, ctx: int, tag: int, payload: bytes | np.ndarray) -> None:
        if peer == self.rank:
            with self.cond:
                self.mail.setdefault((peer, ctx, tag), deque()).append(bytes(payload))
                self.cond.notify_all()
            return
        try:
            with self.send_locks[peer]:
                self.peers[peer].sendall(_HEADER.pack(ctx, tag, len(payload)))
                self.peers[peer].sendall(payload)
        except OSError as e:
            raise DistNetworkError(f"gloo: rank {self.rank} could not send to rank {peer}: "
                                   f"{e}") from e

    def take(self, sources: Sequence[int], ctx: int, tag: int, block: bool,
             timeout_s: float | None = None) -> tuple[int, bytes] | None:
        """The oldest message from one of ``sources`` on (ctx, tag): wait for it (up to
        ``timeout_s``, default the transport's) when ``block``, else None when there is none
        yet."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        def ready() -> tuple[int, bytes] | None:
            for src in sources:
                q = self.mail.get((src, ctx, tag))
                if q:
                    item = q.popleft()
                    if not q:
                        del self.mail[(src, ctx, tag)]
                    return src, item
            gone = [s for s in sources if s in self.dead]
            if gone and len(gone) == len(sources):
                raise DistNetworkError(f"gloo: rank {gone[0]} {self.dead[gone[0]]} before "
                                       f"sending what rank {self.rank} waits for (did it "
                                       f"fail?)")
            return None
        with self.cond:
            got: list[Any] = [None]

            def check() -> bool:
                got[0] = ready()
                return got[0] is not None
            if block:
                if not self.cond.wait_for(check, limit):
                    raise DistBackendError(f"gloo: rank {self.rank} timed out after "
                                           f"{limit:g} s waiting for ranks "
                                           f"{list(sources)}")
            else:
                check()
            return got[0]

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        for sock in self.peers.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def _own_address(store: Store) -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _child_id(parent: int, *salt: int) -> int:
    digest = hashlib.blake2b(repr((parent, *salt)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2  # non-negative, fits the header's int64


def _raw(arr: np.ndarray) -> np.ndarray:
    """``arr``'s bytes, as a flat uint8 array (any dtype, no copy when contiguous)."""
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def _copy_into(arr: np.ndarray, payload: bytes, what: str) -> None:
    got = np.frombuffer(payload, dtype=arr.dtype)
    if got.size != arr.size:
        raise RuntimeError(f"gloo {what}: expected {arr.size} elements of {arr.dtype}, "
                           f"received {got.size}")
    arr.reshape(-1)[:] = got


class Comm:
    """A communicator over world ranks ``ranks`` (this process is ``ranks[Get_rank()]``),
    mpi4py-shaped. Collective tags count down from -1, so they never meet user tags (>= 0)."""

    def __init__(self, transport: Transport, ranks: list[int], ctx: int,
                 owns_transport: bool = False) -> None:
        self.t, self.ranks, self.ctx = transport, list(ranks), ctx
        self.timeout_s: float | None = None  # this group's waits (None: the transport's)
        self.me = self.ranks.index(transport.rank)
        self._seq = 0
        self._children = 0
        self._owns = owns_transport
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="gloo-collective")

    def Get_rank(self) -> int:  # noqa: N802
        return self.me

    def Get_size(self) -> int:  # noqa: N802
        return len(self.ranks)

    # -- messages between group ranks --------------------------------------------------------
    def _send(self, dst: int, tag: int, data: bytes | np.ndarray) -> None:
        self.t.send(self.ranks[dst], self.ctx, tag, data)

    def _recv(self, src: int, tag: int) -> bytes:
        return self.t.take([self.ranks[src]], self.ctx, tag, True,  # type: ignore[index]
                           self.timeout_s)[1]

    def _start(self, body: Callable[[int], Any]) -> Request:
        """Queue collective ``body(tag)`` behind the ones issued before it."""
        self._seq += 1
        tag = -self._seq
        return Request(self._pool.submit(body, tag))

    # -- array collectives -------------------------------------------------------------------
    def _ring_reduce_scatter(self, chunks: list[np.ndarray], fn: Callable, tag: int) -> None:
        """Ring reduce-scatter in place: afterwards ``chunks[me]`` holds every rank's
        reduction of that chunk."""
        n, me = len(self.ranks), self.me
        for step in range(n - 1):
            out_c, in_c = (me - step - 1) % n, (me - step - 2) % n
            self._send((me + 1) % n, tag, _raw(chunks[out_c]))
            got = np.frombuffer(self._recv((me - 1) % n, tag), dtype=chunks[in_c].dtype)
            fn(chunks[in_c], got.reshape(chunks[in_c].shape), out=chunks[in_c])

    def Iallreduce(self, sendbuf: Any, recvbuf: np.ndarray, op: Callable) -> Request:  # noqa: N802
        if sendbuf is not IN_PLACE:
            recvbuf[...] = sendbuf
        n = len(self.ranks)

        def run(tag: int) -> None:
            chunks = np.array_split(recvbuf.reshape(-1), n)
            self._ring_reduce_scatter(chunks, op, tag)
            for step in range(n - 1):  # ring all-gather of the reduced chunks
                out_c, in_c = (self.me - step) % n, (self.me - step - 1) % n
                self._send((self.me + 1) % n, tag, _raw(chunks[out_c]))
                _copy_into(chunks[in_c], self._recv((self.me - 1) % n, tag), "all_reduce")
        return self._start(run)

    def Ireduce_scatter_block(self, sendbuf: np.ndarray, recvbuf: np.ndarray,  # noqa: N802
                              op: Callable) -> Request:
        n = len(self.ranks)

        def run(tag: int) -> None:
            work = sendbuf.reshape(-1).copy()
            chunks = [work[i * recvbuf.size:(i + 1) * recvbuf.size] for i in range(n)]
            self._ring_reduce_scatter(chunks, op, tag)
            recvbuf.reshape(-1)[:] = chunks[self.me]
        return self._start(run)

    def Ireduce(self, sendbuf: Any, recvbuf: np.ndarray | None, op: Callable,  # noqa: N802
                root: int) -> Request:
        def run(tag: int) -> None:
            if self.me != root:
                self._send(root, tag, _raw(sendbuf))
                return
            assert recvbuf is not None
            acc = recvbuf.reshape(-1)
            for r in range(len(self.ranks)):  # in rank order on the root, as a tree's leaves
                if r != root:
                    got = np.frombuffer(self._recv(r, tag), dtype=acc.dtype)
                    op(acc, got, out=acc)
        return self._start(run)

    def Ibcast(self, buf: np.ndarray, root: int) -> Request:  # noqa: N802
        def run(tag: int) -> None:
            if self.me == root:
                data = _raw(buf)
                for r in range(len(self.ranks)):
                    if r != root:
                        self._send(r, tag, data)
            else:
                _copy_into(buf, self._recv(root, tag), "broadcast")
        return self._start(run)

    def Iallgather(self, sendbuf: np.ndarray, recvbuf: np.ndarray) -> Request:  # noqa: N802
        def run(tag: int) -> None:
            n, k = len(self.ranks), sendbuf.size
            data = _raw(sendbuf)
            for r in range(n):
                if r != self.me:
                    self._send(r, tag, data)
            out = recvbuf.reshape(-1)
            out[self.me * k:(self.me + 1) * k] = sendbuf.reshape(-1)
            for r in range(n):
                if r != self.me:
                    _copy_into(out[r * k:(r + 1) * k], self._recv(r, tag), "all_gather")
        return self._start(run)

    def Igather(self, sendbuf: np.ndarray, recvbuf: np.ndarray | None,  # noqa: N802
                root: int) -> Request:
        def run(tag: int) -> None:
            if self.me != root:
                self._send(root, tag, _raw(sendbuf))
                return
            assert recvbuf is not None
            k, out = sendbuf.size, recvbuf.reshape(-1)
            for r in range(len(self.ranks)):
                part = out[r * k:(r + 1) * k]
                if r == root:
                    part[:] = sendbuf.reshape(-1)
                else:
                    _copy_into(part, self._recv(r, tag), "gather")
        return self._start(run)

    def Iscatter(self, sendbuf: np.ndarray | None, recvbuf: np.ndarray,  # noqa: N802
                 root: int) -> Request:
        def run(tag: int) -> None:
            if self.me != root:
                _copy_into(recvbuf, self._recv(root, tag), "scatter")
                return
            assert sendbuf is not None
            k, flat = recvbuf.size, sendbuf.reshape(-1)
            for r in range(len(self.ranks)):
                part = flat[r * k:(r + 1) * k]
                if r == root:
                    recvbuf.reshape(-1)[:] = part
                else:
                    self._send(r, tag, _raw(part))
        return self._start(run)

    def Ialltoallv(self, send: list, recv: list) -> Request:  # noqa: N802
        (sbuf, (scounts, sdispls)), (rbuf, (rcounts, rdispls)) = send, recv

        def run(tag: int) -> None:
            src, out = sbuf.reshape(-1), rbuf.reshape(-1)
            for r in range(len(self.ranks)):
                if r != self.me:
                    part = src[sdispls[r]:sdispls[r] + scounts[r]]
                    self._send(r, tag, _raw(part))
            for r in range(len(self.ranks)):
                part = out[rdispls[r]:rdispls[r] + rcounts[r]]
                if r == self.me:
                    part[:] = src[sdispls[r]:sdispls[r] + scounts[r]]
                else:
                    _copy_into(part, self._recv(r, tag), "all_to_all")
        return self._start(run)

    def Ibarrier(self) -> Request:  # noqa: N802
        def run(tag: int) -> None:  # everyone tells rank 0, rank 0 answers everyone
            if self.me == 0:
                for r in range(1, len(self.ranks)):
                    self._recv(r, tag)
                for r in range(1, len(self.ranks)):
                    self._send(r, tag, b"")
            else:
                self._send(0, tag, b"")
                self._recv(0, tag)
        return self._start(run)

    # -- point to point ----------------------------------------------------------------------
    def _sources(self, source: int) -> list[int]:
        return [self.ranks[s] for s in range(len(self.ranks))] if source == ANY_SOURCE \
            else [self.ranks[source]]

    def _recv_request(self, source: int, tag: int, deliver: Callable[[int, bytes], Any]
                      ) -> Request:
        result: list[Any] = []

        def poll(block: bool) -> bool:
            if not result:
                got = self.t.take(self._sources(source), self.ctx, tag, block, self.timeout_s)
                if got is None:
                    return False
                result.append(deliver(self.ranks.index(got[0]), got[1]))
            return True
        return Request(poll=poll, value=lambda: result[0])

    def Isend(self, buf: np.ndarray, dest: int, tag: int) -> Request:  # noqa: N802
        self._send(dest, tag, _raw(buf))
        return _done()  # the reader on the other side drains it: the send is complete

    def Irecv(self, buf: np.ndarray, source: int, tag: int) -> Request:  # noqa: N802
        return self._recv_request(source, tag, lambda src, data: _copy_into(buf, data, "recv"))

    def Recv(self, buf: np.ndarray, source: int, tag: int,  # noqa: N802
             status: Status | None = None) -> None:
        src, data = self.t.take(self._sources(source), self.ctx, tag, True,  # type: ignore[misc]
                                self.timeout_s)
        _copy_into(buf, data, "recv")
        if status is not None:
            status.source = self.ranks.index(src)

    # -- Python objects (pickled) ------------------------------------------------------------
    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        self._send(dest, tag, pickle.dumps(obj))

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = 0,
             status: Status | None = None) -> Any:
        src, data = self.t.take(self._sources(source), self.ctx, tag, True,  # type: ignore[misc]
                                self.timeout_s)
        if status is not None:
            status.source = self.ranks.index(src)
        return pickle.loads(data)

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = 0) -> Request:
        return self._recv_request(source, tag, lambda src, data: pickle.loads(data))

    def _objects(self, body: Callable[[int], Any]) -> Any:
        return self._start(body).Wait()

    def allgather(self, obj: Any) -> list[Any]:
        def run(tag: int) -> list[Any]:
            data = pickle.dumps(obj)
            for r in range(len(self.ranks)):
                if r != self.me:
                    self._send(r, tag, data)
            return [obj if r == self.me else pickle.loads(self._recv(r, tag))
                    for r in range(len(self.ranks))]
        return self._objects(run)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        def run(tag: int) -> Any:
            if self.me != root:
                return pickle.loads(self._recv(root, tag))
            data = pickle.dumps(obj)
            for r in range(len(self.ranks)):
                if r != root:
                    self._send(r, tag, data)
            return obj
        return self._objects(run)

    def gather(self, obj: Any, root: int = 0) -> list[Any] | None:
        def run(tag: int) -> list[Any] | None:
            if self.me != root:
                self._send(root, tag, pickle.dumps(obj))
                return None
            return [obj if r == root else pickle.loads(self._recv(r, tag))
                    for r in range(len(self.ranks))]
        return self._objects(run)

    def scatter(self, objs: Sequence[Any] | None, root: int = 0) -> Any:
        def run(tag: int) -> Any:
            if self.me != root:
                return pickle.loads(self._recv(root, tag))
            assert objs is not None
            if len(objs) != len(self.ranks):
                raise ValueError(f"scatter: expected {len(self.ranks)} objects, got "
                                 f"{len(objs)}")
            for r in range(len(self.ranks)):
                if r != root:
                    self._send(r, tag, pickle.dumps(objs[r]))
            return objs[root]
        return self._objects(run)

    # -- communicators -----------------------------------------------------------------------
    def Dup(self) -> Comm:  # noqa: N802
        self._children += 1
        return self._child(Comm(self.t, self.ranks, _child_id(self.ctx, self._children)))

    def _child(self, comm: Comm) -> Comm:
        comm.timeout_s = self.timeout_s
        return comm

    def Split(self, color: int, key: int = 0) -> Comm | None:  # noqa: N802
        """The ranks that pass the same ``color``, ordered by ``key`` (``UNDEFINED``: None)."""
        self._children += 1
        child = self._children
        picks = self.allgather((color, key))
        if color == UNDEFINED:
            return None
        members = sorted((k, r) for r, (c, k) in enumerate(picks) if c == color)
        return self._child(Comm(self.t, [self.ranks[r] for _, r in members],
                                _child_id(self.ctx, child, color)))

    def Exclude(self, excluded: Sequence[int]) -> Comm:  # noqa: N802
        """The communicator of the other ranks, made by them alone (the excluded ones may be
        gone: MPI's ``Create_group`` over ``Group.Excl``). It takes over the transport when
        this communicator owns it."""
        self._children += 1
        gone = set(excluded)
        child = self._child(Comm(self.t, [r for i, r in enumerate(self.ranks) if i not in gone],
                                 _child_id(self.ctx, self._children, "exclude",
                                           tuple(sorted(gone))), owns_transport=self._owns))
        self._owns = False
        return child

    def Free(self) -> None:  # noqa: N802
        self._pool.shutdown(wait=True)
        if self._owns:
            self.t.close()

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        import os
        os._exit(code)


def world(store: Store, rank: int, size: int, timeout_s: float) -> Comm:
    """Connect this process to every rank (through ``store``) and return the world's
    communicator."""
    return Comm(Transport(store, rank, size, timeout_s), list(range(size)), 0,
                owns_transport=True)
