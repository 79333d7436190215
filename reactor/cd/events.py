"""The Kubernetes Event each pause and resume leaves on its object, as data.

An object fleetwatch paused carries an annotation and nothing else: ``kubectl describe``
and Argo CD's UI (which freezes an Application's status while ``skip-reconcile`` is set)
would not say who paused it, for which outage, nor what resumes it. So every pause and
resume that the management cluster accepted is followed by one ``events.k8s.io/v1``
Event in the object's namespace (:func:`event_for`):

==========  =====================  ==========================================================
verb        reason                 note
==========  =====================  ==========================================================
PAUSE       ``PausedByOutage``     the cluster, the outage id and its start, what resumes it
RESUME      ``ResumedAfterOutage`` the cluster, the outage id and its start (or: its cluster
                                   left the store, for an orphan, ``reactor.cd.orphans``)
==========  =====================  ==========================================================

``regarding`` is the object (its apiVersion, kind, namespace, name, uid, and the
resourceVersion the change produced); with ``--cd.argocd.pause cluster-secret`` it is the
Argo CD cluster Secret, which carries the pause. ``reportingController`` is
:data:`CONTROLLER`, ``reportingInstance`` the replica's identity (its Lease holder name),
``type`` Normal, ``action`` ``Pause`` or ``Resume``.

**One per change.** An Event follows a patch that the API server applied, and a patch
carries the resourceVersion it was decided on as a precondition: of two replicas (a
hand-over), or of a retry after a lost answer, at most one patch lands per version, and a
pass that finds the object already paused decides nothing and writes nothing. The Event's
name is derived from the object's uid, that version and the verb (:func:`event_name`), so
a create sent twice (an answer lost to a timeout) meets ``409 AlreadyExists`` instead of
making a second Event. The REMARK and DROP_MARK verbs change only fleetwatch's own mark
and write none.

Pure: a step's facts in, a dict out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from reactor.cd.rules import Verb

#: ``reportingController`` of every Event fleetwatch writes.
CONTROLLER = "fleetwatch.io/reactor"
PAUSED = "PausedByOutage"
RESUMED = "ResumedAfterOutage"
#: Where Events are written (``regarding`` names the object).
EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
#: kube-apiserver's bounds: a name of at most 253 characters, a note of at most 1 kB,
#: ``reportingInstance`` of at most 128.
_NAME_MAX = 253
_NOTE_MAX = 1024
_INSTANCE_MAX = 128


@dataclass(frozen=True, slots=True)
class Regarding:
    """The object an Event is about, as ``regarding`` names it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    #: the version the change made (the patch's answer), else the one it was decided on
    resource_version: str


@dataclass(frozen=True, slots=True)
class Change:
    """A pause or resume the management cluster applied, and why."""

    verb: Verb
    cluster: str
    #: the outage it is for: the pause's mark, or the resumed pause's (None: unknown)
    outage: str | None
    #: when that outage started (µs since the epoch), None when the store no longer has it
    outage_start_us: int | None = None
    #: a resume because the object's cluster left the store (``reactor.cd.orphans``)
    orphan: bool = False


def wants_event(verb: Verb) -> bool:
    """Does a change by ``verb`` write an Event? Only the pause and the resume do."""
    return verb in (Verb.PAUSE, Verb.RESUME)


def event_name(regarding: Regarding, decided_on: str, verb: Verb) -> str:
    """``NAME.<16 hex>``: the same change always gets the same name (module docstring)."""
    digest = hashlib.sha256(f"{regarding.uid}\x00{decided_on}\x00{verb.value}".encode())
    suffix = digest.hexdigest()[:16]
    return f"{regarding.name[: _NAME_MAX - len(suffix) - 1]}.{suffix}"


def micro_time(seconds: float) -> str:
    """``eventTime``: RFC 3339 with microseconds, as the API's ``MicroTime``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _when(start_us: int | None) -> str:
    if start_us is None:
        return "start no longer in fleetwatch's store"
    moment = datetime.fromtimestamp(start_us / 1_000_000, UTC)
    return "started " + moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def note_of(change: Change) -> str:
    """The note: the cluster, the outage and its start, and what ends the pause."""
    number = f"outage {change.outage or '(unknown)'}"
    outage = f"{number} of cluster {change.cluster}"
    since = _when(change.outage_start_us)
    if change.verb is Verb.PAUSE:
        text = (
            f"Paused by fleetwatch: cluster {change.cluster} is OFFLINE ({number}, {since}). "
            f"fleetwatch resumes it when the outage closes (the cluster is seen ONLINE "
            f"again); resumed by hand before that, it stays as you leave it."
        )
    elif change.orphan:
        text = (
            f"Resumed by fleetwatch: it paused this for {outage} ({since}), and that "
            f"cluster left fleetwatch's store, so no outage can end the pause any more."
        )
    else:
        text = f"Resumed by fleetwatch: {outage} is over ({since}); the cluster is back."
    return text[:_NOTE_MAX]


def event_for(
    regarding: Regarding, change: Change, decided_on: str, instance: str, now: float
) -> dict[str, object]:
    """The ``events.k8s.io/v1`` Event of ``change`` on ``regarding``; ``decided_on``: the
    object's resourceVersion the change was decided on (its name's seed)."""
    paused = change.verb is Verb.PAUSE
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(regarding, decided_on, change.verb),
            "namespace": regarding.namespace,
        },
        "eventTime": micro_time(now),
        "reportingController": CONTROLLER,
        "reportingInstance": instance[:_INSTANCE_MAX],
        "action": "Pause" if paused else "Resume",
        "reason": PAUSED if paused else RESUMED,
        "type": "Normal",
        "note": note_of(change),
        "regarding": {
            "apiVersion": regarding.api_version,
            "kind": regarding.kind,
            "namespace": regarding.namespace,
            "name": regarding.name,
            "uid": regarding.uid,
            "resourceVersion": regarding.resource_version,
        },
    }
