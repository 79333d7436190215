"""The control-plane check's report and its exposition: samples and HTTP SD target groups.

Pure: a :class:`ControlPlaneReport` (etcd, targets, CoreDNS) in, the samples of one
cluster and its ``/sd/control-plane`` groups out (the exposition adds ``cluster``), and
:func:`encode_report`, the same encoded once (``exporter.textformat``), which is all the
check keeps of a report::

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

from collections.abc import Iterable
from dataclasses import dataclass

from exporter.controlplane.components import COMPONENTS, ComponentTarget, control_plane_targets
from exporter.controlplane.kubesystem import (
    CoreDNSSpread,
    KubeSystem,
    coredns_spread,
    etcd_from_static_pods,
)
from exporter.controlplane.quorum import EtcdReport, QuorumState
from exporter.model import CheckResult, MetricFamily, Sample, TargetGroup
from exporter.textformat import EncodedChecks, Families


@dataclass(frozen=True)
class ControlPlaneReport:
    etcd: EtcdReport | None
    targets: tuple[ComponentTarget, ...]
    coredns: CoreDNSSpread | None


def _family(name: str, help_text: str) -> MetricFamily:
    return MetricFamily(name=name, type="gauge", help=help_text)


FAMILIES: tuple[MetricFamily, ...] = (
    _family("fleetwatch_etcd_members", "etcd members of the cluster."),
    _family("fleetwatch_etcd_members_healthy", "etcd members that answer healthy (or are Ready)."),
    _family("fleetwatch_etcd_quorum_size", "Members needed for quorum: floor(members/2)+1."),
    _family("fleetwatch_etcd_has_leader", "1 if an etcd member reports a leader (direct source)."),
    _family("fleetwatch_etcd_member_healthy", "1 if this etcd member is healthy."),
    _family("fleetwatch_etcd_db_size_bytes", "Size of this etcd member's database in bytes."),
    _family("fleetwatch_etcd_raft_term", "Highest raft term the members report; +1 per election."),
    _family(
        "fleetwatch_etcd_quorum_state",
        "1 on the current quorum state: healthy, no_fault_tolerance or lost.",
    ),
    _family(
        "fleetwatch_etcd_source_info",
        "Where the etcd series come from: apiserver (static pods) or direct (etcd itself).",
    ),
    _family(
        "fleetwatch_controlplane_localhost_only",
        "1 when the component serves its metrics on 127.0.0.1 only (kubeadm's default).",
    ),
    _family("fleetwatch_coredns_replicas", "Running CoreDNS pods."),
    _family("fleetwatch_coredns_nodes", "Distinct nodes the running CoreDNS pods are on."),
)

#: What the check's results are encoded against.
ENCODING = Families(FAMILIES)
#: The families of the targets (with the SD groups, what is still served while the API
#: server does not answer); those a direct etcd source gives instead of the API server;
#: those only the API server gives.
TARGET_FAMILIES = frozenset({"fleetwatch_controlplane_localhost_only"})
ETCD_FAMILIES = frozenset(f.name for f in FAMILIES if f.name.startswith("fleetwatch_etcd_"))
APISERVER_FAMILIES = frozenset(ENCODING.names) - ETCD_FAMILIES


def report_samples(report: ControlPlaneReport) -> tuple[Sample, ...]:
    """The samples of one cluster (the exposition adds the ``cluster`` label)."""
    out: list[Sample] = []
    etcd = report.etcd
    if etcd is not None:
        q = etcd.quorum
        out += [
            Sample("fleetwatch_etcd_members", q.members),
            Sample("fleetwatch_etcd_members_healthy", q.healthy),
            Sample("fleetwatch_etcd_quorum_size", q.size),
            Sample("fleetwatch_etcd_source_info", 1, {"source": etcd.source}),
        ]
        out += [
            Sample("fleetwatch_etcd_quorum_state", 1 if q.state is s else 0, {"state": s.value})
            for s in QuorumState
        ]
        if etcd.has_leader is not None:
            out.append(Sample("fleetwatch_etcd_has_leader", 1 if etcd.has_leader else 0))
        if etcd.raft_term is not None:
            out.append(Sample("fleetwatch_etcd_raft_term", etcd.raft_term))
        for m in etcd.members:
            out.append(
                Sample("fleetwatch_etcd_member_healthy", 1 if m.healthy else 0, {"member": m.name})
            )
            if m.db_size_bytes is not None:
                out.append(
                    Sample("fleetwatch_etcd_db_size_bytes", m.db_size_bytes, {"member": m.name})
                )
    for t in report.targets:
        out.append(
            Sample(
                "fleetwatch_controlplane_localhost_only",
                1 if t.localhost_only else 0,
                {"component": t.component, "node": t.node},
            )
        )
    if report.coredns is not None:
        out += [
            Sample("fleetwatch_coredns_replicas", report.coredns.replicas),
            Sample("fleetwatch_coredns_nodes", report.coredns.nodes),
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


def encode_report(cluster: str, report: ControlPlaneReport) -> EncodedChecks:
    """The samples and SD groups of ``report``, encoded as ``/metrics`` serves them."""
    return ENCODING.encode(
        cluster, CheckResult(samples=report_samples(report), targets=target_groups(report.targets))
    )
