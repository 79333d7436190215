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
   objects become apps of their clusters, gone ones are deleted, moved ones move. Only
   rows of the kinds this replica watches are touched (``reactor.cd.scope``); the others
   are counted and left alone (``reactor.cd.unwatched``);
3. **decides**, for every mirrored app, with ``reactor.cd.rules`` over the store's view
   and the object as last seen, and **acts**: first the store changes the rules ask for
   (an app a person resumed leaves its outage), then the patches (``reactor.cd.patches``,
   through ``reactor.cd.kubewrite``), several at once, each with the ``resourceVersion``
   it was decided on as a precondition.

With ``--cd.argocd.pause cluster-secret`` the informer also holds Argo CD's cluster
Secrets, and each is decided as one app standing for its cluster's Applications
(``reactor.cd.clustersecrets``): one patch per cluster. The Applications are then only
resumed or unmarked when an earlier pause of theirs is found (``reactor.cd.rules``). Each
thing to patch is a :class:`Step`, whichever it is.

An owner that undoes a pause (``reactor.cd.rules``) has it applied again at most once per
resync interval for the same outage (``reactor.cd.ledger``): an ApplicationSet
without ``preservedFields`` reverts the annotation the moment it is written, and
re-pausing at once would make the two patch the object back and forth without end.

Each pause and resume applied is followed by its Event (``reactor.cd.eventwriter``).

A patch that succeeded is not sent again for the same ``resourceVersion``: the watch
brings the object's new version, which the rules then find in order. A ``409`` (the object
changed since) and a ``404`` (deleted) wait for the watch the same way; any other failure
is counted by reason and decided again at the next pass (the resync at the latest).

**A dry run writes nothing**: no store row (the mirror is planned and previewed in
memory, ``reactor.cd.mirror.preview``, so the rules decide as if it were written), no
object, no Lease, no Event; each decision is logged and counted once per object version.

**Several replicas: one acts.** With ``--cd.leader-election`` (on by default) only the
replica holding the Lease (``reactor.cd.lease``, ``reactor.cd.election``) mirrors and
patches; the others keep their informers listing and watching, and write nothing. It
checks :meth:`CdActuator.acting` before each store write (the mirror's transaction, the
store changes), and every patch carries the fence's guard (``reactor.cd.fence``), asked
as its body is written: the Lease still held long enough, a pause's outage still open.
A notification (or discovery's upsert) may reach any replica, and only that one's backend
hears of it; so the acting one also reads a small stamp of the store's clusters and open
outages (``cluster_stamp``) every :data:`POLL_S`, and a change is a pass. Taking the
Lease starts from scratch: what this replica remembered of earlier actions is dropped,
and its first pass is a full resync.

**The first pass waits for the Secrets.** With ``--discovery.kubernetes`` the first pass
runs once discovery has listed the management cluster's Secrets too, as it waits for the
objects' own first list. A half-listed fleet resolves some objects wrongly: the Cluster
API Secret of ``c1`` listed and its Argo CD cluster Secret not yet makes an Application
naming ``c1`` "not mirrored: Argo CD knows no cluster Secret named c1" (measured: 1,000
such warnings at every start of the benchmark's reactor, bench/RESULTS.md), and
on a restart the mirror would delete its row, take the app out of its outage and, had
the list outlasted a resync interval, resume it as an orphan while its cluster is down.
Until then nothing is written (the objects and the Secrets listed are ``/-/ready``'s
conditions as well).

**Orphans.** An object (or cluster Secret) fleetwatch paused whose cluster left the store
is resumed once it has been one for a resync interval (``reactor.cd.orphans`` says why).

**What it remembers** between passes (each object read once per version, what was sent
for which version, what is pending and since when, each object's last pause, the
orphans' grace periods) is a :class:`~reactor.cd.ledger.Ledger`, pure, whose methods
answer with what to do; the actuator keeps only its collaborators and the loop's timers.

I/O (asyncio, the store threads, the management API); the pure work of a pass (the
objects read, the mirror planned, the rules applied) in a worker thread, off the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.common.foreground import paced
from fleetwatch.common.waits import wait_event
from fleetwatch.kube.kubeapi import KubeApiError
from reactor.cd.clustersecrets import decide_secrets
from reactor.cd.election import default_identity
from reactor.cd.eventwriter import Applied, EventWriter
from reactor.cd.fence import Fence, OpenOutages
from reactor.cd.kubewrite import Fenced
from reactor.cd.ledger import Ledger, Step, count_states, describe, leaving_of
from reactor.cd.metrics import CdMetrics
from reactor.cd.mirrorpass import Mirrored, MirrorPass
from reactor.cd.objects import ARGOCD, CdObject
from reactor.cd.patches import patch_for
from reactor.cd.ports import Leadership, ObjectSource, Patcher
from reactor.cd.rules import Observed, StoreView, decide, decide_without_pausing
from reactor.cd.settings import CdSettings
from reactor.cd.storeops import StoreRunner, cluster_stamp, leave_outages, open_outages
from reactor.cd.targets import Discovered
from reactor.store import KnownCluster, MirroredApp, StoreUnavailable

log = logging.getLogger(__name__)

#: After a wake, gather the changes of this long before a pass (a burst is one pass).
GATHER_S = 0.05
#: Seconds between two reads of the store's outage stamp by the acting replica of several:
#: how late it may learn of a notification another replica took.
POLL_S = 1.0


@dataclass(frozen=True)
class Decided:
    """What a pass decided, off the event loop (:meth:`CdActuator._decide_pass`)."""

    #: the steps to carry out now (``Ledger.todo``)
    todo: list[Step]
    #: the orphans to resume now (``Ledger.orphans_due``)
    orphans: list[Step]
    #: the objects by (cluster, source, state), the cluster Secrets by state
    counts: Counter[tuple[str, str, str]]
    secret_states: Counter[str]


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
        discovered: Callable[[], Discovered | None] = lambda: ({}, {}),
        instance: str | None = None,
    ) -> None:
        self.backend = backend
        #: discovery's aliases and Secrets, as ``reactor.cd.targets`` resolves against them;
        #: None until its first list is whole (no pass before: module docstring)
        self.discovered = discovered
        self.informer = informer
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.wake = wake
        self.clock = clock
        #: None: this replica acts alone (no leader election)
        self.leader = leader
        #: everything remembered between two passes (``reactor.cd.ledger``)
        self.ledger = Ledger(settings.resync_interval_s)
        self._mirror = MirrorPass(backend, settings, metrics)
        #: the loop's timers: a full resync at the next pass; the next read of the stamp
        self._resync_now = False
        self._next_poll = 0.0
        #: the informer's generation the last pass read (-1: none read yet)
        self._read_generation = -1
        #: the Events of the pauses and resumes (``reactor.cd.eventwriter``); the
        #: ``reportingInstance`` is the replica's Lease identity when there is one
        self.events = EventWriter(
            api,
            backend,
            metrics,
            instance or default_identity(),
            clock,
            settings.patches_in_flight,
        )

    def acting(self) -> bool:
        """Does this replica act on the objects now (it alone, or it holds the Lease)?"""
        return self.leader is None or self.leader.is_leader()

    def leadership_changed(self, leading: bool) -> None:
        """The elector's listener: a replica that begins to act starts from scratch, with a
        full resync; one that stops has nothing pending any more."""
        self.ledger.forget()
        self._mirror.reset()
        self._resync_now = leading
        if not leading:  # the acting replica alone exports the objects and their actions
            self.metrics.set_objects({}, None)
            self.metrics.set_unwatched({})
            self.metrics.unresolved.set(0)
            self.metrics.pending.set(0)
            self.metrics.pending_age.set(0)
        self.wake.set()

    def outages_moved(self) -> None:
        """A write moved apps in or out of an outage (``Backend.outage_listeners``)."""
        self.ledger.moved = True
        self.wake.set()

    async def run(self) -> None:
        """Until cancelled: wait for the first complete list of the objects and of the
        Secrets (module docstring), then a pass per wake-up and per resync interval. A
        store that cannot answer is retried at the next one."""
        await self._woken_until(lambda: self.informer.synced)
        log.info("cd: first list complete, %d object(s)", len(self.informer.objects()))
        if self.discovered() is None:
            log.info(
                "cd: waiting for the management cluster's Secrets to be listed once: the "
                "objects are mirrored against the whole fleet, never half of it"
            )
            await self._woken_until(lambda: self.discovered() is not None)
            log.info("cd: the Secrets are listed: the first pass")
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
            if await wait_event(self.wake, wait):
                await asyncio.sleep(GATHER_S)  # product pacing: one pass for a burst
            self.wake.clear()

    async def _woken_until(self, ready: Callable[[], bool]) -> None:
        """Wait on the wake-up event until ``ready()``."""
        while not ready():
            await self.wake.wait()
            self.wake.clear()

    async def _poll_outages(self) -> None:
        """With several replicas: has another replica added or deleted a cluster, or moved
        apps in or out of an outage? Read at most every :data:`POLL_S`."""
        if self.leader is None or time.monotonic() < self._next_poll:
            return
        self._next_poll = time.monotonic() + POLL_S
        self.ledger.stamp_read(await self.backend.read(cluster_stamp))

    # -- one pass ------------------------------------------------------------------------

    async def run_pass(self, full: bool) -> None:
        discovered = self.discovered()
        if discovered is None:
            return  # never against half a list of Secrets (module docstring)
        ledger = self.ledger
        generation = self.informer.generation
        if generation == self._read_generation and not (full or ledger.moved):
            # Nothing stored or dropped, no outage moved: the pass would read every object
            # to find nothing changed (26-55 ms of CPU at 10,000 objects, every second
            # while several replicas poll the store's stamp).
            return
        # The objects read, the mirror planned and the rules applied to a fleet's objects
        # take a worker thread (a pass over 10,000 objects and 20,000 clusters is a few
        # hundred milliseconds of Python): the event loop keeps answering meanwhile. Each
        # works on what this pass was given; the loop changes none of it meanwhile.
        changed = await in_background(ledger.read, self.informer.objects())
        self._read_generation = generation  # read before the objects: never ahead of them
        if not ledger.begin(changed, full):
            return  # nothing the mirror or the rules look at changed
        mirrored = await self._mirror.run(ledger.objects, discovered, self.acting)
        if mirrored is None:
            return  # the replica stopped acting
        now = self.clock()
        decided = await in_background(self._decide_pass, mirrored, now)
        await self._act(decided.todo, now)
        if decided.orphans:
            await self._resume_orphans(decided.orphans)
        self._export(decided)
        if full:
            self.metrics.last_resync.set(self.clock())

    def _decide_pass(self, mirrored: Mirrored, now: float) -> Decided:
        """In a worker thread, the pure part of a pass after the mirror: the rules over
        every mirrored object, the books' answer (what to send, the orphans due) and the
        counts to export. Each is tens of milliseconds of Python over 10,000 objects that
        every request would wait out on the event loop. The loop changes nothing it reads
        meanwhile but :attr:`Ledger.moved` (a flag this does not read)."""
        rows = mirrored.rows
        steps, unresolved = self._decide(mirrored.clusters, rows)
        self._report_unresolved({**mirrored.unresolved, **unresolved})
        todo = self.ledger.todo(steps, now)
        named = set(self.ledger.secrets) - set(unresolved)  # the Secrets that name a cluster
        orphans = self.ledger.orphans_due({r.name for r in rows}, named, now)
        counts, secret_states = count_states(rows, steps, self.ledger.objects)
        return Decided(todo, orphans, counts, secret_states)

    def _decide(
        self, clusters: list[KnownCluster], rows: list[MirroredApp]
    ) -> tuple[list[Step], dict[str, str]]:
        """What to do with every mirrored object (and cluster Secret), and the Secrets
        that name no cluster. With ``--cd.argocd.pause cluster-secret`` the Applications
        are not paused themselves: their cluster's Secret is (``reactor.cd.rules``)."""
        secrets_pause = self.settings.pause_cluster_secrets
        steps: list[Step] = []
        for row in paced(rows):
            obj = self.ledger.objects.get(row.name)
            if not isinstance(obj, CdObject):
                continue  # gone or unreadable since: the next mirror removes the row
            view = StoreView(row.cluster_status, row.cluster_outage_id, row.status, row.outage_id)
            seen = Observed(obj.paused, obj.mark, obj.resumed_by_owner)
            if secrets_pause and obj.kind.source == ARGOCD:
                decision = decide_without_pausing(view, seen)
            else:
                decision = decide(view, seen)
            leave = decision.leave_outage
            steps.append(Step(row.name, row.cluster, obj, decision, leaving_of(row.id, leave)))
        if not secrets_pause:
            return steps, {}
        decided, unresolved = decide_secrets(self.ledger.secrets.values(), clusters, rows)
        steps += [Step(d.secret.key, d.cluster, d.secret, d.decision, d.leaving) for d in decided]
        return steps, unresolved

    async def _act(self, todo: list[Step], now: float) -> None:
        """Carry out the steps the books said to (``Ledger.todo``)."""
        if not todo:
            return
        if self.settings.dry_run:
            self._log_dry_run(todo, now)
            return
        leaving = [pair for step in todo for pair in step.leaving]
        if not self.acting():
            return
        if leaving:
            await self.backend.run(lambda s: leave_outages(s, leaving))
        stamp = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
        results = await self._send(todo, stamp)
        counts = Counter((s.cluster, s.decision.verb.value, results[s.key]) for s in todo)
        for (cluster, verb, result), count in sorted(counts.items()):
            log.info("cd: cluster %s: %s %d object(s): %s", cluster, verb, count, result)

    def fence(self) -> Fence:
        """The guards of one batch of patches (``reactor.cd.fence``)."""
        outages = OpenOutages(lambda: self.backend.read(open_outages))
        return Fence.of(self.leader, outages, self.settings.request_timeout_s)

    async def _send(self, steps: list[Step], stamp: str) -> dict[str, str]:
        """Every CD write: each step's patch, ``patches_in_flight`` at a time, each behind
        the fence's guard, then the Events of those applied (``reactor.cd.eventwriter``),
        behind the same fence; what became of each patch (by key)."""
        limit = asyncio.Semaphore(self.settings.patches_in_flight)
        fence = self.fence()
        results: dict[str, str] = {}
        applied: list[Applied] = []

        async def one(step: Step) -> None:
            patch = patch_for(step.decision, step.target, stamp)
            assert patch is not None
            async with limit:
                results[step.key] = await self._patch(step, patch, fence, applied)

        await asyncio.gather(*(one(step) for step in steps))
        await self.events.write(applied, fence)
        fence.log_refused()
        return results

    async def _patch(
        self, step: Step, patch: dict[str, Any], fence: Fence, applied: list[Applied]
    ) -> str:
        verb = step.decision.verb.value
        try:
            guard = fence.guard(step.decision)
            answer = await self.api.merge_patch(
                step.target.path, patch, guard, timeout=fence.timeout
            )
        except Fenced as exc:  # not sent: the action stays pending
            self.metrics.fenced.labels(exc.reason).inc()
            self.metrics.actions.labels(verb, "fenced").inc()
            return "fenced"
        except KubeApiError as exc:
            if exc.status in (404, 409):
                result = "gone" if exc.status == 404 else "conflict"
                log.debug("cd: %s: %s (%s)", describe(step), result, exc)
            else:
                result = "failed"
                self.metrics.failures.labels(exc.reason).inc()
                log.warning("cd: %s failed, retried at the next pass: %s", describe(step), exc)
            self.ledger.record(step, result, self.clock())  # gone, conflict: the watch brings it
            self.metrics.actions.labels(verb, result).inc()
            return result
        self.ledger.record(step, "applied", self.clock())
        applied.append(Applied(step, answer))
        self.metrics.actions.labels(verb, "applied").inc()
        log.debug("cd: %s: done", describe(step))
        return "applied"

    async def _resume_orphans(self, steps: list[Step]) -> None:
        """Resume what fleetwatch paused and no cluster of the store holds any more."""
        if self.settings.dry_run:
            self._log_dry_run(steps, self.clock())
            return
        stamp = datetime.fromtimestamp(self.clock(), UTC).isoformat().replace("+00:00", "Z")
        results = await self._send(steps, stamp)
        resumed = [step.key for step in steps if results[step.key] == "applied"]
        for step in steps:
            if results[step.key] == "applied":
                self.metrics.orphans_resumed.inc()
                log.info("cd: %s (paused for outage %s): done", describe(step), step.target.mark)
        if resumed:
            shown = ", ".join(sorted(resumed)[:5]) + (", ..." if len(resumed) > 5 else "")
            log.warning(
                "cd: resumed %d object(s) fleetwatch had paused for an outage and whose "
                "cluster left the store (no outage can end their pause): %s",
                len(resumed),
                shown,
            )

    def _log_dry_run(self, steps: list[Step], now: float) -> None:
        """A dry run's action: each step logged and counted once per object version."""
        for step in steps:
            log.info("cd (dry run): would %s", describe(step))
            self.metrics.actions.labels(step.decision.verb.value, "dry_run").inc()
            self.ledger.record(step, "dry_run", now)

    def _report_unresolved(self, unresolved: dict[str, str]) -> None:
        for name, reason in self.ledger.report_unresolved(unresolved):
            log.warning("cd: %s is not mirrored: %s", name, reason)
        self.metrics.unresolved.set(len(unresolved))

    def _export(self, decided: Decided) -> None:
        by_secret = self.settings.pause_cluster_secrets
        self.metrics.set_objects(decided.counts, decided.secret_states if by_secret else None)
        pending, age = self.ledger.pending(self.clock())
        self.metrics.pending.set(pending)
        self.metrics.pending_age.set(age)
