"""The mirror's part of a CD pass: the store's rows read, the mirror planned, then written
or, in a dry run, previewed.

:meth:`MirrorPass.run` is the second step of ``reactor.cd.actuator``'s pass:

- it reads the clusters and the mirrored rows; the rows of kinds this replica does not
  watch are set aside, counted and, when paused by an outage, named
  (``reactor.cd.scope``, ``reactor.cd.unwatched``): no plan ever names them;
- it plans the mirror of the replica's objects against its own rows (``reactor.cd.mirror``);
- an acting replica writes the plan (``reactor.cd.storeops``, whose statements change
  rows of the watched kinds only) and reads the rows again: in one transaction, or, with
  more than :data:`INSERTS_PER_TRANSACTION` new apps (a first list), the inserts in
  several, each checked to be still acting (a request's transaction then never waits
  behind 10,000 inserts: 100 ms at that size while the Secrets were read); a dry run
  writes nothing and previews the plan in memory, so the rules decide on the rows as the
  mirror would have left them. What the preview would do is logged when it changes.

I/O (the store's threads).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fleetwatch.common.backgroundpool import in_background
from reactor.cd.ledger import Seen
from reactor.cd.metrics import CdMetrics
from reactor.cd.mirror import MirrorPlan, mirror_row, plan, preview
from reactor.cd.scope import prefix_of
from reactor.cd.settings import CdSettings
from reactor.cd.storeops import MirrorResult, StoreRunner, apply_mirror, read_mirror
from reactor.cd.targets import ClusterIndex, Discovered
from reactor.cd.unwatched import UnwatchedRows
from reactor.service import Service
from reactor.store import KnownCluster, MirroredApp

log = logging.getLogger(__name__)

#: New apps written per transaction: about 5 ms of the store's one writer while discovery
#: reads 20,000 Secrets beside (250 took 10-14 ms, 1,000 33-77 ms), the longest a request
#: queued behind one waits.
INSERTS_PER_TRANSACTION = 100


@dataclass(frozen=True)
class Mirrored:
    """The store as the rules see it after the mirror (previewed, in a dry run)."""

    clusters: list[KnownCluster]
    #: the rows of the watched kinds
    rows: list[MirroredApp]
    #: app name -> why its object is not an app
    unresolved: dict[str, str]


def _plan(
    objects: Mapping[str, Seen],
    clusters: list[KnownCluster],
    discovered: Discovered,
    rows: list[MirroredApp],
) -> MirrorPlan:
    """The mirror's plan (in a worker thread: nothing given changes meanwhile)."""
    index = ClusterIndex.of(clusters, *discovered)
    return plan(objects, index, {r.name: mirror_row(r) for r in rows})


class MirrorPass:
    """The module docstring; remembers what it logged."""

    def __init__(self, backend: StoreRunner, settings: CdSettings, metrics: CdMetrics) -> None:
        self.backend = backend
        self.dry_run = settings.dry_run
        #: the name prefixes of the kinds it watches: the rows it may write
        self.kinds = tuple(prefix_of(kind) for kind in settings.kinds)
        self.unwatched = UnwatchedRows(settings.kinds, settings.dry_run, metrics.set_unwatched)
        self._previewed: tuple[int, ...] = ()

    async def run(
        self,
        objects: Mapping[str, Seen],
        discovered: Discovered,
        acting: Callable[[], bool],
    ) -> Mirrored | None:
        """None when the replica stopped acting before it could write."""
        clusters, rows = await self.backend.read(self._read)
        # Off the event loop: the index of a fleet's clusters and the plan of its objects
        # are hundreds of milliseconds of Python at 20,000 clusters and 10,000 objects.
        mirror = await in_background(_plan, objects, clusters, discovered, rows)
        if self.dry_run:
            self._log_preview(mirror)
            return Mirrored(clusters, preview(mirror, rows, clusters), mirror.unresolved)
        if not mirror.writes:
            return Mirrored(clusters, rows, mirror.unresolved)
        results: list[MirrorResult] = []
        for part in mirror.split(INSERTS_PER_TRANSACTION):
            if not acting():
                return None
            results.append(await self.backend.run(self._apply(part)))
        result = MirrorResult.sum(results)
        log.info(
            "cd: mirror: %d app(s) added (%d in an outage), %d moved, %d updated, %d removed",
            result.inserted,
            result.joined,
            result.moved,
            result.updated,
            result.deleted,
        )
        clusters, rows = await self.backend.read(self._read)
        return Mirrored(clusters, rows, {**mirror.unresolved, **result.skipped})

    def _read(self, service: Service) -> tuple[list[KnownCluster], list[MirroredApp]]:
        """The store's clusters and the mirrored apps this replica mirrors, the others
        reported: where the read runs (off the event loop), as 10,000 rows take 8-10 ms
        to sort out."""
        clusters, rows = read_mirror(service)
        return clusters, self.unwatched.mine(rows)

    def _apply(self, part: MirrorPlan) -> Callable[[Service], MirrorResult]:
        return lambda service: apply_mirror(service, part, self.kinds)

    def reset(self) -> None:
        """Forget what was logged (a replica that begins to act says it again)."""
        self.unwatched.reset()
        self._previewed = ()

    def _log_preview(self, mirror: MirrorPlan) -> None:
        shape = (len(mirror.inserts), len(mirror.moves), len(mirror.updates), len(mirror.deletes))
        if mirror.writes and shape != self._previewed:
            log.info(
                "cd (dry run): the mirror would add %d app(s), move %d, update %d, remove %d; "
                "nothing is written",
                *shape,
            )
        self._previewed = shape
