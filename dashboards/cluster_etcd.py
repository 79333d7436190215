"""The cluster detail's etcd row: quorum, members and leader of one cluster.

The API server's static pods give quorum and members; leader, raft term and database
size need etcd itself (``--config.file``), and the panels say so when it is not there.
The descriptions explain what the user sees and how to fix it, next to their queries.
"""

from __future__ import annotations

from dashboards.frame import ONE_CLUSTER
from dashboards.panels import (
    Board,
    bool_mappings,
    color_override,
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
    COLOR_OFFLINE,
    COLOR_ONLINE,
    COLOR_UNKNOWN,
)
from fleetwatch.common.metricnames import (
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

C = ONE_CLUSTER
#: What an etcd panel says when only the API server source is there (no leader, term, db).
NEEDS_DIRECT = "needs direct etcd (--config.file)"


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
