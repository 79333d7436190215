"""Kept-alive connections to many API servers: the probes' one HTTP client.

Why not aiohttp for the probes: at fleet scale the client is the exporter. aiohttp spends
about 0.22 ms of CPU per kept-alive GET and about 8 KiB per idle connection on its request
and connection machinery, and asyncio's ``SSLProtocol`` adds a read buffer per connection;
this client runs TLS itself (``exporter.httpconn``) and parses the one answer it needs
(``exporter.http1``): 0.056 ms per GET at 10,000 stand-in clusters, and about 7 KiB less
per connection (docs/exporter.md). OpenSSL itself keeps about 24-34 KiB per idle
TLS connection; nothing in Python can lower that, hence ``max_idle`` below.

Semantics kept from the aiohttp version: one pool for the exporter's life, connections kept
alive per (endpoint, TLS context, server name); a request that fails on a *reused*
connection before any byte of the answer (the server closed it meanwhile) is retried once
on a fresh connection, never after a timeout or on a fresh connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager

from exporter.http1 import Endpoint, Failure, HttpError, request_bytes, short
from exporter.httpconn import Connection

_PoolKey = tuple[Endpoint, ssl.SSLContext | None, str | None]


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
        self._idle: dict[_PoolKey, list[Connection]] = {}
        self._idle_count = 0
        self._kept = 0  #: pooled connections, idle or in use
        self._open: set[Connection] = set()
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
        request = request_bytes(ep, path, headers)
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

    def _take_idle(self, key: _PoolKey) -> Connection | None:
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

    def _release(self, key: _PoolKey, conn: Connection) -> None:
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

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._open.discard(conn)
        if conn.pooled:
            conn.pooled = False
            self._kept -= 1

    async def _connect(
        self, ep: Endpoint, context: ssl.SSLContext | None, server_hostname: str | None
    ) -> Connection:
        loop = asyncio.get_running_loop()
        hostname = (server_hostname or ep.host) if context is not None else None
        try:
            _, conn = await loop.create_connection(
                lambda: Connection(context, hostname), ep.host, ep.port
            )
        except OSError as exc:
            raise HttpError(Failure.CONNECT, f"cannot connect: {short(exc)}") from None
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
