"""A real Alertmanager 0.25 delivering to the reactor: the webhook shape, the token, the cycle.

Alerts are pushed into Alertmanager through its v2 API (as Prometheus would); Alertmanager
groups them and posts to the reactor with ``Authorization: Bearer`` read from a
credentials file. We poll the reactor until it shows what the alerts say.

What this test taught us about Alertmanager: within one aggregation group, an alert that
resolves and fires again (same labels, new ``startsAt``) between two flushes is never
notified - the group's set of firing fingerprints did not change. Here c1's Online
resolves and re-fires faster than ``group_interval``, so the reactor first hears only
"Offline resolved" (UNKNOWN, never ONLINE from the older Online: nothing restored, as the
contract says), and the restore comes with the next *repeat* of the Online group, which
carries the new ``startsAt``. Hence ``repeat_interval`` of the reactor's route bounds how
late a restore after a short outage can be; reconciliation (``--alertmanager.url``) bounds
it by its interval.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fleetwatch.procs import free_port
from tests.helpers.alertmanager_process import ALERTMANAGER, alertmanager_process
from tests.helpers.reactor_helpers import AUTH, TOKEN, MakeClient, until

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(ALERTMANAGER is None, reason="prometheus-alertmanager not installed"),
]


def config(webhook_url: str, token_file: Path) -> str:
    return f"""
route:
  receiver: fleetwatch-reactor
  group_by: [alertname]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 2s
receivers:
  - name: fleetwatch-reactor
    webhook_configs:
      - url: {webhook_url}
        send_resolved: true
        http_config:
          authorization:
            credentials_file: {token_file}
"""


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def test_alertmanager_drives_the_cascade(make_client: MakeClient, tmp_path: Path) -> None:
    client = await make_client(token=TOKEN)
    for name in ("c1", "c2"):
        body = {"name": name, "endpoint": f"https://{name}:6443", "kubeconfig_secret_ref": name}
        assert (await client.post("/clusters", json=body, headers=AUTH)).status == 201
    for app in ("web", "api"):
        await client.post("/apps", json={"name": app, "cluster": "c1"}, headers=AUTH)
        await client.post("/deployments", json={"app": app, "cluster": "c1"}, headers=AUTH)

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    (tmp_path / "am.yml").write_text(config(str(client.make_url("/alerts")), token_file))
    port = free_port()
    am = alertmanager_process(tmp_path, tmp_path / "am.yml", port)
    await asyncio.to_thread(am.start)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:

            async def push(*alerts: dict[str, Any]) -> None:
                url = f"http://127.0.0.1:{port}/api/v2/alerts"
                async with http.post(url, json=list(alerts)) as resp:
                    assert resp.status == 200, await resp.text()

            def status_alert(
                name: str, cluster: str, starts: datetime, ends: datetime | None
            ) -> Any:
                severity = "none" if name == "FleetClusterOnline" else "critical"
                one: dict[str, Any] = {
                    "labels": {"alertname": name, "cluster": cluster, "severity": severity},
                    "startsAt": stamp(starts),
                }
                if ends is not None:
                    one["endsAt"] = stamp(ends)
                return one

            async def statuses() -> dict[str, str]:
                clusters = await (await client.get("/clusters")).json()
                return {c["name"]: c["status"] for c in clusters}

            async def apps() -> dict[str, str]:
                return {a["name"]: a["status"] for a in await (await client.get("/apps")).json()}

            t0 = datetime.now(UTC) - timedelta(minutes=10)
            await push(
                status_alert("FleetClusterOnline", "c1", t0, None),
                status_alert("FleetClusterOnline", "c2", t0, None),
            )
            await until(lambda: _eq(statuses, {"c1": "ONLINE", "c2": "ONLINE"}), within=20.0)

            t1 = t0 + timedelta(minutes=5)
            await push(
                status_alert("FleetClusterOnline", "c1", t0, t1),
                status_alert("FleetClusterOffline", "c1", t1, None),
            )
            await until(lambda: _eq(apps, {"web": "DEGRADED", "api": "DEGRADED"}), within=20.0)
            assert (await statuses())["c1"] == "OFFLINE"
            resp = await client.post(
                "/deployments", json={"app": "web", "cluster": "c1"}, headers=AUTH
            )
            assert resp.status == 409

            t2 = t1 + timedelta(minutes=3)
            await push(
                status_alert("FleetClusterOffline", "c1", t1, t2),
                status_alert("FleetClusterOnline", "c1", t2, None),
            )
            await until(lambda: _eq(apps, {"web": "DEPLOYED", "api": "DEPLOYED"}), within=20.0)
            assert await statuses() == {"c1": "ONLINE", "c2": "ONLINE"}

            metrics = await (await client.get("/metrics")).text()
            assert 'fleetwatch_reactor_notifications_total{outcome="unauthorized"} 0.0' in metrics
            assert "fleetwatch_reactor_outages_opened_total 1.0" in metrics
            assert "fleetwatch_reactor_outages_closed_total 1.0" in metrics
    finally:
        await asyncio.to_thread(am.stop)


async def _eq(get: Any, expected: dict[str, str]) -> bool:
    return bool(await get() == expected)
