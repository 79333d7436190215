"""``fleetwatch_cluster_labels`` (exporter.expose.labels): names as kube-state-metrics makes
them, the exposition, the flag; live, an exporter over the management stand-in whose Argo
CD Secrets carry labels, changed and deleted between cycles.
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from exporter.expose.labels import label_names, sanitised
from exporter.expose.render import render, render_metrics
from exporter.expose.snapshot import CycleStats, Snapshot, build_snapshot
from exporter.model import CycleSettings
from exporter.server import INFORMER, MONITOR, create_app
from exporter.settings import ExporterSettings, SettingsError, resolve
from exporter.state import ClusterTable
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.discovery.clusterlabels import Allowlist
from fleetwatch.discovery.clusters import Cluster, Discovery
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import SECRETS
from tests.helpers.discovery_informer import argocd_cluster, b64, until

Samples = dict[str, dict[str, str]]

SANITISED = [
    ("team", "label_team"),
    ("app.kubernetes.io/team", "label_app_kubernetes_io_team"),
    ("teamName", "label_team_name"),
    ("cost-center", "label_cost_center"),
    ("ABCd", "label_abcd"),
    ("v1Beta", "label_v1_beta"),
    ("équipe", "label__quipe"),
]


@pytest.mark.parametrize(("key", "name"), SANITISED)
def test_a_key_is_named_as_kube_state_metrics_names_it(key: str, name: str) -> None:
    assert sanitised(key) == name


CONFLICTS = [
    (("env", "team"), ("label_env", "label_team")),
    (("Team", "team"), ("label_team_conflict1", "label_team_conflict2")),
    (("Team", "tEam", "team"), ("label_team_conflict1", "label_t_eam", "label_team_conflict2")),
    (("a.b", "a/b", "a_b"), ("label_a_b_conflict1", "label_a_b_conflict2", "label_a_b_conflict3")),
    # A suffix given must not be a name another key has: the later one is renamed too.
    (
        ("Team", "team", "team_conflict1"),
        (
            "label_team_conflict1_conflict1",
            "label_team_conflict2",
            "label_team_conflict1_conflict2",
        ),
    ),
]


@pytest.mark.parametrize(("keys", "names"), CONFLICTS)
def test_keys_giving_one_name_are_all_renamed_in_key_order(
    keys: tuple[str, ...], names: tuple[str, ...]
) -> None:
    assert label_names(keys) == names
    assert len(set(names)) == len(names)


def snapshot(clusters: list[Cluster], on: bool = True) -> Snapshot:
    table = ClusterTable()
    table.apply_discovery(Discovery(tuple(clusters), ()), {})
    snap = build_snapshot(table, (), CycleStats(), CycleSettings(60, 5, 8))
    return dataclasses.replace(snap, cluster_labels=on)


def label_samples(text: str) -> Samples:
    return {
        s.labels["cluster"]: {k: v for k, v in s.labels.items() if k != "cluster"}
        for family in text_string_to_metric_families(text)
        if family.name == "fleetwatch_cluster_labels"
        for s in family.samples
        if s.value == 1
    }


CLUSTERS = [
    Cluster("prod", "https://p:6443", "/k/p", "prod", labels=("env", "prod", "team", "payments")),
    Cluster("odd", "https://o:6443", "/k/o", "odd", labels=("Team", 'we"ird\\', "team", "x")),
    Cluster("bare", "https://b:6443", "/k/b", "bare"),
]


def test_every_cluster_has_one_series_with_its_labels_or_none() -> None:
    text = render_metrics(snapshot(CLUSTERS)).decode()
    assert label_samples(text) == {
        "prod": {"label_env": "prod", "label_team": "payments"},
        "odd": {"label_team_conflict1": 'we"ird\\', "label_team_conflict2": "x"},
        "bare": {},
    }
    assert 'fleetwatch_cluster_labels{cluster="bare"} 1\n' in text
    # The gzipped body serves the same text.
    body = render(snapshot(CLUSTERS)).metrics
    assert label_samples(gzip.decompress(body.gzip).decode()) == label_samples(text)


def test_no_allowlist_no_series() -> None:
    text = render_metrics(snapshot(CLUSTERS, on=False)).decode()
    assert "fleetwatch_cluster_labels" not in text
    assert 'fleetwatch_cluster_info{cluster="prod"' in text


@pytest.mark.live
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_accepts_the_labels_family() -> None:
    text = render_metrics(snapshot(CLUSTERS)).decode()
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert (check.returncode, check.stdout + check.stderr) == (0, "")


def test_the_flag_is_parsed_once_and_a_bad_one_refused() -> None:
    assert resolve(env={}).metric_labels_allowlist.empty
    allowlist = resolve(env={}, metric_labels_allowlist="team,env").metric_labels_allowlist
    assert allowlist == Allowlist.parse("clusters=[env,team]")
    with pytest.raises(SettingsError, match=r"--metric-labels-allowlist: .*an empty entry"):
        resolve(env={}, metric_labels_allowlist="team,,env")


# -- live: the exporter over the management stand-in ---------------------------------

ClientFactory = Callable[[web.Application], Any]
FAST = InformerSettings(watch_seconds=(30.0, 30.0), backoff_initial=0.05, backoff_max=0.2)


def argocd(name: str, server: str, token: str, ca: bytes, labels: dict[str, str]) -> dict[str, Any]:
    config = {"bearerToken": token, "tlsClientConfig": {"caData": b64(ca)}}
    return argocd_cluster(name, server, config, labels)


@pytest.mark.live
async def test_labels_of_secrets_and_contexts_follow_them_cycle_by_cycle(
    tmp_path: Path, mgmt: ManagementCluster, aiohttp_client: ClientFactory
) -> None:
    folder = tmp_path / "kube"
    folder.mkdir()
    extension = {"name": "fleetwatch.io/labels", "extension": {"team": "search", "env": "lab"}}
    context = {"cluster": "lab", "user": "lab", "extensions": [extension]}
    (folder / "lab.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "lab", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "lab", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "lab", "context": context}],
            }
        )
    )
    async with StandinFleet(tmp_path / "fleet") as fleet:
        one = await fleet.add_cluster("argo-one")
        two = await fleet.add_cluster("argo-two")
        ca = fleet.certs.ca_pem
        mgmt.seed(
            [
                argocd(one.name, one.url, one.token, ca, {"team": "payments", "env": "prod"}),
                argocd(two.name, two.url, two.token, ca, {"env": "dev", "region": "eu"}),
            ]
        )
        settings = ExporterSettings(
            kubeconfig_dir=folder,
            interval=60,
            timeout=1,
            kubernetes=KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST),
            metric_labels_allowlist=Allowlist.parse("team,env"),
        )
        app = create_app(settings, run_loop=False)
        client = await aiohttp_client(app)
        informer, monitor = app[INFORMER], app[MONITOR]
        assert informer is not None and await informer.wait_synced(10)

        async def scraped() -> Samples:
            await monitor.run_cycle()
            return label_samples(await (await client.get("/metrics")).text())

        assert await scraped() == {
            "argo-one": {"label_env": "prod", "label_team": "payments"},
            "argo-two": {"label_env": "dev"},  # region is not allowlisted
            "lab": {"label_env": "lab", "label_team": "search"},
        }

        # A label changed on the Secret is seen at the next cycle.
        generation = informer.generation
        mgmt.seed([argocd(one.name, one.url, one.token, ca, {"team": "checkout", "env": "prod"})])
        await until(lambda: informer.generation > generation)
        assert (await scraped())["argo-one"] == {"label_env": "prod", "label_team": "checkout"}

        # A Secret deleted takes its series with it.
        mgmt.state.store.delete(SECRETS, "argocd", "cluster-argo-two")
        await until(lambda: len(informer.objects()) == 1)
        got = await scraped()
        assert set(got) == {"argo-one", "lab"}
        text = await (await client.get("/metrics")).text()
        assert one.token not in text and "t0ken" not in text
