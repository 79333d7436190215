"""What the reactor says while its database cannot serve: to callers, to Prometheus, to its log.

- A 503 tells a caller (who may be anyone who can reach the API: reads need no token)
  that the database is unavailable and to retry; the database's host, port, file and the
  driver's error are the log's, not the answer's.
- ``/metrics`` answers from memory: what the process counted, its build and process
  series, and ``fleetwatch_reactor_database_up 0``; the series read from the database
  (apps and clusters by status) are absent rather than stale or zero. A scrape that fails
  would make the reactor look down when it is the database that is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.common.metricnames import REACTOR_APPS, REACTOR_CLUSTERS, REACTOR_DATABASE_UP
from reactor.api import handlers as api
from reactor.app import create_app
from reactor.context import ReactorSettings
from reactor.store import Placement, StoreUnavailable, Transaction
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_payloads import ONLINE, alert, webhook

#: What psycopg says when PostgreSQL is down: a host, a port, the driver's words.
DETAIL = (
    'the database cannot be reached: connection to server at "db-7.corp.internal" '
    "(127.1.2.3), port 5432 failed: Connection refused"
)
SECRETS = ("db-7.corp.internal", "127.1.2.3", "5432", "Connection refused", "connection to")


class DownStore(SQLiteStore):
    """A real SQLite store whose every call can be made to fail as an unreachable
    PostgreSQL does (``down``), or to hang until released (``hang``)."""

    down = False
    hang: threading.Event | None = None

    def _check(self) -> None:
        if self.hang is not None:
            self.hang.wait(10)
        if self.down:
            raise StoreUnavailable(DETAIL)

    def write(self) -> AbstractContextManager[Transaction]:
        self._check()
        return super().write()

    def read(self) -> AbstractContextManager[Transaction]:
        self._check()
        return super().read()

    def deploy(self, app: str, cluster: str, refused: Any) -> Placement | None:
        self._check()
        return super().deploy(app, cluster, refused)

    def ping(self) -> None:
        self._check()
        super().ping()

    def reader(self) -> SQLiteStore | None:
        return None  # every call through this handle


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DownStore]:
    yield DownStore(tmp_path / "state.db")


async def _client(aiohttp_client: Any, store: DownStore, tmp_path: Path) -> TestClient[Any, Any]:
    settings = ReactorSettings(db_path=tmp_path / "state.db")
    client: TestClient[Any, Any] = await aiohttp_client(
        create_app(settings, store_factory=lambda: store)
    )
    cluster = {"name": "c1", "endpoint": "https://c1:6443", "kubeconfig_secret_ref": "c1"}
    assert (await client.post("/clusters", json=cluster)).status == 201
    assert (await client.post("/apps", json={"name": "web", "cluster": "c1"})).status == 201
    return client


async def test_a_503_names_no_database_host_nor_driver_error(
    aiohttp_client: Any, store: DownStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = await _client(aiohttp_client, store, tmp_path)
    store.down = True
    caplog.set_level(logging.WARNING)
    calls = [
        client.get("/clusters"),
        client.get("/apps/web"),
        client.post("/deployments", json={"app": "web", "cluster": "c1"}),
        client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0))),
    ]
    for call in calls:
        resp = await call
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "1"
        body = await resp.json()
        assert body == {"error": "the database is unavailable, retry later"}
    ready = await client.get("/-/ready")
    assert ready.status == 503
    text = await ready.text()
    assert "the database is unavailable" in text
    for secret in SECRETS:
        assert secret not in text
    # The operator finds the reason in the log, said once for the outage.
    said = [r.getMessage() for r in caplog.records if "db-7.corp.internal" in r.getMessage()]
    assert len(said) == 1, said
    assert "Connection refused" in said[0]


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


async def test_metrics_answer_from_memory_while_the_database_is_down(
    aiohttp_client: Any, store: DownStore, tmp_path: Path
) -> None:
    client = await _client(aiohttp_client, store, tmp_path)
    up = _samples(await (await client.get("/metrics")).text())
    assert up[REACTOR_DATABASE_UP] == [({}, 1.0)]
    assert ({"status": "PENDING"}, 1.0) in up[REACTOR_APPS]

    store.down = True
    assert (await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0)))).status == 503
    resp = await client.get("/metrics")
    assert resp.status == 200
    down = _samples(await resp.text())
    assert down[REACTOR_DATABASE_UP] == [({}, 0.0)]
    # Read from the database: absent, not stale, not zero.
    assert REACTOR_APPS not in down
    assert REACTOR_CLUSTERS not in down
    # Counted in memory: there.
    assert ({"outcome": "error"}, 1.0) in down["fleetwatch_reactor_notifications_total"]
    assert "fleetwatch_build_info" in down
    assert "process_start_time_seconds" in down

    store.down = False
    again = _samples(await (await client.get("/metrics")).text())
    assert again[REACTOR_DATABASE_UP] == [({}, 1.0)]
    assert ({"status": "PENDING"}, 1.0) in again[REACTOR_APPS]


async def test_metrics_answer_while_the_database_hangs(
    aiohttp_client: Any, store: DownStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that does not answer (a network cut, a hung server) holds the store
    thread, not the scrape: it answers after a short wait, the database marked down."""
    client = await _client(aiohttp_client, store, tmp_path)
    monkeypatch.setattr(api, "METRICS_DB_TIMEOUT_S", 0.3)
    store.hang = threading.Event()
    try:
        resp = await client.get("/metrics")
        assert resp.status == 200
        assert _samples(await resp.text())[REACTOR_DATABASE_UP] == [({}, 0.0)]
    finally:
        store.hang.set()
        store.hang = None
