"""The control-plane check's report and its exposition: samples and HTTP SD target groups.

Pure: a :class:`ControlPlaneReport` (etcd, targets, CoreDNS) in, the samples of one
cluster and its ``/sd/control-plane`` groups out (the exposition adds ``cluster``), as
one :class:`~exporter.model.CheckResult` (:func:`report_result`)::

    fleetwatch_etcd_members{cluster="prod"} 3
    fleetwatch_etcd_members_healthy{cluster="prod"} 2
    fleetwatch_etcd_quorum_size{cluster="prod"} 2
    fleetwatch_etcd_quorum_state{cluster="prod",state="no_fault_tolerance"} 1
    fleetwatch_etcd_member_healthy{cluster="prod",member="cp-2"} 0
    fleetwatch_controlplane_localhost_only{cluster="prod",component="kube-scheduler",node="cp-1"} 1
    fleetwatch_coredns_replicas{cluster="prod"} 2
    fleetwatch_coredns_nodes{cluster="prod"} 1
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from exporter.controlplane.components import COMPONENTS, ComponentTarget, control_plane_targets
from exporter.controlplane.kubesystem import (
    CoreDNSSpread,
    KubeSystem,
    coredns_spread,
    etcd_from_static_pods,
)
from exporter.controlplane.quorum import EtcdReport, QuorumState
from exporter.model import CheckResult, MetricFamily, Sample, TargetGroup
from fleetwatch.common.metricnames import (
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


@dataclass(frozen=True)
class ControlPlaneReport:
    etcd: EtcdReport | None
    targets: tuple[ComponentTarget, ...]
    coredns: CoreDNSSpread | None


def _family(name: str, help_text: str) -> MetricFamily:
    return MetricFamily(name=name, type="gauge", help=help_text)


FAMILIES: tuple[MetricFamily, ...] = (
    _family(ETCD_MEMBERS, "etcd members of the cluster."),
    _family(ETCD_MEMBERS_HEALTHY, "etcd members that answer healthy (or are Ready)."),
    _family(ETCD_QUORUM_SIZE, "Members needed for quorum: floor(members/2)+1."),
    _family(ETCD_HAS_LEADER, "1 if an etcd member reports a leader (direct source)."),
    _family(ETCD_MEMBER_HEALTHY, "1 if this etcd member is healthy."),
    _family(ETCD_DB_SIZE, "Size of this etcd member's database in bytes."),
    _family(ETCD_RAFT_TERM, "Highest raft term the members report; +1 per election."),
    _family(
        ETCD_QUORUM_STATE,
        "1 on the current quorum state: healthy, no_fault_tolerance or lost.",
    ),
    _family(
        ETCD_SOURCE_INFO,
        "Where the etcd series come from: apiserver (static pods) or direct (etcd itself).",
    ),
    _family(
        CONTROLPLANE_LOCALHOST_ONLY,
        "1 when the component serves its metrics on 127.0.0.1 only (kubeadm's default).",
    ),
    _family(COREDNS_REPLICAS, "Running CoreDNS pods."),
    _family(COREDNS_NODES, "Distinct nodes the running CoreDNS pods are on."),
)

#: The families of the targets (with the SD groups, what is still served while the API
#: server does not answer); those a direct etcd source gives instead of the API server;
#: those only the API server gives.
TARGET_FAMILIES = frozenset({CONTROLPLANE_LOCALHOST_ONLY})
ETCD_FAMILIES = frozenset(
    {
        ETCD_MEMBERS,
        ETCD_MEMBERS_HEALTHY,
        ETCD_QUORUM_SIZE,
        ETCD_HAS_LEADER,
        ETCD_MEMBER_HEALTHY,
        ETCD_DB_SIZE,
        ETCD_RAFT_TERM,
        ETCD_QUORUM_STATE,
        ETCD_SOURCE_INFO,
    }
)
APISERVER_FAMILIES = frozenset(f.name for f in FAMILIES) - ETCD_FAMILIES


#: The label sets every cluster's samples share: the check keeps each cluster's result
#: for as long as its kube-system is unchanged, and a small dict per sample would be
#: most of what it keeps (never mutated: a sample's labels are read-only).
_NO_LABELS: Mapping[str, str] = MappingProxyType({})
_SOURCE = {source: MappingProxyType({"source": source}) for source in ("apiserver", "direct")}
_STATE = tuple((s, MappingProxyType({"state": s.value})) for s in QuorumState)


def report_samples(report: ControlPlaneReport) -> tuple[Sample, ...]:
    """The samples of one cluster (the exposition adds the ``cluster`` label)."""
    out: list[Sample] = []
    etcd = report.etcd
    if etcd is not None:
        q = etcd.quorum
        out += [
            Sample(ETCD_MEMBERS, q.members, _NO_LABELS),
            Sample(ETCD_MEMBERS_HEALTHY, q.healthy, _NO_LABELS),
            Sample(ETCD_QUORUM_SIZE, q.size, _NO_LABELS),
            Sample(ETCD_SOURCE_INFO, 1, _SOURCE[etcd.source]),
        ]
        out += [Sample(ETCD_QUORUM_STATE, 1 if q.state is s else 0, labels) for s, labels in _STATE]
        if etcd.has_leader is not None:
            out.append(Sample(ETCD_HAS_LEADER, 1 if etcd.has_leader else 0, _NO_LABELS))
        if etcd.raft_term is not None:
            out.append(Sample(ETCD_RAFT_TERM, etcd.raft_term, _NO_LABELS))
        for m in etcd.members:
            member = {"member": m.name}
            out.append(Sample(ETCD_MEMBER_HEALTHY, 1 if m.healthy else 0, member))
            if m.db_size_bytes is not None:
                out.append(Sample(ETCD_DB_SIZE, m.db_size_bytes, member))
    for t in report.targets:
        out.append(
            Sample(
                CONTROLPLANE_LOCALHOST_ONLY,
                1 if t.localhost_only else 0,
                {"component": t.component, "node": t.node},
            )
        )
    if report.coredns is not None:
        out += [
            Sample(COREDNS_REPLICAS, report.coredns.replicas, _NO_LABELS),
            Sample(COREDNS_NODES, report.coredns.nodes, _NO_LABELS),
        ]
    return tuple(out)


def target_groups(targets: Iterable[ComponentTarget]) -> tuple[TargetGroup, ...]:
    """HTTP SD groups, one per target (labels differ by node); ``cluster`` is added for us.

    ``__scheme__`` tells Prometheus to use https for the scheduler, the controller-manager
    and the API server; users still need credentials for those (docs/controlplane.md).
    """
    groups = []
    for t in targets:
        labels = {"component": t.component, "node": t.node, "__scheme__": t.scheme}
        if t.localhost_only:
            labels["localhost_only"] = "true"
        groups.append(TargetGroup(targets=(t.address,), labels=labels))
    return tuple(groups)


def report_from_kube_system(kube: KubeSystem) -> ControlPlaneReport:
    static = [p for p in kube.pods if p.labels.get("component") in COMPONENTS]
    return ControlPlaneReport(
        etcd=etcd_from_static_pods(static),
        targets=control_plane_targets(static, kube.nodes),
        coredns=coredns_spread(kube.pods),
    )


def report_result(report: ControlPlaneReport) -> CheckResult:
    """The samples and SD groups of ``report``: what the check hands the exposition."""
    return CheckResult(samples=report_samples(report), targets=target_groups(report.targets))


def merged(*parts: CheckResult) -> CheckResult:
    """Several results of one cluster as one, in ``parts`` order."""
    return CheckResult(
        tuple(s for p in parts for s in p.samples), tuple(t for p in parts for t in p.targets)
    )


def only(result: CheckResult, families: frozenset[str]) -> CheckResult:
    """The samples of the named families only, and the same SD groups."""
    return CheckResult(tuple(s for s in result.samples if s.name in families), result.targets)
