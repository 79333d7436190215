"""Kubeconfig files -> the clusters of the fleet, and the problems found on the way.

Discovery is pure parsing: no network, no ``kubernetes`` client. Each file is parsed once
per change (its inode, size and mtime), with libyaml (``yaml.CSafeLoader``: ten times the
pure-Python loader on big files), and every context is read from that one parsed dict, so
a file of thousands of contexts costs one parse, not one per context.

Rules (DESIGN.md, "Discovery"): ``KUBECONFIG_PATH`` first, then ``*.yaml``, ``*.yml`` and
``*.conf`` of ``KUBECONFIG_DIR`` in name order; each context is a cluster; the first name
seen wins; a bad file or context is a :class:`DiscoveryProblem` (file and reason, never a
credential) and is skipped while the rest is discovered.
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

log = logging.getLogger(__name__)

#: Suffixes of the files read from ``KUBECONFIG_DIR`` (the guide's list).
KUBECONFIG_SUFFIXES = (".yaml", ".yml", ".conf")

#: What identifies one version of a file: a change of any of them means "parse again".
FileVersion = tuple[int, int, int, int]  # (device, inode, size, mtime in ns)


@dataclass(frozen=True)
class Cluster:
    """One cluster of the fleet, as discovery found it."""

    name: str  #: the kubeconfig context name
    endpoint: str  #: that context's ``cluster.server``
    kubeconfig_secret_ref: str  #: path of the kubeconfig file it came from
    context: str  #: context name inside that file (== name)


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


@dataclass(frozen=True)
class ContextConfig:
    """What credentials need to build one context: a minimal kubeconfig of that context.

    ``config`` holds only this context, its cluster and its user (so the kubernetes
    client never scans a list of thousands); it may hold credentials, so it is kept out
    of ``repr``.
    """

    source: str  #: kubeconfig file path
    context: str  #: context name
    version: FileVersion  #: the file version it was read from (cache key for credentials)
    config: Mapping[str, Any] = field(repr=False)
    base_path: str = ""  #: folder relative credential paths are resolved against


class PackedConfig(Mapping[str, Any]):
    """A minimal kubeconfig kept pickled until credentials are built from it.

    Discovery keeps every context's minimal kubeconfig for as long as its file is
    unchanged, but credentials are built once per file version: as Python dicts, 10,000
    contexts with embedded certificates held 140 MB (14 KiB each); pickled, 3 KiB each.
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


@dataclass
class _ParsedFile:
    version: FileVersion | None
    #: context name -> (endpoint, minimal config) in file order
    contexts: dict[str, tuple[str, Mapping[str, Any]]]
    problems: list[DiscoveryProblem]
    #: context name -> its ContextConfig, made on first use (stable between cycles)
    configs: dict[str, ContextConfig] = field(default_factory=dict)


def probeable(ref: str) -> bool:
    """Whether a ``kubeconfig_secret_ref`` is a readable file (a Secret name is not)."""
    try:
        return os.path.isfile(ref) and os.access(ref, os.R_OK)
    except (OSError, ValueError):
        return False


def kubeconfig_files(kubeconfig_path: Path | None, kubeconfig_dir: Path | None) -> list[Path]:
    """The files discovery reads, in order: the main kubeconfig, then the folder's files."""
    files: list[Path] = []
    if kubeconfig_path is not None:
        files.append(kubeconfig_path)
    if kubeconfig_dir is not None:
        try:
            entries = sorted(os.listdir(kubeconfig_dir))
        except OSError:
            entries = []
        files.extend(
            kubeconfig_dir / name for name in entries if name.endswith(KUBECONFIG_SUFFIXES)
        )
    return files


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


def parse_kubeconfig(source: str, text: str | bytes, version: FileVersion) -> _ParsedFile:
    """Parse one kubeconfig document into its contexts and problems (pure)."""
    parsed = _ParsedFile(version=version, contexts={}, problems=[])

    def problem(reason: str, context: str | None = None) -> None:
        parsed.problems.append(DiscoveryProblem(source=source, context=context, reason=reason))

    try:
        doc = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or type(exc).__name__
        # The message names the place, never the content: a broken line may hold a key.
        problem(f"invalid YAML{where}: {what}")
        return parsed
    if not isinstance(doc, dict):
        problem(f"not a kubeconfig ({_found(doc)}, not a mapping)")
        return parsed
    kind = doc.get("kind")
    if kind is not None and kind != "Config":
        problem(f"not a kubeconfig: kind is {str(kind)[:40]!r}, expected 'Config'")
        return parsed
    if "contexts" not in doc and kind != "Config":
        # Say what was found (how many keys, never their names: a stray line may be a
        # secret), so "no contexts" stays the message of a real, empty kubeconfig.
        keys = f"{len(doc)} key" + ("" if len(doc) == 1 else "s")
        problem(f"not a kubeconfig (a mapping of {keys}, none of them 'contexts')")
        return parsed
    clusters, errs = _named(doc.get("clusters"), "clusters")
    users, user_errs = _named(doc.get("users"), "users")
    contexts, ctx_errs = _named(doc.get("contexts"), "contexts")
    for err in (*errs, *user_errs, *ctx_errs):
        problem(err)
    if not contexts and not ctx_errs:
        problem("no contexts")
    for name, entry in contexts.items():
        ctx = entry.get("context")
        if not isinstance(ctx, dict):
            problem("context has no 'context' mapping", name)
            continue
        cluster_name = ctx.get("cluster")
        if not isinstance(cluster_name, str) or not cluster_name:
            problem("context names no cluster", name)
            continue
        cluster_entry = clusters.get(cluster_name)
        if cluster_entry is None:
            problem(f"cluster {cluster_name!r} is missing", name)
            continue
        cluster = cluster_entry.get("cluster")
        server = cluster.get("server") if isinstance(cluster, dict) else None
        if not isinstance(server, str) or not server:
            problem(f"cluster {cluster_name!r} has no server", name)
            continue
        user_name = ctx.get("user")
        mini: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [cluster_entry],
            "contexts": [entry],
        }
        if user_name:  # no user at all is anonymous access: allowed, as kubectl does
            user_entry = users.get(user_name) if isinstance(user_name, str) else None
            if user_entry is None or not isinstance(user_entry.get("user", {}), dict):
                problem(f"user {str(user_name)[:80]!r} is missing", name)
                continue
            mini["users"] = [user_entry]
        parsed.contexts[name] = (server, PackedConfig(mini))
    return parsed


def _found(doc: object) -> str:
    """What a YAML document holds instead of a kubeconfig, in a few words, no content."""
    if doc is None:
        return "an empty document"
    if isinstance(doc, list):
        return f"a list of {len(doc)} items"
    if isinstance(doc, str):
        return "a line of text"
    return f"a {type(doc).__name__}"


def _file_version(path: Path) -> FileVersion:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Discoverer:
    """Scans the kubeconfig files, keeping each file's parse until the file changes.

    One instance lives as long as the exporter (or the reactor) so that a cycle re-reads
    only the files that changed; ``scan()`` is synchronous and cheap when nothing changed.
    """

    def __init__(self, kubeconfig_path: Path | None, kubeconfig_dir: Path | None) -> None:
        # Absolute (and ``~`` expanded) once: every source and kubeconfig_secret_ref
        # must name its file from any working directory.
        self.kubeconfig_path = _absolute(kubeconfig_path)
        self.kubeconfig_dir = _absolute(kubeconfig_dir)
        self._files: dict[str, _ParsedFile] = {}
        self._previous_problems: frozenset[DiscoveryProblem] = frozenset()
        #: how many times a file was parsed (tests and benchmarks check "once per change")
        self.parses = 0

    def _read(self, path: Path) -> _ParsedFile:
        source = str(path)
        try:
            version = _file_version(path)
        except FileNotFoundError:
            return _ParsedFile(None, {}, [DiscoveryProblem(source, None, "file not found")])
        except OSError as exc:
            return _ParsedFile(None, {}, [DiscoveryProblem(source, None, _os_reason(exc))])
        cached = self._files.get(source)
        if cached is not None and cached.version == version:
            return cached
        if not path.is_file():
            parsed = _ParsedFile(version, {}, [DiscoveryProblem(source, None, "not a file")])
        else:
            try:
                text = path.read_bytes()
            except OSError as exc:
                parsed = _ParsedFile(version, {}, [DiscoveryProblem(source, None, _os_reason(exc))])
            else:
                self.parses += 1
                parsed = parse_kubeconfig(source, text, version)
        self._files[source] = parsed
        return parsed

    def scan(self) -> Discovery:
        """Read (or reuse) every kubeconfig file and list the clusters and problems."""
        clusters: list[Cluster] = []
        problems: list[DiscoveryProblem] = []
        seen: dict[str, str] = {}
        live: set[str] = set()
        folder = self.kubeconfig_dir
        if folder is not None and not folder.is_dir():
            reason = "folder not found" if not folder.exists() else "not a folder"
            problems.append(DiscoveryProblem(str(folder), None, reason))
        for path in kubeconfig_files(self.kubeconfig_path, self.kubeconfig_dir):
            source = str(path)
            live.add(source)
            parsed = self._read(path)
            problems.extend(parsed.problems)
            for name, (endpoint, _mini) in parsed.contexts.items():
                first = seen.get(name)
                if first is not None:
                    problems.append(
                        DiscoveryProblem(source, name, f"duplicate name: first seen in {first}")
                    )
                    continue
                seen[name] = source
                clusters.append(Cluster(name, endpoint, source, name))
        for gone in set(self._files) - live:
            del self._files[gone]
        current = frozenset(problems)
        new = tuple(p for p in problems if p not in self._previous_problems)
        self._previous_problems = current
        return Discovery(tuple(clusters), tuple(problems), new)

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        """The minimal kubeconfig of a discovered cluster, from the cached parse.

        None when the cluster's file is not (or no longer) in the cache, for example a
        cluster known only to the reactor by a Secret name.
        """
        parsed = self._files.get(cluster.kubeconfig_secret_ref)
        if parsed is None or parsed.version is None:
            return None
        made = parsed.configs.get(cluster.context)
        if made is not None:
            return made
        entry = parsed.contexts.get(cluster.context)
        if entry is None:
            return None
        made = parsed.configs[cluster.context] = ContextConfig(
            source=cluster.kubeconfig_secret_ref,
            context=cluster.context,
            version=parsed.version,
            config=entry[1],
            base_path=os.path.dirname(os.path.abspath(cluster.kubeconfig_secret_ref)),
        )
        return made


def _absolute(path: Path | None) -> Path | None:
    return None if path is None else Path(os.path.abspath(path.expanduser()))


def _os_reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else type(exc).__name__
