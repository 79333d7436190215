"""The cluster tables the exposition is compared on with the exposition of commit 8a3e263.

Each case is a cluster table (clusters, probes, check results) put through
``ClusterTable`` and ``build_snapshot`` as the cycle does (:func:`tables`). Two users:

- tests/exporter/test_exporter_exposition.py renders each case and compares the bytes
  with what 8a3e263 rendered from the same state, recorded in
  tests/fixtures/exposition-8a3e263.json.gz (:data:`RECORDED` names its keys);
- bench/exposition_baseline.py renders the same cases, and a fleet, with the code of
  8a3e263 itself in a process of its own: :func:`case_doc` writes a case as plain data
  (JSON) so that code builds it with its own types.

What the exposition shows beyond 8a3e263 (the last failure's reason, the credential
failures, the shards' view of the fleet) is spliced into the old text where it belongs
(:func:`with_additions`), from the snapshot as the table kept it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.controlplane.components import ComponentTarget
from exporter.controlplane.kubesystem import CoreDNSSpread
from exporter.controlplane.quorum import EtcdMember, EtcdReport
from exporter.controlplane.report import FAMILIES, ControlPlaneReport, report_result
from exporter.expose.encodings import Encoder
from exporter.expose.snapshot import CycleStats, Snapshot, build_snapshot, declared_families
from exporter.model import (
    CheckResult,
    CycleSettings,
    MetricFamily,
    ProbeResult,
    Reason,
    Sample,
    TargetGroup,
)
from exporter.state import ClusterTable
from fleetwatch.discovery.clusters import Cluster, Discovery

ODD = 'we"ird\\name\nx'
#: When the table records a case's probes: the i-th cluster's at PROBED_AT + i.
PROBED_AT = 1_700_000_000.5


@dataclass
class Spec:
    """One cluster of a case: what discovery found, its probes, its checks' results."""

    cluster: Cluster
    probeable: bool = True
    probes: Sequence[ProbeResult] = ()
    results: Sequence[CheckResult] = ()


@dataclass
class Case:
    specs: list[Spec]
    families: tuple[MetricFamily, ...] = ()
    check_errors: dict[str, int] = field(default_factory=dict)
    stats: CycleStats = field(default_factory=CycleStats)


def cluster(name: str, endpoint: str = "", source: str = "/k/a.yaml") -> Cluster:
    return Cluster(name, endpoint or f"https://{name}.example:6443", source, name)


OK = ProbeResult(True, None, 0.0123, 200)


def fail(reason: Reason) -> ProbeResult:
    return ProbeResult(False, reason, 5.0, None, "x")


#: The settings every case's snapshot is built with.
SETTINGS = CycleSettings(interval=300, timeout=10, concurrency=8)


def tables(case: Case) -> Snapshot:
    """The case through the table as the cycle does."""
    table = ClusterTable()
    keeper = Encoder(case.families)
    discovery = Discovery(tuple(s.cluster for s in case.specs), (), fleet_size=len(case.specs))
    readable = {s.cluster.kubeconfig_secret_ref: s.probeable for s in case.specs}
    table.apply_discovery(discovery, readable)
    for i, spec in enumerate(case.specs):
        for probe in spec.probes:
            table.record(spec.cluster.name, probe, PROBED_AT + i)
        if spec.results:
            table.set_checks(spec.cluster.name, spec.results, keeper)
    stats = case.stats
    stats.check_errors = dict(case.check_errors)
    return build_snapshot(table, case.families, stats, SETTINGS)


def case_doc(case: Case) -> dict[str, Any]:
    """The case as plain data (JSON; NaN and infinities as Python's json writes them), for
    code of another commit to build with its own types, as :func:`tables` does."""
    return {
        "clusters": [
            {
                "name": s.cluster.name,
                "endpoint": s.cluster.endpoint,
                "source": s.cluster.kubeconfig_secret_ref,
                "context": s.cluster.context,
                "probeable": s.probeable,
                "probed_at": PROBED_AT + i,
                "probes": [
                    [p.success, p.reason and p.reason.value, p.duration, p.status, p.detail]
                    for p in s.probes
                ],
                "results": [
                    {
                        "samples": [[m.name, m.value, dict(m.labels)] for m in r.samples],
                        "targets": [[list(g.targets), dict(g.labels)] for g in r.targets],
                    }
                    for r in s.results
                ],
            }
            for i, s in enumerate(case.specs)
        ],
        "families": [[f.name, f.type, f.help] for f in case.families],
        "check_errors": dict(case.check_errors),
        "stats": [case.stats.cycles_total, case.stats.cycle_duration, case.stats.last_cycle_end],
        "settings": [SETTINGS.interval, SETTINGS.timeout, SETTINGS.concurrency],
    }


# --- what was added after 8a3e263 ----------------------------------------------------


#: The class of each reason, written out here (not read from ``exporter.model``): the
#: contract's table, DESIGN "Statuses".
CLASS_OF = {
    Reason.UNAUTHORIZED: "credentials",
    Reason.TLS: "credentials",
    Reason.TIMEOUT: "unreachable",
    Reason.CONNECT: "unreachable",
    Reason.NOT_READY: "unreachable",
    Reason.HTTP_ERROR: "unreachable",
    Reason.CREDENTIALS: "unreachable",
    Reason.PROXY: "unreachable",
}


def last_reason_families(snap: Snapshot) -> str:
    """The families added after the reference, from the probes as the table kept them:
    the last failure's reason and class, and the credential failures of the run."""

    def key(name: str) -> str:
        return name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    reasons = "".join(
        f'fleetwatch_cluster_probe_last_failure_reason{{cluster="{key(v.cluster.name)}",'
        f'reason="{v.last.reason.value}",class="{CLASS_OF[v.last.reason]}"}} 1\n'
        for v in snap.clusters
        if v.last is not None and v.last.reason is not None
    )
    credential = "".join(
        f'fleetwatch_cluster_probe_consecutive_credential_failures{{cluster="{key(v.cluster.name)}"}}'
        f" {v.credential_failures}\n"
        for v in snap.clusters
        if v.probeable
    )
    return (
        "# HELP fleetwatch_cluster_probe_last_failure_reason 1 while the last probe failed, "
        "with its reason and class (credentials: refused, 401/403, or TLS verification failed; "
        "unreachable: the rest); absent after a success.\n"
        "# TYPE fleetwatch_cluster_probe_last_failure_reason gauge\n"
        + reasons
        + "# HELP fleetwatch_cluster_probe_consecutive_credential_failures Of the probes failed "
        "in a row, those of the class credentials; reset to 0 by a success.\n"
        "# TYPE fleetwatch_cluster_probe_consecutive_credential_failures gauge\n" + credential
    )


def with_additions(text: str, snap: Snapshot) -> bytes:
    """8a3e263's ``/metrics`` ``text`` with what was added since, where it was added: the
    shards' view of the fleet (``fleetwatch_exporter_shards`` and
    ``fleetwatch_exporter_fleet_clusters``) after ``fleetwatch_exporter_shard``, and the
    last failure's reason (:func:`last_reason_families`) after the failures by reason."""
    failures = "# TYPE fleetwatch_cluster_probe_failures_total counter\n"
    after = text.index("# HELP ", text.index(failures))
    text = text[:after] + last_reason_families(snap) + text[after:]
    shard_line = f'fleetwatch_exporter_shard{{index="{0}",count="{1}"}} 1\n'
    added = (
        "# HELP fleetwatch_exporter_shards Shards the fleet is split into (--shard.count; "
        "1 unsharded).\n"
        "# TYPE fleetwatch_exporter_shards gauge\n"
        f"fleetwatch_exporter_shards {snap.shard[1]}\n"
        "# HELP fleetwatch_exporter_fleet_clusters Clusters in the whole fleet as this "
        "exporter's discovery sees it, before sharding.\n"
        "# TYPE fleetwatch_exporter_fleet_clusters gauge\n"
        f"fleetwatch_exporter_fleet_clusters {snap.fleet_size}\n"
    )
    assert text.count(shard_line) == 1
    return text.replace(shard_line, shard_line + added).encode()


# --- the cases ----------------------------------------------------------------------

TEST_FAMILIES = (
    MetricFamily("fleetwatch_test_value", "gauge", 'Help with \\ and "quotes"\nand a newline.'),
    MetricFamily("fleetwatch_test_events_total", "counter", "Events."),
    MetricFamily("fleetwatch_test_unused", "gauge", "Declared, never sampled."),
)
OTHER_FAMILIES = (
    MetricFamily("fleetwatch_test_value", "gauge", "Declared again: the first one wins."),
    MetricFamily("fleetwatch_other_ratio", "gauge", "Another check's family."),
)

VALUES = [0, 1, -1, 0.5, 1e-9, 123456789012345.0, 1e15, 1e20, -0.0, math.nan, math.inf, -math.inf]


def odd_values() -> Case:
    """Every kind of value, escaping in every label, labels named ``cluster`` dropped."""
    samples = [
        Sample("fleetwatch_test_value", v, {"i": str(i), "odd": ODD}) for i, v in enumerate(VALUES)
    ]
    samples += [
        Sample("fleetwatch_test_value", True, {"cluster": "spoofed", "b": "true"}),
        Sample("fleetwatch_test_value", False),
        Sample("fleetwatch_test_events_total", 7, {"unicode": "żółw ☃", "empty": ""}),
        Sample("fleetwatch_test_undeclared", 1),  # no HELP/TYPE known: dropped
    ]
    groups = (
        TargetGroup(("127.0.0.1:10259", "[::1]:2381"), {"component": ODD, "node": "żółw"}),
        TargetGroup(("127.0.0.2:10257",), {"cluster": "overridden", "__scheme__": "https"}),
        TargetGroup((), {}),
    )
    return Case(
        [
            Spec(
                cluster(ODD, 'https://h"o\\st\n:6443', '/k/we"ird\\file\n.yaml'),
                probes=[OK],
                results=[CheckResult(tuple(samples), groups)],
            ),
            Spec(cluster("plain"), probes=[fail(Reason.TIMEOUT)]),
        ],
        TEST_FAMILIES,
        check_errors={ODD: 2, "version": 0},
    )


def probe_states() -> Case:
    """Never probed, not probeable, failing for several reasons, recovered, no checks."""
    return Case(
        [
            Spec(cluster("never")),
            Spec(cluster("unreadable", source="/k/missing.yaml"), probeable=False),
            Spec(
                cluster("flaky"),
                probes=[fail(Reason.TLS), fail(Reason.TIMEOUT), fail(Reason.TLS), OK],
            ),
            Spec(
                cluster("down"),
                probes=[fail(Reason.CONNECT), fail(Reason.NOT_READY), fail(Reason.PROXY)],
            ),
            Spec(cluster("ok"), probes=[OK, OK]),
        ],
        stats=CycleStats(cycles_total=4, cycle_duration=1.25, last_cycle_end=1_700_000_100.75),
    )


def two_checks() -> Case:
    """Two checks per cluster, a family declared by both, a sample of the other's family."""
    families = declared_families([TEST_FAMILIES, OTHER_FAMILIES])
    first = CheckResult(
        (
            Sample("fleetwatch_test_value", 1, {"from": "first"}),
            Sample("fleetwatch_other_ratio", 0.25, {"from": "first"}),  # the other's family
        ),
        (TargetGroup(("a:1",), {"from": "first"}),),
    )
    second = CheckResult(
        (
            Sample("fleetwatch_other_ratio", 0.75, {"from": "second"}),
            Sample("fleetwatch_test_value", 2, {"from": "second"}),
        ),
        (TargetGroup(("b:1",), {"from": "second"}),),
    )
    return Case(
        [
            Spec(cluster(f"c{i}"), probes=[OK], results=[first, second] if i % 2 else [second])
            for i in range(5)
        ],
        families,
    )


def control_plane_reports() -> Case:
    """The control-plane check's results."""
    members = (EtcdMember("cp-1", True, 1234, 7), EtcdMember('cp-"2"', False, None, None))
    targets = (
        ComponentTarget("kube-scheduler", "cp-1", "127.0.0.1:10259", "https", True),
        ComponentTarget("etcd", 'cp-"2"\\', "127.0.0.2:2381", "http", False),
    )
    reports = [
        ControlPlaneReport(EtcdReport("apiserver", members, None), targets, CoreDNSSpread(2, 1)),
        ControlPlaneReport(EtcdReport("direct", members, True), targets, None),
        ControlPlaneReport(None, targets, None),
        ControlPlaneReport(None, (), CoreDNSSpread(0, 0)),
    ]
    specs = []
    for i, report in enumerate(reports * 3):
        name = f"cp-cluster-{i}" if i % 4 else f"{ODD}-{i}"
        specs.append(Spec(cluster(name), probes=[OK], results=[report_result(report)]))
    return Case(specs, declared_families([FAMILIES]))


def many_clusters() -> Case:
    """More clusters than a batch, some without results: the batches join up."""
    specs = []
    for i in range(700):
        results = []
        if i % 3:
            results = [
                CheckResult((Sample("fleetwatch_test_value", i),), (TargetGroup((f"h{i}:1",)),))
            ]
        probes = [OK] if i % 5 else [fail(Reason.UNAUTHORIZED)]
        specs.append(
            Spec(cluster(f"fleet-{i:04d}"), probeable=i % 7 != 0, probes=probes, results=results)
        )
    return Case(specs, TEST_FAMILIES)


def empty() -> Case:
    return Case([])


def later() -> Case:
    """The control-plane reports a cycle later: one more probe each (a timeout), the same
    check results."""
    case = control_plane_reports()
    for spec in case.specs:
        spec.probes = [*spec.probes, fail(Reason.TIMEOUT)]
    return case


def changed() -> Case:
    """:func:`later` with one cluster's check result changed."""
    case = later()
    case.specs[1].results = [CheckResult((), (TargetGroup(("moved:1",)),))]
    return case


CASES: dict[str, Callable[[], Case]] = {
    "odd values": odd_values,
    "probe states": probe_states,
    "two checks": two_checks,
    "control-plane reports": control_plane_reports,
    "many clusters": many_clusters,
    "empty": empty,
}

#: Every state the recording holds (its keys: ``<case>/metrics`` and ``<case>/sd``).
RECORDED: dict[str, Callable[[], Case]] = {**CASES, "later": later, "changed": changed}
