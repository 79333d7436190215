"""The fleet overview: every cluster's status at a glance, probe health, the storm guard.

Made for a wall screen: the top line carries the counts people look at from across the
room, the lines below explain them (which clusters, since when, why they fail) and the
last line is the watcher's own health. Each function below draws one line of panels
(``y`` is its top on Grafana's grid) and returns where the next line starts. The module is
longer than most because the panel descriptions, which are the dashboard's documentation
for its users, live next to their queries.
"""

from __future__ import annotations

from dashboards.frame import (
    ANY_CLUSTER,
    CLUSTER_LINK,
    CLUSTER_LINK_FROM_LABEL,
    UID_FLEET,
    cluster_variable,
    dashboard,
)
from dashboards.panels import (
    Board,
    Json,
    bargauge,
    bool_mappings,
    color_override,
    column,
    stat,
    state_timeline,
    table,
    target,
    targets,
    thresholds,
    timeseries,
)
from dashboards.status import (
    CLASS_COLUMN,
    COLOR_FAILING,
    COLOR_OFFLINE,
    COLOR_ONLINE,
    COLOR_UNKNOWN,
    STATUS_COLORS,
    STATUS_MAPPINGS,
    firing,
    last_failure,
)
from exporter.model import Reason
from fleetwatch.common.contract import (
    CLUSTERS_COUNT_RECORD,
    FAILING_RATIO_RECORD,
    PROBE_FAILING_ALERT,
    STATUS_CODE_RECORD,
    STATUS_CODES,
    STORM_ALERT,
    STORM_FRACTION,
    STORM_MIN_CLUSTERS,
    Status,
)
from fleetwatch.common.metricnames import (
    CLUSTER_INFO,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_DURATION,
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_LAST_SUCCESS,
    EXPORTER_CLUSTERS_DISCOVERED,
    EXPORTER_CYCLE_DURATION,
    EXPORTER_DISCOVERY_ERRORS,
    EXPORTER_LAST_CYCLE,
    EXPORTER_PROBE_INTERVAL,
)

F = ANY_CLUSTER
STATUS = f"max by (cluster) ({STATUS_CODE_RECORD}{{{F}}})"

#: 1 exporter down or absent, 2 exporter stalled (no cycle for 3 intervals), 0 watching.
#: absent() reacts at the first failed scrape; the alerts cover a restart of Prometheus.
WATCHER = (
    'max(ALERTS{alertname=~"FleetwatchExporterDown|FleetwatchExporterAbsent", '
    'alertstate="firing"})'
    f" or absent({EXPORTER_LAST_CYCLE})"
    f" or 2 * (max(time() - ({EXPORTER_LAST_CYCLE} > 0))"
    f" > bool 3 * max({EXPORTER_PROBE_INTERVAL}))"
    " or vector(0)"
)


def _count_status(status: Status) -> str:
    return f"count({STATUS} == {STATUS_CODES[status]}) or vector(0)"


def headline(b: Board, y: int) -> int:
    """The numbers a wall screen is looked at for: counts per status, the storm, the watcher."""
    b.add(
        stat(
            Status.ONLINE,
            "Clusters whose last probes succeed (status from the recording rule "
            f"{STATUS_CODE_RECORD}).",
            [target(_count_status(Status.ONLINE), Status.ONLINE, instant=True)],
            steps=thresholds((None, COLOR_ONLINE)),
        ),
        at=(0, y, 4, 4),
    )
    b.add(
        stat(
            Status.OFFLINE,
            "Clusters with at least N consecutive failed probes. Their apps are DEGRADED by "
            "the reactor; deployments to them are refused.",
            [target(_count_status(Status.OFFLINE), Status.OFFLINE, instant=True)],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_OFFLINE)),
        ),
        at=(4, y, 4, 4),
    )
    b.add(
        stat(
            Status.UNKNOWN,
            "Clusters never probed successfully, not probeable (kubeconfig reference is not "
            "a readable file), or without data.",
            [target(_count_status(Status.UNKNOWN), Status.UNKNOWN, instant=True)],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_UNKNOWN)),
        ),
        at=(8, y, 4, 4),
    )
    b.add(
        stat(
            "Failing, not yet OFFLINE",
            "Clusters whose latest probes fail but fewer than N in a row "
            f"(alert {PROBE_FAILING_ALERT}, which stays 10 min after the last failure so "
            "that a flapping cluster is one warning): they turn OFFLINE if it goes on.",
            [
                target(
                    f"count({firing(PROBE_FAILING_ALERT, F)}) or vector(0)",
                    "failing",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        at=(12, y, 4, 4),
    )
    b.add(
        stat(
            "Storm guard",
            f"{STORM_ALERT} fires when most of the fleet fails at once: the watcher itself "
            "(its network, its credentials) is the likely fault, so per-cluster OFFLINE "
            "notifications are inhibited and no cascade runs. Check the exporter first.",
            [target(f"max({firing(STORM_ALERT)}) or vector(0)", "storm", instant=True)],
            mappings=bool_mappings("STORM: check the watcher", "quiet", "purple", "green"),
        ),
        at=(16, y, 4, 4),
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
        at=(20, y, 4, 4),
    )
    return y + 4


def every_cluster(b: Board, y: int) -> int:
    """Every cluster's status word, each a link to its detail dashboard."""
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
        at=(0, y, 24, 8),
    )
    return y + 8


def status_history(b: Board, y: int) -> int:
    """When each cluster went OFFLINE and came back, beside the fleet's totals."""
    b.add(
        state_timeline(
            "Status history",
            "Status of each cluster over time: when it went OFFLINE and when it came back.",
            [target(STATUS, "{{cluster}}")],
            STATUS_MAPPINGS,
        ),
        at=(0, y, 12, 9),
    )
    by_status = [(f'sum({CLUSTERS_COUNT_RECORD}{{status="{s}"}})', s) for s in Status]
    b.add(
        timeseries(
            "Clusters by status (whole fleet)",
            f"From the recording rule {CLUSTERS_COUNT_RECORD}; counts the whole fleet "
            "(the cluster filter does not apply).",
            targets(*by_status),
            unit="none",
            stack=True,
            interpolation="stepAfter",
            overrides=[color_override(s, c) for s, c in STATUS_COLORS.items()],
        ),
        at=(12, y, 12, 9),
    )
    return y + 9


def _table_query(expr: str, ref: str) -> Json:
    return target(expr, ref=ref, instant=True, table=True)


def clusters_table(b: Board, y: int) -> int:
    """One row per cluster with its probe figures, and the failure reasons beside it."""
    b.add(
        table(
            "Clusters",
            "One row per cluster, OFFLINE first. 'Since last success' is empty for a cluster "
            "never probed successfully. 'Last failure' and 'Class': the reason while it fails; "
            "credentials: the API server refused fleetwatch's credential (401, 403) or TLS "
            "verification failed; unreachable: the rest. Click a name for its detail dashboard.",
            [
                _table_query(STATUS, "A"),
                _table_query(
                    f"time() - max by (cluster) ({CLUSTER_PROBE_LAST_SUCCESS}{{{F}}} > 0)",
                    "B",
                ),
                _table_query(
                    f"max by (cluster) ({CLUSTER_PROBE_CONSECUTIVE_FAILURES}{{{F}}})",
                    "C",
                ),
                _table_query(f"max by (cluster) ({CLUSTER_PROBE_DURATION}{{{F}}})", "D"),
                _table_query(f"max by (cluster, endpoint, source) ({CLUSTER_INFO}{{{F}}})", "E"),
                _table_query(last_failure(F), "F"),
            ],
            rename={
                "cluster": "Cluster",
                "Value #A": "Status",
                "Value #B": "Since last success",
                "Value #C": "Consecutive failures",
                "Value #D": "Last probe latency",
                "endpoint": "Endpoint",
                "source": "Kubeconfig",
                "reason": "Last failure",
                "class": "Class",
            },
            hide=["Value #E", "Value #F"],
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
                CLASS_COLUMN,
            ],
            sort_by="Status",
        ),
        at=(0, y, 16, 10),
    )
    b.add(
        bargauge(
            "Failure reasons (time range)",
            f"Failed probes by reason over the selected time range: {', '.join(Reason)} "
            "(not_ready: a readiness check such as etcd failed; credentials: the kubeconfig "
            "context gave none; proxy: its proxy refused or hung).",
            [
                target(
                    f"sum by (reason) (increase({CLUSTER_PROBE_FAILURES}{{{F}}}[$__range]))",
                    "{{reason}}",
                    instant=True,
                )
            ],
            unit="none",
        ),
        at=(16, y, 8, 10),
    )
    return y + 10


def probe_timing(b: Board, y: int) -> int:
    """The stalest and the slowest clusters over time."""
    b.add(
        timeseries(
            "Time since last successful probe (10 stalest)",
            "Seconds since each cluster's last successful probe; a healthy cluster stays "
            "under the probe interval.",
            [
                target(
                    f"topk(10, time() - max by (cluster) "
                    f"({CLUSTER_PROBE_LAST_SUCCESS}{{{F}}} > 0))",
                    "{{cluster}}",
                )
            ],
            unit="s",
        ),
        at=(0, y, 12, 8),
    )
    b.add(
        timeseries(
            "Probe latency (10 slowest)",
            "Duration of each cluster's last probe (readiness endpoint, authenticated, within "
            "the probe timeout).",
            [
                target(
                    f"topk(10, max by (cluster) ({CLUSTER_PROBE_DURATION}{{{F}}}))",
                    "{{cluster}}",
                )
            ],
            unit="s",
        ),
        at=(12, y, 12, 8),
    )
    return y + 8


def probe_failures(b: Board, y: int) -> int:
    """Failures in a row, by reason, and the failing share that the storm guard watches."""
    b.add(
        timeseries(
            "Consecutive failures",
            "Failed probes in a row per cluster (reset by a success); the cluster is OFFLINE "
            "from the failure threshold N on. Only clusters with failures are drawn.",
            [
                target(
                    f"max by (cluster) ({CLUSTER_PROBE_CONSECUTIVE_FAILURES}{{{F}}}) > 0",
                    "{{cluster}}",
                )
            ],
            unit="none",
            interpolation="stepAfter",
        ),
        at=(0, y, 8, 8),
    )
    b.add(
        timeseries(
            "Probe failures by reason",
            "Failed probes per reason, counted over each point's rate interval.",
            [
                target(
                    f"sum by (reason) "
                    f"(increase({CLUSTER_PROBE_FAILURES}{{{F}}}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
        ),
        at=(8, y, 8, 8),
    )
    b.add(
        timeseries(
            "Share of the fleet failing (storm guard)",
            "Share of the probeable clusters failing their probes (recording rule "
            f"{FAILING_RATIO_RECORD}). At the storm fraction (dashed "
            f"line: the default {STORM_FRACTION * 100:g} %, `fleetwatch rules --storm.fraction`), "
            f"with at least {STORM_MIN_CLUSTERS} probeable clusters, {STORM_ALERT} fires and "
            "per-cluster OFFLINE notifications are held back: no cascade runs.",
            [target(f"max({FAILING_RATIO_RECORD})", "failing share")],
            unit="percentunit",
            steps=thresholds((None, COLOR_ONLINE), (STORM_FRACTION, "purple")),
            threshold_style="dashed",
        ),
        at=(16, y, 8, 8),
    )
    return y + 8


def watcher_health(b: Board, y: int) -> int:
    """The exporter's own health: cycle duration, clusters found, discovery errors."""
    b.add(
        timeseries(
            "Exporter: probe cycle duration and clusters",
            "Duration of the last probe cycle and the number of clusters found in the kubeconfigs.",
            targets(
                (f"max({EXPORTER_CYCLE_DURATION})", "cycle duration"),
                (f"max({EXPORTER_CLUSTERS_DISCOVERED})", "clusters discovered"),
            ),
            unit="s",
            overrides=[
                column("clusters discovered", ("unit", "none"), ("custom.axisPlacement", "right"))
            ],
        ),
        at=(0, y, 12, 7),
    )
    b.add(
        timeseries(
            "Exporter: discovery errors",
            "Kubeconfig files or contexts that could not be used (missing, unreadable, "
            "invalid, context pointing at a missing cluster or user). The exporter logs the "
            "file and the reason.",
            [
                target(
                    f"sum(increase({EXPORTER_DISCOVERY_ERRORS}[$__rate_interval]))",
                    "discovery errors",
                )
            ],
            unit="none",
            bars=True,
        ),
        at=(12, y, 12, 7),
    )
    return y + 7


def fleet_overview() -> Json:
    """The dashboard, its lines of panels stacked top to bottom."""
    b = Board()
    y = headline(b, 0)
    y = every_cluster(b, y)
    y = status_history(b, y)
    y = clusters_table(b, y)
    y = probe_timing(b, y)
    y = probe_failures(b, y)
    watcher_health(b, y)
    return dashboard(
        UID_FLEET,
        "fleetwatch / Fleet overview",
        "Every cluster's status at a glance, probe health and the storm guard (wall screen).",
        b,
        [cluster_variable(multi=True)],
        F,
    )
