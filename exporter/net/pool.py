"""Kept-alive connections to many API servers: the probes' one HTTP client.

Why not aiohttp for the probes: at fleet scale the client is the exporter, and aiohttp's
request and connection machinery, and asyncio's ``SSLProtocol`` with its read buffer per
connection, cost several times the CPU and memory per kept-alive GET (the figures:
docs/exporter.md). This client runs TLS on the socket itself (``exporter.net.connection``)
and parses the one answer it needs (``exporter.net.http1``). What OpenSSL keeps per idle
TLS connection (the session and its certificates) nothing in Python can lower: hence
``max_idle`` below.

One pool for the exporter's life, connections kept alive per (endpoint, TLS context,
server name, proxy); a request that fails on a *reused* connection before any byte of
the answer (the server closed it meanwhile) is retried once on a fresh connection, never
after a timeout or on a fresh connection.

Through a proxy (``exporter.net.proxy``) a connection goes to the proxy and opens a
``CONNECT`` tunnel first; the proxy is part of the pool key, so a cluster whose proxy
changes gets a new connection. :class:`Progress` tells the caller, when its timeout
fires, whether the request was still waiting for the proxy: that is the proxy's fault
(reason ``proxy``), not the API server's.

Deadlines: ``get(..., deadline=)`` bounds a request in loop time as an ``asyncio.timeout``
around it would, for a fraction of its CPU (``exporter.net.deadlines``); the pool sets
which connection future a request awaits, which the deadline then fails.

Connections live as long as a cluster needs them: :meth:`HttpPool.retain` closes at once
the idle connections to endpoints no discovered cluster uses any more (a kubeconfig
removed, a server changed), and :meth:`HttpPool.prune_idle` the ones idle too long.

Long because it holds every probe's one request path (connect, tunnel, TLS, send, the
retry of a dead kept connection, the deadlines' and the gate's bookkeeping) and the
housekeeping of the same private state (idle bound, retain, prune, close).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from exporter.net.connection import Connection
from exporter.net.deadlines import Deadlines, Request, wait
from exporter.net.http1 import Endpoint, Failure, HttpError, request_bytes, short
from exporter.net.proxy import Proxy
from exporter.net.tcp import open_socket
from exporter.net.turns import TURN_BUDGET_S, TurnBudget, sliced

_PoolKey = tuple[Endpoint, ssl.SSLContext | None, str | None, Proxy | None]
#: what :meth:`HttpPool.retain` keeps: (endpoint URL, its proxy)
Route = tuple[str, Proxy | None]


class Progress:
    """Where one request stands, for a caller whose timeout cut it short.

    ``stage``: ``"proxy"`` while connecting to the proxy or waiting for its answer to
    ``CONNECT``; ``"server"`` from then on (or from the start, without a proxy).
    """

    __slots__ = ("stage",)

    def __init__(self) -> None:
        self.stage = "server"


class _NoGate:
    """``async with`` doing nothing, for requests without a gate (the checks' GETs); a class
    rather than an ``asynccontextmanager``: no generator per request."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


_NO_GATE = _NoGate()


T = TypeVar("T")

#: Seconds a new connection's set-up (TCP, TLS) may wait for the server before it gives the
#: caller's gate back. A healthy set-up takes milliseconds of CPU and, with the exporter's
#: 64 in flight on a loaded 2-core machine, well under a second; an API server process that
#: is stopped accepts TCP (the kernel's backlog) and never answers the handshake, and would
#: hold a slot for a whole timeout: a thousand of them would make a first cycle of many
#: timeouts (bench/RESULTS.md).
SETUP_STALL_SECONDS = 1.0


class HttpPool:
    """Kept-alive connections to many API servers, at most one request per connection.

    ``max_idle`` bounds the connections kept between requests (None: no bound). Past it, a
    new connection is closed after its answer, as Go's ``Transport.MaxIdleConns`` does,
    while a kept one stays kept: the same clusters keep their connections cycle after
    cycle, memory stays bounded, and the clusters beyond the bound pay a TLS handshake
    per request (the probe's, and each of the control-plane check's reads when they run:
    nothing holds a connection between two requests of one cluster).
    """

    def __init__(
        self,
        max_idle: int | None = None,
        setup_stall: float = SETUP_STALL_SECONDS,
        turn_budget: float = TURN_BUDGET_S,
    ) -> None:
        self.max_idle = max_idle
        self.setup_stall = setup_stall  #: see SETUP_STALL_SECONDS
        self._idle: dict[_PoolKey, list[Connection]] = {}
        self._idle_count = 0
        self._kept = 0  #: pooled connections, idle or in use
        self._open: set[Connection] = set()
        self._endpoints: dict[str, Endpoint] = {}
        self.opened = 0  #: connections opened so far (tests check keep-alive)
        #: the probe work one turn of the loop may start: its connections' handshake steps,
        #: and the probe steps and reconnections of the client above (``exporter.net.turns``)
        self.turns = TurnBudget(turn_budget)
        self._deadlines = Deadlines()

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
        proxy: Proxy | None = None,
        progress: Progress | None = None,
        deadline: float | None = None,
    ) -> tuple[int, bytes]:
        """``(status, body)`` of ``GET url+path``; raises :class:`HttpError`.

        ``gate()`` is held while connecting and sending, not while waiting for the answer:
        the cycle's concurrency bounds work, and a hung server never holds a slot. A new
        connection still waiting for the server after ``setup_stall`` seconds gives it back
        too, when it has a ``release()`` (the cycle's slot does): a stopped server accepts
        TCP and never answers the TLS handshake. The wait for the proxy's tunnel is not
        under ``gate()`` either (it is no work): a hung proxy in front of a thousand
        clusters must not take every slot for a timeout.

        ``deadline`` (event-loop time, ``loop.time()``) bounds the whole call, waiting for
        ``gate()`` included: when it passes, the call raises ``TimeoutError`` as an
        ``asyncio.timeout`` around it would, the connection is closed (its answer may still
        come) and ``progress`` says how far it got. Without it the caller bounds the call
        itself; a cancellation closes the connection either way. ``proxy``: tunnel
        through it; ``progress`` says whether a new connection was still waiting for it.
        """
        ep = self.endpoint(url)
        if ep.tls and context is None:
            raise HttpError(Failure.TLS, "https endpoint without a TLS context")
        key = _key(ep, context, server_hostname, proxy)
        request = request_bytes(ep, path, headers)
        req = None if deadline is None else self._deadlines.start(deadline)
        try:
            for attempt in (0, 1):
                conn: Connection | None = None
                reused = False
                waiter: asyncio.Future[None] | None = None
                try:
                    if proxy is not None:
                        conn = self._take_idle(key)
                        reused = conn is not None
                        if conn is None:
                            conn = await self._connect(ep, key, progress, req, secure=False)
                    held = _NO_GATE if gate is None else gate()
                    async with held:
                        on_stall: Callable[[], None] | None = getattr(held, "release", None)
                        if conn is None:
                            conn = self._take_idle(key)
                            reused = conn is not None
                            if conn is None:
                                setup = self._connect(ep, key, progress, req)
                                conn = await self._stalling(setup, on_stall)
                        elif not reused:
                            await self._stalling(self._secure(conn, req), on_stall)
                        waiter = conn.send(request, max_bytes)
                    if req is None:
                        await waiter
                    else:
                        req.future = waiter
                        try:
                            await waiter
                        finally:
                            req.future = None
                except HttpError as exc:
                    if conn is not None:
                        self._discard(conn)
                    if reused and not exc.answered and attempt == 0:
                        continue  # a kept-alive connection the server had closed: once more
                    raise
                except BaseException:  # timeout, cancellation: the connection is mid-answer
                    if conn is not None and reused and waiter is None:
                        self._release(key, conn)  # taken for a proxied request, never used
                    elif conn is not None:
                        self._discard(conn)
                    raise
                status, body = conn.result()
                self._release(key, conn)
                return status, body
            raise AssertionError("unreachable")
        except asyncio.CancelledError:
            if req is not None and req.timed_out():
                raise TimeoutError from None
            raise
        finally:
            if req is not None:
                self._deadlines.end(req)

    async def _stalling(self, setup: Awaitable[T], on_stall: Callable[[], None] | None) -> T:
        """Await a connection's set-up; ``on_stall()`` once it has waited ``setup_stall``."""
        if on_stall is None:
            return await setup
        timer = asyncio.get_running_loop().call_later(self.setup_stall, on_stall)
        try:
            return await setup
        finally:
            timer.cancel()

    async def preconnect(
        self,
        url: str,
        *,
        context: ssl.SSLContext | None,
        server_hostname: str | None,
        proxy: Proxy | None = None,
        deadline: float | None = None,
    ) -> None:
        """Open a connection to ``url`` and keep it idle for the next request.

        A timed-out request's connection is closed (its answer may still come): connecting
        again between cycles lets the next probe send at once (``FleetClient``). Raises
        :class:`HttpError`, and ``TimeoutError`` once ``deadline`` (loop time, as for
        :meth:`get`) has passed; without a deadline the caller bounds it.
        """
        ep = self.endpoint(url)
        key = _key(ep, context, server_hostname, proxy)
        if self._idle.get(key):
            return
        req = None if deadline is None else self._deadlines.start(deadline)
        try:
            conn = await self._connect(ep, key, None, req)
        except asyncio.CancelledError:
            if req is not None and req.timed_out():
                raise TimeoutError from None
            raise
        finally:
            if req is not None:
                self._deadlines.end(req)
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

    async def prune_idle(self, max_age: float) -> int:
        """Close connections idle for more than ``max_age`` seconds; return how many.

        What bounds how long a connection nothing uses any more is kept, whatever left it.
        The endpoints a slice a turn, as :meth:`retain`'s.
        """
        deadline = asyncio.get_running_loop().time() - max_age
        closed = 0
        async for key in sliced(list(self._idle)):
            closed += self._close_idle(key, lambda c: c.last_used < deadline or c.closed)
        return closed

    async def retain(self, routes: Collection[Route], used_since: float | None = None) -> int:
        """Close the idle connections to any endpoint not in ``routes``; return how many.

        The cycle calls it with the endpoints of the clusters discovered: a cluster gone
        from the kubeconfigs, or whose server or proxy changed, loses its connection in
        that cycle instead of after the idle bound. An endpoint shared by two clusters
        stays while either is there. A connection in use now comes back idle after its
        answer and goes at the next call.

        ``used_since`` (loop time the last cycle's probes started): on an endpoint used
        since then, the connections idle since before are closed too. Those were made
        with superseded credentials (a kubeconfig rewritten, a CA renewed: a new TLS
        context is a new pool key), and nothing will use them again.

        Every pass (the routes, then the idle connections: one key per endpoint and
        credentials) a slice a turn (``exporter.net.turns.sliced``): at 20,000 clusters
        the passes over the idle connections in one step were 25-60 ms, the probe loop's
        longest turns on a loaded machine (bench/RESULTS.md). Each key is decided on
        what it holds when its turn comes (:meth:`_close_idle`): a connection that comes
        back idle meanwhile was just used, and stays or goes at the next call.
        """
        live: set[tuple[Endpoint, Proxy | None]] = set()
        async for url, proxy in sliced(list(routes)):
            try:
                live.add((self.endpoint(url), proxy))
            except HttpError:
                continue  # not a URL: it never had a connection
        closed = 0
        async for key in sliced(list(self._idle)):
            if (key[0], key[3]) not in live:
                closed += self._close_idle(key, lambda c: True)
        if used_since is not None:
            closed += await self._close_superseded(used_since)
        if len(self._endpoints) > 2 * len(live) + 1024:  # parsed URLs of gone clusters
            urls = {url async for url, _ in sliced(list(routes))}
            kept = {u: ep async for u, ep in sliced(list(self._endpoints.items())) if u in urls}
            self._endpoints = kept  # a URL parsed meanwhile is parsed again: a cache
        return closed

    async def _close_superseded(self, since: float) -> int:
        """On each endpoint used since ``since``, close its connections idle since before."""
        used: set[tuple[Endpoint, Proxy | None]] = set()
        async for key in sliced(list(self._idle)):
            if any(c.last_used >= since for c in self._idle.get(key, ())):
                used.add((key[0], key[3]))
        closed = 0
        async for key in sliced(list(self._idle)):
            if (key[0], key[3]) in used:
                closed += self._close_idle(key, lambda c: c.last_used < since)
        return closed

    def _close_idle(self, key: _PoolKey, stale: Callable[[Connection], bool]) -> int:
        """Close the idle connections of ``key`` that are ``stale`` now; return how many.

        One step: what ``key`` holds is read and written without a turn of the loop
        between, so a pass that gave the loop turns before reaching it still decides on
        what it holds now (it may even be gone)."""
        conns = self._idle.get(key)
        if not conns:
            return 0
        keep = [c for c in conns if not stale(c)]
        for conn in conns:
            if stale(conn):
                self._discard(conn)
        self._idle_count -= len(conns) - len(keep)
        if keep:
            self._idle[key] = keep
        else:
            del self._idle[key]
        return len(conns) - len(keep)

    @property
    def held(self) -> int:
        """Sockets this pool holds open now (idle, in use, or being set up)."""
        return sum(1 for conn in self._open if not conn.closed)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._open.discard(conn)
        if conn.pooled:
            conn.pooled = False
            self._kept -= 1

    async def _connect(
        self,
        ep: Endpoint,
        key: _PoolKey,
        progress: Progress | None,
        req: Request | None,
        *,
        secure: bool = True,
    ) -> Connection:
        """A new connection: TCP, the proxy's tunnel if any, then TLS (unless not ``secure``:
        :meth:`_secure` does it later)."""
        _, context, server_hostname, proxy = key
        hostname = (server_hostname or ep.host) if context is not None else None
        if proxy is None:
            host, port, tunnel = ep.host, ep.port, None
        else:
            host, port, tunnel = proxy.host, proxy.port, proxy.connect_request(ep.host, ep.port)
            if progress is not None:
                progress.stage = "proxy"
        try:
            sock = await open_socket(host, port)
        except OSError as exc:
            if proxy is not None:
                detail = f"cannot connect to the proxy {proxy.label}: {short(exc)}"
                raise HttpError(Failure.PROXY, detail) from None
            raise HttpError(Failure.CONNECT, f"cannot connect: {short(exc)}") from None
        try:
            conn = Connection(sock, context, hostname, tunnel, self.turns)
        except BaseException:
            sock.close()
            raise
        self.opened += 1
        self._open.add(conn)
        setup = conn.ready()  # the TLS handshake, or the proxy's tunnel
        if setup is not None:
            try:
                await wait(setup, req)
            except HttpError as exc:
                self._discard(conn)
                if exc.failure is Failure.PROXY and proxy is not None:
                    raise HttpError(Failure.PROXY, f"proxy {proxy.label} {exc.detail}") from None
                raise
            except BaseException:
                self._discard(conn)
                raise
        if progress is not None:
            progress.stage = "server"
        if proxy is not None and secure:
            await self._secure(conn, req)
        return conn

    async def _secure(self, conn: Connection, req: Request | None) -> None:
        """The TLS handshake with the API server inside an open tunnel (none for http)."""
        handshake = conn.start_tls()
        if handshake is not None:
            try:
                await wait(handshake, req)
            except BaseException:
                self._discard(conn)
                raise

    def close(self) -> None:
        """Close every connection (the exporter is stopping); a request under way fails."""
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
        self._idle_count = 0
        self._kept = 0


def _key(
    ep: Endpoint, context: ssl.SSLContext | None, server_hostname: str | None, proxy: Proxy | None
) -> _PoolKey:
    return (ep, context if ep.tls else None, server_hostname if ep.tls else None, proxy)
