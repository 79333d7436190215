"""Component metrics answer at node addresses exactly where a real scrape would reach them."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from fleetwatch.standin import ControlPlane, StandinFleet, node_ip
from tests.helpers.controlplane_nodes import free_first_index

pytestmark = pytest.mark.live

#: Away from index 0, which other test modules' fleets use for their node addresses, and
#: from other fleets serving metrics (another worker's, another test run's).
FIRST_INDEX = free_first_index()


async def scrape(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url, ssl=False) as resp:
        return resp.status, await resp.text()


async def test_localhost_bound_components_refuse_and_fixed_ones_answer(tmp_path: Path) -> None:
    plane = ControlPlane(serve_metrics=True)
    async with (
        StandinFleet(tmp_path / "fleet", control_plane=plane, first_index=FIRST_INDEX) as fleet,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
    ):
        cluster = await fleet.add_cluster("c")
        cp1, cp2 = node_ip(cluster.index, 1), node_ip(cluster.index, 2)
        assert cp1.startswith("127.") and cp1 != "127.0.0.1"

        # kubeadm defaults: only the API server answers at the node address.
        status, body = await scrape(session, f"https://{cp1}:6443/metrics")
        assert status == 200 and "kubernetes_build_info" in body
        for url in (f"http://{cp1}:2381/metrics", f"https://{cp1}:10259/metrics"):
            with pytest.raises(aiohttp.ClientConnectorError):
                await scrape(session, url)

        # The fix: bind etcd and the scheduler to 0.0.0.0.
        fixed = plane.with_localhost_bound("etcd", False).with_localhost_bound(
            "kube-scheduler", False
        )
        await fleet.set_control_plane("c", fixed)
        status, body = await scrape(session, f"http://{cp1}:2381/metrics")
        assert status == 200 and "etcd_server_is_leader 1" in body
        status, body = await scrape(session, f"http://{cp2}:2381/metrics")
        assert "etcd_server_is_leader 0" in body
        status, body = await scrape(session, f"https://{cp2}:10259/metrics")
        assert status == 200 and 'leader_election_master_status{name="kube-scheduler"} 0' in body
        with pytest.raises(aiohttp.ClientConnectorError):
            await scrape(session, f"https://{cp1}:10257/metrics")

        # A failed etcd member stops answering; the cluster going down takes its API servers.
        await fleet.set_control_plane("c", fixed.with_etcd_ready("cp-2", False))
        with pytest.raises(aiohttp.ClientConnectorError):
            await scrape(session, f"http://{cp2}:2381/metrics")
        await fleet.set_mode("c", "down")
        with pytest.raises(aiohttp.ClientConnectorError):
            await scrape(session, f"https://{cp1}:6443/metrics")
        assert (await scrape(session, f"http://{cp1}:2381/metrics"))[0] == 200
    # Stopped: nothing is left listening.
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await scrape(session, f"http://{cp1}:2381/metrics")


async def test_metrics_are_off_by_default(fleet: StandinFleet) -> None:
    cluster = await fleet.add_cluster("quiet")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await scrape(session, f"https://{node_ip(cluster.index, 1)}:6443/metrics")
