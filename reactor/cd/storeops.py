"""The store transactions of the CD mirror and of the rules' store changes.

Each function is one transaction over the service's store, run on a store thread
(``Backend.run``/``Backend.read``), like the operations of ``reactor.service``:

- :func:`read_mirror`: the clusters (for ``reactor.cd.targets``) and the mirrored apps,
  with their clusters' status and open outage, read together;
- :func:`apply_mirror`: a ``reactor.cd.mirror`` plan, changing only rows of the kinds the
  replica watches (``reactor.cd.scope``; the statements check it too). The clusters that
  apps are placed on are read first, locked (``FOR UPDATE`` on PostgreSQL, in id order,
  as a notification locks them), so a placement and a cascade of the same cluster never
  interleave: an app
  placed while the cluster goes OFFLINE is either placed first and degraded by the
  cascade, or placed after it, in its outage;
- :func:`leave_outages`: the apps a person resumed leave their outage (``reactor.cd.rules``
  says why that comes before the mark is dropped); an app the store restored or moved
  meanwhile is left alone;
- :func:`cluster_stamp`: a small read that changes whenever a cluster is added or
  deleted or apps move in or out of an outage, whichever replica made the change (the
  acting replica polls it); :func:`open_outages`, the open outages' ids read from it (the
  fence's question before a pause, ``reactor.cd.fence``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from reactor.cd.mirror import MirrorPlan, placement
from reactor.service import Service
from reactor.store import KnownCluster, MirroredApp

T = TypeVar("T")


class StoreRunner(Protocol):
    """What the CD integration needs of ``reactor.context.Backend``: an operation run on a
    store thread, in a write or a read transaction of its own."""

    async def run(self, operation: Callable[[Service], T]) -> T: ...
    async def read(self, operation: Callable[[Service], T]) -> T: ...


def read_mirror(service: Service) -> tuple[list[KnownCluster], list[MirroredApp]]:
    with service.store.read() as tx:
        return tx.known_clusters(), tx.mirrored_apps()


def mirrored_apps(service: Service) -> list[MirroredApp]:
    with service.store.read() as tx:
        return tx.mirrored_apps()


@dataclass(frozen=True)
class MirrorResult:
    inserted: int = 0
    moved: int = 0
    updated: int = 0
    deleted: int = 0
    #: placed in an outage (their cluster was OFFLINE in one)
    joined: int = 0
    #: app name -> why it was not written (its name held by an API app, its cluster gone)
    skipped: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def sum(results: Sequence[MirrorResult]) -> MirrorResult:
        """One plan's results, written in several transactions (``MirrorPlan.split``)."""
        skipped: dict[str, str] = {}
        for r in results:
            skipped.update(r.skipped)
        return MirrorResult(
            sum(r.inserted for r in results),
            sum(r.moved for r in results),
            sum(r.updated for r in results),
            sum(r.deleted for r in results),
            sum(r.joined for r in results),
            skipped,
        )


def apply_mirror(service: Service, plan: MirrorPlan, kinds: Sequence[str]) -> MirrorResult:
    """``kinds``: the name prefixes (``SOURCE:KIND/``) of the kinds the replica watches."""
    inserted = moved = joined = 0
    skipped: dict[str, str] = {}
    with service.store.write() as tx:
        names = {new.cluster for new in plan.inserts} | {cluster for _, cluster in plan.moves}
        clusters = tx.clusters_named(sorted(names)) if names else {}
        for new in plan.inserts:
            cluster = clusters.get(new.cluster)
            if cluster is None:
                skipped[new.name] = f"cluster {new.cluster!r} was deleted meanwhile"
                continue
            placed = placement(cluster.state.status, cluster.outage_id)
            seen = (new.uid, new.paused, new.mark)
            if tx.insert_mirrored(new.name, new.source, cluster.id, placed, seen):
                inserted += 1
                joined += placed[2] is not None
            else:
                skipped[new.name] = "the name is held by an app of the API"
        for app_id, name in plan.moves:
            cluster = clusters.get(name)
            if cluster is None:
                continue  # deleted meanwhile: the next sync deletes the app
            placed = placement(cluster.state.status, cluster.outage_id)
            tx.move_mirrored(app_id, cluster.id, placed, kinds)
            moved += 1
            joined += placed[2] is not None
        if plan.updates:
            tx.set_seen([(u.app_id, u.uid, u.paused, u.mark) for u in plan.updates], kinds)
        if plan.deletes:
            tx.delete_mirrored(plan.deletes, kinds)
    return MirrorResult(inserted, moved, len(plan.updates), len(plan.deletes), joined, skipped)


def leave_outages(service: Service, members: Sequence[tuple[int, int]]) -> int:
    """Each (app id, outage id): the app leaves that outage; how many did."""
    with service.store.write() as tx:
        return sum(tx.leave_outage(app_id, outage_id) for app_id, outage_id in members)


def cluster_stamp(service: Service) -> tuple[object, ...]:
    with service.store.read() as tx:
        return tx.cluster_stamp()


def open_outages(service: Service) -> frozenset[int]:
    """The ids of the open outages: the third field of each cluster entry of the stamp
    (``Transaction.cluster_stamp``: count, highest id, then (id, status, open outage))."""
    with service.store.read() as tx:
        stamp = tx.cluster_stamp()
    found = (entry[2] for entry in stamp[2:] if isinstance(entry, tuple) and len(entry) == 3)
    return frozenset(int(outage) for outage in found if isinstance(outage, int))


def outage_starts(service: Service, outage_ids: Sequence[int]) -> dict[int, int]:
    """When each of these outages started (µs), for the Events' notes (``reactor.cd.events``)."""
    with service.store.read() as tx:
        return tx.outage_starts(outage_ids)
