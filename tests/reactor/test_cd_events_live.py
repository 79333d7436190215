"""The Events of a pause and a resume, live (docs/cd.md, "Events"): the reactor on the
stand-in management cluster writes one ``events.k8s.io/v1`` Event per object it pauses
and per object it resumes, none on the passes after, none in a dry run; ``kubectl
describe`` and ``kubectl events`` (1.32) show them through the core view."""

from __future__ import annotations

import asyncio
import os
import shutil
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.common import metricnames
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import EVENTS
from reactor.cd.events import CONTROLLER
from reactor.cd.setup import CD_ACTUATOR
from tests.helpers.reactor_cd import C1_PAUSED, OBJECTS, Start, c1_offline, obj, state
from tests.helpers.reactor_helpers import mirrored, notify, until
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert

pytestmark = pytest.mark.live

EVENTS_TOTAL = metricnames.total(metricnames.REACTOR_CD_EVENTS)


def events(mgmt: ManagementCluster, reason: str | None = None) -> list[dict[str, Any]]:
    found = mgmt.state.store.items(EVENTS, "", lambda o: True)
    return [e for e in found if reason is None or e["reason"] == reason]


async def kubectl(mgmt: ManagementCluster, *args: str) -> str:
    """kubectl against the stand-in, off the loop the stand-in serves on."""
    env = {**os.environ, "KUBECONFIG": str(mgmt.kubeconfig)}
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_pause_and_a_resume_leave_one_event_each_on_every_object(
    start: Start,
    mgmt: ManagementCluster,
) -> None:
    client, registry = await c1_offline(start, mgmt, resync_interval_s=0.5)
    await until(lambda: len(events(mgmt, "PausedByOutage")) == len(C1_PAUSED))
    mark = state(mgmt, "apps")[1]
    assert mark is not None
    for event in events(mgmt, "PausedByOutage"):
        regarding = event["regarding"]
        seen = obj(mgmt, regarding["name"])
        assert regarding["uid"] == seen["metadata"]["uid"]
        assert regarding["kind"] == seen["kind"] and regarding["apiVersion"] == seen["apiVersion"]
        assert event["metadata"]["namespace"] == seen["metadata"]["namespace"]
        # The version the pause made: the object as the Event describes it.
        assert regarding["resourceVersion"] == seen["metadata"]["resourceVersion"]
        assert (event["action"], event["type"]) == ("Pause", "Normal")
        assert event["reportingController"] == CONTROLLER and event["reportingInstance"]
        assert "cluster c1 is OFFLINE" in event["note"]
        assert f"(outage {mark}, started 20" in event["note"]
    assert not any(e["regarding"]["name"] == "held" for e in events(mgmt))  # a person's
    # GET /apps says who paused each (the mirror's row, as the watch brought it).
    ks = "flux:Kustomization/flux-system/apps"
    await until(lambda: mirrored(client, lambda a: a[ks]["paused"] is not None))
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    assert apps[ks]["paused"] == {"by": "outage", "outage": mark}
    assert apps["flux:Kustomization/flux-system/held"]["paused"] == {"by": "person"}

    # Passes after the pause (a resync every 0.5 s) write no other Event.
    actuator = client.app[CD_ACTUATOR]
    passes = actuator.ledger.passes
    await until(lambda: actuator.ledger.passes >= passes + 3)
    assert len(events(mgmt)) == len(C1_PAUSED)

    await notify(client, alert(ONLINE, "c1", 10))
    await until(lambda: len(events(mgmt, "ResumedAfterOutage")) == len(C1_PAUSED))
    passes = actuator.ledger.passes
    await until(lambda: actuator.ledger.passes >= passes + 3)
    assert len(events(mgmt)) == 2 * len(C1_PAUSED)
    assert registry.get_sample_value(EVENTS_TOTAL, {"result": "created"}) == 2 * len(C1_PAUSED)
    assert registry.get_sample_value(EVENTS_TOTAL, {"result": "failed"}) == 0


async def test_a_failed_event_is_counted_and_the_pause_stands(
    start: Start,
    mgmt: ManagementCluster,
) -> None:
    registry = CollectorRegistry()
    client = await start(registry=registry)
    mgmt.arm_fault(kind="error", count=100, verb="create", resource="events.events.k8s.io")
    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: all(state(mgmt, n)[1] for n in C1_PAUSED))
    failed = {"result": "failed"}
    await until(lambda: registry.get_sample_value(EVENTS_TOTAL, failed) == len(C1_PAUSED))
    assert events(mgmt) == []
    assert all(state(mgmt, n)[0] for n in C1_PAUSED)  # paused, and not undone


async def test_a_dry_run_writes_no_event(
    start: Start,
    mgmt: ManagementCluster,
) -> None:
    registry = CollectorRegistry()
    client = await start(registry=registry, dry_run=True)
    await notify(client, alert(OFFLINE, "c1", 5))
    actions = metricnames.total(metricnames.REACTOR_CD_ACTIONS)
    would = {"action": "pause", "result": "dry_run"}
    await until(lambda: registry.get_sample_value(actions, would) == len(C1_PAUSED))
    assert events(mgmt) == [] and mgmt.counts().get("create events.events.k8s.io", 0) == 0


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_describe_and_events_show_the_pause_and_the_resume(
    start: Start,
    mgmt: ManagementCluster,
) -> None:
    client = await start()
    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: len(events(mgmt, "PausedByOutage")) == len(C1_PAUSED))
    await notify(client, alert(ONLINE, "c1", 10))
    await until(lambda: len(events(mgmt, "ResumedAfterOutage")) == len(C1_PAUSED))
    ns = OBJECTS["apps"]["metadata"]["namespace"]
    described = await kubectl(mgmt, "describe", "kustomization", "apps", "-n", ns)
    shown = described.split("Events:", 1)[1]
    assert "PausedByOutage" in shown and "ResumedAfterOutage" in shown
    assert CONTROLLER in shown and "Paused by fleetwatch: cluster c1 is OFFLINE" in shown
    listed = await kubectl(mgmt, "events", "-n", ns, "--for", "kustomization/apps")
    assert "PausedByOutage" in listed and "ResumedAfterOutage" in listed
    assert "Kustomization/apps" in listed and "is over" in listed
    # Argo CD's Application: the same, by its own kind.
    app = await kubectl(mgmt, "events", "-n", "argocd", "--for", "application/guestbook")
    assert "PausedByOutage" in app and "ResumedAfterOutage" in app
    print(described.split("Events:", 1)[1])
