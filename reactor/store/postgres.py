"""The :class:`reactor.store.Store` on PostgreSQL: any number of reactor replicas, one database.

The same operations as the SQLite store, with the same guarantees across processes:

- One transaction per notification or API call (READ COMMITTED: every statement sees what
  committed before it started).
- Work on one cluster is serialised by a lock on its row. A write transaction that reads a
  cluster to change it (a notification, adding an app, a reassignment...) takes it with
  ``SELECT ... FOR UPDATE`` (several clusters in id order, so two notifications never
  deadlock on each other). The gate of a deployment reads the cluster ``FOR SHARE``: many
  deployments to one cluster run together, but none runs while a notification holds the
  row, so a deployment either committed before the transaction that made the cluster
  OFFLINE (and the cascade degrades it) or starts after that commit and is refused. An
  app already DEPLOYED there (no reason, no outage, the cluster allowed) is only read:
  the cascade takes it along all the same, and its commit has nothing to flush.
- The cascade and the restore are one set-based ``UPDATE`` each, as on SQLite.
- A lost race (serialization failure, deadlock, a name inserted by another replica
  meanwhile) is :class:`reactor.store.StoreConflict`: the caller runs the whole operation
  again (``reactor.store.retry_conflicts``). A lock not granted within the busy timeout
  and an unreachable database are :class:`reactor.store.StoreUnavailable` (HTTP 503).

Connections (``reactor.store.pg_connection``): each handle owns one connection, used by one
thread (the app's store thread or reader thread), so no pool is needed. A connection is
checked before each call (one ``poll`` that does not wait): one the server closed while it
sat idle (a restart, ``pg_terminate_backend``) is replaced before anything is sent on it. A
transaction whose ``BEGIN`` meets a dead connection is run once more on a new one: nothing
of it reached the server. A connection that breaks later in a call is dropped and the call
answers 503 (its statements may have run); the next call opens a new one. While the
database cannot be reached, calls fail at once for a short pause after each failed attempt
(shared by the handles of one store). Nothing is cached between transactions: every gate
decision reads the row.

The statements PostgreSQL runs as SQLite does are ``reactor.store.sql``'s; here are the
set-based statements over many clusters, the connections and the error mapping.

Long because the deployment statements live here too, beside the store that runs one of
them, so that the rule they share (what "settled" means) is written once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

import psycopg
from psycopg import errors

from reactor.secretfile import SecretFile
from reactor.statemachine import CLUSTER_OFFLINE, AppStatus, ClusterAlertState, Status
from reactor.store import (
    AppRecord,
    ClusterRecord,
    Placement,
    StoreBusy,
    StoreConflict,
    StoreUnavailable,
    Transaction,
    schema,
)
from reactor.store.pg_connection import (
    Connection,
    Connector,
    Reachability,
    closed_by_server,
    first_line,
)
from reactor.store.sql import CLUSTER_SELECT, SQLTransaction, cluster_record

#: An app settled on its cluster: DEPLOYED there, no reason, no outage, the cluster's status
#: not refused (``p.refused``); over ``a`` (apps) and ``c`` (clusters), false when either is
#: missing. The one rule both deployment statements below answer from what is committed.
_SETTLED = (
    "coalesce(a.cluster_id = c.id AND a.status = 'DEPLOYED' AND a.reason IS NULL "
    "AND a.outage_id IS NULL AND c.status <> ALL(p.refused), false)"
)

#: A deployment in one statement, so one round trip and its own transaction: an app
#: settled there already (the module docstring) is answered from what is committed, with
#: nothing locked or written; any other is decided under the cluster's row ``FOR SHARE``
#: and written when the status read under that lock is not refused and it changes the app.
#: Parameters: cluster, app, refused statuses; the row: the app's id, the cluster's id and
#: status, 1 if written. Run by ``deploy`` below and by ``reactor.store.pg_pipeline``.
DEPLOY = (
    "WITH p AS (SELECT %s::text AS cluster, %s::text AS app, %s::text[] AS refused), "
    f"seen AS (SELECT c.id AS cluster_id, c.status, a.id AS app_id, {_SETTLED} AS settled "
    "FROM p LEFT JOIN clusters c ON c.name = p.cluster LEFT JOIN apps a ON a.name = p.app), "
    "c AS (SELECT id, status FROM clusters WHERE name = (SELECT cluster FROM p) "
    "AND NOT (SELECT settled FROM seen) FOR SHARE), "
    "u AS (UPDATE apps SET cluster_id = c.id, status = 'DEPLOYED', reason = NULL, "
    "outage_id = NULL FROM c, seen, p WHERE apps.id = seen.app_id "
    "AND c.status <> ALL(p.refused) AND (apps.cluster_id, apps.status, apps.reason, "
    "apps.outage_id) IS DISTINCT FROM (c.id, 'DEPLOYED', NULL, NULL) RETURNING 1) "
    "SELECT seen.app_id, CASE WHEN seen.settled THEN seen.cluster_id ELSE c.id END, "
    "CASE WHEN seen.settled THEN seen.status ELSE c.status END, (SELECT count(*) FROM u) "
    "FROM seen LEFT JOIN c ON true"
)

#: Many deployments in one read-only statement (``reactor.store.pg_pipeline``: those of one
#: turn of the event loop), nothing locked or written: per deployment what :data:`DEPLOY`
#: reads before it decides. Parameters: clusters, apps (two ``text[]`` of one length),
#: refused statuses; a row per (cluster, app), in their order: the app's id, the cluster's
#: id and status, whether the app is settled there. Each name is found by its unique index
#: (``OFFSET 0`` keeps each lookup a lookup, whatever the planner guesses of the arrays).
SETTLED = (
    "SELECT a.id, c.id, c.status, "
    f"{_SETTLED} FROM (SELECT %s::text[] AS refused) p, "
    "unnest(%s::text[], %s::text[]) WITH ORDINALITY v(cluster, app, i) "
    "LEFT JOIN LATERAL (SELECT id, status FROM clusters WHERE name = v.cluster OFFSET 0) c "
    "ON true LEFT JOIN LATERAL (SELECT id, cluster_id, status, reason, outage_id FROM apps "
    "WHERE name = v.app OFFSET 0) a ON true ORDER BY v.i"
)

#: Errors after which running the whole operation again will succeed.
_CONFLICTS = (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation)
#: Errors of a database that is there but cannot serve this call now.
_BUSY = (errors.LockNotAvailable, errors.QueryCanceled, errors.AdminShutdown)


def store_error(exc: psycopg.Error, busy_timeout_s: float) -> Exception:
    """What a psycopg error means to the caller of a store operation: a lost race
    (:class:`StoreConflict`, run it again), a lock not granted (:class:`StoreBusy`), a
    database that cannot serve (:class:`StoreUnavailable`), or ``exc`` itself: a bug (bad
    SQL, bad data), a 500 with the traceback in the log."""
    if isinstance(exc, _CONFLICTS):
        return StoreConflict(f"lost a race with another transaction: {first_line(exc)}")
    if isinstance(exc, errors.LockNotAvailable):
        return StoreBusy(
            f"a lock was not granted within {busy_timeout_s:g} s (another transaction holds it)"
        )
    if isinstance(exc, (*_BUSY, psycopg.OperationalError)):
        return StoreUnavailable(f"the database cannot serve: {first_line(exc)}")
    return exc


class PostgresTransaction(SQLTransaction):
    """:class:`reactor.store.Transaction` over one psycopg connection in a transaction.

    ``locking``: a write transaction, whose cluster reads lock the rows they return.
    """

    MARK = "%s"

    def __init__(self, cur: psycopg.Cursor[tuple[Any, ...]], *, locking: bool) -> None:
        super().__init__(
            cur,
            lock=" FOR UPDATE OF c" if locking else "",
            share=" FOR SHARE OF c" if locking else "",
        )
        self.cur = cur

    def _insert(self, sql: str, params: Sequence[Any]) -> int:
        row = self.cur.execute(f"{sql} RETURNING id", params).fetchone()
        assert row is not None
        return int(row[0])

    def clusters_named(self, names: Sequence[str]) -> dict[str, ClusterRecord]:
        # In id order: two transactions locking overlapping sets take them in one order.
        rows = self.cur.execute(
            f"{CLUSTER_SELECT} WHERE c.name = ANY(%s) ORDER BY c.id{self._lock}",
            (list(names),),
        )
        return {row[1]: cluster_record(row) for row in rows}

    def insert_clusters(self, names: Sequence[str], source: str) -> dict[str, ClusterRecord]:
        # Another replica inserting one of these names meanwhile: a unique violation, so a
        # conflict, and the retried call finds the row.
        rows = self.cur.execute(
            "INSERT INTO clusters (name, source) SELECT n, %s FROM unnest(%s::text[]) n "
            "RETURNING id, name",
            (source, list(names)),
        ).fetchall()
        return {
            name: ClusterRecord(cid, name, None, None, source, ClusterAlertState(), None)
            for cid, name in rows
        }

    def open_outages(self, starts: Sequence[tuple[int, int]], opened_at: int) -> list[int]:
        rows = self.cur.execute(
            "WITH o AS (INSERT INTO outages (cluster_id, started_at, opened_at) "
            "SELECT c, s, %s FROM unnest(%s::bigint[], %s::bigint[]) v(c, s) "
            "RETURNING id, cluster_id) "
            "UPDATE clusters SET outage_id = o.id FROM o WHERE clusters.id = o.cluster_id "
            "RETURNING clusters.id, o.id",
            (opened_at, [c for c, _ in starts], [s for _, s in starts]),
        ).fetchall()
        by_cluster = dict(rows)
        return [by_cluster[c] for c, _ in starts]

    def degrade_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        if len(members) == 1:  # one big cluster: a plain UPDATE beats a lateral join
            cluster_id, outage_id = members[0]
            return {cluster_id: self.degrade_apps(cluster_id, outage_id)}
        return self._move_apps(
            "apps.status = 'DEPLOYED'",
            "status = 'DEGRADED', reason = %s, outage_id = t.o",
            "apps_degraded",
            members,
        )

    def restore_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        if len(members) == 1:
            cluster_id, outage_id = members[0]
            return {cluster_id: self.restore_apps(cluster_id, outage_id)}
        return self._move_apps(
            "apps.outage_id = m.o AND apps.status = 'DEGRADED' AND apps.reason = %s",
            "status = 'DEPLOYED', reason = NULL, outage_id = NULL",
            "apps_restored",
            members,
        )

    def _move_apps(
        self, which: str, change: str, counter: str, members: Sequence[tuple[int, int]]
    ) -> dict[int, int]:
        """One statement: the apps of each member cluster that match ``which`` get
        ``change``; the counts per cluster are added to each outage's ``counter`` and
        returned.

        The apps are found cluster by cluster (a lateral join on the cluster_id index;
        ``OFFSET 0`` keeps the planner from flattening it), not by a plan over the
        statuses: those statistics are stale right after a cascade (ANALYZE saw every app
        DEPLOYED), and a plan built on them joins every DEGRADED app with every member.
        """
        rows = self.cur.execute(
            "WITH m AS (SELECT * FROM unnest(%s::bigint[], %s::bigint[]) v(c, o)), "
            "t AS (SELECT a.id, m.c, m.o FROM m CROSS JOIN LATERAL "
            f"(SELECT apps.id FROM apps WHERE apps.cluster_id = m.c AND {which} OFFSET 0) a), "
            f"u AS (UPDATE apps SET {change} FROM t WHERE apps.id = t.id "
            "RETURNING apps.cluster_id), "
            "n AS (SELECT cluster_id, count(*) AS moved FROM u GROUP BY cluster_id), "
            f"w AS (UPDATE outages SET {counter} = {counter} + n.moved FROM n, m "
            "WHERE outages.id = m.o AND m.c = n.cluster_id RETURNING 1) "
            "SELECT n.cluster_id, n.moved, (SELECT count(*) FROM w) FROM n",
            ([c for c, _ in members], [o for _, o in members], CLUSTER_OFFLINE),
        ).fetchall()
        return {c: int(moved) for c, moved, _ in rows}

    def close_outages(self, ends: Sequence[tuple[int, int, int]]) -> None:
        params = ([c for c, _, _ in ends], [o for _, o, _ in ends], [t for _, _, t in ends])
        # By cluster: apps.outage_id has no index (see reactor/store/schema.py).
        self.cur.execute(
            "UPDATE apps SET outage_id = NULL "
            "WHERE cluster_id = ANY(%s::bigint[]) AND outage_id = ANY(%s::bigint[])",
            (params[0], params[1]),
        )
        self.cur.execute(
            "UPDATE outages SET closed_at = v.t FROM unnest(%s::bigint[], %s::bigint[], "
            "%s::bigint[]) v(c, o, t) WHERE outages.id = v.o",
            params,
        )
        self.cur.execute(
            "UPDATE clusters SET outage_id = NULL WHERE id = ANY(%s::bigint[])", (params[0],)
        )

    def open_outage(self, cluster_id: int, started_at: int, opened_at: int) -> int:
        row = self.cur.execute(
            "WITH o AS (INSERT INTO outages (cluster_id, started_at, opened_at) "
            "VALUES (%s, %s, %s) RETURNING id) "
            "UPDATE clusters SET outage_id = (SELECT id FROM o) WHERE id = %s "
            "RETURNING outage_id",
            (cluster_id, started_at, opened_at, cluster_id),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def insert_app(self, name: str, cluster_id: int) -> AppRecord:
        row = self.cur.execute(
            "INSERT INTO apps (name, cluster_id, status) VALUES (%s, %s, 'PENDING') "
            "RETURNING id, (SELECT name FROM clusters WHERE id = %s)",
            (name, cluster_id, cluster_id),
        ).fetchone()
        assert row is not None
        return AppRecord(row[0], name, cluster_id, row[1], AppStatus.PENDING, None, None)


class PostgresStore:
    """:class:`reactor.store.Store` on one PostgreSQL connection (opened on first use).

    ``conninfo``: a ``postgresql://`` URL or libpq key=value string, without the password;
    ``password``: given apart, so it is never part of a string that could be logged; a
    :class:`SecretFile` is read again as it changes (the handles of one store share it).
    ``busy_timeout_s``: how long a statement waits for a lock (``lock_timeout``) before
    the call answers 503, as the SQLite store's busy timeout.
    ``migrate``: bring the schema up to date now (raises :class:`StoreUnavailable` when
    the database cannot be reached or is newer than this code).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        password: str | SecretFile | None = None,
        busy_timeout_s: float = 5.0,
        connect_timeout_s: float = 2.0,
        migrate: bool = True,
        reachability: Reachability | None = None,
    ) -> None:
        self.conninfo = conninfo
        self.busy_timeout_s = busy_timeout_s
        #: opens this store's connections (shared with ``reactor.store.pg_pipeline``)
        self.connector = Connector(conninfo, password, connect_timeout_s)
        #: shared with the handles made by :meth:`writer` and :meth:`reader`
        self.reach = reachability if reachability is not None else Reachability()
        self._conn: Connection | None = None
        if migrate:
            self.migrate()

    # -- connections -------------------------------------------------------------------

    def _connection(self) -> Connection:
        """This handle's connection, open and checked: one the server closed while it was
        idle is replaced now, before anything is sent on it."""
        conn = self._conn
        if conn is not None:
            if not closed_by_server(conn):
                return conn
            self._drop()
        reach = self.reach
        if reach.paused():
            raise StoreUnavailable(f"the database cannot be reached: {reach.last_error}")
        try:
            self._conn = self.connector.open(self.busy_timeout_s)
        except psycopg.Error as exc:
            reach.failed(first_line(exc))
            raise StoreUnavailable(f"the database cannot be reached: {reach.last_error}") from exc
        reach.reached()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _failed(self, exc: psycopg.Error) -> Exception:
        """What a psycopg error means to the caller; drops a broken connection."""
        conn = self._conn
        if conn is not None and (conn.closed or conn.broken):
            self._drop()
        return store_error(exc, self.busy_timeout_s)

    @contextmanager
    def _transaction(self, *, locking: bool) -> Iterator[Transaction]:
        try:
            with ExitStack() as stack:
                conn = self._begin(stack)
                cur = stack.enter_context(conn.cursor())
                yield PostgresTransaction(cur, locking=locking)
        except psycopg.Error as exc:
            failure = self._failed(exc)
            if failure is exc:
                raise
            raise failure from exc

    def _begin(self, stack: ExitStack) -> Connection:
        """Enter a transaction on ``stack``. A ``BEGIN`` that meets a dead connection (the
        server closed it after the check) is sent once more on a new one: nothing of the
        transaction reached the server, so nothing can run twice."""
        conn = self._connection()
        try:
            stack.enter_context(conn.transaction())
        except psycopg.OperationalError:
            if not (conn.closed or conn.broken):
                raise
            self._drop()
            conn = self._connection()
            stack.enter_context(conn.transaction())
        return conn

    def write(self) -> AbstractContextManager[Transaction]:
        """A read-write transaction; the clusters it reads are locked until it ends."""
        return self._transaction(locking=True)

    def read(self) -> AbstractContextManager[Transaction]:
        """A read-only transaction: no locks, the last commits as each statement starts."""
        return self._transaction(locking=False)

    def reader(self) -> PostgresStore:
        """A second connection for reads: they never wait behind this one's writes."""
        return self.writer()

    def writer(self) -> PostgresStore:
        """Another connection: transactions on it run in parallel with this one's."""
        return PostgresStore(
            self.conninfo,
            password=self.connector.password,
            busy_timeout_s=self.busy_timeout_s,
            connect_timeout_s=self.connector.connect_timeout_s,
            migrate=False,
            reachability=self.reach,
        )

    def deploy(self, app: str, cluster: str, refused: Collection[Status]) -> Placement | None:
        """One statement, so one round trip and its own transaction: the cluster read
        ``FOR SHARE`` (waiting for, then seeing, a notification that holds it), the app
        written only when the status read under that lock is not refused."""
        conn = self._connection()
        try:
            row = conn.execute(DEPLOY, (cluster, app, [s.value for s in refused])).fetchone()
        except psycopg.Error as exc:
            failure = self._failed(exc)
            if failure is exc:
                raise
            raise failure from exc
        if row is None or row[0] is None or row[1] is None:
            return None
        return Placement(row[0], row[1], Status(row[2]))

    def ping(self) -> None:
        conn = self._connection()
        try:
            conn.execute("SELECT 1").fetchone()
        except psycopg.Error as exc:
            failure = self._failed(exc)
            raise (
                failure if isinstance(failure, StoreUnavailable) else StoreUnavailable(str(failure))
            ) from exc

    def checkpoint(self) -> int:
        """Nothing to do: the server runs its own checkpoints and vacuum."""
        return 0

    def close(self) -> None:
        self._drop()

    # -- schema ------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._connection().cursor() as cur:
            table = cur.execute("SELECT to_regclass('fleetwatch_schema')").fetchone()
            if table is None or table[0] is None:
                return 0
            row = cur.execute("SELECT version FROM fleetwatch_schema").fetchone()
            return 0 if row is None else int(row[0])

    def migrate(self) -> int:
        """Apply the migrations the database lacks; returns how many were applied.

        On a connection of its own, under a session advisory lock: replicas starting
        together wait for each other here (no lock timeout on this connection), and the
        second finds the schema current.
        """
        try:
            # 0: wait for the migration lock as long as it takes
            conn = self.connector.open(lock_timeout_s=0)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"the database cannot be reached: {first_line(exc)}") from exc
        applied = 0
        try:
            with conn:
                conn.execute("SELECT pg_advisory_lock(%s)", (schema.MIGRATION_LOCK_KEY,))
                conn.execute("CREATE TABLE IF NOT EXISTS fleetwatch_schema (version INTEGER)")
                while True:
                    with conn.transaction():
                        row = conn.execute(
                            "SELECT version FROM fleetwatch_schema FOR UPDATE"
                        ).fetchone()
                        version = 0 if row is None else int(row[0])
                        if version > schema.VERSION:
                            raise StoreUnavailable(
                                f"the database's schema version {version} is newer than this "
                                f"reactor's ({schema.VERSION}): run the newer release"
                            )
                        if version == schema.VERSION:
                            break
                        for statement in schema.POSTGRES[version]:
                            conn.execute(statement)
                        if row is None:
                            conn.execute("INSERT INTO fleetwatch_schema VALUES (1)")
                        else:
                            conn.execute("UPDATE fleetwatch_schema SET version = version + 1")
                        applied += 1
        except psycopg.Error as exc:
            raise StoreUnavailable(f"migrating the schema failed: {first_line(exc)}") from exc
        return applied
