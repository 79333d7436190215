"""The CD objects process (``reactor.cd.objectlink``, ``reactor.cd.objectchild``), real:
``python -m reactor.cd.objectchild`` listing and watching the stand-in management
cluster's Flux and Argo CD objects, as ``fleetwatch reactor`` starts it.

Killed or hung, it is started again; what the reactor holds meanwhile stays (its apps
mirrored, ``/-/ready``), an object deleted while none watched is gone at the new
process's whole list, and an outage still pauses exactly its objects. It runs at nice 10
and ends with the reactor (``test_secretlink``: even one killed).
``fleetwatch_reactor_cd_watch_up`` says whether the list+watch answers, from either mode.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable

import pytest

from fleetwatch.common.metricnames import REACTOR_CD_WATCH_UP
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor import childproc
from reactor.cd.objectlink import ObjectsProcess
from reactor.cd.setup import CD_ACTUATOR
from tests.helpers.reactor_cd import FLEET, KS, Start, c1_paused
from tests.helpers.reactor_helpers import mirrored, notify, until
from tests.helpers.reactor_payloads import OFFLINE, alert
from tests.reactor.test_secretlink import alive, metric, niceness

pytestmark = pytest.mark.live

KUSTOMIZATIONS = BY_API_KIND[(KS, "Kustomization")]


def source_of(client: object) -> ObjectsProcess:
    source = client.app[CD_ACTUATOR].informer  # type: ignore[attr-defined]
    assert isinstance(source, ObjectsProcess)
    return source


async def test_a_killed_objects_process_is_started_again_and_nothing_held_is_lost(
    start: Start, mgmt: ManagementCluster, caplog: pytest.LogCaptureFixture
) -> None:
    client = await start()
    source = source_of(client)
    (first,) = source.pids
    assert niceness(first) == min(19, os.nice(0) + childproc.NICE)  # background work
    os.kill(first, signal.SIGKILL)
    # Deleted while no process watches: gone once the next one has listed.
    mgmt.state.store.delete(KUSTOMIZATIONS, "flux-system", "other")

    async def started_again() -> bool:
        return len(source.pids) == 2 and source.running

    await until(started_again, what="a new CD objects process")
    assert not alive(first)
    assert any("cd: the objects process ended (exit status -9)" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert (await client.get("/-/ready")).status == 200
    await until(
        lambda: mirrored(
            client,
            lambda apps: len(apps) == 7 and "flux:Kustomization/flux-system/other" not in apps,
        ),
        what="the object deleted meanwhile, no longer mirrored",
    )
    # The new process watches, and the actuator acts on what it sends.
    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: c1_paused(mgmt), what="c1's objects paused")

    second = source.pids[-1]
    await client.close()  # the reactor stops: the process ends with it
    assert not alive(second)


async def test_a_hung_objects_process_is_killed_and_started_again(
    start: Start,
    mgmt: ManagementCluster,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that stops sending (SIGSTOP: as a deadlock would look) is taken as hung
    once its heartbeats stop, killed, and its successor reads on."""
    monkeypatch.setattr(childproc, "SILENT_S", 1.5)
    monkeypatch.setattr(childproc, "HEARTBEAT_S", 0.2)
    client = await start()
    source = source_of(client)
    (hung,) = source.pids
    os.kill(hung, signal.SIGSTOP)

    async def replaced() -> bool:
        return len(source.pids) == 2 and source.running

    await until(replaced, what="a new CD objects process")
    assert not alive(hung)
    assert any(f"cd: the objects process (pid {hung}) sent nothing for 1.5s; killing it"
               in r.getMessage() for r in caplog.records)  # fmt: skip
    generation = source.generation
    mgmt.seed([{**FLEET[0], "metadata": {**FLEET[0]["metadata"], "name": "new"}}])

    async def seen() -> bool:
        return source.generation > generation and any(
            o["metadata"]["name"] == "new" for o in source.objects().values()
        )

    await until(seen, what="a new object sent by the new process")


@pytest.mark.parametrize("process", [True, False], ids=["process", "in-reactor"])
async def test_the_watch_s_health_is_a_metric(
    start: Start, mgmt: ManagementCluster, process: bool
) -> None:
    """0 while the API refuses the objects' lists and watches (a grant removed), 1 once it
    answers again; from the objects process as from an informer in the reactor."""
    client = await start(process=process)

    async def up() -> float:
        return metric(await (await client.get("/metrics")).text(), REACTOR_CD_WATCH_UP)

    assert await up() == 1
    mgmt.arm_fault(kind="error", status=403, reason="Forbidden", message="a grant removed")
    mgmt.close_watches()  # each watch opens again, and is refused
    await until(lambda: _is(up, 0), what="the watch's health at 0")
    mgmt.clear_faults()
    await until(lambda: _is(up, 1), what="the watch's health back at 1")


async def _is(read: Callable[[], Awaitable[float]], value: float) -> bool:
    return await read() == value
