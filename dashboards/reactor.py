"""The reactor dashboard: apps by status, cascades and restores, the gate, notifications,
and the Flux and Argo CD objects paused with outages (``dashboards.reactor_cd``).

Each function below draws one line of panels (``y`` is its top on Grafana's grid) and
returns where the next line starts. The "time since last notification" thresholds follow
the shipped Alertmanager route's ``repeat_interval``, read from alerts/alertmanager.yml
when the dashboard is built, so that they are not a second copy of it.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from dashboards.frame import ANY_CLUSTER, UID_REACTOR, cluster_variable, dashboard
from dashboards.panels import (
    Board,
    Json,
    color_override,
    stat,
    target,
    targets,
    thresholds,
    timeseries,
)
from dashboards.reactor_cd import cd
from dashboards.status import COLOR_FAILING, COLOR_OFFLINE, COLOR_ONLINE, STATUS_COLORS
from fleetwatch.common.contract import CLUSTERS_COUNT_RECORD, StatusAlert
from fleetwatch.common.metricnames import (
    REACTOR_APPS,
    REACTOR_APPS_DEGRADED,
    REACTOR_APPS_RESTORED,
    REACTOR_CLUSTERS,
    REACTOR_DEPLOYMENTS,
    REACTOR_DEPLOYMENTS_REFUSED,
    REACTOR_LAST_NOTIFICATION,
    REACTOR_NOTIFICATIONS,
    REACTOR_OUTAGES_CLOSED,
    REACTOR_OUTAGES_OPENED,
    total,
)
from reactor.statemachine import CLUSTER_OFFLINE, AppStatus

ALERTMANAGER_YML = Path(__file__).resolve().parent.parent / "alerts" / "alertmanager.yml"

APP_COLORS: dict[AppStatus, str] = {
    AppStatus.DEPLOYED: COLOR_ONLINE,
    AppStatus.DEGRADED: COLOR_OFFLINE,
    AppStatus.PENDING: "blue",
}
APP_DESCRIPTIONS: dict[AppStatus, str] = {
    AppStatus.DEPLOYED: "Apps running on their cluster.",
    AppStatus.DEGRADED: f"Apps on a cluster that went OFFLINE (reason {CLUSTER_OFFLINE}, "
    "restored when it comes back) or reported broken (never restored automatically).",
    AppStatus.PENDING: "Apps created or reassigned, not deployed yet.",
}

#: Since the reactor's last notification: the expression of the stat and of the graph.
SINCE_LAST_NOTIFICATION = f"time() - max({REACTOR_LAST_NOTIFICATION} > 0)"


def reactor_repeat_seconds(path: Path = ALERTMANAGER_YML) -> int:
    """The shipped route's repeat_interval for the ONLINE status alert, in seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    for route in yaml.safe_load(path.read_text())["route"]["routes"]:
        if any(StatusAlert.ONLINE in m for m in route.get("matchers", [])):
            text = str(route["repeat_interval"])
            return int(text[:-1]) * units[text[-1]]
    raise ValueError(f"{path}: no route for {StatusAlert.ONLINE}")


def _inc(metric: str, window: str = "$__rate_interval") -> str:
    return f"sum(increase({metric}[{window}]))"


def headline(b: Board, y: int, repeat_s: int) -> int:
    """Apps per status, refusals, and whether notifications still arrive."""
    for i, (status, color) in enumerate(APP_COLORS.items()):
        degraded = status == AppStatus.DEGRADED
        b.add(
            stat(
                f"Apps {status}",
                APP_DESCRIPTIONS[status],
                [
                    target(
                        f'sum({REACTOR_APPS}{{status="{status}"}})',
                        status,
                        instant=True,
                    )
                ],
                steps=thresholds((None, COLOR_ONLINE), (1, color))
                if degraded
                else thresholds((None, color)),
                color_mode="background" if degraded else "value",
                no_value="reactor not scraped",
            ),
            at=(i * 4, y, 4, 4),
        )
    b.add(
        stat(
            "Deployments refused (time range)",
            "POST /deployments and reassignments refused with HTTP 409 because the target "
            "cluster is OFFLINE.",
            [
                target(
                    _inc(total(REACTOR_DEPLOYMENTS_REFUSED), "$__range"),
                    "refused",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
            decimals=0,
        ),
        at=(12, y, 6, 4),
    )
    b.add(
        stat(
            "Since last notification",
            "Time since Alertmanager last delivered a notification. While any cluster is "
            f"ONLINE, Alertmanager repeats {StatusAlert.ONLINE} every repeat_interval "
            f"({repeat_s // 60}m in alerts/alertmanager.yml): orange after two missed "
            f"repeats ({2 * repeat_s // 60}m), red after {6 * repeat_s // 60}m, means the "
            "route to the reactor is broken.",
            [target(SINCE_LAST_NOTIFICATION, "since", instant=True)],
            unit="s",
            decimals=0,
            color_mode="value",
            no_value="never",
            steps=thresholds(
                (None, COLOR_ONLINE), (2 * repeat_s, COLOR_FAILING), (6 * repeat_s, COLOR_OFFLINE)
            ),
        ),
        at=(18, y, 6, 4),
    )
    return y + 4


def apps_and_clusters(b: Board, y: int) -> int:
    """Apps by status, and clusters by status as the reactor and the rules see them."""
    b.add(
        timeseries(
            "Apps by status",
            "Apps the reactor tracks, by status.",
            [target(f"sum by (status) ({REACTOR_APPS})", "{{status}}")],
            unit="none",
            stack=True,
            interpolation="stepAfter",
            overrides=[color_override(s, c) for s, c in APP_COLORS.items()],
        ),
        at=(0, y, 12, 8),
    )
    b.add(
        timeseries(
            "Clusters by status: reactor vs rules",
            "Solid: the reactor's view (from Alertmanager notifications). Dashed: the rules' "
            "view in Prometheus. A lasting gap means notifications are not arriving (clusters "
            "added by hand with POST /clusters show only on the reactor's side).",
            [
                target(f"sum by (status) ({REACTOR_CLUSTERS})", "reactor {{status}}", "A"),
                target(f"sum by (status) ({CLUSTERS_COUNT_RECORD})", "rules {{status}}", "B"),
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
        at=(12, y, 12, 8),
    )
    return y + 8


def cascades_and_restores(b: Board, y: int) -> int:
    """Outages opened and closed; apps degraded by them and restored."""
    b.add(
        timeseries(
            "Cascades and restores: outages",
            "Outages opened (a cluster that had been ONLINE went OFFLINE) and closed (it "
            "came back ONLINE).",
            targets(
                (_inc(total(REACTOR_OUTAGES_OPENED)), "outages opened"),
                (_inc(total(REACTOR_OUTAGES_CLOSED)), "outages closed"),
            ),
            unit="none",
            bars=True,
            overrides=[
                color_override("outages opened", COLOR_OFFLINE),
                color_override("outages closed", COLOR_ONLINE),
            ],
        ),
        at=(0, y, 12, 8),
    )
    b.add(
        timeseries(
            "Cascades and restores: apps",
            "Apps degraded by a cascade and apps restored when their cluster came back. Only "
            "the apps an outage degraded are restored.",
            targets(
                (_inc(total(REACTOR_APPS_DEGRADED)), "apps degraded"),
                (_inc(total(REACTOR_APPS_RESTORED)), "apps restored"),
            ),
            unit="none",
            bars=True,
            overrides=[
                color_override("apps degraded", COLOR_OFFLINE),
                color_override("apps restored", COLOR_ONLINE),
            ],
        ),
        at=(12, y, 12, 8),
    )
    return y + 8


def gate_and_notifications(b: Board, y: int) -> int:
    """What the deployment gate let through, and what came in from Alertmanager."""
    b.add(
        timeseries(
            "Deployments and gate refusals",
            "Deployments accepted and refused by the gate (HTTP 409: target cluster OFFLINE).",
            targets(
                (_inc(total(REACTOR_DEPLOYMENTS)), "deployments"),
                (_inc(total(REACTOR_DEPLOYMENTS_REFUSED)), "refused (409)"),
            ),
            unit="none",
            bars=True,
            overrides=[
                color_override("deployments", "blue"),
                color_override("refused (409)", COLOR_FAILING),
            ],
        ),
        at=(0, y, 12, 8),
    )
    b.add(
        timeseries(
            "Notifications by outcome",
            "Alertmanager notifications: applied, rejected (400, not a v4 webhook), "
            "unauthorized (401, wrong or missing token), error (5xx, Alertmanager retries).",
            [
                target(
                    "sum by (outcome) "
                    f"(increase({total(REACTOR_NOTIFICATIONS)}[$__rate_interval]))",
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
        at=(12, y, 12, 8),
    )
    return y + 8


def notification_age(b: Board, y: int, repeat_s: int) -> int:
    """Time since the last notification, drawn against the route's repeat_interval."""
    b.add(
        timeseries(
            "Time since last notification",
            "Grows between notifications and drops at each one; while a cluster is ONLINE "
            f"it should not outgrow Alertmanager's repeat_interval ({repeat_s // 60}m shipped).",
            [target(SINCE_LAST_NOTIFICATION, "since last notification")],
            unit="s",
        ),
        at=(0, y, 24, 7),
    )
    return y + 7


def reactor() -> Json:
    """The dashboard, its lines of panels stacked top to bottom."""
    repeat_s = reactor_repeat_seconds()
    b = Board()
    y = headline(b, 0, repeat_s)
    y = apps_and_clusters(b, y)
    y = cascades_and_restores(b, y)
    y = gate_and_notifications(b, y)
    y = notification_age(b, y, repeat_s)
    cd(b, y)
    return dashboard(
        UID_REACTOR,
        "fleetwatch / Reactor",
        "The reactor: apps by status, cascades and restores, the deployment gate, "
        "Alertmanager notifications, Flux and Argo CD objects paused by outages.",
        b,
        [cluster_variable(multi=True)],
        ANY_CLUSTER,
    )
