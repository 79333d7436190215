"""Every PromQL expression of the dashboards runs on a real Prometheus.

Panels, the cluster variable and the annotations are sent as Grafana sends them (instant
or range query, variables filled in); a Prometheus error would be an error box on a
wall screen, so any one fails the test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from fleetwatch.procs import wait_until
from reactor.cd.election import LeaderMetrics
from reactor.cd.metrics import CdMetrics
from tests.helpers.dashboards_grafana import (
    Json,
    Query,
    dashboard_files,
    load,
    panels,
    queries,
    substitute,
)
from tests.helpers.dashboards_prometheus import Prometheus, Scratch

pytestmark = pytest.mark.live

DASHBOARDS = {path.name: load(path) for path in dashboard_files()}


def cluster_choices(dashboard: Json, names: list[str]) -> Iterator[dict[str, str]]:
    """The values Grafana would put in ``$cluster``: one name, and for a multi-value
    variable "All" (its allValue) and a two-name selection (formatted as a regex)."""
    var = next(v for v in dashboard["templating"]["list"] if v["name"] == "cluster")
    yield {"cluster": names[0]}
    if var["multi"]:
        yield {"cluster": var["allValue"]}
        yield {"cluster": "(" + "|".join(names[:2]) + ")"}


def run(prom: Prometheus, q: Query, values: dict[str, str]) -> list[Json]:
    if q.label_values is not None:
        metric, label = q.label_values
        return [{"value": v} for v in prom.label_values(label, substitute(metric, values))]
    expr = substitute(q.expr, values)
    return prom.instant(expr) if q.instant else prom.range(expr)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_expression_is_valid_promql(scratch: Scratch, name: str) -> None:
    empty_prometheus = scratch.prometheus
    dashboard = DASHBOARDS[name]
    failures = []
    count = 0
    for values in cluster_choices(dashboard, ["alpha", "beta"]):
        for q in queries(dashboard):
            count += 1
            try:
                run(empty_prometheus, q, values)
                if not q.instant and q.label_values is None:
                    # Stats fall back to a range query in some Grafana set-ups.
                    empty_prometheus.instant(substitute(q.expr, values))
            except AssertionError as exc:
                failures.append(f"{q} [{values}]: {exc}")
    assert count > 10
    assert not failures, "\n".join(failures)


WATCHER_TEXT = {"0": "watching", "1": "EXPORTER DOWN", "2": "EXPORTER STALLED"}


def watcher(prom: Prometheus) -> str:
    p = next(p for p in panels(DASHBOARDS["fleet-overview.json"]) if p["title"] == "Watcher")
    [result] = prom.instant(p["targets"][0]["expr"])
    mapping = p["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert {k: v["text"] for k, v in mapping.items()} == WATCHER_TEXT
    return WATCHER_TEXT[result["value"][1]]


def test_watcher_says_down_then_watching_then_stalled(scratch: Scratch) -> None:
    """The exporter's own gauges (300 s interval) served with chosen values: none at all
    is an exporter down; a last cycle 10 s ago is fine; one an hour ago (more than 3
    intervals) is a stalled exporter whose statuses are old."""
    prom = scratch.prometheus
    scratch.serve("")
    wait_until(lambda: prom.instant('up{job="scratch"} == 1'), 15, what="first scrape")
    assert watcher(prom) == "EXPORTER DOWN"
    for age, expected in ((10.0, "watching"), (3600.0, "EXPORTER STALLED")):
        scratch.serve(
            "fleetwatch_exporter_probe_interval_seconds 300\n"
            f"fleetwatch_exporter_last_cycle_timestamp_seconds {time.time() - age:.3f}\n"
        )

        def says(text: str = expected) -> bool:
            return watcher(prom) == text

        wait_until(says, 10, what=f"watcher says {expected}")


def cd_stat(prom: Prometheus, title: str, cluster: str = ".*") -> float | None:
    """The number a stat of the reactor dashboard's CD row shows (None: no value)."""
    p = next(p for p in panels(DASHBOARDS["reactor.json"]) if p.get("title") == title)
    result = prom.instant(substitute(p["targets"][0]["expr"], {"cluster": cluster}))
    return float(result[0]["value"][1]) if result else None


def test_the_cd_row_shows_what_the_reactor_exports(scratch: Scratch) -> None:
    """The CD integration's metrics as the reactor writes them (its own collector and
    registry), scraped by a real Prometheus and read through the row's stats."""
    prom = scratch.prometheus
    registry = CollectorRegistry()
    metrics = CdMetrics(registry)
    metrics.describe_settings(60.0, "application", dry_run=False)
    metrics.set_objects(
        {
            ("c1", "flux", "paused_by_outage"): 2,
            ("c1", "argocd", "paused_by_outage"): 1,
            ("c1", "flux", "running"): 4,
            ("c2", "flux", "paused"): 1,
            ("c2", "flux", "running"): 3,
        },
        None,
    )
    metrics.pending.set(2)
    metrics.pending_age.set(150)
    metrics.unresolved.set(1)
    metrics.last_resync.set(time.time() - 5)
    metrics.watch_up.set(0)
    LeaderMetrics(registry).leader.set(1)
    scratch.serve(generate_latest(registry).decode())
    wait_until(lambda: cd_stat(prom, "Paused by outages") == 3, 15, what="the CD scrape")
    assert cd_stat(prom, "Paused by outages", "c2") == 0
    assert cd_stat(prom, "Paused by someone else") == 1
    assert cd_stat(prom, "Paused by someone else", "c1") == 0
    assert cd_stat(prom, "Actions pending") == 2
    assert cd_stat(prom, "Oldest pending, in resync intervals") == 2.5
    assert cd_stat(prom, "Objects naming no cluster") == 1
    since = cd_stat(prom, "Since last resync")
    assert since is not None and 4 < since < 60
    assert cd_stat(prom, "Acting replicas") == 1
    assert cd_stat(prom, "Objects' list+watch") == 0  # mapped to DOWN
    scratch.serve("")  # the CD integration off: the stats say so instead of a number
    wait_until(lambda: cd_stat(prom, "Actions pending") is None, 15, what="series gone")
