"""The rules, as a table: every transition of docs/reactor.md's statuses, cascade and gate.

Each case is a sequence of steps against cluster ``c1`` (notifications shaped like
Alertmanager 0.25's, and app operations) and the expected end: status, apps, outages.
The steps go through the whole pure path (webhook bytes -> signals -> state machine) and
the real SQLite store, so the effects' SQL is checked along with the rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reactor import gate
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.metrics import ReactorMetrics
from reactor.service import Gated, Service
from reactor.statemachine import (
    AlertState,
    AppStatus,
    ClusterAlertState,
    DegradeApps,
    OpenOutage,
    Status,
    StatusAlert,
    apply,
)
from reactor.store import KnownCluster
from tests.helpers.reactor_helpers import open_store
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook


def on(starts: float, ends: float | None = None) -> dict[str, Any]:
    return alert(ONLINE, "c1", starts, ends)


def off(starts: float, ends: float | None = None) -> dict[str, Any]:
    return alert(OFFLINE, "c1", starts, ends)


@dataclass(frozen=True)
class N:
    """One notification carrying these alerts."""

    alerts: tuple[dict[str, Any], ...]

    def __init__(self, *alerts: dict[str, Any]) -> None:
        object.__setattr__(self, "alerts", alerts)


@dataclass(frozen=True)
class Deploy:
    app: str
    cluster: str
    refused: bool = False


@dataclass(frozen=True)
class Reassign:
    app: str
    cluster: str


@dataclass(frozen=True)
class Report:
    app: str
    reason: str


Step = N | Deploy | Reassign | Report

DEPLOYED = ("c1", "DEPLOYED", None)
PENDING = ("c1", "PENDING", None)
CASCADED = ("c1", "DEGRADED", "cluster_offline")
BROKEN = ("c1", "DEGRADED", "broken")


@dataclass(frozen=True)
class Case:
    id: str
    steps: list[Step]
    status: Status
    #: expected (cluster, status, reason) of apps; apps not named are as set up
    apps: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    outages: tuple[int, int] = (0, 0)  #: (opened, closed)


#: Set up before every case: apps on c1 (a1, a2 DEPLOYED; p PENDING; b DEGRADED "broken"),
#: and one app x DEPLOYED on c2.
SETUP = {"a1": DEPLOYED, "a2": DEPLOYED, "p": PENDING, "b": BROKEN, "x": ("c2", "DEPLOYED", None)}

CASES = [
    Case("unknown to online: nothing else changes", [N(on(0))], Status.ONLINE),
    Case(
        "online to offline: the cascade (DEPLOYED only)",
        [N(on(0)), N(on(0, 5), off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "offline to online: the restore, only what the outage degraded",
        [N(on(0)), N(on(0, 5), off(5)), N(off(5, 10), on(10))],
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "never online, then offline: no cascade",
        [N(off(5))],
        Status.OFFLINE,
        {},
        (0, 0),
    ),
    Case(
        "never online, offline, online, offline: one cascade, from the second",
        [N(off(1)), N(off(1, 2), on(2)), N(on(2, 5), off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "the same offline notification three times: one cascade",
        [N(on(0)), N(on(0, 5), off(5)), N(on(0, 5), off(5)), N(on(0, 5), off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "the same recovery three times: one restore",
        [N(on(0)), N(off(5))] + [N(off(5, 10), on(10))] * 3,
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "a resolved delivered before its firing: the late firing changes nothing",
        [N(on(0)), N(off(5, 8)), N(off(5))],
        Status.UNKNOWN,  # the Online since 0 ended when the Offline since 5 began
        {},
        (0, 0),
    ),
    Case(
        "a stale firing after the newer resolved: ignored, no second cascade",
        [N(on(0)), N(off(5)), N(off(5, 10), on(10)), N(off(5))],
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "recovery: Online firing before Offline resolved",
        [N(on(0)), N(on(0, 5), off(5)), N(on(10)), N(off(5, 10))],
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "recovery: Offline resolved before Online firing (UNKNOWN restores nothing, then ONLINE)",
        [N(on(0)), N(on(0, 5), off(5)), N(off(5, 10)), N(on(10))],
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "Offline resolved and no Online yet: UNKNOWN, nothing restored",
        [N(on(0)), N(on(0, 5), off(5)), N(off(5, 10))],
        Status.UNKNOWN,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "lost resolved of Online: the later Offline still wins, and the later Online after it",
        [N(on(0)), N(off(5)), N(on(10))],
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "lost resolved of Online, cluster still down: OFFLINE by the latest startsAt",
        [N(on(0)), N(off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "grace period: probes failing (another alert) changes nothing",
        [N(on(0)), N(alert("FleetClusterProbeFailing", "c1", 3))],
        Status.ONLINE,
        {},
        (0, 0),
    ),
    Case(
        "grace period then OFFLINE through a passing UNKNOWN: still cascades",
        [N(on(0)), N(on(0, 3)), N(alert("FleetClusterProbeFailing", "c1", 3)), N(off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "an ONLINE older than the outage does not close it (nor reads ONLINE: it has ended)",
        [N(on(0)), N(on(0, 5), off(5)), N(off(5, 9)), N(on(3))],
        Status.UNKNOWN,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "older firing: Offline resolved, the old Online's resolved lost: UNKNOWN, not ONLINE",
        [N(on(0)), N(off(5)), N(off(5, 10))],
        Status.UNKNOWN,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "older firing: ...and the old Online repeated changes nothing",
        [N(on(0)), N(off(5)), N(off(5, 10)), N(on(0)), N(on(0))],
        Status.UNKNOWN,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "older firing: ...then a new Online restores",
        [N(on(0)), N(off(5)), N(off(5, 10)), N(on(0)), N(on(12))],
        Status.ONLINE,
        {},
        (1, 1),
    ),
    Case(
        "older firing: an Online older than a firing Offline never wins, whatever the order",
        [N(on(0)), N(off(5)), N(on(0)), N(off(5)), N(on(0))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "ONLINE and a later OFFLINE in one notification: cascades as in two notifications",
        [N(on(0), off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "...the same two the other way round in one notification: the same",
        [N(off(5), on(0))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "...and in two notifications delivered late first: the same",
        [N(off(5)), N(on(0))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "...and with the Online already resolved: the same",
        [N(on(0, 5), off(5))],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "an Online later than the Offline in one notification (never ONLINE before): no outage",
        [N(off(5), on(8))],
        Status.ONLINE,
        {},
        (0, 0),
    ),
    Case(
        "a flap inside one notification (OFFLINE then a later ONLINE): no outage",
        [N(on(0)), N(on(0, 5), off(5), off(5, 6), on(6))],
        Status.ONLINE,
        {},
        (0, 0),
    ),
    Case(
        "degraded for another reason during the outage: survives the recovery",
        [N(on(0)), N(off(5)), Report("a1", "crashloop"), N(off(5, 10), on(10))],
        Status.ONLINE,
        {"a1": ("c1", "DEGRADED", "crashloop")},
        (1, 1),
    ),
    Case(
        "reassigned during the outage: PENDING on the new cluster, not restored",
        [N(on(0)), N(off(5)), Reassign("a1", "c2"), N(off(5, 10), on(10))],
        Status.ONLINE,
        {"a1": ("c2", "PENDING", None)},
        (1, 1),
    ),
    Case(
        "deployed elsewhere during the outage: stays there, DEPLOYED",
        [N(on(0)), N(off(5)), Deploy("a1", "c2"), N(off(5, 10), on(10))],
        Status.ONLINE,
        {"a1": ("c2", "DEPLOYED", None)},
        (1, 1),
    ),
    Case(
        "deployment to the OFFLINE cluster: refused, nothing changes",
        [N(on(0)), N(off(5)), Deploy("p", "c1", refused=True), Deploy("x", "c1", refused=True)],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED},
        (1, 0),
    ),
    Case(
        "deployed while UNKNOWN inside an outage, then OFFLINE again: joins the outage",
        [
            N(on(0)),
            N(on(0, 5), off(5)),
            N(off(5, 9)),
            Deploy("p", "c1"),
            N(off(12)),
        ],
        Status.OFFLINE,
        {"a1": CASCADED, "a2": CASCADED, "p": CASCADED},
        (1, 0),
    ),
    Case(
        "...and the recovery restores it with the others",
        [
            N(on(0)),
            N(on(0, 5), off(5)),
            N(off(5, 9)),
            Deploy("p", "c1"),
            N(off(12)),
            N(off(12, 15), on(15)),
        ],
        Status.ONLINE,
        {"p": DEPLOYED},
        (1, 1),
    ),
    Case(
        "two outages in a row: two cascades, two restores",
        [
            N(on(0)),
            N(on(0, 5), off(5)),
            N(off(5, 10), on(10)),
            N(on(10, 20), off(20)),
            N(off(20, 30), on(30)),
        ],
        Status.ONLINE,
        {},
        (2, 2),
    ),
    Case(
        "a deployment clears a cluster_offline degradation (the app leaves the outage)",
        [N(on(0)), N(off(5)), N(off(5, 9)), Deploy("a1", "c1"), N(on(10))],
        Status.ONLINE,
        {"a1": DEPLOYED},
        (1, 1),
    ),
]


def notify(service: Service, *alerts: dict[str, Any]) -> None:
    parsed = status_signals(parse_webhook(json.dumps(webhook(*alerts)).encode()))
    service.apply_signals(parsed.signals)


def run(service: Service, step: Step) -> None:
    if isinstance(step, N):
        notify(service, *step.alerts)
    elif isinstance(step, Deploy):
        if step.refused:
            with pytest.raises(Gated, match=r"cluster 'c1' is OFFLINE"):
                service.deploy(step.app, step.cluster)
        else:
            service.deploy(step.app, step.cluster)
    elif isinstance(step, Reassign):
        service.reassign(step.app, step.cluster)
    else:
        service.report(step.app, AppStatus.DEGRADED, step.reason)


@pytest.fixture
def service(db_path: Path) -> Any:
    """The service over each store in turn (db_path is parametrised: sqlite, postgresql)."""
    store = open_store(db_path)
    svc = Service(store, ReactorMetrics(CollectorRegistry()))
    svc.add_cluster("c1", "https://127.0.0.1:6443", "/nonexistent/c1.yaml")
    svc.add_cluster("c2", "https://127.0.0.1:6444", "/nonexistent/c2.yaml")
    for name, (cluster, status, reason) in SETUP.items():
        svc.add_app(name, cluster)
        if status == "DEPLOYED":
            svc.deploy(name, cluster)
        elif status == "DEGRADED":
            svc.report(name, AppStatus.DEGRADED, reason)
    yield svc
    store.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_transitions(service: Service, case: Case) -> None:
    for step in case.steps:
        run(service, step)
    assert service.cluster("c1").state.status is case.status
    expected = {**SETUP, **case.apps}
    assert {a.name: (a.cluster, a.status.value, a.reason) for a in service.apps()} == expected
    metrics = service.metrics
    assert metrics is not None
    opened = metrics.registry.get_sample_value("fleetwatch_reactor_outages_opened_total")
    closed = metrics.registry.get_sample_value("fleetwatch_reactor_outages_closed_total")
    assert (opened, closed) == case.outages
    # c2 never had a signal: it stays UNKNOWN, its app untouched by c1's story.
    assert service.cluster("c2").state.status is Status.UNKNOWN


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_cd_mirrors_read_of_the_clusters_says_what_their_alert_states_say(
    service: Service, case: Case
) -> None:
    """The CD mirror reads each cluster's stored status (``Transaction.known_clusters``),
    not the alert state it is kept from: after every case, both say the same."""
    for step in case.steps:
        run(service, step)
    with service.store.read() as tx:
        derived = [
            KnownCluster(c.name, c.endpoint, c.kubeconfig_secret_ref, c.state.status, c.outage_id)
            for c in tx.clusters()
        ]
        assert tx.known_clusters() == derived


def test_counts_of_one_cascade_and_restore(service: Service) -> None:
    notify(service, on(0))
    notify(service, on(0, 5), off(5))
    notify(service, on(0, 5), off(5))
    notify(service, off(5, 10), on(10))
    registry = service.metrics.registry if service.metrics else None
    assert registry is not None
    assert registry.get_sample_value("fleetwatch_reactor_apps_degraded_total") == 2
    assert registry.get_sample_value("fleetwatch_reactor_apps_restored_total") == 2


# -- the pure function on its own ------------------------------------------------------


def firing(starts: int) -> AlertState:
    return AlertState(firing=True, starts_at=starts)


def resolved(starts: int, ends: int) -> AlertState:
    return AlertState(firing=False, starts_at=starts, ends_at=ends)


def test_nothing_newer_is_no_change() -> None:
    state = ClusterAlertState(online=firing(10), was_online=True)
    same = apply(state, [(StatusAlert.ONLINE, firing(10)), (StatusAlert.ONLINE, firing(5))])
    assert not same.changed and same.effects == () and same.state is state


def test_resolved_is_newer_than_its_firing_and_older_than_a_later_instance() -> None:
    state = ClusterAlertState(online=firing(10))
    after = apply(state, [(StatusAlert.ONLINE, resolved(10, 20))]).state
    assert after.status is Status.UNKNOWN and after.status_since == 20
    assert apply(after, [(StatusAlert.ONLINE, firing(30))]).state.status is Status.ONLINE


def test_tie_of_both_firing_is_offline() -> None:
    state = apply(
        ClusterAlertState(), [(StatusAlert.ONLINE, firing(5)), (StatusAlert.OFFLINE, firing(5))]
    ).state
    assert state.status is Status.OFFLINE


def test_opening_an_outage_degrades() -> None:
    state = ClusterAlertState(online=firing(0), was_online=True)
    t = apply(state, [(StatusAlert.OFFLINE, firing(5))])
    assert t.effects == (OpenOutage(started_at=5), DegradeApps())
    assert t.state.outage_since == 5 and t.state.status_since == 5


def test_a_firing_alert_older_than_the_other_alert_has_ended() -> None:
    # The Online since 0 was never resolved, but an Offline began at 5 and resolved at 10.
    state = ClusterAlertState(online=firing(0), offline=resolved(5, 10))
    assert (state.status, state.status_since) == (Status.UNKNOWN, 10)
    # The Offline since 5 is still firing: OFFLINE, not ONLINE from the older Online.
    state = ClusterAlertState(online=firing(0), offline=firing(5))
    assert (state.status, state.status_since) == (Status.OFFLINE, 5)
    # And the other way round: an Offline older than a resolved Online has ended too.
    state = ClusterAlertState(online=resolved(8, 9), offline=firing(5))
    assert (state.status, state.status_since) == (Status.UNKNOWN, 9)


def test_a_second_resolution_of_one_instance_is_no_news() -> None:
    """Two reactors resolving the same instance at their own times change nothing twice."""
    state = ClusterAlertState(online=firing(10), was_online=True)
    first = apply(state, [(StatusAlert.ONLINE, resolved(10, 20))])
    assert first.changed
    for ends in (19, 20, 25):
        again = apply(first.state, [(StatusAlert.ONLINE, resolved(10, ends))])
        assert not again.changed and again.state is first.state


def inferred(starts: int, ends: int) -> AlertState:
    """Resolved because a reconciliation no longer found it listed (provisional)."""
    return AlertState(firing=False, starts_at=starts, ends_at=ends, inferred=True)


def test_an_inferred_resolution_is_revived_by_the_same_instance_firing() -> None:
    """An Alertmanager restarted empty, then the OFFLINE seen again (re-sent, a repeat, a
    later listing): OFFLINE again, and the apps deployed while it read UNKNOWN join the
    outage that is still open."""
    state = ClusterAlertState(online=resolved(0, 5), offline=firing(5), outage_since=5)
    gone = apply(state, [(StatusAlert.OFFLINE, inferred(5, 9))])
    assert gone.changed and gone.state.status is Status.UNKNOWN and gone.effects == ()
    back = apply(gone.state, [(StatusAlert.OFFLINE, firing(5))])
    assert back.changed and back.state.status is Status.OFFLINE
    assert back.state.offline == firing(5) and back.state.outage_since == 5
    assert back.effects == (DegradeApps(),)
    # ...and a later reconciliation that no longer finds it resolves it again.
    again = apply(back.state, [(StatusAlert.OFFLINE, inferred(5, 12))])
    assert again.changed and again.state.status is Status.UNKNOWN


def test_only_alertmanagers_own_resolution_is_final() -> None:
    state = ClusterAlertState(online=firing(0), was_online=True)
    told = apply(state, [(StatusAlert.ONLINE, resolved(0, 7))]).state
    # A late copy of the firing (an HA peer's, a retry) changes nothing...
    for late in (firing(0), inferred(0, 9)):
        assert not apply(told, [(StatusAlert.ONLINE, late)]).changed
    # ...while Alertmanager's resolution makes an inferred one final, its endsAt the true one.
    guessed = apply(state, [(StatusAlert.ONLINE, inferred(0, 9))]).state
    final = apply(guessed, [(StatusAlert.ONLINE, resolved(0, 7))])
    assert final.changed and final.state.online == resolved(0, 7)
    assert final.state.status_since == 7
    assert not apply(final.state, [(StatusAlert.ONLINE, firing(0))]).changed


def test_a_second_inferred_resolution_of_one_instance_is_no_news() -> None:
    """Replicas reconciling together: the first inferred resolution stays."""
    state = ClusterAlertState(offline=firing(5))
    first = apply(state, [(StatusAlert.OFFLINE, inferred(5, 9))])
    again = apply(first.state, [(StatusAlert.OFFLINE, inferred(5, 10))])
    assert first.changed and not again.changed and again.state is first.state


def test_online_then_offline_is_one_outage_however_batched() -> None:
    one = apply(
        ClusterAlertState(), [(StatusAlert.ONLINE, firing(0)), (StatusAlert.OFFLINE, firing(5))]
    )
    first = apply(ClusterAlertState(), [(StatusAlert.ONLINE, firing(0))])
    two = apply(first.state, [(StatusAlert.OFFLINE, firing(5))])
    reversed_first = apply(ClusterAlertState(), [(StatusAlert.OFFLINE, firing(5))])
    reversed_two = apply(reversed_first.state, [(StatusAlert.ONLINE, firing(0))])
    assert one.effects == two.effects == reversed_two.effects
    assert one.effects == (OpenOutage(started_at=5), DegradeApps())
    assert one.state == two.state == reversed_two.state


#: docs/reactor.md's gate: may a deployment go to a cluster in this status?
GATE = {Status.ONLINE: True, Status.UNKNOWN: True, Status.OFFLINE: False}


@pytest.mark.parametrize(("status", "allowed"), GATE.items())
def test_the_gate_refuses_exactly_the_statuses_it_exports(status: Status, allowed: bool) -> None:
    """``check`` and ``REFUSED`` (which a store tests under the cluster's lock) agree."""
    refusal = gate.check("c1", status)
    assert (refusal is None) is allowed
    assert (status not in gate.REFUSED) is allowed
    if refusal is not None:
        assert (refusal.cluster, refusal.status) == ("c1", status)
        assert refusal.message.startswith(f"cluster 'c1' is {status.value}")


def test_the_gate_table_names_every_status() -> None:
    assert set(GATE) == set(Status)
