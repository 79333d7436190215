"""Grafana panels and queries as plain dicts: the building blocks of every dashboard.

One function per panel kind (stat, time series, state timeline, bar gauge, table) fills in
the options Grafana would otherwise default differently from version to version, so the
three dashboards look alike. Every panel and query names the ``$datasource`` variable
(:data:`DS`), never a datasource UID. :class:`Board` places panels on Grafana's grid and
numbers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]

#: Every panel, query, variable and annotation names this datasource: the variable, so that
#: an imported or provisioned dashboard works against whatever Prometheus the user picks.
DS: Json = {"type": "prometheus", "uid": "${datasource}"}


# --- field settings -------------------------------------------------------------------------


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
    """A fixed colour for the series (or column) called ``name``."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": color}}],
    }


def column(name: str, *properties: tuple[str, Any]) -> Json:
    """An override of the series or table column ``name``: unit, mappings, colours, links."""
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": k, "value": v} for k, v in properties],
    }


# --- queries --------------------------------------------------------------------------------


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


# --- the grid -------------------------------------------------------------------------------


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
        """A Grafana row header (one grid unit high, full width) at ``y``."""
        self.add(
            {"type": "row", "title": title, "collapsed": False, "panels": []}, at=(0, y, 24, 1)
        )


# --- panel kinds ----------------------------------------------------------------------------


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
    """A big number (or its mapped word) per series: the last value, not a graph."""
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
    """A graph over time: lines, or bars for counts per interval; stacked if ``stack``."""
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
    """One coloured band per series, its value mapped to a word (status, up/down)."""
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
    """Horizontal bars, one per series, for comparing counts (failure reasons)."""
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
