"""The store's mirror of the management cluster's Flux and Argo CD objects, planned.

Every object read by ``reactor.cd.objects`` whose destination resolves to a cluster of
the store (``reactor.cd.targets``) is an app of that cluster, named
``SOURCE:KIND/NAMESPACE/NAME``, with ``source`` ``flux`` or ``argocd``. As apps they take
part in the cascade like any other: the state machine's effects (``DegradeApps``,
``RestoreApps``) move them with the API's apps, in the same statements, and the rules of
``reactor.cd.rules`` then make each object match its app.

:func:`plan` compares what the objects say with the mirrored rows of the store and lists
the writes (:class:`MirrorPlan`), which ``reactor.cd.storeops`` runs in one transaction:

- an object new to the store is inserted; an object whose destination changed is moved
  to its new cluster. Either way it is placed as :func:`placement` says, under the
  cluster's lock: DEGRADED (``cluster_offline``) in the cluster's open outage when the
  cluster is OFFLINE in one, as the apps DEPLOYED there were when it went down (no app
  stays DEPLOYED on an OFFLINE cluster), else DEPLOYED. A move takes the app out of its
  old cluster's outage, as any other change of an app does;
- what was last seen of the object's pause (``paused``, the mark) and its ``uid`` are
  kept on the row when they change, for the API; the rules read the object itself;
- the row of an object that is gone, or that no longer resolves to a cluster, is
  deleted (it cannot be an app of no cluster). An object fleetwatch paused whose cluster
  left the store is then resumed by the actuator (``reactor.cd.orphans`` says why).

A name held by a row of the API (an app made through the API before its prefix was
reserved) is left to it: the insert skips it and the object is reported unresolved.

The rows given are those of the kinds the replica watches (``reactor.cd.scope``): a row
of another kind is never planned, so never deleted for want of its object here.

A dry run writes none of it: :func:`preview` applies the plan to the rows in memory, so
the rules decide (and the dry run logs) what the written mirror would have made them.

Pure: plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from fleetwatch.common.foreground import paced
from reactor.cd.objects import CdObject, Unreadable
from reactor.cd.targets import ClusterIndex, Unresolved
from reactor.statemachine import CLUSTER_OFFLINE, AppStatus, Status
from reactor.store import KnownCluster, MirroredApp


@dataclass(frozen=True, slots=True)
class MirrorRow:
    """A mirrored app as the store holds it."""

    id: int
    name: str
    source: str
    cluster: str
    uid: str | None
    paused: bool | None
    mark: str | None


def mirror_row(app: MirroredApp) -> MirrorRow:
    """A store row (``reactor.store.MirroredApp``) as the mirror compares it."""
    return MirrorRow(app.id, app.name, app.source, app.cluster, app.uid, app.paused, app.mark)


@dataclass(frozen=True, slots=True)
class NewMirrored:
    """An object to insert as an app of ``cluster``."""

    name: str
    source: str
    cluster: str
    uid: str
    paused: bool
    mark: str | None


@dataclass(frozen=True, slots=True)
class SeenUpdate:
    """What was last seen of an object, for its row."""

    app_id: int
    uid: str
    paused: bool
    mark: str | None


@dataclass(frozen=True)
class MirrorPlan:
    inserts: list[NewMirrored] = field(default_factory=list)
    #: (app id, its new cluster)
    moves: list[tuple[int, str]] = field(default_factory=list)
    updates: list[SeenUpdate] = field(default_factory=list)
    deletes: list[int] = field(default_factory=list)
    #: app name -> why its object is not (or no longer) an app
    unresolved: dict[str, str] = field(default_factory=dict)

    @property
    def writes(self) -> int:
        return len(self.inserts) + len(self.moves) + len(self.updates) + len(self.deletes)

    def split(self, inserts: int) -> list[MirrorPlan]:
        """This plan as several, each with at most ``inserts`` inserts, the last with the
        moves, updates and deletes: a first list's thousands of new apps are then several
        short transactions, none holding the store's one writer long. Each insert stands
        alone (a name the next pass finds mirrored is no longer planned), so a plan cut
        short is finished by the next pass."""
        heads = [
            MirrorPlan(inserts=self.inserts[start : start + inserts])
            for start in range(0, max(0, len(self.inserts) - inserts), inserts)
        ]
        rest = self.inserts[len(heads) * inserts :]
        return [*heads, replace(self, inserts=rest)]


def plan(
    objects: Mapping[str, CdObject | Unreadable],
    index: ClusterIndex,
    rows: Mapping[str, MirrorRow],
) -> MirrorPlan:
    """The writes that make the mirrored rows say what ``objects`` (by app name) say."""
    result = MirrorPlan()
    wanted: set[str] = set()
    for name, obj in paced(objects.items()):
        if isinstance(obj, Unreadable):
            result.unresolved[name] = obj.reason
            continue
        cluster = index.resolve(obj.destination)
        if isinstance(cluster, Unresolved):
            result.unresolved[name] = cluster.reason
            continue
        row = rows.get(name)
        wanted.add(name)
        if row is None:
            result.inserts.append(
                NewMirrored(name, obj.kind.source, cluster, obj.uid, obj.paused, obj.mark)
            )
            continue
        if row.cluster != cluster:
            result.moves.append((row.id, cluster))
        if (row.uid, row.paused, row.mark) != (obj.uid, obj.paused, obj.mark):
            result.updates.append(SeenUpdate(row.id, obj.uid, obj.paused, obj.mark))
    result.deletes.extend(row.id for name, row in rows.items() if name not in wanted)
    return result


def placement(status: Status, open_outage: int | None) -> tuple[AppStatus, str | None, int | None]:
    """(status, reason, outage) of an app placed on a cluster in ``status``."""
    if status is Status.OFFLINE and open_outage is not None:
        return AppStatus.DEGRADED, CLUSTER_OFFLINE, open_outage
    return AppStatus.DEPLOYED, None, None


def preview(
    mirror: MirrorPlan, rows: list[MirroredApp], clusters: list[KnownCluster]
) -> list[MirroredApp]:
    """The rows as :func:`plan`'s writes would leave them, computed and never written (a
    dry run). An insert gets a negative id: no row of the store has it."""
    by_name = {c.name: c for c in clusters}
    moves = dict(mirror.moves)
    seen = {u.app_id: u for u in mirror.updates}
    gone = set(mirror.deletes)
    result: list[MirroredApp] = []

    def placed(app: MirroredApp, cluster: KnownCluster) -> MirroredApp:
        status, _, outage = placement(cluster.status or Status.UNKNOWN, cluster.outage_id)
        return replace(
            app,
            cluster=cluster.name,
            status=status,
            outage_id=outage,
            cluster_status=cluster.status or Status.UNKNOWN,
            cluster_outage_id=cluster.outage_id,
        )

    for row in rows:
        if row.id in gone:
            continue
        if row.id in seen:
            update = seen[row.id]
            row = replace(row, uid=update.uid, paused=update.paused, mark=update.mark)
        moved = by_name.get(moves.get(row.id, ""))
        result.append(placed(row, moved) if moved is not None else row)
    for number, new in enumerate(mirror.inserts, start=1):
        cluster = by_name.get(new.cluster)
        if cluster is None:
            continue
        app = MirroredApp(
            -number,
            new.name,
            new.source,
            new.cluster,
            AppStatus.DEPLOYED,
            None,
            Status.UNKNOWN,
            None,
            new.uid,
            new.paused,
            new.mark,
        )
        result.append(placed(app, cluster))
    return sorted(result, key=lambda app: app.name)
