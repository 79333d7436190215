"""The CD rules (reactor.cd.rules) as a table, their invariants over every input, and the
stories of docs/cd.md played on object dicts with the real patches."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fleetwatch.standin.management.patches import merge_patch
from reactor.cd.objects import MARK, REQUESTED_AT, SKIP_RECONCILE, CdObject, read_object
from reactor.cd.patches import patch_for
from reactor.cd.rules import Decision, Observed, StoreView, Verb, decide, still_wanted
from reactor.statemachine import AppStatus, Status

ON, OFF, UNK = Status.ONLINE, Status.OFFLINE, Status.UNKNOWN
DEP, DEG, PEN = AppStatus.DEPLOYED, AppStatus.DEGRADED, AppStatus.PENDING

#: In outage 7: the cluster is OFFLINE in it, and it degraded the app.
IN_7 = StoreView(OFF, 7, DEG, 7)

CASES = [
    # (what, view, seen, verb, mark, leave)
    ("the outage opens", IN_7, Observed(False), Verb.PAUSE, "7", None),
    ("a passing UNKNOWN keeps it paused", StoreView(UNK, 7, DEG, 7), Observed(False),
     Verb.PAUSE, "7", None),
    ("paused for this outage", IN_7, Observed(True, "7"), Verb.NOTHING, None, None),
    ("a person paused it before", IN_7, Observed(True), Verb.NOTHING, None, None),
    ("a person resumed it", IN_7, Observed(False, "7"), Verb.DROP_MARK, None, 7),
    ("its owner took the pause back", IN_7, Observed(False, "7", resumed_by_owner=True),
     Verb.PAUSE, "7", None),
    ("a stale mark, resumed", IN_7, Observed(False, "5"), Verb.PAUSE, "7", None),
    ("our pause of outage 5 carries on", IN_7, Observed(True, "5"), Verb.REMARK, "7", None),
    ("a mark that is no id", IN_7, Observed(True, "junk"), Verb.REMARK, "7", None),
    ("restored: resumed", StoreView(ON, None, DEP), Observed(True, "7"), Verb.RESUME, None, None),
    ("restored, then UNKNOWN: resumed", StoreView(UNK, None, DEP), Observed(True, "7"),
     Verb.RESUME, None, None),
    ("OFFLINE never ONLINE: never resumed", StoreView(OFF, None, DEP), Observed(True, "7"),
     Verb.NOTHING, None, None),
    ("restored and resumed by hand", StoreView(ON, None, DEP), Observed(False, "7"),
     Verb.DROP_MARK, None, None),
    ("a person's pause, no outage", StoreView(ON, None, DEP), Observed(True), Verb.NOTHING,
     None, None),
    ("running, no outage", StoreView(ON, None, DEP), Observed(False), Verb.NOTHING, None, None),
    ("degraded for another reason", StoreView(ON, None, DEG), Observed(True, "7"),
     Verb.NOTHING, None, None),
    ("pending", StoreView(ON, None, PEN), Observed(True, "7"), Verb.NOTHING, None, None),
    ("left the outage (a person's resume)", StoreView(OFF, 8, DEP), Observed(False),
     Verb.NOTHING, None, None),
    ("left the outage, paused again, OFFLINE", StoreView(OFF, 8, DEP), Observed(True, "8"),
     Verb.NOTHING, None, None),
    ("storm guard: OFFLINE without an outage", StoreView(OFF, None, DEP), Observed(False),
     Verb.NOTHING, None, None),
]  # fmt: skip


@pytest.mark.parametrize(("what", "view", "seen", "verb", "mark", "leave"), CASES)
def test_rule_table(
    what: str,
    view: StoreView,
    seen: Observed,
    verb: Verb,
    mark: str | None,
    leave: int | None,
) -> None:
    decision = decide(view, seen)
    assert (decision.verb, decision.mark, decision.leave_outage) == (verb, mark, leave), what


def every_input() -> list[tuple[StoreView, Observed]]:
    views = [
        StoreView(status, open_outage, app_status, app_outage)
        for status, open_outage, app_status, app_outage in itertools.product(
            Status, (None, 7), AppStatus, (None, 7)
        )
    ]
    seen = [
        Observed(paused, mark, owner)
        for paused, mark, owner in itertools.product(
            (False, True), (None, "7", "5", ""), (False, True)
        )
    ]
    return list(itertools.product(views, seen))


def test_invariants_hold_for_every_input() -> None:
    for view, seen in every_input():
        d: Decision = decide(view, seen)
        case = (view, seen, d)
        if d.verb is Verb.RESUME:  # never while OFFLINE, never during its outage
            assert view.cluster_status is not OFF and not view.in_outage, case
            assert seen.paused and seen.mark is not None and view.app_status is DEP, case
        if d.verb in (Verb.PAUSE, Verb.REMARK):  # no outage, no pause (the storm guard)
            assert view.in_outage and d.mark == str(view.open_outage), case
        if seen.paused and seen.mark is None:  # someone else's pause is never touched
            assert d.verb is Verb.NOTHING, case
        if seen.mark is None:  # nothing of ours to undo
            assert d.verb in (Verb.NOTHING, Verb.PAUSE), case
        assert (d.leave_outage is not None) == (d.verb is Verb.DROP_MARK and view.in_outage)
        if d.leave_outage is not None:
            assert d.leave_outage == view.open_outage, case
        if d.verb is Verb.NOTHING:
            assert d.mark is None, case


# -- the stories, on object dicts ---------------------------------------------------------


def kustomization(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system", "uid": "u1",
                     "resourceVersion": "1"},
        "spec": {"interval": "10m", "prune": True, "kubeConfig": {"secretRef": {"name": "c1"}},
                 **spec},
    }  # fmt: skip


def application() -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "guestbook", "namespace": "argocd", "uid": "u2",
                     "resourceVersion": "1"},
        "spec": {"project": "default", "destination": {"name": "c1"}},
    }  # fmt: skip


def settle(obj: dict[str, Any], view: StoreView) -> tuple[dict[str, Any], list[Verb], StoreView]:
    """Decide and patch until nothing is left to do (the store change of a person's
    resume applied first, as the actuator does); returns the object, the verbs, the view."""
    verbs = []
    for _ in range(5):
        read = read_object(obj)
        assert isinstance(read, CdObject)
        d = decide(view, Observed(read.paused, read.mark, read.resumed_by_owner))
        if d.verb is Verb.NOTHING:
            return obj, verbs, view
        verbs.append(d.verb)
        if d.leave_outage is not None:
            view = StoreView(view.cluster_status, view.open_outage, DEP, None)
        patch = patch_for(d, read, "2026-12-02T10:00:00Z")
        assert patch is not None
        assert patch["metadata"]["resourceVersion"] == read.resource_version
        obj = merge_patch(obj, patch)
        obj["metadata"]["resourceVersion"] = str(int(read.resource_version) + 1)
    raise AssertionError(f"no fixed point: {verbs}")


RESTORED = StoreView(ON, None, DEP)


@pytest.mark.parametrize("make", [kustomization, application])
def test_an_outage_pauses_with_the_mark_and_its_end_resumes(make: Any) -> None:
    obj, verbs, _ = settle(make(), IN_7)
    assert verbs == [Verb.PAUSE]
    read = read_object(obj)
    assert isinstance(read, CdObject) and read.paused and read.mark == "7"
    obj, verbs, _ = settle(obj, RESTORED)
    assert verbs == [Verb.RESUME]
    assert MARK not in obj["metadata"]["annotations"]
    if obj["kind"] == "Kustomization":
        assert obj["spec"]["suspend"] is False
        assert obj["metadata"]["annotations"][REQUESTED_AT] == "2026-12-02T10:00:00Z"
    else:
        assert SKIP_RECONCILE not in obj["metadata"]["annotations"]


def test_paused_by_hand_before_the_outage_stays_paused() -> None:
    obj, verbs, _ = settle(kustomization(suspend=True), IN_7)
    assert verbs == []
    obj, verbs, _ = settle(obj, RESTORED)
    assert verbs == [] and obj["spec"]["suspend"] is True


def test_resumed_by_hand_during_the_outage_keeps_running() -> None:
    obj, _, view = settle(kustomization(), IN_7)
    obj = merge_patch(obj, {"spec": {"suspend": False}})  # kubectl patch: no controller
    obj, verbs, view = settle(obj, view)
    assert verbs == [Verb.DROP_MARK]
    assert view.app_outage is None and view.app_status is DEP  # the app left the outage
    assert obj["spec"]["suspend"] is False and MARK not in obj["metadata"]["annotations"]
    obj, verbs, _ = settle(obj, view)  # and stays running while the outage lasts
    assert verbs == []


def test_an_owner_that_reverts_both_is_paused_again() -> None:
    obj, _, view = settle(application(), IN_7)
    obj["metadata"].pop("annotations")  # an ApplicationSet without preservedFields
    obj, verbs, _ = settle(obj, view)
    assert verbs == [Verb.PAUSE]
    assert obj["metadata"]["annotations"] == {MARK: "7", SKIP_RECONCILE: "true"}


def test_a_flux_parent_taking_suspend_back_is_paused_again() -> None:
    obj, _, view = settle(kustomization(), IN_7)
    obj["spec"]["suspend"] = False  # a forced server-side apply: the mark stays
    obj["metadata"]["managedFields"] = [
        {"manager": "kustomize-controller", "operation": "Apply",
         "fieldsV1": {"f:spec": {"f:suspend": {}, "f:interval": {}}}},
        {"manager": "fleetwatch", "operation": "Update",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{MARK}": {}}}}},
    ]  # fmt: skip
    obj, verbs, _ = settle(obj, view)
    assert verbs == [Verb.PAUSE] and obj["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("decision", "open_outages", "wanted"),
    [
        (Decision(Verb.PAUSE, "7"), {7}, True),
        (Decision(Verb.PAUSE, "7"), {8}, False),  # closed since; another one opened
        (Decision(Verb.PAUSE, "7"), set(), False),
        (Decision(Verb.REMARK, "7"), set(), False),
        (Decision(Verb.PAUSE, None), {7}, False),  # no outage to be open: never sent
        (Decision(Verb.RESUME), set(), True),  # the others do not depend on an outage
        (Decision(Verb.DROP_MARK, leave_outage=7), set(), True),
    ],
)
def test_a_pause_is_still_wanted_only_while_its_outage_is_open(
    decision: Decision, open_outages: set[int], wanted: bool
) -> None:
    assert still_wanted(decision, open_outages) is wanted
