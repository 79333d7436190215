"""The exporter with ``--discovery.kubernetes``: clusters from a management cluster's Secrets.

End to end, in process: a stand-in workload fleet, the management stand-in holding an Argo
CD cluster Secret per workload cluster, and ``create_app`` with the informer. The clusters
are probed; a Secret's token rotated (the cluster accepting only the new one) is used by
the next cycle; a Secret deleted takes its cluster's series out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from exporter.server import INFORMER, MONITOR, create_app
from exporter.settings import ExporterSettings
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import SECRETS
from tests.helpers.discovery_informer import argocd_cluster, b64, until

pytestmark = pytest.mark.live

ClientFactory = Callable[[web.Application], Any]
FAST = InformerSettings(watch_seconds=(30.0, 30.0), backoff_initial=0.05, backoff_max=0.2)


def argocd(name: str, server: str, token: str, ca: bytes) -> dict[str, Any]:
    config = {"bearerToken": token, "tlsClientConfig": {"caData": b64(ca)}}
    return argocd_cluster(name, server, config)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_secret_clusters_are_probed_rotated_and_removed(
    tmp_path: Path, mgmt: ManagementCluster, aiohttp_client: ClientFactory
) -> None:
    async with StandinFleet(tmp_path / "fleet") as fleet:
        one = await fleet.add_cluster("argo-one")
        two = await fleet.add_cluster("argo-two")
        ca = fleet.certs.ca_pem
        mgmt.seed([argocd(c.name, c.url, c.token, ca) for c in (one, two)])
        kubernetes = KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST)
        settings = ExporterSettings(interval=60, timeout=2, kubernetes=kubernetes)
        app = create_app(settings, run_loop=False)
        client = await aiohttp_client(app)
        informer = app[INFORMER]
        assert informer is not None
        assert await informer.wait_synced(10)
        monitor = app[MONITOR]
        await monitor.run_cycle()
        assert (await client.get("/-/ready")).status == 200
        got = samples(await (await client.get("/metrics")).text())
        for name in ("argo-one", "argo-two"):
            assert got[("fleetwatch_cluster_probe_success", (("cluster", name),))] == 1
            assert got[("fleetwatch_cluster_probeable", (("cluster", name),))] == 1
        assert got[("fleetwatch_discovery_kubernetes_up", ())] == 1
        assert got[("fleetwatch_discovery_kubernetes_objects", (("kind", "argocd"),))] == 2

        # Rotated: the cluster accepts only the new token, the Secret holds it.
        generation = informer.generation
        one.token = "rotated-token-0123456789"
        mgmt.seed([argocd(one.name, one.url, one.token, ca)])
        await until(lambda: informer.generation > generation)
        await monitor.run_cycle()
        got = samples(await (await client.get("/metrics")).text())
        assert got[("fleetwatch_cluster_probe_success", (("cluster", "argo-one"),))] == 1
        assert (
            got[("fleetwatch_cluster_probe_consecutive_failures", (("cluster", "argo-one"),))] == 0
        )

        # Deleted: its series go in the next cycle.
        mgmt.state.store.delete(SECRETS, "argocd", "cluster-argo-two")
        await until(lambda: len(informer.objects()) == 1)
        await monitor.run_cycle()
        text = await (await client.get("/metrics")).text()
        assert 'cluster="argo-two"' not in text
        assert 'cluster="argo-one"' in text
        assert one.token not in text


async def test_ready_waits_for_the_first_list_of_secrets(
    tmp_path: Path, mgmt: ManagementCluster, aiohttp_client: ClientFactory
) -> None:
    mgmt.arm_fault(kind="error", count=1000, verb="list", resource="secrets")
    kubernetes = KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST)
    app = create_app(
        ExporterSettings(interval=60, timeout=2, kubernetes=kubernetes), run_loop=False
    )
    client = await aiohttp_client(app)
    await app[MONITOR].run_cycle()
    ready = await client.get("/-/ready")
    assert ready.status == 503
    assert "management cluster" in await ready.text()
    mgmt.clear_faults()
    informer = app[INFORMER]
    assert informer is not None and await informer.wait_synced(10)
    # Listed, but the only cycle served ran before the list: not ready yet.
    assert (await client.get("/-/ready")).status == 503
    await app[MONITOR].run_cycle()
    assert (await client.get("/-/ready")).status == 200
    got = samples(await (await client.get("/metrics")).text())
    assert got[("fleetwatch_discovery_kubernetes_errors_total", (("reason", "server_error"),))] > 0
