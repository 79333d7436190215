"""``--db.retention``: closed outages older than it are deleted in batches, and nothing else;
``GET /clusters/{name}`` shows the latest outages. On both stores."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import reactor.app
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.service import Service
from tests.helpers.reactor_helpers import MakeClient, open_store
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, T0, alert, webhook


def micros(minutes: float) -> int:
    return int((T0 + timedelta(minutes=minutes)).timestamp() * 1_000_000)


def notify(service: Service, *alerts: dict[str, Any]) -> None:
    parsed = status_signals(parse_webhook(json.dumps(webhook(*alerts)).encode()))
    service.apply_signals(parsed.signals)


def history(service: Service) -> None:
    """c1: outages closed at minutes 10 and 30, one open since 40; c2: one closed at 20.
    a1 on c1 is DEGRADED by the open outage."""
    service.add_cluster("c1", "https://127.0.0.1:6443", "c1")
    service.add_cluster("c2", "https://127.0.0.1:6444", "c2")
    service.add_app("a1", "c1")
    notify(service, alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
    service.deploy("a1", "c1")
    for start, end in ((5, 10), (25, 30)):
        notify(service, alert(ONLINE, "c1", 0, start), alert(OFFLINE, "c1", start))
        notify(service, alert(OFFLINE, "c1", start, end), alert(ONLINE, "c1", end))
    notify(service, alert(ONLINE, "c2", 0, 15), alert(OFFLINE, "c2", 15))
    notify(service, alert(OFFLINE, "c2", 15, 20), alert(ONLINE, "c2", 20))
    notify(service, alert(ONLINE, "c1", 30, 40), alert(OFFLINE, "c1", 40))


def closes(service: Service, cluster: str) -> list[int | None]:
    return [o.closed_at for o in service.cluster_history(cluster)[1]]


def test_retention_deletes_old_closed_outages_in_batches_and_nothing_else(
    db_path: Path,
) -> None:
    store = open_store(db_path)
    try:
        service = Service(store)
        history(service)
        assert closes(service, "c1") == [None, micros(30), micros(10)]  # newest first
        assert closes(service, "c2") == [micros(20)]

        before = micros(25)
        assert service.prune_outages(before, batch=1) == 1  # the oldest: c1's, closed at 10
        assert closes(service, "c1") == [None, micros(30)]
        assert service.prune_outages(before, batch=1) == 1  # c2's, closed at 20
        assert service.prune_outages(before, batch=1) == 0
        assert closes(service, "c2") == []

        # Even with every outage "old", the open one (and the app it degraded) stays.
        assert service.prune_outages(micros(10_000), batch=500) == 1
        cluster, outages, _ = service.cluster_history("c1")
        assert [o.closed_at for o in outages] == [None]
        assert cluster.outage_id == outages[0].id
        assert service.app("a1").reason == "cluster_offline"
        # ...and the recovery still restores what it degraded.
        notify(service, alert(OFFLINE, "c1", 40, 50), alert(ONLINE, "c1", 50))
        assert service.app("a1").status.value == "DEPLOYED"
    finally:
        store.close()


async def cluster_outages(client: Any, name: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/clusters/{name}")
    assert resp.status == 200
    outages: list[dict[str, Any]] = (await resp.json())["outages"]
    return outages


async def test_the_sweep_runs_by_itself_and_get_cluster_shows_the_outages(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reactor.app, "RETENTION_INTERVAL_S", 0.05)
    monkeypatch.setattr(reactor.app, "RETENTION_BATCH", 1)  # several batches per sweep
    # The payloads are dated 30 November 2026, so "older than a day" spares none of them
    # only if the clock is before 1 December: keep every outage closed in the last 10 years.
    client = await make_client(db_retention_s=10 * 365 * 86400.0)
    for body in (
        webhook(alert(ONLINE, "c1", 0)),
        webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5)),
        webhook(alert(OFFLINE, "c1", 5, 10), alert(ONLINE, "c1", 10)),
        webhook(alert(ONLINE, "c1", 10, 20), alert(OFFLINE, "c1", 20)),
    ):
        assert (await client.post("/alerts", json=body)).status == 200
    outages = await cluster_outages(client, "c1")
    assert [(o["started_at"][:16], o["closed_at"] and o["closed_at"][:16]) for o in outages] == [
        ("2026-11-30T02:20", None),
        ("2026-11-30T02:05", "2026-11-30T02:10"),
    ]
    await client.close()

    # Restarted with a retention that the closed outage is past: the sweep deletes it.
    client = await make_client(db_retention_s=60.0)
    for _ in range(200):
        outages = await cluster_outages(client, "c1")
        if len(outages) == 1:
            break
        await asyncio.sleep(0.02)
    assert [o["closed_at"] for o in outages] == [None]
    assert (await client.get("/clusters/nope")).status == 404


async def test_zero_keeps_everything(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reactor.app, "RETENTION_INTERVAL_S", 0.02)
    client = await make_client(db_retention_s=0.0)
    for body in (
        webhook(alert(ONLINE, "c1", 0)),
        webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5)),
        webhook(alert(OFFLINE, "c1", 5, 10), alert(ONLINE, "c1", 10)),
    ):
        assert (await client.post("/alerts", json=body)).status == 200
    await asyncio.sleep(0.2)  # ten sweep intervals: a sweep, were there one, has run
    assert [o["closed_at"][:16] for o in await cluster_outages(client, "c1")] == [
        "2026-11-30T02:10"
    ]
