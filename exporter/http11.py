"""A lean HTTP/1.1 client for many API servers: kept-alive connections, TLS over memory BIOs.

Why not aiohttp for the probes: at fleet scale the client is the exporter. aiohttp spends
about 0.22 ms of CPU per kept-alive GET and about 8 KiB per idle connection on its request
and connection machinery, and asyncio's ``SSLProtocol`` adds a read buffer per connection;
this client runs TLS itself on an ``ssl.SSLObject`` over two ``ssl.MemoryBIO`` (the same
OpenSSL, without the layers) and parses the one answer it needs: 0.06 ms per GET, about
7 KiB less per connection (measured against 3,000 stand-in clusters, see
``.readme-parts/perf-exporter.md``). OpenSSL itself keeps about 24-34 KiB per idle TLS
connection; nothing in Python can lower that, hence ``max_idle`` below.

Semantics kept from the aiohttp version: one pool for the exporter's life, connections kept
alive per (endpoint, TLS context, server name); a request that fails on a *reused*
connection before any byte of the answer (the server closed it meanwhile) is retried once
on a fresh connection, never after a timeout or on a fresh connection. Errors are
:class:`HttpError` with a :class:`Failure` kind the probe maps to its reasons.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

#: Most bytes of a status line plus headers we accept.
MAX_HEADER_BYTES = 64 * 1024
USER_AGENT = "fleetwatch-exporter"


class Failure(StrEnum):
    """What went wrong with a request (the probe turns it into a reason)."""

    CONNECT = "connect"  #: refused, unreachable, reset, or closed before the answer
    TLS = "tls"  #: handshake failed or the TLS stream broke
    PROTOCOL = "protocol"  #: the answer is not HTTP/1.x as we read it
    URL = "url"  #: the endpoint is not a usable URL


class HttpError(Exception):
    """A request got no complete answer; ``detail`` is short and never a credential."""

    def __init__(self, failure: Failure, detail: str, *, answered: bool = False) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail
        #: some of the answer arrived: the server saw the request, so no retry
        self.answered = answered


@dataclass(frozen=True)
class Endpoint:
    """The parts of an API server URL a request needs, split once."""

    tls: bool
    host: str  #: for connect(), brackets removed
    port: int
    host_header: str  #: as in the URL (``[::1]:6443``, ``api.example.com``)
    prefix: str  #: path prefix (``/k8s/clusters/c-1`` behind a proxy), no trailing slash

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise HttpError(Failure.URL, "the endpoint is not a valid URL") from None
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise HttpError(Failure.URL, "the endpoint is not a valid URL")
        tls = parts.scheme == "https"
        host_header = parts.netloc.rpartition("@")[2]
        return cls(
            tls=tls,
            host=parts.hostname,
            port=port or (443 if tls else 80),
            host_header=host_header,
            prefix=parts.path.rstrip("/"),
        )


_PoolKey = tuple[Endpoint, ssl.SSLContext | None, str | None]


class _Connection(asyncio.Protocol):
    """One TCP connection, its TLS state, and the answer being read (one at a time)."""

    __slots__ = (
        "_body_start",
        "_buf",
        "_chunk_pos",
        "_chunks",
        "_eof",
        "_in",
        "_length",
        "_max_bytes",
        "_out",
        "_status",
        "_tls",
        "_waiter",
        "closed",
        "handshaking",
        "keep_alive",
        "last_used",
        "pooled",
        "transport",
    )

    def __init__(self, context: ssl.SSLContext | None, server_hostname: str | None) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = True
        self.pooled = False  #: one of the pool's kept connections (idle or in use)
        self.last_used = 0.0  #: loop time it went idle
        self._waiter: asyncio.Future[None] | None = None
        self._buf: bytearray | None = None
        self._eof = False
        self._max_bytes = 0
        self._status = 0
        self._body_start = -1
        self._length: int | None = None  #: Content-Length, or None
        self._chunks: bytearray | None = None  #: decoded chunked body, or None
        self._chunk_pos = 0
        if context is not None:
            self._in: ssl.MemoryBIO | None = ssl.MemoryBIO()
            self._out: ssl.MemoryBIO | None = ssl.MemoryBIO()
            self._tls: ssl.SSLObject | None = context.wrap_bio(
                self._in, self._out, server_hostname=server_hostname
            )
            self.handshaking = True
        else:
            self._in = self._out = None
            self._tls = None
            self.handshaking = False

    # -- asyncio callbacks -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self._tls is not None:
            self._waiter = asyncio.get_running_loop().create_future()
            self._handshake()

    def data_received(self, data: bytes) -> None:
        if self._tls is None:
            self._feed(data)
            return
        assert self._in is not None
        self._in.write(data)
        if self.handshaking:
            self._handshake()
        else:
            self._read_tls()

    def eof_received(self) -> bool:
        if self._tls is not None and self._in is not None:
            self._in.write_eof()
            if not self.handshaking:
                self._read_tls()
        self._at_eof()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.keep_alive = False
        if self._waiter is not None and not self._waiter.done():
            if self.handshaking:
                self._fail(HttpError(Failure.CONNECT, "connection closed during the TLS handshake"))
            else:
                self._at_eof()

    # -- TLS -------------------------------------------------------------------------

    def _flush(self) -> None:
        out = self._out
        if out is not None and out.pending and self.transport is not None:
            self.transport.write(out.read())

    def _handshake(self) -> None:
        assert self._tls is not None
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except ssl.SSLCertVerificationError as exc:
            self._fail(HttpError(Failure.TLS, f"certificate not accepted: {_short(exc)}"))
            return
        except (ssl.SSLError, OSError) as exc:
            self._fail(HttpError(Failure.TLS, f"TLS error: {_short(exc)}"))
            return
        self.handshaking = False
        self._flush()
        self._resolve()
        assert self._in is not None
        if self._in.pending:  # application data that came with the last handshake bytes
            self._read_tls()

    def _read_tls(self) -> None:
        tls = self._tls
        assert tls is not None
        try:
            while True:
                chunk = tls.read(65536)
                if not chunk:  # close_notify
                    self._at_eof()
                    break
                self._feed(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self._at_eof()
        except ssl.SSLEOFError:  # TCP closed without close_notify: an ordinary EOF here
            self._at_eof()
        except ssl.SSLError as exc:
            self.keep_alive = False
            self._fail(HttpError(Failure.TLS, f"TLS error: {_short(exc)}", answered=True))
        self._flush()  # TLS 1.3 may answer (key update)

    # -- HTTP ------------------------------------------------------------------------

    def send(self, request: bytes, max_bytes: int) -> asyncio.Future[None]:
        """Write one request; the returned future ends when its answer is complete."""
        assert self.transport is not None
        self._buf = bytearray()
        self._max_bytes = max_bytes
        self._status = 0
        self._body_start = -1
        self._length = None
        self._chunks = None
        self._chunk_pos = 0
        self._eof = False
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        if self._tls is not None:
            try:
                self._tls.write(request)
            except ssl.SSLError as exc:
                self._fail(HttpError(Failure.TLS, f"TLS error: {_short(exc)}"))
                return waiter
            self._flush()
        else:
            self.transport.write(request)
        return waiter

    def handshake_done(self) -> asyncio.Future[None] | None:
        """The handshake's future (maybe done already) before the first request, else None."""
        return self._waiter if self._tls is not None and self._buf is None else None

    def _feed(self, data: bytes) -> None:
        buf = self._buf
        if buf is None or self._waiter is None or self._waiter.done():
            self.keep_alive = False  # bytes nobody asked for: do not reuse this connection
            return
        buf += data
        if self._body_start < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    self._fail(
                        HttpError(Failure.PROTOCOL, "answer headers too long", answered=True)
                    )
                return
            if not self._head(end):
                return
        self._check_body()

    def _head(self, end: int) -> bool:
        """Parse the status line and headers ending at ``end``; False when not done."""
        buf = self._buf
        assert buf is not None
        lines = bytes(buf[:end]).split(b"\r\n")
        status_line = lines[0].split(None, 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            self._fail(HttpError(Failure.PROTOCOL, "not an HTTP/1.x answer", answered=True))
            return False
        try:
            status = int(status_line[1])
        except ValueError:
            self._fail(HttpError(Failure.PROTOCOL, "invalid HTTP status line", answered=True))
            return False
        if 100 <= status < 200 and status != 101:  # informational: the real answer follows
            del buf[: end + 4]
            return self._head_again()
        length: int | None = None
        chunked = False
        close = status_line[0] == b"HTTP/1.0"
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            key = name.strip().lower()
            if key == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    self._fail(HttpError(Failure.PROTOCOL, "invalid Content-Length", answered=True))
                    return False
            elif key == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif key == b"connection":
                token = value.strip().lower()
                close = token == b"close" or (close and token != b"keep-alive")
        self._status = status
        self._body_start = end + 4
        if close:
            self.keep_alive = False
        if status in (204, 304):
            length = 0
        if chunked:
            self._chunks = bytearray()
            self._chunk_pos = self._body_start
        elif length is not None:
            self._length = length
        else:
            self.keep_alive = False  # body runs to the end of the connection
        return True

    def _head_again(self) -> bool:
        buf = self._buf
        assert buf is not None
        end = buf.find(b"\r\n\r\n")
        return end >= 0 and self._head(end)

    def _check_body(self) -> None:
        buf = self._buf
        assert buf is not None
        if self._chunks is not None:
            self._decode_chunks()
            return
        have = len(buf) - self._body_start
        if self._length is not None:
            if have >= self._length:
                if have > self._length:
                    self.keep_alive = False
                self._resolve()
            elif have >= self._max_bytes:
                self.keep_alive = False
                self._resolve()
        elif have >= self._max_bytes:
            self.keep_alive = False
            self._resolve()

    def _decode_chunks(self) -> None:
        buf, chunks = self._buf, self._chunks
        assert buf is not None and chunks is not None
        pos = self._chunk_pos
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                break
            size_text = bytes(buf[pos:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                self._fail(HttpError(Failure.PROTOCOL, "invalid chunked encoding", answered=True))
                return
            if size == 0:  # last chunk, then optional trailers, then an empty line
                bare = bytes(buf[line_end + 2 : line_end + 4]) == b"\r\n"
                if not bare and buf.find(b"\r\n\r\n", line_end) < 0:
                    break
                self._resolve()
                return
            start = line_end + 2
            if len(buf) < start + size + 2:
                break
            chunks += buf[start : start + size]
            pos = start + size + 2
            if len(chunks) >= self._max_bytes:
                self.keep_alive = False
                self._resolve()
                return
        self._chunk_pos = pos

    def _at_eof(self) -> None:
        self._eof = True
        self.keep_alive = False
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self.handshaking:
            self._fail(HttpError(Failure.CONNECT, "connection closed during the TLS handshake"))
        elif self._body_start >= 0 and self._chunks is None and self._length is None:
            self._resolve()  # the body ran to the end of the connection: complete
        else:
            answered = bool(self._buf)
            detail = (
                "connection closed in the middle of the answer"
                if answered
                else "server closed the connection before answering"
            )
            self._fail(HttpError(Failure.CONNECT, detail, answered=answered))

    def _resolve(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: HttpError) -> None:
        self.keep_alive = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if self.transport is not None:
            self.transport.close()

    def result(self) -> tuple[int, bytes]:
        """``(status, body)`` of the answer just completed; frees the buffers."""
        buf = self._buf
        assert buf is not None
        if self._chunks is not None:
            body = bytes(self._chunks[: self._max_bytes])
        else:
            end = len(buf) if self._length is None else self._body_start + self._length
            body = bytes(buf[self._body_start : min(end, self._body_start + self._max_bytes)])
        status = self._status
        self._buf = self._chunks = None
        self._waiter = None
        return status, body

    def close(self) -> None:
        self.keep_alive = False
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True


def _short(value: object, limit: int = 160) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.asynccontextmanager
async def _no_gate() -> AsyncIterator[None]:
    yield


class HttpPool:
    """Kept-alive connections to many API servers, at most one request per connection.

    ``max_idle`` bounds the connections kept between requests (None: no bound). Past it, a
    new connection is closed after its answer, as Go's ``Transport.MaxIdleConns`` does,
    while a kept one stays kept: the same clusters keep their connections cycle after
    cycle, memory stays bounded, and the clusters beyond the bound pay a TLS handshake
    per probe.
    """

    def __init__(self, max_idle: int | None = None) -> None:
        self.max_idle = max_idle
        self._idle: dict[_PoolKey, list[_Connection]] = {}
        self._idle_count = 0
        self._kept = 0  #: pooled connections, idle or in use
        self._open: set[_Connection] = set()
        self._endpoints: dict[str, Endpoint] = {}
        self.opened = 0  #: connections opened so far (tests check keep-alive)

    @property
    def idle(self) -> int:
        """Idle connections kept for reuse."""
        return self._idle_count

    def endpoint(self, url: str) -> Endpoint:
        ep = self._endpoints.get(url)
        if ep is None:
            ep = Endpoint.parse(url)
            if len(self._endpoints) > 100_000:  # endpoints come from files: stay bounded
                self._endpoints.clear()
            self._endpoints[url] = ep
        return ep

    async def get(
        self,
        url: str,
        path: str,
        *,
        headers: Mapping[str, str],
        context: ssl.SSLContext | None,
        server_hostname: str | None,
        max_bytes: int,
        gate: Callable[[], AbstractAsyncContextManager[object]] | None = None,
    ) -> tuple[int, bytes]:
        """``(status, body)`` of ``GET url+path``; raises :class:`HttpError`.

        ``gate()`` is held while connecting and sending, not while waiting for the answer:
        the cycle's concurrency bounds work, and a hung server never holds a slot. The
        caller bounds the whole call with a timeout; cancellation closes the connection.
        """
        ep = self.endpoint(url)
        if ep.tls and context is None:
            raise HttpError(Failure.TLS, "https endpoint without a TLS context")
        key: _PoolKey = (ep, context if ep.tls else None, server_hostname if ep.tls else None)
        request = _request_bytes(ep, path, headers)
        enter = gate or _no_gate
        for attempt in (0, 1):
            async with enter():
                conn = self._take_idle(key)
                reused = conn is not None
                if conn is None:
                    conn = await self._connect(ep, key[1], server_hostname)
                waiter = conn.send(request, max_bytes)
            try:
                await waiter
            except HttpError as exc:
                self._discard(conn)
                if reused and not exc.answered and attempt == 0:
                    continue  # a kept-alive connection the server had closed: once more
                raise
            except BaseException:  # timeout, cancellation: the connection is mid-answer
                self._discard(conn)
                raise
            status, body = conn.result()
            self._release(key, conn)
            return status, body
        raise AssertionError("unreachable")

    async def preconnect(
        self, url: str, *, context: ssl.SSLContext | None, server_hostname: str | None
    ) -> None:
        """Open a connection to ``url`` and keep it idle for the next request.

        After a timeout the connection is closed (its answer may still come); a hung API
        server then costs a TLS handshake at every cycle. Doing that handshake right after
        the timeout, between cycles, lets the next probe send at once, so a cycle with
        hung clusters ends within the timeout. Raises :class:`HttpError`; the caller
        bounds it with a timeout.
        """
        ep = self.endpoint(url)
        key: _PoolKey = (ep, context if ep.tls else None, server_hostname if ep.tls else None)
        if self._idle.get(key):
            return
        conn = await self._connect(ep, key[1], server_hostname)
        self._release(key, conn)

    def _take_idle(self, key: _PoolKey) -> _Connection | None:
        conns = self._idle.get(key)
        while conns:
            conn = conns.pop()
            self._idle_count -= 1
            if not conns:
                del self._idle[key]
            if not conn.closed and conn.keep_alive:
                return conn
            self._discard(conn)
        return None

    def _release(self, key: _PoolKey, conn: _Connection) -> None:
        if conn.closed or not conn.keep_alive:
            self._discard(conn)
            return
        if not conn.pooled:
            if self.max_idle is not None and self._kept >= self.max_idle:
                self._discard(conn)
                return
            conn.pooled = True
            self._kept += 1
        conn.last_used = asyncio.get_running_loop().time()
        self._idle.setdefault(key, []).append(conn)
        self._idle_count += 1

    def prune_idle(self, max_age: float) -> int:
        """Close connections idle for more than ``max_age`` seconds; return how many.

        A cluster that left the kubeconfigs leaves its connection idle: this bounds how
        long (aiohttp's ``keepalive_timeout`` did the same before).
        """
        deadline = asyncio.get_running_loop().time() - max_age
        closed = 0
        for key in list(self._idle):
            conns = self._idle[key]
            keep = [c for c in conns if c.last_used >= deadline and not c.closed]
            for conn in conns:
                if conn.last_used < deadline or conn.closed:
                    self._discard(conn)
                    closed += 1
            self._idle_count -= len(conns) - len(keep)
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        return closed

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._open.discard(conn)
        if conn.pooled:
            conn.pooled = False
            self._kept -= 1

    async def _connect(
        self, ep: Endpoint, context: ssl.SSLContext | None, server_hostname: str | None
    ) -> _Connection:
        loop = asyncio.get_running_loop()
        hostname = (server_hostname or ep.host) if context is not None else None
        try:
            _, conn = await loop.create_connection(
                lambda: _Connection(context, hostname), ep.host, ep.port
            )
        except OSError as exc:
            raise HttpError(Failure.CONNECT, f"cannot connect: {_short(exc)}") from None
        self.opened += 1
        self._open.add(conn)
        handshake = conn.handshake_done()
        if handshake is not None:
            try:
                await handshake
            except BaseException:
                self._discard(conn)
                raise
        return conn

    def close(self) -> None:
        """Close every connection (the exporter is stopping)."""
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
        self._idle_count = 0
        self._kept = 0


def _request_bytes(ep: Endpoint, path: str, headers: Mapping[str, str]) -> bytes:
    target = ep.prefix + path
    if any(c in target for c in "\r\n\t "):
        raise HttpError(Failure.URL, "the request path has spaces or line breaks")
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {ep.host_header}",
        f"User-Agent: {USER_AGENT}",
        "Accept: application/json, */*",
    ]
    for name, value in headers.items():
        lines.append(f"{name}: {value}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise HttpError(Failure.PROTOCOL, "a request header is not latin-1 text") from None
