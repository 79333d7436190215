"""What the three dashboards share around their panels: variables, annotations, links.

:func:`dashboard` wraps a :class:`~dashboards.panels.Board` in the fields Grafana needs to
import it (``__inputs``, ``__requires``, schema version), the datasource and cluster
variables, the status annotations and the link menu between the fleetwatch dashboards.
Grafana 10 or later (schemaVersion 38); Prometheus as the only datasource.
"""

from __future__ import annotations

from dashboards.panels import DS, Board, Json
from dashboards.status import COLOR_FAILING, COLOR_OFFLINE, firing
from fleetwatch.common.contract import PROBE_FAILING_ALERT, STORM_ALERT, Status, StatusAlert
from fleetwatch.common.metricnames import CLUSTER_INFO

SCHEMA_VERSION = 38  # Grafana 10.0; later versions migrate it on load.
GRAFANA_MIN_VERSION = "10.0.0"
TAG = "fleetwatch"

UID_FLEET = "fleetwatch-fleet-overview"
UID_CLUSTER = "fleetwatch-cluster-detail"
UID_REACTOR = "fleetwatch-reactor"

#: Link to the cluster detail for one cluster, keeping datasource and time range.
_KEEP = "&${datasource:queryparam}&${__url_time_range}"
CLUSTER_LINK = f"/d/{UID_CLUSTER}?var-cluster=${{__value.raw}}{_KEEP}"
CLUSTER_LINK_FROM_LABEL = f"/d/{UID_CLUSTER}?var-cluster=${{__field.labels.cluster}}{_KEEP}"

#: The cluster selector of every query: a regex on the fleet-wide dashboards, whose
#: ``$cluster`` may be several clusters or "All", an equality on the cluster detail.
ANY_CLUSTER = 'cluster=~"$cluster"'
ONE_CLUSTER = 'cluster="$cluster"'

CLUSTER_VALUES = f"label_values({CLUSTER_INFO}, cluster)"


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


def cluster_variable(*, multi: bool) -> Json:
    """Clusters as the exporter discovers them. Multi-select with "All" on the fleet-wide
    dashboards (queries use :data:`ANY_CLUSTER`), one cluster on the detail dashboard."""
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
                f"Cluster {Status.OFFLINE}",
                firing(StatusAlert.OFFLINE, selector),
                COLOR_OFFLINE,
                f"{{{{cluster}}}} {Status.OFFLINE}",
            ),
            annotation(
                "Probe storm (watcher suspect)",
                firing(STORM_ALERT),
                "purple",
                "Probe storm: most of the fleet failing at once",
            ),
            annotation(
                "Cluster failing probes (grace period)",
                firing(PROBE_FAILING_ALERT, selector),
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
    """The importable dashboard around ``board``'s panels; ``selector`` narrows the
    per-cluster annotations the way the panels' queries are narrowed."""
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
