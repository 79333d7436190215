"""Deployments racing with a cascade: refused (409) or degraded with the others, never DEPLOYED.

Two races: many concurrent API calls in one reactor (serialised by its store thread), and
a second process-like writer with its own connection (serialised by BEGIN IMMEDIATE on
SQLite, by the cluster row's lock on PostgreSQL). Each runs on both stores.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.service import Gated, Service
from reactor.statemachine import AppStatus
from reactor.store import retry_conflicts
from tests.helpers.reactor_helpers import MakeClient, dump_db, open_store
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

DEPLOYED_ON_C1 = 2000
PENDING_ON_C1 = 400


def seed(db_path: Path) -> None:
    """c1 (ONLINE) with 2,000 DEPLOYED apps and 400 PENDING ones, written straight to the store."""
    store = open_store(db_path)
    service = Service(store)
    c1 = service.add_cluster("c1", "https://127.0.0.1:6443", "c1-secret")
    body = webhook(alert(ONLINE, "c1", 0))
    service.apply_signals(status_signals(parse_webhook(json.dumps(body).encode())).signals)
    with store.write() as tx:
        for i in range(DEPLOYED_ON_C1):
            app = tx.insert_app(f"live-{i}", c1.id)
            tx.set_app(app.id, c1.id, AppStatus.DEPLOYED, None)
        for i in range(PENDING_ON_C1):
            tx.insert_app(f"new-{i}", c1.id)
    store.close()


def deployed_on_offline(db_path: Path) -> list[str]:
    rows = dump_db(db_path)
    offline = {r[0] for r in rows["clusters"] if r[5] == "OFFLINE"}
    return [r[1] for r in rows["apps"] if r[2] in offline and r[3] == "DEPLOYED"]


async def test_api_deployments_racing_a_cascade(make_client: MakeClient, db_path: Path) -> None:
    seed(db_path)
    client = await make_client()
    done = 0
    first_done = asyncio.Event()

    async def deploy(i: int) -> tuple[int, int]:
        nonlocal done
        resp = await client.post("/deployments", json={"app": f"new-{i}", "cluster": "c1"})
        done += 1
        if done >= 20:
            first_done.set()
        return i, resp.status

    async def notify() -> int:
        body = webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5))
        resp = await client.post("/alerts", json=body)
        return resp.status

    wave1 = [asyncio.create_task(deploy(i)) for i in range(150)]
    await asyncio.wait_for(first_done.wait(), 30)
    wave2 = [asyncio.create_task(deploy(i)) for i in range(150, 350)]
    assert await notify() == 200
    wave3 = [await deploy(i) for i in range(350, PENDING_ON_C1)]
    results = dict(await asyncio.gather(*wave1, *wave2)) | dict(wave3)

    assert set(results.values()) <= {201, 409}
    accepted = {i for i, status in results.items() if status == 201}
    assert accepted and len(accepted) < PENDING_ON_C1
    assert all(results[i] == 409 for i in range(350, PENDING_ON_C1))
    assert deployed_on_offline(db_path) == []
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    for i, status in results.items():
        expected = ("DEGRADED", "cluster_offline") if status == 201 else ("PENDING", None)
        assert (apps[f"new-{i}"]["status"], apps[f"new-{i}"]["reason"]) == expected
    assert sum(a["status"] == "DEGRADED" for a in apps.values()) == DEPLOYED_ON_C1 + len(accepted)


async def test_another_writer_racing_a_cascade(make_client: MakeClient, db_path: Path) -> None:
    """A second connection deploying in a loop (as a second reactor process would)."""
    seed(db_path)
    client = await make_client()
    counts = {"deployed": 0, "refused": 0}
    started = threading.Event()
    failure: list[BaseException] = []

    def other_writer() -> None:
        """Deploy round the PENDING apps until the gate has refused 50 times."""
        store = open_store(db_path)
        service = Service(store)
        deadline = time.monotonic() + 30
        try:
            i = 0
            while counts["refused"] < 50 and time.monotonic() < deadline:
                try:
                    retry_conflicts(lambda: service.deploy(f"new-{i % PENDING_ON_C1}", "c1"))  # noqa: B023
                    counts["deployed"] += 1
                except Gated:
                    counts["refused"] += 1
                i += 1
                if i == 10:
                    started.set()
        except BaseException as exc:  # reported to the test below
            failure.append(exc)
            started.set()
        finally:
            store.close()

    thread = threading.Thread(target=other_writer, name="other-writer")
    thread.start()
    try:
        await asyncio.wait_for(asyncio.to_thread(started.wait), 30)
        body: dict[str, Any] = webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5))
        assert (await client.post("/alerts", json=body)).status == 200
    finally:
        await asyncio.to_thread(thread.join, 60)
    assert not failure, failure
    assert counts["deployed"] > 0 and counts["refused"] == 50
    assert deployed_on_offline(db_path) == []
