"""The Event of a pause or resume (reactor.cd.events), and the writer's regarding."""

from __future__ import annotations

from reactor.cd.clustersecrets import ClusterSecret
from reactor.cd.events import (
    CONTROLLER,
    Change,
    Regarding,
    event_for,
    event_name,
    note_of,
    wants_event,
)
from reactor.cd.eventwriter import Applied, outage_of, regarding_of
from reactor.cd.ledger import Step
from reactor.cd.objects import KUSTOMIZATION, CdObject, Destination
from reactor.cd.orphans import RESUME_ORPHAN
from reactor.cd.rules import Decision, Verb

KS = Regarding("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "apps", "u1", "8")
#: 2026-12-06T03:00:00Z in µs
START_US = 1_796_526_000_000_000


def test_a_pause_event_names_the_object_the_cluster_the_outage_and_what_resumes_it() -> None:
    change = Change(Verb.PAUSE, "prod-1", "12", START_US)
    event = event_for(KS, change, "7", "reactor-0_abc", 1_796_526_060.25)
    assert event["apiVersion"] == "events.k8s.io/v1" and event["kind"] == "Event"
    assert event["metadata"] == {
        "name": event_name(KS, "7", Verb.PAUSE),
        "namespace": "flux-system",
    }
    assert event["regarding"] == {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": "apps",
        "uid": "u1",
        "resourceVersion": "8",
    }
    assert (event["reason"], event["action"], event["type"]) == (
        "PausedByOutage",
        "Pause",
        "Normal",
    )
    assert event["reportingController"] == CONTROLLER == "fleetwatch.io/reactor"
    assert event["reportingInstance"] == "reactor-0_abc"
    assert event["eventTime"] == "2026-12-06T03:01:00.250000Z"
    note = str(event["note"])
    assert "cluster prod-1 is OFFLINE (outage 12, started 2026-12-06T03:00:00Z)" in note
    assert "resumes it when the outage closes" in note


def test_a_resume_event_says_which_outage_ended_and_an_orphans_says_why() -> None:
    resumed = event_for(KS, Change(Verb.RESUME, "prod-1", "12", START_US), "9", "r", 0.0)
    assert (resumed["reason"], resumed["action"]) == ("ResumedAfterOutage", "Resume")
    assert "outage 12 of cluster prod-1 is over" in str(resumed["note"])
    orphan = note_of(Change(Verb.RESUME, "gone", "3", None, orphan=True))
    assert "left fleetwatch's store" in orphan and "no longer in fleetwatch's store" in orphan


def test_one_name_per_change_so_a_create_sent_twice_meets_409() -> None:
    assert event_name(KS, "7", Verb.PAUSE) == event_name(KS, "7", Verb.PAUSE)
    names = {event_name(KS, v, verb) for v in ("7", "9") for verb in (Verb.PAUSE, Verb.RESUME)}
    assert len(names) == 4
    long = Regarding("v1", "Secret", "argocd", "n" * 253, "u2", "1")
    assert len(event_name(long, "1", Verb.PAUSE)) == 253


def test_only_the_pause_and_the_resume_write_an_event() -> None:
    assert [v for v in Verb if wants_event(v)] == [Verb.PAUSE, Verb.RESUME]


def test_the_event_regards_the_patched_version_and_a_secret_in_cluster_secret_mode() -> None:
    obj = CdObject(
        KUSTOMIZATION, "flux-system", "apps", "u1", "7", Destination("secret://x/y"), False
    )
    pause = Step("flux:Kustomization/flux-system/apps", "c1", obj, Decision(Verb.PAUSE, "12"))
    regarding = regarding_of(Applied(pause, {"metadata": {"resourceVersion": "8"}}))
    assert regarding == KS
    assert outage_of(pause) == "12"
    secret = ClusterSecret("argocd", "cluster-c1", "u3", "4", "c1", True, "12")
    resume = Step(secret.key, "c1", secret, RESUME_ORPHAN)
    found = regarding_of(Applied(resume, {}))
    assert (found.api_version, found.kind, found.namespace, found.name) == (
        "v1",
        "Secret",
        "argocd",
        "cluster-c1",
    )
    assert found.resource_version == "4" and outage_of(resume) == "12"
