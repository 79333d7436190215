"""What the CD actuator carries out, and how it reads and names what it acts on: pure.

A :class:`Step` is one decision on one object, an app's Flux or Argo CD object or, with
``--cd.argocd.pause cluster-secret``, an Argo CD cluster Secret; the rest reads an object
as the mirror and the rules see it (:func:`shape_of`: everything but its resourceVersion, so
a controller's status update is no change), counts it by state for the metrics, and
names a step in a log line (:func:`describe`). Kept apart from ``reactor.cd.actuator``, the
I/O loop, so both stay small.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reactor.cd.clustersecrets import ClusterSecret, read_cluster_secret
from reactor.cd.mirror import MirrorRow
from reactor.cd.objects import ARGOCD, CdObject, Unreadable, read_object
from reactor.cd.rules import Decision
from reactor.store import MirroredApp

Seen = CdObject | Unreadable


def mirror_row(app: MirroredApp) -> MirrorRow:
    return MirrorRow(app.id, app.name, app.source, app.cluster, app.uid, app.paused, app.mark)


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


def state_of(obj: CdObject | ClusterSecret) -> str:
    if not obj.paused:
        return "running"
    return "paused_by_outage" if obj.mark is not None else "paused"


#: Which state of two Secrets of one cluster its Applications show: a pause beats none.
STATE_RANK = {"running": 0, "paused": 1, "paused_by_outage": 2}.__getitem__


def describe(step: Step) -> str:
    verb = step.decision.verb.value.replace("_", " ")
    return f"{verb} {step.key} (cluster {step.cluster}: {step.decision.why})"


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
    for row in rows:
        obj = objects.get(row.name)
        if isinstance(obj, CdObject):
            found = state_of(obj)
            if found == "running" and obj.kind.source == ARGOCD:
                found = secrets.get(row.cluster, found)  # paused by its cluster Secret
            counts[(row.cluster, obj.kind.source, found)] += 1
    return counts, secret_states
