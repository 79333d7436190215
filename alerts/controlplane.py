"""Alert rules for etcd quorum, the control plane's localhost trap and CoreDNS spread.

``alerts.rules`` appends ``rule_groups()`` to the rules it renders
(alerts/fleetwatch.rules.yml). Names follow the etcd and kubernetes mixins (etcdNoLeader,
etcdInsufficientMembers, etcdHighNumberOfLeaderChanges, ...) with our ``Fleet`` prefix.

Every expression aggregates ``by (cluster)`` so that an HA pair of exporters yields one alert
per cluster, not one per exporter. "Bad" needs every exporter to agree (``min`` of a bad
flag, ``max`` of a good one), as in the status rules: one exporter's own network trouble
must not page for a cluster the other exporter sees fine.

The series come from ``exporter/controlplane/check.py`` and
``exporter/controlplane/etcd_client.py``. The exporter holds each value for a whole probe
cycle (default 300 s), so ``for:`` below counts Prometheus evaluations of a reading that is
already a probe's verdict; the etcd client re-asks a member that answers but reports
unhealthy for up to 3.5 s, so a leader election (/health 503 for a second or two) does not
read as a lost quorum in the first place.

Severity and ``for:`` of each rule are justified in the comment above it (WHY holds the
same text, for renderers that write comments into the rules file).
"""

from __future__ import annotations

from typing import Any

from fleetwatch.common.metricnames import (
    CONTROLPLANE_LOCALHOST_ONLY,
    COREDNS_NODES,
    COREDNS_REPLICAS,
    ETCD_HAS_LEADER,
    ETCD_MEMBER_HEALTHY,
    ETCD_MEMBERS,
    ETCD_MEMBERS_HEALTHY,
    ETCD_QUORUM_SIZE,
    ETCD_QUORUM_STATE,
    ETCD_RAFT_TERM,
)

#: kubeadm ClusterConfiguration that fixes the localhost trap (kubeadm v1beta3/v1beta4).
KUBEADM_FIX = (
    "In kubeadm's ClusterConfiguration set scheduler.extraArgs and controllerManager.extraArgs "
    "`bind-address: 0.0.0.0`, and etcd.local.extraArgs `listen-metrics-urls: "
    "http://0.0.0.0:2381`; then `kubeadm upgrade apply` (or edit the static pod manifests in "
    "/etc/kubernetes/manifests) one control-plane node at a time. Until then the Prometheus "
    'relabel rule on localhost_only="true" (fleetwatch docs/controlplane.md) drops these '
    "targets, so they never page as down."
)

CLUSTER = "{{ $labels.cluster }}"

#: Why each alert has its severity and ``for:`` (also the comments in the code below).
WHY: dict[str, str] = {
    "FleetEtcdQuorumLost": (
        "critical: without quorum etcd refuses every write; the cluster is frozen (no "
        "scheduling, no updates) and the API server soon fails too. for: 1m, because a probe "
        "already waits out an election (3.5 s of re-asking); one more minute covers a "
        "member's restart."
    ),
    "FleetEtcdNoFaultTolerance": (
        "warning: quorum holds, but the next member loss freezes the cluster (2 of 3, or a "
        "single-member etcd, the SPOF of the HA plan). for: 15m lets a planned, one-node-at-"
        "a-time control-plane upgrade or reboot pass without a notification."
    ),
    "FleetEtcdNoLeader": (
        "critical: no member knows a leader, so nothing commits (etcd mixin etcdNoLeader, "
        "critical for 1m). Only the direct source can tell; the API server's view cannot."
    ),
    "FleetEtcdEvenMemberCount": (
        "warning: 4 members tolerate one failure like 3 do, with one more voter to wait for "
        "(and 2 tolerate none). for: 1h because adding members one at a time (1 -> 2 -> 3) "
        "passes through an even count for the length of a join."
    ),
    "FleetEtcdFrequentLeaderChanges": (
        "warning: the raft term moved in 3 or more probe cycles within an hour: elections keep "
        "happening (slow disks, network, overloaded members), like the mixin's "
        "etcdHighNumberOfLeaderChanges. No for:, the window already spans an hour."
    ),
    "FleetControlPlaneLocalhostOnly": (
        "warning: nothing is down, but Prometheus cannot scrape the component from outside "
        "the node (the false 'scheduler down' of kubeadm defaults). for: 15m rides out a "
        "static pod being rewritten during an upgrade. Fix: the kubeadm extraArgs in the "
        "annotation."
    ),
    "FleetCoreDNSSingleNode": (
        "warning: every CoreDNS replica runs on one node, so losing that node stops DNS in the "
        "whole cluster. for: 15m lets a drain or rollout reschedule the replicas first."
    ),
}


def _rule(
    alert: str, expr: str, severity: str, summary: str, description: str, hold: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"alert": alert, "expr": expr}
    if hold is not None:
        body["for"] = hold
    body["labels"] = {"severity": severity}
    body["annotations"] = {"summary": summary, "description": description}
    return body


def etcd_group() -> dict[str, Any]:
    state = ETCD_QUORUM_STATE
    return {
        "name": "fleetwatch-etcd",
        "rules": [
            # critical, for 1m: see WHY["FleetEtcdQuorumLost"].
            _rule(
                "FleetEtcdQuorumLost",
                f'min by (cluster) ({state}{{state="lost"}}) == 1\n',
                "critical",
                f"etcd of {CLUSTER} has lost its quorum",
                f"Fewer etcd members of {CLUSTER} are healthy than the quorum needs "
                f"({ETCD_MEMBERS_HEALTHY} < {ETCD_QUORUM_SIZE}): etcd "
                "refuses writes and the cluster is frozen. Bring members back one at a "
                "time; if they cannot come back, restore from the latest etcd snapshot.",
                "1m",
            ),
            # warning, for 15m: see WHY["FleetEtcdNoFaultTolerance"].
            _rule(
                "FleetEtcdNoFaultTolerance",
                f'min by (cluster) ({state}{{state="no_fault_tolerance"}}) == 1\n',
                "warning",
                f"etcd of {CLUSTER} has no fault tolerance left",
                f"etcd of {CLUSTER} has exactly the quorum of healthy members: one more "
                "member failure freezes the cluster. Repair the unhealthy member "
                f"({ETCD_MEMBER_HEALTHY} == 0) before any other control-plane "
                "maintenance; a single-member etcd needs two more control-plane nodes.",
                "15m",
            ),
            # critical, for 1m: see WHY["FleetEtcdNoLeader"].
            _rule(
                "FleetEtcdNoLeader",
                f"max by (cluster) ({ETCD_HAS_LEADER}) == 0\n",
                "critical",
                f"etcd of {CLUSTER} has no leader",
                f"No member of the etcd of {CLUSTER} reports a leader ('etcdserver: no "
                "leader'): nothing can be committed. Usually the quorum is lost too; check "
                "which members are down and the network between them.",
                "1m",
            ),
            # warning, for 1h: see WHY["FleetEtcdEvenMemberCount"].
            _rule(
                "FleetEtcdEvenMemberCount",
                # The value is the member count (for the summary), kept only when even.
                f"max by (cluster) ({ETCD_MEMBERS}) > 0\n"
                f"unless on (cluster) max by (cluster) ({ETCD_MEMBERS}) % 2 == 1\n",
                "warning",
                f"etcd of {CLUSTER} has an even number of members ({{{{ $value }}}})",
                f"The etcd of {CLUSTER} has an even member count: it tolerates no more "
                "failures than one member less would, and needs one more vote for quorum. "
                "Run an odd count (3 or 5); add or remove one member, one at a time.",
                "1h",
            ),
            # warning, no for: see WHY["FleetEtcdFrequentLeaderChanges"].
            _rule(
                "FleetEtcdFrequentLeaderChanges",
                f"max by (cluster) (changes({ETCD_RAFT_TERM}[1h])) >= 3\n",
                "warning",
                f"etcd of {CLUSTER} changed leader in {{{{ $value }}}} probe cycles this hour",
                f"The raft term of the etcd of {CLUSTER} keeps growing: leader elections "
                "are frequent. Look for slow disks (fsync latency), network trouble between "
                "control-plane nodes, or members restarting.",
                None,
            ),
        ],
    }


def controlplane_group() -> dict[str, Any]:
    return {
        "name": "fleetwatch-controlplane",
        "rules": [
            # warning, for 15m: see WHY["FleetControlPlaneLocalhostOnly"].
            _rule(
                "FleetControlPlaneLocalhostOnly",
                "sum by (cluster, component) (\n"
                f"  max by (cluster, component, node) ({CONTROLPLANE_LOCALHOST_ONLY})\n"
                ") > 0\n",
                "warning",
                f"{{{{ $labels.component }}}} of {CLUSTER} serves metrics on 127.0.0.1 only "
                "({{ $value }} node(s))",
                f"{{{{ $labels.component }}}} of {CLUSTER} binds its metrics to 127.0.0.1 "
                "(kubeadm's default), so Prometheus cannot scrape it from outside the node and "
                f"would report it down although it runs. {KUBEADM_FIX}",
                "15m",
            ),
            # warning, for 15m: see WHY["FleetCoreDNSSingleNode"].
            _rule(
                "FleetCoreDNSSingleNode",
                f"max by (cluster) ({COREDNS_NODES}) == 1\n"
                f"and on (cluster) max by (cluster) ({COREDNS_REPLICAS}) >= 2\n",
                "warning",
                f"All CoreDNS replicas of {CLUSTER} run on one node",
                f"Every CoreDNS replica of {CLUSTER} is on the same node: losing that node "
                "stops DNS for the whole cluster. Make the spread hard: a "
                "topologySpreadConstraint on kubernetes.io/hostname with whenUnsatisfiable: "
                "DoNotSchedule (or required pod anti-affinity), then restart the deployment.",
                "15m",
            ),
        ],
    }


def rule_groups() -> list[dict[str, Any]]:
    """The groups ``fleetwatch rules`` appends, as plain data (dumped as YAML as they are)."""
    return [etcd_group(), controlplane_group()]
