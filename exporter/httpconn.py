"""One kept-alive connection to an API server: TCP, TLS over memory BIOs, one answer at a time.

TLS runs on an ``ssl.SSLObject`` over two ``ssl.MemoryBIO`` (the same OpenSSL as asyncio's
``SSLProtocol``, without its layers and its 256 KiB read buffer per connection); the HTTP
answer is read by :class:`exporter.http1.ResponseParser`. The pool
(``exporter.httppool``) opens, reuses and closes these connections.

Through an HTTP proxy the connection starts with a tunnel: ``CONNECT host:port`` is sent
to the proxy, its answer head read (a 2xx opens the tunnel; anything else, or the proxy
closing, is a :attr:`~exporter.http1.Failure.PROXY` failure), and only then does the TLS
handshake with the API server start, inside the tunnel: the proxy sees host and port,
never the requests.
"""

from __future__ import annotations

import asyncio
import ssl

from exporter.http1 import MAX_HEADER_BYTES, Failure, HttpError, ResponseParser, short


class Connection(asyncio.Protocol):
    """One TCP connection, its TLS state, and the answer being read (one at a time)."""

    __slots__ = (
        "_in",
        "_out",
        "_parser",
        "_tls",
        "_tunnel",
        "_waiter",
        "closed",
        "handshaking",
        "keep_alive",
        "last_used",
        "pooled",
        "transport",
        "tunnelling",
    )

    def __init__(
        self,
        context: ssl.SSLContext | None,
        server_hostname: str | None,
        tunnel: bytes | None = None,
    ) -> None:
        """``tunnel``: the ``CONNECT`` request to send first, when connected to a proxy."""
        self.transport: asyncio.Transport | None = None
        #: waiting for the proxy's answer to ``CONNECT`` (the caller's timeout names it)
        self.tunnelling = tunnel is not None
        self._tunnel: bytearray | bytes | None = tunnel  #: the request, then the answer head
        self.closed = False
        self.keep_alive = True
        self.pooled = False  #: one of the pool's kept connections (idle or in use)
        self.last_used = 0.0  #: loop time it went idle
        self._waiter: asyncio.Future[None] | None = None
        self._parser: ResponseParser | None = None  #: the answer being read, if any
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
        if self.tunnelling:
            assert isinstance(self._tunnel, bytes)
            self._waiter = asyncio.get_running_loop().create_future()
            transport.write(self._tunnel)
            self._tunnel = bytearray()
        elif self._tls is not None:
            self._waiter = asyncio.get_running_loop().create_future()
            self._handshake()

    def data_received(self, data: bytes) -> None:
        if self.tunnelling:
            self._tunnel_answer(data)
            return
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
        if self.tunnelling:
            self._fail(_proxy_closed())
            return False
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
            if self.tunnelling:
                self._fail(_proxy_closed())
            elif self.handshaking:
                self._fail(HttpError(Failure.CONNECT, "connection closed during the TLS handshake"))
            else:
                self._at_eof()

    # -- the proxy's tunnel ----------------------------------------------------------

    def _tunnel_answer(self, data: bytes) -> None:
        head = self._tunnel
        assert isinstance(head, bytearray)
        head += data
        end = head.find(b"\r\n\r\n")
        if end < 0:
            if len(head) > MAX_HEADER_BYTES:
                self._fail(HttpError(Failure.PROXY, "answered CONNECT with headers too long"))
            return
        status_line = bytes(head[: head.find(b"\r\n")]).decode("latin-1")
        parts = status_line.split(" ", 2)
        ok = len(parts) >= 2 and parts[0].startswith("HTTP/1.") and parts[1].isdigit()
        if not ok or not 200 <= int(parts[1]) < 300:
            what = f"HTTP {' '.join(parts[1:])}" if ok else "not HTTP"
            self._fail(HttpError(Failure.PROXY, f"refused CONNECT: {short(what, 80)}"))
            return
        rest = bytes(head[end + 4 :])
        self.tunnelling = False
        self._tunnel = None
        if self._tls is not None and self._in is not None:
            self._in.write(rest)  # nothing, normally: the server waits for our hello
        elif rest:
            self.keep_alive = False  # bytes before our request: do not trust them
        self._resolve()

    def start_tls(self) -> asyncio.Future[None] | None:
        """Start the TLS handshake inside an open tunnel; its future, or None without TLS."""
        if self._tls is None:
            return None
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        if self.handshaking:
            self._handshake()
        else:
            waiter.set_result(None)
        return waiter

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
            self._fail(HttpError(Failure.TLS, f"certificate not accepted: {short(exc)}"))
            return
        except (ssl.SSLError, OSError) as exc:
            self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}"))
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
            self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}", answered=True))
        self._flush()  # TLS 1.3 may answer (key update)

    # -- HTTP ------------------------------------------------------------------------

    def send(self, request: bytes, max_bytes: int) -> asyncio.Future[None]:
        """Write one request; the returned future ends when its answer is complete."""
        assert self.transport is not None
        self._parser = ResponseParser(max_bytes)
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        if self._tls is not None:
            try:
                self._tls.write(request)
            except ssl.SSLError as exc:
                self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}"))
                return waiter
            self._flush()
        else:
            self.transport.write(request)
        return waiter

    def handshake_done(self) -> asyncio.Future[None] | None:
        """The future of the tunnel and the handshake (maybe done already) before the first
        request, else None."""
        return self._waiter if self._parser is None else None

    def _feed(self, data: bytes) -> None:
        parser = self._parser
        if parser is None or self._waiter is None or self._waiter.done():
            self.keep_alive = False  # bytes nobody asked for: do not reuse this connection
            return
        try:
            done = parser.feed(data)
        except HttpError as exc:
            self._fail(exc)
            return
        if done:
            self._resolve()

    def _at_eof(self) -> None:
        self.keep_alive = False
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self.handshaking or self._parser is None:
            self._fail(HttpError(Failure.CONNECT, "connection closed during the TLS handshake"))
            return
        try:
            self._parser.feed_eof()
        except HttpError as exc:
            self._fail(exc)
            return
        self._resolve()

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
        parser = self._parser
        assert parser is not None
        if not parser.keep_alive:
            self.keep_alive = False
        self._parser = None
        self._waiter = None
        return parser.result()

    def close(self) -> None:
        self.keep_alive = False
        self._tunnel = None
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True


def _proxy_closed() -> HttpError:
    return HttpError(Failure.PROXY, "closed the connection before answering CONNECT")
