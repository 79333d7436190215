"""The exposition renders byte for byte what the reference exposition renders.

Each case is a cluster table (clusters, probes, check results) put through
``ClusterTable`` and ``build_snapshot`` as the cycle does and rendered by
``exporter.expose.render``; the reference is what the exposition of commit 8a3e263 rendered
from the same state, recorded in tests/fixtures/exposition-8a3e263.json.gz (a commit's output
does not change, so it is recorded once rather than kept as a frozen copy of old code). The
cases' target addresses later moved into 127.0.0.0/8, and the recorded ``/sd`` bytes with
them: that renderer wrote each target as ``json.dumps`` does, in the order given.
``/metrics`` (plain, and gzipped with the process collectors appended) and
``/sd/control-plane`` must be the same bytes.

A new case needs its reference recorded from that commit: the renderer of 8a3e263, as it
was kept until it was replaced by the recording, is
``git show 71ed597:tests/exporter/exposition_before.py`` (``render_metrics`` and
``render_sd`` of a ``Snapshot`` of ``ClusterView``; the recording's key is
``<case>/metrics`` or ``<case>/sd``).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from exporter.controlplane.components import ComponentTarget
from exporter.controlplane.kubesystem import CoreDNSSpread
from exporter.controlplane.quorum import EtcdMember, EtcdReport
from exporter.controlplane.report import FAMILIES, ControlPlaneReport, only, report_result
from exporter.expose.encodings import Encoder
from exporter.expose.render import render, render_metrics, render_sd
from exporter.expose.snapshot import CycleStats, Snapshot, build_snapshot, declared_families
from exporter.expose.textformat import EncodedChecks, Families
from exporter.model import (
    UNCHANGED,
    CheckResult,
    CycleSettings,
    MetricFamily,
    ProbeResult,
    Reason,
    Sample,
    TargetGroup,
    Unchanged,
)
from exporter.state import ClusterTable
from fleetwatch.discovery.clusters import Cluster, Discovery

ODD = 'we"ird\\name\nx'


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


#: What 8a3e263 rendered for each case (see the module's docstring).
REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "exposition-8a3e263.json.gz"


@cache
def reference() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(gzip.decompress(REFERENCE.read_bytes()))
    return loaded


def before_sd(key: str) -> bytes:
    """The reference's ``/sd/control-plane`` of the state recorded as ``key``."""
    return reference()[f"{key}/sd"].encode()


def tables(case: Case) -> Snapshot:
    """The case through the table as the cycle does."""
    table = ClusterTable()
    keeper = Encoder(case.families)
    discovery = Discovery(tuple(s.cluster for s in case.specs), (), fleet_size=len(case.specs))
    readable = {s.cluster.kubeconfig_secret_ref: s.probeable for s in case.specs}
    table.apply_discovery(discovery, readable)
    for i, spec in enumerate(case.specs):
        for probe in spec.probes:
            table.record(spec.cluster.name, probe, 1_700_000_000.5 + i)
        if spec.results:
            table.set_checks(spec.cluster.name, spec.results, keeper)
    stats = case.stats
    stats.check_errors = dict(case.check_errors)
    settings = CycleSettings(interval=300, timeout=10, concurrency=8)
    return build_snapshot(table, case.families, stats, settings)


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


def before_metrics(key: str, snap: Snapshot) -> bytes:
    """The reference's ``/metrics``, with what was added since, where it was added: the
    shards' view of the fleet (``fleetwatch_exporter_shards`` and
    ``fleetwatch_exporter_fleet_clusters``) after ``fleetwatch_exporter_shard``, and the
    last failure's reason (:func:`last_reason_families`) after the failures by reason."""
    text = reference()[f"{key}/metrics"]
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


CASES: dict[str, Callable[[], Case]] = {
    "odd values": odd_values,
    "probe states": probe_states,
    "two checks": two_checks,
    "control-plane reports": control_plane_reports,
    "many clusters": many_clusters,
    "empty": empty,
}


@pytest.mark.parametrize("key", CASES.keys())
def test_the_bodies_are_the_bytes_rendered_before(key: str) -> None:
    snap = tables(CASES[key]())
    text = before_metrics(key, snap)
    assert render_metrics(snap) == text
    assert render_sd(snap) == before_sd(key)
    json.loads(render_sd(snap))
    process = b"# HELP python_info x\n# TYPE python_info gauge\npython_info 1\n"
    rendered = render(snap, process)
    assert gzip.decompress(rendered.metrics.gzip) == text + process
    assert rendered.metrics.size == len(text + process)
    assert rendered.metrics.plain() == text + process
    assert rendered.sd_control_plane.plain() == before_sd(key)


@pytest.mark.parametrize("level", [1, 6, 9])
def test_any_level_gives_the_same_text(level: int) -> None:
    snap = tables(many_clusters())
    assert render(snap, level=level).metrics.plain() == before_metrics("many clusters", snap)


def test_a_rendering_reuses_the_check_families_while_no_result_changed() -> None:
    snap = tables(control_plane_reports())
    first = render(snap)
    # The next phase: probes moved on, the same results encoded afresh (equal bytes).
    case = control_plane_reports()
    for spec in case.specs:
        spec.probes = [*spec.probes, fail(Reason.TIMEOUT)]
    later = tables(case)
    again = render(later, previous=first)
    assert again.check_families is first.check_families
    assert again.sd_control_plane is first.sd_control_plane
    assert again.metrics.plain() == before_metrics("later", later)
    assert 'reason="timeout"} 1' in again.metrics.plain().decode()
    # One cluster's results changed: rendered afresh.
    case.specs[1].results = [CheckResult((), (TargetGroup(("moved:1",)),))]
    changed = tables(case)
    third = render(changed, previous=again)
    assert third.check_families is not again.check_families
    assert third.metrics.plain() == before_metrics("changed", changed)
    assert third.sd_control_plane.plain() == before_sd("changed")


# --- what the table keeps (exporter.expose.encodings) -----------------------------------


def one_cluster() -> ClusterTable:
    table = ClusterTable()
    table.apply_discovery(Discovery((cluster("a"),), ()), {"/k/a.yaml": True})
    return table


def test_a_result_is_kept_encoded_and_unchanged_shows_it_again() -> None:
    table, keeper = one_cluster(), Encoder(FAMILIES)
    result = report_result(ControlPlaneReport(None, (), CoreDNSSpread(2, 2)))
    table.set_checks("a", [result], keeper)
    state = table.states["a"]
    [kept] = state.checks
    assert kept == keeper.keep("a", result)  # the encoding, not the result
    assert state.kept is state.checks
    table.set_checks("a", [UNCHANGED], keeper)
    assert table.states["a"] is state  # nothing encoded, nothing new
    # A check that fails shows nothing this cycle; its last result is still kept.
    table.set_checks("a", [None], keeper)
    assert table.states["a"].checks == (None,)
    table.set_checks("a", [UNCHANGED], keeper)
    assert table.states["a"].checks[0] is kept
    # A new result, equal or not, is encoded anew.
    table.set_checks(
        "a", [report_result(ControlPlaneReport(None, (), CoreDNSSpread(2, 2)))], keeper
    )
    assert table.states["a"].checks[0] is not kept
    assert table.states["a"].checks[0] == kept


def test_unchanged_naming_families_shows_only_those_and_keeps_the_whole() -> None:
    table, keeper = one_cluster(), Encoder(TEST_FAMILIES)
    result = CheckResult(
        (Sample("fleetwatch_test_events_total", 2), Sample("fleetwatch_test_value", 1)),
        (TargetGroup(("t:1",)),),
    )
    table.set_checks("a", [result], keeper)
    whole = table.states["a"].checks[0]
    table.set_checks("a", [Unchanged(frozenset({"fleetwatch_test_value"}))], keeper)
    state = table.states["a"]
    assert state.kept == (whole,)
    [part] = state.checks
    assert isinstance(part, EncodedChecks)
    assert part.text == b'fleetwatch_test_value{cluster="a"} 1\n'
    assert part.sd == b'{"targets":["t:1"],"labels":{"cluster":"a"}}'
    table.set_checks("a", [UNCHANGED], keeper)
    assert table.states["a"].checks == (whole,)


def test_unchanged_with_nothing_kept_shows_nothing() -> None:
    table = one_cluster()
    table.set_checks("a", [Unchanged(frozenset({"x"})), UNCHANGED], Encoder(TEST_FAMILIES))
    snap = build_snapshot(table, TEST_FAMILIES, CycleStats(), CycleSettings(300, 10, 8))
    assert b'cluster="a"' not in render_sd(snap)
    assert table.states["a"].checks == (None, None)


def test_each_check_keeps_its_own_result() -> None:
    """Two checks: one answers unchanged, the other hands a new result."""
    families = declared_families([TEST_FAMILIES, OTHER_FAMILIES])
    table, keeper = one_cluster(), Encoder(families)
    first = CheckResult((Sample("fleetwatch_test_value", 1),))
    second = CheckResult((Sample("fleetwatch_other_ratio", 0.5),))
    table.set_checks("a", [first, second], keeper)
    kept_first = table.states["a"].checks[0]
    table.set_checks(
        "a", [UNCHANGED, CheckResult((Sample("fleetwatch_other_ratio", 0.75),))], keeper
    )
    assert table.states["a"].checks[0] is kept_first
    snap = build_snapshot(table, families, CycleStats(), CycleSettings(300, 10, 8))
    text = render_metrics(snap)
    assert b'fleetwatch_test_value{cluster="a"} 1\n' in text
    assert b'fleetwatch_other_ratio{cluster="a"} 0.75\n' in text


def test_a_result_that_is_not_unicode_is_dropped_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = one_cluster()
    good = CheckResult((Sample("fleetwatch_test_value", 1),))
    bad = CheckResult((Sample("fleetwatch_test_value", 2, {"node": "\ud800"}),))
    with caplog.at_level("WARNING"):
        table.set_checks("a", [bad, good], Encoder(TEST_FAMILIES))
    assert "cluster a: a check result was dropped" in caplog.text
    snap = build_snapshot(table, TEST_FAMILIES, CycleStats(), CycleSettings(300, 10, 8))
    text = render_metrics(snap)
    assert b'fleetwatch_test_value{cluster="a"} 1\n' in text
    assert b'fleetwatch_test_value{cluster="a",node' not in text


@pytest.mark.parametrize(
    ("keep", "lines"),
    [
        ({"fleetwatch_test_value"}, b'fleetwatch_test_value{cluster="a"} 1\n'),
        ({"fleetwatch_test_events_total"}, b'fleetwatch_test_events_total{cluster="a"} 2\n'),
        (set(), b""),
    ],
)
def test_only_keeps_the_samples_of_the_families_named_and_the_sd_groups(
    keep: set[str], lines: bytes
) -> None:
    result = CheckResult(
        (Sample("fleetwatch_test_events_total", 2), Sample("fleetwatch_test_value", 1)),
        (TargetGroup(("t:1",)),),
    )
    kept = Families(TEST_FAMILIES).encode("a", only(result, frozenset(keep)))
    assert kept.text == lines
    assert kept.sd == b'{"targets":["t:1"],"labels":{"cluster":"a"}}'
    encoder = Encoder(TEST_FAMILIES)
    whole = encoder.keep("a", result)
    assert whole is not None
    assert encoder.only(whole, frozenset(keep)) == kept
