"""The reactor's clusters from the management cluster's Secrets, upserted as they change.

With ``--discovery.kubernetes`` the reactor runs the same list+watch as the exporter
(``fleetwatch.discovery.apisource``) for as long as it serves, by default in a discovery
process of its own (``reactor.secretlink``), and :class:`ApiDiscovery` keeps its store in
step with it:

1. **When.** The source sends a difference whenever the Secrets changed; a burst of
   events (every Secret rotated at once, the first list) is gathered for ``debounce_s``
   first, so a burst costs one merge and one round of upserts.
2. **What.** Where the Secrets are listed: each Secret read once per ``uid`` and
   ``resourceVersion`` (``fleetwatch.discovery.apisource.SecretReads``), merged with the
   clusters of the start-up file scan by discovery's rules (``fleetwatch.discovery.merge``:
   files first, then Secrets by namespace and name; a later name is a problem, logged
   once here), and kept slim: name, endpoint, reference, why not probeable
   (``reactor.secretfleet``). Here, off the event loop: the difference applied, and
   compared with what this process upserted last.
3. **Upsert.** The Secret clusters whose endpoint or ``kubeconfig_secret_ref``
   (``secret://NAMESPACE/NAME`` and ``#KEY`` for a labelled Secret's key) differ from
   what this process last upserted go to ``Service.upsert_discovered``, as the start-up
   scan's do: a new cluster is added (``source: discovery``), a known one gets its
   endpoint and reference updated and keeps everything else (status, outage, apps).
   Batches of ``UPSERT_BATCH`` per transaction, so a fleet of thousands never holds the
   store for long: a request's transaction waits at most one batch (about 5 ms; 100 took
   10-12 ms and 500 30-60 ms while the Secrets were read, in bench/reactor_lists). A store that
   cannot answer is retried every ``retry_s``.

**Only a whole list is written.** A source's first difference (at the start, and from a
discovery process started again) holds its fleet whole; it is held back until every watch
has listed (synced), then replaces what was published. The Argo CD, Cluster API and
labelled Secrets are three lists, each at its own pace, and the merge names a cluster by
every Secret (files first, then by namespace and name): half of them can give a name to
the wrong Secret. Measured at every restart of bench/reactor_lists' reactor: the 1,000
clusters with an Argo CD and a Cluster API Secret had their reference written to the
Cluster API one, then back to Argo CD's 7 s later. So what the store holds, what ``POST
/clusters`` and the CD mirror resolve against never come from half a list (the mirror
waits for it too, ``reactor.cd.actuator``); a cluster is gone only from a synced fleet.

**A Secret deleted takes nothing out.** File discovery never deletes either (a kubeconfig
removed leaves its clusters in the store): a cluster is the reactor's record of outages and
apps, and a Secret deleted by mistake, or while it is moved, must not drop them. The
reactor logs that the Secret is gone; ``DELETE /clusters/{name}`` forgets a decommissioned
cluster. Its reference then names nothing discovery holds, so ``POST /clusters`` warns.

**Probeable.** :attr:`ApiDiscovery.held` are the refs of the Secret clusters the exporter
can probe (``fleetwatch.discovery.merge.Merged.held``); ``POST /clusters`` asks
``fleetwatch.discovery.probeable(ref, held)`` and, when not, :func:`unprobeable_reason`.

**Never fatal.** The informer retries on its own (its errors are counted and exported on
the reactor's ``/metrics``); an error here is logged and the loop goes on: the API and the
gate keep answering. Nothing read from a Secret is logged: names, references and reasons
only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.common.foreground import paced
from fleetwatch.discovery import Discovery, parse_secret_ref
from fleetwatch.discovery.clusters import SECRET_SCHEME
from fleetwatch.discovery.secrets import SecretShape
from reactor.context import Backend
from reactor.secretfleet import FleetDiff, SecretFleet, SlimCluster
from reactor.secretlink import FleetSource
from reactor.service import DiscoveredCluster, Service
from reactor.store import StoreUnavailable

log = logging.getLogger(__name__)

#: Clusters upserted per transaction.
UPSERT_BATCH = 50


class ApiDiscovery:
    """A source's Secret clusters -> the reactor's clusters (module docstring)."""

    def __init__(self, source: FleetSource, *, retry_s: float = 5.0) -> None:
        self.source = source
        #: seconds before an upsert the store refused is tried again
        self.retry_s = retry_s
        #: the Secret clusters published (:meth:`publish`)
        self.fleet = SecretFleet()
        #: ref -> why its cluster cannot be probed (``Cluster.not_probeable``)
        self.refused: Mapping[str, str] = {}
        #: the CD mirror is to hear of a change (aliases, shapes, the first list) at the next
        #: upsert, even one with nothing to write
        self._tell_mirror = False
        #: a source's first fleet (at the start, or from a restarted source), held back until
        #: it is synced
        self._pending: SecretFleet | None = None
        #: name -> (endpoint, ref) as last upserted by this process
        self._upserted: dict[str, tuple[str, str]] = {}
        self._listed = False

    def __repr__(self) -> str:
        return f"ApiDiscovery({len(self._upserted)} clusters, {self.source!r})"

    @property
    def files(self) -> Discovery:
        """The start-up scan's clusters: they come first, by the merge's rule."""
        return self.source.files

    @files.setter
    def files(self, files: Discovery) -> None:
        self.source.files = files

    @property
    def held(self) -> frozenset[str]:
        """The ``secret://`` refs of the Secret clusters that can be probed."""
        return self.fleet.held

    @property
    def aliases(self) -> Mapping[str, str]:
        """ref of a duplicate Secret -> its cluster (``Merged.aliases``; the CD mirror's)."""
        return self.fleet.aliases

    @property
    def secret_shapes(self) -> Mapping[str, SecretShape]:
        """Every Secret read: its kind and key names (``Merged.secrets``; the CD mirror's)."""
        return self.fleet.shapes

    @property
    def listed(self) -> bool:
        """Every watch completed its first list and what it found was merged: :attr:`held`
        is then the fleet's (``/-/ready``)."""
        return self._listed

    async def run(self, backend: Backend) -> None:
        """Upsert the Secrets' clusters whenever they change, until cancelled."""
        while True:
            diff = await self.source.next()
            try:
                fleet = await in_background(self.take, diff)
            except Exception:  # a bug: said, and the next change tried; never fatal
                log.exception("clusters from Secrets: unexpected error")
                continue
            if fleet is not None:
                await self.settle(backend, fleet, diff)

    def take(self, diff: FleetDiff) -> SecretFleet | None:
        """The fleet to publish after ``diff``, or None while a source lists its first
        fleet (in a worker thread; one call at a time). A source's first diff is whole,
        and waits until it is synced (module docstring: only a whole list is written)."""
        if diff.full:
            self._pending = SecretFleet().apply(diff)
        elif self._pending is not None:
            self._pending = self._pending.apply(diff)
        else:
            return self.fleet.apply(diff)
        if not diff.synced:
            return None
        fleet, self._pending = self._pending, None
        return fleet

    async def settle(self, backend: Backend, fleet: SecretFleet, diff: FleetDiff) -> None:
        """Publish ``fleet`` and upsert what differs, retrying while the store is out."""
        while True:
            try:
                found = await in_background(self.read, fleet, diff)
                self.publish(found)
                await self.upsert(backend, found)
                return
            except StoreUnavailable as exc:
                log.warning(
                    "clusters from Secrets: the database is unavailable (%s); retrying in %gs",
                    exc,
                    self.retry_s,
                )
                await asyncio.sleep(self.retry_s)
            except Exception:  # a bug: said, and the next change tried; never fatal
                log.exception("clusters from Secrets: unexpected error")
                await asyncio.sleep(self.retry_s)
                return

    def read(self, fleet: SecretFleet, diff: FleetDiff) -> SecretsRead:
        """What differs from what this process published and upserted last. In a worker
        thread: at 20,000 Secrets each comparison is milliseconds of Python that every
        request would wait out on the event loop, which then only assigns and writes.
        Safe: :meth:`publish` and :meth:`upsert`, the only writers of what it compares
        with, run after it, never beside it. A cluster is gone only from a synced fleet
        (one still listing has not named them all yet)."""
        clusters = fleet.clusters
        return SecretsRead(
            fleet,
            changed=[
                c
                for c in paced(clusters.values())
                if self._upserted.get(c.name) != (c.endpoint, c.ref)
            ],
            gone=sorted(set(self._upserted) - set(clusters)) if diff.synced else [],
            refused=fleet.refused(),
            mirror_changed=_differ(fleet.aliases, self.aliases)
            or _differ(fleet.shapes, self.secret_shapes),
            new_problems=diff.new_problems,
            synced=diff.synced,
        )

    def publish(self, found: SecretsRead) -> None:
        """What ``POST /clusters`` reads: the refs held and refused; and the CD mirror:
        the aliases and the Secrets' shapes."""
        # The first list done is news to the CD mirror, which waits for it
        # (``reactor.cd.actuator``), whether or not anything is then upserted.
        first_list = found.synced and not self._listed
        self._tell_mirror = self._tell_mirror or found.mirror_changed or first_list
        self.fleet = found.fleet
        self.refused = found.refused
        self._listed = self._listed or found.synced
        for problem in found.new_problems:
            log.warning("discovery: %s", problem)

    def for_mirror(self) -> tuple[Mapping[str, str], Mapping[str, SecretShape]] | None:
        """The aliases and the Secrets read, for the CD mirror (``reactor.cd.targets``);
        None until the first list is whole, which the mirror waits for."""
        return (self.aliases, self.secret_shapes) if self._listed else None

    async def upsert(self, backend: Backend, found: SecretsRead) -> None:
        """Upsert what changed since the last upsert; log what is new."""
        changed = found.changed
        added = updated = 0
        for start in range(0, len(changed), UPSERT_BATCH):
            batch = changed[start : start + UPSERT_BATCH]
            a, u = await backend.run(_upsert(batch))
            added, updated = added + a, updated + u
            for c in batch:
                self._upserted[c.name] = (c.endpoint, c.ref)
                if c.not_probeable is not None:
                    log.warning(
                        "cluster %s (%s) cannot be probed: %s; it stays UNKNOWN",
                        c.name,
                        c.ref,
                        c.not_probeable,
                    )
        if added or updated or self._tell_mirror:
            # The CD mirror resolves its objects against the clusters (and the aliases):
            # one listed before its cluster was upserted is mirrored now, not at the next
            # resync.
            self._tell_mirror = False
            backend.changed()
        for name in found.gone:
            _, ref = self._upserted.pop(name)
            log.info(
                "cluster %s: %s is gone from the management cluster; the reactor keeps the "
                "cluster (DELETE /clusters/%s forgets it)",
                name,
                ref,
                name,
            )
        if changed or found.gone:
            log.info(
                "clusters from Secrets: %d cluster(s), %d added, %d updated, %d gone, "
                "%d problem(s)",
                found.clusters,
                added,
                updated,
                len(found.gone),
                found.fleet.problems,
            )


@dataclass(frozen=True)
class SecretsRead:
    """A fleet, and what differs from what was last published and upserted
    (:meth:`ApiDiscovery.read`)."""

    fleet: SecretFleet
    #: the Secret clusters whose endpoint or reference differ from the last upsert
    changed: list[SlimCluster]
    #: names upserted from a Secret that no Secret names any more
    gone: list[str]
    #: ref -> why its cluster cannot be probed (``Cluster.not_probeable``)
    refused: dict[str, str]
    #: the aliases or the Secrets' shapes may differ from those published
    mirror_changed: bool
    #: the Secrets' problems that appeared, as log lines
    new_problems: tuple[str, ...] = ()
    #: taken once every watch had listed
    synced: bool = False

    @property
    def clusters(self) -> int:
        return len(self.fleet.clusters)


def unprobeable_reason(ref: str, source: ApiDiscovery | None) -> str:
    """Why ``ref`` cannot be probed, as the end of "kubeconfig_secret_ref REF ..." (for
    ``POST /clusters``'s warning, once ``fleetwatch.discovery.probeable`` said it cannot)."""
    if not ref.startswith(SECRET_SCHEME):
        return "is not a readable file"
    if parse_secret_ref(ref) is None:
        return "is neither a readable file nor a secret://NAMESPACE/NAME[#KEY] reference"
    if source is None:
        return "names a Secret, and the reactor does not read Secrets (--discovery.kubernetes)"
    if not source.listed:
        return "names a Secret, and the management cluster's Secrets are not listed yet"
    if ref in source.refused:
        return f"names a Secret whose cluster cannot be probed: {source.refused[ref]}"
    return (
        "names no Secret that discovery holds (not in a namespace watched, not of a kind "
        "or label read, a key it does not have, or a cluster name taken first elsewhere)"
    )


def _upsert(clusters: list[SlimCluster]) -> Callable[[Service], tuple[int, int]]:
    found = [DiscoveredCluster(c.name, c.endpoint, c.ref) for c in clusters]
    return lambda service: service.upsert_discovered(found)


def _differ(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return a is not b and a != b


#: The Secrets' clusters of a reactor run with ``--discovery.kubernetes``; None without.
API_DISCOVERY: web.AppKey[ApiDiscovery | None] = web.AppKey("api_discovery", ApiDiscovery)
