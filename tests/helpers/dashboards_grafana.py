"""Read fleetwatch's dashboards the way Grafana does: panels, queries, variables, annotations.

Shared by the structure test and the query test. ``queries()`` lists every PromQL
expression of a dashboard (panel targets, the cluster variable, annotations) and
``substitute()`` fills in the dashboard and Grafana variables the way Grafana would before
sending the query to Prometheus.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Json = dict[str, Any]

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"


def regenerate(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m dashboards`` from the checkout's root, as the docs say to."""
    return subprocess.run(
        [sys.executable, "-m", "dashboards", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def load(path: Path) -> Json:
    data: Json = json.loads(path.read_text())
    return data


def panels(dashboard: Json) -> Iterator[Json]:
    """Every panel, including those inside collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


@dataclass(frozen=True)
class Query:
    """One PromQL expression and where it comes from, for readable failures."""

    dashboard: str
    where: str  # "panel 'Title' A", "variable cluster", "annotation 'Name'"
    expr: str
    instant: bool  # Grafana runs it as an instant query (stats, tables)
    kind: str  # "panel", "variable" or "annotation"
    label_values: tuple[str, str] | None = None  # (metric, label) for label_values()

    def __str__(self) -> str:
        return f"{self.dashboard}: {self.where}: {self.expr}"


LABEL_VALUES = re.compile(r"^label_values\(\s*(?P<metric>[^,]+?)\s*,\s*(?P<label>\w+)\s*\)$")


def queries(dashboard: Json) -> Iterator[Query]:
    name = dashboard["uid"]
    for panel in panels(dashboard):
        for t in panel.get("targets", []):
            yield Query(
                name,
                f"panel {panel['title']!r} {t['refId']}",
                t["expr"],
                instant=bool(t.get("instant")) and not t.get("range"),
                kind="panel",
            )
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        q = var["query"]
        text = q["query"] if isinstance(q, dict) else q
        m = LABEL_VALUES.match(text)
        assert m, f"{name}: variable {var['name']}: only label_values(metric, label) is used"
        yield Query(
            name,
            f"variable {var['name']}",
            m["metric"],
            instant=True,
            kind="variable",
            label_values=(m["metric"], m["label"]),
        )
    for anno in dashboard["annotations"]["list"]:
        if "expr" in anno:
            yield Query(name, f"annotation {anno['name']!r}", anno["expr"], False, "annotation")


#: Grafana's global variables as Grafana would fill them for a 1 s scrape interval and a
#: short time range (what the test Prometheus holds).
GRAFANA_GLOBALS = {
    "__rate_interval": "4s",
    "__interval": "1s",
    "__interval_ms": "1000",
    "__range": "1m",
    "__range_s": "60",
    "__range_ms": "60000",
}

VARIABLE = re.compile(r"\$\{(?P<braced>\w+)(?::\w+)?\}|\$(?P<plain>\w+)|\[\[(?P<old>\w+)\]\]")


def variables_used(expr: str) -> set[str]:
    return {m["braced"] or m["plain"] or m["old"] for m in VARIABLE.finditer(expr)}


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace ``$name`` / ``${name}`` as Grafana does; an unknown variable is an error."""
    known = {**GRAFANA_GLOBALS, **values}

    def one(m: re.Match[str]) -> str:
        name = m["braced"] or m["plain"] or m["old"]
        if name not in known:
            raise KeyError(f"unknown variable ${name} in {expr!r}")
        return known[name]

    return VARIABLE.sub(one, expr)
