"""Durable state of the reactor: the Store interface, its records and its errors.

The rules live in ``reactor.statemachine`` and the operations in ``reactor.service``; a
store only reads and writes rows, inside transactions (:class:`Transaction`), and
everything one notification or one API call changes commits together or not at all: a
``kill -9`` in the middle leaves the previous state. An app's membership of the outage
that degraded it is its ``outage_id`` column: an app is degraded by at most one open
outage at a time (the one of its own cluster).

Two classes implement the protocol: ``reactor.store.sqlite`` (one file, one process) and
``reactor.store.postgres`` (several replicas on one database); ``reactor.store.database`` opens
the one a URL names. This module holds what a caller sees of them: the records, the
errors and the retry of a lost race. The SQL they share is ``reactor.store.sql``; the
schema and its migrations are in ``reactor.store.schema``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from reactor.statemachine import (
    AppStatus,
    ClusterAlertState,
    Status,
)

T = TypeVar("T")


class StoreUnavailable(RuntimeError):
    """The database cannot serve right now (locked, busy, disk full, unreachable): a retry
    may succeed. The API answers 503 with ``Retry-After``.

    The message is for the log: it may name the database's host, port or file and repeat
    the driver's error. An answer says :attr:`public` only, since the API's reads need no
    token and those details map the network behind the reactor.
    """

    #: What an answer may say of it.
    public = "the database is unavailable"


class StoreConflict(StoreUnavailable):
    """The transaction lost a race with another one (a serialization failure, a deadlock, a
    name inserted meanwhile) and was rolled back: running the whole call again will see the
    winner's commit. :func:`retry_conflicts` does that, a bounded number of times."""

    public = "the database is busy (the call kept losing races with other transactions)"


class StoreBusy(StoreUnavailable):
    """A lock was not granted within the busy timeout: another transaction holds it."""

    public = "the database is busy (a lock was not granted in time)"


#: Attempts of one call that keeps losing races before it answers 503.
CONFLICT_ATTEMPTS = 5


def retry_conflicts(call: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run ``call`` (one whole store operation) again while it raises :class:`StoreConflict`.

    Safe because an operation that raised committed nothing and has counted and logged
    nothing yet (``reactor.service`` does both after the commit). A short random pause
    keeps two losers of a deadlock from meeting again at once.
    """
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except StoreConflict:
            if attempt == attempts:
                raise
            time.sleep(conflict_pause_s(attempt))
    raise AssertionError("unreachable")


def conflict_pause_s(attempt: int) -> float:
    """A short random pause before attempt ``attempt + 1``: two losers of a deadlock do
    not meet again at once."""
    return random.uniform(0, 0.002 * attempt)


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    id: int
    name: str
    endpoint: str | None
    kubeconfig_secret_ref: str | None
    source: str  #: "discovery", "api" or "alerts": who created it
    state: ClusterAlertState
    outage_id: int | None  #: the open outage, if any
    #: the last failure reason the status alerts told, and its class (``reactor.reasons``)
    reason: str | None = None
    reason_class: str | None = None
    #: what holds its FleetClusterOffline back: "storm_guard", "silence" or None
    offline_held: str | None = None


#: An app of the API has source "api"; these sources are apps mirrored from the management
#: cluster's objects (``reactor.cd``), named ``SOURCE:KIND/NAMESPACE/NAME``. The API may not
#: create a name with one of these prefixes, so the two kinds never claim the same name.
MIRRORED_SOURCES = ("flux", "argocd")
MIRRORED_PREFIXES = tuple(f"{source}:" for source in MIRRORED_SOURCES)


@dataclass(frozen=True, slots=True)
class AppRecord:
    id: int
    name: str
    cluster_id: int
    cluster: str
    status: AppStatus
    reason: str | None
    outage_id: int | None  #: the open outage that degraded it, if any
    #: "api" (made through the API), or "flux", "argocd": mirrored from that object
    source: str = "api"
    #: a mirrored app's object as last seen: paused or not, and fleetwatch's mark (the
    #: outage id its pause is for); None for an app of the API
    paused: bool | None = None
    mark: str | None = None


@dataclass(frozen=True, slots=True)
class KnownCluster:
    """What the CD mirror needs of a cluster (``reactor.cd.targets`` resolves against it):
    its location, its status and its open outage (a cluster Secret is decided on them)."""

    name: str
    endpoint: str | None
    kubeconfig_secret_ref: str | None
    status: Status | None = None
    outage_id: int | None = None


@dataclass(frozen=True, slots=True)
class MirroredApp:
    """An app mirrored from a Flux or Argo CD object (``reactor.cd``), with its cluster's
    status and open outage, read together: what the mirror and the CD rules work from."""

    id: int
    name: str
    source: str
    cluster: str
    status: AppStatus
    outage_id: int | None
    cluster_status: Status
    cluster_outage_id: int | None
    #: what was last seen of the object: its uid, whether it was paused, fleetwatch's mark
    uid: str | None
    paused: bool | None
    mark: str | None


@dataclass(frozen=True, slots=True)
class OutageRecord:
    """One outage of a cluster, open (``closed_at`` None) or closed; times in µs."""

    id: int
    started_at: int
    opened_at: int
    closed_at: int | None
    apps_degraded: int
    apps_restored: int


@dataclass(frozen=True, slots=True)
class Placement:
    """An app and a cluster looked up together: the hot path of a deployment."""

    app_id: int
    cluster_id: int
    cluster_status: Status


@dataclass(frozen=True, slots=True)
class StatusCounts:
    apps: dict[AppStatus, int]
    clusters: dict[Status, int]


class Transaction(Protocol):
    """Reads and writes inside one transaction (see :meth:`Store.write`)."""

    def cluster(self, name: str) -> ClusterRecord | None: ...
    def clusters(self) -> list[ClusterRecord]: ...
    def clusters_named(self, names: Sequence[str]) -> dict[str, ClusterRecord]: ...
    def insert_cluster(
        self, name: str, endpoint: str | None, ref: str | None, source: str
    ) -> ClusterRecord: ...
    def insert_clusters(self, names: Sequence[str], source: str) -> dict[str, ClusterRecord]:
        """New clusters without endpoint (named by alerts), by name."""
        ...

    def insert_located_clusters(self, rows: Sequence[tuple[str, str, str]], source: str) -> None:
        """New clusters, each (name, endpoint, kubeconfig reference), in a few statements."""
        ...

    def set_cluster_location(self, cluster_id: int, endpoint: str, ref: str) -> None: ...
    def set_notes(self, rows: Sequence[tuple[int, str | None, str | None, str | None]]) -> None:
        """(cluster id, reason, reason class, offline held) of each cluster that changed."""
        ...

    def open_outages(self, starts: Sequence[tuple[int, int]], opened_at: int) -> list[int]:
        """Open an outage on each (cluster id, started at); their ids, in that order."""
        ...

    def degrade_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        """:meth:`degrade_apps` for each (cluster id, outage id) at once; counts by cluster."""
        ...

    def restore_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        """:meth:`restore_apps` for each (cluster id, outage id) at once; counts by cluster."""
        ...

    def close_outages(self, ends: Sequence[tuple[int, int, int]]) -> None:
        """:meth:`close_outage` for each (cluster id, outage id, closed at)."""
        ...

    def save_states(self, states: Sequence[tuple[int, ClusterAlertState]]) -> None: ...
    def open_outage(self, cluster_id: int, started_at: int, opened_at: int) -> int: ...
    def degrade_apps(self, cluster_id: int, outage_id: int) -> int: ...
    def restore_apps(self, cluster_id: int, outage_id: int) -> int: ...
    def close_outage(self, cluster_id: int, outage_id: int, closed_at: int) -> None: ...
    def app(self, name: str) -> AppRecord | None: ...
    def apps(self) -> list[AppRecord]: ...
    def apps_of(self, cluster_id: int) -> list[AppRecord]:
        """The apps on one cluster, by name."""
        ...

    def placement(self, app: str, cluster: str) -> Placement | None: ...
    def insert_app(self, name: str, cluster_id: int) -> AppRecord: ...
    def set_app(
        self, app_id: int, cluster_id: int, status: AppStatus, reason: str | None
    ) -> None: ...
    def status_counts(self) -> StatusCounts: ...
    def count_apps(self, cluster_id: int) -> int: ...
    def outages_of(self, cluster_id: int, limit: int) -> list[OutageRecord]:
        """The cluster's latest outages, newest first."""
        ...

    def outage_starts(self, outage_ids: Sequence[int]) -> dict[int, int]:
        """When each of these outages started (µs), by id; those gone are left out."""
        ...

    def delete_closed_outages(self, closed_before: int, limit: int) -> int:
        """Delete up to ``limit`` outages closed before ``closed_before`` (µs), oldest
        first, that nothing points at; returns how many went."""
        ...

    def delete_cluster(self, cluster_id: int) -> None:
        """The cluster, its outages and every app on it (the caller decides if apps may go)."""
        ...

    # Apps mirrored from the management cluster's Flux and Argo CD objects (``reactor.cd``)

    def known_clusters(self) -> list[KnownCluster]:
        """Every cluster as the CD mirror reads it, by name, with its stored status: 47 ms
        of CPU at 20,000 clusters against 127 for :meth:`clusters` (which builds each
        alert state), read twice by a pass that writes and once by every resync."""
        ...

    def mirrored_apps(self) -> list[MirroredApp]: ...
    def insert_mirrored(
        self,
        name: str,
        source: str,
        cluster_id: int,
        placed: tuple[AppStatus, str | None, int | None],
        seen: tuple[str, bool, str | None],
    ) -> bool:
        """A new mirrored app, ``placed`` (status, reason, outage), ``seen`` (uid, paused,
        mark); False when the name is taken (by an app of the API)."""
        ...

    # The three writes below change only rows whose name starts with one of ``kinds``
    # (``SOURCE:KIND/``: the kinds the writing replica watches, ``reactor.cd.scope``).
    def move_mirrored(
        self,
        app_id: int,
        cluster_id: int,
        placed: tuple[AppStatus, str | None, int | None],
        kinds: Sequence[str],
    ) -> None: ...
    def set_seen(
        self, seen: Sequence[tuple[int, str, bool, str | None]], kinds: Sequence[str]
    ) -> None:
        """(app id, uid, paused, mark) of each mirrored app whose object changed."""
        ...

    def delete_mirrored(self, app_ids: Sequence[int], kinds: Sequence[str]) -> None: ...
    def leave_outage(self, app_id: int, outage_id: int) -> bool:
        """The app leaves ``outage_id`` (DEPLOYED again) if it is still DEGRADED in it
        for ``cluster_offline``; False when it was not (restored or moved meanwhile)."""
        ...

    def cluster_stamp(self) -> tuple[object, ...]:
        """The clusters' count and highest id, and (id, status, open outage) of every
        cluster OFFLINE or in an open outage: it changes whenever a write of any replica
        adds or deletes a cluster or moves apps in or out of an outage, and the CD actuator
        of the replica that acts reads it every second."""
        ...


class Store(Protocol):
    """A database of clusters, apps and outages. Not thread-safe: one caller at a time."""

    def write(self) -> AbstractContextManager[Transaction]:
        """A read-write transaction holding the write lock from its first statement."""
        ...

    def read(self) -> AbstractContextManager[Transaction]:
        """A read-only snapshot."""
        ...

    def checkpoint(self) -> int:
        """Housekeeping the app runs every second off the store thread (SQLite: WAL
        checkpoint; a server database: nothing). Safe to call from any thread."""
        ...

    def reader(self) -> Store | None:
        """A second handle for reads, used from another thread; None: read through this one."""
        ...

    def deploy(self, app: str, cluster: str, refused: Collection[Status]) -> Placement | None:
        """The hot path, as one transaction: unless ``cluster`` is in a ``refused`` status
        (read under the cluster's lock), ``app`` becomes DEPLOYED on it. Returns the
        placement as found (its ``cluster_status`` says whether the write happened), or None
        when the app or the cluster does not exist (nothing written)."""
        ...

    def writer(self) -> Store | None:
        """Another read-write handle on its own connection, for one more store thread;
        None: every write of this process goes through this handle (SQLite's one writer)."""
        ...

    def ping(self) -> None:
        """Raise :class:`StoreUnavailable` unless the database answers a query now (for
        readiness). Call it on the thread that uses this handle, like any other call."""
        ...

    def close(self) -> None: ...
