"""`fleetwatch reactor` as a real process: kill -9 in a cascade, restart, `fleetwatch status`."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.procs import free_port, wait_until
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.service import Service
from reactor.store.postgres import PostgresTransaction
from tests.helpers.commands import fleetwatch
from tests.helpers.reactor_helpers import dump_db, open_store, postgres_url, query
from tests.helpers.reactor_live import call, reactor_process
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

pytestmark = pytest.mark.live

BIG = 300_000  # apps on the cluster that goes down: the cascade takes long enough to be hit


def seed_big(db_path: Path) -> None:
    store = open_store(db_path)
    service = Service(store)
    service.add_cluster("c1", "https://127.0.0.1:6443", "c1-secret")
    service.add_cluster("c2", "https://127.0.0.1:6444", "c2-secret")
    online = webhook(alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
    service.apply_signals(status_signals(parse_webhook(json.dumps(online).encode())).signals)
    with store.write() as tx:
        if isinstance(tx, PostgresTransaction):
            tx.cur.execute(
                "INSERT INTO apps (name, cluster_id, status) SELECT 'app-' || i, "
                "CASE WHEN i < %s THEN 1 ELSE 2 END, 'DEPLOYED' FROM generate_series(0, %s) i",
                (BIG, BIG + 9),
            )
        else:
            tx.db.executemany(  # type: ignore[attr-defined]
                "INSERT INTO apps (name, cluster_id, status) VALUES (?, ?, 'DEPLOYED')",
                ((f"app-{i}", 1 if i < BIG else 2) for i in range(BIG + 10)),
            )
    store.close()


def summary(db_path: Path) -> tuple[str, int, dict[str, int]]:
    """(status of c1, outages, apps of c1 by status) read straight from the database."""
    status = query(db_path, "SELECT status FROM clusters WHERE name = 'c1'")[0][0]
    outages = query(db_path, "SELECT count(*) FROM outages")[0][0]
    by_status = query(
        db_path, "SELECT status, count(*) FROM apps WHERE cluster_id = 1 GROUP BY status"
    )
    return status, outages, dict(by_status)


def writer_busy(db_path: Path) -> bool:
    """True while another connection writes (SQLite: holds the write lock; PostgreSQL: runs
    the cascade's UPDATE)."""
    if postgres_url(db_path) is not None:
        return bool(
            query(
                db_path,
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                "AND pid <> pg_backend_pid() "
                "AND query LIKE '%UPDATE apps SET status = ''DEGRADED''%'",
            )[0][0]
        )
    db = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc) or "busy" in str(exc)
    finally:
        db.close()


def test_kill_9_during_a_large_cascade_is_all_or_nothing(tmp_path: Path, db_path: Path) -> None:
    seed_big(db_path)
    down = webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5))
    proc, url = reactor_process(tmp_path, db_path)
    proc.start()
    try:
        answers: list[BaseException | tuple[int, Any]] = []

        def send() -> None:
            try:
                answers.append(call(f"{url}/alerts", "POST", down))
            except (urllib.error.URLError, OSError) as exc:
                answers.append(exc)

        sender = threading.Thread(target=send)
        sender.start()
        wait_until(lambda: writer_busy(db_path), 30, interval=0.001, what="cascade in progress")
        proc.kill()
        sender.join(30)
    finally:
        proc.stop()
    assert answers and isinstance(answers[0], BaseException), "answered before the kill"

    # Nothing half-applied: either none of the cascade or all of it.
    status, outages, apps = summary(db_path)
    assert (status, outages, apps) in [
        ("ONLINE", 0, {"DEPLOYED": BIG}),
        ("OFFLINE", 1, {"DEGRADED": BIG}),
    ]

    # Restarted, it serves that state; Alertmanager's retry then applies the cascade once.
    proc, url = reactor_process(tmp_path, db_path, name="restarted")
    proc.start()
    try:
        code, cluster = call(f"{url}/clusters/c1")
        assert (code, cluster["status"]) == (200, status)

        # On PostgreSQL the killed reactor's transaction holds c1's lock until its server
        # process notices the dead client: 503 meanwhile, and Alertmanager retries.
        def applied() -> tuple[int, Any] | None:
            answer = call(f"{url}/alerts", "POST", down)
            return None if answer[0] == 503 else answer

        code, result = wait_until(applied, 60, what="the notification applied")
        assert code == 200, result
        assert result["apps_degraded"] == (BIG if outages == 0 else 0)
        assert summary(db_path) == ("OFFLINE", 1, {"DEGRADED": BIG})
        code, other = call(f"{url}/apps/app-{BIG}")
        assert other["cluster"] == "c2" and other["status"] == "DEPLOYED"
    finally:
        assert proc.stop() == 0, proc.log_tail()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("process-token\n")  # the trailing newline is stripped
    return path


def test_status_table_and_restart(tmp_path: Path, db_path: Path, token_file: Path) -> None:
    proc, url = reactor_process(tmp_path, db_path, f"--web.token-file={token_file}")
    proc.start()
    token = "process-token"
    try:
        for name in ("prod-a", "prod-b"):
            body = {"name": name, "endpoint": f"https://{name}:6443", "kubeconfig_secret_ref": name}
            assert call(f"{url}/clusters", "POST", body)[0] == 401
            assert call(f"{url}/clusters", "POST", body, token)[0] == 201
        for app, cluster in (("web", "prod-a"), ("api", "prod-a"), ("batch", "prod-b")):
            call(f"{url}/apps", "POST", {"name": app, "cluster": cluster}, token)
            call(f"{url}/deployments", "POST", {"app": app, "cluster": cluster}, token)
        call(f"{url}/apps/batch", "PATCH", {"status": "DEGRADED", "reason": "crashloop"}, token)
        call(f"{url}/alerts", "POST", webhook(alert(ONLINE, "prod-a", 0)), token)
        code, _ = call(
            f"{url}/alerts",
            "POST",
            webhook(alert(ONLINE, "prod-a", 0, 5), alert(OFFLINE, "prod-a", 5)),
            token,
        )
        assert code == 200
        before = dump_db(db_path)
    finally:
        assert proc.stop() == 0, proc.log_tail()
    assert dump_db(db_path) == before

    proc, url = reactor_process(tmp_path, db_path, name="again")
    proc.start()
    try:
        out = fleetwatch("status", "--reactor", url, timeout=30)
    finally:
        proc.stop()
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["CLUSTER", "STATUS", "SINCE", "SOURCE", "OUTAGE", "REASON"]
    assert lines[1].split()[:4] == ["prod-a", "OFFLINE", "2026-11-30", "02:05:00Z"]
    assert "2026-11-30 02:05:00Z" in lines[1].split("discovery", 1)[-1], "the open outage"
    assert lines[2].split() == ["prod-b", "UNKNOWN", "-", "api", "-", "-"]
    apps = {line.split()[0]: line.split()[1:] for line in lines[lines.index("") + 2 :]}
    header = ["APP", "CLUSTER", "STATUS", "PAUSED", "SOURCE", "REASON"]
    assert lines[lines.index("") + 1].split() == header
    assert apps == {
        "api": ["prod-a", "DEGRADED", "-", "api", "cluster_offline"],
        "batch": ["prod-b", "DEGRADED", "-", "api", "crashloop"],
        "web": ["prod-a", "DEGRADED", "-", "api", "cluster_offline"],
    }


def test_status_of_a_reactor_that_is_not_there() -> None:
    out = fleetwatch("status", "--reactor", f"http://127.0.0.1:{free_port()}", timeout=30)
    assert out.returncode == 1
    assert "cannot read http://127.0.0.1:" in out.stderr


def test_an_unusable_database_is_a_clear_exit_1(tmp_path: Path) -> None:
    out = fleetwatch(
        "reactor",
        f"--web.listen-address=127.0.0.1:{free_port()}",
        f"--db.path={tmp_path / 'missing-dir' / 'state.db'}",
        f"--kubeconfig={tmp_path / 'none'}",
        timeout=30,
    )
    assert out.returncode == 1
    assert "cannot open the database" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_busy_port_fails_before_the_database_is_touched(tmp_path: Path) -> None:
    """Binding comes first: a second reactor on a taken port changes no database."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        db_path = tmp_path / "never.db"
        done = fleetwatch(
            "reactor",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--db.path={db_path}",
            "--kubeconfig=",
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert not db_path.exists()
