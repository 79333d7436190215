"""The :class:`reactor.store.Store` in one SQLite file: one reactor process, no server.

Every mutating transaction starts with ``BEGIN IMMEDIATE`` (the write lock is taken up
front, so two writers never interleave a read and a write). The cascade and the restore
are one set-based ``UPDATE`` each (no Python loop over apps), so an outage of a cluster
carrying 100,000 apps commits in well under a second.

Longer than most modules (about 400 lines) because it is one class per protocol of
``reactor.store`` (a transaction, a store), each method one statement; its twin on
PostgreSQL is ``reactor.store_postgres``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reactor import schema
from reactor.statemachine import CLUSTER_OFFLINE, AppStatus, ClusterAlertState, Status
from reactor.store import (
    OUTAGE_SELECT,
    AppRecord,
    ClusterRecord,
    OutageRecord,
    Placement,
    StatusCounts,
    StoreUnavailable,
    Transaction,
    cluster_record,
    count_statuses,
    state_row,
)

SCHEMA_VERSION = schema.VERSION

#: SQLite's name for a private in-memory database (``--db.path :memory:``: nothing survives).
MEMORY = ":memory:"


_CLUSTER_COLUMNS = (
    "c.id, c.name, c.endpoint, c.kubeconfig_secret_ref, c.source, "
    "c.online_firing, c.online_starts_at, c.online_ends_at, "
    "c.offline_firing, c.offline_starts_at, c.offline_ends_at, "
    "c.was_online, c.outage_id, o.started_at"
)
_CLUSTER_SELECT = (
    f"SELECT {_CLUSTER_COLUMNS} FROM clusters c LEFT JOIN outages o ON o.id = c.outage_id"
)
_APP_SELECT = (
    "SELECT a.id, a.name, a.cluster_id, c.name, a.status, a.reason, a.outage_id "
    "FROM apps a JOIN clusters c ON c.id = a.cluster_id"
)


def _app(row: tuple[Any, ...]) -> AppRecord:
    return AppRecord(row[0], row[1], row[2], row[3], AppStatus(row[4]), row[5], row[6])


class SQLiteTransaction:
    """:class:`Transaction` over one sqlite3 connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def cluster(self, name: str) -> ClusterRecord | None:
        row = self.db.execute(f"{_CLUSTER_SELECT} WHERE c.name = ?", (name,)).fetchone()
        return None if row is None else cluster_record(row)

    def clusters(self) -> list[ClusterRecord]:
        return [cluster_record(r) for r in self.db.execute(f"{_CLUSTER_SELECT} ORDER BY c.name")]

    def clusters_named(self, names: Sequence[str]) -> dict[str, ClusterRecord]:
        found: dict[str, ClusterRecord] = {}
        for start in range(0, len(names), 500):  # stay far below SQLite's variable limit
            chunk = names[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self.db.execute(f"{_CLUSTER_SELECT} WHERE c.name IN ({marks})", chunk):
                found[row[1]] = cluster_record(row)
        return found

    def insert_cluster(
        self, name: str, endpoint: str | None, ref: str | None, source: str
    ) -> ClusterRecord:
        cur = self.db.execute(
            "INSERT INTO clusters (name, endpoint, kubeconfig_secret_ref, source) "
            "VALUES (?, ?, ?, ?)",
            (name, endpoint, ref, source),
        )
        assert cur.lastrowid is not None
        return ClusterRecord(cur.lastrowid, name, endpoint, ref, source, ClusterAlertState(), None)

    def insert_clusters(self, names: Sequence[str], source: str) -> dict[str, ClusterRecord]:
        return {name: self.insert_cluster(name, None, None, source) for name in names}

    def open_outages(self, starts: Sequence[tuple[int, int]], opened_at: int) -> list[int]:
        # SQLite runs in this process: a statement per cluster costs no round trip.
        return [self.open_outage(c, started_at, opened_at) for c, started_at in starts]

    def degrade_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        return {c: self.degrade_apps(c, outage_id) for c, outage_id in members}

    def restore_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        return {c: self.restore_apps(c, outage_id) for c, outage_id in members}

    def close_outages(self, ends: Sequence[tuple[int, int, int]]) -> None:
        for c, outage_id, closed_at in ends:
            self.close_outage(c, outage_id, closed_at)

    def set_cluster_location(self, cluster_id: int, endpoint: str, ref: str) -> None:
        self.db.execute(
            "UPDATE clusters SET endpoint = ?, kubeconfig_secret_ref = ? WHERE id = ?",
            (endpoint, ref, cluster_id),
        )

    def save_states(self, states: Sequence[tuple[int, ClusterAlertState]]) -> None:
        self.db.executemany(
            "UPDATE clusters SET status = ?, status_since = ?, "
            "online_firing = ?, online_starts_at = ?, online_ends_at = ?, "
            "offline_firing = ?, offline_starts_at = ?, offline_ends_at = ?, was_online = ? "
            "WHERE id = ?",
            [state_row(cluster_id, state) for cluster_id, state in states],
        )

    def open_outage(self, cluster_id: int, started_at: int, opened_at: int) -> int:
        cur = self.db.execute(
            "INSERT INTO outages (cluster_id, started_at, opened_at) VALUES (?, ?, ?)",
            (cluster_id, started_at, opened_at),
        )
        assert cur.lastrowid is not None
        self.db.execute(
            "UPDATE clusters SET outage_id = ? WHERE id = ?", (cur.lastrowid, cluster_id)
        )
        return cur.lastrowid

    def degrade_apps(self, cluster_id: int, outage_id: int) -> int:
        cur = self.db.execute(
            "UPDATE apps SET status = 'DEGRADED', reason = ?, outage_id = ? "
            "WHERE cluster_id = ? AND status = 'DEPLOYED'",
            (CLUSTER_OFFLINE, outage_id, cluster_id),
        )
        self.db.execute(
            "UPDATE outages SET apps_degraded = apps_degraded + ? WHERE id = ?",
            (cur.rowcount, outage_id),
        )
        return cur.rowcount

    def restore_apps(self, cluster_id: int, outage_id: int) -> int:
        cur = self.db.execute(
            "UPDATE apps SET status = 'DEPLOYED', reason = NULL, outage_id = NULL "
            "WHERE outage_id = ? AND cluster_id = ? AND status = 'DEGRADED' AND reason = ?",
            (outage_id, cluster_id, CLUSTER_OFFLINE),
        )
        self.db.execute(
            "UPDATE outages SET apps_restored = apps_restored + ? WHERE id = ?",
            (cur.rowcount, outage_id),
        )
        return cur.rowcount

    def close_outage(self, cluster_id: int, outage_id: int, closed_at: int) -> None:
        # Members that were not restored (none, as every other change of an app leaves its
        # outage) must not point at a closed outage.
        self.db.execute("UPDATE apps SET outage_id = NULL WHERE outage_id = ?", (outage_id,))
        self.db.execute("UPDATE outages SET closed_at = ? WHERE id = ?", (closed_at, outage_id))
        self.db.execute("UPDATE clusters SET outage_id = NULL WHERE id = ?", (cluster_id,))

    def app(self, name: str) -> AppRecord | None:
        row = self.db.execute(f"{_APP_SELECT} WHERE a.name = ?", (name,)).fetchone()
        return None if row is None else _app(row)

    def apps(self) -> list[AppRecord]:
        return [_app(r) for r in self.db.execute(f"{_APP_SELECT} ORDER BY a.name")]

    def placement(self, app: str, cluster: str) -> Placement | None:
        row = self.db.execute(
            "SELECT a.id, c.id, c.status FROM apps a, clusters c WHERE a.name = ? AND c.name = ?",
            (app, cluster),
        ).fetchone()
        return None if row is None else Placement(row[0], row[1], Status(row[2]))

    def insert_app(self, name: str, cluster_id: int) -> AppRecord:
        cur = self.db.execute(
            "INSERT INTO apps (name, cluster_id, status) VALUES (?, ?, 'PENDING')",
            (name, cluster_id),
        )
        assert cur.lastrowid is not None
        cluster = self.db.execute(
            "SELECT name FROM clusters WHERE id = ?", (cluster_id,)
        ).fetchone()
        return AppRecord(cur.lastrowid, name, cluster_id, cluster[0], AppStatus.PENDING, None, None)

    def set_app(self, app_id: int, cluster_id: int, status: AppStatus, reason: str | None) -> None:
        self.db.execute(
            "UPDATE apps SET cluster_id = ?, status = ?, reason = ?, outage_id = NULL WHERE id = ?",
            (cluster_id, status.value, reason, app_id),
        )

    def status_counts(self) -> StatusCounts:
        return count_statuses(self.db.execute)

    def count_apps(self, cluster_id: int) -> int:
        row = self.db.execute("SELECT count(*) FROM apps WHERE cluster_id = ?", (cluster_id,))
        return int(row.fetchone()[0])

    def outages_of(self, cluster_id: int, limit: int) -> list[OutageRecord]:
        rows = self.db.execute(
            f"{OUTAGE_SELECT} WHERE cluster_id = ? ORDER BY started_at DESC, id DESC LIMIT ?",
            (cluster_id, limit),
        )
        return [OutageRecord(*row) for row in rows]

    def delete_closed_outages(self, closed_before: int, limit: int) -> int:
        cur = self.db.execute(
            "DELETE FROM outages WHERE id IN (SELECT o.id FROM outages o "
            "WHERE o.closed_at IS NOT NULL AND o.closed_at < ? "
            "AND NOT EXISTS (SELECT 1 FROM clusters c WHERE c.outage_id = o.id) "
            "AND NOT EXISTS (SELECT 1 FROM apps a WHERE a.outage_id = o.id) "
            "ORDER BY o.closed_at LIMIT ?)",
            (closed_before, limit),
        )
        return cur.rowcount

    def delete_cluster(self, cluster_id: int) -> None:
        self.db.execute("DELETE FROM apps WHERE cluster_id = ?", (cluster_id,))
        # No app of another cluster points at this one's outages (a move leaves the
        # outage), but the foreign key must hold even if one did.
        self.db.execute(
            "UPDATE apps SET outage_id = NULL "
            "WHERE outage_id IN (SELECT id FROM outages WHERE cluster_id = ?)",
            (cluster_id,),
        )
        self.db.execute("DELETE FROM outages WHERE cluster_id = ?", (cluster_id,))
        self.db.execute("DELETE FROM clusters WHERE id = ?", (cluster_id,))


class SQLiteStore:
    """:class:`Store` in one SQLite file, in WAL mode.

    ``synchronous=NORMAL``: a commit is durable against the process dying (``kill -9``) and
    the file is never corrupted; a power cut may lose the last commits (WAL's usual trade;
    Alertmanager's repeats re-deliver the cluster signals).
    """

    def __init__(
        self, path: Path | str, busy_timeout_s: float = 5.0, *, read_only: bool = False
    ) -> None:
        self.path = str(path)
        self.busy_timeout_s = busy_timeout_s
        self._checkpointer: sqlite3.Connection | None = None
        #: held by a checkpoint and by close(): closing a connection under a running
        #: checkpoint is a use-after-free in SQLite (a segfault at shutdown)
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        if read_only:
            self._open_reader()
            return
        try:
            # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
            # check_same_thread=False: the app runs every call on one worker thread, but
            # not necessarily the one that opened the file.
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal" and self.path != MEMORY:
                raise StoreUnavailable(f"{self.path}: cannot switch to WAL mode (got {mode})")
            self.db.execute("PRAGMA synchronous = NORMAL")
            # Checkpoints (WAL -> database file, with an fsync) are run by
            # :meth:`checkpoint` from another thread, not by whichever commit crosses
            # the threshold: that commit would wait for the fsync, tens of ms.
            self.db.execute("PRAGMA wal_autocheckpoint = 0")
            self.db.execute(f"PRAGMA journal_size_limit = {64 * 1024 * 1024}")
            self.db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{self.path}: {exc}") from exc

    def _migrate(self) -> None:
        """Apply the migrations this file lacks, each in its own write transaction."""
        while True:
            with self.write():
                version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
                if version > SCHEMA_VERSION:
                    raise StoreUnavailable(
                        f"{self.path}: schema version {version} is newer than this reactor's "
                        f"({SCHEMA_VERSION}): run the newer release"
                    )
                if version == SCHEMA_VERSION:
                    return
                for statement in schema.SQLITE[version]:
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {version + 1}")

    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def writer(self) -> None:
        """None: SQLite has one writer at a time, so one store thread writes."""
        return None

    def deploy(self, app: str, cluster: str, refused: Collection[Status]) -> Placement | None:
        with self.write() as tx:
            place = tx.placement(app, cluster)
            if place is not None and place.cluster_status not in refused:
                tx.set_app(place.app_id, place.cluster_id, AppStatus.DEPLOYED, None)
            return place

    def ping(self) -> None:
        try:
            self.db.execute("SELECT 1").fetchone()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{self.path}: {exc}") from exc

    def _open_reader(self) -> None:
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self.db.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{self.path}: {exc}") from exc

    def reader(self) -> SQLiteStore | None:
        """A read-only handle on the same file: in WAL mode, reads on it run while this
        one writes (a snapshot of the last commit), so a big ``GET /apps`` never holds up
        a deployment or a cascade.

        None for ``:memory:``: a second connection to it would be another, empty database.
        """
        if self.path == MEMORY:
            return None
        return SQLiteStore(self.path, self.busy_timeout_s, read_only=True)

    @contextmanager
    def write(self) -> Iterator[Transaction]:
        with self._transaction("BEGIN IMMEDIATE") as tx:
            yield tx

    @contextmanager
    def read(self) -> Iterator[Transaction]:
        with self._transaction("BEGIN") as tx:
            yield tx

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Transaction]:
        try:
            self.db.execute(begin)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(str(exc)) from exc
        try:
            yield SQLiteTransaction(self.db)
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreUnavailable(str(exc)) from exc
            raise

    def checkpoint(self) -> int:
        """Copy committed WAL pages into the database file; returns the pages left behind.

        Runs on its own connection, so it can be called from any thread while the store
        thread keeps committing (a PASSIVE checkpoint never blocks a writer). After
        :meth:`close`, it does nothing.
        """
        with self._checkpoint_lock:
            if self._closed:
                return 0
            if self._checkpointer is None:
                self._checkpointer = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False
                )
            try:
                _busy, log_pages, done = self._checkpointer.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).fetchone()
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(str(exc)) from exc
        return max(0, int(log_pages) - int(done))

    def close(self) -> None:
        """Close the connections; waits for a checkpoint running on another thread."""
        with self._checkpoint_lock:
            self._closed = True
            if self._checkpointer is not None:
                self._checkpointer.close()
        self.db.close()  # the last connection to close checkpoints the WAL
