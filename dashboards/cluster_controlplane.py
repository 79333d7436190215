"""The cluster detail's control-plane row: scrape targets, the 127.0.0.1 trap, CoreDNS spread."""

from __future__ import annotations

from dashboards.frame import ONE_CLUSTER
from dashboards.panels import (
    Board,
    bool_mappings,
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
)
from fleetwatch.common.metricnames import (
    CONTROLPLANE_LOCALHOST_ONLY,
    COREDNS_NODES,
    COREDNS_REPLICAS,
)

C = ONE_CLUSTER


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
