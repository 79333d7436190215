"""The exposition renders byte for byte what the reference exposition renders.

Each case of tests/helpers/exposition_cases.py is a cluster table (clusters, probes, check
results) put through ``ClusterTable`` and ``build_snapshot`` as the cycle does and rendered
by ``exporter.expose.render``; the reference is what the exposition of commit 8a3e263
rendered from the same state, recorded in tests/fixtures/exposition-8a3e263.json.gz.
``/metrics`` (plain, and gzipped with the process collectors appended) and
``/sd/control-plane`` must be the same bytes. The cases' target addresses later moved into
127.0.0.0/8 and the recording's ``/sd`` bytes were rewritten with them; 8a3e263 run again
renders exactly those bytes (below).

The recording is this test's oracle, kept as data: a commit's output does not change, and
the test needs neither git history nor old code to run. ``bench/exposition_baseline.py``
renders the same cases with 8a3e263's own code (a temporary checkout, a process of its
own) and checks that they are still the recording's bytes; ``--record`` writes the
recording again, from that commit, for a new case added to ``RECORDED``.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

from exporter.controlplane.kubesystem import CoreDNSSpread
from exporter.controlplane.report import FAMILIES, ControlPlaneReport, only, report_result
from exporter.expose.encodings import Encoder
from exporter.expose.render import render, render_metrics, render_sd
from exporter.expose.snapshot import CycleStats, Snapshot, build_snapshot, declared_families
from exporter.expose.textformat import EncodedChecks, Families
from exporter.model import (
    UNCHANGED,
    CheckResult,
    CycleSettings,
    Sample,
    TargetGroup,
    Unchanged,
)
from exporter.state import ClusterTable
from fleetwatch.discovery.clusters import Discovery
from tests.helpers.exposition_cases import (
    CASES,
    OTHER_FAMILIES,
    TEST_FAMILIES,
    changed,
    cluster,
    control_plane_reports,
    later,
    many_clusters,
    tables,
    with_additions,
)

#: What 8a3e263 rendered for each case (see the module's docstring).
REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "exposition-8a3e263.json.gz"


@cache
def reference() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(gzip.decompress(REFERENCE.read_bytes()))
    return loaded


def before_sd(key: str) -> bytes:
    """The reference's ``/sd/control-plane`` of the state recorded as ``key``."""
    return reference()[f"{key}/sd"].encode()


def before_metrics(key: str, snap: Snapshot) -> bytes:
    """The reference's ``/metrics`` of ``key``, with what was added since (``with_additions``)."""
    return with_additions(reference()[f"{key}/metrics"], snap)


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
    first = render(tables(control_plane_reports()))
    # The next phase: probes moved on, the same results encoded afresh (equal bytes).
    next_phase = tables(later())
    again = render(next_phase, previous=first)
    assert again.check_families is first.check_families
    assert again.sd_control_plane is first.sd_control_plane
    assert again.metrics.plain() == before_metrics("later", next_phase)
    assert 'reason="timeout"} 1' in again.metrics.plain().decode()
    # One cluster's results changed: rendered afresh.
    one_changed = tables(changed())
    third = render(one_changed, previous=again)
    assert third.check_families is not again.check_families
    assert third.metrics.plain() == before_metrics("changed", one_changed)
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
