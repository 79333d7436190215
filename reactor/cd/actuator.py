"""The CD actuator: makes the management cluster's objects match the store. It decides nothing.

One task (:meth:`CdActuator.run`), woken by three things: an object of the watched kinds
changed (the informer), a notification or a reset moved apps in or out of an outage (the
backend's outage listeners), and the resync timer (``--cd.resync-interval``). Each
:meth:`~CdActuator.run_pass`:

1. reads the objects the informer holds (``reactor.cd.objects``, once per
   ``resourceVersion``); unless something that matters changed (an object added, gone, or
   changed in its destination, pause or mark; an outage; the resync), it stops here, so a
   controller's status updates cost a dictionary walk and no database read;
2. **mirrors** them in the store (``reactor.cd.mirror``, ``reactor.cd.storeops``): new
   objects become apps of their clusters, gone ones are deleted, moved ones move;
3. **decides**, for every mirrored app, with ``reactor.cd.rules`` over the store's view
   and the object as last seen, and **acts**: first the store changes the rules ask for
   (an app a person resumed leaves its outage), then the patches (``reactor.cd.patches``,
   through ``reactor.cd.kubewrite``), several at once, each with the ``resourceVersion``
   it was decided on as a precondition.

A patch that succeeded is not sent again for the same ``resourceVersion``: the watch
brings the object's new version, which the rules then find in order. A ``409`` (the object
changed since) and a ``404`` (deleted) wait for the watch the same way; any other failure
is counted by reason and decided again at the next pass (the resync at the latest). With
``--cd.dry-run`` the decisions are logged and counted once per object version, and
neither the store nor the API is written.

**Several replicas: one acts.** With ``--cd.leader-election`` (on by default) only the
replica holding the Lease (``reactor.cd.lease``, ``reactor.cd.election``) mirrors and
patches; the others keep their informers listing and watching, and write nothing. It
checks :meth:`CdActuator.acting` before each write (the mirror's transaction, the store
changes, every patch), so a replica whose renewals fail stops before another may begin.
A notification (or discovery's upsert) may reach any replica, and only that one's backend
hears of it; so the acting one also reads a small stamp of the store's clusters and open
outages (``cluster_stamp``) every :data:`POLL_S`, and a change is a pass. Taking the
Lease starts from scratch: what this replica remembered of earlier actions is dropped,
and its first pass is a full resync.

**Orphans.** An object fleetwatch paused whose cluster left the store is resumed once it
has been one for a resync interval (``reactor.cd.orphans`` says why).

I/O (asyncio, the store threads, the management API).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from discovery.kubeapi import KubeApiError
from reactor.cd.metrics import STATES, CdMetrics
from reactor.cd.mirror import MirrorRow, plan
from reactor.cd.objects import KINDS, CdObject, Unreadable, read_object
from reactor.cd.orphans import RESUME_ORPHAN, Orphans
from reactor.cd.patches import patch_for
from reactor.cd.rules import Decision, Observed, StoreView, Verb, decide
from reactor.cd.settings import CdSettings
from reactor.cd.storeops import (
    apply_mirror,
    cluster_stamp,
    leave_outages,
    mirrored_apps,
    read_mirror,
)
from reactor.cd.targets import ClusterIndex
from reactor.service import Service
from reactor.store import MirroredApp, StoreUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

#: After a wake, gather the changes of this long before a pass (a burst is one pass).
GATHER_S = 0.05
#: Seconds between two reads of the store's outage stamp by the acting replica of several:
#: how late it may learn of a notification another replica took.
POLL_S = 1.0


class StoreRunner(Protocol):
    """What the actuator needs of ``reactor.context.Backend``."""

    async def run(self, operation: Callable[[Service], T]) -> T: ...
    async def read(self, operation: Callable[[Service], T]) -> T: ...


class ObjectSource(Protocol):
    """What it needs of the informer."""

    @property
    def synced(self) -> bool: ...
    def objects(self) -> dict[str, dict[str, Any]]: ...


class Patcher(Protocol):
    """What it needs of ``reactor.cd.kubewrite.KubeWriter``."""

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]: ...


class Leadership(Protocol):
    """What it needs of ``reactor.cd.election.LeaderElector``."""

    def is_leader(self) -> bool: ...


Seen = CdObject | Unreadable


class CdActuator:
    """The loop of the module docstring."""

    def __init__(
        self,
        backend: StoreRunner,
        informer: ObjectSource,
        api: Patcher,
        settings: CdSettings,
        metrics: CdMetrics,
        wake: asyncio.Event,
        clock: Callable[[], float] = time.time,
        leader: Leadership | None = None,
    ) -> None:
        self.backend = backend
        self.informer = informer
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.wake = wake
        self.clock = clock
        #: uid -> (resourceVersion, what the object reads as)
        self._reads: dict[str, tuple[str, Seen | None]] = {}
        #: app name -> the object, and what of it the mirror and the rules look at
        self._objects: dict[str, Seen] = {}
        self._shapes: dict[str, object] = {}
        self._outages_moved = False
        #: app name -> the resourceVersion an action was sent (or logged) for
        self._acted: dict[str, str] = {}
        #: app name -> when an action for it was first decided and not yet done
        self._pending_since: dict[str, float] = {}
        self._unresolved: dict[str, str] = {}
        self.passes = 0
        #: None: this replica acts alone (no leader election)
        self.leader = leader
        self._resync_now = False
        self._stamp: object = None
        self._next_poll = 0.0
        self._orphans = Orphans(settings.resync_interval_s)

    def outages_moved(self) -> None:
        """A write moved apps in or out of an outage (``Backend.outage_listeners``)."""
        self._outages_moved = True
        self.wake.set()

    def acting(self) -> bool:
        """Does this replica act on the objects now (it alone, or it holds the Lease)?"""
        return self.leader is None or self.leader.is_leader()

    def leadership_changed(self, leading: bool) -> None:
        """The elector's listener: a replica that begins to act starts from scratch, with a
        full resync; one that stops has nothing pending any more."""
        self._acted.clear()
        self._pending_since.clear()
        self._orphans.reset()
        self._stamp = None
        self._resync_now = leading
        if not leading:  # the acting replica alone exports the objects and their actions
            self.metrics.objects.clear()
            self.metrics.unresolved.set(0)
            self.metrics.pending.set(0)
            self.metrics.pending_age.set(0)
        self.wake.set()

    async def run(self) -> None:
        """Until cancelled: wait for the first complete list, then a pass per wake-up and
        per resync interval. A store that cannot answer is retried at the next one."""
        while not self.informer.synced:
            await self.wake.wait()
            self.wake.clear()
        log.info("cd: first list complete, %d object(s)", len(self.informer.objects()))
        next_resync = 0.0
        while True:
            full = self._resync_now or time.monotonic() >= next_resync
            if full:
                next_resync = time.monotonic() + self.settings.resync_interval_s
                self._resync_now = False
            try:
                if self.acting():
                    await self._poll_outages()
                    await self.run_pass(full)
            except StoreUnavailable as exc:
                log.warning("cd: the store cannot answer (%s): retried at the next pass", exc)
            except Exception:  # a bug or a surprise: logged, and the next pass tries again
                log.exception("cd: the pass failed; retried at the next one")
            wait = max(0.0, next_resync - time.monotonic())
            if self.leader is not None and self.acting():
                wait = min(wait, max(0.0, self._next_poll - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), wait)
                await asyncio.sleep(GATHER_S)  # product pacing: one pass for a burst
            self.wake.clear()

    async def _poll_outages(self) -> None:
        """With several replicas: has another replica added or deleted a cluster, or moved
        apps in or out of an outage? Read at most every :data:`POLL_S`."""
        if self.leader is None or time.monotonic() < self._next_poll:
            return
        self._next_poll = time.monotonic() + POLL_S
        stamp = await self.backend.read(cluster_stamp)
        if self._stamp is not None and stamp != self._stamp:
            self._outages_moved = True
        self._stamp = stamp

    # -- one pass ------------------------------------------------------------------------

    async def run_pass(self, full: bool) -> None:
        changed = self._read_objects()
        moved, self._outages_moved = self._outages_moved, False
        if not (changed or moved or full):
            return
        self.passes += 1
        clusters, rows = await self.backend.read(read_mirror)
        mirror = plan(self._objects, ClusterIndex.of(clusters), {r.name: _row(r) for r in rows})
        if mirror.writes:
            if not self.acting():
                return
            result = await self.backend.run(lambda s: apply_mirror(s, mirror))
            mirror.unresolved.update(result.skipped)
            log.info(
                "cd: mirror: %d app(s) added (%d in an outage), %d moved, %d updated, %d removed",
                result.inserted,
                result.joined,
                result.moved,
                result.updated,
                result.deleted,
            )
            rows = await self.backend.read(mirrored_apps)
        self._report_unresolved(mirror.unresolved)
        await self._act(rows)
        orphans = self._orphans.due(self._objects, {r.name for r in rows}, self.clock())
        if orphans:
            await self._resume_orphans(orphans)
        self._export()
        if full:
            self.metrics.last_resync.set(self.clock())

    def _read_objects(self) -> bool:
        """Read what changed since the last pass; True when something the mirror or the
        rules look at changed (not merely a status)."""
        reads: dict[str, tuple[str, Seen | None]] = {}
        for uid, obj in self.informer.objects().items():
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            known = self._reads.get(uid)
            reads[uid] = known if known and known[0] == version else (version, read_object(obj))
        self._reads = reads
        objects = {seen.app_name: seen for _, seen in reads.values() if seen is not None}
        shapes = {name: _shape(seen) for name, seen in objects.items()}
        changed = shapes != self._shapes
        self._objects, self._shapes = objects, shapes
        return changed

    async def _act(self, rows: list[MirroredApp]) -> None:
        now = self.clock()
        todo: list[tuple[MirroredApp, CdObject, Decision]] = []
        for row in rows:
            obj = self._objects.get(row.name)
            if not isinstance(obj, CdObject):
                continue  # gone or unreadable since: the next mirror removes the row
            view = StoreView(row.cluster_status, row.cluster_outage_id, row.status, row.outage_id)
            decision = decide(view, Observed(obj.paused, obj.mark, obj.resumed_by_owner))
            if decision.verb is Verb.NOTHING:
                self._pending_since.pop(row.name, None)
                continue
            self._pending_since.setdefault(row.name, now)
            if self._acted.get(row.name) != obj.resource_version:
                todo.append((row, obj, decision))
        live = {row.name for row in rows}
        for name in [n for n in self._pending_since if n not in live]:
            del self._pending_since[name]
        if not todo:
            return
        if self.settings.dry_run:
            for row, obj, decision in todo:
                log.info("cd (dry run): would %s", _what(row, decision))
                self.metrics.actions.labels(decision.verb.value, "dry_run").inc()
                self._acted[row.name] = obj.resource_version
            return
        leaving = [(r.id, d.leave_outage) for r, _, d in todo if d.leave_outage is not None]
        if not self.acting():
            return
        if leaving:
            await self.backend.run(lambda s: leave_outages(s, leaving))
        results: Counter[tuple[str, str, str]] = Counter()
        limit = asyncio.Semaphore(self.settings.patches_in_flight)
        stamp = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")

        async def one(row: MirroredApp, obj: CdObject, decision: Decision) -> None:
            patch = patch_for(decision, obj, stamp)
            assert patch is not None
            async with limit:
                result = await self._patch(obj, decision, patch, _what(row, decision))
            results[(row.cluster, decision.verb.value, result)] += 1

        await asyncio.gather(*(one(*item) for item in todo))
        for (cluster, verb, result), count in sorted(results.items()):
            log.info("cd: cluster %s: %s %d object(s): %s", cluster, verb, count, result)

    async def _patch(
        self, obj: CdObject, decision: Decision, patch: dict[str, Any], what: str
    ) -> str:
        name, verb = obj.app_name, decision.verb.value
        if not self.acting():  # the Lease was lost while the pass ran: another one acts
            log.debug("cd: %s: not sent, this replica no longer acts", what)
            return "abandoned"
        try:
            await self.api.merge_patch(obj.path, patch)
        except KubeApiError as exc:
            if exc.status in (404, 409):
                result = "gone" if exc.status == 404 else "conflict"
                self._acted[name] = obj.resource_version  # the watch brings what is new
                log.debug("cd: %s: %s (%s)", what, result, exc)
            else:
                result = "failed"
                self.metrics.failures.labels(exc.reason).inc()
                log.warning("cd: %s failed, retried at the next pass: %s", what, exc)
            self.metrics.actions.labels(verb, result).inc()
            return result
        self._acted[name] = obj.resource_version
        self._pending_since.pop(name, None)
        self.metrics.actions.labels(verb, "applied").inc()
        log.debug("cd: %s: done", what)
        return "applied"

    async def _resume_orphans(self, orphans: list[CdObject]) -> None:
        """Resume what fleetwatch paused and no cluster of the store holds any more."""
        stamp = datetime.fromtimestamp(self.clock(), UTC).isoformat().replace("+00:00", "Z")
        limit = asyncio.Semaphore(self.settings.patches_in_flight)

        async def one(obj: CdObject) -> None:
            what = f"resume {obj.app_name} ({RESUME_ORPHAN.why}; paused for outage {obj.mark})"
            if self.settings.dry_run:
                log.info("cd (dry run): would %s", what)
                self.metrics.actions.labels(Verb.RESUME.value, "dry_run").inc()
                self._acted[obj.app_name] = obj.resource_version
                return
            patch = patch_for(RESUME_ORPHAN, obj, stamp)
            assert patch is not None
            async with limit:
                result = await self._patch(obj, RESUME_ORPHAN, patch, what)
            if result == "applied":
                self.metrics.orphans_resumed.inc()
                resumed.append(obj.app_name)
                log.info("cd: %s: done", what)

        resumed: list[str] = []
        todo = [o for o in orphans if self._acted.get(o.app_name) != o.resource_version]
        await asyncio.gather(*(one(obj) for obj in todo))
        if resumed:
            shown = ", ".join(sorted(resumed)[:5]) + (", ..." if len(resumed) > 5 else "")
            log.warning(
                "cd: resumed %d object(s) fleetwatch had paused for an outage and whose "
                "cluster left the store (no outage can end their pause): %s",
                len(resumed),
                shown,
            )

    def _report_unresolved(self, unresolved: dict[str, str]) -> None:
        for name, reason in unresolved.items():
            if self._unresolved.get(name) != reason:
                log.warning("cd: %s is not mirrored: %s", name, reason)
        self._unresolved = dict(unresolved)
        self.metrics.unresolved.set(len(unresolved))

    def _export(self) -> None:
        counts = Counter(
            (obj.kind.source, _state(obj))
            for obj in self._objects.values()
            if isinstance(obj, CdObject) and obj.app_name not in self._unresolved
        )
        for source in sorted({k.source for k in KINDS}):
            for state in STATES:
                self.metrics.objects.labels(source, state).set(counts[(source, state)])
        now = self.clock()
        self.metrics.pending.set(len(self._pending_since))
        oldest = min(self._pending_since.values(), default=now)
        self.metrics.pending_age.set(max(0.0, now - oldest))


def _row(app: MirroredApp) -> MirrorRow:
    return MirrorRow(app.id, app.name, app.source, app.cluster, app.uid, app.paused, app.mark)


def _shape(seen: Seen) -> object:
    """What the mirror and the rules read of an object: all of it but its resourceVersion."""
    if isinstance(seen, Unreadable):
        return seen
    return (seen.uid, seen.destination, seen.paused, seen.mark, seen.resumed_by_owner)


def _state(obj: CdObject) -> str:
    if not obj.paused:
        return "running"
    return "paused_by_outage" if obj.mark is not None else "paused"


def _what(row: MirroredApp, decision: Decision) -> str:
    verb = decision.verb.value.replace("_", " ")
    return f"{verb} {row.name} (cluster {row.cluster}: {decision.why})"
