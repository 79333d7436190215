"""The Secrets' clusters as the reactor keeps them: a slim fleet, and its differences.

The reactor needs little of what discovery reads from the management cluster's Secrets:
of each Secret cluster its name, endpoint, reference and why it cannot be probed
(:class:`SlimCluster`); the refs it can probe (``POST /clusters``); the aliases and each
Secret's shape (the CD mirror). Never a credential. :class:`SecretFleet` is that, and
nothing more.

:class:`FleetReader` turns what an informer holds into a :class:`FleetDiff`: each Secret
read once per ``uid`` and ``resourceVersion`` (``fleetwatch.discovery.apisource.
SecretReads``), merged with the start-up file scan by discovery's rules (files first, then
Secrets by namespace and name), and compared with the fleet it read last. The first diff
of a reader is ``full``: it holds everything and replaces whatever the reactor held (a
discovery process started again begins from nothing).

Why differences: the reader runs where the Secrets are listed, by default a process of
its own (``reactor.secretlink``), and a rotation of one Secret among 20,000 should cost
the reactor one entry, not the fleet. :meth:`FleetDiff.entries` and :class:`DiffBuilder`
carry a diff as small pieces, each cheap to decode, so the reactor never holds the
interpreter for long while a fleet arrives (:meth:`SecretFleet.apply` runs in a worker
thread).

Pure but for the reader's memory of what it read last.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from fleetwatch.common.foreground import paced
from fleetwatch.discovery import Discovery, merge
from fleetwatch.discovery.apisource import KubernetesDiscovery, SecretReads
from fleetwatch.discovery.clusters import SECRET_SCHEME
from fleetwatch.discovery.merge import Merged
from fleetwatch.discovery.secrets import SecretShape


class SlimCluster(NamedTuple):
    """A Secret cluster as the reactor upserts it."""

    name: str
    endpoint: str
    ref: str
    #: why the exporter cannot probe it (``Cluster.not_probeable``), or None
    not_probeable: str | None


@dataclass(frozen=True)
class SecretFleet:
    """What the reactor holds of the Secrets' clusters (module docstring)."""

    #: name -> the Secret cluster of that name
    clusters: Mapping[str, SlimCluster] = field(default_factory=dict)
    #: the ``secret://`` refs of the clusters the exporter can probe
    held: frozenset[str] = frozenset()
    #: ref of a duplicate Secret -> the name of the cluster kept (``Merged.aliases``)
    aliases: Mapping[str, str] = field(default_factory=dict)
    #: ref of every Secret read -> its kind and key names (``Merged.secrets``)
    shapes: Mapping[str, SecretShape] = field(default_factory=dict)
    #: the Secrets' problems (a Secret or a context skipped), counted
    problems: int = 0

    @staticmethod
    def of(merged: Merged) -> SecretFleet:
        """The Secrets' part of one merge of files and Secrets."""
        return SecretFleet(
            clusters={
                c.name: SlimCluster(c.name, c.endpoint, c.kubeconfig_secret_ref, c.not_probeable)
                for c in paced(merged.discovery.clusters)
                if c.kubeconfig_secret_ref.startswith(SECRET_SCHEME)
            },
            held=merged.held,
            aliases=dict(merged.aliases),
            shapes=dict(merged.secrets),
            problems=sum(
                1 for p in merged.discovery.problems if p.source.startswith(SECRET_SCHEME)
            ),
        )

    def apply(self, diff: FleetDiff) -> SecretFleet:
        """This fleet with ``diff`` applied (a new fleet: the old one may be read meanwhile
        by another thread, the CD mirror's plan)."""
        base = SecretFleet() if diff.full else self
        return SecretFleet(
            clusters=_applied(base.clusters, diff.clusters, diff.clusters_gone),
            held=(base.held - diff.held_removed) | diff.held_added,
            aliases=_applied(base.aliases, diff.aliases, diff.aliases_gone),
            shapes=_applied(base.shapes, diff.shapes, diff.shapes_gone),
            problems=diff.problems,
        )

    def refused(self) -> dict[str, str]:
        """ref -> why its cluster cannot be probed."""
        return {
            c.ref: c.not_probeable for c in self.clusters.values() if c.not_probeable is not None
        }


def _applied(base: Mapping[str, Any], put: Mapping[str, Any], gone: tuple[str, ...]) -> Any:
    if not put and not gone:
        return base
    out = dict(base)
    for key in gone:
        out.pop(key, None)
    out.update(put)
    return out


@dataclass(frozen=True)
class FleetDiff:
    """What changed between two :class:`SecretFleet` (module docstring)."""

    #: everything the reader holds: replaces, does not update
    full: bool = False
    #: every Secret watch completed its first list when the objects were taken
    synced: bool = False
    clusters: Mapping[str, SlimCluster] = field(default_factory=dict)
    clusters_gone: tuple[str, ...] = ()
    held_added: frozenset[str] = frozenset()
    held_removed: frozenset[str] = frozenset()
    aliases: Mapping[str, str] = field(default_factory=dict)
    aliases_gone: tuple[str, ...] = ()
    shapes: Mapping[str, SecretShape] = field(default_factory=dict)
    shapes_gone: tuple[str, ...] = ()
    #: the Secrets' problems now, counted
    problems: int = 0
    #: the Secrets' problems that appeared with this read, as log lines (never a value)
    new_problems: tuple[str, ...] = ()

    @property
    def mirror_changed(self) -> bool:
        """The aliases or the Secrets' shapes changed (the CD mirror resolves against them)."""
        return self.full or bool(
            self.aliases or self.aliases_gone or self.shapes or self.shapes_gone
        )

    def entries(self) -> Iterator[tuple[str, str, Any]]:
        """Its changes as ``(what, key, value)``, for :class:`DiffBuilder` at the other end."""
        for name, cluster in self.clusters.items():
            yield "cluster", name, tuple(cluster)
        for name in self.clusters_gone:
            yield "cluster-", name, None
        for ref in self.held_added:
            yield "held", ref, None
        for ref in self.held_removed:
            yield "held-", ref, None
        for ref, name in self.aliases.items():
            yield "alias", ref, name
        for ref in self.aliases_gone:
            yield "alias-", ref, None
        for ref, shape in self.shapes.items():
            yield "shape", ref, (shape.kind, tuple(sorted(shape.keys)))
        for ref in self.shapes_gone:
            yield "shape-", ref, None

    def end(self) -> DiffEnd:
        return DiffEnd(self.full, self.synced, self.problems, self.new_problems)


class DiffEnd(NamedTuple):
    """The last piece of a diff sent as :meth:`FleetDiff.entries`."""

    full: bool
    synced: bool
    problems: int
    new_problems: tuple[str, ...]


class DiffBuilder:
    """A :class:`FleetDiff` again from its :meth:`~FleetDiff.entries` and :meth:`~FleetDiff.
    end`. Shapes are interned: 20,000 Secrets have a handful of shapes."""

    def __init__(self) -> None:
        self._interned: dict[Any, SecretShape] = {}
        self._reset()

    def _reset(self) -> None:
        self._clusters: dict[str, SlimCluster] = {}
        self._aliases: dict[str, str] = {}
        self._shapes: dict[str, SecretShape] = {}
        self._gone: dict[str, list[str]] = {"cluster-": [], "alias-": [], "shape-": []}
        self._held: dict[str, set[str]] = {"held": set(), "held-": set()}

    def add(self, entries: list[tuple[str, str, Any]]) -> None:
        """One piece; raises ``ValueError`` on an entry it does not know (a bug, not data)."""
        for what, key, value in entries:
            if what == "cluster":
                self._clusters[key] = SlimCluster(*value)
            elif what == "shape":
                shape = self._interned.get(value)
                if shape is None:
                    shape = self._interned[value] = SecretShape(value[0], frozenset(value[1]))
                self._shapes[key] = shape
            elif what == "alias":
                self._aliases[key] = value
            elif what in self._held:
                self._held[what].add(key)
            elif what in self._gone:
                self._gone[what].append(key)
            else:
                raise ValueError(f"unknown fleet entry {what!r}")

    def build(self, end: DiffEnd) -> FleetDiff:
        diff = FleetDiff(
            full=end.full,
            synced=end.synced,
            clusters=self._clusters,
            clusters_gone=tuple(self._gone["cluster-"]),
            held_added=frozenset(self._held["held"]),
            held_removed=frozenset(self._held["held-"]),
            aliases=self._aliases,
            aliases_gone=tuple(self._gone["alias-"]),
            shapes=self._shapes,
            shapes_gone=tuple(self._gone["shape-"]),
            problems=end.problems,
            new_problems=tuple(end.new_problems),
        )
        self._reset()  # ready for the next diff
        return diff


def diff(old: SecretFleet, new: SecretFleet, *, full: bool, synced: bool) -> FleetDiff:
    """``new`` against ``old`` (``full``: all of ``new``, whatever ``old`` holds)."""
    if full:
        old = SecretFleet()
    return FleetDiff(
        full=full,
        synced=synced,
        clusters=_changed(old.clusters, new.clusters),
        clusters_gone=_gone(old.clusters, new.clusters),
        held_added=new.held - old.held,
        held_removed=old.held - new.held,
        aliases=_changed(old.aliases, new.aliases),
        aliases_gone=_gone(old.aliases, new.aliases),
        shapes=_changed(old.shapes, new.shapes),
        shapes_gone=_gone(old.shapes, new.shapes),
        problems=new.problems,
    )


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in paced(new.items()) if old.get(k) != v}


def _gone(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(k for k in old if k not in new)


class FleetReader:
    """An informer's Secrets -> the :class:`FleetDiff` since the last read (module
    docstring). One caller at a time (a worker thread, or the discovery process).

    ``release``: drop each Secret's data once read (``SecretReads``); only for the reader
    that owns the informer and is its only reader of data."""

    def __init__(
        self, settings: KubernetesDiscovery, files: Discovery, *, release: bool = False
    ) -> None:
        self.files = files
        self._reads = SecretReads(settings, release=release)
        self._problems: tuple[Any, ...] = ()
        self._sent = SecretFleet()
        self._first = True

    def read(self, objects: Mapping[str, Mapping[str, Any]], synced: bool) -> FleetDiff:
        merged = merge(self.files, self._reads.read(objects), previous=self._problems)
        self._problems = merged.discovery.problems
        fleet = SecretFleet.of(merged)
        found = diff(self._sent, fleet, full=self._first, synced=synced)
        self._sent, self._first = fleet, False
        new = tuple(
            str(p) for p in merged.discovery.new_problems if p.source.startswith(SECRET_SCHEME)
        )
        return replace(found, new_problems=new)


def files_for_reader(files: Discovery) -> Discovery:
    """The start-up scan as a reader needs it: a proxy URL (it may hold a password) is not
    read by the merge, so it does not travel to the discovery process."""
    clusters = tuple(replace(c, proxy_url=None) for c in files.clusters)
    return replace(files, clusters=clusters)
