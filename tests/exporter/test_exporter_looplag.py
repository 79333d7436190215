"""``fleetwatch_exporter_event_loop_lag_seconds``: its shape, its samples, its presence.

The summary's quantiles come from the samples recorded (a fixed set here: no wall-clock
bound); a loop held by a synchronous step shows as a sample at least that long; and the
exporter's ``/metrics`` carries the family with its four quantiles, ``_sum`` and ``_count``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.looplag import QUANTILES, LoopLag
from exporter.server import LOOP_LAG, MONITOR, create_app
from exporter.settings import ExporterSettings
from fleetwatch.common.metricnames import EXPORTER_EVENT_LOOP_LAG

ClientFactory = Callable[[web.Application], Any]


def family(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = [f for f in text_string_to_metric_families(text) if f.name == EXPORTER_EVENT_LOOP_LAG]
    assert len(found) == 1
    assert found[0].type == "summary"
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in found[0].samples}


def test_the_summary_gives_quantiles_of_the_window_and_cumulative_sum_and_count() -> None:
    lag = LoopLag(window=100)
    lag.record(-0.5)  # a timer early by the clock's grain counts as on time
    for i in range(300):  # the window keeps the last 100: 2.00 .. 2.99
        lag.record(i / 100)
    registry = CollectorRegistry()
    registry.register(lag)
    got = family(generate_latest(registry).decode())
    q = {dict(labels)["quantile"]: v for (name, labels), v in got.items() if labels}
    assert set(q) == {f"{x:g}" for x in QUANTILES} == {"0.5", "0.9", "0.99", "1"}
    assert q["1"] == 2.99
    assert q["0.99"] == 2.98
    assert q["0.5"] == 2.49  # nearest rank: the 50th of 100
    assert q["0.9"] == 2.89
    assert got[(f"{EXPORTER_EVENT_LOOP_LAG}_count", ())] == 301
    assert abs(got[(f"{EXPORTER_EVENT_LOOP_LAG}_sum", ())] - sum(range(300)) / 100) < 1e-6


def test_no_sample_reads_as_zero_lag() -> None:
    registry = CollectorRegistry()
    registry.register(LoopLag())
    got = family(generate_latest(registry).decode())
    assert set(got.values()) == {0.0}


async def test_a_loop_held_by_a_synchronous_step_is_a_late_sample() -> None:
    lag = LoopLag(period=0.01)
    task = asyncio.create_task(lag.run(), name="lag")
    try:
        await asyncio.sleep(0)  # the timer is armed
        held = 0.2
        t0 = time.monotonic()
        while time.monotonic() - t0 < held:  # the loop held: nothing else runs
            pass
        deadline = time.monotonic() + 10
        while lag.count == 0 and time.monotonic() < deadline:  # noqa: ASYNC110 (a poll)
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert lag.quantile(1.0) >= held - lag.period


async def test_the_exporter_publishes_the_lag_summary(
    tmp_path: Path, aiohttp_client: ClientFactory
) -> None:
    settings = ExporterSettings(
        kubeconfig_path=None, kubeconfig_dir=tmp_path, interval=60, timeout=1
    )
    app = create_app(settings, run_loop=False)
    client = await aiohttp_client(app)
    lag = app[LOOP_LAG]
    deadline = time.monotonic() + 10
    while lag.count < 2 and time.monotonic() < deadline:  # noqa: ASYNC110 (a poll)
        await asyncio.sleep(0.05)
    assert lag.count >= 2
    await app[MONITOR].run_cycle()  # a publication renders the process collectors
    resp = await client.get("/metrics", headers={"Accept-Encoding": "identity"})
    got = family(await resp.text())
    assert {dict(labels).get("quantile") for _, labels in got} == {
        "0.5", "0.9", "0.99", "1", None
    }  # fmt: skip
    assert got[(f"{EXPORTER_EVENT_LOOP_LAG}_count", ())] >= 2
    assert all(v >= 0 for v in got.values())
