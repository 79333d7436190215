"""kube-system as kubeadm leaves it: nodes, static pods with their flags, CoreDNS."""

from __future__ import annotations

import ipaddress
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest

from fleetwatch.standin import ControlPlane, StandinCluster, StandinFleet, ThreadedFleet
from fleetwatch.standin.workload.controlplane import parse_selector

PODS = "/api/v1/namespaces/kube-system/pods"


async def get_json(
    session: aiohttp.ClientSession, url: str, ctx: ssl.SSLContext, selector: str | None = None
) -> tuple[int, Any]:
    params = {"labelSelector": selector} if selector is not None else None
    async with session.get(url, ssl=ctx, params=params) as resp:
        return resp.status, json.loads(await resp.text())


@dataclass
class KubeSystem:
    """Cluster ``c`` of the fleet, whose kube-system pods a test reads as a client would."""

    cluster: StandinCluster
    session: aiohttp.ClientSession
    ctx: ssl.SSLContext

    async def pods(
        self, selector: str | None = None, ctx: ssl.SSLContext | None = None
    ) -> tuple[int, Any]:
        """The pods ``selector`` picks: the status, the body (with the fleet's certificate
        unless ``ctx`` says otherwise)."""
        return await get_json(self.session, self.cluster.url + PODS, ctx or self.ctx, selector)

    async def pods_by_name(self, selector: str) -> dict[str, dict[str, Any]]:
        _, body = await self.pods(selector)
        return {p["metadata"]["name"]: p for p in body["items"]}


@pytest.fixture
async def kube_system(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> KubeSystem:
    return KubeSystem(await fleet.add_cluster("c"), session, cert_ctx)


def _names(body: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


def _flag(pod: dict[str, Any], prefix: str) -> str:
    (flag,) = [f for f in pod["spec"]["containers"][0]["command"] if f.startswith(prefix)]
    return flag


@pytest.mark.live
async def test_nodes_are_labelled_with_distinct_loopback_addresses(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    one = await fleet.add_cluster("one", control_plane=ControlPlane(nodes=3, workers=1))
    two = await fleet.add_cluster("two")
    seen: set[str] = set()
    for cluster in (one, two):
        status, body = await get_json(session, cluster.url + "/api/v1/nodes", cert_ctx)
        assert status == 200 and body["kind"] == "NodeList"
        for node in body["items"]:
            (ip,) = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
            assert ipaddress.ip_address(ip).is_loopback and ip != "127.0.0.1"
            seen.add(ip)
    assert len(seen) == 4 + 3
    _, body = await get_json(session, one.url + "/api/v1/nodes", cert_ctx)
    roles = {
        n["metadata"]["name"]: "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]
        for n in body["items"]
    }
    assert roles == {"cp-1": True, "cp-2": True, "cp-3": True, "worker-1": False}


@pytest.mark.live
async def test_pod_selectors(kube_system: KubeSystem) -> None:
    cases = {
        "component=etcd": ["etcd-cp-1", "etcd-cp-2", "etcd-cp-3"],
        "tier=control-plane,component==kube-scheduler": [
            "kube-scheduler-cp-1",
            "kube-scheduler-cp-2",
            "kube-scheduler-cp-3",
        ],
        "k8s-app=kube-dns": ["coredns-7db6d8ff4d-00000", "coredns-7db6d8ff4d-00001"],
        "tier=control-plane,component!=etcd,component!=kube-apiserver": [
            f"{c}-cp-{i}" for i in (1, 2, 3) for c in ("kube-controller-manager", "kube-scheduler")
        ],
        "component=nothing": [],
    }
    for selector, expected in cases.items():
        status, body = await kube_system.pods(selector)
        assert status == 200 and body["kind"] == "PodList"
        assert sorted(_names(body)) == sorted(expected), selector
    _, everything = await kube_system.pods()
    assert len(everything["items"]) == 3 * 4 + 2
    status, body = await kube_system.pods("component in (etcd)")
    assert status == 400 and body["reason"] == "BadRequest"


@pytest.mark.live
async def test_kubeadm_defaults_bind_metrics_to_localhost(kube_system: KubeSystem) -> None:
    pods = await kube_system.pods_by_name("tier=control-plane")
    etcd = pods["etcd-cp-2"]
    ip = etcd["status"]["hostIP"]
    assert etcd["status"]["podIP"] == ip and etcd["spec"]["nodeName"] == "cp-2"
    assert etcd["metadata"]["labels"] == {"component": "etcd", "tier": "control-plane"}
    assert _flag(etcd, "--listen-metrics-urls=") == "--listen-metrics-urls=http://127.0.0.1:2381"
    assert _flag(etcd, "--advertise-client-urls=") == f"--advertise-client-urls=https://{ip}:2379"
    for name in ("kube-scheduler-cp-1", "kube-controller-manager-cp-1"):
        assert _flag(pods[name], "--bind-address=") == "--bind-address=127.0.0.1"
    ready = [c for c in etcd["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    _, dns = await kube_system.pods("k8s-app=kube-dns")
    assert [p["spec"]["nodeName"] for p in dns["items"]] == ["cp-1", "cp-1"]


@pytest.mark.live
async def test_topology_changes_at_run_time(fleet: StandinFleet, kube_system: KubeSystem) -> None:
    plane = (
        kube_system.cluster.control_plane.with_etcd_ready("cp-3", False)
        .with_localhost_bound("etcd", False)
        .with_localhost_bound("kube-scheduler", False)
        .with_coredns_nodes("cp-1", "cp-2")
    )
    await fleet.set_control_plane("c", plane)
    pods = await kube_system.pods_by_name("tier=control-plane")

    def ready(name: str) -> str:
        return next(c["status"] for c in pods[name]["status"]["conditions"] if c["type"] == "Ready")

    assert [ready(f"etcd-cp-{i}") for i in (1, 2, 3)] == ["True", "True", "False"]
    assert _flag(pods["etcd-cp-1"], "--listen-metrics-urls=").endswith("//0.0.0.0:2381")
    assert _flag(pods["kube-scheduler-cp-1"], "--bind-address=") == "--bind-address=0.0.0.0"
    assert (
        _flag(pods["kube-controller-manager-cp-1"], "--bind-address=") == "--bind-address=127.0.0.1"
    )
    _, dns = await kube_system.pods("k8s-app=kube-dns")
    assert [p["spec"]["nodeName"] for p in dns["items"]] == ["cp-1", "cp-2"]


@pytest.mark.live
async def test_kube_system_needs_credentials(
    kube_system: KubeSystem, ca_ctx: ssl.SSLContext
) -> None:
    status, body = await kube_system.pods(ctx=ca_ctx)
    assert status == 401 and body["reason"] == "Unauthorized"


def test_bad_topologies_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown components"):
        ControlPlane(localhost_bound=frozenset({"kube-proxy"}))
    with pytest.raises(ValueError, match="etcd_not_ready names unknown nodes"):
        ControlPlane(nodes=1, etcd_not_ready=frozenset({"cp-2"}))
    with pytest.raises(ValueError, match="coredns_nodes names unknown nodes"):
        ControlPlane().with_coredns_nodes("elsewhere")
    with pytest.raises(ValueError):
        parse_selector("a in (b)")
    assert ControlPlane.hardened().localhost_bound == frozenset()
    assert ControlPlane.hardened().coredns_nodes == ("cp-1", "cp-2")


@pytest.mark.live
def test_the_kubernetes_client_reads_nodes_and_pods(tmp_path: Path) -> None:
    """The real client deserialises our lists into typed models (required fields present)."""
    with ThreadedFleet(tmp_path / "fleet") as fleet:
        fleet.add_cluster("c", control_plane=ControlPlane(nodes=3, workers=2))
        path = fleet.write_kubeconfig(tmp_path / "config")
        api = kubernetes.config.new_client_from_config(config_file=str(path), context="c")
        with api:
            core = kubernetes.client.CoreV1Api(api)
            nodes = core.list_node().items
            assert [n.metadata.name for n in nodes] == [
                "cp-1", "cp-2", "cp-3", "worker-1", "worker-2",
            ]  # fmt: skip
            etcd = core.list_namespaced_pod("kube-system", label_selector="component=etcd").items
            assert [p.spec.node_name for p in etcd] == ["cp-1", "cp-2", "cp-3"]
            assert all(p.status.container_statuses[0].ready for p in etcd)
