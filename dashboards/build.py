"""Build fleetwatch's Grafana dashboards (fleet overview, cluster detail, reactor) as JSON.

The JSON files next to this script are what users import, and they are committed. They are
generated here rather than edited by hand because three dashboards with ~60 panels must agree
on many small things that drift when copied: every panel and query points at the
``$datasource`` variable (never a datasource UID), the status colours and names, the
annotations, the links between the dashboards. ``tests/dashboards`` checks that the committed
files equal this script's output, and runs every query against a real Prometheus.

    python dashboards/build.py           # rewrite the JSON files
    python dashboards/build.py --check   # exit 1 if a committed file differs

Grafana 10 or later (schemaVersion 38); Prometheus as the only datasource.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Json = dict[str, Any]

HERE = Path(__file__).resolve().parent


def reactor_repeat_seconds(path: Path = HERE.parent / "alerts" / "alertmanager.yml") -> int:
    """The shipped route's repeat_interval for FleetClusterOnline, in seconds.

    Read from alerts/alertmanager.yml so the "time since last notification" thresholds
    follow the route instead of being a second copy of it.
    """
    units = {"s": 1, "m": 60, "h": 3600}
    for route in yaml.safe_load(path.read_text())["route"]["routes"]:
        if any("FleetClusterOnline" in m for m in route.get("matchers", [])):
            text = str(route["repeat_interval"])
            return int(text[:-1]) * units[text[-1]]
    raise ValueError(f"{path}: no route for FleetClusterOnline")


REPEAT_S = reactor_repeat_seconds()
SCHEMA_VERSION = 38  # Grafana 10.0; later versions migrate it on load.
GRAFANA_MIN_VERSION = "10.0.0"
TAG = "fleetwatch"

#: Every panel, query, variable and annotation names this datasource: the variable, so that
#: an imported or provisioned dashboard works against whatever Prometheus the user picks.
DS: Json = {"type": "prometheus", "uid": "${datasource}"}

UID_FLEET = "fleetwatch-fleet-overview"
UID_CLUSTER = "fleetwatch-cluster-detail"
UID_REACTOR = "fleetwatch-reactor"

#: Link to the cluster detail for one cluster, keeping datasource and time range.
_KEEP = "&${datasource:queryparam}&${__url_time_range}"
CLUSTER_LINK = f"/d/{UID_CLUSTER}?var-cluster=${{__value.raw}}{_KEEP}"
CLUSTER_LINK_FROM_LABEL = f"/d/{UID_CLUSTER}?var-cluster=${{__field.labels.cluster}}{_KEEP}"

# --- the status contract (DESIGN.md): code of cluster:fleetwatch_status:code ----------------
COLOR_ONLINE = "green"
COLOR_OFFLINE = "red"
COLOR_UNKNOWN = "#8e8e8e"  # grey: "we cannot tell", neither good nor bad
COLOR_FAILING = "orange"
#: Default share of failing clusters at which FleetProbeStorm fires (fleetwatch rules).
STORM_FRACTION = 0.5

STATUS_MAPPINGS: list[Json] = [
    {
        "type": "value",
        "options": {
            "0": {"text": "UNKNOWN", "color": COLOR_UNKNOWN, "index": 0},
            "1": {"text": "ONLINE", "color": COLOR_ONLINE, "index": 1},
            "2": {"text": "OFFLINE", "color": COLOR_OFFLINE, "index": 2},
        },
    },
    {
        "type": "special",
        "options": {"match": "null", "result": {"text": "NO DATA", "color": COLOR_UNKNOWN}},
    },
]
STATUS_COLORS = {"ONLINE": COLOR_ONLINE, "OFFLINE": COLOR_OFFLINE, "UNKNOWN": COLOR_UNKNOWN}
APP_COLORS = {"DEPLOYED": COLOR_ONLINE, "DEGRADED": COLOR_OFFLINE, "PENDING": "blue"}


def bool_mappings(
    one: str, zero: str, one_color: str = "green", zero_color: str = "red"
) -> list[Json]:
    """Mappings for a 1/0 gauge (probe success, leader present, target up)."""
    return [
        {
            "type": "value",
            "options": {
                "1": {"text": one, "color": one_color, "index": 0},
                "0": {"text": zero, "color": zero_color, "index": 1},
            },
        }
    ]


def thresholds(*steps: tuple[float | None, str]) -> Json:
    """Absolute thresholds; the first step's value is None (the base colour)."""
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}


def color_override(name: str, color: str) -> Json:
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": color}}],
    }


def target(
    expr: str, legend: str = "", ref: str = "A", *, instant: bool = False, table: bool = False
) -> Json:
    """One PromQL query. ``instant`` for stats and tables that show the current value only."""
    t: Json = {
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
        "refId": ref,
    }
    if table:
        t["format"] = "table"
    return t


def targets(*queries: tuple[str, str]) -> list[Json]:
    """Several range queries (expr, legend) with refIds A, B, C, ..."""
    return [target(e, lg, chr(ord("A") + i)) for i, (e, lg) in enumerate(queries)]


# --- panels ---------------------------------------------------------------------------------


@dataclass
class Board:
    """Panels of one dashboard, with ids handed out in order (Grafana needs unique ids)."""

    panels: list[Json] = field(default_factory=list)

    def add(self, panel: Json, at: tuple[int, int, int, int]) -> Json:
        """Place ``panel`` at (x, y, width, height) on Grafana's 24-column grid."""
        x, y, w, h = at
        panel["id"] = len(self.panels) + 1
        panel["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        self.panels.append(panel)
        return panel

    def row(self, title: str, y: int) -> None:
        self.add(
            {"type": "row", "title": title, "collapsed": False, "panels": []}, at=(0, y, 24, 1)
        )


def _panel(kind: str, title: str, description: str, tgts: list[Json], unit: str) -> Json:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
    }


def stat(
    title: str,
    description: str,
    tgts: list[Json],
    *,
    unit: str = "none",
    mappings: list[Json] | None = None,
    steps: Json | None = None,
    color_mode: str = "background",
    text_mode: str = "auto",
    decimals: int | None = None,
    links: list[Json] | None = None,
    no_value: str | None = None,
    overrides: list[Json] | None = None,
) -> Json:
    p = _panel("stat", title, description, tgts, unit)
    p["fieldConfig"]["overrides"] = overrides or []
    d = p["fieldConfig"]["defaults"]
    d["mappings"] = mappings or []
    d["thresholds"] = steps or thresholds((None, "text"))
    d["color"] = {"mode": "thresholds"}
    if decimals is not None:
        d["decimals"] = decimals
    if links:
        d["links"] = links
    if no_value is not None:
        d["noValue"] = no_value
    p["options"] = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": color_mode,
        "graphMode": "none",
        "justifyMode": "center",
        "orientation": "auto",
        "textMode": text_mode,
        "wideLayout": True,
        "showPercentChange": False,
    }
    return p


def timeseries(
    title: str,
    description: str,
    tgts: list[Json],
    *,
    unit: str,
    stack: bool = False,
    bars: bool = False,
    steps: Json | None = None,
    threshold_style: str = "off",
    overrides: list[Json] | None = None,
    min_zero: bool = True,
    interpolation: str = "linear",
    legend_calcs: list[str] | None = None,
) -> Json:
    p = _panel("timeseries", title, description, tgts, unit)
    d = p["fieldConfig"]["defaults"]
    d["color"] = {"mode": "palette-classic"}
    d["custom"] = {
        "drawStyle": "bars" if bars else "line",
        "lineInterpolation": interpolation,
        "lineWidth": 1,
        "fillOpacity": 60 if (stack or bars) else 10,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        "thresholdsStyle": {"mode": threshold_style},
        "axisSoftMin": 0 if min_zero else None,
    }
    if not min_zero:
        del d["custom"]["axisSoftMin"]
    d["thresholds"] = steps or thresholds((None, "green"))
    p["fieldConfig"]["overrides"] = overrides or []
    p["options"] = {
        "legend": {
            "displayMode": "table" if legend_calcs else "list",
            "placement": "bottom",
            "showLegend": True,
            "calcs": legend_calcs or [],
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return p


def state_timeline(
    title: str,
    description: str,
    tgts: list[Json],
    mappings: list[Json],
    *,
    unit: str = "none",
    overrides: list[Json] | None = None,
) -> Json:
    p = _panel("state-timeline", title, description, tgts, unit)
    p["fieldConfig"]["overrides"] = overrides or []
    d = p["fieldConfig"]["defaults"]
    d["mappings"] = mappings
    d["color"] = {"mode": "thresholds"}
    d["thresholds"] = thresholds((None, "text"))
    d["custom"] = {"fillOpacity": 80, "lineWidth": 0}
    p["options"] = {
        "mergeValues": True,
        "showValue": "never",
        "alignValue": "left",
        "rowHeight": 0.9,
        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False},
        "tooltip": {"mode": "single", "sort": "none"},
    }
    return p


def bargauge(
    title: str, description: str, tgts: list[Json], *, unit: str, steps: Json | None = None
) -> Json:
    p = _panel("bargauge", title, description, tgts, unit)
    d = p["fieldConfig"]["defaults"]
    d["color"] = {"mode": "thresholds"}
    d["thresholds"] = steps or thresholds((None, "green"), (1, "orange"))
    d["min"] = 0
    p["options"] = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "orientation": "horizontal",
        "displayMode": "gradient",
        "showUnfilled": True,
        "valueMode": "color",
        "namePlacement": "auto",
        "minVizHeight": 10,
        "minVizWidth": 0,
    }
    return p


def table(
    title: str,
    description: str,
    tgts: list[Json],
    *,
    rename: dict[str, str],
    hide: list[str],
    overrides: list[Json],
    sort_by: str,
) -> Json:
    """Instant queries merged on their labels into one row per cluster."""
    p = _panel("table", title, description, tgts, "none")
    d = p["fieldConfig"]["defaults"]
    d["custom"] = {"align": "auto", "cellOptions": {"type": "auto"}, "filterable": True}
    d["thresholds"] = thresholds((None, "text"))
    d["color"] = {"mode": "thresholds"}
    p["fieldConfig"]["overrides"] = overrides
    p["transformations"] = [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {name: True for name in ["Time", *hide]},
                "indexByName": {},
                "renameByName": rename,
            },
        },
    ]
    p["options"] = {
        "showHeader": True,
        "cellHeight": "sm",
        "footer": {"show": False, "reducer": ["sum"], "fields": "", "countRows": False},
        "sortBy": [{"displayName": sort_by, "desc": True}],
    }
    return p


def column(name: str, *properties: tuple[str, Any]) -> Json:
    """A table column override: unit, mappings, cell colours, links."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": k, "value": v} for k, v in properties],
    }


# --- dashboard frame ------------------------------------------------------------------------


def datasource_variable() -> Json:
    """The one datasource choice. ``${DS_PROMETHEUS}`` is filled in by Grafana's import
    dialog; a provisioned copy keeps the literal, matches no datasource, and Grafana then
    selects a Prometheus datasource by itself (the user can switch in the drop-down)."""
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {"selected": False, "text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
    }


CLUSTER_VALUES = "label_values(fleetwatch_cluster_info, cluster)"


def cluster_variable(*, multi: bool) -> Json:
    """Clusters as the exporter discovers them. Multi-select with "All" on the fleet-wide
    dashboards (queries use ``cluster=~"$cluster"``), one cluster on the detail dashboard."""
    var: Json = {
        "name": "cluster",
        "label": "Cluster",
        "type": "query",
        "datasource": DS,
        "definition": CLUSTER_VALUES,
        "query": {"query": CLUSTER_VALUES, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,  # on time range change: clusters come and go with kubeconfig files
        "sort": 1,
        "regex": "",
        "hide": 0,
        "options": [],
        "skipUrlSync": False,
        "includeAll": multi,
        "multi": multi,
    }
    if multi:
        var["allValue"] = ".*"
        var["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    else:
        var["current"] = {}
    return var


def annotation(name: str, expr: str, color: str, title: str, *, enable: bool = True) -> Json:
    """A Prometheus annotation: one region per run of the series (an alert's firing time)."""
    return {
        "name": name,
        "datasource": DS,
        "enable": enable,
        "hide": False,
        "iconColor": color,
        "expr": expr,
        "step": "1m",
        "titleFormat": title,
        "textFormat": "{{alertname}} {{alertstate}}",
        "tagKeys": "cluster,severity",
        "useValueForTime": False,
    }


def annotation_list(selector: str, extra: list[Json]) -> Json:
    """Status changes drawn on every time series: an OFFLINE region per outage (start =
    the cluster went OFFLINE, end = it came back), the storm guard, and (off by default,
    it can be noisy) clusters failing probes inside their grace period."""
    return {
        "list": [
            {
                "builtIn": 1,
                "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                "enable": True,
                "hide": True,
                "iconColor": "rgba(0, 211, 255, 1)",
                "name": "Annotations & Alerts",
                "type": "dashboard",
            },
            annotation(
                "Cluster OFFLINE",
                f'ALERTS{{alertname="FleetClusterOffline", alertstate="firing", {selector}}}',
                COLOR_OFFLINE,
                "{{cluster}} OFFLINE",
            ),
            annotation(
                "Probe storm (watcher suspect)",
                'ALERTS{alertname="FleetProbeStorm", alertstate="firing"}',
                "purple",
                "Probe storm: most of the fleet failing at once",
            ),
            annotation(
                "Cluster failing probes (grace period)",
                f'ALERTS{{alertname="FleetClusterProbeFailing", alertstate="firing", {selector}}}',
                COLOR_FAILING,
                "{{cluster}} failing probes",
                enable=False,
            ),
            *extra,
        ]
    }


def dashboard(
    uid: str,
    title: str,
    description: str,
    board: Board,
    variables: list[Json],
    selector: str,
    extra_annotations: list[Json] | None = None,
) -> Json:
    kinds = sorted({p["type"] for p in board.panels if p["type"] != "row"})
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "The Prometheus that scrapes the fleetwatch exporter and "
                "reactor and loads fleetwatch's rules (default of the datasource variable)",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__elements": {},
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_MIN_VERSION},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            *({"type": "panel", "id": k, "name": k, "version": ""} for k in kinds),
        ],
        "uid": uid,
        "title": title,
        "description": description,
        "tags": [TAG],
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,  # shared crosshair: line the panels up in time
        "id": None,
        "links": [
            {
                "type": "dashboards",
                "title": "fleetwatch",
                "tags": [TAG],
                "asDropdown": False,
                "includeVars": True,
                "keepTime": True,
                "targetBlank": False,
                "icon": "external link",
                "tooltip": "",
                "url": "",
            }
        ],
        "liveNow": False,
        "panels": board.panels,
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "style": "dark",
        "templating": {"list": [datasource_variable(), *variables]},
        "annotations": annotation_list(selector, extra_annotations or []),
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {"refresh_intervals": ["10s", "30s", "1m", "5m", "15m"]},
        "timezone": "",
        "version": 1,
        "weekStart": "",
    }


# --- 1. fleet overview ----------------------------------------------------------------------

F = 'cluster=~"$cluster"'
STATUS = f"max by (cluster) (cluster:fleetwatch_status:code{{{F}}})"


#: 1 exporter down or absent, 2 exporter stalled (no cycle for 3 intervals), 0 watching.
#: absent() reacts at the first failed scrape; the alerts cover a restart of Prometheus.
WATCHER = (
    'max(ALERTS{alertname=~"FleetwatchExporterDown|FleetwatchExporterAbsent", '
    'alertstate="firing"})'
    " or absent(fleetwatch_exporter_last_cycle_timestamp_seconds)"
    " or 2 * (max(time() - (fleetwatch_exporter_last_cycle_timestamp_seconds > 0))"
    " > bool 3 * max(fleetwatch_exporter_probe_interval_seconds))"
    " or vector(0)"
)


def _count_status(code: int) -> str:
    return f"count({STATUS} == {code}) or vector(0)"


def fleet_overview() -> Json:
    b = Board()
    # Top line: the numbers a wall screen is looked at for.
    b.add(
        stat(
            "ONLINE",
            "Clusters whose last probes succeed (status from the recording rule "
            "cluster:fleetwatch_status:code).",
            [target(_count_status(1), "ONLINE", instant=True)],
            steps=thresholds((None, COLOR_ONLINE)),
        ),
        at=(0, 0, 4, 4),
    )
    b.add(
        stat(
            "OFFLINE",
            "Clusters with at least N consecutive failed probes. Their apps are DEGRADED by "
            "the reactor; deployments to them are refused.",
            [target(_count_status(2), "OFFLINE", instant=True)],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_OFFLINE)),
        ),
        at=(4, 0, 4, 4),
    )
    b.add(
        stat(
            "UNKNOWN",
            "Clusters never probed successfully, not probeable (kubeconfig reference is not "
            "a readable file), or without data.",
            [target(_count_status(0), "UNKNOWN", instant=True)],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_UNKNOWN)),
        ),
        at=(8, 0, 4, 4),
    )
    b.add(
        stat(
            "Failing, not yet OFFLINE",
            "Clusters whose latest probes fail but fewer than N in a row "
            "(alert FleetClusterProbeFailing, which stays 10 min after the last failure so "
            "that a flapping cluster is one warning): they turn OFFLINE if it goes on.",
            [
                target(
                    'count(ALERTS{alertname="FleetClusterProbeFailing", alertstate="firing", '
                    f"{F}}}) or vector(0)",
                    "failing",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        at=(12, 0, 4, 4),
    )
    b.add(
        stat(
            "Storm guard",
            "FleetProbeStorm fires when most of the fleet fails at once: the watcher itself "
            "(its network, its credentials) is the likely fault, so per-cluster OFFLINE "
            "notifications are inhibited and no cascade runs. Check the exporter first.",
            [
                target(
                    'max(ALERTS{alertname="FleetProbeStorm", alertstate="firing"}) or vector(0)',
                    "storm",
                    instant=True,
                )
            ],
            mappings=bool_mappings("STORM: check the watcher", "quiet", "purple", "green"),
        ),
        at=(16, 0, 4, 4),
    )
    b.add(
        stat(
            "Watcher",
            "Statuses are only as good as the exporter that probes. EXPORTER DOWN: no "
            "exporter series in Prometheus, or FleetwatchExporterDown / "
            "FleetwatchExporterAbsent firing; every cluster then reads UNKNOWN, outages go "
            "unnoticed and deployments are not gated. EXPORTER STALLED: the exporter is "
            "scraped but its last probe cycle ended more than 3 probe intervals ago, so the "
            "statuses shown are old.",
            [target(WATCHER, "watcher", instant=True)],
            mappings=[
                {
                    "type": "value",
                    "options": {
                        "0": {"text": "watching", "color": COLOR_ONLINE, "index": 0},
                        "1": {"text": "EXPORTER DOWN", "color": COLOR_OFFLINE, "index": 1},
                        "2": {"text": "EXPORTER STALLED", "color": COLOR_OFFLINE, "index": 2},
                    },
                }
            ],
        ),
        at=(20, 0, 4, 4),
    )

    # Every cluster at a glance.
    b.add(
        stat(
            "Cluster status",
            "Every cluster's status from the recording rule. Click a cluster for its detail "
            "dashboard.",
            [target(STATUS, "{{cluster}}", instant=True)],
            mappings=STATUS_MAPPINGS,
            text_mode="value_and_name",
            links=[{"title": "Cluster detail", "url": CLUSTER_LINK_FROM_LABEL}],
            no_value="NO DATA: is the exporter scraped and are fleetwatch's rules loaded?",
        ),
        at=(0, 4, 24, 8),
    )
    b.add(
        state_timeline(
            "Status history",
            "Status of each cluster over time: when it went OFFLINE and when it came back.",
            [target(STATUS, "{{cluster}}")],
            STATUS_MAPPINGS,
        ),
        at=(0, 12, 12, 9),
    )
    by_status = [
        (f'sum(fleet:fleetwatch_clusters:count{{status="{s}"}})', s)
        for s in ("ONLINE", "OFFLINE", "UNKNOWN")
    ]
    b.add(
        timeseries(
            "Clusters by status (whole fleet)",
            "From the recording rule fleet:fleetwatch_clusters:count; counts the whole fleet "
            "(the cluster filter does not apply).",
            targets(*by_status),
            unit="none",
            stack=True,
            interpolation="stepAfter",
            overrides=[color_override(s, c) for s, c in STATUS_COLORS.items()],
        ),
        at=(12, 12, 12, 9),
    )

    # Probing.
    b.add(
        table(
            "Clusters",
            "One row per cluster, OFFLINE first. 'Since last success' is empty for a cluster "
            "never probed successfully. Click a name for its detail dashboard.",
            [
                target(STATUS, ref="A", instant=True, table=True),
                target(
                    f"time() - max by (cluster) "
                    f"(fleetwatch_cluster_probe_last_success_timestamp_seconds{{{F}}} > 0)",
                    ref="B",
                    instant=True,
                    table=True,
                ),
                target(
                    f"max by (cluster) (fleetwatch_cluster_probe_consecutive_failures{{{F}}})",
                    ref="C",
                    instant=True,
                    table=True,
                ),
                target(
                    f"max by (cluster) (fleetwatch_cluster_probe_duration_seconds{{{F}}})",
                    ref="D",
                    instant=True,
                    table=True,
                ),
                target(
                    f"max by (cluster, endpoint, source) (fleetwatch_cluster_info{{{F}}})",
                    ref="E",
                    instant=True,
                    table=True,
                ),
            ],
            rename={
                "cluster": "Cluster",
                "Value #A": "Status",
                "Value #B": "Since last success",
                "Value #C": "Consecutive failures",
                "Value #D": "Last probe latency",
                "endpoint": "Endpoint",
                "source": "Kubeconfig",
            },
            hide=["Value #E"],
            overrides=[
                column(
                    "Cluster",
                    ("links", [{"title": "Cluster detail", "url": CLUSTER_LINK}]),
                ),
                column(
                    "Status",
                    ("mappings", STATUS_MAPPINGS),
                    ("custom.cellOptions", {"type": "color-background"}),
                ),
                column("Since last success", ("unit", "s"), ("decimals", 0)),
                column(
                    "Consecutive failures",
                    ("unit", "none"),
                    ("thresholds", thresholds((None, "text"), (1, COLOR_FAILING))),
                    ("custom.cellOptions", {"type": "color-text"}),
                ),
                column("Last probe latency", ("unit", "s"), ("decimals", 3)),
            ],
            sort_by="Status",
        ),
        at=(0, 21, 16, 10),
    )
    b.add(
        bargauge(
            "Failure reasons (time range)",
            "Failed probes by reason over the selected time range: timeout, connect, tls, "
            "unauthorized, not_ready (a readiness check such as etcd failed), http_error.",
            [
                target(
                    f"sum by (reason) "
                    f"(increase(fleetwatch_cluster_probe_failures_total{{{F}}}[$__range]))",
                    "{{reason}}",
                    instant=True,
                )
            ],
            unit="none",
        ),
        at=(16, 21, 8, 10),
    )
    b.add(
        timeseries(
            "Time since last successful probe (10 stalest)",
            "Seconds since each cluster's last successful probe; a healthy cluster stays "
            "under the probe interval.",
            [
                target(
                    f"topk(10, time() - max by (cluster) "
                    f"(fleetwatch_cluster_probe_last_success_timestamp_seconds{{{F}}} > 0))",
                    "{{cluster}}",
                )
            ],
            unit="s",
        ),
        at=(0, 31, 12, 8),
    )
    b.add(
        timeseries(
            "Probe latency (10 slowest)",
            "Duration of each cluster's last probe (readiness endpoint, authenticated, within "
            "the probe timeout).",
            [
                target(
                    f"topk(10, max by (cluster) "
                    f"(fleetwatch_cluster_probe_duration_seconds{{{F}}}))",
                    "{{cluster}}",
                )
            ],
            unit="s",
        ),
        at=(12, 31, 12, 8),
    )
    b.add(
        timeseries(
            "Consecutive failures",
            "Failed probes in a row per cluster (reset by a success); the cluster is OFFLINE "
            "from the failure threshold N on. Only clusters with failures are drawn.",
            [
                target(
                    f"max by (cluster) (fleetwatch_cluster_probe_consecutive_failures{{{F}}}) > 0",
                    "{{cluster}}",
                )
            ],
            unit="none",
            interpolation="stepAfter",
        ),
        at=(0, 39, 8, 8),
    )
    b.add(
        timeseries(
            "Probe failures by reason",
            "Failed probes per reason, counted over each point's rate interval.",
            [
                target(
                    f"sum by (reason) "
                    f"(increase(fleetwatch_cluster_probe_failures_total{{{F}}}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
        ),
        at=(8, 39, 8, 8),
    )
    b.add(
        timeseries(
            "Share of the fleet failing (storm guard)",
            "Share of the probeable clusters failing their probes (recording rule "
            "fleet:fleetwatch_clusters_probe_failing:ratio). At the storm fraction (dashed "
            "line: the default 50 %, `fleetwatch rules --storm-fraction`), with at least 3 "
            "probeable clusters, FleetProbeStorm fires and per-cluster OFFLINE notifications "
            "are held back: no cascade runs.",
            [target("max(fleet:fleetwatch_clusters_probe_failing:ratio)", "failing share")],
            unit="percentunit",
            steps=thresholds((None, COLOR_ONLINE), (STORM_FRACTION, "purple")),
            threshold_style="dashed",
        ),
        at=(16, 39, 8, 8),
    )

    # The watcher's own health.
    b.add(
        timeseries(
            "Exporter: probe cycle duration and clusters",
            "Duration of the last probe cycle and the number of clusters found in the kubeconfigs.",
            targets(
                ("max(fleetwatch_exporter_cycle_duration_seconds)", "cycle duration"),
                ("max(fleetwatch_exporter_clusters_discovered)", "clusters discovered"),
            ),
            unit="s",
            overrides=[
                column("clusters discovered", ("unit", "none"), ("custom.axisPlacement", "right"))
            ],
        ),
        at=(0, 47, 12, 7),
    )
    b.add(
        timeseries(
            "Exporter: discovery errors",
            "Kubeconfig files or contexts that could not be used (missing, unreadable, "
            "invalid, context pointing at a missing cluster or user). The exporter logs the "
            "file and the reason.",
            [
                target(
                    "sum(increase(fleetwatch_exporter_discovery_errors_total[$__rate_interval]))",
                    "discovery errors",
                )
            ],
            unit="none",
            bars=True,
        ),
        at=(12, 47, 12, 7),
    )
    return dashboard(
        UID_FLEET,
        "fleetwatch / Fleet overview",
        "Every cluster's status at a glance, probe health and the storm guard (wall screen).",
        b,
        [cluster_variable(multi=True)],
        F,
    )


# --- 2. cluster detail ----------------------------------------------------------------------

C = 'cluster="$cluster"'
#: What an etcd panel says when only the API server source is there (no leader, term, db).
NEEDS_DIRECT = "needs direct etcd (--config.file)"


def cluster_detail() -> Json:
    b = Board()
    b.row("Status and probes", 0)
    b.add(
        stat(
            "Status",
            "From the recording rule cluster:fleetwatch_status:code.",
            [target(f"max(cluster:fleetwatch_status:code{{{C}}})", "status", instant=True)],
            mappings=STATUS_MAPPINGS,
        ),
        at=(0, 1, 4, 4),
    )
    b.add(
        stat(
            "Since last successful probe",
            "Empty ('never') when the cluster was never probed successfully.",
            [
                target(
                    "time() - max(fleetwatch_cluster_probe_last_success_timestamp_seconds"
                    f"{{{C}}} > 0)",
                    "since",
                    instant=True,
                )
            ],
            unit="s",
            color_mode="value",
            decimals=0,
            no_value="never",
        ),
        at=(4, 1, 4, 4),
    )
    b.add(
        stat(
            "Consecutive failures",
            "Failed probes in a row; OFFLINE from the failure threshold N on.",
            [
                target(
                    f"max(fleetwatch_cluster_probe_consecutive_failures{{{C}}})",
                    "failures",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        at=(8, 1, 4, 4),
    )
    b.add(
        stat(
            "Last probe latency",
            "Duration of the last probe.",
            [
                target(
                    f"max(fleetwatch_cluster_probe_duration_seconds{{{C}}})",
                    "latency",
                    instant=True,
                )
            ],
            unit="s",
            color_mode="value",
            decimals=3,
        ),
        at=(12, 1, 4, 4),
    )
    b.add(
        stat(
            "Probeable",
            "0 when the cluster's kubeconfig reference is not a readable file (for example a "
            "Secret name given to the reactor): it is never probed and stays UNKNOWN.",
            [target(f"max(fleetwatch_cluster_probeable{{{C}}})", "probeable", instant=True)],
            mappings=bool_mappings("yes", "no: not a readable kubeconfig", "green", COLOR_UNKNOWN),
        ),
        at=(16, 1, 4, 4),
    )
    b.add(
        stat(
            "Endpoint",
            "API server endpoint and the kubeconfig file the cluster was found in.",
            [
                target(
                    f"max by (endpoint, source) (fleetwatch_cluster_info{{{C}}})",
                    "{{endpoint}} ({{source}})",
                    instant=True,
                )
            ],
            color_mode="none",
            text_mode="name",
        ),
        at=(20, 1, 4, 4),
    )
    b.add(
        state_timeline(
            "Status and probe history",
            "Top: the status from the rules. Bottom: the result of each probe.",
            [
                target(f"max(cluster:fleetwatch_status:code{{{C}}})", "status", "A"),
                target(f"max(fleetwatch_cluster_probe_success{{{C}}})", "last probe", "B"),
            ],
            STATUS_MAPPINGS,
            overrides=[
                column("last probe", ("mappings", bool_mappings("probe ok", "probe failed")))
            ],
        ),
        at=(0, 5, 24, 6),
    )
    b.add(
        timeseries(
            "Probe latency and consecutive failures",
            "Duration of the last probe (left axis) and failed probes in a row (right axis).",
            targets(
                (f"max(fleetwatch_cluster_probe_duration_seconds{{{C}}})", "probe latency"),
                (
                    f"max(fleetwatch_cluster_probe_consecutive_failures{{{C}}})",
                    "consecutive failures",
                ),
            ),
            unit="s",
            overrides=[
                column(
                    "consecutive failures",
                    ("unit", "none"),
                    ("custom.axisPlacement", "right"),
                    ("custom.lineInterpolation", "stepAfter"),
                    ("color", {"mode": "fixed", "fixedColor": COLOR_FAILING}),
                )
            ],
        ),
        at=(0, 11, 12, 8),
    )
    b.add(
        timeseries(
            "Probe failures by reason",
            "Failed probes per reason (timeout, connect, tls, unauthorized, not_ready, "
            "http_error); not_ready means a readiness check such as etcd failed.",
            [
                target(
                    "sum by (reason) (increase(fleetwatch_cluster_probe_failures_total"
                    f"{{{C}}}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
        ),
        at=(12, 11, 12, 8),
    )

    b.row("etcd", 19)
    b.add(
        stat(
            "Quorum",
            "healthy: one member can be lost; no_fault_tolerance: losing one more member "
            "loses quorum; lost: etcd cannot commit, the API server cannot write.",
            [
                target(
                    f"max by (state) (fleetwatch_etcd_quorum_state{{{C}}}) == 1",
                    "{{state}}",
                    instant=True,
                )
            ],
            color_mode="background",
            text_mode="name",
            no_value="no etcd data",
            steps=thresholds((None, COLOR_UNKNOWN)),
            overrides=[
                color_override("healthy", COLOR_ONLINE),
                color_override("no_fault_tolerance", COLOR_FAILING),
                color_override("lost", COLOR_OFFLINE),
            ],
        ),
        at=(0, 20, 4, 4),
    )
    b.add(
        stat(
            "Members healthy / quorum / members",
            "Healthy members, members needed for quorum (floor(n/2)+1), and members. An even "
            "member count adds no fault tolerance.",
            [
                target(
                    f"max(fleetwatch_etcd_members_healthy{{{C}}})", "healthy", "A", instant=True
                ),
                target(f"max(fleetwatch_etcd_quorum_size{{{C}}})", "quorum", "B", instant=True),
                target(f"max(fleetwatch_etcd_members{{{C}}})", "members", "C", instant=True),
            ],
            color_mode="value",
            text_mode="value_and_name",
        ),
        at=(4, 20, 5, 4),
    )
    b.add(
        stat(
            "Leader",
            "Whether etcd reports a leader. Without one nothing is committed.",
            [target(f"max(fleetwatch_etcd_has_leader{{{C}}})", "leader", instant=True)],
            mappings=bool_mappings("leader", "NO LEADER"),
            no_value=NEEDS_DIRECT,
        ),
        at=(9, 20, 3, 4),
    )
    b.add(
        stat(
            "etcd data from",
            "apiserver: members are the etcd static pods of kube-system, healthy when Ready "
            "(every cluster). direct: etcd itself answered (/health, status), when the "
            "exporter's --config.file gives the cluster's etcd endpoints; only then are "
            "leader, raft term and db size known.",
            [
                target(
                    f"max by (source) (fleetwatch_etcd_source_info{{{C}}})",
                    "{{source}}",
                    instant=True,
                )
            ],
            color_mode="none",
            text_mode="name",
            no_value="no etcd data",
        ),
        at=(12, 20, 3, 4),
    )
    b.add(
        stat(
            "Leader changes (time range)",
            "Raft term changes over the selected range: each one is at least one election. "
            "Frequent elections point at slow disks or a flaky network between members.",
            [
                target(
                    f"max(changes(fleetwatch_etcd_raft_term{{{C}}}[$__range]))",
                    "changes",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (3, COLOR_FAILING), (10, COLOR_OFFLINE)),
            color_mode="value",
            no_value=NEEDS_DIRECT,
        ),
        at=(15, 20, 4, 4),
    )
    b.add(
        stat(
            "Largest member db",
            "Largest etcd database of the members (the default quota is 2 GiB; writes stop "
            "when it is reached).",
            [target(f"max(fleetwatch_etcd_db_size_bytes{{{C}}})", "db size", instant=True)],
            unit="bytes",
            color_mode="value",
            steps=thresholds(
                (None, COLOR_ONLINE), (1.5 * 2**30, COLOR_FAILING), (1.9 * 2**30, COLOR_OFFLINE)
            ),
            no_value=NEEDS_DIRECT,
        ),
        at=(19, 20, 5, 4),
    )
    b.add(
        timeseries(
            "Members healthy vs quorum",
            "When 'healthy' touches 'quorum' there is no fault tolerance left; below it, "
            "quorum is lost.",
            targets(
                (f"max(fleetwatch_etcd_members_healthy{{{C}}})", "healthy"),
                (f"max(fleetwatch_etcd_quorum_size{{{C}}})", "quorum"),
                (f"max(fleetwatch_etcd_members{{{C}}})", "members"),
            ),
            unit="none",
            interpolation="stepAfter",
            overrides=[
                color_override("healthy", COLOR_ONLINE),
                color_override("quorum", COLOR_OFFLINE),
                color_override("members", "blue"),
            ],
        ),
        at=(0, 24, 8, 8),
    )
    b.add(
        state_timeline(
            "Member health",
            "Health of each etcd member over time.",
            [target(f"max by (member) (fleetwatch_etcd_member_healthy{{{C}}})", "{{member}}")],
            bool_mappings("healthy", "unhealthy"),
        ),
        at=(8, 24, 8, 8),
    )
    b.add(
        timeseries(
            "DB size per member and leader changes",
            "etcd database size of each member (left) and raft term changes per rate "
            "interval (right).",
            [
                target(
                    f"max by (member) (fleetwatch_etcd_db_size_bytes{{{C}}})", "{{member}}", "A"
                ),
                target(
                    f"max(changes(fleetwatch_etcd_raft_term{{{C}}}[$__rate_interval]))",
                    "leader changes",
                    "B",
                ),
            ],
            unit="bytes",
            overrides=[
                column(
                    "leader changes",
                    ("unit", "none"),
                    ("custom.axisPlacement", "right"),
                    ("custom.drawStyle", "bars"),
                    ("color", {"mode": "fixed", "fixedColor": COLOR_FAILING}),
                )
            ],
        ),
        at=(16, 24, 8, 8),
    )

    b.row("Control plane and CoreDNS", 32)
    cp = f'{C}, component!=""'
    b.add(
        stat(
            "Control-plane targets up",
            "Scrape targets from the exporter's /sd/control-plane (scheduler, "
            "controller-manager, etcd metrics, API server) that Prometheus reaches, out of "
            "those that are not bound to 127.0.0.1.",
            [
                target(f'sum(up{{{cp}, localhost_only!="true"}})', "up", "A", instant=True),
                target(f'count(up{{{cp}, localhost_only!="true"}})', "targets", "B", instant=True),
            ],
            color_mode="value",
            text_mode="value_and_name",
            no_value="no control-plane targets scraped",
        ),
        at=(0, 33, 6, 4),
    )
    b.add(
        stat(
            "Bound to 127.0.0.1",
            "Components whose metrics listen on the node's loopback only (kubeadm's default "
            "for scheduler, controller-manager and etcd metrics): Prometheus cannot scrape "
            "them, which is not an outage. Fix: kubeadm extraArgs bind-address: 0.0.0.0 "
            "(etcd: listen-metrics-urls: http://0.0.0.0:2381).",
            [
                target(
                    f"sum(fleetwatch_controlplane_localhost_only{{{C}}}) or vector(0)",
                    "localhost only",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        at=(6, 33, 4, 4),
    )
    b.add(
        stat(
            "CoreDNS replicas / nodes",
            "CoreDNS replicas and the distinct nodes they run on. All replicas on one node "
            "make DNS a single point of failure.",
            [
                target(f"max(fleetwatch_coredns_replicas{{{C}}})", "replicas", "A", instant=True),
                target(f"max(fleetwatch_coredns_nodes{{{C}}})", "nodes", "B", instant=True),
            ],
            steps=thresholds((None, COLOR_OFFLINE), (2, COLOR_ONLINE)),
            color_mode="value",
            text_mode="value_and_name",
            no_value="no CoreDNS data",
        ),
        at=(10, 33, 6, 4),
    )
    b.add(
        timeseries(
            "CoreDNS spread",
            "Replicas and distinct nodes over time; 'nodes' at 1 with more than one replica "
            "means one node failure takes DNS down.",
            targets(
                (f"max(fleetwatch_coredns_replicas{{{C}}})", "replicas"),
                (f"max(fleetwatch_coredns_nodes{{{C}}})", "nodes"),
            ),
            unit="none",
            interpolation="stepAfter",
        ),
        at=(16, 33, 8, 8),
    )
    b.add(
        state_timeline(
            "Control-plane targets",
            "Each scrape target over time (up or down). Targets bound to 127.0.0.1 are left "
            "out: see the table beside.",
            [
                target(
                    f'max by (component, node) (up{{{cp}, localhost_only!="true"}})',
                    "{{component}} on {{node}}",
                )
            ],
            bool_mappings("up", "down"),
        ),
        at=(0, 37, 10, 8),
    )
    b.add(
        table(
            "Components bound to 127.0.0.1",
            "Control-plane components reachable only on their own node. Prometheus reports "
            "them down although they run; the fix is in the Bound to 127.0.0.1 panel's "
            "description and in the alert.",
            [
                target(
                    "max by (component, node) "
                    f"(fleetwatch_controlplane_localhost_only{{{C}}}) == 1",
                    ref="A",
                    instant=True,
                    table=True,
                )
            ],
            rename={"component": "Component", "node": "Node"},
            hide=["Value"],
            overrides=[],
            sort_by="Component",
        ),
        at=(10, 37, 6, 8),
    )
    return dashboard(
        UID_CLUSTER,
        "fleetwatch / Cluster detail",
        "One cluster: probe history and failure reasons, etcd quorum and leader, "
        "control-plane targets and the localhost trap, CoreDNS spread.",
        b,
        [cluster_variable(multi=False)],
        C,
        [
            annotation(
                "etcd quorum alerts",
                'ALERTS{alertname=~"FleetEtcdQuorumLost|FleetEtcdNoLeader|'
                f'FleetEtcdNoFaultTolerance", alertstate="firing", {C}}}',
                "yellow",
                "{{cluster}}: {{alertname}}",
            )
        ],
    )


# --- 3. reactor -----------------------------------------------------------------------------


def _inc(metric: str, window: str = "$__rate_interval") -> str:
    return f"sum(increase({metric}[{window}]))"


def reactor() -> Json:
    b = Board()
    for i, (status, color) in enumerate(APP_COLORS.items()):
        b.add(
            stat(
                f"Apps {status}",
                {
                    "DEPLOYED": "Apps running on their cluster.",
                    "DEGRADED": "Apps on a cluster that went OFFLINE (reason cluster_offline, "
                    "restored when it comes back) or reported broken (never restored "
                    "automatically).",
                    "PENDING": "Apps created or reassigned, not deployed yet.",
                }[status],
                [
                    target(
                        f'sum(fleetwatch_reactor_apps{{status="{status}"}})',
                        status,
                        instant=True,
                    )
                ],
                steps=thresholds((None, COLOR_ONLINE), (1, color))
                if status == "DEGRADED"
                else thresholds((None, color)),
                color_mode="value" if status != "DEGRADED" else "background",
                no_value="reactor not scraped",
            ),
            at=(i * 4, 0, 4, 4),
        )
    b.add(
        stat(
            "Deployments refused (time range)",
            "POST /deployments and reassignments refused with HTTP 409 because the target "
            "cluster is OFFLINE.",
            [
                target(
                    _inc("fleetwatch_reactor_deployments_refused_total", "$__range"),
                    "refused",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
            decimals=0,
        ),
        at=(12, 0, 6, 4),
    )
    b.add(
        stat(
            "Since last notification",
            "Time since Alertmanager last delivered a notification. While any cluster is "
            "ONLINE, Alertmanager repeats FleetClusterOnline every repeat_interval "
            f"({REPEAT_S // 60}m in alerts/alertmanager.yml): orange after two missed "
            f"repeats ({2 * REPEAT_S // 60}m), red after {6 * REPEAT_S // 60}m, means the "
            "route to the reactor is broken.",
            [
                target(
                    "time() - max(fleetwatch_reactor_last_notification_timestamp_seconds > 0)",
                    "since",
                    instant=True,
                )
            ],
            unit="s",
            decimals=0,
            color_mode="value",
            no_value="never",
            steps=thresholds(
                (None, COLOR_ONLINE), (2 * REPEAT_S, COLOR_FAILING), (6 * REPEAT_S, COLOR_OFFLINE)
            ),
        ),
        at=(18, 0, 6, 4),
    )
    b.add(
        timeseries(
            "Apps by status",
            "Apps the reactor tracks, by status.",
            [target("sum by (status) (fleetwatch_reactor_apps)", "{{status}}")],
            unit="none",
            stack=True,
            interpolation="stepAfter",
            overrides=[color_override(s, c) for s, c in APP_COLORS.items()],
        ),
        at=(0, 4, 12, 8),
    )
    b.add(
        timeseries(
            "Clusters by status: reactor vs rules",
            "Solid: the reactor's view (from Alertmanager notifications). Dashed: the rules' "
            "view in Prometheus. A lasting gap means notifications are not arriving (clusters "
            "added by hand with POST /clusters show only on the reactor's side).",
            [
                target("sum by (status) (fleetwatch_reactor_clusters)", "reactor {{status}}", "A"),
                target(
                    "sum by (status) (fleet:fleetwatch_clusters:count)", "rules {{status}}", "B"
                ),
            ],
            unit="none",
            interpolation="stepAfter",
            overrides=[
                *(
                    color_override(f"{who} {s}", c)
                    for who in ("reactor", "rules")
                    for s, c in STATUS_COLORS.items()
                ),
                {
                    "matcher": {"id": "byFrameRefID", "options": "B"},
                    "properties": [
                        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}
                    ],
                },
            ],
        ),
        at=(12, 4, 12, 8),
    )
    b.add(
        timeseries(
            "Cascades and restores: outages",
            "Outages opened (a cluster that had been ONLINE went OFFLINE) and closed (it "
            "came back ONLINE).",
            targets(
                (_inc("fleetwatch_reactor_outages_opened_total"), "outages opened"),
                (_inc("fleetwatch_reactor_outages_closed_total"), "outages closed"),
            ),
            unit="none",
            bars=True,
            overrides=[
                color_override("outages opened", COLOR_OFFLINE),
                color_override("outages closed", COLOR_ONLINE),
            ],
        ),
        at=(0, 12, 12, 8),
    )
    b.add(
        timeseries(
            "Cascades and restores: apps",
            "Apps degraded by a cascade and apps restored when their cluster came back. Only "
            "the apps an outage degraded are restored.",
            targets(
                (_inc("fleetwatch_reactor_apps_degraded_total"), "apps degraded"),
                (_inc("fleetwatch_reactor_apps_restored_total"), "apps restored"),
            ),
            unit="none",
            bars=True,
            overrides=[
                color_override("apps degraded", COLOR_OFFLINE),
                color_override("apps restored", COLOR_ONLINE),
            ],
        ),
        at=(12, 12, 12, 8),
    )
    b.add(
        timeseries(
            "Deployments and gate refusals",
            "Deployments accepted and refused by the gate (HTTP 409: target cluster OFFLINE).",
            targets(
                (_inc("fleetwatch_reactor_deployments_total"), "deployments"),
                (_inc("fleetwatch_reactor_deployments_refused_total"), "refused (409)"),
            ),
            unit="none",
            bars=True,
            overrides=[
                color_override("deployments", "blue"),
                color_override("refused (409)", COLOR_FAILING),
            ],
        ),
        at=(0, 20, 12, 8),
    )
    b.add(
        timeseries(
            "Notifications by outcome",
            "Alertmanager notifications: applied, rejected (400, not a v4 webhook), "
            "unauthorized (401, wrong or missing token), error (5xx, Alertmanager retries).",
            [
                target(
                    "sum by (outcome) "
                    "(increase(fleetwatch_reactor_notifications_total[$__rate_interval]))",
                    "{{outcome}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
            overrides=[
                color_override("applied", COLOR_ONLINE),
                color_override("rejected", COLOR_FAILING),
                color_override("unauthorized", COLOR_OFFLINE),
                color_override("error", "dark-red"),
            ],
        ),
        at=(12, 20, 12, 8),
    )
    b.add(
        timeseries(
            "Time since last notification",
            "Grows between notifications and drops at each one; while a cluster is ONLINE "
            f"it should not outgrow Alertmanager's repeat_interval ({REPEAT_S // 60}m shipped).",
            [
                target(
                    "time() - max(fleetwatch_reactor_last_notification_timestamp_seconds > 0)",
                    "since last notification",
                )
            ],
            unit="s",
        ),
        at=(0, 28, 24, 7),
    )
    return dashboard(
        UID_REACTOR,
        "fleetwatch / Reactor",
        "The reactor: apps by status, cascades and restores, the deployment gate, "
        "Alertmanager notifications.",
        b,
        [cluster_variable(multi=True)],
        F,
    )


# --- output ---------------------------------------------------------------------------------

FILES = {
    "fleet-overview.json": fleet_overview,
    "cluster-detail.json": cluster_detail,
    "reactor.json": reactor,
}


def render() -> Iterator[tuple[str, str]]:
    """(file name, JSON text) for every dashboard, exactly as committed."""
    for name, build in FILES.items():
        yield name, json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write to")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date, run python dashboards/build.py: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
