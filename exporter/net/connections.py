"""The probes' connections and credentials, held for the exporter's life.

:class:`Connections` owns the :class:`~exporter.net.pool.HttpPool` (kept-alive connections
to every API server), the :class:`~exporter.net.credentials.CredentialCache`, and the
reconnections started after a timeout: a timed-out connection is closed (its answer may
still come), so a hung API server would cost a TLS handshake, under a slot, at the start
of every cycle, and with a thousand of them the last timeouts would start seconds late.
Connecting again right after the cycle lets the next probe send at once. Each
reconnection is a task of its own, one per cluster at most, cancelled and awaited by
:meth:`Connections.aclose`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from discovery.clusters import ContextConfig
from exporter.net.credentials import CredentialCache, Credentials
from exporter.net.http1 import HttpError
from exporter.net.pool import HttpPool, Route
from exporter.net.probe import ApiClient
from exporter.net.proxy import Proxy

#: Seconds an idle kept-alive connection may wait for its next probe (at least two intervals).
IDLE_CONNECTION_SECONDS = 3600.0


class Connections:
    """HTTP pool, credential cache and reconnections; ``aclose()`` when the exporter stops."""

    def __init__(self, max_idle: int | None, plugin_timeout: float = 10.0) -> None:
        #: ``plugin_timeout``: an exec plugin's deadline (the probe timeout)
        self.credentials = CredentialCache(plugin_timeout)
        #: the probes' kept-alive connections
        self.http = HttpPool(max_idle)
        self._reconnects: dict[str, asyncio.Task[None]] = {}

    def api(self, endpoint: str, credentials: Credentials, proxy: Proxy | None = None) -> ApiClient:
        return ApiClient(self.http, endpoint, credentials, proxy)

    def prune(
        self,
        live: list[ContextConfig],
        interval: float,
        discovered: Mapping[str, Route],
        used_since: float | None = None,
    ) -> None:
        """Drop what clusters gone from discovery held; close connections idle too long.

        ``discovered``: cluster name -> (endpoint, proxy) of every discovered cluster.
        Connections to endpoints no discovered cluster uses (a kubeconfig or context
        removed, a server changed, a shard moved) are closed now, their reconnections
        cancelled, and the credentials of contexts no longer probed forgotten; the
        connections of clusters still discovered are closed after an hour idle, or two
        intervals if longer. ``used_since``: see :meth:`HttpPool.retain`.
        """
        self.http.retain(discovered.values(), used_since)
        self.http.prune_idle(max(IDLE_CONNECTION_SECONDS, 2 * interval))
        self.credentials.prune({self.credentials.key(ctx) for ctx in live})
        for name, task in self._reconnects.items():
            if name not in discovered:
                task.cancel()  # it removes itself from _reconnects when it ends

    def reconnecting(self, name: str) -> asyncio.Task[None] | None:
        """The reconnection of ``name`` under way, if any: the probe waits for it."""
        return self._reconnects.get(name)

    def reconnect_later(self, name: str, api: ApiClient, timeout: float) -> None:
        """Open a new connection for a cluster whose probe timed out, in the background.

        Called when the cycle has ended, so the handshakes never slow down the cycle.
        """
        if name in self._reconnects:
            return
        creds = api.credentials

        async def reconnect() -> None:
            try:
                # No slot: a stopped API server (TCP accepted, no TLS) would hold one for
                # the whole timeout, and the reconnections of clusters that only blinked
                # would queue behind it until their next probe timed out waiting. Their
                # number is that of the clusters that timed out, which bounds the burst.
                await self.http.preconnect(
                    api.endpoint,
                    context=creds.ssl_context,
                    server_hostname=creds.server_hostname,
                    proxy=api.proxy,
                    deadline=asyncio.get_running_loop().time() + timeout,
                )
            except (HttpError, TimeoutError):
                pass  # the next probe finds out and reports it
            finally:
                self._reconnects.pop(name, None)

        self._reconnects[name] = asyncio.create_task(reconnect(), name=f"reconnect {name}")

    async def settle(self, at_most: float) -> None:
        """Wait for the reconnections under way to end, for at most ``at_most`` seconds."""
        if self._reconnects:
            await asyncio.wait(list(self._reconnects.values()), timeout=at_most)

    async def aclose(self) -> None:
        self.credentials.close()  # first: kills the plugins in flight, with their children
        for task in self._reconnects.values():
            task.cancel()
        await asyncio.gather(*self._reconnects.values(), return_exceptions=True)
        self._reconnects.clear()
        self.http.close()
