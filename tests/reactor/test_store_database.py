"""``--db.url`` and its password: parsed at the edge, shown without the password, and the
PostgreSQL store's behaviour when its server goes away (503, ``ping``, reconnection)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from fleetwatch.cli import build_parser
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from reactor.cli import settings_from, shown_database
from reactor.service import Service
from reactor.store import StoreUnavailable, retry_conflicts
from reactor.store.database import POSTGRESQL, SQLITE, parse_db_url
from reactor.store.postgres import PostgresStore
from tests.helpers.reactor_helpers import at_once, signals_of
from tests.helpers.reactor_payloads import ONLINE, alert, webhook
from tests.helpers.reactor_postgres import PostgresServer


@pytest.mark.parametrize(
    ("text", "kind", "where", "password", "shown"),
    [
        ("sqlite:///fleetwatch.db", SQLITE, "fleetwatch.db", None, "sqlite:///fleetwatch.db"),
        ("sqlite:////var/lib/fw.db", SQLITE, "/var/lib/fw.db", None, "sqlite:////var/lib/fw.db"),
        ("sqlite:///:memory:", SQLITE, ":memory:", None, "sqlite:///:memory:"),
        (
            "postgresql://fw@db.example:5432/fleet",
            POSTGRESQL,
            "postgresql://fw@db.example:5432/fleet",
            None,
            "postgresql://fw@db.example:5432/fleet",
        ),
        (
            "postgres://fw:s%40cret@db.example/fleet?sslmode=require",
            POSTGRESQL,
            "postgresql://fw@db.example/fleet?sslmode=require",
            "s@cret",
            "postgresql://fw:xxxxx@db.example/fleet?sslmode=require",
        ),
        (
            "postgresql://fw@db.example/fleet?password=s3cret&sslmode=verify-full",
            POSTGRESQL,
            "postgresql://fw@db.example/fleet?sslmode=verify-full",
            "s3cret",
            "postgresql://fw:xxxxx@db.example/fleet?sslmode=verify-full",
        ),
    ],
)
def test_urls(text: str, kind: str, where: str, password: str | None, shown: str) -> None:
    url = parse_db_url(text)
    assert url.kind == kind
    assert (str(url.path) if kind == SQLITE else url.conninfo) == where
    assert url.password == password
    assert url.shown() == shown
    assert password is None or password not in repr(url)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fleetwatch.db", "must start with sqlite:// or postgresql://"),
        ("mysql://u:p@h/db", "unknown scheme 'mysql'"),
        ("sqlite://fleetwatch.db", "needs a path after the third slash"),
        ("postgresql://fw:pw@db:port/x", "the port is not a number"),
        ("postgresql:///fleet", "needs a host"),
    ],
)
def test_bad_urls(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_db_url(text)
    assert "pw" not in str(caught.value).replace("postgresql", "")


def settings_of(argv: list[str], env: dict[str, str]) -> argparse.Namespace:
    args: argparse.Namespace = build_parser().parse_args(["reactor", *argv])
    return args


def test_the_password_comes_from_the_file_then_the_environment_then_the_url(
    tmp_path: Path,
) -> None:
    url = "--db.url=postgresql://fw:from-url@db:5432/fleet"
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    env = {"PGPASSWORD": "from-env"}
    args = settings_of([url, f"--db.password-file={secret}"], env)
    assert settings_from(args, env).db_password == "from-file"
    assert settings_from(args, env).db_password_file == secret  # followed as it rotates
    assert settings_from(settings_of([url], env), env).db_password == "from-env"
    assert settings_from(settings_of([url], env), env).db_password_file is None
    settings = settings_from(settings_of([url], {}), {})
    assert settings.db_password is None  # the store then takes the URL's
    assert shown_database(settings) == "postgresql://fw:xxxxx@db:5432/fleet"
    with_file = settings_from(args, env)
    assert "from-file" not in repr(with_file) and "from-url" not in shown_database(with_file)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--db.path=a.db", "--db.url=sqlite:///b.db"], "both name the database"),
        (["--db.url=postgresql://fw@db/x", "--db.password-file=/nonexistent"], "No such file"),
        (["--db.url=oracle://x"], "unknown scheme"),
    ],
)
def test_bad_database_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from(settings_of(argv, {}), {})


def test_defaults_stay_a_sqlite_file() -> None:
    settings = settings_from(settings_of([], {}), {})
    assert settings.db_url is None and settings.db_path == Path("fleetwatch.db")
    assert shown_database(settings) == "sqlite:///fleetwatch.db"


@pytest.mark.live
def test_a_database_that_goes_away_is_503_and_comes_back_by_itself() -> None:
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-pg-ping-"))
    server = PostgresServer(root).init().start()  # its own: this test stops it
    try:
        url = server.create_database()
        store = PostgresStore(url)
        service = Service(store)
        service.add_cluster("c1", "https://127.0.0.1:6443", "ref")
        store.ping()
        server.stop("fast")
        with pytest.raises(StoreUnavailable, match="cannot"):
            store.ping()
        with pytest.raises(StoreUnavailable, match="cannot be reached"):
            service.add_app("a1", "c1")
        server.start()

        def ready() -> bool:
            try:
                store.ping()
                return True
            except StoreUnavailable:
                return False

        wait_until(ready, 10, what="the store reconnected")
        assert service.add_app("a1", "c1").cluster == "c1"
        store.close()
    finally:
        server.stop()
        server.remove()


@pytest.mark.live
def test_replicas_inserting_one_new_name_together_are_retried(
    postgres_server: PostgresServer,
) -> None:
    """Eight stores applying one notification that names 30 unknown clusters, at once: a
    loser's unique violation is a conflict, and running it again finds the winner's rows,
    so every call succeeds and each cluster is created exactly once."""
    url = postgres_server.create_database()
    PostgresStore(url).close()
    signals = signals_of(webhook(*(alert(ONLINE, f"c{i}", 120) for i in range(30))))
    created: list[str] = []
    stores = [PostgresStore(url, migrate=False) for _ in range(8)]  # connected before the race
    services = [Service(store) for store in stores]

    def apply() -> None:
        service = services.pop()
        created.extend(retry_conflicts(lambda: service.apply_signals(signals)).clusters_created)

    try:
        failures = at_once(apply, 8)
    finally:
        for store in stores:
            store.close()
    assert not failures, failures
    assert sorted(created) == sorted(f"c{i}" for i in range(30))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], 30 * 86400.0), (["--db.retention=0"], 0.0), (["--db.retention=12h"], 43200.0),
     (["--db.retention=7d"], 7 * 86400.0)],
)  # fmt: skip
def test_retention_flag(argv: list[str], expected: float) -> None:
    assert settings_from(settings_of(argv, {}), {}).db_retention_s == expected


@pytest.mark.parametrize("text", ["-1d", "xd", "forever", "-5"])
def test_bad_retention_is_refused(text: str) -> None:
    with pytest.raises(SystemExit):
        settings_of([f"--db.retention={text}"], {})


@pytest.mark.live
def test_a_running_replica_never_shows_the_password(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """In the URL (PostgreSQL here trusts any password): not in the log, not in /metrics,
    not in an answer."""
    secret = "n0t-for-any-eyes"
    url = postgres_server.create_database().replace("fw@", f"fw:{secret}@")
    port = free_port()
    proc = ManagedProcess(
        [sys.executable, "-m", "fleetwatch.cli", "reactor",
         f"--web.listen-address=127.0.0.1:{port}", f"--db.url={url}",
         f"--kubeconfig={tmp_path / 'none'}", "--log.level=debug"],
        tmp_path / "reactor.log",
        ready_url=f"http://127.0.0.1:{port}/healthz",
    )  # fmt: skip
    with proc:
        bodies = []
        for path in ("/metrics", "/clusters", "/-/ready", "/openapi.json"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
                bodies.append(resp.read().decode())
        log = proc.log_tail(400)
    assert "fw:xxxxx@127.0.0.1" in log
    assert all(secret not in text for text in [log, *bodies])
