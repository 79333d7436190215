"""The CD actuator's books (``reactor.cd.ledger``), without a store, an informer or a loop.

The live tests (``test_cd_live``, ``test_cd_argocd_live``, ``test_cd_dryrun_live``) show
the same behaviour end to end; here each rule of the books is one small case.
"""

from __future__ import annotations

from typing import Any

from reactor.cd.ledger import Ledger, Step
from reactor.cd.objects import KUSTOMIZATION, CdObject, Destination
from reactor.cd.rules import Decision, Verb

RESYNC = 60.0
PAUSE = Decision(Verb.PAUSE, mark="7", why="outage 7")
NOTHING = Decision(Verb.NOTHING)


def flux(name: str, version: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "team-a", "uid": name, "resourceVersion": version},
        "spec": {"interval": "10m", "kubeConfig": {"secretRef": {"name": "c1"}}, **spec},
    }


def step(version: str = "1", decision: Decision = PAUSE, name: str = "a") -> Step:
    target = CdObject(
        KUSTOMIZATION, "ns", name, name, version, Destination(argocd_name="c1"), False
    )
    return Step(name, "c1", target, decision)


def test_a_status_update_is_no_pass_and_a_changed_pause_is_one() -> None:
    books = Ledger(RESYNC)
    assert books.start_pass({"a": flux("a", "1")}, full=False)  # first sight
    with_status = {**flux("a", "2"), "status": {"conditions": [{"type": "Ready"}]}}
    assert not books.start_pass({"a": with_status}, full=False)
    assert books.start_pass({"a": with_status}, full=True)  # the resync
    assert books.start_pass({"a": flux("a", "3", suspend=True)}, full=False)
    assert books.passes == 3
    books.moved = True  # an outage moved: a pass, once
    assert books.start_pass({"a": flux("a", "3", suspend=True)}, full=False)
    assert not books.start_pass({"a": flux("a", "3", suspend=True)}, full=False)


def test_the_stamp_is_a_pass_when_it_changes_not_when_first_read() -> None:
    books = Ledger(RESYNC)
    books.stamp_read((1, 2))
    assert not books.moved
    books.stamp_read((1, 2))
    assert not books.moved
    books.stamp_read((1, 3))
    assert books.moved


def test_an_action_is_sent_once_per_version_and_pending_until_applied() -> None:
    books = Ledger(RESYNC)
    assert books.todo([step("1")], now=100.0) == [step("1")]
    books.record(step("1"), "failed", 101.0)  # decided again at the next pass
    assert books.todo([step("1")], now=102.0) == [step("1")]
    books.record(step("1"), "conflict", 103.0)  # the watch brings the new version
    assert books.todo([step("1")], now=104.0) == []
    assert books.pending(110.0) == (1, 10.0)
    assert books.todo([step("2")], now=111.0) == [step("2")]
    books.record(step("2"), "applied", 112.0)
    assert books.pending(113.0) == (0, 0.0)
    assert books.todo([step("2")], now=114.0) == []


def test_a_pause_undone_by_its_owner_waits_a_resync_interval() -> None:
    books = Ledger(RESYNC)
    books.record(step("1"), "applied", 100.0)
    assert books.todo([step("2")], now=100.0 + RESYNC - 1) == []  # held, and pending
    assert books.pending(100.0 + RESYNC - 1) == (1, 0.0)
    assert books.todo([step("3")], now=100.0 + RESYNC) == [step("3")]


def test_what_is_no_step_any_more_is_forgotten_and_nothing_to_do_is_not_pending() -> None:
    books = Ledger(RESYNC)
    books.record(step("1"), "applied", 100.0)
    books.todo([step("1", name="b")], now=100.0)
    assert set(books.acted) == set(books.paused) == set()
    assert books.todo([step("1", NOTHING, name="b")], now=101.0) == []
    assert books.pending(102.0) == (0, 0.0)


def test_a_dry_run_logs_once_per_version_and_stays_pending() -> None:
    books = Ledger(RESYNC)
    books.record(step("1"), "dry_run", 100.0)
    assert books.todo([step("1")], now=101.0) == []
    assert books.pending(101.0) == (1, 0.0)


def test_unresolved_objects_are_reported_when_new_or_for_another_reason() -> None:
    books = Ledger(RESYNC)
    assert books.report_unresolved({"a": "no cluster"}) == [("a", "no cluster")]
    assert books.report_unresolved({"a": "no cluster"}) == []
    assert books.report_unresolved({"a": "two clusters"}) == [("a", "two clusters")]


def test_an_orphan_is_resumed_after_the_grace_period_once_per_version() -> None:
    books = Ledger(RESYNC)
    books.start_pass({"a": flux("a", "1", suspend=True)}, full=True)
    books.objects = {"a": CdObject(KUSTOMIZATION, "ns", "a", "a", "1", Destination(), True, "7")}
    assert books.orphans_due(set(), set(), 100.0) == []
    (due,) = books.orphans_due(set(), set(), 100.0 + RESYNC)
    assert due.decision.verb is Verb.RESUME
    books.record(due, "applied", 100.0 + RESYNC)
    assert books.orphans_due(set(), set(), 101.0 + RESYNC) == []


def test_a_new_leader_forgets_what_was_sent_and_pending() -> None:
    books = Ledger(RESYNC)
    books.todo([step("1")], now=100.0)
    books.record(step("1"), "applied", 100.0)
    books.stamp_read((1,))
    books.forget()
    assert books.todo([step("1")], now=101.0) == [step("1")]
    assert books.stamp is None
