"""Connections that PostgreSQL closed while they sat idle cost no caller a 503.

A reactor replica holds one connection per store thread (``--db.writers`` of them, and one
for reads), and under a light load most of them sit idle. When PostgreSQL restarts, or an
administrator ends the backends (``pg_terminate_backend``), the server closes each of them;
the replica learns it only when it next uses one. Each such connection used to answer its
next call with a 503 ("terminating connection due to administrator command") although the
database answered again: 12 of about 20,000 requests in the minute after a restart that
both replicas had already recovered from. Now a connection the server closed while idle is
noticed before anything is sent on it and replaced, and a transaction whose ``BEGIN`` meets
a dead connection (nothing of it reached the server) runs once more on a new one.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from reactor.service import Service
from reactor.statemachine import Status
from reactor.store.postgres import PostgresStore
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

APP = "fleetwatch-reactor"  #: the application_name of the reactor's connections
APPS = 2_000
WRITERS = 8


def reactor_backends(server: PostgresServer, database: str) -> int:
    with server.admin() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
            (APP, database),
        ).fetchone()
    assert row is not None
    return int(row[0])


def end_reactor_backends(server: PostgresServer, database: str) -> None:
    """``pg_terminate_backend`` on every connection of the reactor, then wait until the
    server has let them all go: from here on each of them is dead and idle."""
    with server.admin() as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = %s",
            (APP, database),
        ).fetchall()
    assert ended, "the reactor had no connection to end"
    wait_until(lambda: reactor_backends(server, database) == 0, 10, what="backends gone")


def seed(url: str) -> None:
    """Cluster c1 with APPS apps PENDING on it (app-1 ... app-N)."""
    store = PostgresStore(url)
    Service(store).add_cluster("c1", "https://127.0.0.1:6443", "c1-secret")
    with store.write() as tx:
        tx.cur.execute(
            "INSERT INTO apps (name, cluster_id, status) "
            "SELECT 'app-' || i, 1, 'PENDING' FROM generate_series(1, %s) i",
            (APPS,),
        )
    store.close()


# -- the store: every way in meets a connection that died idle ---------------------------


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[tuple[str, str]]:
    url = postgres_server.create_database("idle")
    seed(url)
    yield url, url.rsplit("/", 1)[1]
    postgres_server.drop_database(url)


def test_a_connection_ended_while_idle_is_replaced_before_use(
    postgres_server: PostgresServer, database: tuple[str, str]
) -> None:
    url, name = database
    store = PostgresStore(url, migrate=False)
    try:
        operations = {
            "ping": store.ping,
            "read": lambda: _read(store),
            "write": lambda: _write(store),
            "deploy": lambda: store.deploy("app-1", "c1", (Status.OFFLINE,)),
        }
        for what, operation in operations.items():
            store.ping()  # the connection is open and idle
            end_reactor_backends(postgres_server, name)
            try:
                operation()
            except Exception as exc:  # the message says which way in failed
                pytest.fail(f"{what} on a connection that died idle: {exc!r}")
    finally:
        store.close()


def _read(store: PostgresStore) -> None:
    with store.read() as tx:
        assert tx.cluster("c1") is not None


def _write(store: PostgresStore) -> None:
    with store.write() as tx:
        cluster = tx.cluster("c1")
        assert cluster is not None
        tx.set_cluster_location(cluster.id, "https://127.0.0.1:6443", "c1-secret")


# -- a reactor process: a burst after its connections died idle --------------------------


class Reactor:
    """One ``fleetwatch reactor`` on ``url`` with ``WRITERS`` writing connections."""

    def __init__(self, folder: Path, url: str) -> None:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        argv = [
            sys.executable, "-m", "fleetwatch.cli", "reactor",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--db.url={url}",
            f"--db.writers={WRITERS}",
            f"--kubeconfig={folder / 'none'}",
            "--log.level=warning",
        ]  # fmt: skip
        self.proc = ManagedProcess(argv, folder / "reactor.log", ready_url=f"{self.base}/-/ready")

    def call(self, method: str, path: str, body: Any = None) -> int:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            exc.read()
            return int(exc.code)

    def burst(self, first: int, count: int) -> Counter[int]:
        """``count`` calls, 32 at a time: deployments (every store thread gets some), reads
        of an app (the reader's connection), and readiness."""

        def one(i: int) -> int:
            if i % 8 == 0:
                return self.call("GET", f"/apps/app-{i}")
            if i % 8 == 1:
                return self.call("GET", "/-/ready")
            return self.call("POST", "/deployments", {"app": f"app-{i}", "cluster": "c1"})

        with ThreadPoolExecutor(max_workers=32) as pool:
            return Counter(pool.map(one, range(first, first + count)))


def _every_connection_open(reactor: Reactor, server: PostgresServer, database: str) -> None:
    """Bursts until every store thread has opened its connection (WRITERS + the reader)."""
    first = 1

    def opened() -> bool:
        nonlocal first
        codes = reactor.burst(first, 96)
        first += 96
        assert set(codes) <= {200, 201}, codes
        return reactor_backends(server, database) >= WRITERS + 1

    wait_until(opened, 60, interval=0, what="every connection of the reactor open")


def test_a_burst_after_every_backend_was_terminated_gets_no_503(
    postgres_server: PostgresServer, database: tuple[str, str], tmp_path: Path
) -> None:
    url, name = database
    reactor = Reactor(tmp_path, url)
    with reactor.proc:
        _every_connection_open(reactor, postgres_server, name)
        end_reactor_backends(postgres_server, name)
        codes = reactor.burst(1000, 400)
        assert codes[503] == 0, codes
        assert set(codes) <= {200, 201}, codes
    assert "Traceback" not in reactor.proc.log_tail(400)


def test_a_burst_after_postgresql_restarted_gets_no_503(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-pg-idle-"))
    server = PostgresServer(root).init().start()  # its own: this test restarts it
    try:
        url = server.create_database("restart")
        name = url.rsplit("/", 1)[1]
        seed(url)
        reactor = Reactor(tmp_path, url)
        with reactor.proc:
            _every_connection_open(reactor, server, name)
            server.stop("fast")
            server.start()
            # The database answers again: from now on, no caller may see a 503.
            wait_until(lambda: psycopg.connect(url).close() is None, 30, what="database up")
            codes = reactor.burst(1000, 400)
            assert codes[503] == 0, codes
            assert set(codes) <= {200, 201}, codes
        assert "Traceback" not in reactor.proc.log_tail(400)
    finally:
        server.stop()
        server.remove()
