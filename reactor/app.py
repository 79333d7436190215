"""The reactor's aiohttp application: ``create_app(settings, ...)``.

Start-up (``cleanup_ctx``, in order): open the store on the store thread, run start-up
discovery (kubeconfigs -> clusters, an upsert), start the list+watch of the management
cluster's Secrets and their upserts (``--discovery.kubernetes``, ``reactor.apidiscovery``),
then serve. Shutdown, in reverse, after aiohttp has finished the requests in flight: the
Secrets' upserts and the informer stop, housekeeping stops (letting a running checkpoint
finish), then the store is closed on its thread and the thread is joined.
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

from fleetwatch.common.version import register_process_metrics
from fleetwatch.common.waits import wait_event
from fleetwatch.common.webconfig import WebConfig
from fleetwatch.common.webguard import add_headers, guard_middlewares
from fleetwatch.discovery import Discoverer, Discovery
from fleetwatch.discovery.apimetrics import CountedHealth, InformerCollector, InformerHealth
from fleetwatch.discovery.apisource import build_informer, read_credentials
from fleetwatch.kube.kubeapi import KubeApi
from reactor.api.auth import TOKEN, TokenSource
from reactor.api.handlers import (
    BASIC_AUTH,
    add_routes,
    auth_middleware,
    auth_problem,
    errors_middleware,
    foreground_middleware,
)
from reactor.api.health import add_health_routes
from reactor.apidiscovery import API_DISCOVERY, ApiDiscovery
from reactor.cd.settings import CdSettings
from reactor.cd.setup import setup_cd
from reactor.context import BACKEND, METRICS, SETTINGS, Backend, ReactorSettings, StoreThread
from reactor.metrics import ReactorMetrics
from reactor.models import build_adapters
from reactor.reconcile import setup_reconciliation
from reactor.secretlink import FleetSource, InlineSecrets, SecretsProcess
from reactor.service import DiscoveredCluster, Service
from reactor.store import Store, StoreUnavailable, database
from reactor.store.database import parse_db_url, sqlite_url
from reactor.store.pg_pipeline import PipelinedDeploys
from reactor.store.postgres import PostgresStore

log = logging.getLogger(__name__)

#: Seconds between two WAL checkpoints: the WAL stays small, and no commit pays for one.
HOUSEKEEPING_INTERVAL_S = 1.0
#: Seconds between two sweeps of the history kept (``--db.retention``), and the rows one
#: transaction of a sweep deletes.
RETENTION_INTERVAL_S = 60.0
RETENTION_BATCH = 500


class Scanner(Protocol):
    """What start-up discovery needs (``fleetwatch.discovery.scan.Discoverer`` is one)."""

    def scan(self) -> Discovery: ...


def create_app(
    settings: ReactorSettings,
    *,
    registry: CollectorRegistry | None = None,
    store_factory: Callable[[], Store] | None = None,
    discoverer: Scanner | None = None,
    web_config: WebConfig | None = None,
    cd: CdSettings | None = None,
) -> web.Application:
    """Build the reactor app; nothing is opened until it starts.

    ``registry``: where the metrics go (a fresh one by default, never the global one).
    ``store_factory``: the store to open on start (``settings.db_url``, else SQLite at
    ``settings.db_path``).
    ``discoverer``: start-up discovery (built from the settings' kubeconfig paths by default;
    none when neither is set).
    ``web_config``: ``--web.config.file``; its basic auth, allowed SANs and headers apply to
    every path (the TLS part is the server's, ``fleetwatch reactor`` passes it to aiohttp).

    With ``settings.kubernetes`` the management cluster's credentials are read here
    (``fleetwatch.kube.kubeauth.KubeAuthError`` when they cannot be).
    ``cd``: ``--cd.*``, the Flux and Argo CD objects mirrored and paused (``reactor.cd``);
    apart from ``settings`` because ``reactor.cd`` builds on ``reactor.context``.
    """
    build_adapters()  # once per process: no first answer of a kind pays for its schema
    # A valid bearer token passes basic auth too: Alertmanager sends one Authorization header.
    guard = guard_middlewares(web_config, has_bearer_token)
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[foreground_middleware, *guard, errors_middleware, auth_middleware],
        # Bodies are decoded by reactor.api.handlers.read_body: aiohttp's own decoding answers a
        # body declared gzip that is not gzip with a traceback and a dropped connection.
        handler_args={"auto_decompress": False},
    )
    add_headers(app, web_config)
    app[SETTINGS] = settings
    # the OpenAPI document declares basic auth then
    app[BASIC_AUTH] = web_config is not None and bool(web_config.users)
    app[TOKEN] = TokenSource(settings.token, settings.token_file)
    registry = registry if registry is not None else CollectorRegistry()
    register_process_metrics(registry)
    app[METRICS] = ReactorMetrics(registry)
    app[BACKEND] = Backend()
    if discoverer is None and (settings.kubeconfig_path or settings.kubeconfig_dir):
        discoverer = Discoverer(settings.kubeconfig_path, settings.kubeconfig_dir)
    kubeapi: KubeApi | None = None
    secrets: ApiDiscovery | None = None
    if settings.kubernetes is not None:
        # The credentials are read here in either case: a bad kubeconfig fails the start.
        source: FleetSource
        health: InformerHealth | CountedHealth
        if settings.discovery_process:  # which opens its own client
            read_credentials(settings.kubernetes)
            source = SecretsProcess(settings.kubernetes, settings.discovery_debounce_s)
            health = source.health
        else:
            kubeapi, informer = build_informer(settings.kubernetes)
            source = InlineSecrets(informer, settings.kubernetes, settings.discovery_debounce_s)
            health = informer
        secrets = ApiDiscovery(source)
        registry.register(InformerCollector(health, settings.kubernetes.label_selector))
    app[API_DISCOVERY] = secrets

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
        backend.background_reads.start()
        store: Store | None = None
        reader_store: Store | None = None
        background_store: Store | None = None
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
            if isinstance(store, PostgresStore):
                backend.deploys = PipelinedDeploys(
                    store.connector,
                    store.reach,
                    busy_timeout_s=store.busy_timeout_s,
                    lanes=settings.db_writers,
                )
            reader_store = await backend.reads.call(store.reader)
            if reader_store is not None:
                backend.reader = Service(reader_store)
            if reader_store is not None and cd is not None:  # the CD pass's reads
                background_store = await backend.background_reads.call(store.reader)
                if background_store is not None:
                    backend.background_reader = Service(background_store)
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
                files = await discover(backend, discoverer)
                if secrets is not None:
                    secrets.files = files
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
            deploys, backend.deploys = backend.deploys, None
            if deploys is not None:
                deploys.close()
            backend.reader = backend.background_reader = None
            if reader_store is not None:
                await backend.reads.call(reader_store.close)
            await backend.reads.stop()
            if background_store is not None:
                await backend.background_reads.call(background_store.close)
            await backend.background_reads.stop()
            writers, backend.writers = backend.writers, []
            for thread, service in writers:
                await thread.call(service.store.close)
                await thread.stop()
            backend.service = None
            if store is not None:
                await backend.thread.call(store.close)
            await backend.thread.stop()

    async def watch_secrets(app: web.Application) -> AsyncIterator[None]:
        """The informer and the upserts of its clusters, for as long as the app serves:
        started once the store is open and the files discovered, stopped before it closes."""
        if secrets is None:
            yield
            return
        async with contextlib.AsyncExitStack() as stack:
            if kubeapi is not None:
                await stack.enter_async_context(kubeapi)
            await stack.enter_async_context(secrets.source)
            task = asyncio.create_task(
                secrets.run(app[BACKEND]), name="fleetwatch-secret-discovery"
            )
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app.cleanup_ctx.append(lifecycle)
    app.cleanup_ctx.append(watch_secrets)
    setup_reconciliation(app)  # after the store: starts once it is open, stops before it closes
    setup_cd(app, cd)  # likewise
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
        if await wait_event(stop, interval_s):
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
        await wait_event(stop, interval_s)


async def discover(backend: Backend, discoverer: Scanner) -> Discovery:
    """Start-up discovery: scan the kubeconfigs (off the loop) and upsert the clusters;
    what was found (the Secrets' clusters are merged after these)."""
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
    return found
