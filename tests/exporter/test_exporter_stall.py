"""A stalled exporter is visible: ``/-/ready`` fails and the last-cycle gauge stands still.

Before, an exporter whose cycles had stopped (a hung credential plugin took its threads)
kept answering ``/healthz`` 200 and serving the last values on ``/metrics``, so nothing
said the statuses were frozen. Here a discovery that blocks stands in for whatever stops
the cycles; the alert on the gauge is tested by promtool (``tests/rules``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.server import STALL_INTERVALS, create_app, stalled_for
from exporter.settings import ExporterSettings
from fleetwatch.discovery import Cluster, ContextConfig, Discoverer, Discovery
from fleetwatch.standin import StandinFleet


@pytest.mark.parametrize(
    ("last_end", "now", "expected"),
    [
        (0.0, 1e9, None),  # no cycle yet: "not ready", not "stalled"
        (1000.0, 1000.0 + 3 * 60.0, None),  # three intervals exactly: still fine
        (1000.0, 1000.0 + 3 * 60.0 + 1, 181.0),
        (1000.0, 1010.0, None),
    ],
)
def test_stalled_after_three_intervals(last_end: float, now: float, expected: float | None) -> None:
    assert STALL_INTERVALS == 3
    assert stalled_for(last_end, 60.0, now) == expected


class FreezableDiscovery:
    """Discovery whose scan blocks while frozen: cycles stop, as when threads are taken."""

    def __init__(self, inner: Discoverer) -> None:
        self.inner = inner
        self.running = threading.Event()
        self.running.set()

    def scan(self) -> Discovery:
        self.running.wait(30.0)  # bounded: a failed test never leaves the thread behind
        return self.inner.scan()

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        return self.inner.context_config(cluster)

    def probeable(self, ref: str) -> bool:
        return self.inner.probeable(ref)


async def _last_cycle(client: TestClient[Any, Any]) -> float:
    text = await (await client.get("/metrics")).text()
    for family in text_string_to_metric_families(text):
        if family.name == "fleetwatch_exporter_last_cycle_timestamp_seconds":
            return float(family.samples[0].value)
    raise AssertionError("no fleetwatch_exporter_last_cycle_timestamp_seconds")


async def _poll(check: Any, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {within}s")
        await asyncio.sleep(0.05)  # polling with a deadline, not synchronisation


@pytest.mark.live
async def test_ready_fails_while_no_cycle_completes_and_recovers(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    interval = 0.3
    async with StandinFleet(tmp_path / "fleet") as fleet:
        await fleet.add_cluster("good")
        folder = tmp_path / "kubeconfigs"
        folder.mkdir()
        fleet.write_kubeconfig(folder / "fleet.yaml", ["good"])
        settings = ExporterSettings(
            kubeconfig_path=None, kubeconfig_dir=folder, interval=interval, timeout=0.2
        )
        discovery = FreezableDiscovery(Discoverer(None, folder))
        client: TestClient[Any, Any] = await aiohttp_client(
            create_app(settings, discovery=discovery)
        )
        try:

            async def ready() -> bool:
                return (await client.get("/-/ready")).status == 200

            await _poll(ready, 10.0, "ready after the first cycle")
            assert await _last_cycle(client) > time.time() - 5.0
            discovery.running.clear()  # cycles stop from the next one
            frozen = time.time()

            async def stalled() -> str | None:
                resp = await client.get("/-/ready")
                return await resp.text() if resp.status == 503 else None

            text = await _poll(stalled, 10.0, "/-/ready 503 once stalled")
            assert "stalled: no probe cycle has completed for" in text
            assert time.time() - frozen >= STALL_INTERVALS * interval - 2 * interval
            last = await _last_cycle(client)
            assert time.time() - last > STALL_INTERVALS * interval
            assert (await client.get("/-/healthy")).status == 200  # alive, only stalled
            discovery.running.set()
            await _poll(ready, 10.0, "ready again once cycles run")
            assert await _last_cycle(client) > last
        finally:
            discovery.running.set()
