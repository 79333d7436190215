"""The reactor's aiohttp application: ``create_app(settings, ...)``.

Start-up (``cleanup_ctx``, in order): open the store on the store thread, run start-up
discovery (kubeconfigs -> clusters, an upsert), then serve. Shutdown, in reverse: the
store is closed on its thread and the thread is joined, after aiohttp has finished the
requests in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter.discovery import Discoverer, Discovery
from reactor.api import add_routes, auth_middleware, errors_middleware
from reactor.context import BACKEND, METRICS, SETTINGS, Backend, Settings
from reactor.metrics import ReactorMetrics
from reactor.service import DiscoveredCluster, Service
from reactor.store import SQLiteStore, Store

log = logging.getLogger(__name__)


class Scanner(Protocol):
    """What start-up discovery needs (``exporter.discovery.Discoverer`` is one)."""

    def scan(self) -> Discovery: ...


def create_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    store_factory: Callable[[], Store] | None = None,
    discoverer: Scanner | None = None,
) -> web.Application:
    """Build the reactor app; nothing is opened until it starts.

    ``registry``: where the metrics go (a fresh one by default, never the global one).
    ``store_factory``: the store to open on start (SQLite at ``settings.db_path`` by default).
    ``discoverer``: start-up discovery (built from the settings' kubeconfig paths by default;
    none when neither is set).
    """
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[errors_middleware, auth_middleware],
    )
    app[SETTINGS] = settings
    app[METRICS] = ReactorMetrics(registry if registry is not None else CollectorRegistry())
    app[BACKEND] = Backend()
    if discoverer is None and (settings.kubeconfig_path or settings.kubeconfig_dir):
        discoverer = Discoverer(settings.kubeconfig_path, settings.kubeconfig_dir)

    def open_store() -> Store:
        return SQLiteStore(settings.db_path)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        backend = app[BACKEND]
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(backend.executor, store_factory or open_store)
        backend.service = Service(store, app[METRICS])
        try:
            if discoverer is not None:
                await discover(backend, discoverer)
            yield
        finally:
            await loop.run_in_executor(backend.executor, store.close)
            backend.service = None
            backend.shutdown()

    app.cleanup_ctx.append(lifecycle)
    add_routes(app)
    return app


async def discover(backend: Backend, discoverer: Scanner) -> None:
    """Start-up discovery: scan the kubeconfigs (off the loop) and upsert the clusters."""
    found = await asyncio.to_thread(discoverer.scan)
    for problem in found.problems:
        log.warning("discovery: %s", problem)
    clusters = [
        DiscoveredCluster(c.name, c.endpoint, c.kubeconfig_secret_ref) for c in found.clusters
    ]
    added, updated = await backend.run(lambda s: s.upsert_discovered(clusters))
    log.info(
        "discovery: %d cluster(s) found, %d added, %d updated, %d problem(s)",
        len(clusters),
        added,
        updated,
        len(found.problems),
    )
