"""The reactor's operations: each one is exactly one store transaction.

One function per thing the API (or start-up discovery) can ask: apply a notification, add
a cluster, deploy an app... Each opens one write transaction, consults the pure rules
(``reactor.statemachine``, ``reactor.gate``), writes, and commits; an exception anywhere
rolls everything back. Counters are bumped only after the commit, so a rolled-back call
counts nothing; the one exception is a refusal of the gate, counted as it is decided.

Calls are synchronous and blocking, on store threads, never on the event loop. On SQLite
one thread serialises them; on PostgreSQL the row lock on each cluster serialises what
must be: a deployment racing with a cascade is refused or degraded with the others. A
notification also records the reason its alerts tell (``reactor.reasons``).

Long because it holds one method per API operation and notification, each one
transaction; split, the gate would sit apart from the cascade it must agree with.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from reactor import gate
from reactor.alertmanager.signals import Signal, format_time
from reactor.managed import managed_elsewhere, mirrored
from reactor.metrics import ReactorMetrics
from reactor.reasons import notes_for
from reactor.statemachine import (
    AlertState,
    AppStatus,
    CloseOutage,
    ClusterAlertState,
    DegradeApps,
    OpenOutage,
    RestoreApps,
    Status,
    StatusAlert,
    apply,
)
from reactor.store import (
    MIRRORED_PREFIXES,
    AppRecord,
    ClusterRecord,
    OutageRecord,
    Placement,
    StatusCounts,
    Store,
    Transaction,
)

log = logging.getLogger(__name__)

#: Status changes without a cascade are logged as one line per kind of change, naming
#: at most this many clusters (the first notification of a big fleet changes them all).
LOGGED_NAMES = 20

SOURCE_DISCOVERY = "discovery"
SOURCE_API = "api"
SOURCE_ALERTS = "alerts"


#: Outages shown with a cluster (``GET /clusters/{name}``).
RECENT_OUTAGES = 10


class NotFound(LookupError):
    """An unknown cluster or app name (HTTP 404)."""


class Conflict(RuntimeError):
    """A name that exists already (HTTP 409)."""


class Gated(Conflict):
    """The gate refused a deployment or a reassignment (HTTP 409)."""

    def __init__(self, refusal: gate.Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


@dataclass(frozen=True, slots=True)
class NotificationResult:
    clusters_changed: list[str] = field(default_factory=list)
    clusters_created: list[str] = field(default_factory=list)
    outages_opened: int = 0
    outages_closed: int = 0
    apps_degraded: int = 0
    apps_restored: int = 0

    @property
    def outages_moved(self) -> bool:
        """Apps went into or out of an outage: the caller tells ``Backend.changed``."""
        moved = (self.outages_opened, self.outages_closed, self.apps_degraded)
        return any((*moved, self.apps_restored))


@dataclass(frozen=True, slots=True)
class ResetResult:
    cluster: ClusterRecord  #: as it is after the reset (UNKNOWN, no outage)
    outages_closed: int
    apps_restored: int

    @property
    def outages_moved(self) -> bool:
        """An outage closed: the caller tells ``Backend.changed``."""
        return bool(self.outages_closed)


@dataclass(frozen=True, slots=True)
class DiscoveredCluster:
    name: str
    endpoint: str
    kubeconfig_secret_ref: str


class Service:
    """The operations over one :class:`Store`. Not thread-safe: call from one thread."""

    def __init__(
        self,
        store: Store,
        metrics: ReactorMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.clock = clock

    # -- notifications ---------------------------------------------------------------

    def apply_signals(self, signals: Sequence[Signal]) -> NotificationResult:
        """Apply the status signals of one notification, in one transaction."""
        by_cluster: dict[str, list[tuple[StatusAlert, AlertState]]] = defaultdict(list)
        for signal in signals:
            by_cluster[signal.cluster].append((signal.alert, signal.state))
        now = int(self.clock() * 1_000_000)
        changed: list[str] = []
        created: list[str] = []
        opened = closed = degraded = restored = 0
        cascades: list[str] = []
        moves: dict[str, list[str]] = defaultdict(list)
        with self.store.write() as tx:
            known = tx.clusters_named(list(by_cluster))
            # In name order, as discovery inserts: two transactions adding the same new
            # names never wait on each other in a cycle (PostgreSQL: a deadlock).
            missing = sorted(name for name in by_cluster if name not in known)
            if missing:
                known.update(tx.insert_clusters(missing, SOURCE_ALERTS))
                created.extend(missing)
            transitions = []
            for name, updates in by_cluster.items():
                cluster = known[name]
                transition = apply(cluster.state, updates)
                if transition.changed:
                    changed.append(name)
                    transitions.append((cluster, transition))
            tx.save_states([(cluster.id, t.state) for cluster, t in transitions])
            tx.set_notes(notes_for(known, {c.name: t.state for c, t in transitions}, signals))
            # The effects run in steps: the k-th effect of every cluster together, each kind
            # as one set-based statement over all of them (a cluster's own effects keep
            # their order). One round trip per kind, not per cluster: on a database server
            # a notification about 1,000 clusters is a handful of statements.
            outage_of = {cluster.id: cluster.outage_id for cluster, _ in transitions}
            notes: dict[int, list[str]] = {cluster.id: [] for cluster, _ in transitions}
            for step in range(max((len(t.effects) for _, t in transitions), default=0)):
                kinds: dict[type, list[tuple[int, object]]] = defaultdict(list)
                for cluster, transition in transitions:
                    if step < len(transition.effects):
                        effect = transition.effects[step]
                        kinds[type(effect)].append((cluster.id, effect))
                opens = [(cid, e) for cid, e in kinds[OpenOutage] if isinstance(e, OpenOutage)]
                if opens:
                    ids = tx.open_outages([(cid, e.started_at) for cid, e in opens], now)
                    for (cid, e), outage_id in zip(opens, ids, strict=True):
                        outage_of[cid] = outage_id
                        notes[cid].append(f"outage opened (since {format_time(e.started_at)})")
                    opened += len(opens)
                if kinds[DegradeApps]:
                    counts = tx.degrade_apps_of(_members(kinds[DegradeApps], outage_of))
                    for cid, _ in kinds[DegradeApps]:
                        notes[cid].append(f"{counts.get(cid, 0)} app(s) degraded")
                    degraded += sum(counts.values())
                if kinds[RestoreApps]:
                    counts = tx.restore_apps_of(_members(kinds[RestoreApps], outage_of))
                    for cid, _ in kinds[RestoreApps]:
                        notes[cid].append(f"{counts.get(cid, 0)} app(s) restored")
                    restored += sum(counts.values())
                closes = [(cid, e) for cid, e in kinds[CloseOutage] if isinstance(e, CloseOutage)]
                if closes:
                    members = _members(closes, outage_of)
                    tx.close_outages(
                        [
                            (c, o, e.closed_at)
                            for (c, o), (_, e) in zip(members, closes, strict=True)
                        ]
                    )
                    for cid, _ in closes:
                        outage_of[cid] = None
                        notes[cid].append("outage closed")
                    closed += len(closes)
            for cluster, transition in transitions:
                before, after = cluster.state.status, transition.state.status
                if notes[cluster.id]:
                    cascades.append(
                        f"cluster {cluster.name}: {before.value} -> {after.value}: "
                        + ", ".join(notes[cluster.id])
                    )
                elif before is not after:
                    moves[f"{before.value} -> {after.value}"].append(cluster.name)
        # Said once committed: a rolled-back notification changed nothing to report.
        for line in cascades:
            log.info("%s", line)
        for move, names in moves.items():
            shown = ", ".join(names[:LOGGED_NAMES])
            more = f" and {len(names) - LOGGED_NAMES} more" if len(names) > LOGGED_NAMES else ""
            log.info("%d cluster(s) %s: %s%s", len(names), move, shown, more)
        if self.metrics is not None:
            self.metrics.outages_opened.inc(opened)
            self.metrics.outages_closed.inc(closed)
            self.metrics.apps_degraded.inc(degraded)
            self.metrics.apps_restored.inc(restored)
        return NotificationResult(changed, created, opened, closed, degraded, restored)

    # -- clusters --------------------------------------------------------------------

    def upsert_discovered(self, clusters: Iterable[DiscoveredCluster]) -> tuple[int, int]:
        """Start-up discovery: add new clusters, update endpoint/ref of known ones.

        Nothing else about a known cluster changes (its status, source, apps). Returns
        (added, updated). In name order: replicas upserting the same new clusters at once
        (every replica watches the same Secrets) meet on their first common name, and the
        loser's conflict is retried, instead of deadlocking again and again.
        """
        updated = 0
        ordered = sorted(clusters, key=lambda c: c.name)
        with self.store.write() as tx:
            # One read and one insert for the batch, not one per cluster: each statement
            # gives the interpreter up and waits to get it back, which a thread reading
            # Secrets beside makes milliseconds each.
            known_now = tx.clusters_named([c.name for c in ordered]) if ordered else {}
            new: list[tuple[str, str, str]] = []
            for found in ordered:
                known = known_now.get(found.name)
                if known is None:
                    new.append((found.name, found.endpoint, found.kubeconfig_secret_ref))
                elif (known.endpoint, known.kubeconfig_secret_ref) != (
                    found.endpoint,
                    found.kubeconfig_secret_ref,
                ):
                    tx.set_cluster_location(known.id, found.endpoint, found.kubeconfig_secret_ref)
                    updated += 1
            if new:
                tx.insert_located_clusters(new, SOURCE_DISCOVERY)
        added = len(new)
        return added, updated

    def add_cluster(self, name: str, endpoint: str, ref: str) -> ClusterRecord:
        with self.store.write() as tx:
            if tx.cluster(name) is not None:
                raise Conflict(f"cluster {name!r} exists already")
            return tx.insert_cluster(name, endpoint, ref, SOURCE_API)

    def delete_cluster(self, name: str, force: bool) -> int:
        """Forget a decommissioned cluster: its alert state, its outages, and (``force``) apps.

        Without ``force`` a cluster that still carries apps is refused (409): deleting it
        would delete them too, which must be asked for. Returns the number of apps deleted.
        """
        with self.store.write() as tx:
            cluster = _need_cluster(tx, name)
            apps = tx.count_apps(cluster.id)
            if apps and not force:
                raise Conflict(
                    f"cluster {name!r} carries {apps} app(s): move them to another cluster "
                    "first, or delete the cluster with force=true, which deletes them too"
                )
            tx.delete_cluster(cluster.id)
        log.info("cluster %s deleted, with %d app(s)", name, apps)
        return apps

    def reset_alerts(self, name: str) -> ResetResult:
        """Forget what the status alerts said about a cluster: it reads UNKNOWN again.

        The repair path for a state no later alert can fix. An open outage is closed and
        the apps it degraded (still DEGRADED for ``cluster_offline``) are restored.
        "Had been ONLINE" is kept (and set when an outage was open), so if the cluster is
        really OFFLINE, the next OFFLINE signal (a repeat, or reconciliation) cascades
        again instead of being taken for a cluster never seen ONLINE.
        """
        now = int(self.clock() * 1_000_000)
        restored = 0
        with self.store.write() as tx:
            cluster = _need_cluster(tx, name)
            if cluster.outage_id is not None:
                restored = tx.restore_apps(cluster.id, cluster.outage_id)
                tx.close_outage(cluster.id, cluster.outage_id, now)
            state = cluster.state
            fresh = ClusterAlertState(was_online=state.was_online or state.outage_since is not None)
            tx.save_states([(cluster.id, fresh)])
        closed = int(cluster.outage_id is not None)
        log.info(
            "cluster %s: alert state cleared (was %s), %d outage(s) closed, %d app(s) restored",
            name,
            cluster.state.status.value,
            closed,
            restored,
        )
        if self.metrics is not None:
            self.metrics.outages_closed.inc(closed)
            self.metrics.apps_restored.inc(restored)
        return ResetResult(replace(cluster, state=fresh, outage_id=None), closed, restored)

    def cluster(self, name: str) -> ClusterRecord:
        with self.store.read() as tx:
            return _need_cluster(tx, name)

    def cluster_history(
        self, name: str, limit: int = RECENT_OUTAGES
    ) -> tuple[ClusterRecord, list[OutageRecord], list[AppRecord]]:
        """The cluster, its latest outages (newest first) and its apps, read together."""
        with self.store.read() as tx:
            cluster = _need_cluster(tx, name)
            return cluster, tx.outages_of(cluster.id, limit), tx.apps_of(cluster.id)

    def prune_outages(self, closed_before: int, batch: int) -> int:
        """Delete up to ``batch`` outages closed before ``closed_before`` (µs) in one short
        transaction; open outages and anything an app or cluster points at stay."""
        with self.store.write() as tx:
            deleted = tx.delete_closed_outages(closed_before, batch)
        if deleted:
            log.debug("retention: %d closed outage(s) deleted", deleted)
        return deleted

    def clusters(self) -> list[ClusterRecord]:
        with self.store.read() as tx:
            return tx.clusters()

    # -- apps ------------------------------------------------------------------------

    def add_app(self, name: str, cluster: str) -> AppRecord:
        if mirrored(name):
            raise Conflict(
                f"app {name!r}: names beginning {' or '.join(MIRRORED_PREFIXES)} are the apps "
                "mirrored from Flux and Argo CD objects"
            )
        with self.store.write() as tx:
            target = _need_cluster(tx, cluster)
            if tx.app(name) is not None:
                raise Conflict(f"app {name!r} exists already")
            return tx.insert_app(name, target.id)

    def app(self, name: str) -> AppRecord:
        with self.store.read() as tx:
            return _need_app(tx, name)

    def apps(self) -> list[AppRecord]:
        with self.store.read() as tx:
            return tx.apps()

    def deploy(self, app: str, cluster: str) -> AppRecord:
        """The app is DEPLOYED on ``cluster`` (moved there if needed), unless the gate says no
        or Flux or Argo CD deploys it (``reactor.managed``)."""
        if mirrored(app):  # the one kind of name a mirrored app has
            with self.store.read() as tx:
                _not_managed_elsewhere(tx.app(app))
        place = self.store.deploy(app, cluster, gate.REFUSED)  # one transaction, gate included
        if place is None:  # say which name is unknown
            with self.store.read() as tx:
                _need_app(tx, app)
                _need_cluster(tx, cluster)
            raise AssertionError("placement found neither app nor cluster missing")
        return self.placed(app, cluster, place)

    def placed(self, app: str, cluster: str, place: Placement) -> AppRecord:
        """What a deployment the store has decided answers: the app, or the gate's refusal
        (the store wrote nothing then); counted either way. No I/O: also called on the
        event loop for a deployment decided there (``reactor.store.pg_pipeline``)."""
        self._gate(cluster, place.cluster_status)
        if self.metrics is not None:
            self.metrics.deployments.inc()
        return AppRecord(
            place.app_id, app, place.cluster_id, cluster, AppStatus.DEPLOYED, None, None
        )

    def reassign(self, app: str, cluster: str) -> AppRecord:
        """Move the app to ``cluster`` as PENDING (gated); the same cluster changes nothing."""
        with self.store.write() as tx:
            record = _need_app(tx, app)
            _not_managed_elsewhere(record)
            target = _need_cluster(tx, cluster)
            if target.id == record.cluster_id:
                return record
            self._gate(target.name, target.state.status)
            tx.set_app(record.id, target.id, AppStatus.PENDING, None)
        return replace(
            record,
            cluster_id=target.id,
            cluster=target.name,
            status=AppStatus.PENDING,
            reason=None,
            outage_id=None,
        )

    def report(self, app: str, status: AppStatus, reason: str | None) -> AppRecord:
        """A deployment health report: DEGRADED with a reason, or DEPLOYED again (gated).

        Either way the app leaves any outage: a cluster recovery never undoes a report.
        """
        with self.store.write() as tx:
            record = _need_app(tx, app)
            _not_managed_elsewhere(record)
            if status is AppStatus.DEPLOYED:
                target = _need_cluster(tx, record.cluster)
                self._gate(target.name, target.state.status)
            tx.set_app(record.id, record.cluster_id, status, reason)
        return replace(record, status=status, reason=reason, outage_id=None)

    def counts(self) -> StatusCounts:
        with self.store.read() as tx:
            return tx.status_counts()

    def _gate(self, cluster: str, status: Status) -> None:
        """Raise :class:`Gated` (counted) when the gate refuses ``cluster`` in ``status``.

        Called inside the write transaction, so the status it judges is the one the write
        would commit against; the refusal rolls the transaction back.
        """
        refusal = gate.check(cluster, status)
        if refusal is not None:
            if self.metrics is not None:
                self.metrics.deployments_refused.inc()
            raise Gated(refusal)


def _members(
    effects: Sequence[tuple[int, object]], outage_of: dict[int, int | None]
) -> list[tuple[int, int]]:
    """(cluster id, its open outage) for each cluster of ``effects``: the outage they act on."""
    pairs = []
    for cluster_id, _ in effects:
        outage_id = outage_of[cluster_id]
        assert outage_id is not None, "an effect on apps needs the cluster's open outage"
        pairs.append((cluster_id, outage_id))
    return pairs


def _need_cluster(tx: Transaction, name: str) -> ClusterRecord:
    cluster = tx.cluster(name)
    if cluster is None:
        raise NotFound(f"cluster {name!r} not found")
    return cluster


def _need_app(tx: Transaction, name: str) -> AppRecord:
    app = tx.app(name)
    if app is None:
        raise NotFound(f"app {name!r} not found")
    return app


def _not_managed_elsewhere(app: AppRecord | None) -> None:
    refusal = None if app is None else managed_elsewhere(app.name, app.source)
    if refusal is not None:
        raise Conflict(refusal)
