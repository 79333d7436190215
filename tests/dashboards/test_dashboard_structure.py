"""The dashboards import into Grafana 10+ as they are, and hold together.

Checked without Grafana (none can be installed here): the fields Grafana needs to import a
dashboard, one datasource variable behind every query, units everywhere, the status colours,
the links between the dashboards, and that the committed JSON is what ``python -m dashboards``
generates.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.common.contract import STATUS_CODES, STORM_ALERT, StatusAlert
from tests.helpers.dashboards_grafana import (
    DASHBOARDS,
    GRAFANA_GLOBALS,
    Json,
    dashboard_files,
    load,
    panels,
    queries,
    regenerate,
    variables_used,
)

DS_REF = {"type": "prometheus", "uid": "${datasource}"}
EXPECTED = {
    "fleet-overview.json": "fleetwatch-fleet-overview",
    "cluster-detail.json": "fleetwatch-cluster-detail",
    "reactor.json": "fleetwatch-reactor",
}
FILES = dashboard_files()


def ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_the_three_dashboards_are_there_with_stable_uids() -> None:
    assert {p.name: load(p)["uid"] for p in FILES} == EXPECTED


def test_committed_files_equal_the_generated_ones(tmp_path: Path) -> None:
    result = regenerate("--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    generated = sorted(tmp_path.iterdir())
    assert [p.name for p in generated] == sorted(EXPECTED)
    for path in generated:
        committed = (DASHBOARDS / path.name).read_bytes()
        assert committed == path.read_bytes(), f"{path.name} is stale: run python -m dashboards"
    assert regenerate("--check").returncode == 0
    (tmp_path / "reactor.json").write_text("{}\n")
    stale = regenerate("--check", "--out", str(tmp_path))
    assert stale.returncode == 1
    assert "reactor.json" in stale.stderr and "fleet-overview.json" not in stale.stderr


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_fields_grafana_needs_to_import(path: Path) -> None:
    d = load(path)
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 38  # Grafana 10
    assert d["title"].startswith("fleetwatch / ")
    assert d["id"] is None, "an exported dashboard carries no database id"
    assert "fleetwatch" in d["tags"]
    assert d["time"] and d["refresh"]
    [ds_input] = d["__inputs"]
    assert ds_input["type"] == "datasource" and ds_input["pluginId"] == "prometheus"
    required = {(r["type"], r["id"]) for r in d["__requires"]}
    assert ("grafana", "grafana") in required and ("datasource", "prometheus") in required
    used = {p["type"] for p in panels(d) if p["type"] != "row"}
    assert {k for t, k in required if t == "panel"} == used
    grafana = next(r for r in d["__requires"] if r["id"] == "grafana")
    assert int(grafana["version"].split(".")[0]) >= 10


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_every_panel_queries_the_datasource_variable_with_a_unit(path: Path) -> None:
    d = load(path)
    seen_ids: set[int] = set()
    for panel in panels(d):
        assert panel["id"] not in seen_ids, f"duplicate panel id {panel['id']}"
        seen_ids.add(panel["id"])
        if panel["type"] == "row":
            continue
        title = panel["title"]
        assert title and panel.get("description"), f"panel {panel['id']} needs title and why"
        assert panel["datasource"] == DS_REF, title
        assert panel["targets"], f"{title}: no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), f"{title}: duplicate refId"
        for t in panel["targets"]:
            assert t["datasource"] == DS_REF, title
            assert t["expr"].strip(), f"{title}: empty expression"
        unit = panel["fieldConfig"]["defaults"].get("unit")
        assert unit, f"{title}: no unit"


def walk_datasources(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "datasource":
                yield f"{path}.{k}", v
            yield from walk_datasources(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk_datasources(v, f"{path}[{i}]")


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_no_hard_coded_datasource(path: Path) -> None:
    d = load(path)
    refs = list(walk_datasources(d))
    assert refs
    for where, ref in refs:
        builtin = ref == {"type": "grafana", "uid": "-- Grafana --"}
        assert ref == DS_REF or builtin, f"{where}: {ref!r}"
    [ds_var] = [v for v in d["templating"]["list"] if v["name"] == "datasource"]
    assert ds_var["type"] == "datasource" and ds_var["query"] == "prometheus"
    # The only datasource value in the file is the import placeholder.
    assert ds_var["current"]["value"] == "${DS_PROMETHEUS}"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_cluster_variable_and_every_variable_defined(path: Path) -> None:
    d = load(path)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    cluster = variables["cluster"]
    assert cluster["type"] == "query" and cluster["datasource"] == DS_REF
    assert cluster["definition"] == "label_values(fleetwatch_cluster_info, cluster)"
    for q in queries(d):
        unknown = variables_used(q.expr) - set(variables) - set(GRAFANA_GLOBALS)
        assert not unknown, f"{q}: undefined {unknown}"
    selector = 'cluster="$cluster"' if not cluster["multi"] else 'cluster=~"$cluster"'
    assert any(selector in q.expr for q in queries(d))
    if cluster["multi"]:
        assert cluster["includeAll"] and cluster["allValue"] == ".*"
        assert 'cluster="$cluster"' not in path.read_text(), "multi-value needs =~"


def status_mapping(d: Json) -> dict[str, str]:
    for panel in panels(d):
        for m in panel.get("fieldConfig", {}).get("defaults", {}).get("mappings", []):
            opts = m.get("options", {})
            if m["type"] == "value" and "2" in opts and opts["2"]["text"] == "OFFLINE":
                return {k: v["text"] for k, v in opts.items()}
    return {}


@pytest.mark.parametrize("name", ["fleet-overview.json", "cluster-detail.json"])
def test_status_codes_are_named_and_coloured(name: str) -> None:
    path = next(p for p in FILES if p.name == name)
    assert status_mapping(load(path)) == {str(c): s for s, c in STATUS_CODES.items()}
    assert "cluster:fleetwatch_status:code" in path.read_text()


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_links_between_dashboards_and_status_annotations(path: Path) -> None:
    d = load(path)
    [link] = d["links"]
    assert link["type"] == "dashboards" and link["tags"] == ["fleetwatch"]
    assert link["includeVars"] and link["keepTime"]
    names = {a["name"]: a for a in d["annotations"]["list"]}
    offline = names["Cluster OFFLINE"]
    assert offline["enable"] and offline["datasource"] == DS_REF
    assert f'alertname="{StatusAlert.OFFLINE}"' in offline["expr"]
    assert f'alertname="{STORM_ALERT}"' in names["Probe storm (watcher suspect)"]["expr"]


def test_fleet_overview_links_each_cluster_to_its_detail() -> None:
    d = load(next(p for p in FILES if p.name == "fleet-overview.json"))
    urls = [
        link["url"]
        for panel in panels(d)
        for link in [
            *panel["fieldConfig"]["defaults"].get("links", []),
            *(
                prop["value"][0]
                for o in panel["fieldConfig"]["overrides"]
                for prop in o["properties"]
                if prop["id"] == "links"
            ),
        ]
    ]
    assert len(urls) == 2
    for url in urls:
        assert url.startswith(f"/d/{EXPECTED['cluster-detail.json']}?var-cluster=")
        assert "${datasource:queryparam}" in url and "${__url_time_range}" in url


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_layout_fits_the_grid_without_overlap(path: Path) -> None:
    boxes: list[tuple[str, Json]] = []
    for panel in load(path)["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, panel["title"]
        for other, o in boxes:
            overlap = (
                g["x"] < o["x"] + o["w"]
                and o["x"] < g["x"] + g["w"]
                and g["y"] < o["y"] + o["h"]
                and o["y"] < g["y"] + g["h"]
            )
            assert not overlap, f"{panel['title']!r} overlaps {other!r}"
        boxes.append((panel["title"], g))
