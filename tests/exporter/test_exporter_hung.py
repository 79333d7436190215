"""More hung API servers than concurrency slots: they never hold up the cycle."""

from __future__ import annotations

import time
from pathlib import Path

from exporter_testlib import MonitorFactory

from exporter.probe import Reason
from fleetwatch.standin import StandinFleet


async def test_more_hung_clusters_than_slots_end_within_the_timeout(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_clusters(4, prefix="ok")
    await fleet.add_clusters(6, prefix="hung", mode="hang")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    timeout = 1.0
    # 2 slots, 6 hung clusters: a slot held while waiting would make this 3 timeouts long
    async with make_monitor(probe_timeout=timeout, concurrency=2) as (monitor, rec):
        for _ in range(2):
            started = time.monotonic()
            await monitor.run_cycle()
            assert time.monotonic() - started < timeout + 1.0
        opened = monitor.http.opened
        await monitor.run_cycle()
        # one new connection per hung cluster: the reconnection started after the previous
        # cycle, which this cycle's probe used (no second connection of its own)
        assert monitor.http.opened == opened + 6
    for i in range(1, 7):
        assert dict(rec.view(f"hung-00{i}").failures) == {Reason.TIMEOUT: 3}
    for i in range(1, 5):
        view = rec.view(f"ok-00{i}")
        assert (view.success, view.failures) == (True, ())
