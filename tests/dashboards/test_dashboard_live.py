"""The dashboards against a live fleetwatch: no query errors, and the panels show the fleet.

The fleet: alpha and beta healthy, gamma answering 500 from the start (so OFFLINE after N
failed probes, with failures of reason ``http_error``), alpha OFFLINE for a while with
``not_ready``. See dashboards_livestack.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.dashboards_grafana import (
    Json,
    Query,
    dashboard_files,
    load,
    panels,
    queries,
    substitute,
)
from tests.helpers.dashboards_livestack import APPS, CLUSTERS, DIRECT_ETCD, DOWN, FLAPPED, LiveStack

pytestmark = pytest.mark.live

DASHBOARDS = {path.name: load(path) for path in dashboard_files()}
FLEET = DASHBOARDS["fleet-overview.json"]
DETAIL = DASHBOARDS["cluster-detail.json"]

#: The panels a wall screen is for: each must show data for this fleet.
CORE_FLEET_PANELS = (
    "ONLINE",
    "OFFLINE",
    "UNKNOWN",
    "Failing, not yet OFFLINE",
    "Storm guard",
    "Cluster status",
    "Status history",
    "Clusters by status (whole fleet)",
    "Clusters",
    "Failure reasons (time range)",
    "Time since last successful probe (10 stalest)",
    "Probe latency (10 slowest)",
    "Consecutive failures",
    "Probe failures by reason",
    "Share of the fleet failing (storm guard)",
    "Exporter: probe cycle duration and clusters",
)


def panel(dashboard: Json, title: str) -> Json:
    [found] = [p for p in panels(dashboard) if p.get("title") == title]
    return found


def run_target(live: LiveStack, target: Json, values: dict[str, str]) -> list[Any]:
    prom = live.prometheus
    assert prom is not None
    expr = substitute(target["expr"], values)
    return prom.instant(expr) if target.get("instant") else prom.range(expr)


def run_query(live: LiveStack, q: Query, values: dict[str, str]) -> list[Any]:
    prom = live.prometheus
    assert prom is not None
    if q.label_values is not None:
        metric, label = q.label_values
        return prom.label_values(label, substitute(metric, values))
    expr = substitute(q.expr, values)
    return prom.instant(expr) if q.instant else prom.range(expr)


def last(series: Json) -> float:
    """Last value of an instant or range result."""
    value = series["value"] if "value" in series else series["values"][-1]
    return float(value[1])


def by_label(result: list[Json], label: str) -> dict[str, float]:
    return {s["metric"][label]: last(s) for s in result}


CHOICES = {
    "fleet-overview.json": [{"cluster": ".*"}, {"cluster": "(alpha|gamma)"}, {"cluster": DOWN}],
    "cluster-detail.json": [{"cluster": c} for c in CLUSTERS],
    "reactor.json": [{"cluster": ".*"}],
}


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_expression_runs_without_error_on_live_data(live: LiveStack, name: str) -> None:
    failures = []
    for values in CHOICES[name]:
        for q in queries(DASHBOARDS[name]):
            try:
                run_query(live, q, values)
            except AssertionError as exc:
                failures.append(f"{q} [{values}]: {exc}")
    assert not failures, "\n".join(failures)


def test_cluster_variable_lists_the_fleet(live: LiveStack) -> None:
    [q] = [q for q in queries(FLEET) if q.kind == "variable"]
    assert sorted(run_query(live, q, {})) == sorted(CLUSTERS)


@pytest.mark.parametrize("title", CORE_FLEET_PANELS)
def test_core_fleet_overview_panels_return_data(live: LiveStack, title: str) -> None:
    p = panel(FLEET, title)
    for target in p["targets"]:
        assert run_target(live, target, {"cluster": ".*"}), f"{title} {target['refId']}: no data"


def test_fleet_overview_shows_each_status(live: LiveStack) -> None:
    everyone = {"cluster": ".*"}
    [grid] = panel(FLEET, "Cluster status")["targets"]
    assert by_label(run_target(live, grid, everyone), "cluster") == {
        "alpha": 1.0,
        "beta": 1.0,
        "gamma": 2.0,
    }
    counts = {
        title: last(run_target(live, panel(FLEET, title)["targets"][0], everyone)[0])
        for title in ("ONLINE", "OFFLINE", "UNKNOWN")
    }
    assert counts == {"ONLINE": 2.0, "OFFLINE": 1.0, "UNKNOWN": 0.0}
    [watcher] = run_target(live, panel(FLEET, "Watcher")["targets"][0], everyone)
    assert last(watcher) == 0.0, "watching"
    # While alpha failed, 2 of 3 clusters did: FleetProbeStorm fired (and is held 10 min).
    [storm] = run_target(live, panel(FLEET, "Storm guard")["targets"][0], everyone)
    assert last(storm) == 1.0, "STORM"
    [storm_annotation] = [
        q for q in queries(FLEET) if q.where.startswith("annotation 'Probe storm")
    ]
    assert run_query(live, storm_annotation, everyone)
    only_alpha = {"cluster": "alpha"}
    assert last(run_target(live, panel(FLEET, "OFFLINE")["targets"][0], only_alpha)[0]) == 0.0
    [reasons] = panel(FLEET, "Failure reasons (time range)")["targets"]
    # gamma answers 500, alpha's etcd was not ready during its outage.
    assert set(by_label(run_target(live, reasons, everyone), "reason")) == {
        "http_error",
        "not_ready",
    }


def test_fleet_overview_table_has_one_row_per_cluster(live: LiveStack) -> None:
    t = panel(FLEET, "Clusters")
    rows: dict[str, dict[str, float]] = {}
    for target in t["targets"]:
        for s in run_target(live, target, {"cluster": ".*"}):
            rows.setdefault(s["metric"]["cluster"], {})[target["refId"]] = last(s)
    assert sorted(rows) == sorted(CLUSTERS)
    assert rows[DOWN]["A"] == 2.0 and rows[DOWN]["C"] >= 2
    assert "B" not in rows[DOWN], "never succeeded: no 'since last success'"
    assert 0 <= rows["alpha"]["B"] < 10 and rows["alpha"]["C"] == 0
    # The last failure's reason and class: the down cluster's only (alpha answers again).
    [reasons] = [q for q in t["targets"] if q["refId"] == "F"]
    [failing] = run_target(live, reasons, {"cluster": ".*"})
    assert failing["metric"] == {"cluster": DOWN, "reason": "http_error", "class": "unreachable"}


def test_cluster_detail_of_the_down_cluster(live: LiveStack) -> None:
    values = {"cluster": DOWN}

    def one(title: str, ref: int = 0) -> list[Json]:
        return run_target(live, panel(DETAIL, title)["targets"][ref], values)

    assert last(one("Status")[0]) == 2.0
    assert last(one("Consecutive failures")[0]) >= 2
    assert one("Since last successful probe") == [], "never probed successfully"
    assert set(by_label(one("Probe failures by reason"), "reason")) == {"http_error"}
    assert last(one("Probeable")[0]) == 1.0
    [endpoint] = one("Endpoint")
    assert endpoint["metric"]["endpoint"].startswith("https://127.0.0.1:")


#: Cluster detail panels with data for every healthy cluster (etcd from its static pods).
CORE_DETAIL_PANELS = (
    "Status",
    "Since last successful probe",
    "Consecutive failures",
    "Last probe latency",
    "Probeable",
    "Endpoint",
    "Status and probe history",
    "Probe latency and consecutive failures",
    "Quorum",
    "Members healthy / quorum / members",
    "etcd data from",
    "Members healthy vs quorum",
    "Member health",
    "Control-plane targets up",
    "Bound to 127.0.0.1",
    "CoreDNS replicas / nodes",
    "CoreDNS spread",
    "Control-plane targets",
    "Components bound to 127.0.0.1",
)
#: Only known when etcd itself is asked (beta's, through --config.file).
DIRECT_ETCD_PANELS = ("Leader", "Leader changes (time range)", "Largest member db")


@pytest.mark.parametrize("cluster", ["alpha", DIRECT_ETCD])
def test_core_cluster_detail_panels_return_data(live: LiveStack, cluster: str) -> None:
    titles = CORE_DETAIL_PANELS + (DIRECT_ETCD_PANELS if cluster == DIRECT_ETCD else ())
    for title in titles:
        for target in panel(DETAIL, title)["targets"]:
            result = run_target(live, target, {"cluster": cluster})
            assert result, f"{cluster}: {title} {target['refId']}: no data"


def test_cluster_detail_etcd_and_control_plane(live: LiveStack) -> None:
    def one(title: str, cluster: str, ref: int = 0) -> list[Json]:
        return run_target(live, panel(DETAIL, title)["targets"][ref], {"cluster": cluster})

    # alpha: three etcd static pods, kubeadm's defaults (metrics on 127.0.0.1).
    assert [s["metric"]["state"] for s in one("Quorum", "alpha")] == ["healthy"]
    assert [s["metric"]["source"] for s in one("etcd data from", "alpha")] == ["apiserver"]
    assert [last(one("Members healthy / quorum / members", "alpha", i)[0]) for i in range(3)] == [
        3,
        2,
        3,
    ]
    assert last(one("Bound to 127.0.0.1", "alpha")[0]) == 9  # 3 components x 3 nodes
    bound = {
        (s["metric"]["component"], s["metric"]["node"])
        for s in one("Components bound to 127.0.0.1", "alpha")
    }
    assert {c for c, _ in bound} == {"etcd", "kube-controller-manager", "kube-scheduler"}
    assert [last(one("CoreDNS replicas / nodes", "alpha", i)[0]) for i in range(2)] == [2, 1]
    targets = {s["metric"]["component"] for s in one("Control-plane targets", "alpha")}
    assert targets == {"kube-apiserver"}, "localhost-bound targets are left out"
    # beta: its one-member etcd asked directly.
    assert last(one("Leader", DIRECT_ETCD)[0]) == 1
    assert last(one("Largest member db", DIRECT_ETCD)[0]) > 0
    assert [s["metric"]["source"] for s in one("etcd data from", DIRECT_ETCD)] == ["direct"]
    assert [s["metric"]["state"] for s in one("Quorum", DIRECT_ETCD)] == ["no_fault_tolerance"]


def test_status_annotations_mark_each_outage(live: LiveStack) -> None:
    """The OFFLINE annotation is a region per outage: alpha's is over, gamma's goes on."""
    prom = live.prometheus
    assert prom is not None
    [offline] = [q for q in queries(FLEET) if q.where == "annotation 'Cluster OFFLINE'"]
    result = run_query(live, offline, {"cluster": ".*"})
    points = {s["metric"]["cluster"]: [float(t) for t, _ in s["values"]] for s in result}
    assert set(points) == {FLAPPED, DOWN}
    assert len(points[FLAPPED]) >= 1, "alpha's outage has a region"
    # Now (an instant query of the same expression) only gamma's region goes on.
    firing = prom.instant(substitute(offline.expr, {"cluster": ".*"}))
    assert {s["metric"]["cluster"] for s in firing} == {DOWN}
    assert run_query(live, offline, {"cluster": "beta"}) == []


REACTOR = DASHBOARDS["reactor.json"]


def reactor_value(live: LiveStack, title: str, ref: int = 0, **labels: str) -> float:
    result = run_target(live, panel(REACTOR, title)["targets"][ref], {"cluster": ".*"})
    matching = [s for s in result if all(s["metric"].get(k) == v for k, v in labels.items())]
    assert matching, f"{title}: no series with {labels}"
    return last(matching[0])


def range_total(live: LiveStack, title: str, ref: int) -> float:
    """Sum over the time range of a bars panel (increase per rate interval)."""
    result = run_target(live, panel(REACTOR, title)["targets"][ref], {"cluster": ".*"})
    return max((float(v) for s in result for _, v in s["values"]), default=0.0)


def test_reactor_dashboard_shows_the_outage(live: LiveStack) -> None:
    assert reactor_value(live, "Apps DEPLOYED") == len(APPS)
    assert reactor_value(live, "Apps DEGRADED") == 0
    assert reactor_value(live, "Deployments refused (time range)") >= 1
    assert 0 <= reactor_value(live, "Since last notification") < 30
    both = "Clusters by status: reactor vs rules"
    assert reactor_value(live, both, 0, status="OFFLINE") == 1
    assert reactor_value(live, both, 1, status="OFFLINE") == 1
    # Bars of increase() per rate interval: the outage shows as a bar above zero.
    assert range_total(live, "Cascades and restores: outages", 0) > 0
    assert range_total(live, "Cascades and restores: outages", 1) > 0
    assert range_total(live, "Cascades and restores: apps", 0) > 0
    assert range_total(live, "Cascades and restores: apps", 1) > 0
    assert range_total(live, "Deployments and gate refusals", 0) > 0
    outcomes = run_target(live, panel(REACTOR, "Notifications by outcome")["targets"][0], {})
    assert "applied" in {s["metric"]["outcome"] for s in outcomes}
