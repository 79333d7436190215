"""The reactor's aiohttp application: ``create_app(settings, ...)``.

Start-up (``cleanup_ctx``, in order): open the store on the store thread, run start-up
discovery (kubeconfigs -> clusters, an upsert), then serve. Shutdown, in reverse, after
aiohttp has finished the requests in flight: housekeeping stops (letting a running
checkpoint finish), then the store is closed on its thread and the thread is joined.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry

from common.basicauth import BasicAuth, basic_auth_middleware
from common.version import register_process_metrics
from common.webconfig import WebConfig
from discovery import Discoverer, Discovery
from reactor import database
from reactor.api import (
    BASIC_AUTH,
    add_routes,
    auth_middleware,
    auth_problem,
    errors_middleware,
)
from reactor.auth import TOKEN, TokenSource
from reactor.context import BACKEND, METRICS, SETTINGS, Backend, ReactorSettings, StoreThread
from reactor.database import parse_db_url, sqlite_url
from reactor.health import add_health_routes
from reactor.metrics import ReactorMetrics
from reactor.reconcile import setup_reconciliation
from reactor.service import DiscoveredCluster, Service
from reactor.store import Store, StoreUnavailable

log = logging.getLogger(__name__)

#: Seconds between two WAL checkpoints: the WAL stays small, and no commit pays for one.
HOUSEKEEPING_INTERVAL_S = 1.0
#: Seconds between two sweeps of the history kept (``--db.retention``), and the rows one
#: transaction of a sweep deletes.
RETENTION_INTERVAL_S = 60.0
RETENTION_BATCH = 500


class Scanner(Protocol):
    """What start-up discovery needs (``discovery.scan.Discoverer`` is one)."""

    def scan(self) -> Discovery: ...


def create_app(
    settings: ReactorSettings,
    *,
    registry: CollectorRegistry | None = None,
    store_factory: Callable[[], Store] | None = None,
    discoverer: Scanner | None = None,
    web_config: WebConfig | None = None,
) -> web.Application:
    """Build the reactor app; nothing is opened until it starts.

    ``registry``: where the metrics go (a fresh one by default, never the global one).
    ``store_factory``: the store to open on start (``settings.db_url``, else SQLite at
    ``settings.db_path``).
    ``discoverer``: start-up discovery (built from the settings' kubeconfig paths by default;
    none when neither is set).
    ``web_config``: ``--web.config.file``; its basic auth guards every path (the TLS part is
    the server's, ``fleetwatch reactor`` passes it to aiohttp).
    """
    guard = []
    if web_config is not None and web_config.users:
        # A valid bearer token passes too: Alertmanager sends one Authorization header.
        guard.append(basic_auth_middleware(BasicAuth(web_config.users), has_bearer_token))
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[*guard, errors_middleware, auth_middleware],
        # Bodies are decoded by reactor.api.read_body: aiohttp's own decoding answers a
        # body declared gzip that is not gzip with a traceback and a dropped connection.
        handler_args={"auto_decompress": False},
    )
    app[SETTINGS] = settings
    app[BASIC_AUTH] = bool(guard)  # the OpenAPI document declares basic auth then
    app[TOKEN] = TokenSource(settings.token, settings.token_file)
    registry = registry if registry is not None else CollectorRegistry()
    register_process_metrics(registry)
    app[METRICS] = ReactorMetrics(registry)
    app[BACKEND] = Backend()
    if discoverer is None and (settings.kubeconfig_path or settings.kubeconfig_dir):
        discoverer = Discoverer(settings.kubeconfig_path, settings.kubeconfig_dir)

    def open_store() -> Store:
        url = parse_db_url(settings.db_url) if settings.db_url else sqlite_url(settings.db_path)
        return database.open_store(
            url,
            password=settings.db_password,
            password_file=settings.db_password_file,
            busy_timeout_s=settings.db_busy_timeout_s,
        )

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        backend = app[BACKEND]
        backend.thread.start()
        backend.reads.start()
        store: Store | None = None
        reader_store: Store | None = None
        housekeeping: asyncio.Task[None] | None = None
        history: asyncio.Task[None] | None = None
        stop_housekeeping = asyncio.Event()
        try:
            store = await backend.thread.call(store_factory or open_store)
            backend.service = Service(store, app[METRICS])
            for _ in range(settings.db_writers - 1):
                writer = await backend.thread.call(store.writer)
                if writer is None:  # one writer only (SQLite)
                    break
                thread = StoreThread()
                thread.start()
                backend.writers.append((thread, Service(writer, app[METRICS])))
            reader_store = await backend.reads.call(store.reader)
            if reader_store is not None:
                backend.reader = Service(reader_store)
            housekeeping = asyncio.create_task(
                keep_house(store, stop_housekeeping, HOUSEKEEPING_INTERVAL_S),
                name="fleetwatch-store-housekeeping",
            )
            if settings.db_retention_s > 0:
                history = asyncio.create_task(
                    keep_history(
                        backend, settings.db_retention_s, stop_housekeeping, RETENTION_INTERVAL_S
                    ),
                    name="fleetwatch-store-retention",
                )
            if discoverer is not None:
                await discover(backend, discoverer)
            yield
        finally:
            if history is not None:
                stop_housekeeping.set()
                await history  # ends between two batches
            if housekeeping is not None:
                # Not cancel(): that would leave a running checkpoint on its thread while
                # the store closes under it (SIGSEGV). Let it finish, then stop.
                stop_housekeeping.set()
                await housekeeping
            backend.reader = None
            if reader_store is not None:
                await backend.reads.call(reader_store.close)
            await backend.reads.stop()
            writers, backend.writers = backend.writers, []
            for thread, service in writers:
                await thread.call(service.store.close)
                await thread.stop()
            backend.service = None
            if store is not None:
                await backend.thread.call(store.close)
            await backend.thread.stop()

    app.cleanup_ctx.append(lifecycle)
    setup_reconciliation(app)  # after the store: starts once it is open, stops before it closes
    add_routes(app)
    add_health_routes(app)
    return app


def has_bearer_token(request: web.Request) -> bool:
    """The request carries the reactor's bearer token (none configured: False)."""
    token = request.app[TOKEN].current()
    header = request.headers.get("Authorization", "")
    return token is not None and auth_problem(header, token) is None


async def keep_house(store: Store, stop: asyncio.Event, interval_s: float) -> None:
    """Store housekeeping (the SQLite WAL checkpoint) every ``interval_s``, off the loop.

    Returns once ``stop`` is set, and never while a checkpoint runs: the store may only be
    closed after this has returned.
    """
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
        if stop.is_set():
            return
        try:
            await asyncio.to_thread(store.checkpoint)
        except StoreUnavailable as exc:
            log.warning("store housekeeping failed, will retry: %s", exc)


async def keep_history(
    backend: Backend, retention_s: float, stop: asyncio.Event, interval_s: float
) -> None:
    """Delete the outages closed more than ``retention_s`` ago: at start, then every
    ``interval_s``, ``RETENTION_BATCH`` rows per transaction, so a sweep never holds the
    store for long (deployments and notifications run between two batches). Returns once
    ``stop`` is set."""
    while not stop.is_set():
        closed_before = int((time.time() - retention_s) * 1_000_000)

        def batch(service: Service, before: int = closed_before) -> int:
            return service.prune_outages(before, RETENTION_BATCH)

        try:
            while not stop.is_set():
                deleted = await backend.run(batch)
                if deleted < RETENTION_BATCH:
                    break
        except StoreUnavailable as exc:
            log.warning("retention sweep failed, will retry: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)


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
