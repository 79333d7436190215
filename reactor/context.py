"""What a running reactor app holds: its settings, its store thread, and their typed keys."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from fleetwatch.common.foreground import mark_background
from fleetwatch.discovery import MainKubeconfig
from fleetwatch.discovery.apisource import KubernetesDiscovery
from reactor import gate, managed
from reactor.alertmanager.http import DEFAULT_MAX_LISTING_BYTES, AlertmanagerAuth
from reactor.alertmanager.signals import DEFAULT_MAX_FUTURE_SKEW_S
from reactor.metrics import ReactorMetrics
from reactor.service import Service
from reactor.store import AppRecord, retry_conflicts
from reactor.store.pg_pipeline import PipelinedDeploys

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_LISTEN_ADDRESS = "127.0.0.1:9714"
DEFAULT_DB_PATH = Path("fleetwatch.db")
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_DB_WRITERS = 8
DEFAULT_DB_RETENTION_S = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class ReactorSettings:
    db_path: Path = DEFAULT_DB_PATH
    """SQLite file (created if missing; WAL mode adds ``-wal`` and ``-shm`` next to it)."""
    token: str | None = None
    """Bearer token required on ``POST /alerts`` and every mutating call; None: no auth."""
    token_file: Path | None = None
    """File of the token: re-read when it changes and on SIGHUP (``reactor.api.auth``)."""
    max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S
    """A status alert starting later than now plus this is skipped, never stored: one
    dated in year 9999 would otherwise win over every real alert of its cluster for ever."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Bigger bodies get 413. 4 MiB holds a webhook of several thousand alerts."""
    db_busy_timeout_s: float = 5.0
    """How long a transaction waits for another writer's lock before the call answers 503."""
    db_url: str | None = None
    """``sqlite:///PATH`` or ``postgresql://user@host:port/db`` (``reactor.store.database``);
    None: the SQLite file ``db_path``."""
    db_writers: int = DEFAULT_DB_WRITERS
    """Store threads writing in parallel, each on its own connection, when the store allows
    it (PostgreSQL; a SQLite file has one writer), and on PostgreSQL the most connections
    deployments are pipelined on (``reactor.store.pg_pipeline``). More: throughput on a remote
    database."""
    db_retention_s: float = DEFAULT_DB_RETENTION_S
    """Closed outages older than this are deleted, in small batches off the request path;
    0 keeps everything. Open outages, and what anything points at, always stay."""
    db_password: str | None = field(default=None, repr=False)
    """PostgreSQL password (from ``--db.password-file`` or ``PGPASSWORD``); wins over one in
    ``db_url``. Never printed: not even in this object's repr."""
    db_password_file: Path | None = None
    """File ``db_password`` was read from: read again when it changes and when the database
    refuses a connection, so a rotated password needs no restart (``reactor.secretfile``)."""
    kubeconfig_path: MainKubeconfig = None
    """Main kubeconfig scanned at start-up; None (and no dir): no discovery."""
    kubeconfig_dir: Path | None = None
    """Folder of extra kubeconfigs (every visible file, sub-folders included) scanned at
    start-up."""
    alertmanager_urls: tuple[str, ...] = field(default=(), repr=False)
    """Alertmanagers (peers of one cluster) to reconcile with (``reactor.reconcile``); a URL
    may hold basic-auth credentials, hence no repr."""
    alertmanager_auth: AlertmanagerAuth | None = field(default=None, repr=False)
    """Credentials for every Alertmanager, from ``--alertmanager.http-config.file``
    (``reactor.alertmanager.http``); None: the URL's own, if any."""
    alertmanager_max_listing_bytes: int = DEFAULT_MAX_LISTING_BYTES
    """A listing bigger than this is not read: that reconciliation fails, counted."""
    reconcile_interval_s: float = 60.0
    """Seconds between two reconciliations; 0: none (webhooks only)."""
    min_uptime_s: float = 300.0
    """An Alertmanager up for less than this resolves nothing by no longer listing it."""
    kubernetes: KubernetesDiscovery | None = None
    """``--discovery.kubernetes`` and its flags: clusters from the management cluster's
    Secrets, upserted whenever they change (``reactor.apidiscovery``); None: off."""
    discovery_debounce_s: float = 1.0
    """Seconds a change of those Secrets waits for the rest of its burst before they are
    read and upserted: a rotation of every Secret at once is one round of upserts."""
    discovery_process: bool = False
    """Those Secrets listed and read in a process of their own (``reactor.secretlink``;
    ``--discovery.kubernetes.process``, on by default in ``fleetwatch reactor``); False:
    an informer in this process (tests that read its log lines)."""


class StoreThread:
    """The one thread that runs every store call of this process.

    SQLite is blocking, so it never runs on the event loop; one thread (not a pool) also
    serialises every transaction of this process, so a deployment and a cascade for the
    same cluster can never interleave (``BEGIN IMMEDIATE`` covers other processes).

    Calls still commit one by one; what is batched is the traffic between the two sides:
    the calls made during one turn of the event loop go to the thread together, and the
    results of the calls the thread ran back to back return together. Under load that
    saves most of the thread wake-ups (and the GIL hand-overs that come with them).
    """

    #: After a call this long, hand back what is done before running the next ones.
    FLUSH_AFTER_S = 0.002

    def __init__(self, background: bool = False) -> None:
        #: it runs background work (``fleetwatch.common.foreground``): the CD's reads
        self.background = background
        self._queue: queue.SimpleQueue[list[_Call] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="fleetwatch-store", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[_Call] = []
        #: calls given to this thread and not answered yet (read on the event loop only)
        self.inflight = 0

    def start(self) -> None:
        """Start the thread; calls are then taken from the running event loop only."""
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the store thread has not started")
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append(_Call(fn, future))
        if len(self._pending) == 1:
            loop.call_soon(self._submit)
        self.inflight += 1
        try:
            return await future
        finally:
            self.inflight -= 1

    def _submit(self) -> None:
        batch, self._pending = self._pending, []
        self._queue.put(batch)

    async def stop(self) -> None:
        """Finish the calls queued so far, then end the thread."""
        if not self._thread.is_alive():
            return
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)

    def _work(self) -> None:
        if self.background:
            mark_background()
        while True:
            batches = [self._queue.get()]
            while True:
                try:
                    batches.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            done: list[tuple[_Call, Any, BaseException | None]] = []
            for batch in batches:
                if batch is None:
                    self._hand_back(done)
                    return
                for call in batch:
                    started = time.monotonic()
                    try:
                        done.append((call, call.fn(), None))
                    except BaseException as exc:  # handed to the caller, who re-raises it
                        done.append((call, None, exc))
                    if time.monotonic() - started > self.FLUSH_AFTER_S:
                        self._hand_back(done)
                        done = []
            self._hand_back(done)

    def _hand_back(self, done: list[tuple[_Call, Any, BaseException | None]]) -> None:
        if done and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
                self._loop.call_soon_threadsafe(_resolve, done)


@dataclass(frozen=True, slots=True)
class _Call:
    fn: Callable[[], Any]
    future: asyncio.Future[Any]


def _resolve(items: list[tuple[_Call, Any, BaseException | None]]) -> None:
    for call, result, exc in items:
        if call.future.cancelled():
            continue
        if exc is not None:
            call.future.set_exception(exc)
        else:
            call.future.set_result(result)


class UnavailableLog:
    """The "database unavailable" warning once per outage of the database, not per call.

    While the database is down every call answers 503; under load, a warning per call
    would be thousands of identical lines a second. The first refused call warns, the
    others are DEBUG, and the first store operation that succeeds again says how many
    calls were refused.
    """

    def __init__(self) -> None:
        self.refused = 0  #: calls answered 503 since the warning

    def refused_call(self, what: str, exc: Exception) -> None:
        if self.refused == 0:
            log.warning(
                "database unavailable (%s: %s): calls answer 503 until it is back", what, exc
            )
        else:
            log.debug("database unavailable for %s: %s", what, exc)
        self.refused += 1

    def answered(self) -> None:
        if self.refused:
            log.warning("database answers again; %d call(s) were refused with 503", self.refused)
            self.refused = 0


class Backend:
    """The service and the threads that run it, once the app has started.

    Writes (and reads when the store has no separate reader) run on ``thread``; reads run
    on ``reads`` with a read-only handle of the store when it has one (SQLite in WAL mode).
    """

    def __init__(self) -> None:
        self.thread = StoreThread()
        self.reads = StoreThread()
        self._service: Service | None = None
        self.reader: Service | None = None
        #: Background reads (the CD pass's: every cluster and mirrored app, a few hundred
        #: milliseconds at 20,000 clusters) on a thread and read handle of their own, so
        #: that a request's read never queues behind one, and their loops give way to
        #: requests (``fleetwatch.common.foreground``). None: on :attr:`reads`.
        self.background_reads = StoreThread(background=True)
        self.background_reader: Service | None = None
        #: More store threads, each with a service over its own connection, when the store
        #: allows parallel writers (PostgreSQL: its row locks serialise what must be). Calls
        #: go to the least busy of ``thread`` and these.
        self.writers: list[tuple[StoreThread, Service]] = []
        self.unavailable = UnavailableLog()
        #: Called on the event loop (:meth:`changed`, which the writer calls: the store
        #: runner does not read results) after a write that moved apps in or out of an
        #: outage committed (a notification, a reconciliation, a reset: their results'
        #: ``outages_moved``), and after
        #: clusters were added, changed or deleted (discovery, ``POST``/``DELETE
        #: /clusters``: the CD objects resolve against them): the CD actuator's wake-up.
        self.outage_listeners: list[Callable[[], None]] = []
        #: On PostgreSQL: deployments sent from the event loop, without a store thread.
        self.deploys: PipelinedDeploys | None = None

    @property
    def service(self) -> Service:
        if self._service is None:
            raise RuntimeError("the reactor app has not started")
        return self._service

    @service.setter
    def service(self, service: Service | None) -> None:
        self._service = service

    async def run(self, operation: Callable[[Service], T]) -> T:
        """Run ``operation(service)`` on the store thread, e.g. ``run(lambda s: s.deploy(...))``."""
        service, thread = self.service, self.thread
        for other_thread, other_service in self.writers:
            if other_thread.inflight < thread.inflight:
                service, thread = other_service, other_thread
        # A call that lost a race with another replica's transaction runs again.
        result = await thread.call(lambda: retry_conflicts(lambda: operation(service)))
        self.unavailable.answered()
        return result

    def changed(self) -> None:
        """Tell the listeners (the CD actuator) that what they resolve against changed."""
        for listener in self.outage_listeners:
            listener()

    async def deploy(self, app: str, cluster: str) -> AppRecord:
        """``Service.deploy``; on PostgreSQL decided from the event loop (the hot path,
        ``reactor.store.pg_pipeline``), the rare answers that need more reads on a store thread:
        a mirrored app's name (managed by Flux or Argo CD?) and an unknown name (which?)."""
        deploys = self.deploys
        if deploys is None or managed.mirrored(app):
            return await self.run(lambda s: s.deploy(app, cluster))
        place = await deploys.deploy(app, cluster, gate.REFUSED)
        self.unavailable.answered()
        if place is None:
            return await self.run(lambda s: s.deploy(app, cluster))
        return self.service.placed(app, cluster, place)

    async def read(self, operation: Callable[[Service], T]) -> T:
        """Run a read-only ``operation`` on the reader thread (the store thread if none)."""
        reader = self.reader
        if reader is None:
            return await self.run(operation)
        return await self.reads.call(lambda: operation(reader))

    async def read_background(self, operation: Callable[[Service], T]) -> T:
        """:meth:`read`, for background work: on :attr:`background_reads` when the store
        gave it a handle, where nothing a request waits for queues behind it."""
        reader = self.background_reader
        if reader is None:
            return await self.read(operation)
        return await self.background_reads.call(lambda: operation(reader))

    def for_background(self) -> BackgroundRunner:
        """This backend as the CD integration runs it: its reads are background reads."""
        return BackgroundRunner(self)


class BackgroundRunner:
    """A :class:`Backend` whose reads are :meth:`Backend.read_background` (``reactor.cd.
    storeops.StoreRunner``); writes go to the store thread as every write does."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def run(self, operation: Callable[[Service], T]) -> T:
        return await self.backend.run(operation)

    async def read(self, operation: Callable[[Service], T]) -> T:
        return await self.backend.read_background(operation)


SETTINGS = web.AppKey("settings", ReactorSettings)
METRICS = web.AppKey("metrics", ReactorMetrics)
BACKEND = web.AppKey("backend", Backend)
