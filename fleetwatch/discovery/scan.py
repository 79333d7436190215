"""Kubeconfig files -> the clusters of the fleet, and the problems found on the way.

Discovery reads files and parses them: no network, no ``kubernetes`` client, and it runs in
a worker thread (the exporter's cycle and the reactor's start-up call
:meth:`Discoverer.scan` off the event loop). Each file is parsed once per change (its
device, inode, size and mtime), within bounds (``fleetwatch.discovery.boundedyaml``: node count
with aliases expanded; ``fleetwatch.discovery.files``: bytes, regular files only), and
every context is read from that one parse (``fleetwatch.discovery.kubeconfig``), so a file of
thousands of contexts costs one parse, not one per context. What a scan returns is
``fleetwatch.discovery.clusters``'s plain data.

Sources, in order (``fleetwatch.discovery.files`` says how each is found): the main
kubeconfig, one named file or kubectl's ``KUBECONFIG`` list merged map by map (contexts,
clusters, users: the first file naming an entry wins, and a context may use a cluster or
user of another listed file), then every visible file under ``KUBECONFIG_DIR`` in name
order, each on its own. Each context is a cluster; the first name seen wins; a bad file or
context is a :class:`DiscoveryProblem` (file and reason, never a credential) and is
skipped while the rest is discovered.

A file that cannot be read or parsed keeps the clusters of its last good version (and a
problem says so) until it parses again or is removed: ``kubectl config`` rewrites a
kubeconfig in place, and a scan that lands in the middle of the rewrite must not make the
file's clusters vanish for a cycle (their status alerts would resolve). A half-written file
may parse, though, with fewer contexts: with a settle time (``settle_s``, the exporter's
:data:`~fleetwatch.discovery.settle.SETTLE_SECONDS`), a changed file is read only once it has held
still that long or arrived whole, and a file gone is dropped only once it has stayed gone
that long (``fleetwatch.discovery.settle``); meanwhile its last good version stays, and the scan's
``rescan_in`` says when to scan again. Without one (one scan and done: the reactor's
start-up, ``fleetwatch discover``), a changed file is read when seen.

With a :class:`~fleetwatch.discovery.shard.Shard`, a scan returns only that shard's clusters (and
the
problems of its contexts); the reactor scans unsharded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fleetwatch.discovery.clusterlabels import NO_LABELS, Allowlist
from fleetwatch.discovery.clusters import (
    Cluster,
    ContextConfig,
    Discovery,
    DiscoveryProblem,
    probeable,
)
from fleetwatch.discovery.files import (
    FileVersion,
    KubeconfigList,
    MainKubeconfig,
    ReadError,
    absolute,
    being_rewritten,
    file_version,
    read_file,
    real_path,
    walk_folder,
)
from fleetwatch.discovery.kubeconfig import (
    Document,
    ResolvedContext,
    parse_document,
    resolve_contexts,
)
from fleetwatch.discovery.settle import Sighting, arrived_whole, wait_for
from fleetwatch.discovery.shard import Shard

log = logging.getLogger(__name__)


@dataclass
class _FileState:
    """What discovery knows of one file: its last good parse and its last failure."""

    #: the version of the last good parse (None: never parsed well)
    good_version: FileVersion | None = None
    #: that parse, kept while a merged list needs it (a file on its own keeps its
    #: resolved contexts instead)
    doc: Document | None = None
    #: the version last tried, good or not: the same version is not parsed twice
    tried: FileVersion | None = None
    #: why the last read failed; None when the good parse is the current file
    failure: str | None = None
    #: what is wrong inside the good parse (entries with no name, no contexts)
    doc_problems: list[str] = field(default_factory=list)
    #: where the path's links led when ``tried`` was read (``fleetwatch.discovery.settle``)
    target: str | None = None
    #: a change not taken yet, and since when it is seen (``fleetwatch.discovery.settle``)
    seen: Sighting | None = None


@dataclass
class _Unit:
    """The contexts of one source (a file on its own, or the merged main list)."""

    key: tuple[tuple[str, FileVersion], ...]  #: the good versions it was resolved from
    contexts: dict[str, ResolvedContext]
    problems: list[DiscoveryProblem]


class Discoverer:
    """Scans the kubeconfig files, keeping each file's parse until the file changes.

    One instance lives as long as the exporter (or the reactor) so that a cycle re-reads
    only the files that changed; ``scan()`` is synchronous (call it in a worker thread)
    and cheap when nothing changed.

    ``kubeconfig_path``: a :class:`~pathlib.Path` names one main file that must exist; a
    :class:`KubeconfigList` is read as kubectl reads ``KUBECONFIG`` (see
    :func:`main_kubeconfig`); None: no main file. ``shard``: only that shard's clusters.
    ``settle_s``: how long a changed file must hold still before it is read (0: read when
    seen; see the module docstring); ``clock``: the wall clock it is timed with.
    ``allowlist``: the labels each cluster keeps of its context's extension
    (``fleetwatch.discovery.clusterlabels``; none by default).
    """

    def __init__(
        self,
        kubeconfig_path: MainKubeconfig,
        kubeconfig_dir: Path | None,
        *,
        shard: Shard | None = None,
        settle_s: float = 0.0,
        clock: Callable[[], float] = time.time,
        allowlist: Allowlist = NO_LABELS,
    ) -> None:
        # Absolute (and ``~`` expanded) once: every source and kubeconfig_secret_ref
        # must name its file from any working directory.
        if isinstance(kubeconfig_path, KubeconfigList):
            files = tuple(absolute(p) for p in kubeconfig_path.files)
            self.kubeconfig_path: MainKubeconfig = KubeconfigList(files, kubeconfig_path.origin)
        else:
            self.kubeconfig_path = None if kubeconfig_path is None else absolute(kubeconfig_path)
        self.kubeconfig_dir = None if kubeconfig_dir is None else absolute(kubeconfig_dir)
        self.shard = shard
        self.settle_s = settle_s
        self._clock = clock
        self.allowlist = allowlist
        #: (unit, path) -> what is known of that file; a unit is "main" or a folder file
        self._states: dict[tuple[str, str], _FileState] = {}
        self._units: dict[str, _Unit] = {}
        #: the folder's files of the last scan, in order (one gone keeps its place a while)
        self._listed: list[str] = []
        #: cluster name -> its context config, for the clusters of the last scan
        self._configs: dict[str, ContextConfig] = {}
        self._previous_problems: frozenset[DiscoveryProblem] = frozenset()
        #: seconds until a change this scan did not take may be taken (None: none waits)
        self._rescan_in: float | None = None
        #: how many times a file was parsed (tests and benchmarks check "once per change")
        self.parses = 0

    # -- files --

    def _read(
        self, unit: str, path: Path, *, required: bool, keep_doc: bool, now: float
    ) -> tuple[Document | None, FileVersion | None, list[DiscoveryProblem]]:
        """The good parse of ``path`` (current or last good), its version, its problems.

        ``(None, None, [])`` for a file that does not exist and need not, and for a new
        file that has not settled yet.
        """
        source = str(path)
        key = (unit, source)
        state = self._states.get(key)
        try:
            version: FileVersion | None = file_version(path)
        except ReadError as exc:
            if exc.missing:
                if not self._stays_gone(state, now):
                    return self._gone(key, source, required)
                assert state is not None
                return self._kept(state, source, keep_doc)
            version = None
            failure: str | None = exc.reason
        else:
            failure = None
        if state is None:
            state = self._states[key] = _FileState()
        if version is None:  # cannot be looked at: a failure, the last good version kept
            state.tried, state.failure, state.seen = None, failure, None
        elif version == state.tried:
            state.seen = None  # unchanged, or back to what was read
        elif being_rewritten(path, now):
            self._look_again(self.settle_s)  # kubectl holds its lock: read once it lets go
        elif self._settled(path, state, version, now):
            try:
                read_version, data = read_file(path)
                if read_version != version and self.settle_s > 0:
                    raise ReadError("changed since it was looked at", changing=True)
                self.parses += 1
                doc = parse_document(data, read_version)
            except ReadError as exc:
                if exc.missing:
                    if not self._stays_gone(state, now):
                        return self._gone(key, source, required)
                    return self._kept(state, source, keep_doc)
                if exc.changing and self.settle_s > 0:
                    state.seen = None  # being written: one more change, timed from the
                    self._look_again(self.settle_s)  # next look
                    return self._kept(state, source, keep_doc)
                state.tried, state.failure = version, exc.reason
            else:
                state.tried = state.good_version = read_version
                state.doc, state.doc_problems, state.failure = doc, doc.problems, None
            state.target, state.seen = real_path(path), None
        return self._kept(state, source, keep_doc)

    def _settled(self, path: Path, state: _FileState, version: FileVersion, now: float) -> bool:
        """Whether a changed ``path`` may be read now (``fleetwatch.discovery.settle``); when not,
        the change is remembered and the scan asks to look again when it may be."""
        if self.settle_s <= 0:
            return True
        if arrived_whole(version, real_path(path), state.tried, state.target):
            return True
        wait, state.seen = wait_for(version, state.seen, now, self.settle_s)
        if wait > 0:
            self._look_again(wait)
            return False
        return True

    def _stays_gone(self, state: _FileState | None, now: float) -> bool:
        """Whether a file gone keeps its last good version a while longer (it may be a
        writer's move aside: ``fleetwatch.discovery.settle``)."""
        if self.settle_s <= 0 or state is None or state.good_version is None:
            return False
        wait, state.seen = wait_for(None, state.seen, now, self.settle_s)
        if wait > 0:
            self._look_again(wait)
            return True
        return False

    def _gone(
        self, key: tuple[str, str], source: str, required: bool
    ) -> tuple[None, None, list[DiscoveryProblem]]:
        self._states.pop(key, None)
        return None, None, [DiscoveryProblem(source, None, "file not found")] if required else []

    def _look_again(self, seconds: float) -> None:
        if seconds > 0 and (self._rescan_in is None or seconds < self._rescan_in):
            self._rescan_in = seconds

    @staticmethod
    def _kept(
        state: _FileState, source: str, keep_doc: bool
    ) -> tuple[Document | None, FileVersion | None, list[DiscoveryProblem]]:
        """What ``state`` holds: its good parse (or None), its version, its problems."""
        problems: list[DiscoveryProblem] = []
        if state.failure is not None:
            if state.good_version is None:
                problems.append(DiscoveryProblem(source, None, state.failure))
            else:
                kept = f"{state.failure}; its last good version is used until it parses again"
                problems.append(DiscoveryProblem(source, None, kept))
        else:
            problems.extend(DiscoveryProblem(source, None, p) for p in state.doc_problems)
        kept_doc = state.doc
        if not keep_doc:
            state.doc = None  # the unit keeps the resolved contexts; the dicts can go
        return kept_doc, state.good_version, problems

    def _unit(
        self, unit: str, paths: list[Path], *, required: bool, now: float
    ) -> tuple[dict[str, ResolvedContext], list[DiscoveryProblem]]:
        """The contexts of one unit (re-resolved only when one of its files changed)."""
        merged = len(paths) > 1
        docs: list[tuple[str, Document | None]] = []
        key: list[tuple[str, FileVersion]] = []
        problems: list[DiscoveryProblem] = []
        for path in paths:
            doc, good, file_problems = self._read(
                unit, path, required=required, keep_doc=merged, now=now
            )
            problems.extend(file_problems)
            if good is not None:
                docs.append((str(path), doc))
                key.append((str(path), good))
        cached = self._units.get(unit)
        if cached is not None and cached.key == tuple(key):
            return cached.contexts, [*problems, *cached.problems]
        if not key:
            self._units.pop(unit, None)
            return {}, problems
        ready = [(source, doc) for source, doc in docs if doc is not None]
        if len(ready) != len(docs):
            # A good version no longer in memory (never for a merged list, which keeps its
            # documents): read again from scratch on the next scan.
            for source, _ in docs:
                self._states.pop((unit, source), None)
            return (cached.contexts if cached else {}), problems
        contexts, context_problems = resolve_contexts(ready, self.allowlist)
        self._units[unit] = _Unit(tuple(key), contexts, context_problems)
        return contexts, [*problems, *context_problems]

    def _sources(self) -> tuple[list[tuple[str, list[Path], bool]], list[DiscoveryProblem]]:
        """The units to read, in order: (unit, its files, must they exist), and problems."""
        units: list[tuple[str, list[Path], bool]] = []
        problems: list[DiscoveryProblem] = []
        main = self.kubeconfig_path
        if isinstance(main, KubeconfigList):
            units.append(("main", list(main.files), False))
        elif main is not None:
            units.append(("main", [main], True))
        if self.kubeconfig_dir is not None:
            files, walk_problems = walk_folder(self.kubeconfig_dir)
            problems.extend(DiscoveryProblem(p.path, None, p.reason) for p in walk_problems)
            listed = self._with_files_gone([str(path) for path in files])
            units.extend((path, [Path(path)], True) for path in listed)
        return units, problems

    def _with_files_gone(self, listed: list[str]) -> list[str]:
        """The folder's files, and those of the last scan gone from it that may keep their
        last good version a while (``_stays_gone``), each where the walk had it."""
        previous, self._listed = self._listed, listed
        if self.settle_s <= 0:
            return listed
        now_listed = set(listed)
        gone = [
            unit
            for unit in previous
            if unit not in now_listed
            and (state := self._states.get((unit, unit))) is not None
            and state.good_version is not None
        ]
        if not gone:
            return listed
        # The walk's order is the order of the paths' parts (each folder's names sorted,
        # depth first), so a sort puts each file gone back in its place.
        self._listed = sorted([*listed, *gone], key=lambda unit: Path(unit).parts)
        return self._listed

    # -- the scan --

    def scan(self) -> Discovery:
        """Read (or reuse) every kubeconfig file and list the clusters and problems."""
        now = self._clock()
        self._rescan_in = None
        clusters: list[Cluster] = []
        configs: dict[str, ContextConfig] = {}
        units, problems = self._sources()
        seen: dict[str, str] = {}
        fleet = 0
        shard = self.shard
        for unit, paths, required in units:
            contexts, unit_problems = self._unit(unit, paths, required=required, now=now)
            problems.extend(
                p
                for p in unit_problems
                if p.context is None or shard is None or shard.owns(p.context)
            )
            for name, resolved in contexts.items():
                source = resolved.config.source
                first = seen.get(name)
                mine = shard is None or shard.owns(name)
                if first is not None:
                    if mine:
                        reason = f"duplicate name: first seen in {first}"
                        problems.append(DiscoveryProblem(source, name, reason))
                    continue
                seen[name] = source
                fleet += 1
                if mine:
                    clusters.append(
                        Cluster(
                            name,
                            resolved.endpoint,
                            source,
                            name,
                            resolved.proxy_url,
                            labels=resolved.labels,
                        )
                    )
                    configs[name] = resolved.config
        live_units = {unit for unit, _, _ in units}
        live_files = {(unit, str(path)) for unit, paths, _ in units for path in paths}
        for gone in [u for u in self._units if u not in live_units]:
            del self._units[gone]
        for key in [k for k in self._states if k not in live_files]:
            del self._states[key]
        self._configs = configs
        current = frozenset(problems)
        new = tuple(p for p in problems if p not in self._previous_problems)
        self._previous_problems = current
        return Discovery(tuple(clusters), tuple(problems), new, fleet, self._rescan_in)

    def probeable(self, ref: str) -> bool:
        """Whether a cluster's ``kubeconfig_secret_ref`` is a file that can be read
        (``fleetwatch.discovery.clusters.probeable``: files hold no ``secret://`` ref)."""
        return probeable(ref)

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        """The minimal kubeconfig of a cluster of the last scan (made in the scan).

        None when the cluster is not one of the last scan's, for example a cluster known
        only to the reactor by a Secret name.
        """
        config = self._configs.get(cluster.name)
        if config is None or config.source != cluster.kubeconfig_secret_ref:
            return None
        return config
