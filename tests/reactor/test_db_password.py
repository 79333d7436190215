"""``--db.password-file`` rotates without an outage, against a real PostgreSQL 15 that asks
for passwords (SCRAM over TCP).

The rotation as an operator does it: the role's password changed with ``ALTER ROLE``, the
file rewritten (by hand, a Secret volume, an agent). PostgreSQL checks a password only when
a connection starts, so what rotating used to break is the next connection: after a
database restart, or a connection that died, every replica answered 503 until restarted.
Here the reactor's connections are ended (``pg_terminate_backend``) right after the
rotation, so every call needs a new one. A call may meet its connection's death once (a
503 the client retries); the one after must work, with no restart.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from reactor.secretfile import SecretFile
from reactor.service import Service
from reactor.store import StoreUnavailable
from reactor.store.postgres import PostgresStore
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

FIRST, SECOND, THIRD = "first-Pa55word", "second-Pa55word", "third-Pa55word"


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-pg-auth-"))
    pg = PostgresServer(root).init().require_passwords().start()
    try:
        yield pg
    finally:
        pg.stop()
        pg.remove()


@pytest.fixture
def database(server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database; the role's password is FIRST."""
    name = f"rot{abs(hash(request.node.name)) % 10**8}"
    with server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        conn.execute(f"ALTER ROLE fw PASSWORD '{FIRST}'")
    yield server.url(name)
    with server.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def rotate(server: PostgresServer, password: str) -> None:
    with server.admin() as conn:
        conn.execute(f"ALTER ROLE fw PASSWORD '{password}'")


def cut_connections(server: PostgresServer) -> int:
    """End every connection of the reactor, as a database restart would; how many."""
    with server.admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'fleetwatch-reactor'"
        ).fetchall()
    return len(rows)


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def with_one_retry(base: str, method: str, path: str, body: Any = None) -> tuple[int, str]:
    """What a client honouring 503 + Retry-After does: one more try (at once, here)."""
    code, text = call(base, method, path, body)
    if code == 503:
        code, text = call(base, method, path, body)
    return code, text


def test_a_rotated_password_file_is_followed_without_a_restart(
    server: PostgresServer, database: str, tmp_path: Path
) -> None:
    secret = tmp_path / "db-password"
    secret.write_text(FIRST + "\n")
    secret.chmod(0o600)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "fleetwatch.cli", "reactor",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--db.url={database}",
        f"--db.password-file={secret}",
        "--db.writers=1",  # one writing connection: one death to meet, not eight
        f"--kubeconfig={tmp_path / 'none'}",
        "--log.level=info",
    ]  # fmt: skip
    with ManagedProcess(argv, tmp_path / "reactor.log", ready_url=f"{base}/-/ready") as proc:
        cluster = {"name": "c1", "endpoint": "https://c1:6443", "kubeconfig_secret_ref": "c1"}
        assert call(base, "POST", "/clusters", cluster)[0] == 201
        assert call(base, "POST", "/apps", {"name": "web", "cluster": "c1"})[0] == 201

        # The password changes in the database, then in the file: in place, as an editor.
        rotate(server, SECOND)
        secret.write_text(SECOND + "\n")
        assert cut_connections(server) >= 1
        for method, path, body, expected in [
            ("POST", "/deployments", {"app": "web", "cluster": "c1"}, 201),
            ("GET", "/clusters/c1", None, 200),
            ("POST", "/apps", {"name": "api", "cluster": "c1"}, 201),
            ("GET", "/-/ready", None, 200),
        ]:
            code, text = with_one_retry(base, method, path, body)
            assert code == expected, f"{method} {path}: {code} {text}\n{proc.log_tail(20)}"

        # The other order: the file first (a Secret volume updated early), the database
        # after. Connections opened in between are refused (503), none after.
        secret.write_text(THIRD)
        cut_connections(server)
        call(base, "GET", "/clusters/c1")  # meets the dead connection, or a refusal
        rotate(server, THIRD)
        wait_until(
            lambda: call(base, "GET", "/clusters/c1")[0] == 200,
            10,
            what="served again once the database takes the file's password",
        )
        assert with_one_retry(base, "POST", "/apps", {"name": "db", "cluster": "c1"})[0] == 201
        log = (tmp_path / "reactor.log").read_text()
    assert "re-read: it changed" in log
    for password in (FIRST, SECOND, THIRD):
        assert password not in log


def test_a_refused_connection_reads_the_password_file_again_at_once(
    server: PostgresServer, database: str, tmp_path: Path
) -> None:
    """The file is looked at once an hour here: only the refusal can make it read again."""
    secret = tmp_path / "db-password"
    secret.write_text(FIRST)
    store = PostgresStore(database, password=SecretFile(secret, "password", recheck_s=3600))
    try:
        service = Service(store)
        service.add_cluster("c1", "https://c1:6443", "c1")
        rotate(server, SECOND)
        secret.write_text(SECOND)
        store.close()  # the next call opens a connection
        assert service.cluster("c1").name == "c1"
        rotate(server, THIRD)  # the file still says SECOND: refused, and said so
        store.close()
        with pytest.raises(StoreUnavailable, match="password authentication failed"):
            service.cluster("c1")
    finally:
        store.close()
