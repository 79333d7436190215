"""The :class:`reactor.store.Store` in one SQLite file: one reactor process, no server.

Every mutating transaction starts with ``BEGIN IMMEDIATE`` (the write lock is taken up
front, so two writers never interleave a read and a write). The cascade and the restore
are one set-based ``UPDATE`` each (no Python loop over apps; their cost is measured in
docs/reactor.md, "Durability and numbers"). The statements SQLite shares with PostgreSQL
are ``reactor.store.sql``'s; here are SQLite's own, its connections and its errors.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reactor.statemachine import AppStatus, Status
from reactor.store import (
    AppRecord,
    ClusterRecord,
    Placement,
    StoreBusy,
    StoreUnavailable,
    Transaction,
    schema,
)
from reactor.store.sql import CLUSTER_SELECT, SQLTransaction, cluster_record

SCHEMA_VERSION = schema.VERSION

#: SQLite's name for a private in-memory database (``--db.path :memory:``: nothing survives).
MEMORY = ":memory:"


class SQLiteTransaction(SQLTransaction):
    """:class:`Transaction` over one sqlite3 connection.

    No row locks: the write transaction holds SQLite's one write lock from ``BEGIN
    IMMEDIATE`` on. The operations over many clusters run one statement per cluster:
    SQLite runs in this process, so a statement costs no round trip.
    """

    MARK = "?"

    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__(db)
        self.db = db

    def _insert(self, sql: str, params: Sequence[Any]) -> int:
        row_id = self.db.execute(sql, params).lastrowid
        assert row_id is not None
        return row_id

    def clusters_named(self, names: Sequence[str]) -> dict[str, ClusterRecord]:
        found: dict[str, ClusterRecord] = {}
        for start in range(0, len(names), 500):  # stay far below SQLite's variable limit
            chunk = names[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self.db.execute(f"{CLUSTER_SELECT} WHERE c.name IN ({marks})", chunk):
                found[row[1]] = cluster_record(row)
        return found

    def insert_clusters(self, names: Sequence[str], source: str) -> dict[str, ClusterRecord]:
        return {name: self.insert_cluster(name, None, None, source) for name in names}

    def open_outages(self, starts: Sequence[tuple[int, int]], opened_at: int) -> list[int]:
        return [self.open_outage(c, started_at, opened_at) for c, started_at in starts]

    def degrade_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        return {c: self.degrade_apps(c, outage_id) for c, outage_id in members}

    def restore_apps_of(self, members: Sequence[tuple[int, int]]) -> dict[int, int]:
        return {c: self.restore_apps(c, outage_id) for c, outage_id in members}

    def close_outages(self, ends: Sequence[tuple[int, int, int]]) -> None:
        for c, outage_id, closed_at in ends:
            self.close_outage(c, outage_id, closed_at)

    def open_outage(self, cluster_id: int, started_at: int, opened_at: int) -> int:
        outage_id = self._insert(
            "INSERT INTO outages (cluster_id, started_at, opened_at) VALUES (?, ?, ?)",
            (cluster_id, started_at, opened_at),
        )
        self.db.execute("UPDATE clusters SET outage_id = ? WHERE id = ?", (outage_id, cluster_id))
        return outage_id

    def insert_app(self, name: str, cluster_id: int) -> AppRecord:
        app_id = self._insert(
            "INSERT INTO apps (name, cluster_id, status) VALUES (?, ?, 'PENDING')",
            (name, cluster_id),
        )
        cluster = self.db.execute(
            "SELECT name FROM clusters WHERE id = ?", (cluster_id,)
        ).fetchone()
        return AppRecord(app_id, name, cluster_id, cluster[0], AppStatus.PENDING, None, None)


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
            raise _unavailable(exc) from exc
        try:
            yield SQLiteTransaction(self.db)
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise _unavailable(exc) from exc
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


def _unavailable(exc: sqlite3.OperationalError) -> StoreUnavailable:
    """A lock not granted within the busy timeout is :class:`StoreBusy`."""
    text = str(exc)
    return StoreBusy(text) if "locked" in text or "busy" in text else StoreUnavailable(text)
