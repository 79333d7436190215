"""The SQL both stores run alike, written once: the statements, and a cluster's row.

``reactor.store.sqlite`` and ``reactor.store.postgres`` each subclass
:class:`SQLTransaction`, which holds every :class:`reactor.store.Transaction` method whose
statements read the same on SQLite and PostgreSQL, but for two things a subclass says:

- the parameter mark, ``?`` (sqlite3) or ``%s`` (psycopg);
- the row locks: on PostgreSQL a write transaction reads the clusters it will change
  ``FOR UPDATE`` and the gate reads a deployment's cluster ``FOR SHARE``; SQLite's write
  transaction holds the one write lock from its first statement, so it adds none.

What stays in each store is what really differs: how a new row's id comes back, the
statements over many clusters at once (one set-based statement each on PostgreSQL, where a
statement is a round trip; one per cluster on SQLite, in this process), and the
connections, transactions and error classes.

The apps of an outage are found through their cluster (``cluster_id = ? AND outage_id =
?``): an app only ever points at an outage of its own cluster (every move clears it), and
PostgreSQL has no index on ``apps.outage_id`` (``reactor.store.schema``).

Long because every statement both stores share lives here, one method per transaction
step: splitting them would put half a transaction's SQL in another file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, Protocol

from fleetwatch.common.foreground import paced
from reactor.statemachine import (
    CLUSTER_OFFLINE,
    AlertState,
    AppStatus,
    ClusterAlertState,
    Status,
    to_precision,
)
from reactor.store import (
    AppRecord,
    ClusterRecord,
    KnownCluster,
    MirroredApp,
    OutageRecord,
    Placement,
    StatusCounts,
)


class Rows(Protocol):
    """What a statement gives back: a sqlite3 or a psycopg cursor."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Executor(Protocol):
    """What runs the statements: a sqlite3 connection or a psycopg cursor."""

    def execute(self, sql: str, params: Any = ..., /) -> Rows: ...
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object: ...


CLUSTER_SELECT = (
    "SELECT c.id, c.name, c.endpoint, c.kubeconfig_secret_ref, c.source, "
    "c.online_firing, c.online_starts_at, c.online_ends_at, "
    "c.offline_firing, c.offline_starts_at, c.offline_ends_at, "
    "c.was_online, c.outage_id, o.started_at, c.online_inferred, c.offline_inferred, "
    "c.last_reason, c.last_reason_class, c.offline_held "
    "FROM clusters c LEFT JOIN outages o ON o.id = c.outage_id"
)
APP_SELECT = (
    "SELECT a.id, a.name, a.cluster_id, c.name, a.status, a.reason, a.outage_id, a.source, "
    "a.paused, a.pause_mark FROM apps a JOIN clusters c ON c.id = a.cluster_id"
)
MIRRORED_SELECT = (
    "SELECT a.id, a.name, a.source, c.name, a.status, a.outage_id, c.status, c.outage_id, "
    "a.object_uid, a.paused, a.pause_mark "
    "FROM apps a JOIN clusters c ON c.id = a.cluster_id WHERE a.source <> 'api'"
)
OUTAGE_SELECT = (
    "SELECT id, started_at, opened_at, closed_at, apps_degraded, apps_restored FROM outages"
)
INSERT_CLUSTER = "INSERT INTO clusters (name, endpoint, kubeconfig_secret_ref, source) VALUES "
#: Rows of one multi-row ``INSERT`` of clusters: 4 parameters each, far below SQLite's 999.
INSERT_ROWS = 200


class SQLTransaction:
    """The :class:`reactor.store.Transaction` methods both stores share.

    ``lock`` ends a read of clusters this transaction may change, ``share`` the gate's
    read of a deployment's cluster (both empty on SQLite).
    """

    #: The driver's parameter mark.
    MARK: ClassVar[str]

    def __init__(self, db: Executor, *, lock: str = "", share: str = "") -> None:
        self._db = db
        self._lock = lock
        self._share = share

    def _insert(self, sql: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT`` of one row; the new row's id."""
        raise NotImplementedError

    def cluster(self, name: str) -> ClusterRecord | None:
        p = self.MARK
        row = self._db.execute(f"{CLUSTER_SELECT} WHERE c.name = {p}{self._lock}", (name,))
        found = row.fetchone()
        return None if found is None else cluster_record(found)

    def clusters(self) -> list[ClusterRecord]:
        # paced: a background read of 20,000 clusters gives way to requests (a request's
        # own read is never paced: ``fleetwatch.common.foreground``)
        rows = self._db.execute(f"{CLUSTER_SELECT} ORDER BY c.name")
        return [cluster_record(r) for r in paced(rows)]

    def insert_cluster(
        self, name: str, endpoint: str | None, ref: str | None, source: str
    ) -> ClusterRecord:
        p = self.MARK
        params = (name, endpoint, ref, source)
        cluster_id = self._insert(f"{INSERT_CLUSTER}({p}, {p}, {p}, {p})", params)
        return ClusterRecord(cluster_id, name, endpoint, ref, source, ClusterAlertState(), None)

    def insert_located_clusters(self, rows: Sequence[tuple[str, str, str]], source: str) -> None:
        # One statement per INSERT_ROWS rows, not one per cluster: each statement gives the
        # interpreter up and waits to get it back (a round trip too on PostgreSQL), and
        # requests queue on the store's writer behind a batch of discovery's.
        p = self.MARK
        for start in range(0, len(rows), INSERT_ROWS):
            chunk = rows[start : start + INSERT_ROWS]
            values = ", ".join([f"({p}, {p}, {p}, {p})"] * len(chunk))
            params = [v for name, endpoint, ref in chunk for v in (name, endpoint, ref, source)]
            self._db.execute(f"{INSERT_CLUSTER}{values}", params)

    def set_cluster_location(self, cluster_id: int, endpoint: str, ref: str) -> None:
        p = self.MARK
        self._db.execute(
            f"UPDATE clusters SET endpoint = {p}, kubeconfig_secret_ref = {p} WHERE id = {p}",
            (endpoint, ref, cluster_id),
        )

    def set_notes(self, rows: Sequence[tuple[int, str | None, str | None, str | None]]) -> None:
        if rows:
            p = self.MARK
            self._db.executemany(
                f"UPDATE clusters SET last_reason = {p}, last_reason_class = {p}, "
                f"offline_held = {p} WHERE id = {p}",
                [(reason, kind, held, cid) for cid, reason, kind, held in rows],
            )

    def save_states(self, states: Sequence[tuple[int, ClusterAlertState]]) -> None:
        if not states:
            return
        p = self.MARK
        self._db.executemany(
            f"UPDATE clusters SET status = {p}, status_since = {p}, "
            f"online_firing = {p}, online_starts_at = {p}, online_ends_at = {p}, "
            f"offline_firing = {p}, offline_starts_at = {p}, offline_ends_at = {p}, "
            f"online_inferred = {p}, offline_inferred = {p}, was_online = {p} WHERE id = {p}",
            [state_row(cluster_id, state) for cluster_id, state in states],
        )

    def degrade_apps(self, cluster_id: int, outage_id: int) -> int:
        p = self.MARK
        moved = self._db.execute(
            f"UPDATE apps SET status = 'DEGRADED', reason = {p}, outage_id = {p} "
            f"WHERE cluster_id = {p} AND status = 'DEPLOYED'",
            (CLUSTER_OFFLINE, outage_id, cluster_id),
        ).rowcount
        self._db.execute(
            f"UPDATE outages SET apps_degraded = apps_degraded + {p} WHERE id = {p}",
            (moved, outage_id),
        )
        return moved

    def restore_apps(self, cluster_id: int, outage_id: int) -> int:
        p = self.MARK
        moved = self._db.execute(
            "UPDATE apps SET status = 'DEPLOYED', reason = NULL, outage_id = NULL "
            f"WHERE outage_id = {p} AND cluster_id = {p} AND status = 'DEGRADED' "
            f"AND reason = {p}",
            (outage_id, cluster_id, CLUSTER_OFFLINE),
        ).rowcount
        self._db.execute(
            f"UPDATE outages SET apps_restored = apps_restored + {p} WHERE id = {p}",
            (moved, outage_id),
        )
        return moved

    def close_outage(self, cluster_id: int, outage_id: int, closed_at: int) -> None:
        # Members that were not restored (none, as every other change of an app leaves its
        # outage) must not point at a closed outage.
        p = self.MARK
        self._db.execute(
            f"UPDATE apps SET outage_id = NULL WHERE cluster_id = {p} AND outage_id = {p}",
            (cluster_id, outage_id),
        )
        self._db.execute(
            f"UPDATE outages SET closed_at = {p} WHERE id = {p}", (closed_at, outage_id)
        )
        self._db.execute(f"UPDATE clusters SET outage_id = NULL WHERE id = {p}", (cluster_id,))

    def app(self, name: str) -> AppRecord | None:
        row = self._db.execute(f"{APP_SELECT} WHERE a.name = {self.MARK}", (name,)).fetchone()
        return None if row is None else app_record(row)

    def apps(self) -> list[AppRecord]:
        return [app_record(r) for r in self._db.execute(f"{APP_SELECT} ORDER BY a.name")]

    def apps_of(self, cluster_id: int) -> list[AppRecord]:
        rows = self._db.execute(
            f"{APP_SELECT} WHERE a.cluster_id = {self.MARK} ORDER BY a.name", (cluster_id,)
        )
        return [app_record(r) for r in rows]

    def placement(self, app: str, cluster: str) -> Placement | None:
        # Shared on PostgreSQL: deployments to one cluster do not wait for each other, but
        # wait for (and then see) a notification that holds the cluster FOR UPDATE.
        p = self.MARK
        row = self._db.execute(
            "SELECT a.id, c.id, c.status FROM apps a, clusters c "
            f"WHERE a.name = {p} AND c.name = {p}{self._share}",
            (app, cluster),
        ).fetchone()
        return None if row is None else Placement(row[0], row[1], Status(row[2]))

    def set_app(self, app_id: int, cluster_id: int, status: AppStatus, reason: str | None) -> None:
        p = self.MARK
        self._db.execute(
            f"UPDATE apps SET cluster_id = {p}, status = {p}, reason = {p}, outage_id = NULL "
            f"WHERE id = {p}",
            (cluster_id, status.value, reason, app_id),
        )

    def status_counts(self) -> StatusCounts:
        apps = dict.fromkeys(AppStatus, 0)
        for status, count in self._db.execute("SELECT status, count(*) FROM apps GROUP BY status"):
            apps[AppStatus(status)] = count
        clusters = dict.fromkeys(Status, 0)
        for status, count in self._db.execute(
            "SELECT status, count(*) FROM clusters GROUP BY status"
        ):
            clusters[Status(status)] = count
        return StatusCounts(apps=apps, clusters=clusters)

    def count_apps(self, cluster_id: int) -> int:
        rows = self._db.execute(
            f"SELECT count(*) FROM apps WHERE cluster_id = {self.MARK}", (cluster_id,)
        )
        return int(rows.fetchone()[0])

    def outages_of(self, cluster_id: int, limit: int) -> list[OutageRecord]:
        p = self.MARK
        rows = self._db.execute(
            f"{OUTAGE_SELECT} WHERE cluster_id = {p} ORDER BY started_at DESC, id DESC LIMIT {p}",
            (cluster_id, limit),
        )
        return [OutageRecord(*row) for row in rows]

    def outage_starts(self, outage_ids: Sequence[int]) -> dict[int, int]:
        if not outage_ids:
            return {}
        marks = ", ".join([self.MARK] * len(outage_ids))
        rows = self._db.execute(
            f"SELECT id, started_at FROM outages WHERE id IN ({marks})", tuple(outage_ids)
        )
        return {int(row[0]): int(row[1]) for row in rows}

    def delete_closed_outages(self, closed_before: int, limit: int) -> int:
        # On PostgreSQL, replicas sweeping together: the second waits for the first's row
        # locks, then skips the rows it deleted (READ COMMITTED).
        p = self.MARK
        return self._db.execute(
            "DELETE FROM outages WHERE id IN (SELECT o.id FROM outages o "
            f"WHERE o.closed_at IS NOT NULL AND o.closed_at < {p} "
            "AND NOT EXISTS (SELECT 1 FROM clusters c WHERE c.outage_id = o.id) "
            "AND NOT EXISTS (SELECT 1 FROM apps a WHERE a.cluster_id = o.cluster_id "
            f"AND a.outage_id = o.id) ORDER BY o.closed_at LIMIT {p})",
            (closed_before, limit),
        ).rowcount

    def delete_cluster(self, cluster_id: int) -> None:
        # The caller holds the cluster (PostgreSQL: FOR UPDATE): no deployment is in flight.
        p = self.MARK
        self._db.execute(f"DELETE FROM apps WHERE cluster_id = {p}", (cluster_id,))
        # No app of another cluster points at this one's outages (a move leaves the
        # outage), but the foreign key must hold even if one did: rare, so a scan.
        self._db.execute(
            "UPDATE apps SET outage_id = NULL "
            f"WHERE outage_id IN (SELECT id FROM outages WHERE cluster_id = {p})",
            (cluster_id,),
        )
        self._db.execute(f"UPDATE clusters SET outage_id = NULL WHERE id = {p}", (cluster_id,))
        self._db.execute(f"DELETE FROM outages WHERE cluster_id = {p}", (cluster_id,))
        self._db.execute(f"DELETE FROM clusters WHERE id = {p}", (cluster_id,))

    # -- apps mirrored from Flux and Argo CD objects (reactor.cd) --------------------------

    def known_clusters(self) -> list[KnownCluster]:
        # paced, as :meth:`clusters`; the stored status, not the alert state it is kept
        # from, and no record of the rest
        rows = self._db.execute(
            "SELECT name, endpoint, kubeconfig_secret_ref, status, outage_id FROM clusters "
            "ORDER BY name"
        )
        return [KnownCluster(r[0], r[1], r[2], Status(r[3]), r[4]) for r in paced(rows)]

    def mirrored_apps(self) -> list[MirroredApp]:
        return [
            MirroredApp(
                r[0],
                r[1],
                r[2],
                r[3],
                AppStatus(r[4]),
                r[5],
                Status(r[6]),
                r[7],
                r[8],
                None if r[9] is None else bool(r[9]),
                r[10],
            )
            for r in paced(self._db.execute(f"{MIRRORED_SELECT} ORDER BY a.name"))
        ]

    def insert_mirrored(
        self,
        name: str,
        source: str,
        cluster_id: int,
        placed: tuple[AppStatus, str | None, int | None],
        seen: tuple[str, bool, str | None],
    ) -> bool:
        p = self.MARK
        status, reason, outage_id = placed
        uid, paused, mark = seen
        inserted = self._db.execute(
            "INSERT INTO apps (name, cluster_id, status, reason, outage_id, source, "
            f"object_uid, paused, pause_mark) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, "
            f"{p}) ON CONFLICT (name) DO NOTHING",
            (name, cluster_id, status.value, reason, outage_id, source, uid, int(paused), mark),
        ).rowcount
        if inserted and outage_id is not None:
            self._joined(outage_id)
        return bool(inserted)

    def _of_kinds(self, kinds: Sequence[str]) -> tuple[str, tuple[object, ...]]:
        """A condition (and its parameters) true of a mirrored row whose name starts with
        one of ``kinds``: substr, the same in SQLite and PostgreSQL (LIKE is not: SQLite's
        ignores case, and ``_`` is a wildcard)."""
        p = self.MARK
        tests = " OR ".join(f"substr(name, 1, CAST({p} AS INTEGER)) = {p}" for _ in kinds)
        tests = tests or "1 = 0"
        params = tuple(x for kind in kinds for x in (len(kind), kind))
        return f"source <> 'api' AND ({tests})", params

    def move_mirrored(
        self,
        app_id: int,
        cluster_id: int,
        placed: tuple[AppStatus, str | None, int | None],
        kinds: Sequence[str],
    ) -> None:
        p = self.MARK
        status, reason, outage_id = placed
        owned, params = self._of_kinds(kinds)
        moved = self._db.execute(
            f"UPDATE apps SET cluster_id = {p}, status = {p}, reason = {p}, outage_id = {p} "
            f"WHERE id = {p} AND {owned}",
            (cluster_id, status.value, reason, outage_id, app_id, *params),
        ).rowcount
        if moved and outage_id is not None:
            self._joined(outage_id)

    def _joined(self, outage_id: int) -> None:
        """One more app degraded by the outage (it joined it when placed)."""
        self._db.execute(
            f"UPDATE outages SET apps_degraded = apps_degraded + 1 WHERE id = {self.MARK}",
            (outage_id,),
        )

    def set_seen(
        self, seen: Sequence[tuple[int, str, bool, str | None]], kinds: Sequence[str]
    ) -> None:
        p = self.MARK
        owned, params = self._of_kinds(kinds)
        self._db.executemany(
            f"UPDATE apps SET object_uid = {p}, paused = {p}, pause_mark = {p} "
            f"WHERE id = {p} AND {owned}",
            [(uid, int(paused), mark, app_id, *params) for app_id, uid, paused, mark in seen],
        )

    def delete_mirrored(self, app_ids: Sequence[int], kinds: Sequence[str]) -> None:
        owned, params = self._of_kinds(kinds)
        self._db.executemany(
            f"DELETE FROM apps WHERE id = {self.MARK} AND {owned}",
            [(app_id, *params) for app_id in app_ids],
        )

    def leave_outage(self, app_id: int, outage_id: int) -> bool:
        p = self.MARK
        return bool(
            self._db.execute(
                "UPDATE apps SET status = 'DEPLOYED', reason = NULL, outage_id = NULL "
                f"WHERE id = {p} AND outage_id = {p} AND status = 'DEGRADED' AND reason = {p}",
                (app_id, outage_id, CLUSTER_OFFLINE),
            ).rowcount
        )

    def cluster_stamp(self) -> tuple[object, ...]:
        count, highest = self._db.execute("SELECT count(*), max(id) FROM clusters").fetchone()
        rows = self._db.execute(
            "SELECT id, status, outage_id FROM clusters "
            "WHERE outage_id IS NOT NULL OR status = 'OFFLINE' ORDER BY id"
        )
        return (int(count), highest, *((int(r[0]), str(r[1]), r[2]) for r in rows))


# -- rows <-> records --------------------------------------------------------------------


def _alert(
    firing: int | None, starts_at: int | None, ends_at: int | None, inferred: int
) -> AlertState | None:
    if firing is None or starts_at is None:
        return None
    return AlertState(
        firing=bool(firing),
        starts_at=to_precision(starts_at),
        ends_at=None if ends_at is None else to_precision(ends_at),
        inferred=bool(inferred),
    )


def cluster_record(row: tuple[Any, ...]) -> ClusterRecord:
    """A row of :data:`CLUSTER_SELECT` as a record.

    Times are read to the millisecond (``reactor.statemachine.PRECISION_US``): a row written
    with
    microseconds, by a release before that rule or a replica not yet upgraded, names its
    alert instance as the webhooks and listings of today do.
    """
    state = ClusterAlertState(
        online=_alert(row[5], row[6], row[7], row[14]),
        offline=_alert(row[8], row[9], row[10], row[15]),
        was_online=bool(row[11]),
        outage_since=None if row[13] is None else to_precision(row[13]),
    )
    return ClusterRecord(
        row[0], row[1], row[2], row[3], row[4], state, row[12], row[16], row[17], row[18]
    )


def app_record(row: tuple[Any, ...]) -> AppRecord:
    """A row of :data:`APP_SELECT` as a record."""
    paused = None if row[8] is None else bool(row[8])
    return AppRecord(
        row[0], row[1], row[2], row[3], AppStatus(row[4]), row[5], row[6], row[7], paused, row[9]
    )


def state_row(cluster_id: int, state: ClusterAlertState) -> tuple[Any, ...]:
    """The parameters of :meth:`SQLTransaction.save_states` for one cluster."""
    on, off = state.online, state.offline
    return (
        state.status.value,
        state.status_since,
        None if on is None else int(on.firing),
        None if on is None else on.starts_at,
        None if on is None else on.ends_at,
        None if off is None else int(off.firing),
        None if off is None else off.starts_at,
        None if off is None else off.ends_at,
        int(on is not None and on.inferred),
        int(off is not None and off.inferred),
        int(state.was_online),
        cluster_id,
    )
