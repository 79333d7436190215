"""The cluster detail: one cluster's probes, etcd quorum and leader, control plane, CoreDNS.

Three Grafana rows, one function each (``y`` is the row's top on Grafana's grid; each
returns where the next row starts). The module is longer than most because the etcd and
control-plane panels explain in their descriptions what the user sees and how to fix it,
and those texts belong next to their queries.
"""

from __future__ import annotations

from common.contract import STATUS_CODE_RECORD
from common.metricnames import (
    CLUSTER_INFO,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_DURATION,
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_LAST_SUCCESS,
    CLUSTER_PROBE_SUCCESS,
    CLUSTER_PROBEABLE,
    CONTROLPLANE_LOCALHOST_ONLY,
    COREDNS_NODES,
    COREDNS_REPLICAS,
    ETCD_DB_SIZE,
    ETCD_HAS_LEADER,
    ETCD_MEMBER_HEALTHY,
    ETCD_MEMBERS,
    ETCD_MEMBERS_HEALTHY,
    ETCD_QUORUM_SIZE,
    ETCD_QUORUM_STATE,
    ETCD_RAFT_TERM,
    ETCD_SOURCE_INFO,
)
from dashboards.frame import ONE_CLUSTER, UID_CLUSTER, annotation, cluster_variable, dashboard
from dashboards.panels import (
    Board,
    Json,
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
    COLOR_FAILING,
    COLOR_OFFLINE,
    COLOR_ONLINE,
    COLOR_UNKNOWN,
    STATUS_MAPPINGS,
)
from exporter.model import Reason

C = ONE_CLUSTER
#: What an etcd panel says when only the API server source is there (no leader, term, db).
NEEDS_DIRECT = "needs direct etcd (--config.file)"


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


def etcd(b: Board, y: int) -> int:
    """Quorum, members and leader; leader, raft term and db size need direct etcd."""
    b.row("etcd", y)
    b.add(
        stat(
            "Quorum",
            "healthy: one member can be lost; no_fault_tolerance: losing one more member "
            "loses quorum; lost: etcd cannot commit, the API server cannot write.",
            [
                target(
                    f"max by (state) ({ETCD_QUORUM_STATE}{{{C}}}) == 1",
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
        at=(0, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Members healthy / quorum / members",
            "Healthy members, members needed for quorum (floor(n/2)+1), and members. An even "
            "member count adds no fault tolerance.",
            [
                target(f"max({ETCD_MEMBERS_HEALTHY}{{{C}}})", "healthy", "A", instant=True),
                target(f"max({ETCD_QUORUM_SIZE}{{{C}}})", "quorum", "B", instant=True),
                target(f"max({ETCD_MEMBERS}{{{C}}})", "members", "C", instant=True),
            ],
            color_mode="value",
            text_mode="value_and_name",
        ),
        at=(4, y + 1, 5, 4),
    )
    b.add(
        stat(
            "Leader",
            "Whether etcd reports a leader. Without one nothing is committed.",
            [target(f"max({ETCD_HAS_LEADER}{{{C}}})", "leader", instant=True)],
            mappings=bool_mappings("leader", "NO LEADER"),
            no_value=NEEDS_DIRECT,
        ),
        at=(9, y + 1, 3, 4),
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
                    f"max by (source) ({ETCD_SOURCE_INFO}{{{C}}})",
                    "{{source}}",
                    instant=True,
                )
            ],
            color_mode="none",
            text_mode="name",
            no_value="no etcd data",
        ),
        at=(12, y + 1, 3, 4),
    )
    b.add(
        stat(
            "Leader changes (time range)",
            "Raft term changes over the selected range: each one is at least one election. "
            "Frequent elections point at slow disks or a flaky network between members.",
            [
                target(
                    f"max(changes({ETCD_RAFT_TERM}{{{C}}}[$__range]))",
                    "changes",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (3, COLOR_FAILING), (10, COLOR_OFFLINE)),
            color_mode="value",
            no_value=NEEDS_DIRECT,
        ),
        at=(15, y + 1, 4, 4),
    )
    b.add(
        stat(
            "Largest member db",
            "Largest etcd database of the members (the default quota is 2 GiB; writes stop "
            "when it is reached).",
            [target(f"max({ETCD_DB_SIZE}{{{C}}})", "db size", instant=True)],
            unit="bytes",
            color_mode="value",
            steps=thresholds(
                (None, COLOR_ONLINE), (1.5 * 2**30, COLOR_FAILING), (1.9 * 2**30, COLOR_OFFLINE)
            ),
            no_value=NEEDS_DIRECT,
        ),
        at=(19, y + 1, 5, 4),
    )
    b.add(
        timeseries(
            "Members healthy vs quorum",
            "When 'healthy' touches 'quorum' there is no fault tolerance left; below it, "
            "quorum is lost.",
            targets(
                (f"max({ETCD_MEMBERS_HEALTHY}{{{C}}})", "healthy"),
                (f"max({ETCD_QUORUM_SIZE}{{{C}}})", "quorum"),
                (f"max({ETCD_MEMBERS}{{{C}}})", "members"),
            ),
            unit="none",
            interpolation="stepAfter",
            overrides=[
                color_override("healthy", COLOR_ONLINE),
                color_override("quorum", COLOR_OFFLINE),
                color_override("members", "blue"),
            ],
        ),
        at=(0, y + 5, 8, 8),
    )
    b.add(
        state_timeline(
            "Member health",
            "Health of each etcd member over time.",
            [target(f"max by (member) ({ETCD_MEMBER_HEALTHY}{{{C}}})", "{{member}}")],
            bool_mappings("healthy", "unhealthy"),
        ),
        at=(8, y + 5, 8, 8),
    )
    b.add(
        timeseries(
            "DB size per member and leader changes",
            "etcd database size of each member (left) and raft term changes per rate "
            "interval (right).",
            [
                target(f"max by (member) ({ETCD_DB_SIZE}{{{C}}})", "{{member}}", "A"),
                target(
                    f"max(changes({ETCD_RAFT_TERM}{{{C}}}[$__rate_interval]))",
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
        at=(16, y + 5, 8, 8),
    )

    return y + 13


def control_plane(b: Board, y: int) -> int:
    """Control-plane scrape targets, the 127.0.0.1 trap, and how CoreDNS is spread."""
    b.row("Control plane and CoreDNS", y)
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
        at=(0, y + 1, 6, 4),
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
                    f"sum({CONTROLPLANE_LOCALHOST_ONLY}{{{C}}}) or vector(0)",
                    "localhost only",
                    instant=True,
                )
            ],
            steps=thresholds((None, COLOR_ONLINE), (1, COLOR_FAILING)),
        ),
        at=(6, y + 1, 4, 4),
    )
    b.add(
        stat(
            "CoreDNS replicas / nodes",
            "CoreDNS replicas and the distinct nodes they run on. All replicas on one node "
            "make DNS a single point of failure.",
            [
                target(f"max({COREDNS_REPLICAS}{{{C}}})", "replicas", "A", instant=True),
                target(f"max({COREDNS_NODES}{{{C}}})", "nodes", "B", instant=True),
            ],
            steps=thresholds((None, COLOR_OFFLINE), (2, COLOR_ONLINE)),
            color_mode="value",
            text_mode="value_and_name",
            no_value="no CoreDNS data",
        ),
        at=(10, y + 1, 6, 4),
    )
    b.add(
        timeseries(
            "CoreDNS spread",
            "Replicas and distinct nodes over time; 'nodes' at 1 with more than one replica "
            "means one node failure takes DNS down.",
            targets(
                (f"max({COREDNS_REPLICAS}{{{C}}})", "replicas"),
                (f"max({COREDNS_NODES}{{{C}}})", "nodes"),
            ),
            unit="none",
            interpolation="stepAfter",
        ),
        at=(16, y + 1, 8, 8),
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
        at=(0, y + 5, 10, 8),
    )
    b.add(
        table(
            "Components bound to 127.0.0.1",
            "Control-plane components reachable only on their own node. Prometheus reports "
            "them down although they run; the fix is in the Bound to 127.0.0.1 panel's "
            "description and in the alert.",
            [
                target(
                    f"max by (component, node) ({CONTROLPLANE_LOCALHOST_ONLY}{{{C}}}) == 1",
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
        at=(10, y + 5, 6, 8),
    )
    return y + 13


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
