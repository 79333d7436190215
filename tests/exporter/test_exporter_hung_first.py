"""Hung clusters end a cycle about one timeout after it starts (issue 13).

Clusters whose last probe timed out are probed before the scan, so their timeouts start
with the cycle; a result for a cluster the scan then removed is dropped; and the next
cycle does not start while the last one's reconnections are under way.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from exporter.model import Reason
from fleetwatch.discovery import Cluster, ContextConfig, Discoverer, Discovery
from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import MonitorFactory, Recorder

pytestmark = pytest.mark.live


def _reason(rec: Recorder, name: str) -> Reason | None:
    """Why the last probe of ``name`` failed (None: it succeeded, or none yet)."""
    last = rec.view(name).last
    return None if last is None else last.reason


async def _six_stopped_and(fleet: StandinFleet, kubeconfig_dir: Path, name: str, mode: str) -> None:
    """Six stopped API servers (TCP accepted, no TLS handshake) and ``name`` in ``mode``."""
    for i in range(6):
        await fleet.add_cluster(f"stopped-{i}", "frozen")
    await fleet.add_cluster(name, mode)
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")


class WatchingDiscovery:
    """Discovery that, when armed, waits in its scan for the hung cluster's next request.

    It notes whether the request came while the scan was still running: it can only if
    the cycle probed that cluster before (or while) scanning.
    """

    def __init__(self, inner: Discoverer, fleet: StandinFleet, name: str) -> None:
        self.inner = inner
        self.fleet = fleet
        self.name = name
        self.armed_at: int | None = None  #: requests the cluster had seen when armed
        self.seen_during_scan = threading.Event()

    def scan(self) -> Discovery:
        if self.armed_at is not None:
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:  # polling with a deadline, in the scan thread
                if self.fleet.requests(self.name) > self.armed_at:
                    self.seen_during_scan.set()
                    break
                time.sleep(0.01)
        return self.inner.scan()

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        return self.inner.context_config(cluster)

    def probeable(self, ref: str) -> bool:
        return self.inner.probeable(ref)


async def test_clusters_that_timed_out_are_probed_before_the_scan(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("hung", "hang")
    await fleet.add_clusters(2, prefix="ok")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    discovery = WatchingDiscovery(Discoverer(None, kubeconfig_dir), fleet, "hung")
    async with make_monitor(probe_timeout=0.5, discovery=discovery) as (monitor, rec):
        await monitor.run_cycle()
        assert _reason(rec, "hung") is Reason.TIMEOUT
        await monitor.until_next_cycle(monitor.settings.interval)
        discovery.armed_at = fleet.requests("hung")
        ok_before = fleet.requests("ok-001")
        await monitor.run_cycle()
    assert discovery.seen_during_scan.is_set(), "the hung cluster was probed after the scan"
    assert dict(rec.view("hung").failures) == {Reason.TIMEOUT: 2}
    assert fleet.requests("ok-001") > ok_before
    assert rec.view("ok-001").consecutive_failures == 0


async def test_early_probe_of_a_cluster_the_scan_removed_is_dropped(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("hung", "hang")
    await fleet.add_cluster("ok", "ok")
    hung_file = fleet.write_kubeconfig(kubeconfig_dir / "hung.yaml", ["hung"], credential="token")
    fleet.write_kubeconfig(kubeconfig_dir / "ok.yaml", ["ok"], credential="token")
    async with make_monitor(probe_timeout=0.5) as (monitor, rec):
        await monitor.run_cycle()
        await monitor.until_next_cycle(monitor.settings.interval)
        before = fleet.requests("hung")
        hung_file.unlink()  # gone by the next scan, after its early probe started
        await monitor.run_cycle()
        assert fleet.requests("hung") == before + 1  # it was probed early, as last seen
        assert "hung" not in monitor.states
        assert [v.cluster.name for v in rec.last.clusters] == ["ok"]
        assert monitor.client.reconnecting("hung") is None  # not reconnected
        assert monitor.last_timed_out == ()
        assert rec.view("ok").success is True


async def test_next_cycle_waits_for_the_reconnections_of_the_last(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("hung", "hang")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    async with make_monitor(probe_timeout=0.5, interval=0.5) as (monitor, _):
        await monitor.run_cycle()
        assert monitor.client.reconnecting("hung") is not None
        started = time.monotonic()
        await monitor.until_next_cycle(elapsed=10.0)  # the cycle outlasted the interval
        assert monitor.client.reconnecting("hung") is None
        # The wait is bounded by the 0.5 s timeout; unbounded, it lasts as long as the hung
        # server holds on: 5 s is ten timeouts of slack for a loaded machine.
        assert time.monotonic() - started < 5.0


async def test_stopped_api_servers_hold_no_slot_once_they_timed_out(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    # Six API servers that accept TCP and never answer the TLS handshake, one slot: each
    # would hold the slot for a whole timeout while connecting (six timeouts per cycle).
    await _six_stopped_and(fleet, kubeconfig_dir, "ok", "ok")
    timeout = 1.0
    async with make_monitor(probe_timeout=timeout, interval=timeout, concurrency=1) as (
        monitor,
        rec,
    ):
        await monitor.run_cycle()  # the first: nothing known yet, they take the slot in turn
        await monitor.until_next_cycle(elapsed=10.0)
        started = time.monotonic()
        await monitor.run_cycle()
        elapsed = time.monotonic() - started
    # one timeout when no slot is held, six when each holds it: halfway between the two
    assert elapsed < 3 * timeout, f"a steady cycle took {elapsed:.2f}s"
    assert dict(rec.view("stopped-0").failures) == {Reason.TIMEOUT: 2}
    assert rec.view("ok").consecutive_failures == 0


async def test_a_reconnection_never_waits_behind_stopped_api_servers(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await _six_stopped_and(fleet, kubeconfig_dir, "blip", "hang")  # times out once only
    timeout = 0.5
    async with make_monitor(probe_timeout=timeout, concurrency=1) as (monitor, rec):
        await monitor.run_cycle()
        assert _reason(rec, "blip") is Reason.TIMEOUT
        await fleet.set_mode("blip", "ok")
        # Its reconnection must not queue behind six that each wait a timeout.
        await monitor.run_cycle()
    assert rec.view("blip").success is True, rec.view("blip").last


async def test_a_stalled_connection_set_up_gives_its_slot_back(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    # The first cycle knows nothing yet: every cluster connects under a slot, and a
    # stopped API server's set-up gives its slot back once it has waited setup_stall.
    await _six_stopped_and(fleet, kubeconfig_dir, "ok", "ok")
    timeout = 2.0
    async with make_monitor(probe_timeout=timeout, concurrency=1) as (monitor, rec):
        monitor.client.http.setup_stall = 0.1
        started = time.monotonic()
        await monitor.run_cycle()
        elapsed = time.monotonic() - started
    # one timeout when set-ups give their slot back, six (12 s) when not: half of those
    assert elapsed < 3 * timeout, f"the first cycle took {elapsed:.2f}s (6 timeouts: 12 s)"
    assert all(_reason(rec, f"stopped-{i}") is Reason.TIMEOUT for i in range(6))
    assert rec.view("ok").success is True
