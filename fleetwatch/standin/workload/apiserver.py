"""The stand-in API servers' serving path: TLS sockets driven by the event loop's selector.

The benchmark's fleet runs on the same cores as the exporter it measures, so what it
spends per handshake and per request is taken from the side being measured, and what it
keeps per connection from the machine's memory. So each connection is an
``ssl.SSLSocket`` in non-blocking mode on one epoll, read and written straight from its
callback: OpenSSL decrypts into the bytes Python sees, one ``recv`` and one ``send`` per
request, nothing kept from the stream but a partial request head, and a request seen
before on the connection is answered from a replay (``answers.Replay``). What it costs:
docs/STANDIN.md, "What the stand-in costs".

What a client sees is kube-apiserver's behaviour (Go's ``net/http`` and ``crypto/tls``
with the settings of ``k8s.io/apiserver``'s ``secure_serving.go``):

* a TLS handshake must finish within 32 s, and a request head within 32 s of its first
  byte (the first one: of the handshake's end) (``ReadHeaderTimeout``);
* an idle kept-alive connection is closed after 90 s (``IdleTimeout``), with a TLS
  ``close_notify`` as ``tls.Conn.Close`` sends;
* one session ticket after a full TLS 1.3 handshake (``certs.server_context``);
* an answer with ``Connection: close`` is followed by ``close_notify`` and a half-close,
  and the socket is closed when the client closes or 0.5 s later (Go's RST avoidance);
* a cluster that goes ``down`` drops its connections without ``close_notify``, as a
  process that died would.

Deadlines are checked by one sweep a second over the open connections, not a timer per
connection.

Long because a connection's whole life (handshake, framing, deadlines,
writing under back-pressure, closing) is one state machine, read in one place, with the
poller and the listeners that feed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import select
import socket
import ssl
from collections.abc import Callable
from typing import Final

from fleetwatch.standin.workload.answers import (
    DROP,
    HANG,
    MAX_HEAD_BYTES,
    TOO_LARGE,
    Head,
    PreparedAnswer,
    Replay,
    UnreadableRequest,
    parse_head,
    replay_of,
    respond,
    wire,
)
from fleetwatch.standin.workload.cluster import Mode, StandinCluster

log = logging.getLogger(__name__)

#: ``ReadHeaderTimeout`` of kube-apiserver; Go's TLS handshake deadline is the same.
HEADER_TIMEOUT: Final = 32.0
#: ``IdleTimeout`` of kube-apiserver: a kept-alive connection with no request is closed.
IDLE_TIMEOUT: Final = 90.0
#: Go's ``rstAvoidanceDelay``: how long a closing connection waits for the client's FIN.
LINGER: Final = 0.5
#: kube-apiserver's TCP keep-alive period (``defaultKeepAlivePeriod``, 3 minutes).
KEEPALIVE_PERIOD: Final = 180
_RECV = 65536
#: Answers a connection keeps for requests it sees again (the exporter sends three).
_REPLAYS_KEPT = 8
_ACCEPT_BATCH = 64

_HANDSHAKE, _OPEN, _HUNG, _CLOSING = range(4)
#: Most connections one readiness callback serves before the loop runs anything else.
_EVENTS_PER_TURN = 512


class _Poller:
    """Readiness of the fleet's sockets, one callback each, for the event loop.

    On Linux an epoll of its own, whose descriptor the event loop watches: registering
    a socket is one system call and a ready socket one dictionary look-up, where the
    loop's ``add_reader`` builds handles and keys for each of 10,000 listeners and each
    connection. Elsewhere (macOS: ``fleetwatch demo`` on a laptop) the loop's own
    ``add_reader`` and ``add_writer``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        if self._epoll is not None:
            loop.add_reader(self._epoll.fileno(), self._ready)

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        self._callbacks[fd] = callback
        if self._epoll is not None:
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._loop.add_reader(fd, callback)

    def want_write(self, fd: int, wanted: bool) -> None:
        """Wait for ``fd`` to be writable instead of readable (or back).

        Not both: a client that keeps sending while its answers wait would make a
        readable socket call back again and again for nothing.
        """
        if self._epoll is not None:
            self._epoll.modify(fd, select.EPOLLOUT if wanted else select.EPOLLIN)
        elif wanted:
            self._loop.remove_reader(fd)
            self._loop.add_writer(fd, self._callbacks[fd])
        else:
            self._loop.remove_writer(fd)
            self._loop.add_reader(fd, self._callbacks[fd])

    def unwatch(self, fd: int) -> None:
        """Forget ``fd`` (before it is closed)."""
        if self._callbacks.pop(fd, None) is None:
            return
        if self._epoll is not None:
            self._epoll.unregister(fd)
        else:
            self._loop.remove_reader(fd)
            self._loop.remove_writer(fd)

    def _ready(self) -> None:
        assert self._epoll is not None
        for fd, _ in self._epoll.poll(0, _EVENTS_PER_TURN):
            callback = self._callbacks.get(fd)
            if callback is not None:
                try:
                    callback()
                except Exception:  # one broken connection must not stop the others
                    log.exception("stand-in connection failed")

    def close(self) -> None:
        if self._epoll is not None:
            self._loop.remove_reader(self._epoll.fileno())
            self._epoll.close()
            self._epoll = None


class Listener:
    """One cluster's listening socket; what it accepts is served with ``context``."""

    __slots__ = ("_server", "cluster", "context", "sock")

    def __init__(
        self, server: ApiServer, sock: socket.socket, cluster: StandinCluster, ctx: ssl.SSLContext
    ) -> None:
        self._server = server
        self.sock = sock
        self.cluster = cluster
        self.context = ctx
        sock.setblocking(False)
        server.poller.watch(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                raw, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, mostly: retried on the next event
                log.warning("stand-in %s cannot accept: %s", self.cluster.name, exc)
                return
            self._server.serve(raw, self.cluster, self.context)

    def close(self) -> None:
        """Stop listening (connections already accepted are the server's business)."""
        if self.sock.fileno() >= 0:
            self._server.poller.unwatch(self.sock.fileno())
            self.sock.close()


class AcceptedConnection:
    """One accepted TLS connection: its handshake, its requests in order, its deadline."""

    __slots__ = (
        "_buffer",
        "_client_name",
        "_has_cert",
        "_out",
        "_replays",
        "_skip",
        "_writing",
        "cluster",
        "deadline",
        "fd",
        "server",
        "sock",
        "state",
    )

    def __init__(self, server: ApiServer, sock: ssl.SSLSocket, cluster: StandinCluster) -> None:
        self.server = server
        self.sock = sock
        self.fd = sock.fileno()
        self.cluster = cluster
        self.state = _HANDSHAKE
        self.deadline = server.loop.time() + HEADER_TIMEOUT
        self._buffer = b""
        self._out = b""  #: an answer OpenSSL could not write yet (retried as is)
        self._skip = 0  #: body bytes of the last request still to discard
        self._replays: dict[bytes, Replay] = {}  #: answers to request heads seen
        self._writing = False
        self._has_cert: bool | None = None
        self._client_name: str | None = None

    # -- events ----------------------------------------------------------------------

    def on_event(self) -> None:
        """The socket is readable (or writable, while an answer waits): move on."""
        if self.state == _HANDSHAKE:
            self._handshake()
            return
        if self._out and not self._flush():
            return
        self._read()

    def _handshake(self) -> None:
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want_write(False)
            return
        except ssl.SSLWantWriteError:
            self._want_write(True)
            return
        except (ssl.SSLError, OSError):  # a client of another CA, or one that left
            self.close(notify=False)
            return
        self._want_write(False)
        self.state = _OPEN
        self.deadline = self.server.loop.time() + HEADER_TIMEOUT
        self._read()  # the first request often came with the client's Finished

    def _read(self) -> None:
        while self.fd >= 0:
            try:
                data = self.sock.recv(_RECV)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLWantWriteError:
                self._want_write(True)
                break
            except (ssl.SSLError, OSError):
                self.close(notify=False)
                return
            if not data:  # close_notify or FIN: the client is done
                self.close(notify=False)
                return
            if self.state == _OPEN:
                self._buffer = self._buffer + data if self._buffer else data
            if not self.sock.pending():
                # OpenSSL reads a record at a time: more bytes, if any, are still in
                # the kernel, and the poller reports the socket again. This spares the
                # read that would only fail with SSLWantReadError.
                break
        if self._buffer and self.state == _OPEN:
            self._process()

    # -- requests --------------------------------------------------------------------

    def _process(self) -> None:
        """Answer every complete request in the buffer, one at a time and in order."""
        while self.state == _OPEN and not self._out:
            buf = self._buffer
            if self._skip:
                dropped = min(self._skip, len(buf))
                self._skip -= dropped
                buf = self._buffer = buf[dropped:]
            if buf[:2] == b"\r\n":  # blank lines before a request are ignored (RFC 9112)
                buf = self._buffer = buf.lstrip(b"\r\n")
            if not buf:
                return
            end = buf.find(b"\r\n\r\n")
            if end > MAX_HEAD_BYTES or (end < 0 and len(buf) > MAX_HEAD_BYTES):
                self._finish(TOO_LARGE.wire)
                return
            if end < 0:
                if self.deadline - self.server.loop.time() > HEADER_TIMEOUT:
                    # the first bytes of a request after an idle wait: its head's deadline
                    self.deadline = self.server.loop.time() + HEADER_TIMEOUT
                return
            self._buffer = buf[end + 4 :]
            raw = buf[:end]
            replay = self._replays.get(raw) if self._replays else None
            cluster = self.cluster
            if (
                replay is not None
                and replay.mode is cluster.mode
                and replay.plane is cluster.control_plane
                and replay.blocked is cluster.blocked_clients
                and replay.token is cluster.token
            ):
                cluster.requests += 1
                self._send(replay.wire())
                self.deadline = self.server.loop.time() + IDLE_TIMEOUT
                continue
            try:
                head = parse_head(raw)
            except UnreadableRequest as bad:
                self._finish(bad.wire)
                return
            self._answer(head, raw)

    def _answer(self, head: Head, raw: bytes) -> None:
        self._skip = head.body_length
        cluster = self.cluster
        name = self._name() if cluster.blocked_clients else None
        result = respond(cluster, head, self._certified(), name)
        if result is HANG:
            self.state = _HUNG
            self.deadline = math.inf
            self._buffer = b""
        elif result is DROP:
            self.close(notify=False)
        elif isinstance(result, PreparedAnswer):
            if head.keep_alive:
                self._send(wire(result, head, keep_alive=True))
                self.deadline = self.server.loop.time() + IDLE_TIMEOUT
                # A kept-alive client asks the same few things again and again.
                if not head.body_length and len(self._replays) < _REPLAYS_KEPT:
                    self._replays[raw] = replay_of(result, head, cluster)
            else:
                self._finish(wire(result, head, keep_alive=False))

    def _certified(self) -> bool:
        """Whether the client presented a certificate (OpenSSL verified it against the CA)."""
        if self._has_cert is None:
            self._has_cert = self.sock.getpeercert(binary_form=True) is not None
        return self._has_cert

    def _name(self) -> str | None:
        """Common name of the client certificate, if one was sent (for blocked clients)."""
        if self._client_name is None and self._certified():
            peer = self.sock.getpeercert() or {}
            for rdn in peer.get("subject", ()):
                for key, value in rdn:  # type: ignore[str-unpack]  # typeshed: a union of shapes
                    if key == "commonName":
                        self._client_name = str(value)
        return self._client_name

    # -- writing and closing ---------------------------------------------------------

    def _send(self, data: bytes) -> None:
        self._out = data
        self._flush()

    def _flush(self) -> bool:
        """Write the waiting answer; False while OpenSSL still waits for the socket."""
        try:
            self.sock.send(self._out)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
            self._want_write(True)  # retried with the same bytes, as OpenSSL requires
            return False
        except (ssl.SSLError, OSError):
            self.close(notify=False)
            return False
        self._out = b""
        self._want_write(False)
        if self.state == _CLOSING:
            self._half_close()
        return True

    def _finish(self, data: bytes) -> None:
        """Send a last answer, then ``close_notify``, FIN, and close after the client's."""
        self.state = _CLOSING
        self.deadline = self.server.loop.time() + HEADER_TIMEOUT
        self._buffer = b""
        self._send(data)

    def _half_close(self) -> None:
        self.deadline = self.server.loop.time() + LINGER
        with contextlib.suppress(ssl.SSLError, OSError, ValueError):
            self.sock.unwrap()  # sends close_notify; the client's is not waited for
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_WR)
        except OSError:
            self.close(notify=False)

    def _want_write(self, wanted: bool) -> None:
        if wanted != self._writing:
            self._writing = wanted
            self.server.poller.want_write(self.fd, wanted)

    def expire(self) -> None:
        """Its deadline passed: a stalled handshake or request head, or an idle connection."""
        self.close(notify=self.state == _OPEN)

    def close(self, *, notify: bool) -> None:
        """Close now; ``notify`` sends TLS ``close_notify`` first (a server that lives on)."""
        if self.fd < 0:
            return
        self.server.poller.unwatch(self.fd)
        self._writing = False
        if notify and self.state in (_OPEN, _HUNG):
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                self.sock.unwrap()
        self.sock.close()
        self.fd = -1
        self.server.forget(self)


class ApiServer:
    """Every connection of a fleet's clusters, and the sweep that enforces their deadlines."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.poller = _Poller(loop)
        self._by_cluster: dict[StandinCluster, set[AcceptedConnection]] = {}
        #: accepted sockets of ``frozen`` clusters, never read: their handshakes never start
        self._frozen: dict[StandinCluster, list[socket.socket]] = {}
        self._count = 0
        self._sweeper: asyncio.TimerHandle | None = None

    def listen(self, sock: socket.socket, cluster: StandinCluster, ctx: ssl.SSLContext) -> Listener:
        return Listener(self, sock, cluster, ctx)

    def serve(self, raw: socket.socket, cluster: StandinCluster, ctx: ssl.SSLContext) -> None:
        """Take over one accepted TCP connection: TLS, then requests."""
        if cluster.mode is Mode.FROZEN:
            self._frozen.setdefault(cluster, []).append(raw)
            return
        try:
            raw.setblocking(False)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # Go's default
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_PERIOD)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_PERIOD)
            tls = ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        except OSError:  # the client left already
            raw.close()
            return
        conn = AcceptedConnection(self, tls, cluster)
        self._by_cluster.setdefault(cluster, set()).add(conn)
        self._count += 1
        self.poller.watch(conn.fd, conn.on_event)
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(1.0, self._sweep)
        conn.on_event()  # the ClientHello is usually there already

    def forget(self, conn: AcceptedConnection) -> None:
        owned = self._by_cluster.get(conn.cluster)
        if owned is not None and conn in owned:
            owned.discard(conn)
            self._count -= 1
            if not owned:
                del self._by_cluster[conn.cluster]

    def close_connections(self, cluster: StandinCluster, *, notify: bool) -> None:
        """Close every connection of ``cluster`` (a restart, an outage, a new cut)."""
        for conn in list(self._by_cluster.get(cluster, ())):
            conn.close(notify=notify)
        self.close_frozen(cluster)

    def close_frozen(self, cluster: StandinCluster) -> None:
        """Close the sockets ``cluster`` accepted while frozen (no TLS was ever spoken)."""
        for raw in self._frozen.pop(cluster, ()):
            raw.close()

    def close_all(self) -> None:
        """Close every connection, and the poller (close the listeners first)."""
        for cluster in list(self._by_cluster) + list(self._frozen):
            self.close_connections(cluster, notify=True)
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self.poller.close()

    @property
    def connections(self) -> int:
        return self._count

    def _sweep(self) -> None:
        now = self.loop.time()
        expired = [
            conn for owned in self._by_cluster.values() for conn in owned if conn.deadline <= now
        ]
        for conn in expired:
            conn.expire()
        self._sweeper = self.loop.call_later(1.0, self._sweep) if self._count else None
