"""Every PromQL expression of the dashboards runs on a real Prometheus.

Panels, the cluster variable and the annotations are sent as Grafana sends them (instant
or range query, variables filled in); a Prometheus error would be an error box on a
wall screen, so any one fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dashboards_grafana import Json, Query, dashboard_files, load, queries, substitute
from dashboards_prometheus import Prometheus

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
def test_every_expression_is_valid_promql(empty_prometheus: Prometheus, name: str) -> None:
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
