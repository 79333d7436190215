"""``/sd/control-plane`` read by a real Prometheus (``http_sd_configs``), with the docs' relabel
rule, and the alert expressions evaluated by that Prometheus on live exporter data: stand-in
clusters for the API-server source, a real etcd cluster for the direct source.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from alerts.controlplane import rule_groups
from exporter.configfile import ClusterConfig, EtcdConfig, ExporterConfig
from exporter.controlplane.check import ControlPlaneCheck
from exporter.server import MONITOR, create_app
from exporter.settings import ExporterSettings
from fleetwatch.procs import ManagedProcess, free_port
from fleetwatch.standin import StandinFleet, node_ip
from fleetwatch.standin.workload.controlplane import ControlPlane
from tests.helpers.controlplane_nodes import free_first_index
from tests.helpers.etcd_cluster import EtcdCluster
from tests.helpers.etcd_poll import poll

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus"),
    # One exporter, Prometheus and etcd for the module: Prometheus hands discovered
    # targets to its scrapers every 5 s, so each new Prometheus costs seconds.
    pytest.mark.asyncio(loop_scope="module"),
]

FIRST_INDEX = free_first_index(clusters=2)  # random: no other fleet's node addresses
KUBEADM, FIXED = (node_ip(FIRST_INDEX + i, 1).rsplit(".", 1)[0] for i in (0, 1))

#: docs/controlplane.md's scrape config for the control plane (with 1 s timings for the test).
SD_JOB = """
job_name: kubernetes-control-plane
scrape_interval: 1s
scrape_timeout: 1s
http_sd_configs:
  - url: {sd_url}
    refresh_interval: 1s
tls_config:
  insecure_skip_verify: true
relabel_configs:
  # Components bound to 127.0.0.1 (kubeadm's default) cannot be scraped from here:
  # drop them instead of paging "down"; FleetControlPlaneLocalhostOnly says how to fix.
  - source_labels: [localhost_only]
    regex: "true"
    action: drop
  # Optional: one job per component, as the kubernetes and etcd mixins expect.
  - source_labels: [component]
    target_label: job
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fleet() -> AsyncIterator[StandinFleet]:
    with tempfile.TemporaryDirectory(prefix="fleetwatch-cp-") as root:
        # serve_metrics: the components answer at their loopback node addresses exactly
        # where a real node would (not when bound to 127.0.0.1). first_index keeps these
        # addresses apart from other tests' fleets.
        async with StandinFleet(Path(root), first_index=FIRST_INDEX) as started:
            await started.add_cluster("kubeadm", control_plane=ControlPlane(serve_metrics=True))
            await started.add_cluster(
                "fixed", control_plane=replace(ControlPlane.hardened(), serve_metrics=True)
            )
            yield started


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def exporter(
    fleet: StandinFleet, etcd_cluster: EtcdCluster
) -> AsyncIterator[tuple[web.Application, str]]:
    """A real exporter on a free loopback port (one cycle run), shared by this module."""
    kubeconfig = fleet.write_kubeconfig(fleet.directory / "kubeconfig")
    # "fixed" also has its etcd asked directly: the real 3-member cluster.
    config = ExporterConfig(
        clusters={
            "fixed": ClusterConfig(etcd=EtcdConfig(endpoints=tuple(etcd_cluster.client_urls)))
        }
    )
    settings = ExporterSettings(kubeconfig_path=kubeconfig, interval=60, timeout=8)
    app = create_app(settings, checks=[ControlPlaneCheck(config)], run_loop=False)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await app[MONITOR].run_cycle()
        yield app, f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(exporter: tuple[web.Application, str]) -> AsyncIterator[str]:
    _, address = exporter
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "fleetwatch-exporter",
                "scrape_interval": "1s",
                "static_configs": [{"targets": [address]}],
            },
            yaml.safe_load(SD_JOB.format(sd_url=f"http://{address}/sd/control-plane")),
        ],
    }
    with tempfile.TemporaryDirectory(prefix="fleetwatch-prom-") as root:
        folder = Path(root)
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        proc = ManagedProcess(
            [
                "prometheus",
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url=http://127.0.0.1:{port}",
            ],
            folder / "prometheus.log",
        )
        proc.start()  # readiness is polled asynchronously: the exporter shares this loop
        try:
            base_url = f"http://127.0.0.1:{port}"
            async with aiohttp.ClientSession() as session:

                async def ready() -> int:
                    async with session.get(f"{base_url}/-/ready") as resp:
                        return resp.status

                await poll(ready, lambda status: status == 200, 15, "Prometheus ready")
            yield base_url
        finally:
            proc.stop()


async def api(session: aiohttp.ClientSession, url: str) -> Any:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=3)) as resp:
            if resp.status != 200:
                return None
            return (await resp.json())["data"]
    except (aiohttp.ClientError, TimeoutError):
        return None


def alert_expr(name: str) -> str:
    expr: str = next(r["expr"] for g in rule_groups() for r in g["rules"] if r.get("alert") == name)
    return expr


async def query(session: aiohttp.ClientSession, prom: str, expr: str) -> Any:
    async with session.get(
        f"{prom}/api/v1/query", params={"query": expr}, timeout=aiohttp.ClientTimeout(total=3)
    ) as resp:
        body = await resp.json()
    assert body["status"] == "success", body
    return body["data"]["result"]


async def test_prometheus_lists_sd_targets_and_drops_localhost_ones(
    prometheus: str, exporter: tuple[web.Application, str]
) -> None:
    async with aiohttp.ClientSession() as session:

        async def targets() -> Any:
            return await api(session, f"{prometheus}/api/v1/targets")

        def discovered(data: Any) -> bool:
            if not data:
                return False
            sd = [
                t for t in data["activeTargets"] if t["labels"].get("job") != "fleetwatch-exporter"
            ]
            return len(sd) == 15 and len(data["droppedTargets"]) == 9

        data = await poll(targets, discovered, 20, "Prometheus discovers the control plane")

    active = {
        (t["labels"]["cluster"], t["labels"]["component"], t["labels"]["node"]): t
        for t in data["activeTargets"]
        if t["labels"]["job"] != "fleetwatch-exporter"
    }
    assert all(t["labels"]["job"] == t["labels"]["component"] for t in active.values())
    # kubeadm defaults: only the API servers are reachable from outside the node.
    assert {k for k in active if k[0] == "kubeadm"} == {
        ("kubeadm", "kube-apiserver", f"cp-{n}") for n in (1, 2, 3)
    }
    # The fixed cluster: all four components on all three nodes.
    assert len({k for k in active if k[0] == "fixed"}) == 12
    sched = active[("fixed", "kube-scheduler", "cp-2")]
    assert sched["scrapeUrl"] == f"https://{FIXED}.2:10259/metrics"
    etcd = active[("fixed", "etcd", "cp-1")]
    assert etcd["scrapeUrl"] == f"http://{FIXED}.1:2381/metrics"
    assert active[("fixed", "kube-controller-manager", "cp-3")]["scrapeUrl"] == (
        f"https://{FIXED}.3:10257/metrics"
    )
    dropped = data["droppedTargets"]
    assert {d["discoveredLabels"]["localhost_only"] for d in dropped} == {"true"}
    assert {
        (d["discoveredLabels"]["cluster"], d["discoveredLabels"]["component"]) for d in dropped
    } == {
        ("kubeadm", "etcd"),
        ("kubeadm", "kube-scheduler"),
        ("kubeadm", "kube-controller-manager"),
    }


async def test_alert_expressions_on_live_exporter_data(
    prometheus: str,
    exporter: tuple[web.Application, str],
    etcd_cluster: EtcdCluster,
) -> None:
    app, _ = exporter
    async with aiohttp.ClientSession() as session:

        async def run(name: str) -> Any:
            return await query(session, prometheus, alert_expr(name))

        def clusters(result: Any) -> set[tuple[str, ...]]:
            return {tuple(r["metric"].get(k, "") for k in ("cluster", "component")) for r in result}

        localhost = await poll(
            lambda: run("FleetControlPlaneLocalhostOnly"),
            lambda r: len(r) == 3,
            20,
            "localhost-only components in Prometheus",
        )
        assert clusters(localhost) == {
            ("kubeadm", "etcd"),
            ("kubeadm", "kube-scheduler"),
            ("kubeadm", "kube-controller-manager"),
        }
        assert {r["value"][1] for r in localhost} == {"3"}  # on three nodes each
        coredns = await run("FleetCoreDNSSingleNode")
        assert clusters(coredns) == {("kubeadm", "")}
        # "fixed" is asked directly: 3/3 with a leader, nothing to say.
        source = await query(session, prometheus, "fleetwatch_etcd_source_info")
        assert {(r["metric"]["cluster"], r["metric"]["source"]) for r in source} == {
            ("kubeadm", "apiserver"),
            ("fixed", "direct"),
        }
        for name in ("FleetEtcdQuorumLost", "FleetEtcdNoFaultTolerance", "FleetEtcdNoLeader"):
            assert await run(name) == [], name

        # A follower of the real etcd dies: no fault tolerance left, still a leader.
        report = await query(session, prometheus, "fleetwatch_etcd_has_leader")
        assert [r["value"][1] for r in report] == ["1"]
        victim = etcd_cluster.members[0]
        victim.kill()
        try:
            await app[MONITOR].run_cycle()
            nft = await poll(
                lambda: run("FleetEtcdNoFaultTolerance"),
                lambda r: len(r) == 1,
                20,
                "no fault tolerance in Prometheus",
            )
            assert clusters(nft) == {("fixed", "")}
            assert await run("FleetEtcdQuorumLost") == []
            assert await run("FleetEtcdNoLeader") == []
            member = await query(
                session,
                prometheus,
                f'fleetwatch_etcd_member_healthy{{cluster="fixed",member="{victim.name}"}}',
            )
            assert [r["value"][1] for r in member] == ["0"]
        finally:
            victim.start()
            await asyncio.to_thread(etcd_cluster.wait_all_healthy)


async def test_no_false_down_and_the_fix_brings_targets_up(
    prometheus: str, exporter: tuple[web.Application, str], fleet: StandinFleet
) -> None:
    """The point of the localhost_only label: every listed target is really up, and once
    kubeadm's bind-address is fixed the component is scraped without any config change."""
    app, _ = exporter
    job = 'job!="fleetwatch-exporter"'
    async with aiohttp.ClientSession() as session:
        up = await poll(
            lambda: query(session, prometheus, f"up{{{job}}}"),
            lambda r: len(r) == 15 and all(x["value"][1] == "1" for x in r),
            20,
            "every kept control-plane target up",
        )
        assert {x["metric"]["instance"] for x in up} >= {f"{KUBEADM}.{n}:6443" for n in (1, 2, 3)}

        # The kubeadm fix for the scheduler (extraArgs bind-address: 0.0.0.0).
        plane = fleet.cluster("kubeadm").control_plane
        await fleet.set_control_plane(
            "kubeadm", plane.with_localhost_bound("kube-scheduler", False)
        )
        await app[MONITOR].run_cycle()
        sched = await poll(
            lambda: query(
                session, prometheus, f'up{{{job},cluster="kubeadm",component="kube-scheduler"}}'
            ),
            lambda r: len(r) == 3 and all(x["value"][1] == "1" for x in r),
            20,
            "the fixed scheduler scraped",
        )
        assert {x["metric"]["node"] for x in sched} == {"cp-1", "cp-2", "cp-3"}
        # Still nothing listed that cannot answer: the other two stay dropped, not "down".
        listed = await query(session, prometheus, f'up{{{job},cluster="kubeadm"}}')
        assert {x["metric"]["component"] for x in listed} == {"kube-apiserver", "kube-scheduler"}
        flagged = await query(session, prometheus, alert_expr("FleetControlPlaneLocalhostOnly"))
        assert {x["metric"]["component"] for x in flagged} == {"etcd", "kube-controller-manager"}
