"""Several ``fleetwatch reactor`` processes on one PostgreSQL database.

What a second replica must never change: the same notification delivered to every replica
(an Alertmanager HA pair, retries) ends as one replica would end it; a deployment never
lands on a cluster after the transaction that made it OFFLINE committed, whichever replica
took either; a replica killed in the middle of a cascade leaves all of it or none, while
the others keep serving; and a database that goes away and comes back costs 503s, never a
500, a lost write or a restart.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.service import Service
from reactor.store.postgres import PostgresStore
from tests.helpers.commands import FLEETWATCH
from tests.helpers.reactor_live import call, metric_sample
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

ONLINE_C1 = webhook(alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
DOWN_C1 = webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5))
UP_C1 = webhook(alert(OFFLINE, "c1", 5, 10), alert(ONLINE, "c1", 10))


class Replica:
    """One ``fleetwatch reactor`` process on ``url``'s database."""

    def __init__(self, folder: Path, db_url: str, name: str) -> None:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.proc = ManagedProcess(
            [
                *FLEETWATCH,
                "reactor",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--db.url={db_url}",
                f"--kubeconfig={folder / 'none'}",
                "--log.level=warning",
            ],
            folder / f"{name}.log",
            ready_url=f"{self.base}/healthz",
        )

    def call(
        self, method: str, path: str, body: Any = None, timeout: float = 60
    ) -> tuple[int, Any]:
        return call(self.base + path, method, body, timeout=timeout)

    def counter(self, name: str) -> float:
        return metric_sample(self.base, name) or 0.0


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    return postgres_server.create_database("replicas")


@pytest.fixture
def replicas(tmp_path: Path, pg_url: str) -> Iterator[Callable[[int], list[Replica]]]:
    started: list[Replica] = []

    def start(count: int) -> list[Replica]:
        group = [Replica(tmp_path, pg_url, f"replica{len(started) + i}") for i in range(count)]
        for replica in group:  # together: the second waits on the migration lock
            replica.proc.start()
        started.extend(group)
        return group

    yield start
    for replica in started:
        replica.proc.stop()
        assert "Traceback" not in replica.proc.log_tail(400), replica.proc.log_tail(400)


def seed(url: str, deployed_on_c1: int, pending_on_c1: int = 0) -> None:
    """c1 and c2 ONLINE; apps app-N DEPLOYED and new-N PENDING on c1, ten DEPLOYED on c2."""
    store = PostgresStore(url)
    service = Service(store)
    service.add_cluster("c1", "https://127.0.0.1:6443", "c1-secret")
    service.add_cluster("c2", "https://127.0.0.1:6444", "c2-secret")
    service.apply_signals(status_signals(parse_webhook(json.dumps(ONLINE_C1).encode())).signals)
    with store.write() as tx:
        cur = tx.cur
        cur.execute(
            "INSERT INTO apps (name, cluster_id, status) "
            "SELECT 'app-' || i, 1, 'DEPLOYED' FROM generate_series(1, %s) i",
            (deployed_on_c1,),
        )
        cur.execute(
            "INSERT INTO apps (name, cluster_id, status) "
            "SELECT 'new-' || i, 1, 'PENDING' FROM generate_series(1, %s) i",
            (pending_on_c1,),
        )
        cur.execute(
            "INSERT INTO apps (name, cluster_id, status) "
            "SELECT 'c2-app-' || i, 2, 'DEPLOYED' FROM generate_series(1, 10) i"
        )
    store.close()


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def c1_summary(url: str) -> tuple[str, int, dict[str, int]]:
    status = rows(url, "SELECT status FROM clusters WHERE name = 'c1'")[0][0]
    outages = rows(url, "SELECT count(*) FROM outages")[0][0]
    apps = dict(rows(url, "SELECT status, count(*) FROM apps WHERE cluster_id = 1 GROUP BY 1"))
    return status, outages, apps


def test_copies_of_one_notification_on_every_replica_act_once(
    replicas: Callable[[int], list[Replica]], pg_url: str
) -> None:
    seed(pg_url, deployed_on_c1=500)
    group = replicas(3)
    copies = 36
    for body, opened, closed in ((DOWN_C1, 1, 0), (UP_C1, 0, 1)):

        def deliver(i: int, body: dict[str, Any] = body) -> tuple[int, Any]:
            return group[i % 3].call("POST", "/alerts", body)

        with ThreadPoolExecutor(max_workers=copies) as pool:
            answers = list(pool.map(deliver, range(copies)))
        assert [code for code, _ in answers] == [200] * copies, answers
        assert sum(a["outages_opened"] for _, a in answers) == opened
        assert sum(a["outages_closed"] for _, a in answers) == closed

    # One outage, every app degraded by it once and restored once.
    assert rows(
        pg_url, "SELECT apps_degraded, apps_restored, closed_at IS NOT NULL FROM outages"
    ) == [(500, 500, True)]
    assert c1_summary(pg_url) == ("ONLINE", 1, {"DEPLOYED": 500})
    # The replicas' counters add up to what one replica would have counted.
    totals = {
        name: sum(r.counter(name) for r in group)
        for name in (
            "fleetwatch_reactor_outages_opened_total",
            "fleetwatch_reactor_outages_closed_total",
            "fleetwatch_reactor_apps_degraded_total",
            "fleetwatch_reactor_apps_restored_total",
        )
    }
    assert totals == {
        "fleetwatch_reactor_outages_opened_total": 1,
        "fleetwatch_reactor_outages_closed_total": 1,
        "fleetwatch_reactor_apps_degraded_total": 500,
        "fleetwatch_reactor_apps_restored_total": 500,
    }


def test_no_deployment_lands_after_the_offline_commit(
    replicas: Callable[[int], list[Replica]], pg_url: str
) -> None:
    pending = 600
    seed(pg_url, deployed_on_c1=1000, pending_on_c1=pending)
    group = replicas(3)
    offline_answered = threading.Event()
    offline_at: list[float] = []
    results: dict[int, tuple[int, float]] = {}

    def deploy(i: int) -> None:
        if i == 150:
            code, _ = group[0].call("POST", "/alerts", DOWN_C1)
            assert code == 200
            offline_at.append(time.monotonic())
            offline_answered.set()
        started = time.monotonic()
        code, _ = group[i % 3].call("POST", "/deployments", {"app": f"new-{i}", "cluster": "c1"})
        results[i] = (code, started)

    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(deploy, range(1, pending + 1)))
    assert offline_answered.is_set()

    codes = Counter(code for code, _ in results.values())
    assert set(codes) <= {201, 409}, codes
    assert codes[201] > 0 and codes[409] > 0, codes
    # Every deployment that began after the OFFLINE was answered was refused...
    late = [i for i, (_, started) in results.items() if started > offline_at[0]]
    assert late and all(results[i][0] == 409 for i in late)
    # ...and every accepted one was degraded by the cascade: nothing DEPLOYED on c1.
    apps = dict(rows(pg_url, "SELECT name, status FROM apps WHERE cluster_id = 1"))
    assert "DEPLOYED" not in apps.values()
    for i, (code, _) in results.items():
        assert apps[f"new-{i}"] == ("DEGRADED" if code == 201 else "PENDING"), i


def test_kill_9_of_a_replica_in_a_100k_cascade(
    replicas: Callable[[int], list[Replica]], pg_url: str
) -> None:
    big = 100_000
    seed(pg_url, deployed_on_c1=big)
    first, second = replicas(2)
    answers: list[Any] = []

    def send() -> None:
        try:
            answers.append(first.call("POST", "/alerts", DOWN_C1))
        except (urllib.error.URLError, OSError) as exc:
            answers.append(exc)

    watcher = psycopg.connect(pg_url, autocommit=True)

    def cascading() -> bool:
        return bool(
            watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                "AND pid <> pg_backend_pid() "
                "AND query LIKE '%UPDATE apps SET status = ''DEGRADED''%'"
            ).fetchone()[0]  # type: ignore[index]
        )

    sender = threading.Thread(target=send)
    sender.start()
    try:
        wait_until(cascading, 30, interval=0.001, what="the cascade running")
        first.proc.kill()
        sender.join(30)
    finally:
        watcher.close()
    assert answers and isinstance(answers[0], BaseException), "answered before the kill"

    # The other replica serves on: reads, and writes on another cluster.
    assert second.call("GET", "/clusters/c2")[0] == 200
    assert second.call("POST", "/deployments", {"app": "c2-app-1", "cluster": "c2"})[0] == 201
    assert c1_summary(pg_url) in [
        ("ONLINE", 0, {"DEPLOYED": big}),
        ("OFFLINE", 1, {"DEGRADED": big}),
    ]

    # Alertmanager's retry, to the surviving replica, applies the cascade exactly once.
    def applied() -> tuple[int, Any] | None:
        answer = second.call("POST", "/alerts", DOWN_C1)
        return None if answer[0] == 503 else answer

    code, result = wait_until(applied, 60, what="the retried notification applied")
    assert code == 200, result
    assert c1_summary(pg_url) == ("OFFLINE", 1, {"DEGRADED": big})


def test_postgresql_stopped_and_started_under_load(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-pg-restart-"))
    server = PostgresServer(root).init().start()  # its own: this test stops it
    try:
        url = server.create_database("restart")
        seed(url, deployed_on_c1=0, pending_on_c1=20_000)
        group = [Replica(tmp_path, url, f"replica{i}") for i in range(2)]
        for replica in group:
            replica.proc.start()
        try:
            _load_through_a_restart(server, url, group)
        finally:
            for replica in group:
                replica.proc.stop()
                assert "Traceback" not in replica.proc.log_tail(400), replica.proc.log_tail(400)
    finally:
        server.stop()
        server.remove()


def _load_through_a_restart(server: PostgresServer, url: str, group: list[Replica]) -> None:
    answers: list[tuple[int, int, float]] = []  # (app number, HTTP status, when)
    after_recovery: list[int] = []  # statuses of the calls sent once both replicas served
    recovered = threading.Event()
    stop = threading.Event()
    counter = iter(range(1, 20_001))
    lock = threading.Lock()

    def worker(w: int) -> None:
        while not stop.is_set():
            with lock:
                i = next(counter)
            late = recovered.is_set()
            code, body = group[i % 2].call(
                "POST", "/deployments", {"app": f"new-{i}", "cluster": "c1"}, timeout=30
            )
            if code == 503:
                assert "retry" in body["error"]
                time.sleep(0.01)  # a client honouring Retry-After would wait longer
            answers.append((i, code, time.monotonic()))
            if late:
                after_recovery.append(code)

    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(worker, w) for w in range(6)]
        try:
            wait_until(lambda: len(answers) > 200, 30, what="load running")
            server.stop("fast")
            stopped = time.monotonic()
            wait_until(
                lambda: sum(1 for _, code, t in answers if code == 503 and t > stopped) > 20,
                30,
                what="503s while the database is down",
            )
            server.start()
            started = time.monotonic()
            wait_until(
                lambda: {i % 2 for i, code, t in answers if code == 201 and t > started} == {0, 1},
                30,
                what="both replicas serving again",
            )
            # Once both have reached the database again, no call may meet a connection
            # that died while idle, nor a pause of a handle that failed during the outage.
            recovered.set()
            wait_until(lambda: len(after_recovery) >= 600, 60, what="load after the recovery")
        finally:
            stop.set()
            for future in futures:
                future.result(60)

    assert Counter(after_recovery)[503] == 0, Counter(after_recovery)
    codes = Counter(code for _, code, _ in answers)
    assert set(codes) <= {201, 503}, codes  # never a 500
    deployed = {
        name
        for (name,) in rows(
            url, "SELECT name FROM apps WHERE status = 'DEPLOYED' AND cluster_id = 1"
        )
    }
    accepted = {f"new-{i}" for i, code, _ in answers if code == 201}
    assert accepted <= deployed  # nothing acknowledged was lost
    # A 503 may hide a commit whose answer the stop cut off, never more than one per worker.
    assert len(deployed - accepted) <= 6
