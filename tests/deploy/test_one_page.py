"""One page per down cluster: the shipped inhibit rules, checked by the real Alertmanager.

While ``FleetClusterOffline`` fires for a cluster, the Flux, Argo CD and kube-prometheus
alerts carrying the same ``cluster`` label are inhibited; another cluster's are not, and
``Watchdog`` never is. Both shipped forms are run: ``alerts/alertmanager.yml`` and the
AlertmanagerConfig ``fleetwatch-one-page`` as the Prometheus Operator turns it into
Alertmanager configuration, with the matcher strategy its comment requires (``None``) and
with the operator's default (``OnNamespace``), under which it mutes nothing of theirs.
Alerts are posted through the API v2 as Prometheus or Flux's notification-controller
would; ``GET /api/v2/alerts`` says which alerts inhibit each one (``status.inhibitedBy``).
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.procs import ManagedProcess, free_port, wait_until
from tests.helpers.alertmanager_process import ALERTMANAGER, alertmanager_process
from tests.helpers.commands import run_ok
from tests.helpers.deploy_manifests import REPO, Obj, alertmanager_config, find, render

EXAMPLE = REPO / "alerts" / "alertmanager.yml"
RULES_DOC = REPO / "docs" / "rules.md"
AMTOOL = shutil.which("amtool")

#: What each source names its alerts, one of each family, for two clusters.
MUTED = {
    "KubeAPIDown": {"severity": "critical"},  # kubernetes-mixin, absent(): no namespace
    "TargetDown": {"severity": "warning", "namespace": "kube-system", "job": "kubelet"},
    "etcdInsufficientMembers": {"severity": "critical", "job": "etcd"},
    "ReconciliationFailure": {"severity": "page", "kind": "Kustomization", "namespace": "apps"},
    # notification-controller's alertmanager Provider: Flux + Kind + Title(Reason).
    "FluxKustomizationReconciliationfailed": {"severity": "error", "namespace": "apps"},
    "app-sync-failed": {"app": "shop"},  # Argo CD notifications, named after the template
    "ArgoCdAppSyncFailed": {"severity": "warning", "dest_server": "https://c1:6443"},
}
NEVER_MUTED = {
    "Watchdog": {"severity": "none"},
    "KubePodCrashLooping": {"severity": "warning", "namespace": "apps"},  # not the outage's
}


def _one_page(rules: list[Obj]) -> list[Obj]:
    """The rules held back by a cluster's OFFLINE that are not fleetwatch's own."""
    return [
        r
        for r in rules
        if r["source_matchers"] == ['alertname = "FleetClusterOffline"']
        and "Fleet" not in r["target_matchers"][0]
    ]


def _parsed(matcher: str) -> tuple[str, str, str]:
    match = re.fullmatch(r'\s*(\w+)\s*(=~|!~|!=|=)\s*"(.*)"\s*', matcher)
    assert match, matcher
    return match.group(1), match.group(2), match.group(3)


def _as_amtool(rules: list[Obj]) -> list[Any]:
    return [
        (
            [_parsed(m) for m in r["source_matchers"]],
            [_parsed(m) for m in r["target_matchers"]],
            r.get("equal"),
        )
        for r in rules
    ]


def _operator_object() -> Obj:
    return find(render("overlays/prometheus-operator"), "AlertmanagerConfig", "fleetwatch-one-page")


def test_the_alertmanagerconfig_holds_the_examples_rules(tmp_path: Path) -> None:
    example = _one_page(yaml.safe_load(EXAMPLE.read_text())["inhibit_rules"])
    assert len(example) == 4
    translated = alertmanager_config(_operator_object(), tmp_path, strategy="None")
    assert _as_amtool(translated["inhibit_rules"]) == _as_amtool(example)
    for _, targets, equal in _as_amtool(example):
        assert equal == ["cluster"]
        assert not re.fullmatch(targets[0][2], "Watchdog")
        assert not re.fullmatch(targets[0][2], "InfoInhibitor")


def test_every_muted_name_is_documented_with_its_source() -> None:
    """docs/rules.md's table names each alert (or family) the rules mute."""
    section = RULES_DOC.read_text().split("## One page per down cluster", 1)[1]
    section = section.split("\n## ", 1)[0]
    rules = _one_page(yaml.safe_load(EXAMPLE.read_text())["inhibit_rules"])
    for _, targets, _ in _as_amtool(rules):
        for name in re.findall(r"[A-Za-z][\w-]*", targets[0][2]):
            assert name in section, f"{name} is not in docs/rules.md's table"


@pytest.mark.live
@pytest.mark.skipif(AMTOOL is None, reason="amtool not installed")
@pytest.mark.parametrize("strategy", ["OnNamespace", "None"])
def test_the_alertmanagerconfig_as_the_operator_renders_it_passes_amtool(
    tmp_path: Path, strategy: str
) -> None:
    config = alertmanager_config(_operator_object(), tmp_path, strategy=strategy)
    (tmp_path / "am.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    done = run_ok([str(AMTOOL), "check-config", str(tmp_path / "am.yml")])
    assert "4 inhibit rules" in done.stdout


# --- the real Alertmanager ------------------------------------------------------------------


def _example_without_integrations() -> Obj:
    """alerts/alertmanager.yml as shipped, its receivers emptied: routes and inhibit rules
    are what is tested, and nothing is posted to a webhook (127.0.0.1:9714 may be anyone's)."""
    config: Obj = yaml.safe_load(EXAMPLE.read_text())
    config["receivers"] = [{"name": r["name"]} for r in config["receivers"]]
    return config


def _post(port: int, alerts: list[Obj]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200


def _listed(port: int) -> dict[tuple[str, str], list[str]]:
    """(alertname, cluster) -> the fingerprints of the alerts inhibiting it."""
    url = f"http://127.0.0.1:{port}/api/v2/alerts"
    with urllib.request.urlopen(url, timeout=5) as resp:
        listed = json.load(resp)
    return {
        (a["labels"]["alertname"], a["labels"].get("cluster", "")): a["status"]["inhibitedBy"]
        for a in listed
    }


@pytest.fixture
def alertmanager(tmp_path: Path) -> Any:
    """Start a real Alertmanager with a given configuration; stopped by pid at the end."""
    if ALERTMANAGER is None:
        pytest.skip("prometheus-alertmanager not installed")
    started: list[ManagedProcess] = []

    def start(config: Obj) -> int:
        (tmp_path / "am.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        port = free_port()
        proc = alertmanager_process(tmp_path, tmp_path / "am.yml", port)
        started.append(proc)
        proc.start()
        return port

    yield start
    for proc in started:
        proc.stop()


def _alerts(offline_labels: Obj) -> list[Obj]:
    out = [{"labels": {"alertname": "FleetClusterOffline", "cluster": "c1", **offline_labels}}]
    for cluster in ("c1", "c2"):
        for name, labels in {**MUTED, **NEVER_MUTED}.items():
            out.append({"labels": {"alertname": name, "cluster": cluster, **labels}})
    return out


def _offline_inhibits(port: int) -> dict[tuple[str, str], list[str]]:
    """The listing once the inhibitor holds c1's OFFLINE (it learns of it asynchronously)."""

    def held() -> dict[tuple[str, str], list[str]] | None:
        status = _listed(port)
        return status if status.get(("KubeAPIDown", "c1")) else None

    return wait_until(held, timeout=15, what="KubeAPIDown of c1 inhibited")


@pytest.mark.live
@pytest.mark.parametrize("form", ["alerts/alertmanager.yml", "AlertmanagerConfig, strategy None"])
def test_an_offline_cluster_pages_once(alertmanager: Any, tmp_path: Path, form: str) -> None:
    if form == "alerts/alertmanager.yml":
        config = _example_without_integrations()
    else:
        config = alertmanager_config(_operator_object(), tmp_path, strategy="None")
    port = alertmanager(config)
    _post(port, _alerts({"severity": "critical", "namespace": "fleetwatch"}))
    status = _offline_inhibits(port)
    assert len(status) == 1 + 2 * (len(MUTED) + len(NEVER_MUTED))
    assert status[("FleetClusterOffline", "c1")] == []
    (offline,) = status[("KubeAPIDown", "c1")]  # the one fingerprint: c1's OFFLINE
    for name in MUTED:
        assert status[(name, "c1")] == [offline], name
        assert status[(name, "c2")] == [], f"{name} of c2, which is not OFFLINE"
    for name in NEVER_MUTED:
        assert status[(name, "c1")] == status[(name, "c2")] == [], name


@pytest.mark.live
def test_under_the_operators_default_strategy_the_alertmanagerconfig_mutes_nothing_of_theirs(
    alertmanager: Any, tmp_path: Path
) -> None:
    """Why its comment and docs/rules.md ask for the None strategy: with ``OnNamespace``
    both sides need ``namespace="fleetwatch"``, which no Flux, Argo CD or kube-prometheus
    alert carries."""
    config = alertmanager_config(_operator_object(), tmp_path, strategy="OnNamespace")
    port = alertmanager(config)
    alerts = _alerts({"severity": "critical", "namespace": "fleetwatch"})
    # One alert that does live in fleetwatch's namespace: the only kind it can still mute.
    alerts.append(
        {"labels": {"alertname": "TargetDown", "cluster": "c1", "namespace": "fleetwatch"}}
    )
    _post(port, alerts)

    def fleetwatch_target_down_inhibited() -> bool:
        url = f"http://127.0.0.1:{port}/api/v2/alerts"
        with urllib.request.urlopen(url, timeout=5) as resp:
            listed = json.load(resp)
        return any(
            a["labels"]["alertname"] == "TargetDown"
            and a["labels"].get("namespace") == "fleetwatch"
            and a["status"]["inhibitedBy"]
            for a in listed
        )

    wait_until(fleetwatch_target_down_inhibited, timeout=15, what="the inhibitor at work")
    status = _listed(port)
    for name in MUTED:
        if name != "TargetDown":
            assert status[(name, "c1")] == [], name
