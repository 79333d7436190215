"""The fence (reactor.cd.fence, docs/cd.md "Several replicas, one acts at a time"): the
actuator decides its patches, then our seam holds them between the decision and the write
(an asyncio.Event the test sets, as the concurrency limit or the connection pool would);
when the Lease lapsed meanwhile (the elector's clock driven by the test) or the pause's
outage closed meanwhile, no patch reaches the management API, each is counted, one line
is logged, and the action stays pending for the next pass. When neither happened, the
same patches go out. Not live: the store is SQLite in a temporary file; the management
API and the Lease are our seams."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.common import metricnames
from fleetwatch.kube.kubeapi import KubeApiError
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.cd.actuator import CdActuator
from reactor.cd.election import LeaderElector, LeaderMetrics
from reactor.cd.fence import OpenOutages
from reactor.cd.kubewrite import Guard
from reactor.cd.lease import LeaderElection
from reactor.cd.metrics import CdMetrics
from reactor.cd.settings import CdSettings
from reactor.service import Service
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_cd_seams import InlineRunner, listed_kustomization
from tests.helpers.reactor_helpers import until
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

OBJECTS = 20
IN_FLIGHT = 4
ELECTION = LeaderElection(namespace="default", lease_duration_s=15.0)
FENCED = metricnames.total(metricnames.REACTOR_CD_FENCED)
EVENTS = metricnames.total(metricnames.REACTOR_CD_EVENTS)
ACTIONS = metricnames.total(metricnames.REACTOR_CD_ACTIONS)


class Objects:
    """Our seam for the informer: the objects as listed, all at once."""

    synced = True
    generation = 0

    def __init__(self) -> None:
        self.items = {f"u{i}": listed_kustomization(i) for i in range(OBJECTS)}

    def objects(self) -> dict[str, dict[str, Any]]:
        return self.items


class Stall:
    """Our seam for ``KubeWriter.merge_patch``: each patch waits on ``release`` (the stall
    between the decision and the write), then awaits its guard as the client does as it
    writes the body, and only then reaches the "server" (``sent``)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = 0
        self.sent: list[tuple[str, Mapping[str, Any]]] = []
        self.events: list[tuple[str, Mapping[str, Any]]] = []
        self.before_event = asyncio.Event()
        self.before_event.set()

    async def merge_patch(
        self,
        path: str,
        patch: Mapping[str, Any],
        guard: Guard,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        self.waiting += 1
        await self.release.wait()
        await guard()
        self.sent.append((path, patch))
        return {"metadata": {"resourceVersion": "after"}}

    async def create(
        self,
        path: str,
        body: Mapping[str, Any],
        guard: Guard,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """The Event that follows an applied patch: through the same guard."""
        await self.before_event.wait()
        await guard()
        self.events.append((path, body))
        return dict(body)


class Leases:
    """Our seam for the Lease's requests: there is none, and every write is taken."""

    def __init__(self) -> None:
        self.version = 0

    async def send(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        if method == "GET" or body is None:
            raise KubeApiError(404, "not_found", "no Lease")
        self.version += 1
        written = json.loads(json.dumps(body))
        written["metadata"]["resourceVersion"] = str(self.version)
        return dict(written)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def notify(service: Service, name: str, minutes: float) -> None:
    body = json.dumps(webhook(alert(name, "c1", minutes))).encode()
    service.apply_signals(status_signals(parse_webhook(body)).signals)


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.store = SQLiteStore(tmp_path / "fleetwatch.db")
        self.service = Service(self.store)
        self.service.add_cluster("c1", "https://c1.test:6443", "secret://flux-system/c1-kubeconfig")
        notify(self.service, ONLINE, 0)
        self.registry = CollectorRegistry()
        self.clock = Clock()
        self.elector = LeaderElector(
            Leases(), ELECTION, "default", LeaderMetrics(self.registry), clock=self.clock
        )
        self.stall = Stall()
        settings = CdSettings(flux=True, patches_in_flight=IN_FLIGHT, leader_election=ELECTION)
        self.actuator = CdActuator(
            InlineRunner(self.service),
            Objects(),
            self.stall,
            settings,
            CdMetrics(self.registry),
            asyncio.Event(),
            leader=self.elector,
        )

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


@pytest.fixture
async def setup(tmp_path: Path) -> Setup:
    found = Setup(tmp_path)
    assert await found.elector.try_acquire_or_renew()
    await found.actuator.run_pass(full=True)  # mirrors the objects: c1 ONLINE, nothing sent
    assert found.stall.waiting == 0
    return found


@pytest.mark.parametrize("meanwhile", ["nothing", "lease_lapses", "outage_closes"])
async def test_a_patch_held_between_its_decision_and_its_write_is_sent_only_if_still_right(
    setup: Setup, meanwhile: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="reactor.cd")
    notify(setup.service, OFFLINE, 5)  # the outage opens: every object is to be paused
    setup.actuator.outages_moved()
    running = asyncio.create_task(setup.actuator.run_pass(full=False))
    # Decided: IN_FLIGHT patches held in the seam, the others behind the concurrency limit.
    await until(lambda: setup.stall.waiting == IN_FLIGHT, 5, what="the patches held")
    if meanwhile == "lease_lapses":  # no renewal for a lease duration: another may act
        setup.clock.now += ELECTION.lease_duration_s
    elif meanwhile == "outage_closes":  # the recovery, taken by another replica
        notify(setup.service, ONLINE, 10)
    setup.stall.release.set()
    await running

    lines = [r.getMessage() for r in caplog.records if "not sent" in r.getMessage()]
    if meanwhile == "nothing":
        assert len(setup.stall.sent) == OBJECTS
        assert all(p["spec"] == {"suspend": True} for _, p in setup.stall.sent)
        assert setup.sample(ACTIONS, action="pause", result="applied") == OBJECTS
        assert lines == [] and setup.sample(FENCED, reason="lease") == 0
        assert len(setup.stall.events) == OBJECTS  # one Event per pause
        return
    reason = "lease" if meanwhile == "lease_lapses" else "outage_closed"
    assert setup.stall.sent == [] and setup.stall.events == []  # nothing reached the API
    assert setup.sample(FENCED, reason=reason) == OBJECTS
    assert setup.sample(ACTIONS, action="pause", result="fenced") == OBJECTS
    assert len(lines) == 1 and f"{OBJECTS} patch(es) not sent" in lines[0], lines
    assert ("Lease may have expired" if reason == "lease" else "closed meanwhile") in lines[0]

    if meanwhile == "lease_lapses":
        # Pending, not forgotten: once this replica holds the Lease again (as the next
        # acting replica would), the same pauses are decided again and sent.
        assert setup.sample(metricnames.REACTOR_CD_PENDING) == OBJECTS
        assert await setup.elector.try_acquire_or_renew()
        await setup.actuator.run_pass(full=True)
        assert len(setup.stall.sent) == OBJECTS
    else:
        # The outage is over: nothing is left to do (the objects were never paused).
        await setup.actuator.run_pass(full=True)
        assert setup.stall.sent == [] and setup.sample(metricnames.REACTOR_CD_PENDING) == 0


async def test_an_event_is_not_sent_by_a_replica_whose_lease_lapsed_after_the_patches(
    setup: Setup,
) -> None:
    setup.stall.release.set()
    setup.stall.before_event.clear()  # the patches go through, the Events wait
    notify(setup.service, OFFLINE, 5)
    setup.actuator.outages_moved()
    running = asyncio.create_task(setup.actuator.run_pass(full=False))
    await until(lambda: len(setup.stall.sent) == OBJECTS, 5, what="the pauses applied")
    setup.clock.now += ELECTION.lease_duration_s  # the Lease lapses before the Events leave
    setup.stall.before_event.set()
    await running
    assert setup.stall.events == []
    assert setup.sample(EVENTS, result="fenced") == OBJECTS
    assert setup.sample(EVENTS, result="created") == 0
    # The pauses stand, and a later pass (the Lease held again) writes no Event for them.
    assert await setup.elector.try_acquire_or_renew()
    await setup.actuator.run_pass(full=True)
    assert setup.sample(ACTIONS, action="pause", result="applied") == OBJECTS


async def test_the_open_outages_are_read_once_per_batch_and_again_after_a_stall() -> None:
    clock = Clock()
    reads: list[float] = []
    gate = asyncio.Event()
    gate.set()

    async def read() -> frozenset[int]:
        reads.append(clock.now)
        await gate.wait()
        return frozenset({7})

    outages = OpenOutages(read, clock, fresh_s=0.1)
    assert await asyncio.gather(*(outages.get() for _ in range(10))) == [frozenset({7})] * 10
    assert reads == [1000.0]  # ten writes at once: one read
    clock.now += 0.05
    await outages.get()
    assert len(reads) == 1  # still fresh
    clock.now += 0.5  # a stall: the next write reads again
    await outages.get()
    assert reads == [1000.0, 1000.55]
