"""The API-server source against the stand-in API server, through the exporter's seam.

A real exporter app (``exporter.server.create_app``) runs ``ControlPlaneCheck`` against
stand-in clusters that serve kubeadm-shaped kube-system pods and nodes; we read its
``/metrics`` and ``/sd/control-plane`` as Prometheus would.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.controlplane.check import ControlPlaneCheck, read_kube_system
from exporter.controlplane.report import FAMILIES, report_from_kube_system
from exporter.server import MONITOR, create_app
from exporter.settings import ExporterSettings
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload.controlplane import ControlPlane

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def fleet_seed() -> list[tuple[str, dict[str, Any]]]:
    """The shared ``fleet``'s clusters (tests/helpers/standin_fixtures.py)."""
    # kubeadm defaults: the localhost trap, DNS on cp-1
    return [("kubeadm", {}), ("fixed", {"control_plane": ControlPlane.hardened()})]


@dataclass
class Exporter:
    """An exporter app with the control-plane check, its test client, the fleet it reads."""

    app: web.Application
    client: TestClient[Any, Any]
    fleet: StandinFleet

    async def cycle(self) -> None:
        await self.app[MONITOR].run_cycle()

    async def scrape(self) -> Samples:
        """One cycle, then ``/metrics`` as Prometheus reads it."""
        await self.cycle()
        resp = await self.client.get("/metrics")
        assert resp.status == 200
        samples: Samples = {}
        for family in text_string_to_metric_families(await resp.text()):
            for s in family.samples:
                samples[(s.name, frozenset(s.labels.items()))] = s.value
        return samples

    async def scrape_after(self, change: Callable[[ControlPlane], ControlPlane]) -> Samples:
        """``change`` made to the control plane of the ``kubeadm`` cluster, then a scrape."""
        plane = self.fleet.cluster("kubeadm").control_plane
        await self.fleet.set_control_plane("kubeadm", change(plane))
        return await self.scrape()


@pytest.fixture
async def exporter(fleet: StandinFleet, tmp_path: Path, aiohttp_client: Any) -> Exporter:
    kubeconfig = fleet.write_kubeconfig(tmp_path / "kubeconfig")
    settings = ExporterSettings(kubeconfig_path=kubeconfig, interval=60, timeout=5)
    app = create_app(settings, checks=[ControlPlaneCheck()], run_loop=False)
    return Exporter(app, await aiohttp_client(app), fleet)


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@pytest.mark.live
async def test_etcd_members_from_static_pods_and_a_not_ready_member(
    exporter: Exporter,
) -> None:
    s = await exporter.scrape()
    assert value(s, "fleetwatch_etcd_members", cluster="kubeadm") == 3
    assert value(s, "fleetwatch_etcd_members_healthy", cluster="kubeadm") == 3
    assert value(s, "fleetwatch_etcd_quorum_size", cluster="kubeadm") == 2
    assert value(s, "fleetwatch_etcd_quorum_state", cluster="kubeadm", state="healthy") == 1
    assert value(s, "fleetwatch_etcd_source_info", cluster="kubeadm", source="apiserver") == 1
    for node in ("cp-1", "cp-2", "cp-3"):
        assert value(s, "fleetwatch_etcd_member_healthy", cluster="kubeadm", member=node) == 1
    # The static pods cannot tell who leads: no has_leader, no raft term, from this source.
    assert value(s, "fleetwatch_etcd_has_leader", cluster="kubeadm") is None

    s = await exporter.scrape_after(lambda plane: plane.with_etcd_ready("cp-2", False))
    assert value(s, "fleetwatch_etcd_members", cluster="kubeadm") == 3
    assert value(s, "fleetwatch_etcd_members_healthy", cluster="kubeadm") == 2
    assert value(s, "fleetwatch_etcd_member_healthy", cluster="kubeadm", member="cp-2") == 0
    assert (
        value(s, "fleetwatch_etcd_quorum_state", cluster="kubeadm", state="no_fault_tolerance") == 1
    )
    assert value(s, "fleetwatch_etcd_quorum_state", cluster="kubeadm", state="healthy") == 0
    # The other cluster is untouched by this one's trouble.
    assert value(s, "fleetwatch_etcd_members_healthy", cluster="fixed") == 3


@pytest.mark.live
async def test_localhost_trap_flagged_per_component_and_node(
    exporter: Exporter,
) -> None:
    s = await exporter.scrape()
    name = "fleetwatch_controlplane_localhost_only"
    for node in ("cp-1", "cp-2", "cp-3"):
        for component in ("kube-scheduler", "kube-controller-manager", "etcd"):
            assert value(s, name, cluster="kubeadm", component=component, node=node) == 1
            assert value(s, name, cluster="fixed", component=component, node=node) == 0
        assert value(s, name, cluster="kubeadm", component="kube-apiserver", node=node) == 0

    # The fix (kubeadm extraArgs bind-address: 0.0.0.0) applied to the scheduler only.
    s = await exporter.scrape_after(
        lambda plane: plane.with_localhost_bound("kube-scheduler", False)
    )
    assert value(s, name, cluster="kubeadm", component="kube-scheduler", node="cp-1") == 0
    assert value(s, name, cluster="kubeadm", component="etcd", node="cp-1") == 1


@pytest.mark.live
async def test_coredns_replicas_and_nodes(
    exporter: Exporter,
) -> None:
    s = await exporter.scrape()
    assert value(s, "fleetwatch_coredns_replicas", cluster="kubeadm") == 2
    assert value(s, "fleetwatch_coredns_nodes", cluster="kubeadm") == 1
    assert value(s, "fleetwatch_coredns_replicas", cluster="fixed") == 2
    assert value(s, "fleetwatch_coredns_nodes", cluster="fixed") == 2

    s = await exporter.scrape_after(lambda plane: plane.with_coredns_nodes("cp-1", "cp-2", "cp-3"))
    assert value(s, "fleetwatch_coredns_replicas", cluster="kubeadm") == 3
    assert value(s, "fleetwatch_coredns_nodes", cluster="kubeadm") == 3


@pytest.mark.live
async def test_sd_targets_with_labels_and_kept_while_the_api_is_down(
    exporter: Exporter,
) -> None:
    await exporter.cycle()
    resp = await exporter.client.get("/sd/control-plane")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    groups = json.loads(await resp.text())
    by_key = {
        (g["labels"]["cluster"], g["labels"]["component"], g["labels"]["node"]): g for g in groups
    }
    assert len(by_key) == len(groups) == 2 * 3 * 4  # clusters x nodes x components
    sched = by_key[("kubeadm", "kube-scheduler", "cp-1")]
    assert sched["targets"] == ["127.1.0.1:10259"]
    assert sched["labels"]["__scheme__"] == "https"
    assert sched["labels"]["localhost_only"] == "true"
    etcd = by_key[("kubeadm", "etcd", "cp-2")]
    assert etcd["targets"] == ["127.1.0.2:2381"]
    assert etcd["labels"]["__scheme__"] == "http"
    assert by_key[("kubeadm", "kube-controller-manager", "cp-3")]["targets"] == ["127.1.0.3:10257"]
    apiserver = by_key[("kubeadm", "kube-apiserver", "cp-1")]
    assert apiserver["targets"] == ["127.1.0.1:6443"]
    assert "localhost_only" not in apiserver["labels"]
    assert all(
        "localhost_only" not in g["labels"] for g in groups if g["labels"]["cluster"] == "fixed"
    )
    for g in groups:
        assert all(t.startswith("127.") for t in g["targets"])  # nothing leaves the machine

    # The API server goes away: its last known targets stay listed (scrape etcd now!).
    await exporter.fleet.set_mode("kubeadm", "down")
    await exporter.cycle()
    groups_down = json.loads(await (await exporter.client.get("/sd/control-plane")).text())
    assert sorted(json.dumps(g, sort_keys=True) for g in groups_down) == sorted(
        json.dumps(g, sort_keys=True) for g in groups
    )


@pytest.mark.live
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
async def test_metrics_pass_promtool_check_metrics(exporter: Exporter) -> None:
    await exporter.cycle()
    body = await (await exporter.client.get("/metrics")).read()
    families = {
        f.name
        for f in text_string_to_metric_families(body.decode())
        if f.samples
        and f.name.startswith(("fleetwatch_etcd", "fleetwatch_controlplane", "fleetwatch_coredns"))
    }
    assert families == {f.name for f in FAMILIES} - {
        "fleetwatch_etcd_has_leader",  # direct source only
        "fleetwatch_etcd_db_size_bytes",
        "fleetwatch_etcd_raft_term",
    }
    result = await asyncio.to_thread(
        subprocess.run,
        ["promtool", "check", "metrics"],
        input=body,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()


class PodsOnly:
    """An API that lists pods but refuses nodes (RBAC without ``list nodes``).

    ``host_ip``: what the static pods say of their node (empty: not yet reported);
    ``list_version``: the lists' own resourceVersion, which a real API server moves with
    every write anywhere in the cluster. ``paths``: every path asked, in order.
    """

    def __init__(self, fleet_plane: ControlPlane, host_ip: str | None = None) -> None:
        self.plane = fleet_plane
        self.host_ip = host_ip
        self.list_version = 1
        self.paths: list[str] = []

    async def get(self, path: str, timeout: float) -> tuple[int, bytes]:  # noqa: ASYNC109
        from fleetwatch.standin.workload.controlplane import pod_list

        self.paths.append(path)
        if path.startswith("/api/v1/nodes"):
            return 403, b'{"kind":"Status","code":403}'
        selector = unquote(path.partition("labelSelector=")[2])
        pods = pod_list(self.plane, 0, selector)
        pods["metadata"]["resourceVersion"] = str(self.list_version)
        if self.host_ip is not None:
            for pod in pods["items"]:
                pod["status"]["hostIP"] = self.host_ip
        return 200, json.dumps(pods).encode()


async def test_without_list_nodes_targets_come_from_the_pods_host_ip() -> None:
    api = PodsOnly(ControlPlane())
    read = await read_kube_system(api, timeout_seconds=1)
    assert read is not None and read.kube.nodes == () and not read.nodes_read
    assert not any(p.startswith("/api/v1/nodes") for p in api.paths)  # hostIP says it all
    report = report_from_kube_system(read.kube)
    sched = [t for t in report.targets if t.component == "kube-scheduler"]
    assert [t.address for t in sched] == ["127.1.0.1:10259", "127.1.0.2:10259", "127.1.0.3:10259"]
    assert report.etcd is not None and report.etcd.quorum.members == 3


async def test_nodes_are_asked_only_for_a_static_pod_without_host_ip() -> None:
    api = PodsOnly(ControlPlane(), host_ip="")
    read = await read_kube_system(api, timeout_seconds=1)
    assert read is not None and read.nodes_read
    assert api.paths[-1].startswith("/api/v1/nodes")
    # Refused (403) and no hostIP: no address to give Prometheus, so no target.
    assert report_from_kube_system(read.kube).targets == ()


async def test_unchanged_pods_are_not_parsed_again_whatever_the_list_version() -> None:
    plane = ControlPlane()
    api = PodsOnly(plane)
    first = await read_kube_system(api, timeout_seconds=1)
    assert first is not None
    api.list_version = 2  # a write elsewhere in the cluster: the pods are the same
    assert await read_kube_system(api, timeout_seconds=1, unchanged=first.digest) is None
    api.plane = plane.with_etcd_ready("cp-2", False)  # a pod changed: read and parse again
    changed = await read_kube_system(api, timeout_seconds=1, unchanged=first.digest)
    assert changed is not None and changed.digest != first.digest
    etcd = report_from_kube_system(changed.kube).etcd
    assert etcd is not None and etcd.quorum.healthy == 2
