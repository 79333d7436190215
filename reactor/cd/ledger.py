"""The CD actuator's books: what it has seen, sent and is waiting for. Pure.

``reactor.cd.actuator`` carries decisions out and decides nothing; everything it must
remember between two passes lives here, in one :class:`Ledger`, so that a reader finds
the loop's I/O in one module and its memory in another, and a test can drive the memory
without a store, an informer or an event loop. The ledger's methods take what happened
(the informer's objects, the steps the rules decided, what became of a patch, the time)
and answer with what to do as data (the steps to send, the names to log, the numbers to
export); the actuator does it.

It holds:

- **what was seen**: each object read once per ``resourceVersion`` (:func:`read_seen`),
  the apps' objects and the Argo CD cluster Secrets by name, and their *shape*
  (:func:`shape_of`: everything the mirror and the rules look at, so a controller's status
  update is no change and costs no pass); the store's stamp of clusters and outages as
  last read;
- **what was sent**: per app (or Secret key) the ``resourceVersion`` an action was sent
  (or logged, in a dry run) for, which is not sent again for that version; the mark and
  time of the last pause applied, which holds a pause an owner undid for a resync interval
  (:meth:`Ledger.held`);
- **what is pending**: since when each action was decided and not yet done, for the
  pending-actions gauge and its alert;
- the objects that are not mirrored (logged once per reason), the orphans' grace periods
  (``reactor.cd.orphans``), and the pass counter.

A :class:`Step` is one decision on one object, the unit of these books: an app's Flux or
Argo CD object or, with ``--cd.argocd.pause cluster-secret``, an Argo CD cluster Secret.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.common.foreground import paced
from fleetwatch.kube.objects import ReadOnce
from reactor.cd.clustersecrets import ClusterSecret, read_cluster_secret
from reactor.cd.objects import ARGOCD, CdObject, Unreadable, read_object
from reactor.cd.orphans import RESUME_ORPHAN, Orphans, orphan_key
from reactor.cd.rules import Decision, Verb
from reactor.store import MirroredApp

Seen = CdObject | Unreadable

#: What became of a step: the patch was written, or a dry run logged it.
DONE = ("applied", "dry_run")
#: The object changed or went since the decision: the watch brings its new version.
WATCHED = ("gone", "conflict")


@dataclass(frozen=True, slots=True)
class Step:
    """One decision to carry out on one object: an app's object, or a cluster Secret."""

    key: str  #: the app's name, or the Secret's ``argocd:Secret/NAMESPACE/NAME``
    cluster: str
    target: CdObject | ClusterSecret
    decision: Decision
    #: (app id, outage id): apps that leave the outage before the patch is sent
    leaving: tuple[tuple[int, int], ...] = ()


def leaving_of(app_id: int, outage: int | None) -> tuple[tuple[int, int], ...]:
    return () if outage is None else ((app_id, outage),)


def describe(step: Step) -> str:
    """A step as a log line names it."""
    verb = step.decision.verb.value.replace("_", " ")
    return f"{verb} {step.key} (cluster {step.cluster}: {step.decision.why})"


def read_seen(obj: dict[str, Any]) -> Seen | ClusterSecret | None:
    if obj.get("kind") == "Secret":
        return read_cluster_secret(obj)
    return read_object(obj)


def shape_of(seen: Seen | ClusterSecret) -> object:
    """What the mirror and the rules read of an object: all of it but its resourceVersion."""
    if isinstance(seen, Unreadable):
        return seen
    if isinstance(seen, ClusterSecret):
        return (seen.uid, seen.argocd_name, seen.paused, seen.mark, seen.resumed_by_owner)
    return (seen.uid, seen.destination, seen.paused, seen.mark, seen.resumed_by_owner)


@dataclass
class Ledger:
    """The books of the module docstring; ``resync_s``: the resync interval, which is
    also the hold of a pause undone by its owner and the orphans' grace period."""

    resync_s: float
    #: uid -> (resourceVersion, what the object reads as)
    reads: ReadOnce[Seen | ClusterSecret | None] = field(default_factory=ReadOnce)
    #: app name -> the object, and what of it the mirror and the rules look at
    objects: dict[str, Seen] = field(default_factory=dict)
    #: the Argo CD cluster Secrets (``--cd.argocd.pause cluster-secret``), by key
    secrets: dict[str, ClusterSecret] = field(default_factory=dict)
    shapes: dict[str, object] = field(default_factory=dict)
    #: the store's stamp of clusters and open outages as last read (None: not yet)
    stamp: object = None
    #: a write moved apps in or out of an outage since the last pass
    moved: bool = False
    #: app name (or Secret key) -> the resourceVersion an action was sent (or logged) for
    acted: dict[str, str] = field(default_factory=dict)
    #: app name (or Secret key) -> the mark of its last pause applied, and when
    paused: dict[str, tuple[str | None, float]] = field(default_factory=dict)
    #: app name (or Secret key) -> when an action was first decided and not yet done
    pending_since: dict[str, float] = field(default_factory=dict)
    #: name -> why it is not mirrored, as last logged
    unresolved: dict[str, str] = field(default_factory=dict)
    passes: int = 0
    orphans: Orphans = field(init=False)
    secret_orphans: Orphans = field(init=False)

    def __post_init__(self) -> None:
        self.orphans = Orphans(self.resync_s)
        self.secret_orphans = Orphans(self.resync_s)

    def forget(self) -> None:
        """Leadership changed: what this replica remembered of earlier actions is dropped
        (what it has seen of the objects stays: it is still what the informer holds)."""
        self.acted.clear()
        self.pending_since.clear()
        self.paused.clear()
        self.orphans.reset()
        self.secret_orphans.reset()
        self.stamp = None

    # -- what was seen -------------------------------------------------------------------

    def stamp_read(self, stamp: object) -> None:
        """The store's stamp, read again: a change since the last read is a pass."""
        if self.stamp is not None and stamp != self.stamp:
            self.moved = True
        self.stamp = stamp

    def start_pass(self, informed: Mapping[str, dict[str, Any]], full: bool) -> bool:
        """Read what changed in ``informed`` (the informer's objects by uid) since the last
        pass: is there a pass to make (something the mirror or the rules look at changed,
        not merely a status; an outage moved; or ``full``, the resync)?"""
        return self.begin(self.read(informed), full)

    def read(self, informed: Mapping[str, dict[str, Any]]) -> bool:
        """The first half of :meth:`start_pass`: each object read once per version, and
        whether anything the mirror or the rules look at changed. It touches only what
        was seen, so the actuator runs it off the event loop (a fleet's objects take
        tens of milliseconds) while the loop may set :attr:`moved`."""
        reads = self.reads.update(informed, lambda obj, _last: read_seen(obj))
        seen = [seen for seen in reads if seen is not None]
        objects = {s.app_name: s for s in seen if not isinstance(s, ClusterSecret)}
        secrets = {s.key: s for s in seen if isinstance(s, ClusterSecret)}
        shapes = {name: shape_of(s) for name, s in paced((*objects.items(), *secrets.items()))}
        changed = shapes != self.shapes
        self.objects, self.secrets, self.shapes = objects, secrets, shapes
        return changed

    def begin(self, changed: bool, full: bool) -> bool:
        """The second half of :meth:`start_pass`, on the event loop (where :attr:`moved` is
        set): is there a pass to make?"""
        moved, self.moved = self.moved, False
        if not (changed or moved or full):
            return False
        self.passes += 1
        return True

    def report_unresolved(self, unresolved: Mapping[str, str]) -> list[tuple[str, str]]:
        """The objects not mirrored now (name -> why); answers those to log: new, or not
        mirrored for another reason than before."""
        news = [(n, why) for n, why in unresolved.items() if self.unresolved.get(n) != why]
        self.unresolved = dict(unresolved)
        return news

    # -- what was sent, what is pending --------------------------------------------------

    def todo(self, steps: list[Step], now: float) -> list[Step]:
        """The steps of this pass to carry out: each with something to do, not done yet
        for its object's version, and not held (:meth:`held`). Every step with something
        to do is pending from now on until done; the books forget what is not a step any
        more."""
        todo: list[Step] = []
        for step in paced(steps):
            if step.decision.verb is Verb.NOTHING:
                self.pending_since.pop(step.key, None)
                continue
            self.pending_since.setdefault(step.key, now)
            acted = self.acted.get(step.key) == step.target.resource_version
            if not acted and not self.held(step, now):
                todo.append(step)
        live = {step.key for step in steps}
        self.pending_since = {k: t for k, t in self.pending_since.items() if k in live}
        self.acted = {k: v for k, v in self.acted.items() if k in live}
        self.paused = {k: v for k, v in self.paused.items() if k in live}
        return todo

    def held(self, step: Step, now: float) -> bool:
        """A pause of this outage applied less than a resync interval ago, undone since by
        the object's owner, waits (pending) for the interval to pass: an ApplicationSet
        that does not preserve the annotation reverts it as soon as it changes, and both
        would otherwise patch the object back and forth as fast as the watches go."""
        if step.decision.verb is not Verb.PAUSE:
            return False
        mark, when = self.paused.get(step.key, (None, float("-inf")))
        return mark == step.decision.mark and now - when < self.resync_s

    def record(self, step: Step, result: str, now: float) -> None:
        """What became of a step: ``applied`` (done: no longer pending, a pause
        remembered), ``dry_run`` (logged), ``gone`` or ``conflict`` (the watch brings the
        object's new version): none is sent again for this version. ``failed`` and
        ``fenced`` change nothing: the step is decided again at the next pass."""
        if result in DONE or result in WATCHED:
            self.acted[step.key] = step.target.resource_version
        if result != "applied":
            return
        self.pending_since.pop(step.key, None)
        if step.decision.verb is Verb.PAUSE:
            self.paused[step.key] = (step.decision.mark, now)

    def pending(self, now: float) -> tuple[int, float]:
        """How many actions are pending, and the age of the oldest (0 without any)."""
        oldest = min(self.pending_since.values(), default=now)
        return len(self.pending_since), max(0.0, now - oldest)

    def orphans_due(self, mirrored: set[str], named: set[str], now: float) -> list[Step]:
        """The orphans to resume now (``reactor.cd.orphans``) and not already resumed for
        their version: ``mirrored``, the apps the mirror holds; ``named``, the Secrets that
        name a cluster of the store."""
        due = self.orphans.due(self.objects, mirrored, now)
        due += self.secret_orphans.due(self.secrets, named, now)
        todo = [o for o in due if self.acted.get(orphan_key(o)) != o.resource_version]
        return [Step(orphan_key(obj), "(none)", obj, RESUME_ORPHAN) for obj in todo]


# -- what a pass leaves in the metrics ---------------------------------------------------


def state_of(obj: CdObject | ClusterSecret) -> str:
    if not obj.paused:
        return "running"
    return "paused_by_outage" if obj.mark is not None else "paused"


#: Which state of two Secrets of one cluster its Applications show: a pause beats none.
STATE_RANK = {"running": 0, "paused": 1, "paused_by_outage": 2}.__getitem__


def count_states(
    rows: list[MirroredApp], steps: list[Step], objects: Mapping[str, Seen]
) -> tuple[Counter[tuple[str, str, str]], Counter[str]]:
    """The metrics' counts: mirrored objects by (cluster, source, state), an Application
    counted as its cluster Secret when that carries the pause; cluster Secrets by state."""
    secrets: dict[str, str] = {}  # cluster -> the state its Applications take
    secret_states: Counter[str] = Counter()
    for step in steps:
        if isinstance(step.target, ClusterSecret):
            found = state_of(step.target)
            secret_states[found] += 1
            secrets[step.cluster] = max(found, secrets.get(step.cluster, found), key=STATE_RANK)
    counts: Counter[tuple[str, str, str]] = Counter()
    for row in paced(rows):
        obj = objects.get(row.name)
        if isinstance(obj, CdObject):
            found = state_of(obj)
            if found == "running" and obj.kind.source == ARGOCD:
                found = secrets.get(row.cluster, found)  # paused by its cluster Secret
            counts[(row.cluster, obj.kind.source, found)] += 1
    return counts, secret_states
