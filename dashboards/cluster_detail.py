"""The cluster detail: one cluster's probes, etcd quorum and leader, control plane, CoreDNS.

Three Grafana rows, one function each (``y`` is the row's top on Grafana's grid; each
returns where the next row starts): the status and probes row here, the etcd row in
``dashboards.cluster_etcd``, the control-plane row in ``dashboards.cluster_controlplane``.
"""

from __future__ import annotations

from dashboards.cluster_controlplane import control_plane
from dashboards.cluster_etcd import etcd
from dashboards.frame import ONE_CLUSTER, UID_CLUSTER, annotation, cluster_variable, dashboard
from dashboards.panels import (
    Board,
    Json,
    bool_mappings,
    column,
    stat,
    state_timeline,
    target,
    targets,
    thresholds,
    timeseries,
)
from dashboards.status import (
    COLOR_FAILING,
    COLOR_ONLINE,
    COLOR_UNKNOWN,
    STATUS_MAPPINGS,
)
from exporter.model import Reason
from fleetwatch.common.contract import STATUS_CODE_RECORD
from fleetwatch.common.metricnames import (
    CLUSTER_INFO,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_DURATION,
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_LAST_SUCCESS,
    CLUSTER_PROBE_SUCCESS,
    CLUSTER_PROBEABLE,
)

C = ONE_CLUSTER


def status_and_probes(b: Board, y: int) -> int:
    """The status, the last probe's figures, and their history."""
    b.row("Status and probes", y)
    b.add(
        stat(
            "Status",
            f"From the recording rule {STATUS_CODE_RECORD}.",
            [target(f"max({STATUS_CODE_RECORD}{{{C}}})", "status", instant=True)],
            mappings=STATUS_MAPPINGS,
        ),
        at=(0, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Since last successful probe",
            "Empty ('never') when the cluster was never probed successfully.",
            [
                target(
                    f"time() - max({CLUSTER_PROBE_LAST_SUCCESS}{{{C}}} > 0)",
                    "since",
                    instant=True,
                )
            ],
            unit="s",
            color_mode="value",
            decimals=0,
            no_value="never",
        ),
        at=(4, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Consecutive failures",
            "Failed probes in a row; OFFLINE from the failure threshold N on.",
            [
                target(
                    f"max({CLUSTER_PROBE_CONSECUTIVE_FAILURES}{{{C}}})",
                    "failures",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        at=(8, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Last probe latency",
            "Duration of the last probe.",
            [
                target(
                    f"max({CLUSTER_PROBE_DURATION}{{{C}}})",
                    "latency",
                    instant=True,
                )
            ],
            unit="s",
            color_mode="value",
            decimals=3,
        ),
        at=(12, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Probeable",
            "0 when the cluster's kubeconfig reference is not a readable file (for example a "
            "Secret name given to the reactor): it is never probed and stays UNKNOWN.",
            [target(f"max({CLUSTER_PROBEABLE}{{{C}}})", "probeable", instant=True)],
            mappings=bool_mappings("yes", "no: not a readable kubeconfig", "green", COLOR_UNKNOWN),
        ),
        at=(16, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Endpoint",
            "API server endpoint and the kubeconfig file the cluster was found in.",
            [
                target(
                    f"max by (endpoint, source) ({CLUSTER_INFO}{{{C}}})",
                    "{{endpoint}} ({{source}})",
                    instant=True,
                )
            ],
            color_mode="none",
            text_mode="name",
        ),
        at=(20, y + 1, 4, 4),
    )
    b.add(
        state_timeline(
            "Status and probe history",
            "Top: the status from the rules. Bottom: the result of each probe.",
            [
                target(f"max({STATUS_CODE_RECORD}{{{C}}})", "status", "A"),
                target(f"max({CLUSTER_PROBE_SUCCESS}{{{C}}})", "last probe", "B"),
            ],
            STATUS_MAPPINGS,
            overrides=[
                column("last probe", ("mappings", bool_mappings("probe ok", "probe failed")))
            ],
        ),
        at=(0, y + 5, 24, 6),
    )
    b.add(
        timeseries(
            "Probe latency and consecutive failures",
            "Duration of the last probe (left axis) and failed probes in a row (right axis).",
            targets(
                (f"max({CLUSTER_PROBE_DURATION}{{{C}}})", "probe latency"),
                (
                    f"max({CLUSTER_PROBE_CONSECUTIVE_FAILURES}{{{C}}})",
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
        at=(0, y + 11, 12, 8),
    )
    b.add(
        timeseries(
            "Probe failures by reason",
            f"Failed probes per reason ({', '.join(Reason)}); not_ready means a readiness "
            "check such as etcd failed, credentials that the kubeconfig context gave none, "
            "proxy that its proxy refused or hung.",
            [
                target(
                    f"sum by (reason) (increase({CLUSTER_PROBE_FAILURES}"
                    f"{{{C}}}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            unit="none",
            bars=True,
            stack=True,
        ),
        at=(12, y + 11, 12, 8),
    )

    return y + 19


def cluster_detail() -> Json:
    """The dashboard, its rows stacked top to bottom."""
    b = Board()
    y = status_and_probes(b, 0)
    y = etcd(b, y)
    control_plane(b, y)
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
