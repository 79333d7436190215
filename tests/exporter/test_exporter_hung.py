"""More hung API servers than concurrency slots: they never hold up the cycle."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from exporter.model import Reason
from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import MonitorFactory

pytestmark = pytest.mark.live


async def test_more_hung_clusters_than_slots_end_within_the_timeout(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_clusters(4, prefix="ok")
    await fleet.add_clusters(6, prefix="hung", mode="hang")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    timeout = 1.5
    # 2 slots, 6 hung clusters: a slot held while waiting would make this 3 timeouts long;
    # the bound is halfway, a timeout of slack for a loaded machine
    async with make_monitor(probe_timeout=timeout, concurrency=2) as (monitor, rec):
        for _ in range(2):
            started = time.monotonic()
            await monitor.run_cycle()
            assert time.monotonic() - started < 2 * timeout
        opened = monitor.client.http.opened
        await monitor.run_cycle()
        # one new connection per hung cluster: the reconnection started after the previous
        # cycle, which this cycle's probe used (no second connection of its own)
        assert monitor.client.http.opened == opened + 6
    for i in range(1, 7):
        assert dict(rec.view(f"hung-00{i}").failures) == {Reason.TIMEOUT: 3}
    for i in range(1, 5):
        view = rec.view(f"ok-00{i}")
        assert (view.success, view.failures) == (True, ())


def _slow_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "longer than the interval" in r.getMessage()
    ]


async def test_a_hung_cluster_is_named_once_with_the_timeout_advice(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    make_monitor: MonitorFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await fleet.add_clusters(2, prefix="ok")
    await fleet.add_clusters(1, prefix="hung", mode="hang")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    caplog.set_level(logging.INFO, logger="exporter.cycle")
    # timeout == interval, as the default is under a 10 s interval: every cycle is long
    async with make_monitor(probe_timeout=0.5, interval=0.5) as (monitor, _):
        for _ in range(3):
            await monitor.run_cycle()
            monitor.report_cycle_length(monitor.cycle_duration)
        assert monitor.last_timed_out == ("hung-001",)
        assert monitor.last_slot_waits == 0
        [warning] = _slow_warnings(caplog)  # once for the situation, not once per cycle
        assert "1 cluster(s) gave no answer within --probe.timeout 0.5s (hung-001)" in warning
        assert "concurrency" not in warning
        monitor.report_cycle_length(0.1)  # cycles fit again, then one is long again: said again
        assert any("fit in the interval again" in r.getMessage() for r in caplog.records)
        monitor.report_cycle_length(monitor.cycle_duration)
        assert len(_slow_warnings(caplog)) == 2


async def test_concurrency_is_advised_only_when_probes_waited_for_a_slot(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    make_monitor: MonitorFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await fleet.add_clusters(3, prefix="ok")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    caplog.set_level(logging.INFO, logger="exporter.cycle")
    async with make_monitor(interval=1.0, concurrency=1) as (monitor, _):
        await monitor.run_cycle()
        assert monitor.last_slot_waits >= 1
        monitor.report_cycle_length(2.0)
    async with make_monitor(interval=1.0, concurrency=16) as (monitor, _):
        await monitor.run_cycle()
        assert monitor.last_slot_waits == 0
        monitor.report_cycle_length(2.0)
    short, enough = _slow_warnings(caplog)
    assert "waited for one of the 1 slots; raise --probe.concurrency" in short
    assert "--probe.timeout" not in short
    assert "concurrency" not in enough and "no probe timed out" in enough
