"""When a cycle publishes: after discovery only if it found something new, always at the end.

Publishing renders all of ``/metrics`` (at 10,000 clusters, a third of a CPU-second), so
a cycle whose scan found what the last one found publishes once, at its end; a cycle
whose scan added, removed or changed a cluster publishes right after the scan too, so
the new cluster is on ``/metrics`` before its probe (which may take a whole timeout).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import MonitorFactory

pytestmark = pytest.mark.live


async def test_an_unchanged_scan_publishes_once_a_changed_one_twice(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    first, second, third = await fleet.add_clusters(3, "pub")
    fleet.write_kubeconfig_dir(kubeconfig_dir, [first, second])
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()  # start-up: everything is new
        assert len(rec.snapshots) == 2
        before_probe, after_probe = rec.snapshots
        assert {v.cluster.name: v.success for v in before_probe.clusters} == {
            first.name: None,
            second.name: None,
        }
        assert {v.success for v in after_probe.clusters} == {True}

        await monitor.run_cycle()  # nothing changed in the kubeconfigs
        assert len(rec.snapshots) == 3
        assert rec.last.cycles_total == 2

        fleet.write_kubeconfig_dir(kubeconfig_dir, [third])  # a cluster joins
        await monitor.run_cycle()
        assert len(rec.snapshots) == 5
        joined = {v.cluster.name: v.success for v in rec.snapshots[3].clusters}
        assert joined == {first.name: True, second.name: True, third.name: None}
        assert {v.success for v in rec.last.clusters} == {True}

        (kubeconfig_dir / f"{first.name}.yaml").unlink()  # a cluster leaves
        await monitor.run_cycle()
        assert len(rec.snapshots) == 7
        assert {v.cluster.name for v in rec.snapshots[5].clusters} == {second.name, third.name}
