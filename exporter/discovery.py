"""Kubeconfig files -> the clusters of the fleet, and the problems found on the way.

Discovery is pure parsing: no network, no ``kubernetes`` client, and it runs in a worker
thread (the exporter's cycle and the reactor's start-up call :meth:`Discoverer.scan` off
the event loop). Each file is parsed once per change (its device, inode, size and mtime),
within bounds (``exporter.kubeconfig_yaml``: node count with aliases expanded;
``exporter.kubeconfig_files``: bytes, regular files only), and every context is read from
that one parse, so a file of thousands of contexts costs one parse, not one per context.

Sources, in order (``exporter.kubeconfig_files`` says how each is found): the main
kubeconfig, one named file or kubectl's ``KUBECONFIG`` list merged map by map (contexts,
clusters, users: the first file naming an entry wins, and a context may use a cluster or
user of another listed file), then every visible file under ``KUBECONFIG_DIR`` in name
order, each on its own. Each context is a cluster; the first name seen wins; a bad file or
context is a :class:`DiscoveryProblem` (file and reason, never a credential) and is
skipped while the rest is discovered.

A file that cannot be read or parsed keeps the clusters of its last good version (and a
problem says so) until it parses again or is removed: ``kubectl config`` rewrites a
kubeconfig in place, and a scan that lands in the middle of the rewrite must not make the
file's clusters vanish for a cycle (their status alerts would resolve).

With a :class:`~exporter.shard.Shard`, a scan returns only that shard's clusters (and the
problems of its contexts); the reactor scans unsharded.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from exporter import kubeconfig_yaml
from exporter.kubeconfig_files import (
    MAX_FILE_BYTES,
    FileVersion,
    KubeconfigList,
    MainKubeconfig,
    ReadError,
    absolute,
    being_rewritten,
    file_version,
    main_kubeconfig,
    read_file,
    walk_folder,
)
from exporter.shard import Shard

__all__ = [
    "MAX_FILE_BYTES",
    "Cluster",
    "ContextConfig",
    "Discoverer",
    "Discovery",
    "DiscoveryProblem",
    "FileVersion",
    "KubeconfigList",
    "MainKubeconfig",
    "PackedConfig",
    "main_kubeconfig",
    "probeable",
    "unpack",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cluster:
    """One cluster of the fleet, as discovery found it."""

    name: str  #: the kubeconfig context name
    endpoint: str  #: that context's ``cluster.server``
    kubeconfig_secret_ref: str  #: path of the kubeconfig file that names the context
    context: str  #: context name inside that file (== name)
    #: that context's ``cluster.proxy-url``, if any; it may hold the proxy's password, so
    #: it stays out of ``repr`` (logs say ``exporter.proxy.Proxy.label``)
    proxy_url: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class DiscoveryProblem:
    """A file or context that was skipped, and why (a sentence, never a credential)."""

    source: str  #: file path
    context: str | None  #: None when the whole file is bad
    reason: str

    def __str__(self) -> str:
        where = self.source if self.context is None else f"{self.source} (context {self.context!r})"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class Discovery:
    """Result of one scan."""

    clusters: tuple[Cluster, ...]
    problems: tuple[DiscoveryProblem, ...]
    #: problems not present in the previous scan of the same Discoverer: logged and counted
    #: once when they appear, not once per cycle
    new_problems: tuple[DiscoveryProblem, ...] = ()
    #: clusters of the whole fleet, before sharding (== len(clusters) when unsharded)
    fleet_size: int = 0


@dataclass(frozen=True)
class ContextConfig:
    """What credentials need to build one context: a minimal kubeconfig of that context.

    ``config`` holds only this context, its cluster and its user (so the kubernetes
    client never scans a list of thousands); it may hold credentials, so it is kept out
    of ``repr``.
    """

    source: str  #: kubeconfig file path
    context: str  #: context name
    #: the version of the file(s) it was read from (cache key for credentials)
    version: FileVersion
    config: Mapping[str, Any] = field(repr=False)
    base_path: str = ""  #: folder relative credential paths are resolved against


class PackedConfig(Mapping[str, Any]):
    """A minimal kubeconfig kept pickled until credentials are built from it.

    Discovery keeps every context's minimal kubeconfig for as long as its file is
    unchanged, but credentials are built once per file version: as Python dicts, 10,000
    contexts with embedded certificates held 140 MB (14 KiB each); pickled, 3 KiB each.
    Pickle keeps shared objects shared, so YAML aliases are not expanded here.
    Reading it unpickles a fresh copy each time (use :func:`unpack` to do it once).
    """

    __slots__ = ("_blob",)

    def __init__(self, config: Mapping[str, Any]) -> None:
        # Our own parse of the file, never foreign bytes: pickle is safe and keeps types.
        self._blob = pickle.dumps(dict(config), protocol=pickle.HIGHEST_PROTOCOL)

    def load(self) -> dict[str, Any]:
        value: dict[str, Any] = pickle.loads(self._blob)  # our own bytes (see __init__)
        return value

    def __getitem__(self, key: str) -> Any:
        return self.load()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.load())

    def __len__(self) -> int:
        return len(self.load())

    def __repr__(self) -> str:  # never the content: it holds credentials
        return f"PackedConfig({len(self._blob)} bytes)"


def unpack(config: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh ``dict`` of a context's minimal kubeconfig, unpickled once."""
    return config.load() if isinstance(config, PackedConfig) else dict(config)


def probeable(ref: str) -> bool:
    """Whether a ``kubeconfig_secret_ref`` is a readable file (a Secret name is not)."""
    try:
        return os.path.isfile(ref) and os.access(ref, os.R_OK)
    except (OSError, ValueError):
        return False


# --- one file ----------------------------------------------------------------------


@dataclass
class _Doc:
    """One good parse of a kubeconfig file: its named entries, in file order."""

    version: FileVersion
    clusters: dict[str, Mapping[str, Any]]
    users: dict[str, Mapping[str, Any]]
    contexts: dict[str, Mapping[str, Any]]
    #: what is wrong with the file that does not stop it counting (an entry with no name)
    problems: list[str]


def parse_document(data: bytes | str, version: FileVersion) -> _Doc:
    """The entries of one kubeconfig; raises :class:`ReadError` when it is not one."""
    try:
        doc = kubeconfig_yaml.load(data)
    except kubeconfig_yaml.YamlLimitError as exc:
        raise ReadError(f"refused: {exc}") from None
    except yaml.reader.ReaderError as exc:
        raise ReadError(f"not YAML text ({_reader_reason(exc)})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or type(exc).__name__
        # The message names the place, never the content: a broken line may hold a key.
        raise ReadError(f"invalid YAML{where}: {what}") from None
    if not isinstance(doc, dict):
        raise ReadError(f"not a kubeconfig ({_found(doc)}, not a mapping)")
    kind = doc.get("kind")
    if kind is not None and kind != "Config":
        raise ReadError(f"not a kubeconfig: kind is {str(kind)[:40]!r}, expected 'Config'")
    if "contexts" not in doc and kind != "Config":
        # Say what was found (how many keys, never their names: a stray line may be a
        # secret), so "no contexts" stays the message of a real, empty kubeconfig.
        keys = f"{len(doc)} key" + ("" if len(doc) == 1 else "s")
        raise ReadError(f"not a kubeconfig (a mapping of {keys}, none of them 'contexts')")
    clusters, errs = _named(doc.get("clusters"), "clusters")
    users, user_errs = _named(doc.get("users"), "users")
    contexts, ctx_errs = _named(doc.get("contexts"), "contexts")
    problems = [*errs, *user_errs, *ctx_errs]
    if not contexts and not ctx_errs:
        problems.append("no contexts")
    return _Doc(version, clusters, users, contexts, problems)


def _reader_reason(exc: yaml.reader.ReaderError) -> str:
    """Why libyaml refused the bytes, with the offending character's code, not the text."""
    char = exc.character
    code = f"#x{char:04x}" if isinstance(char, int) else f"#x{bytes(char).hex()}"
    what = "unacceptable character" if isinstance(char, int) else "invalid bytes"
    return f"{what} {code} at byte {exc.position}: {exc.reason}"


def _named(items: Any, kind: str) -> tuple[dict[str, Mapping[str, Any]], list[str]]:
    """Index a kubeconfig list (``clusters``, ``users``, ``contexts``) by name."""
    index: dict[str, Mapping[str, Any]] = {}
    errors: list[str] = []
    if items is None:
        return index, errors
    if not isinstance(items, list):
        errors.append(f"'{kind}' is not a list")
        return index, errors
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            errors.append(f"{kind} entry #{i + 1} has no name")
            continue
        index.setdefault(item["name"], item)
    return index, errors


def _found(doc: object) -> str:
    """What a YAML document holds instead of a kubeconfig, in a few words, no content."""
    if doc is None:
        return "an empty document"
    if isinstance(doc, list):
        return f"a list of {len(doc)} items"
    if isinstance(doc, str):
        return "a line of text"
    return f"a {type(doc).__name__}"


@dataclass
class _FileState:
    """What discovery knows of one file: its last good parse and its last failure."""

    #: the version of the last good parse (None: never parsed well)
    good_version: FileVersion | None = None
    #: that parse, kept while a merged list needs it (a file on its own keeps its
    #: resolved contexts instead, pickled: far smaller than the parsed dicts)
    doc: _Doc | None = None
    #: the version last tried, good or not: the same version is not parsed twice
    tried: FileVersion | None = None
    #: why the last read failed; None when the good parse is the current file
    failure: str | None = None
    #: what is wrong inside the good parse (entries with no name, no contexts)
    doc_problems: list[str] = field(default_factory=list)


# --- contexts ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Resolved:
    endpoint: str
    config: ContextConfig
    proxy_url: str | None = field(default=None, repr=False)


@dataclass
class _Unit:
    """The contexts of one source (a file on its own, or the merged main list)."""

    key: tuple[tuple[str, FileVersion], ...]  #: the good versions it was resolved from
    contexts: dict[str, _Resolved]
    problems: list[DiscoveryProblem]


#: Fields holding a path that kubectl resolves against the folder of the file defining
#: the entry (client-go's ResolveLocalPaths); an exec command only when it has a ``/``.
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


def _rebased(entry: Mapping[str, Any], key: str, fields: tuple[str, ...], base: str) -> Any:
    """``entry`` with its relative file paths made absolute against ``base``."""
    inner = entry.get(key)
    if not isinstance(inner, dict):
        return entry
    changed = dict(inner)
    for name in fields:
        value = changed.get(name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            changed[name] = os.path.join(base, value)
    exec_ = changed.get("exec")
    if isinstance(exec_, dict):
        command = exec_.get("command")
        if isinstance(command, str) and "/" in command and not os.path.isabs(command):
            changed["exec"] = {**exec_, "command": os.path.join(base, command)}
    return {**entry, key: changed}


#: Nodes one cluster, user or context entry may hold, aliases expanded. Each context's
#: entries are copied into its own minimal kubeconfig and serialised (to hash credentials)
#: once per context: an entry shared by thousands of contexts must stay small, or that
#: work multiplies. A real entry holds tens of nodes (an exec plugin with its arguments
#: and environment, a hundred).
MAX_ENTRY_NODES = 1000


def _too_big(entry: object, cache: dict[int, bool]) -> bool:
    """Whether ``entry`` holds more than :data:`MAX_ENTRY_NODES` nodes, aliases expanded."""
    known = cache.get(id(entry))
    if known is None:
        known = cache[id(entry)] = _count(entry, MAX_ENTRY_NODES) > MAX_ENTRY_NODES
    return known


def _count(value: object, budget: int) -> int:
    """Nodes of ``value`` counted up to just past ``budget`` (stops there: no bomb walk)."""
    seen = 0
    stack = [value]
    while stack and seen <= budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def _resolve(docs: list[tuple[str, _Doc]]) -> tuple[dict[str, _Resolved], list[DiscoveryProblem]]:
    """Every context of ``docs`` merged map by map (first file wins for a name)."""
    oversized: dict[int, bool] = {}
    clusters: dict[str, tuple[str, Mapping[str, Any]]] = {}
    users: dict[str, tuple[str, Mapping[str, Any]]] = {}
    contexts: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for source, doc in docs:
        for merged, entries in (
            (clusters, doc.clusters),
            (users, doc.users),
            (contexts, doc.contexts),
        ):
            for name, entry in entries.items():
                merged.setdefault(name, (source, entry))
    if len(docs) == 1:
        version: FileVersion = docs[0][1].version
    else:
        version = tuple(n for _, doc in docs for n in doc.version)
    resolved: dict[str, _Resolved] = {}
    problems: list[DiscoveryProblem] = []
    for name, (source, entry) in contexts.items():

        def problem(reason: str, source: str = source, name: str = name) -> None:
            problems.append(DiscoveryProblem(source, name, reason))

        ctx = entry.get("context")
        if not isinstance(ctx, dict):
            problem("context has no 'context' mapping")
            continue
        cluster_name = ctx.get("cluster")
        if not isinstance(cluster_name, str) or not cluster_name:
            problem("context names no cluster")
            continue
        found = clusters.get(cluster_name)
        if found is None:
            problem(f"cluster {cluster_name!r} is missing")
            continue
        cluster_source, cluster_entry = found
        if _too_big(entry, oversized) or _too_big(cluster_entry, oversized):
            problem(f"context or cluster {cluster_name!r} entry over {MAX_ENTRY_NODES} YAML nodes")
            continue
        cluster = cluster_entry.get("cluster")
        server = cluster.get("server") if isinstance(cluster, dict) else None
        if not isinstance(server, str) or not server:
            problem(f"cluster {cluster_name!r} has no server")
            continue
        base = os.path.dirname(source)
        if cluster_source != source:
            cluster_entry = _rebased(
                cluster_entry, "cluster", _CLUSTER_PATHS, os.path.dirname(cluster_source)
            )
        user_name = ctx.get("user")
        mini: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [cluster_entry],
            "contexts": [entry],
        }
        if user_name:  # no user at all is anonymous access: allowed, as kubectl does
            user_found = users.get(user_name) if isinstance(user_name, str) else None
            user_entry = user_found[1] if user_found is not None else None
            if user_entry is None or not isinstance(user_entry.get("user", {}), dict):
                problem(f"user {str(user_name)[:80]!r} is missing")
                continue
            if _too_big(user_entry, oversized):
                problem(f"user {str(user_name)[:80]!r} entry over {MAX_ENTRY_NODES} YAML nodes")
                continue
            if user_found is not None and user_found[0] != source:
                user_entry = _rebased(
                    user_entry, "user", _USER_PATHS, os.path.dirname(user_found[0])
                )
            mini["users"] = [user_entry]
        config = ContextConfig(source, name, version, PackedConfig(mini), base)
        proxy_url = cluster.get("proxy-url") if isinstance(cluster, dict) else None
        if proxy_url is not None and not isinstance(proxy_url, str):
            problem(f"cluster {cluster_name!r} has a proxy-url that is not a string")
            continue
        resolved[name] = _Resolved(server, config, proxy_url or None)
    return resolved, problems


# --- the scanner -------------------------------------------------------------------


class Discoverer:
    """Scans the kubeconfig files, keeping each file's parse until the file changes.

    One instance lives as long as the exporter (or the reactor) so that a cycle re-reads
    only the files that changed; ``scan()`` is synchronous (call it in a worker thread)
    and cheap when nothing changed.

    ``kubeconfig_path``: a :class:`~pathlib.Path` names one main file that must exist; a
    :class:`KubeconfigList` is read as kubectl reads ``KUBECONFIG`` (see
    :func:`main_kubeconfig`); None: no main file. ``shard``: only that shard's clusters.
    """

    def __init__(
        self,
        kubeconfig_path: MainKubeconfig,
        kubeconfig_dir: Path | None,
        *,
        shard: Shard | None = None,
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
        #: (unit, path) -> what is known of that file; a unit is "main" or a folder file
        self._states: dict[tuple[str, str], _FileState] = {}
        self._units: dict[str, _Unit] = {}
        #: cluster name -> its context config, for the clusters of the last scan
        self._configs: dict[str, ContextConfig] = {}
        self._previous_problems: frozenset[DiscoveryProblem] = frozenset()
        #: how many times a file was parsed (tests and benchmarks check "once per change")
        self.parses = 0

    # -- files --

    def _read(
        self, unit: str, path: Path, *, required: bool, keep_doc: bool
    ) -> tuple[_Doc | None, FileVersion | None, list[DiscoveryProblem]]:
        """The good parse of ``path`` (current or last good), its version, its problems.

        ``(None, None, [])`` for a file that does not exist and need not.
        """
        source = str(path)
        key = (unit, source)
        state = self._states.get(key)
        try:
            version = file_version(path)
        except ReadError as exc:
            if exc.missing:
                self._states.pop(key, None)
                gone = [DiscoveryProblem(source, None, exc.reason)] if required else []
                return None, None, gone
            version = None
            failure: str | None = exc.reason
        else:
            failure = None
        if state is None:
            state = self._states[key] = _FileState()
        if version is not None and version != state.tried and being_rewritten(path):
            pass  # kubectl holds its lock: read the new version once it has let go
        elif version is None or version != state.tried:
            state.tried = version
            if failure is None:
                try:
                    read_version, data = read_file(path)
                    self.parses += 1
                    doc = parse_document(data, read_version)
                except ReadError as exc:
                    if exc.missing:
                        self._states.pop(key, None)
                        gone = [DiscoveryProblem(source, None, exc.reason)] if required else []
                        return None, None, gone
                    failure = exc.reason
                else:
                    state.tried = read_version
                    state.good_version = read_version
                    state.doc = doc
                    state.doc_problems = doc.problems
            state.failure = failure
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
        self, unit: str, paths: list[Path], *, required: bool
    ) -> tuple[dict[str, _Resolved], list[DiscoveryProblem]]:
        """The contexts of one unit (re-resolved only when one of its files changed)."""
        merged = len(paths) > 1
        docs: list[tuple[str, _Doc | None]] = []
        key: list[tuple[str, FileVersion]] = []
        problems: list[DiscoveryProblem] = []
        for path in paths:
            doc, good, file_problems = self._read(unit, path, required=required, keep_doc=merged)
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
        contexts, context_problems = _resolve(ready)
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
            units.extend((str(path), [path], True) for path in files)
        return units, problems

    # -- the scan --

    def scan(self) -> Discovery:
        """Read (or reuse) every kubeconfig file and list the clusters and problems."""
        clusters: list[Cluster] = []
        configs: dict[str, ContextConfig] = {}
        units, problems = self._sources()
        seen: dict[str, str] = {}
        fleet = 0
        shard = self.shard
        for unit, paths, required in units:
            contexts, unit_problems = self._unit(unit, paths, required=required)
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
                        Cluster(name, resolved.endpoint, source, name, resolved.proxy_url)
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
        return Discovery(tuple(clusters), tuple(problems), new, fleet)

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        """The minimal kubeconfig of a cluster of the last scan (made in the scan).

        None when the cluster is not one of the last scan's, for example a cluster known
        only to the reactor by a Secret name.
        """
        config = self._configs.get(cluster.name)
        if config is None or config.source != cluster.kubeconfig_secret_ref:
            return None
        return config
