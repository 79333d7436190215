"""Reconciliation with Alertmanager: what a lost notification can cost is bounded to one interval.

Alertmanager may drop a notification for good: a "resolved" sent while the reactor was
unreachable is never sent again. Webhooks stay the fast path; every
``--alertmanager.reconcile-interval`` (and at start) the reactor also reads the status
alerts each Alertmanager lists (``reactor.alertmanager.client``) and folds them into the state
with the same state machine as a webhook, in one transaction:

* An alert listed and not suppressed is *firing since its startsAt*, as in a webhook.
* A suppressed alert (inhibited by the storm guard, or silenced for maintenance) carries
  no news, so it never causes a cascade; being listed, it is not resolved either.
* A status alert the reactor holds as firing that no Alertmanager lists any more (none
  of those that answered: the URLs are peers of one cluster, and Prometheus sends every
  alert to each) is resolved, at the time of the reconciliation (the moment we learn it;
  the true end is earlier and unknown). Only when one of those Alertmanagers has been up
  for ``--alertmanager.min-uptime``: a freshly restarted one lists nothing until
  Prometheus re-sends its alerts, and that absence proves nothing. Never for a cluster
  named by a listed entry that could not be read (it may be that very alert), nor at all
  when an entry's labels could not be read.
* Such a resolution is *inferred* (``reactor.statemachine``): provisional, the same
  instance seen firing again (listed again, re-sent, repeated) revives it. So an
  Alertmanager that was wrong to list nothing (restarted empty before min-uptime could
  tell, the wrong URL) costs one interval, not the rest of the alert's life.
* Times are compared to the millisecond (``reactor.alertmanager.signals``): the API lists
  milliseconds where webhooks bring nanoseconds, and one instance must not read as two.

The reactor's state is read before the Alertmanagers are, so an alert notified (and so
stored) after the listing was taken is never resolved by it. Nothing is news twice: a
firing instance the reactor knows, or a second resolution of one instance, changes nothing,
so several replicas reconciling the same Alertmanagers at once change the state once.

The loop is a task owned by the app (started after the store opens, cancelled and awaited
before it closes); every request has a timeout; an Alertmanager that fails is counted each
time and logged once per change (failing, answering again).

A little over 300 lines: the loop, its metrics and the fold of listed alerts into
signals are one feature.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from fleetwatch.common import metricnames
from reactor.alertmanager.client import (
    STATUS_ALERT_NAMES,
    AlertmanagerClient,
    AlertmanagerError,
    Listing,
    display_name,
)
from reactor.alertmanager.http import has_credentials
from reactor.alertmanager.signals import (
    DEFAULT_MAX_FUTURE_SKEW_S,
    Alert,
    Signal,
    Webhook,
    is_name,
    status_signals,
)
from reactor.context import BACKEND, METRICS, SETTINGS, Backend
from reactor.reasons import ClusterNote, Listed, listing_notes, note_rows, stored, told, write_notes
from reactor.statemachine import AlertState, ClusterAlertState, StatusAlert, is_newer, to_precision
from reactor.store import ClusterRecord, StoreUnavailable

log = logging.getLogger(__name__)

#: Clusters named in one log line at most.
LOGGED_NAMES = 10
#: Longest wait for one request to an Alertmanager (shorter when the interval is).
MAX_REQUEST_TIMEOUT_S = 10.0
MIN_REQUEST_TIMEOUT_S = 2.0


class ReconcileMetrics:
    """The reconciliation's metrics, on the reactor's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter(
            metricnames.REACTOR_RECONCILE_RUNS,
            "Reconciliations with Alertmanager started.",
            registry=registry,
        )
        self.failures = Counter(
            metricnames.REACTOR_RECONCILE_FAILURES,
            "Reconciliations in which this Alertmanager (host:port) could not be read.",
            ["alertmanager"],
            registry=registry,
        )
        self.changes = Counter(
            metricnames.REACTOR_RECONCILE_CHANGES,
            "Clusters whose alert state a reconciliation changed (news no webhook brought).",
            registry=registry,
        )
        self.last_success = Gauge(
            metricnames.REACTOR_RECONCILE_LAST_SUCCESS,
            "When the last reconciliation that read at least one Alertmanager and applied "
            "what it learnt ended (Unix time); 0 before the first one.",
            registry=registry,
        )
        self.interval = Gauge(
            metricnames.REACTOR_RECONCILE_INTERVAL,
            "Seconds between two reconciliations with Alertmanager; 0: none (no "
            "--alertmanager.url, or an interval of 0).",
            registry=registry,
        )


RECONCILE_METRICS = web.AppKey("reconcile_metrics", ReconcileMetrics)


@dataclass(frozen=True, slots=True)
class PeerListing:
    """One Alertmanager's listing, and whether it has been up long enough to be believed."""

    name: str
    listing: Listing
    old_enough: bool


@dataclass(frozen=True, slots=True)
class Plan:
    """What one reconciliation learnt: news to fold, and how much of each kind."""

    signals: tuple[Signal, ...]
    listed: int  #: status alerts listed, suppressed or not
    firing: int  #: of which news: listed, not suppressed, newer than what the reactor held
    resolved: int  #: held firing, listed by no Alertmanager, resolved now
    skipped: tuple[str, ...]  #: listed status alerts that could not be used, and why
    #: the reasons the listed alerts tell and what holds an OFFLINE back (reactor.reasons)
    notes: tuple[ClusterNote, ...] = ()


def plan(
    held: Iterable[ClusterRecord],
    peers: Sequence[PeerListing],
    now_us: int,
    max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
) -> Plan:
    """The news in the Alertmanagers' listings, against what the reactor ``held``.

    The alerts go through the webhook's checks (``reactor.alertmanager.signals.status_signals``):
    one
    starting more than ``max_future_skew_s`` after ``now_us`` is skipped, as in a webhook.

    Pure (no I/O), so the rules are tested as a table. News is what the state machine would
    take as newer; the state machine still judges it in the transaction (the state may have
    moved on since ``held`` was read, never backwards).
    """
    now_us = to_precision(now_us)
    alerts: list[Alert] = []
    listed: set[tuple[str, str, int]] = set()
    unsure: set[str] = set()  #: clusters a listed entry that could not be read may name
    heard: list[Listed] = []
    for peer in peers:
        unsure |= peer.listing.unreadable_for
        for item in peer.listing.alerts:
            name, where = item.labels.get("alertname", ""), item.labels.get("cluster", "")
            if name not in STATUS_ALERT_NAMES or not is_name(where):
                continue
            listed.add((name, where, item.starts_at))
            if item.starts_at <= now_us + max_future_skew_s * 1_000_000:
                said = told(item.annotations)
                kind = StatusAlert(name)
                heard.append(
                    Listed(where, kind, item.starts_at, item.inhibited, item.silenced, said)
                )
            if not item.suppressed:
                alerts.append(Alert("firing", item.labels, item.starts_at, None))
    may_resolve = any(peer.old_enough for peer in peers) and not any(
        peer.listing.unreadable_unknown for peer in peers
    )
    missing: list[Signal] = []
    if may_resolve:
        for cluster in held:
            if cluster.name in unsure:
                continue
            for kind, state in (
                (StatusAlert.ONLINE, cluster.state.online),
                (StatusAlert.OFFLINE, cluster.state.offline),
            ):
                if state is None or not state.firing or state.starts_at >= now_us:
                    continue
                if (kind.value, cluster.name, state.starts_at) not in listed:
                    gone = AlertState(False, state.starts_at, now_us, inferred=True)
                    missing.append(Signal(cluster.name, kind, gone))
    found = status_signals(
        Webhook(tuple(alerts)), now=now_us / 1_000_000, max_future_skew_s=max_future_skew_s
    )
    known = {c.name: c.state for c in held}
    news = tuple(s for s in (*found.signals, *missing) if _is_news(s, known))
    firing = sum(1 for s in news if s.state.firing)
    notes = tuple(listing_notes(heard))
    return Plan(news, len(listed), firing, len(news) - firing, found.skipped, notes)


def _is_news(signal: Signal, known: dict[str, ClusterAlertState]) -> bool:
    state = known.get(signal.cluster)
    if state is None:
        return True
    held = state.online if signal.alert is StatusAlert.ONLINE else state.offline
    return is_newer(signal.state, held)


class Reconciler:
    """Reads the Alertmanagers and folds what they say, once per :meth:`run_once`."""

    def __init__(
        self,
        clients: Sequence[AlertmanagerClient],
        backend: Backend,
        metrics: ReconcileMetrics,
        min_uptime_s: float,
        max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clients = clients
        self.backend = backend
        self.metrics = metrics
        self.min_uptime_s = min_uptime_s
        self.max_future_skew_s = max_future_skew_s
        self.clock = clock
        #: Alertmanager name -> why it failed last time; absent: it answered last time.
        self._failing: dict[str, str] = {}
        #: clusters unreadable entries named at the last run (``*``: any), as last said
        self._unsure: tuple[str, ...] = ()

    async def run_once(self) -> int:
        """One reconciliation; returns the number of clusters it changed.

        Raises :class:`StoreUnavailable` when the state cannot be read or written (the
        loop logs it and tries again at the next interval).
        """
        self.metrics.runs.inc()
        # The state first: whatever a webhook stores after this, the listings cannot undo.
        held = await self.backend.read(lambda s: s.clusters())
        results = await asyncio.gather(
            *(client.listing() for client in self.clients), return_exceptions=True
        )
        now = self.clock()
        peers: list[PeerListing] = []
        for client, result in zip(self.clients, results, strict=True):
            if isinstance(result, AlertmanagerError):
                self._failed(client.name, str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                self._answered(client.name)
                uptime_s = now - result.started_at / 1_000_000
                peers.append(PeerListing(client.name, result, uptime_s >= self.min_uptime_s))
        if not peers:
            return 0
        # Off the loop: a listing of tens of thousands of alerts takes a while to fold.
        news = await asyncio.to_thread(
            plan, held, peers, int(now * 1_000_000), self.max_future_skew_s
        )
        for line in news.skipped[:3]:
            log.debug("reconciliation skipped: %s", line)
        self._say_unreadable(peers)
        changed = 0
        if news.signals:
            signals = news.signals
            applied = await self.backend.run(lambda s: s.apply_signals(signals))
            if applied.outages_moved:
                self.backend.changed()  # the CD actuator's wake-up
            changed = len(applied.clusters_changed)
            self.metrics.changes.inc(changed)
        # Written when they change a row, or name a cluster the signals may have created.
        if news.notes and (news.signals or note_rows(news.notes, stored(held))):
            notes = news.notes
            await self.backend.run(lambda s: write_notes(s.store, notes))
        self.metrics.last_success.set(self.clock())
        if changed:
            log.info(
                "reconciliation: %d cluster(s) changed (%d firing alert(s) and %d resolved "
                "no webhook had brought)",
                changed,
                news.firing,
                news.resolved,
            )
        else:
            log.debug(
                "reconciliation: nothing new (%d status alert(s) listed by %d Alertmanager(s))",
                news.listed,
                len(peers),
            )
        if not any(peer.old_enough for peer in peers):
            log.debug(
                "reconciliation: no Alertmanager up for %gs yet: alerts no longer listed are "
                "not resolved",
                self.min_uptime_s,
            )
        return changed

    def _say_unreadable(self, peers: Sequence[PeerListing]) -> None:
        """A warning when listed entries that cannot be read start (or stop) keeping
        clusters from being resolved; the same entries every interval are said once."""
        unsure: set[str] = set()
        blind = False
        for peer in peers:
            unsure |= peer.listing.unreadable_for
            blind = blind or peer.listing.unreadable_unknown
        now = ("*",) if blind else tuple(sorted(unsure))
        if now == self._unsure:
            return
        self._unsure = now
        if blind:
            log.warning(
                "reconciliation: an Alertmanager lists an alert whose labels cannot be read: "
                "no alert is resolved by absence until it is gone"
            )
        elif unsure:
            shown = ", ".join(now[:LOGGED_NAMES]) + (" ..." if len(now) > LOGGED_NAMES else "")
            log.warning(
                "reconciliation: an Alertmanager lists status alerts that cannot be read for "
                "%d cluster(s) (%s): none of their alerts is resolved by absence",
                len(now),
                shown,
            )
        else:
            log.info("reconciliation: every listed alert can be read again")

    def _failed(self, name: str, reason: str) -> None:
        self.metrics.failures.labels(name).inc()
        if self._failing.get(name) is None:
            log.warning(
                "reconciliation: cannot read Alertmanager %s: %s (said once until it answers)",
                name,
                reason,
            )
        else:
            log.debug("reconciliation: Alertmanager %s still failing: %s", name, reason)
        self._failing[name] = reason

    def _answered(self, name: str) -> None:
        if self._failing.pop(name, None) is not None:
            log.info("reconciliation: Alertmanager %s answers again", name)

    async def run_forever(self, interval_s: float) -> None:
        """Reconcile now, then every ``interval_s`` (from the start of one to the next)."""
        store_failing = False
        while True:
            started = time.monotonic()
            try:
                await self.run_once()
                if store_failing:
                    log.info("reconciliation: the database answers again")
                store_failing = False
            except StoreUnavailable as exc:
                if not store_failing:
                    log.warning("reconciliation: the database is unavailable: %s", exc)
                store_failing = True
            except Exception:  # a bug: say it, keep reconciling
                log.exception("reconciliation failed")
            await asyncio.sleep(max(0.0, started + interval_s - time.monotonic()))


def request_timeout(interval_s: float) -> float:
    """Per request: the interval, within 2 to 10 seconds."""
    return min(MAX_REQUEST_TIMEOUT_S, max(MIN_REQUEST_TIMEOUT_S, interval_s))


def setup_reconciliation(app: web.Application) -> None:
    """Register the metrics and, when Alertmanagers are configured, the reconciliation task.

    Call after the store's ``cleanup_ctx``: the task starts once the store is open and is
    cancelled (and awaited) before the store closes.
    """
    settings = app[SETTINGS]
    metrics = ReconcileMetrics(app[METRICS].registry)
    app[RECONCILE_METRICS] = metrics
    urls = settings.alertmanager_urls
    interval_s = settings.reconcile_interval_s
    if not urls or interval_s <= 0:
        return
    metrics.interval.set(interval_s)
    for url in urls:
        if has_credentials(url):
            log.warning(
                "--alertmanager.url %s carries credentials, which the command line shows to "
                "every user of the machine (ps): put them in --alertmanager.http-config.file",
                display_name(url),
            )

    async def reconciliation(app: web.Application) -> AsyncIterator[None]:
        timeout = request_timeout(interval_s)
        async with aiohttp.ClientSession() as session:
            clients = [
                AlertmanagerClient(
                    url,
                    session,
                    timeout,
                    auth=settings.alertmanager_auth,
                    max_bytes=settings.alertmanager_max_listing_bytes,
                )
                for url in urls
            ]
            reconciler = Reconciler(
                clients,
                app[BACKEND],
                metrics,
                settings.min_uptime_s,
                max_future_skew_s=settings.max_future_skew_s,
            )
            log.info(
                "reconciliation with %s every %gs (alerts no longer listed are resolved once "
                "an Alertmanager has been up %gs)",
                ", ".join(c.name for c in clients),
                interval_s,
                settings.min_uptime_s,
            )
            task = asyncio.create_task(
                reconciler.run_forever(interval_s), name="fleetwatch-reconciliation"
            )
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app.cleanup_ctx.append(reconciliation)
