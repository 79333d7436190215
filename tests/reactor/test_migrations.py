"""Schema migrations: a first-release SQLite file upgrades in place with nothing lost;
PostgreSQL migrates once however many replicas start together; newer schemas are refused;
``fleetwatch reactor --db.migrate-only``."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from reactor.service import Service
from reactor.statemachine import AppStatus, Status
from reactor.store import StoreUnavailable, schema
from reactor.store.postgres import PostgresStore
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_helpers import at_once, signals_of
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook
from tests.helpers.reactor_postgres import PostgresServer

SCHEMA1 = Path(__file__).parent / "fixtures" / "schema1.db"
TABLES = ("clusters", "outages", "apps")


def sqlite_rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(path)
    try:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in TABLES}
    finally:
        db.close()


def sqlite_indexes(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        db.close()


def test_a_first_release_sqlite_file_upgrades_in_place(tmp_path: Path) -> None:
    path = tmp_path / "fleetwatch.db"
    shutil.copy(SCHEMA1, path)
    before = sqlite_rows(path)
    assert before["outages"] and before["apps"], "the fixture holds state"
    assert "outages_closed" not in sqlite_indexes(path)

    store = SQLiteStore(path)
    try:
        assert store.schema_version() == schema.VERSION
        after = sqlite_rows(path)
        assert after["outages"] == before["outages"]  # nothing lost, nothing changed...
        # ...but two columns: every resolution stored before is Alertmanager's (final),
        # and three of migration 5: no reason told yet, nothing held back.
        expected = [(*row, 0, 0, None, None, None) for row in before["clusters"]]
        assert after["clusters"] == expected
        # ...and the apps are the API's (migration 4's columns).
        first_release = len(before["apps"][0])
        assert [row[:first_release] for row in after["apps"]] == before["apps"]
        assert {row[first_release:] for row in after["apps"]} == {("api", None, None, None)}
        assert "outages_closed" in sqlite_indexes(path)
        # The state works on: east's open outage (3 apps) is restored by its recovery.
        service = Service(store)
        assert service.cluster("east").state.status is Status.OFFLINE
        recovery = webhook(alert(OFFLINE, "east", 60, 120), alert(ONLINE, "east", 120))
        result = service.apply_signals(signals_of(recovery))
        assert (result.outages_closed, result.apps_restored) == (1, 3)
        assert service.app("north-2").status is AppStatus.DEGRADED  # a report stays
    finally:
        store.close()


def test_a_newer_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fleetwatch.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    db.close()
    with pytest.raises(StoreUnavailable, match="newer than this reactor"):
        SQLiteStore(path)


def pg_version(url: str) -> list[tuple[int]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT version FROM fleetwatch_schema").fetchall()


@pytest.mark.live
def test_replicas_starting_together_migrate_once(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database("migrate")
    applied: list[int] = []

    def start() -> None:
        store = PostgresStore(url, migrate=False)
        applied.append(store.migrate())
        store.close()

    failures = at_once(start, 6)
    assert not failures, failures
    assert sorted(applied) == [0] * 5 + [schema.VERSION]
    assert pg_version(url) == [(schema.VERSION,)]


@pytest.mark.live
def test_postgres_upgrades_from_version_1_and_refuses_newer(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database("migrate")
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in schema.POSTGRES[0]:
            conn.execute(statement)
        conn.execute("CREATE TABLE fleetwatch_schema (version INTEGER)")
        conn.execute("INSERT INTO fleetwatch_schema VALUES (1)")
        conn.execute("INSERT INTO clusters (name, source) VALUES ('kept', 'api')")
    store = PostgresStore(url)
    try:
        assert store.schema_version() == schema.VERSION
        assert Service(store).cluster("kept").source == "api"
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('outages_closed')").fetchone() == (
            "outages_closed",
        )
        conn.execute("UPDATE fleetwatch_schema SET version = %s", (schema.VERSION + 1,))
    with pytest.raises(StoreUnavailable, match="newer than this reactor"):
        PostgresStore(url)


def migrate_only(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", "reactor", "--db.migrate-only", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.live
def test_migrate_only_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "fleetwatch.db"
    shutil.copy(SCHEMA1, path)
    done = migrate_only(f"--db.url=sqlite:///{path}")
    assert done.returncode == 0, done.stderr
    assert "schema up to date" in done.stderr
    assert "outages_closed" in sqlite_indexes(path)


@pytest.mark.live
def test_migrate_only_on_postgresql_never_shows_the_password(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database("migrate")
    with_password = url.replace("fw@", "fw:n0t-to-be-seen@")  # trust: any password works
    done = migrate_only(f"--db.url={with_password}")
    assert done.returncode == 0, done.stderr
    assert "n0t-to-be-seen" not in done.stderr + done.stdout
    assert "fw:xxxxx@127.0.0.1" in done.stderr
    assert pg_version(url) == [(schema.VERSION,)]

    stopped = migrate_only("--db.url=postgresql://fw:n0t-to-be-seen@127.0.0.1:1/none")
    assert stopped.returncode == 1
    assert "cannot migrate the database" in stopped.stderr
    assert "n0t-to-be-seen" not in stopped.stderr
