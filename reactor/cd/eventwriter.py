"""Writes the Event of each pause and resume a batch applied (``reactor.cd.events``).

Called by the actuator's ``_send`` once the batch's patches are answered, with those the
API server applied and the objects it answered; each Event then goes out through the
same client and the same fence as the patches (``reactor.cd.fence``: the Lease must
still be held, so a replica that lost it writes no Event), ``patches_in_flight`` at a
time. The outages' starts, for the notes, are read from the store once per batch.

An Event is a record, not an action: one that fails (the API refused it, did not
answer, or the store could not give the outage's start) is counted
(``fleetwatch_reactor_cd_events_total{result}``) and logged, and nothing else happens:
the pause or resume it records stands, and it is not retried (a retry could not tell a
lost answer from a lost write, and the next pass finds nothing left to do). A ``409``
is the same Event sent before (its name is the change's: ``reactor.cd.events``).

I/O (the management API, the store's read).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwatch.kube.kubeapi import KubeApiError
from reactor.cd.events import (
    EVENTS_PATH,
    Change,
    Regarding,
    event_for,
    wants_event,
)
from reactor.cd.fence import Fence
from reactor.cd.kubewrite import Fenced
from reactor.cd.ledger import Step, describe
from reactor.cd.metrics import CdMetrics
from reactor.cd.orphans import RESUME_ORPHAN
from reactor.cd.ports import Patcher
from reactor.cd.rules import Verb
from reactor.cd.storeops import StoreRunner, outage_starts
from reactor.store import StoreUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Applied:
    """A step whose patch the API server applied, and the object it answered."""

    step: Step
    answer: dict[str, Any]


def regarding_of(applied: Applied) -> Regarding:
    """The object as the Event's ``regarding`` names it, at the version the patch made."""
    target = applied.step.target
    kind = target.kind
    meta = applied.answer.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return Regarding(
        api_version=f"{kind.group}/{kind.version}" if kind.group else kind.version,
        kind=kind.kind,
        namespace=target.namespace,
        name=target.name,
        uid=target.uid,
        resource_version=str(version or target.resource_version),
    )


def outage_of(step: Step) -> str | None:
    """The outage a change is for: a pause's new mark, a resumed pause's old one."""
    return step.decision.mark if step.decision.verb is Verb.PAUSE else step.target.mark


class EventWriter:
    """The Events of the changes a batch applied (module docstring)."""

    def __init__(
        self,
        api: Patcher,
        backend: StoreRunner,
        metrics: CdMetrics,
        instance: str,
        clock: Callable[[], float],
        in_flight: int,
    ) -> None:
        self.api = api
        self.backend = backend
        self.metrics = metrics
        #: ``reportingInstance``: this replica's identity (its Lease holder name)
        self.instance = instance
        self.clock = clock
        self.in_flight = in_flight

    async def write(self, applied: Sequence[Applied], fence: Fence) -> None:
        todo = [a for a in applied if wants_event(a.step.decision.verb)]
        if not todo:
            return
        ids = sorted({int(o) for a in todo if (o := outage_of(a.step)) and o.isdigit()})
        try:
            starts = await self.backend.read(lambda s: outage_starts(s, ids)) if ids else {}
        except StoreUnavailable as exc:  # the note says the start is unknown
            log.warning("cd: outage starts not read for the Events' notes: %s", exc)
            starts = {}
        limit = asyncio.Semaphore(self.in_flight)

        async def one(done: Applied) -> None:
            step = done.step
            outage = outage_of(step)
            start = starts.get(int(outage)) if outage and outage.isdigit() else None
            orphan = step.decision is RESUME_ORPHAN
            change = Change(step.decision.verb, step.cluster, outage, start, orphan)
            regarding = regarding_of(done)
            body = event_for(
                regarding, change, step.target.resource_version, self.instance, self.clock()
            )
            path = EVENTS_PATH.format(namespace=regarding.namespace)
            async with limit:
                result = await self._create(step, path, body, fence)
            self.metrics.events.labels(result).inc()

        await asyncio.gather(*(one(done) for done in todo))

    async def _create(self, step: Step, path: str, body: dict[str, Any], fence: Fence) -> str:
        try:
            await self.api.create(path, body, fence.lease_guard(), timeout=fence.timeout)
        except Fenced:
            return "fenced"
        except KubeApiError as exc:
            if exc.status == 409:
                return "exists"
            log.warning("cd: the Event of %s was not written (it stands): %s", describe(step), exc)
            return "failed"
        except Exception:  # a surprise here must not undo nor hide the change it records
            log.exception("cd: the Event of %s was not written (it stands)", describe(step))
            return "failed"
        return "created"
