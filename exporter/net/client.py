"""The fleet's one client: probe an API server, hand the checks its authenticated GETs.

:class:`FleetClient` is what the cycle sees of the network. Inside it: the pool of
kept-alive connections (``exporter.net.pool``), the credential cache
(``exporter.net.credentials``), the proxies of the environment (``exporter.net.proxy``),
and the reconnections started after a timeout.

A probe (:meth:`FleetClient.probe`) works under the cycle's concurrency :class:`Slot` and
gives it back whenever it waits rather than works: while the answer is awaited, while
a new connection's set-up has waited a second for the server (a stopped API server
accepts TCP and never answers the handshake: ``exporter.net.pool.SETUP_STALL_SECONDS``),
while a proxy's tunnel opens, and while a reconnection is awaited. Hung API servers then
never hold up the others, and the CPU-heavy part stays bounded. Credentials the server
refuses (401, 403) are resolved again and the probe is tried once more, if they came
from the cache.

Why reconnections: a timed-out connection is closed (its answer may still come), so a
hung API server would cost a TLS handshake, under a slot, at the start of every cycle,
and with a thousand of them the last timeouts would start seconds late. Connecting again
right after the cycle lets the next probe send at once. Each reconnection is a task of
its own, one per cluster at most, takes no slot, and is cancelled and awaited by
:meth:`FleetClient.aclose`. The figures: bench/RESULTS.md.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from exporter.model import ProbeResult, Reason
from exporter.net.credentials import CredentialCache, Credentials, CredentialsError
from exporter.net.http1 import HttpError
from exporter.net.pool import HttpPool, Route
from exporter.net.probe import ApiClient, probe
from exporter.net.proxy import EnvironmentProxies, Proxy, ProxyError, select
from exporter.net.turns import TurnBudget, sliced
from fleetwatch.discovery.clusters import Cluster, ContextConfig

#: Seconds an idle kept-alive connection may wait for its next probe (at least two intervals).
IDLE_CONNECTION_SECONDS = 3600.0

#: How much later than the probe's own deadline the backstop of a whole probe ends. Every
#: wait of a probe is bounded at the deadline itself (the request's, the credentials', the
#: slot's after a refusal, a reconnection's), each saying what it waited for; this one only
#: catches a wait that escaped them. Were it due with one of them (a loop running late on
#: a loaded machine, by more than this), it would win and say "timeout" where the request
#: would have said "proxy": 50 ms was not enough at load 8-10, a second is.
_BACKSTOP_S = 1.0


class Slot:
    """One probe's share of the cycle's concurrency: held for work, given back to wait.

    Without a semaphore, a probe that takes no share: one of a cluster whose last probe
    timed out. Setting up its connection may wait a whole timeout (an API server process
    that is stopped accepts TCP and never answers the TLS handshake), which under a slot
    would keep the others waiting. How many go without is how many timed out, which
    bounds their CPU.

    ``turns``: the loop's budget of probe work per turn (``exporter.net.turns``). A probe
    that got its share (without one: at its start) goes on when the turn has budget
    left: every slot given back wakes a probe in the next turn, and the concurrency's
    worth of probe steps in one turn, besides the handshakes, was one of the probe loop's
    longest turns (bench/RESULTS.md).
    """

    __slots__ = ("_held", "_semaphore", "_started", "_turns", "waited")

    def __init__(
        self, semaphore: asyncio.Semaphore | None, turns: TurnBudget | None = None
    ) -> None:
        self._semaphore = semaphore
        self._turns = turns
        self._held = False
        self._started = False  #: without a semaphore: the start has had its turn
        self.waited = False  #: all slots were taken when it asked: concurrency was short

    async def acquire(self) -> None:
        if self._semaphore is None:
            if not self._started:
                self._started = True
                if self._turns is not None:
                    await self._turns.turn()
            return
        if not self._held:
            if self._semaphore.locked():
                self.waited = True
            await self._semaphore.acquire()
            self._held = True
            if self._turns is not None:
                try:
                    await self._turns.turn()
                except BaseException:  # cancelled while waiting for its turn: not held
                    self.release()
                    raise

    def release(self) -> None:
        if self._held:
            self._held = False
            assert self._semaphore is not None
            self._semaphore.release()

    # The pool's ``gate``: ``async with gate():``. A plain class rather than an
    # ``asynccontextmanager``: no generator per request on the steady cycle's hot path.
    def __call__(self) -> Slot:
        return self

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class Probed(NamedTuple):
    """What one probe gives the cycle."""

    result: ProbeResult
    #: the cluster's authenticated client, for its checks (None: they do not run)
    api: ApiClient | None = None
    #: the probe timed out with this client's connection: reconnect it after the cycle
    lost: ApiClient | None = None


def _probed(result: ProbeResult, api: ApiClient) -> Probed:
    return Probed(result, api, api if result.reason is Reason.TIMEOUT else None)


class FleetClient:
    """Probes and authenticated GETs to every API server; ``aclose()`` when the exporter stops.

    ``timeout``: what one probe may take, credentials included (an exec plugin's deadline
    too); ``interval``: the cycle's, which bounds how long an idle connection is kept;
    ``max_idle``: kept-alive connections kept between cycles (None: no bound);
    ``environ``: where ``HTTPS_PROXY``/``NO_PROXY`` are read, once (default: ours).
    """

    def __init__(
        self,
        timeout: float,
        interval: float,
        max_idle: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.timeout = timeout
        self.interval = interval
        #: credentials per kubeconfig context, shared between contexts of one user
        self.credentials = CredentialCache(timeout)
        #: the kept-alive connections of the probes and the checks
        self.http = HttpPool(max_idle)
        self.proxies = EnvironmentProxies(os.environ if environ is None else environ)
        self._reconnects: dict[str, asyncio.Task[None]] = {}

    @property
    def held(self) -> int:
        """Sockets open now (idle, in use, or being set up)."""
        return self.http.held

    @property
    def turns(self) -> TurnBudget:
        """The probe work one turn of the loop may start (the probes' slots draw from it)."""
        return self.http.turns

    # -- a probe ------------------------------------------------------------------------

    async def probe(self, cluster: Cluster, ctx: ContextConfig, slot: Slot) -> Probed:
        """``GET /readyz?verbose`` of ``cluster`` with ``ctx``'s credentials, within the timeout.

        ``slot`` is held when called, and may be given back and taken again meanwhile. A
        failure of the cluster (its credentials, proxy, connection or answer) is a result;
        the exceptions that escape are bugs.
        """
        start = time.perf_counter()
        try:
            proxy = self._proxy(cluster)
        except ProxyError as exc:
            return Probed(ProbeResult(False, Reason.PROXY, 0.0, None, str(exc)))
        creds = self.credentials.cached(ctx)
        if creds is None or cluster.name in self._reconnects:
            return await self._probe_slow(cluster, ctx, slot, proxy, start)
        # The steady cycle's fast path: credentials known, connection kept. The request
        # bounds itself; nothing else here can wait, so no bound of its own is needed.
        api = ApiClient(self.http, cluster.endpoint, creds, proxy)
        result = await self._readyz(api, self.timeout, slot)
        if result.reason is Reason.UNAUTHORIZED:
            return await self._probe_slow(cluster, ctx, slot, proxy, start, refused=creds)
        return _probed(result, api)

    async def _probe_slow(
        self,
        cluster: Cluster,
        ctx: ContextConfig,
        slot: Slot,
        proxy: Proxy | None,
        start: float,
        refused: Credentials | None = None,
    ) -> Probed:
        """A probe that resolves credentials first, or waits for a reconnection first.

        Cached credentials refused (an exec token expired or revoked, a ``tokenFile``
        rotated) are forgotten, resolved again, and the probe is tried once more:
        ``refused``, the ones the fast path was refused with, or those of the first
        attempt here. Credentials resolved for this probe and refused are the answer.
        """
        api: ApiClient | None = None
        resolving = False
        deadline = asyncio.get_running_loop().time() + self._remaining(start)
        try:
            async with asyncio.timeout(self._remaining(start) + _BACKSTOP_S):
                while True:
                    if refused is not None:
                        async with asyncio.timeout_at(deadline):
                            await slot.acquire()
                        self.credentials.invalidate(ctx, refused)
                    resolving = True
                    creds, fresh = await self._resolve(ctx, start)
                    resolving = False
                    # Its step goes on within the turn's budget of probe work: the
                    # credential workers end builds in bursts (117 in one turn after a
                    # rotation of every Secret: a turn of 200 probe steps, 157 ms).
                    await self.http.turns.turn()
                    api = ApiClient(self.http, cluster.endpoint, creds, proxy)
                    reconnecting = self._reconnects.get(cluster.name)
                    if reconnecting is not None:  # its connection is on the way: wait, slot-free
                        slot.release()
                        async with asyncio.timeout_at(deadline):
                            await asyncio.wait([reconnecting])  # its outcome: the probe sees
                    result = await self._readyz(api, self._remaining(start), slot)
                    if result.reason is not Reason.UNAUTHORIZED or fresh or refused is not None:
                        return _probed(result, api)
                    refused = creds
        except CredentialsError as exc:
            return Probed(
                ProbeResult(False, Reason.CREDENTIALS, time.perf_counter() - start, None, str(exc))
            )
        except TimeoutError:
            elapsed = time.perf_counter() - start
            if resolving:
                # Both bounds came due before the loop ran them (it was late by more than the
                # backstop's margin): the resolution's fault all the same.
                return Probed(
                    ProbeResult(False, Reason.CREDENTIALS, elapsed, None, self._too_long())
                )
            # It had a connection (or was getting one): reconnect it later, no checks.
            return Probed(
                ProbeResult(False, Reason.TIMEOUT, elapsed, None, "no answer in time"), lost=api
            )

    async def _resolve(self, ctx: ContextConfig, start: float) -> tuple[Credentials, bool]:
        """``(credentials, fresh)`` of ``ctx``, within what is left of the probe's time."""
        try:  # a bound of its own, inside the probe's: a hung plugin is a credential fault
            async with asyncio.timeout(self._remaining(start)):
                return await self.credentials.resolve(ctx)
        except TimeoutError:
            raise CredentialsError(self._too_long()) from None

    def _too_long(self) -> str:
        return f"resolving the credentials took longer than {self.timeout:g}s"

    @staticmethod
    async def _readyz(
        api: ApiClient,
        timeout: float,  # noqa: ASYNC109 - the request's own bound
        slot: Slot,
    ) -> ProbeResult:
        if api.proxy is not None:  # the pool takes the slot back once the tunnel is open
            slot.release()
        return await probe(api, timeout, slot)

    def _remaining(self, start: float) -> float:
        return max(0.001, self.timeout - (time.perf_counter() - start))

    def _proxy(self, cluster: Cluster) -> Proxy | None:
        """The proxy of ``cluster``'s requests (ProxyError: a setting that cannot be used)."""
        try:
            ep = self.http.endpoint(cluster.endpoint)
        except HttpError:
            return None  # not a URL: the probe says so
        return select(cluster.proxy_url, self.proxies, ep.tls, ep.host, ep.port)

    def _route(self, cluster: Cluster) -> Route:
        try:
            return cluster.endpoint.rstrip("/"), self._proxy(cluster)
        except ProxyError:
            return cluster.endpoint.rstrip("/"), None

    # -- between cycles -----------------------------------------------------------------

    async def forget(
        self,
        probed: Iterable[ContextConfig],
        discovered: Mapping[str, Cluster],
        used_since: float | None = None,
    ) -> None:
        """Drop what clusters gone from discovery held; close connections idle too long.

        ``probed``: the contexts probed this cycle; ``discovered``: every cluster
        discovered, by name. Connections to endpoints no discovered cluster uses (a
        kubeconfig or context removed, a server changed, a shard moved) are closed now,
        their reconnections cancelled, and the credentials of contexts no longer probed
        forgotten; the connections of clusters still discovered are closed after an hour
        idle, or two intervals if longer. ``used_since`` (loop time this cycle's probes
        started): on an endpoint used since, the connections idle since before were made
        with superseded credentials, and are closed (:meth:`HttpPool.retain`).

        Every pass over the clusters, the connections or the credentials a slice a turn
        (``exporter.net.turns.sliced``), one step's budget shared by the passes that
        follow each other: at 5,000 clusters each part takes tens of milliseconds; at
        20,000 the whole of it was 0.96 s under cProfile.
        """
        routes = [self._route(c) async for c in sliced(list(discovered.values()))]
        await self.http.retain(routes, used_since)
        await self.http.prune_idle(max(IDLE_CONNECTION_SECONDS, 2 * self.interval))
        live = {self.credentials.key(ctx) async for ctx in sliced(list(probed))}
        await self.credentials.prune(live)
        for name, task in self._reconnects.items():
            if name not in discovered:
                task.cancel()  # it removes itself from _reconnects when it ends

    def reconnecting(self, name: str) -> asyncio.Task[None] | None:
        """The reconnection of ``name`` under way, if any: its next probe waits for it."""
        return self._reconnects.get(name)

    def reconnect_later(self, name: str, api: ApiClient) -> None:
        """Open a new connection for a cluster whose probe timed out, in the background.

        Called when the cycle has ended, so the handshakes never slow down the cycle.
        """
        if name in self._reconnects:
            return
        creds = api.credentials

        async def reconnect() -> None:
            try:
                # Its start (a socket, a connect) draws from the turn's budget of probe
                # work: a hundred started a turn, with their connects and handshakes,
                # were turns of 90-170 ms on a loaded machine (bench/RESULTS.md).
                await self.http.turns.turn()
                # No slot: a stopped API server (TCP accepted, no TLS) would hold one for
                # the whole timeout, and the reconnections of clusters that only blinked
                # would queue behind it until their next probe timed out waiting. Their
                # number is that of the clusters that timed out, which bounds the burst.
                await self.http.preconnect(
                    api.endpoint,
                    context=creds.ssl_context,
                    server_hostname=creds.server_hostname,
                    proxy=api.proxy,
                    deadline=asyncio.get_running_loop().time() + self.timeout,
                )
            except (HttpError, TimeoutError):
                pass  # the next probe finds out and reports it
            finally:
                self._reconnects.pop(name, None)

        self._reconnects[name] = asyncio.create_task(reconnect(), name=f"reconnect {name}")

    async def settle(self) -> None:
        """Wait for the reconnections under way to end, for at most a timeout."""
        if self._reconnects:
            await asyncio.wait(list(self._reconnects.values()), timeout=self.timeout)

    async def aclose(self) -> None:
        self.credentials.close()  # first: kills the plugins in flight, with their children
        for task in self._reconnects.values():
            task.cancel()
        await asyncio.gather(*self._reconnects.values(), return_exceptions=True)
        self._reconnects.clear()
        self.http.close()
